// Triton kernel codegen: renders one scheduled kernel as a @triton.jit function.
//
// Takes the same kernel plan as the C++ renderer (sched::Kernel: x/r sizes, members with their
// variable maps, stages; Schedule::buffers for what is stored) and guarantees the same semantics:
// loads relative to each tensor's storage offset, masked loads yield 0, reductions accumulate in
// the body's dtype (float32 for bfloat16/float16), max/min propagate NaN, argmax/argmin keep the
// first index. What it decides itself, and writes into the kernel's header comment:
//   * pointwise kernels flatten the x sizes into one xindex (blocks of XBLOCK) and recover x0..xn
//     with // and %; index expressions whose trailing variables are contiguous use xindex directly;
//   * reductions run one x point per row of an [XBLOCK, RBLOCK] block: persistent (the whole row in
//     one block) when rnumel <= kPersistentMaxRnumel, else a loop over r with block accumulators;
//     each inner stage of the plan is one loop (softmax: max loop, sum loop, normalize loop);
//   * int32 index arithmetic when every index provably fits, else int64;
//   * masks only where a block can run past the end for some candidate config;
//   * the candidate launch configs (KernelSource::launch), tuned at run time on GPUs.
// It does not do split reductions, 2-D pointwise tiling, or dynamic shapes (symbolic sizes throw).
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

KernelSource render_triton_kernel(const ir::Program& prog, const sched::Schedule& s,
                                  const sched::Kernel& k, const std::string& name);

}  // namespace coil::codegen
