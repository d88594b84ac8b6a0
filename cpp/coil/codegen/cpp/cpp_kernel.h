// C++ kernel codegen: renders one scheduled kernel as an `extern "C"` C++ function.
//
// Signature of every kernel: void name(void* const* ptrs, const int64_t* ints). ptrs holds the
// data pointers (tensor.data_ptr(), so indices are relative to each tensor's storage offset) of
// the buffers the kernel reads and stores, in the order of KernelSource::args. The outer (x)
// loops run in parallel under OpenMP when there is enough work; reductions accumulate in the
// opmath type (float32 for bfloat16/float16) inside the r loops; the innermost loop walks memory
// contiguously where the loop order allows, so the compiler can vectorize it.
//
// Tests: tests/cpp/codegen/ (generated text), tests/python (numerics).
#pragma once

#include <string>
#include <vector>

#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

struct KernelArg {
  std::string buffer;
  bool written = false;
};

// One launch configuration of a Triton kernel (block sizes and warps).
struct LaunchConfig {
  int64_t xblock = 1;
  int64_t rblock = 0;  // 0: no RBLOCK parameter (pointwise kernels)
  int num_warps = 4;
  int64_t yblock = 0;  // > 0: a 2-D tiled pointwise kernel's YBLOCK (rows of a tile)
};

// How the wrapper launches a kernel. Empty for C++ kernels (called once, loops inside).
struct KernelLaunch {
  // Triton: "pointwise", "tiled" (2-D tiles of a pointwise kernel), "reduction" (looped over r),
  // "persistent_reduction"
  std::string kind;
  sym::Expr xnumel = 1;
  sym::Expr rnumel = 1;  // 1 for pointwise kernels
  sym::Expr ynumel = 1;  // tiled kernels: the rows (outer loops, flattened); xnumel is the last
  // Candidates, benchmarked on the first call on a GPU; [0] is the default.
  std::vector<LaunchConfig> configs;
};

struct KernelSource {
  std::string name;
  std::string code;  // the function (header comment included), without the prelude
  std::vector<KernelArg> args;
  // Size symbols the kernel reads, passed after the pointers (C++: ints[i]; Triton: arguments).
  std::vector<std::string> size_args;
  std::vector<std::string> origins;  // graph nodes, sorted
  KernelLaunch launch;
  // C++ kernels: calls ATen's scalar special functions, so the kernel file needs prelude.h's
  // kAtenMathPrelude and torch's headers to build.
  bool aten_math = false;
  // C++ kernels: an innermost loop is in vector form (at::vec), so the kernel file needs
  // prelude.h's kVecPrelude and torch's headers and library to build.
  bool vectorized = false;
  // C++ kernels: scalar code computes functions whose bits depend on their implementation (exp,
  // tanh, pow, ...) through at::vec on one lane, so that every kernel computes them with the
  // same code (kVecPrelude, torch's headers and library, as for vectorized kernels).
  bool vec_math = false;
  // Set when an earlier kernel of the graph has the same code (kernel_dedup.h): this kernel's
  // code is not emitted again, and its launch sites call that kernel.
  std::string same_code_as;
};

// A descriptive, deterministic kernel name: <prefix>_fused_<ops>_<n>, ops from the origins.
std::string kernel_name(const ir::Program& prog, const sched::Kernel& k, const std::string& prefix,
                        int n);

// vectorize: "on": innermost loops in vector form (at::vec, cpp_vec.h) where every value varying
// along them has one; "auto": the same in kernels with at least kVectorMinWork elements of work
// (symbolic sizes: at their hints) and for innermost loops of 8 or more iterations, since a vector
// kernel file takes about 0.3 s longer to build and small kernels gain nothing from it ("on"
// vectorizes short loops too); "off": every loop scalar, left to the compiler (omp simd).
constexpr int64_t kVectorMinWork = 4096;
KernelSource render_cpp_kernel(const ir::Program& prog, const sched::Schedule& s,
                               const sched::Kernel& k, const std::string& name,
                               const std::string& vectorize = "on");

}  // namespace coil::codegen
