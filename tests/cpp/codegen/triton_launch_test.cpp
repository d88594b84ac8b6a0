// Tests for codegen/triton/triton_launch.h: how many candidate configs a Triton kernel gets.
// Kernels too small for a config to pay back its compile and benchmark keep one.
#include "coil/codegen/triton/triton_launch.h"

#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"

namespace coil::codegen {
namespace {

using graph::Arg;
using sym::Expr;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;

LaunchPlan plan_for(const graph::Graph& g) {
  lower::LowerOptions lopts;
  lopts.triton = true;
  ir::Program prog = lower::lower_graph(g, lopts);
  sched::ScheduleOptions sopts;
  sopts.gpu = true;
  sched::Schedule s = sched::schedule_program(prog, sopts);
  EXPECT_EQ(s.kernels.size(), 1u);
  return plan_launch(s.kernels.at(0));
}

graph::Graph exp_of(std::vector<Expr> sizes) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous(sizes));
  return b.finish({b.call("exp", "aten.exp.default", {x}, contiguous(sizes))});
}

graph::Graph softmax_of(std::vector<Expr> sizes) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous(sizes));
  Arg y = b.call("_softmax", "aten._softmax.default", {x, iarg(-1), Arg::boolean(false)},
                 contiguous(sizes));
  return b.finish({y});
}

bool mentions(const LaunchPlan& p, const std::string& part) {
  for (const std::string& d : p.decisions) {
    if (d.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(TritonLaunch, SmallPointwiseKernelsKeepOneConfig) {
  LaunchPlan p = plan_for(exp_of({64, 64}));
  ASSERT_EQ(p.launch.configs.size(), 1u);
  EXPECT_EQ(p.launch.configs[0].xblock, 1024);  // the first candidate, capped at 4096 elements
  EXPECT_TRUE(mentions(p, "one config, not tuned: 4096 elements")) << p.decisions.back();
}

TEST(TritonLaunch, LargePointwiseKernelsAreTuned) {
  LaunchPlan p = plan_for(exp_of({1024, 1024}));
  EXPECT_EQ(p.launch.configs.size(), 3u);
  EXPECT_FALSE(mentions(p, "not tuned"));
}

TEST(TritonLaunch, TheLimitCountsReductionElementsToo) {
  // Rows of 256 (persistent; candidates of 8 rows and of 1 row per block): 64 rows are 16384
  // elements and keep one; 2048 rows are 524288 and are tuned.
  LaunchPlan small = plan_for(softmax_of({64, 256}));
  EXPECT_TRUE(small.persistent);
  EXPECT_EQ(small.launch.configs.size(), 1u);
  LaunchPlan large = plan_for(softmax_of({2048, 256}));
  EXPECT_TRUE(large.persistent);
  EXPECT_EQ(large.launch.configs.size(), 2u);
}

TEST(TritonLaunch, OneConfigNeedsOnlyItsOwnMasks) {
  // 3000 = 2 * 1024 + 952: the one block size left does not divide it, so x is masked; 4096
  // elements in blocks of 1024 need no mask at all.
  EXPECT_TRUE(plan_for(exp_of({3, 1000})).xmask);
  EXPECT_FALSE(plan_for(exp_of({64, 64})).xmask);
}

}  // namespace
}  // namespace coil::codegen
