// Tests for sched/split_reduction.cpp: which reductions are split for GPUs, how the partial and
// final passes are formed, and that the CPU schedule is unchanged.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"
#include "coil/sched/schedule.h"

namespace coil::sched {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::ints;

ir::Program full_sum(std::vector<Expr> shape, std::vector<int64_t> dims, std::vector<Expr> out) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous(shape));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints(dims)}, contiguous(out));
  return lower::lower_graph(b.finish({s}));
}

TEST(SplitReduction, FullSumOfALargeTensorRunsInTwoPasses) {
  ir::Program prog = full_sum({1024, 1024}, {0, 1}, {});
  ScheduleOptions gpu;
  gpu.gpu = true;
  Schedule s = schedule_program(prog, gpu);
  ASSERT_EQ(s.kernels.size(), 2u);
  const ir::Buffer& partial = prog.buffer("buf0_partial");
  // 1M elements, 1 output row: 512 partial rows of 2048 elements (512 divides 2^20).
  EXPECT_EQ(partial.ranges, (std::vector<Expr>{512}));
  EXPECT_EQ(partial.reduction_ranges, (std::vector<Expr>{2048}));
  const ir::Buffer& final_pass = prog.buffer("buf0");
  EXPECT_EQ(final_pass.reduction_ranges, (std::vector<Expr>{512}));
  EXPECT_EQ(ir::loaded_buffers(final_pass.body), (std::vector<std::string>{"buf0_partial"}));
  // The partial pass reads the input at the flat position s * 2048 + c.
  EXPECT_NE(ir::body_to_text({partial.body}).find("u0 + 2048*v0"), std::string::npos)
      << ir::body_to_text({partial.body});
  ASSERT_FALSE(s.kernels[0].decisions.empty());
  EXPECT_EQ(s.kernels[0].decisions[0].rfind("split reduction: 512 partial sums", 0), 0u)
      << s.kernels[0].decisions[0];
}

TEST(SplitReduction, SplitIsADivisorOfTheRow) {
  // rnumel = 3 * 5 * 4099 (4099 is prime): the largest divisor <= 30 (61455 / 2048) is 15.
  ir::Program prog = full_sum({3 * 5 * 4099}, {0}, {});
  ScheduleOptions gpu;
  gpu.gpu = true;
  schedule_program(prog, gpu);
  EXPECT_EQ(prog.buffer("buf0_partial").ranges, (std::vector<Expr>{15}));
  EXPECT_EQ(prog.buffer("buf0_partial").reduction_ranges, (std::vector<Expr>{4099}));
}

TEST(SplitReduction, ManyRowsShortRowsAndTheCpuAreLeftAlone) {
  ScheduleOptions gpu;
  gpu.gpu = true;
  {
    ir::Program prog = full_sum({4096, 4096}, {1}, {4096});  // many rows
    schedule_program(prog, gpu);
    EXPECT_EQ(prog.buffer_index("buf0_partial"), -1);
  }
  {
    ir::Program prog = full_sum({2, 3000}, {1}, {2});  // rows too short to split
    schedule_program(prog, gpu);
    EXPECT_EQ(prog.buffer_index("buf0_partial"), -1);
  }
  {
    ir::Program prog = full_sum({1024, 1024}, {0, 1}, {});
    schedule_program(prog);  // CPU: threads split inside the kernel
    EXPECT_EQ(prog.buffer_index("buf0_partial"), -1);
  }
}

}  // namespace
}  // namespace coil::sched
