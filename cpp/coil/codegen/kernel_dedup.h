// Kernels with the same code: a transformer's layers lower to the same kernels over and over
// (GPT-2's twelve blocks give twelve copies of each), which differ only in their names, the
// buffer names in their comments and locals, and their header comments. Each distinct kernel
// is compiled (and, on Triton, tuned) once and launched at every site that needs it.
#pragma once

#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"

namespace coil::codegen {

// The code of a kernel with its names taken out: comments dropped, its own name replaced, and
// buffer names (buf<N>, also inside v_buf<N>, acc_buf<N>) renumbered in order of first use.
// Two kernels with equal texts compute the same function of their arguments. The text ends
// with the arguments' dtypes and which are written (Triton's code does not spell the pointer
// types) and, for Triton, the candidate launch configs (a shared launcher tunes among them).
std::string normalized_kernel_text(const ir::Program& prog, const KernelSource& k);

// Marks each kernel whose normalized text equals an earlier kernel's: same_code_as names that
// kernel, and a decision line saying so is added to its header comment. Returns how many
// kernels were marked.
int mark_identical_kernels(const ir::Program& prog, std::vector<KernelSource>& kernels);

}  // namespace coil::codegen
