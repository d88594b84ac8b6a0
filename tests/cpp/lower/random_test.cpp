// Tests for lower/random.cpp: random ops lower to coil's counter-based generator (a seed drawn by
// one aten.randint extern call per node), or, under LowerOptions::fallback_random, run as ATen
// fallbacks in graph order; and keeps_op_whole (lowering.h), which keeps random ops out of the
// decomposition table then. Distributions are checked from Python (tests/python/test_random.py,
// eager's streams by tests/python/test_fallback_random.py).
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"

namespace coil::lower {
namespace {

using graph::Arg;
using graph::DType;
using test::contiguous;
using test::GraphBuilder;

// x f32[4, 8] -> native_dropout(relu(x), 0.1, true) and rand_like(x): two random nodes.
graph::Graph dropout_and_rand() {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg r = b.call("relu", "aten.relu.default", {x}, contiguous({4, 8}));
  std::vector<Arg> d = b.call_tuple("native_dropout", "aten.native_dropout.default",
                                    {r, test::farg(0.1), test::barg(true)},
                                    {contiguous({4, 8}), contiguous({4, 8}, DType::Bool)});
  Arg u = b.call("rand_like", "aten.rand_like.default", {x}, contiguous({4, 8}));
  Arg y = b.call("add", "aten.add.Tensor", {d[0], u}, contiguous({4, 8}));
  return b.finish({y, d[1]});
}

std::vector<std::string> extern_ops(const ir::Program& p) {
  std::vector<std::string> ops;
  for (const ir::ExternCall& e : p.externs) ops.push_back(e.op);
  return ops;
}

TEST(Random, LoweredWithCoilsGeneratorByDefault) {
  ir::Program p = lower_graph(dropout_and_rand());
  EXPECT_TRUE(p.fallback_ops.empty()) << p.to_text();
  // One seed per random node, nothing else leaves the kernels.
  EXPECT_EQ(extern_ops(p), (std::vector<std::string>{"aten.randint.low", "aten.randint.low"}))
      << p.to_text();
  EXPECT_NE(p.to_text().find("rand("), std::string::npos) << p.to_text();
}

TEST(Random, FallbackRandomRunsEachRandomOpInATenInGraphOrder) {
  LowerOptions o;
  o.fallback_random = true;
  ir::Program p = lower_graph(dropout_and_rand(), o);
  EXPECT_EQ(p.fallback_ops,
            (std::vector<std::string>{"aten.native_dropout.default", "aten.rand_like.default"}));
  EXPECT_EQ(extern_ops(p), p.fallback_ops) << p.to_text();
  EXPECT_EQ(p.to_text().find("rand("), std::string::npos) << p.to_text();
  // relu (before the dropout) and add (after both) are still coil's kernels.
  int computed = 0;
  for (const ir::Buffer& b : p.buffers) computed += b.kind == ir::Buffer::Kind::Computed;
  EXPECT_EQ(computed, 2) << p.to_text();
}

TEST(Random, KeepsOpWhole) {
  EXPECT_TRUE(keeps_op_whole("aten.native_dropout", true, false));  // lowered by coil
  EXPECT_TRUE(keeps_op_whole("aten.add", false, false));
  EXPECT_TRUE(keeps_op_whole("aten.scaled_dot_product_attention", true, false));
  // A random op coil does not lower: decomposed unless eager's streams are asked for.
  EXPECT_FALSE(keeps_op_whole("aten.rrelu", true, false));
  EXPECT_TRUE(keeps_op_whole("aten.rrelu", true, true));
  EXPECT_FALSE(keeps_op_whole("aten.addcmul_not_lowered_op", false, true));
  // Lowered, but decomposed to alias, which the min-cut partitioner knows is a view.
  EXPECT_FALSE(keeps_op_whole("aten.detach", false, false));
}

}  // namespace
}  // namespace coil::lower
