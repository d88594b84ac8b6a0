// The arguments of a generated kernel, shared by every renderer: which buffers it reads from
// memory (in_ptrN) and stores (out_ptrN), in a fixed order, and the pointer each buffer's loads use
// (a buffer stored in place over another shares that one's pointer). A kernel that uses an
// indirect index takes one more argument last, `index_error` (int64[3]: flag, index, size): where
// it reports an index out of bounds, for the wrapper to raise.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

inline constexpr const char* kIndexErrorArg = "index_error";

// Whether any value or store of the kernel uses an indirect index (and so checks it).
bool uses_indirect_indices(const ir::Program& prog, const sched::Kernel& k);

struct KernelArgPlan {
  std::vector<KernelArg> args;                 // launch order: reads, then writes
  std::map<std::string, std::string> pointer;  // buffer -> pointer name in the kernel
};

// The size symbols (Program::size_symbols, in that order) a rendered kernel body names: the
// kernel takes each as an int64 argument after its pointers. Found by scanning the body's
// identifiers, so it is exactly what the code reads however the expression got there.
std::vector<std::string> size_args_used(const ir::Program& prog, const std::string& body);

// A value made in the kernel is read from memory only when it is an inner (per x*r point) value
// stored in an earlier stage; reduction results and outer values stay in registers.
KernelArgPlan plan_kernel_args(const ir::Program& prog, const sched::Schedule& s,
                               const sched::Kernel& k);

}  // namespace coil::codegen
