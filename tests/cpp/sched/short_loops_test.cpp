// Tests for sched/short_loops.cpp: CPU pointwise kernels whose innermost loop is shorter than a
// vector merge the loops every index sees as one, unroll short trailing loops inside a longer
// vector loop (Kernel::unrolled), and move short loops of smaller store strides inside it.
// Numerics: tests/python/test_cpu_short_loops.py.
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
using test::strided;

// The one kernel of g, scheduled for the CPU (or a GPU).
Kernel only_kernel(const graph::Graph& g, ir::Program& prog, bool gpu = false) {
  prog = lower::lower_graph(g);
  ScheduleOptions opts;
  opts.gpu = gpu;
  Schedule s = schedule_program(prog, opts);
  EXPECT_EQ(s.kernels.size(), 1u);
  return s.kernels.at(0);
}

std::string var_text(const ir::Program& prog, const Kernel& k) {
  std::string out;
  for (const Member& m : k.members) {
    std::vector<std::pair<std::string, Expr>> vars;
    for (const auto& [key, v] : m.var_map) vars.push_back({key.str(), v});
    std::sort(vars.begin(), vars.end());
    out += prog.buffers[m.buffer].name + ":";
    for (const auto& [key, v] : vars) out += " " + key + "=" + v.str();
  }
  return out;
}

graph::Graph exp_of(std::vector<Expr> sizes) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous(sizes));
  return b.finish({b.call("exp", "aten.exp.default", {x}, contiguous(sizes))});
}

TEST(ShortLoops, ContiguousLoopsMergeIntoOne) {
  ir::Program prog;
  Kernel k = only_kernel(exp_of({300, 7, 3}), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{6300}));
  EXPECT_EQ(k.unrolled, 0);
  EXPECT_EQ(var_text(prog, k),
            "buf0: v0=FloorDiv(x0, 21) v1=FloorDiv(Mod(x0, 21), 3) v2=Mod(x0, 3)");
  EXPECT_EQ(k.decisions.back(),
            "short loops: [300, 7, 3] merged into [6300] (every index sees the merged loops as "
            "one)");
}

TEST(ShortLoops, LongInnermostLoopsAndGpuKernelsAreLeftAlone) {
  ir::Program prog;
  Kernel k = only_kernel(exp_of({30, 7, 8}), prog);  // 8 points: a vector's worth
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{30, 7, 8}));
  k = only_kernel(exp_of({300, 7, 3}), prog, /*gpu=*/true);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{300, 7, 3}));
  EXPECT_EQ(k.unrolled, 0);
}

TEST(ShortLoops, ChannelsLastCopyMergesTheImageAndUnrollsTheChannels) {
  // relu of an NCHW [16, 3, 20, 3] input stored channels-last: h and w are one loop to both the
  // read and the store; the 3 channels are unrolled inside the loop over the 60 pixels.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({16, 3, 20, 3}));
  Arg r = b.call("relu", "aten.relu.default", {x}, contiguous({16, 3, 20, 3}));
  Arg c = b.call("clone", "aten.clone.default", {r}, strided({16, 3, 20, 3}, {180, 1, 9, 3}));
  ir::Program prog;
  Kernel k = only_kernel(b.finish({c}), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{16, 60, 3}));
  EXPECT_EQ(k.unrolled, 1);
  EXPECT_EQ(k.decisions.back(),
            "short loops: x2 (3 points) unrolled inside the loop over x1, the vector loop");
}

TEST(ShortLoops, ABroadcastOperandKeepsItsLoopsApart) {
  // x * y with y [5, 1]: y varies along the 5s, not along the 3s: nothing merges. With 7s
  // instead of 3s, the loop before them (5) is too short to be the vector loop: no unrolling.
  auto mul = [](int64_t n) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({30, 5, n}));
    Arg y = b.input("arg1_1", contiguous({5, 1}));
    return b.finish({b.call("mul", "aten.mul.Tensor", {x, y}, contiguous({30, 5, n}))});
  };
  ir::Program prog;
  Kernel k = only_kernel(mul(3), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{30, 5, 3}));
  EXPECT_EQ(k.unrolled, 2);  // 15 points, inside the loop over 30
  k = only_kernel(mul(7), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{30, 5, 7}));
  EXPECT_EQ(k.unrolled, 0);
}

TEST(ShortLoops, TwoShortLoopsUnrollTogether) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({40, 3, 2}));
  Arg y = b.input("arg1_1", contiguous({3, 1}));
  Arg a = b.call("add", "aten.add.Tensor", {x, y}, contiguous({40, 3, 2}));
  ir::Program prog;
  Kernel k = only_kernel(b.finish({a}), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{40, 3, 2}));
  EXPECT_EQ(k.unrolled, 2);
  EXPECT_EQ(k.decisions.back(),
            "short loops: x1, x2 (6 points) unrolled inside the loop over x0, the vector loop");
}

TEST(ShortLoops, ShortLoopsOfSmallerStoreStridesMoveInsideTheVectorLoop) {
  // [40, 3, 2] from a [3, 2, 40] input: order_loops puts the 40 (the input's contiguous loop)
  // next to the 2, outside the 3; the 3 moves back inside it, so that the 6 copies of each
  // vector store one run of the output.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({3, 2, 40}));
  Arg p = b.call("permute", "aten.permute.default", {x, ints({2, 0, 1})},
                 strided({40, 3, 2}, {1, 80, 40}));
  Arg c = b.call("clone", "aten.clone.default", {p}, contiguous({40, 3, 2}));
  ir::Program prog;
  Kernel k = only_kernel(b.finish({c}), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{40, 3, 2}));
  EXPECT_EQ(k.unrolled, 2);
  EXPECT_EQ(var_text(prog, k), "buf0: v0=x0 v1=x1 v2=x2");
  EXPECT_EQ(k.decisions[k.decisions.size() - 2],
            "short loops: loop order (1, 0, 2): short loops of smaller store strides inside the "
            "vector loop");
}

TEST(ShortLoops, ReductionsAreLeftAlone) {
  GraphBuilder b;
  // (A sum over 8 elements or fewer would be unrolled into a pointwise body by its lowering.)
  Arg x = b.input("arg0_1", contiguous({300, 70, 3}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({300, 3}));
  ir::Program prog;
  Kernel k = only_kernel(b.finish({s}), prog);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{300, 3}));
  EXPECT_EQ(k.unrolled, 0);
}

}  // namespace
}  // namespace coil::sched
