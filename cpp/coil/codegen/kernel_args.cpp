#include "coil/codegen/kernel_args.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace coil::codegen {

namespace {

bool stored(const sched::Schedule& s, const std::string& buf) {
  auto it = s.buffers.find(buf);
  return it == s.buffers.end() || it->second.stored;
}

const sched::Member* member_of(const ir::Program& prog, const sched::Kernel& k,
                               const std::string& buf) {
  for (const sched::Member& m : k.members) {
    if (prog.buffers[m.buffer].name == buf) return &m;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> size_args_used(const ir::Program& prog, const std::string& body) {
  if (prog.size_symbols.empty()) return {};
  std::set<std::string> words;
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < body.size();) {
    if (!word_char(body[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < body.size() && word_char(body[j])) ++j;
    if (!std::isdigit(static_cast<unsigned char>(body[i]))) words.insert(body.substr(i, j - i));
    i = j;
  }
  std::vector<std::string> used;
  for (const graph::SizeSymbol& s : prog.size_symbols) {
    if (words.count(s.name)) used.push_back(s.name);
  }
  return used;
}

bool uses_indirect_indices(const ir::Program& prog, const sched::Kernel& k) {
  for (const sched::Member& m : k.members) {
    const ir::Buffer& b = prog.buffers[m.buffer];
    std::vector<ir::Value> roots = {b.body};
    if (b.is_scatter()) roots.push_back(b.target);
    for (const ir::Value& v : ir::topo_order(roots)) {
      if (!ir::indirect_operands(v).empty()) return true;
    }
  }
  return false;
}

KernelArgPlan plan_kernel_args(const ir::Program& prog, const sched::Schedule& s,
                               const sched::Kernel& k) {
  std::vector<std::string> reads, writes;
  for (const sched::Member& m : k.members) {
    const ir::Buffer& b = prog.buffers[m.buffer];
    for (const sched::Access& a : sched::buffer_reads(b)) {
      if (a.whole) continue;  // a scatter's copy: the scatter writes over it
      const sched::Member* producer = member_of(prog, k, a.buffer);
      bool per_point = !producer || !producer->inner || prog.buffer(a.buffer).is_reduction();
      if (producer && !(!per_point && producer->stage != m.stage && stored(s, a.buffer))) continue;
      if (std::find(reads.begin(), reads.end(), a.buffer) == reads.end()) reads.push_back(a.buffer);
    }
    if (stored(s, b.name)) writes.push_back(b.name);
  }
  // A buffer stored in place over one this kernel reads: one pointer serves both.
  std::map<std::string, std::string> in_place;  // read buffer -> written buffer
  for (const std::string& w : writes) {
    auto it = s.buffers.find(w);
    if (it != s.buffers.end() && it->second.in_place) in_place[it->second.reuses] = w;
  }
  KernelArgPlan plan;
  int in = 0, out = 0;
  for (const std::string& r : reads) {
    if (std::find(writes.begin(), writes.end(), r) != writes.end() || in_place.count(r)) continue;
    plan.args.push_back({r, false});
    plan.pointer[r] = "in_ptr" + std::to_string(in++);
  }
  for (const std::string& w : writes) {
    plan.args.push_back({w, true});
    plan.pointer[w] = "out_ptr" + std::to_string(out++);
  }
  for (const auto& [r, w] : in_place) plan.pointer[r] = plan.pointer[w];
  if (uses_indirect_indices(prog, k)) {
    plan.args.push_back({kIndexErrorArg, true});
    plan.pointer[kIndexErrorArg] = kIndexErrorArg;
  }
  return plan;
}

}  // namespace coil::codegen
