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

// The plan of the first kernel; `kernels`: how many the graph must make (a split reduction
// makes two: the partial pass first).
LaunchPlan plan_for(const graph::Graph& g, size_t kernels = 1) {
  lower::LowerOptions lopts;
  lopts.triton = true;
  ir::Program prog = lower::lower_graph(g, lopts);
  sched::ScheduleOptions sopts;
  sopts.gpu = true;
  sched::Schedule s = sched::schedule_program(prog, sopts);
  EXPECT_EQ(s.kernels.size(), kernels);
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

// sum over dim 0 of [r, x]: reads strided along r, contiguous along x (a column reduction).
graph::Graph column_sum(int64_t r, int64_t x) {
  GraphBuilder b;
  Arg a = b.input("arg0_1", contiguous({r, x}));
  return b.finish({b.call("sum", "aten.sum.dim_IntList", {a, test::ints({0}), Arg::boolean(false)},
                          contiguous({x}))});
}

// Found on MobileNetV3 (H200): a squeeze-excite mean over a 28x28 NHWC map ran persistent with one
// column per block, each load its own cache line (0.34 ms). Columns stay persistent only while a
// block holds 32 of them; longer ones loop with wide column blocks.
TEST(TritonLaunch, ColumnReductionsKeepWideBlocks) {
  LaunchPlan shortcol = plan_for(column_sum(100, 4096));
  EXPECT_TRUE(shortcol.persistent);
  for (const LaunchConfig& c : shortcol.launch.configs) EXPECT_GE(c.xblock, 32);
  // 4096 columns are 128 programs of 32: the 784 rows split into 4 partial column sums of 196
  // (a [4, 4096] partial), which still loop with wide column blocks.
  LaunchPlan longcol = plan_for(column_sum(784, 4096), 2);
  EXPECT_FALSE(longcol.persistent) << longcol.decisions.back();
  EXPECT_TRUE(mentions(longcol, "rnumel=196, columns: reads contiguous along x"))
      << longcol.decisions.back();
  for (const LaunchConfig& c : longcol.launch.configs) EXPECT_GE(c.xblock, 16);
  // Enough columns for the machine: one pass.
  LaunchPlan wide = plan_for(column_sum(784, 16384));
  EXPECT_FALSE(mentions(wide, "split reduction"));
  // Rows keep their configs (8 rows, then 1 row per block).
  LaunchPlan rows = plan_for(softmax_of({2048, 256}));
  ASSERT_EQ(rows.launch.configs.size(), 2u);
  EXPECT_EQ(rows.launch.configs[0].xblock, 8);
}

// Dynamic shapes: plans are made for the hints and hold for every size. A symbolic row length
// cannot run persistent (RBLOCK must cover the row): it loops, with blocks sized for the hint's
// row; every symbolic size is masked.
TEST(TritonLaunch, SymbolicSizesArePlannedForTheirHints) {
  Expr s0 = Expr::symbol("s0"), s1 = Expr::symbol("s1");
  sym::RangeEnv sizes;
  sizes.set_range(s0, {2, sym::Range::kPosInf});
  sizes.set_hint(s0, 4096);
  sizes.set_range(s1, {2, sym::Range::kPosInf});
  sizes.set_hint(s1, 100);
  sym::SizeSymbolScope scope(sizes);
  auto dynamic = [](graph::Graph g) {
    g.add_symbol({"s0", {2, sym::Range::kPosInf}, 4096});
    g.add_symbol({"s1", {2, sym::Range::kPosInf}, 100});
    return g;
  };
  LaunchPlan rows = plan_for(dynamic(softmax_of({s0, s1})));
  EXPECT_FALSE(rows.persistent);
  EXPECT_EQ(rows.launch.kind, "reduction");
  EXPECT_TRUE(rows.dynamic && rows.xmask && rows.rmask);
  for (const LaunchConfig& c : rows.launch.configs) EXPECT_EQ(c.rblock, 128);  // the hint, 100
  EXPECT_TRUE(mentions(rows, "is symbolic: a loop serves every row length"));
  // A static row over symbolic rows stays persistent.
  LaunchPlan fixed = plan_for(dynamic(softmax_of({s0, 256})));
  EXPECT_TRUE(fixed.persistent);
  EXPECT_TRUE(fixed.xmask);
  // Pointwise: blocks for the hint (4096 * 100 elements), masked.
  LaunchPlan flat = plan_for(dynamic(exp_of({s0, s1})));
  EXPECT_EQ(flat.launch.kind, "pointwise");
  EXPECT_TRUE(flat.xmask);
  EXPECT_GT(flat.launch.configs.size(), 1u);  // tuned: the hint is large
}

}  // namespace
}  // namespace coil::codegen
