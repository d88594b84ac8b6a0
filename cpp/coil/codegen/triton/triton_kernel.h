// Triton kernel codegen: renders one scheduled kernel as a @triton.jit function.
//
// Takes the same kernel plan as the C++ renderer (sched::Kernel: x/r sizes, members with their
// variable maps, stages; Schedule::buffers for what is stored) and guarantees the same semantics:
// loads relative to each tensor's storage offset, masked loads yield 0, reductions accumulate in
// the body's dtype (float32 for bfloat16/float16), max/min propagate NaN, argmax/argmin keep the
// first index, indirect indices are bounds-checked. The launch layout (flat pointwise, 2-D tiles
// for transposes, persistent or looped reductions) and candidate configs come from
// triton_launch.h; this file renders the body: index expressions (int32 when every index
// provably fits, else int64; trailing contiguous variables merged into the flat index), values,
// stages (one loop over r per inner stage, or the whole row in registers), stores and scatters,
// and the header comment with every decision. Split reductions are an IR rewrite before fusion
// (sched/split_reduction.cpp). Symbolic sizes are not supported yet (they throw).
//
// Tests: tests/python/test_triton_interpret.py (TRITON_INTERPRET=1 on CPU), tests/gpu/.
#pragma once

#include <string>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/program.h"
#include "coil/sched/schedule.h"

namespace coil::codegen {

// "triton_poi", "triton_red" or "triton_per": the kernel_name prefix for this kernel's strategy.
std::string triton_kernel_prefix(const sched::Kernel& k);

// A kernel of CPU tensors is rendered for Triton's interpreter (its forms of a few things the
// interpreter does otherwise than a GPU; see Emitter::interpreted_), unless gpu_form: then it is
// rendered as a GPU gets it, for the GPU-target compile check (python/coil/triton_check.py).
KernelSource render_triton_kernel(const ir::Program& prog, const sched::Schedule& s,
                                  const sched::Kernel& k, const std::string& name,
                                  bool gpu_form = false);

}  // namespace coil::codegen
