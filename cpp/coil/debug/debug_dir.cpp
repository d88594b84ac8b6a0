#include "coil/debug/debug_dir.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "coil/graph/json.h"

namespace coil::debug {

void write_debug_dir(const std::string& dir, const std::map<std::string, std::string>& artifacts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("coil: cannot create debug folder " + dir + ": " + ec.message());
  for (const auto& [name, text] : artifacts) {
    std::filesystem::path p = std::filesystem::path(dir) / name;
    std::ofstream f(p, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error("coil: cannot write " + p.string());
  }
}

std::string provenance_json(const ir::Program& prog,
                            const std::vector<codegen::KernelSource>& kernels) {
  graph::Json root = graph::Json::object();
  graph::Json ks = graph::Json::object();
  for (const codegen::KernelSource& k : kernels) {
    graph::Json entry = graph::Json::object();
    graph::Json nodes = graph::Json::array(), ops = graph::Json::array(),
                lines = graph::Json::array();
    for (const std::string& o : k.origins) {
      nodes.push_back(o);
      auto t = prog.node_targets.find(o);
      ops.push_back(t == prog.node_targets.end() ? std::string() : t->second);
      auto st = prog.stack_traces.find(o);
      lines.push_back(st == prog.stack_traces.end() ? std::string() : st->second);
    }
    entry.set("nodes", nodes);
    entry.set("ops", ops);
    entry.set("source_lines", lines);
    ks.set(k.name, entry);
  }
  root.set("kernels", ks);
  return graph::dump_json(root, 2) + "\n";
}

}  // namespace coil::debug
