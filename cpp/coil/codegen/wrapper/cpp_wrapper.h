// The wrapper as C++: the program that runs a graph, built into the graph's kernel library.
//
// It renders the same plan as the Python wrapper (python_wrapper.h: the schedule's steps, its
// buffer plan, the graph's outputs) as one translation unit that defines the entry points of
// runtime/graph_abi.h: buffers come from coil's ATen shim (runtime/aten_shim.h), C++ kernels
// are called directly, ATen ops go through the dispatcher boxed by the shim (their arguments as
// the schema types graph::Node::c_args names), buffers are released after their last
// use, and size symbols are bound from the inputs. One call from Python (or from a C++ program
// holding an AOT package) runs the whole graph: no Python per kernel.
//
// Not every graph can be wrapped in C++ yet: cpp_wrapper_blocker says why not, and the graph
// keeps its Python wrapper.
#pragma once

#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

// "" when render_cpp_wrapper can wrap the graph; otherwise what stops it ("extern call
// aten.foo.default: an argument of a type the shim cannot pass", "Triton kernels", ...).
std::string cpp_wrapper_blocker(const ir::Program& prog, const std::string& backend);

// The wrapper's translation unit: declarations of the kernels it calls, then the entry points.
// checks: coil_graph_run checks its inputs (dtype, device, rank, static sizes, size symbols'
// ranges) before running, as an AOT package's callers need.
std::string render_cpp_wrapper(const ir::Program& prog, const sched::Schedule& s,
                               const std::vector<KernelSource>& kernels, bool checks);

// The signature coil_graph_signature() returns (JSON; runtime/graph_abi.h).
std::string cpp_wrapper_signature(const ir::Program& prog, bool checks);

}  // namespace coil::codegen
