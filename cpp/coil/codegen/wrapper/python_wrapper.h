// The wrapper: one readable Python module per compiled graph (output_code.py).
//
// It embeds the kernel source, loads it through coil's build cache, and defines call(args): take
// the inputs (boxed: the list is cleared so inputs can be freed early), allocate buffers, launch
// kernels, call extern ops through torch, free or reuse buffers after their last use, and return
// the outputs. Run as a script, it times call() on random inputs of the graph's shapes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

// backend "cpp": kernel_file_source is C++, built through the build cache and called as a library.
// backend "triton": kernel_file_source is Python (the @triton.jit functions), embedded as is; each
// kernel is launched through coil.triton_launcher, which picks the launch config.
std::string render_python_wrapper(const ir::Program& prog, const sched::Schedule& s,
                                  const std::vector<KernelSource>& kernels,
                                  const std::string& kernel_file_source, const std::string& title,
                                  const std::string& backend = "cpp");

// output_code.py of a graph whose wrapper is C++ (cpp_wrapper.h, in kernel_file_source): it
// builds and loads the library and binds call(args) to its coil_graph_run.
std::string render_python_bridge(const ir::Program& prog, const std::vector<KernelSource>& kernels,
                                 const std::string& kernel_file_source, const std::string& title);

// The buffers a wrapper releases after each step of the schedule (Python `del`, C++ reset()):
// computed buffers after their last reader unless another takes their storage, and inputs after
// theirs.
std::map<int, std::vector<std::string>> releases_by_step(const sched::Schedule& s);

// Whether a CPU buffer of this layout is large enough (4 MiB) to be allocated asking for 2 MiB
// pages (runtime/memory.h); symbolic sizes decide by their hints.
bool large_cpu_buffer(const ir::Layout& layout);

// A graph::Arg as Python text (extern call arguments); tensors via `tensor_text`, and Python
// numbers computed at run time (negative node indices, see ir::ExternCall) via `scalar_text`.
// The lines that bind each size symbol at call time (`s0 = arg0_1.size(1)`), from a SymInt input
// that is the symbol or a tensor input's size or stride. Throws when a symbol has no such source.
std::string bind_size_symbols(const ir::Program& prog);

std::string python_arg(const graph::Arg& a, const std::vector<std::string>& tensor_text,
                       const std::vector<std::string>& scalar_text = {});

}  // namespace coil::codegen
