#include "coil/codegen/provenance.h"

#include <set>
#include <sstream>

namespace coil::codegen {

std::string user_source_line(const std::string& trace) {
  std::istringstream in(trace);
  std::string line, frame, code;
  bool want_code = false;
  while (std::getline(in, line)) {
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    std::string text = line.substr(start);
    if (text.rfind("File \"", 0) == 0) {
      // File "path", line N, in fn
      size_t q = text.find('"', 6);
      size_t ln = text.find(", line ", q);
      size_t end = text.find(',', ln + 7);
      frame = q == std::string::npos || ln == std::string::npos
                  ? text
                  : text.substr(6, q - 6) + ":" +
                        text.substr(ln + 7,
                                    end == std::string::npos ? std::string::npos : end - ln - 7);
      code.clear();
      want_code = true;
      continue;
    }
    // The line after a frame is its code; Python 3.11+ adds a line of carets under it.
    if (want_code && text.find_first_not_of("^~ ") != std::string::npos) {
      code = text;
      want_code = false;
    }
  }
  if (frame.empty()) return "";
  return code.empty() ? frame : frame + ": " + code;
}

std::vector<std::string> provenance_lines(const ir::Program& prog, const sched::Schedule& s,
                                          const sched::Kernel& k) {
  std::set<std::string> origins;
  for (const sched::Member& m : k.members) {
    origins.insert(prog.buffers[m.buffer].origins.begin(), prog.buffers[m.buffer].origins.end());
  }
  std::vector<std::string> out;
  std::string nodes = "graph nodes:";
  for (const auto& o : origins) {
    auto t = prog.node_targets.find(o);
    nodes += " " + o + (t != prog.node_targets.end() ? " (" + t->second + ")" : "");
  }
  out.push_back(nodes);
  std::set<std::string> lines;
  for (const auto& o : origins) {
    auto st = prog.stack_traces.find(o);
    if (st == prog.stack_traces.end()) continue;
    std::string where = user_source_line(st->second);
    if (!where.empty()) lines.insert(where);
  }
  for (const auto& l : lines) out.push_back("source: " + l);
  std::string buffers = "buffers:";
  for (const sched::Member& m : k.members) {
    const ir::Buffer& b = prog.buffers[m.buffer];
    auto plan = s.buffers.find(b.name);
    bool stored = plan == s.buffers.end() || plan->second.stored;
    buffers += " " + b.name + (stored ? "" : "(local)");
  }
  out.push_back(buffers);
  // The graph's layout choice shapes every kernel over 4-D tensors (Program::layout_decision).
  bool four_d = false;
  for (const sched::Member& m : k.members)
    four_d |= prog.buffers[m.buffer].layout.sizes.size() == 4;
  if (four_d && !prog.layout_decision.empty()) out.push_back("layout: " + prog.layout_decision);
  return out;
}

}  // namespace coil::codegen
