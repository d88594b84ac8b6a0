// Extern calls that may write an operand in place instead of into a copy of it: a custom op that
// mutates its input reaches coil functionalized (auto_functionalized_v2, run through its eager
// implementation as an opaque call: python/coil/opaque_calls.py), and that implementation
// copies every tensor the op writes before calling it. The importer lists the call's arguments
// that the op writes in its kwarg "_coil_may_write"; this pass grants each one where the copy
// protects nothing: the operand is a buffer coil computes (not a graph input, not a library or
// fallback result that may share memory with something else), passed whole, read by no kernel
// and no other call, and not a graph output. The call then writes it where it lies
// (ExternCall::mutates: it is never reused, and the call's result, an alias of it, neither) and
// the kwarg becomes "_coil_write_in_place", the granted positions, which the opaque call reads.
//
// Tests: tests/python/test_higher_order.py (custom ops), tests/cpp/sched/in_place_calls_test.cpp.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

constexpr const char* kMayWrite = "_coil_may_write";
constexpr const char* kWriteInPlace = "_coil_write_in_place";

bool whole_buffer(const ir::Program& prog, const ir::TensorRef& ref) {
  const ir::Buffer& b = prog.buffer(ref.buffer);
  return ref.sizes == b.layout.sizes && ref.strides == b.layout.strides &&
         ref.offset == b.layout.offset;
}

}  // namespace

void grant_in_place_writes(ir::Program& prog) {
  // Who reads each buffer: kernels (and a scatter's base, which the scatter takes over), calls
  // (one count per operand), the graph's outputs.
  std::set<std::string> kernel_read;
  for (const ir::Buffer& b : prog.buffers) {
    if (!b.is_generated()) continue;
    for (const Access& a : buffer_reads(b)) kernel_read.insert(a.buffer);
    if (b.is_scatter()) kernel_read.insert(b.base);
  }
  std::map<std::string, int> call_reads;
  for (const ir::ExternCall& e : prog.externs)
    for (const ir::TensorRef& t : e.tensors) ++call_reads[t.buffer];
  std::set<std::string> returned;
  for (const ir::GraphOutput& o : prog.outputs)
    if (o.is_tensor()) returned.insert(o.ref.buffer);

  for (ir::ExternCall& e : prog.externs) {
    for (auto& [key, arg] : e.kwargs) {
      if (key != kMayWrite) continue;
      std::vector<graph::Arg> granted;
      for (const graph::Arg& position : arg.list) {
        int64_t p = position.i;
        if (position.kind != graph::Arg::Kind::Int || p < 0 ||
            p >= static_cast<int64_t>(e.args.size()))
          continue;
        const graph::Arg& operand = e.args[p];
        if (operand.kind != graph::Arg::Kind::Node || operand.node < 0) continue;
        const ir::TensorRef& ref = e.tensors.at(operand.node);
        const ir::Buffer& b = prog.buffer(ref.buffer);
        if (b.kind != ir::Buffer::Kind::Computed || !whole_buffer(prog, ref) ||
            kernel_read.count(b.name) || call_reads[b.name] != 1 || returned.count(b.name))
          continue;
        granted.push_back(graph::Arg::integer(p));
        e.mutates.push_back(b.name);
        e.decision += (e.decision.empty() ? "" : "; ") + std::string("writes ") + b.name +
                      " in place (computed for this call alone)";
      }
      key = kWriteInPlace;
      arg = graph::Arg::list_of(std::move(granted));
    }
  }
}

}  // namespace coil::sched
