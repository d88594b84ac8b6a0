// Launch planning for Triton kernels: how a scheduled kernel is laid out over programs and
// blocks (flat pointwise, 2-D tiles, persistent or looped reductions), its candidate configs,
// and which block masks some candidate needs. Used by the renderer (triton_kernel.cpp), which
// writes the plan's decisions into each kernel's header comment.
//
// Tests: tests/python/test_triton_interpret.py, tests/gpu/.
#pragma once

#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

struct LaunchPlan {
  KernelLaunch launch;
  bool persistent = false;
  bool tiled = false;    // a pointwise kernel in 2-D tiles [YBLOCK, XBLOCK]
  bool xmask = false;    // some config's XBLOCK does not divide xnumel
  bool rmask = false;    // likewise for RBLOCK and rnumel
  bool ymask = false;    // likewise for YBLOCK and ynumel
  bool dynamic = false;  // some size is symbolic (configs chosen for the hint)
  std::vector<std::string> decisions;
};

// Symbolic sizes are planned for their hints (see the graph's size symbols), with masks and loops
// that keep every other value correct.
LaunchPlan plan_launch(const sched::Kernel& k);
// The value of a size for heuristics: itself when static, else its hint.
int64_t size_hint_of(const sym::Expr& e);

int64_t next_pow2(int64_t n);
int64_t static_size(const sym::Expr& e, const char* what);
// A kernel with an inner stage runs as a reduction, even over no r dims (argmax of a 0-d tensor).
bool is_reduction_kernel(const sched::Kernel& k);
sym::Expr product(const std::vector<sym::Expr>& v, size_t from = 0);

}  // namespace coil::codegen
