// Tests for lower/lowering.h: the lowering driver (graph in, ir::Program out), fallbacks,
// realization thresholds (ir/realize_policy.h), output layouts, as_strided_view and promote().
//
// Each IR test shows the graph before (Graph::to_text) and the program after (Program::to_text).
#include "coil/lower/lowering.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "../test_graphs.h"
#include "coil/ir/realize_policy.h"

namespace coil::lower {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::ints;

// name -> origins of every computed buffer, in program order.
std::vector<std::pair<std::string, std::set<std::string>>> computed(const ir::Program& p) {
  std::vector<std::pair<std::string, std::set<std::string>>> out;
  for (const ir::Buffer& b : p.buffers) {
    if (b.kind == ir::Buffer::Kind::Computed) out.push_back({b.name, b.origins});
  }
  return out;
}

TEST(Lowering, PointwiseChainIsOneBuffer) {
  graph::Graph g = test::pointwise_chain();
  ASSERT_EQ(g.to_text(),
            "%arg0_1 : f32[8, 16]{16, 1} = placeholder\n"
            "%add : f32[8, 16]{16, 1} = aten.add.Tensor(%arg0_1, 1.0)\n"
            "%mul : f32[8, 16]{16, 1} = aten.mul.Tensor(%add, 2.0)\n"
            "%relu : f32[8, 16]{16, 1} = aten.relu.default(%mul)\n"
            "%sub : f32[8, 16]{16, 1} = aten.sub.Tensor(%relu, %arg0_1)\n"
            "%exp : f32[8, 16]{16, 1} = aten.exp.default(%sub)\n"
            "return (%exp,)\n");
  ir::Program p = lower_graph(g);
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[8, 16] strides=[16, 1] fixed  (input)\n"
            "buf0: float32[8, 16] strides=[16, 1] fixed  origins: add, exp, mul, relu, sub\n"
            "  pointwise ranges=[8, 16]\n"
            "    tmp0 = constant(0) : f32\n"
            "    tmp1 = load(arg0_1, 16*v0 + v1) : f32\n"
            "    tmp2 = constant(1) : f32\n"
            "    tmp3 = add(tmp1, tmp2) : f32\n"
            "    tmp4 = constant(2) : f32\n"
            "    tmp5 = mul(tmp3, tmp4) : f32\n"
            "    tmp6 = maximum(tmp0, tmp5) : f32\n"  // relu: the bound first (keeps -0.0)
            "    tmp7 = sub(tmp6, tmp1) : f32\n"
            "    tmp8 = exp(tmp7) : f32\n"
            "    store buf0[16*v0 + v1]\n"
            "outputs: buf0[8, 16]\n");
  EXPECT_EQ(p.inputs, (std::vector<std::string>{"arg0_1"}));
  EXPECT_TRUE(p.fallback_ops.empty());
  EXPECT_TRUE(p.externs.empty());
  EXPECT_EQ(p.node_targets.at("relu"), "aten.relu.default");
}

TEST(Lowering, BroadcastAdd) {
  graph::Graph g = test::broadcast_add();
  ASSERT_EQ(g.to_text(),
            "%arg0_1 : f32[8, 16]{16, 1} = placeholder\n"
            "%arg1_1 : f32[16]{1} = placeholder\n"
            "%add : f32[8, 16]{16, 1} = aten.add.Tensor(%arg0_1, %arg1_1)\n"
            "return (%add,)\n");
  EXPECT_EQ(lower_graph(g).to_text(),
            "arg0_1: float32[8, 16] strides=[16, 1] fixed  (input)\n"
            "arg1_1: float32[16] strides=[1] fixed  (input)\n"
            "buf0: float32[8, 16] strides=[16, 1] fixed  origins: add\n"
            "  pointwise ranges=[8, 16]\n"
            "    tmp0 = load(arg0_1, 16*v0 + v1) : f32\n"
            "    tmp1 = load(arg1_1, v1) : f32\n"
            "    tmp2 = add(tmp0, tmp1) : f32\n"
            "    store buf0[16*v0 + v1]\n"
            "outputs: buf0[8, 16]\n");
}

TEST(Lowering, SoftmaxIsTwoReductionsAndAPointwise) {
  graph::Graph g = test::softmax();
  ASSERT_EQ(g.to_text(),
            "%arg0_1 : f32[8, 32]{32, 1} = placeholder\n"
            "%_softmax : f32[8, 32]{32, 1} = aten._softmax.default(%arg0_1, -1, False)\n"
            "return (%_softmax,)\n");
  EXPECT_EQ(lower_graph(g).to_text(),
            "arg0_1: float32[8, 32] strides=[32, 1] fixed  (input)\n"
            "buf0: float32[8] strides=[1] flexible  origins: _softmax\n"
            "  reduction max ranges=[8] reduction_ranges=[32]\n"
            "    tmp0 = load(arg0_1, u0 + 32*v0) : f32\n"
            "    store buf0[v0]\n"
            "buf1: float32[8] strides=[1] flexible  origins: _softmax\n"
            "  reduction sum ranges=[8] reduction_ranges=[32]\n"
            "    tmp0 = load(arg0_1, u0 + 32*v0) : f32\n"
            "    tmp1 = load(buf0, v0) : f32\n"
            "    tmp2 = sub(tmp0, tmp1) : f32\n"
            "    tmp3 = exp(tmp2) : f32\n"
            "    store buf1[v0]\n"
            "buf2: float32[8, 32] strides=[32, 1] fixed  origins: _softmax\n"
            "  pointwise ranges=[8, 32]\n"
            "    tmp0 = load(arg0_1, 32*v0 + v1) : f32\n"
            "    tmp1 = load(buf0, v0) : f32\n"
            "    tmp2 = sub(tmp0, tmp1) : f32\n"
            "    tmp3 = exp(tmp2) : f32\n"
            "    tmp4 = load(buf1, v0) : f32\n"
            "    tmp5 = reciprocal(tmp4) : f32\n"
            "    tmp6 = mul(tmp3, tmp5) : f32\n"
            "    store buf2[32*v0 + v1]\n"
            "outputs: buf2[8, 32]\n");
}

// Found by the fuzzer (size-0 dims): reshape of a (0, 3) tensor delinearized its flat index by
// the sizes and divided by zero; a softmax over the empty dim did the same in fusion. A node whose
// outputs are all empty now lowers to a zero-element constant and reads nothing.
TEST(Lowering, NodeWithOnlyEmptyOutputsComputesNothing) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({0, 3}));
  Arg v = b.call("view", "aten.view.default", {x, ints({3, 0})}, contiguous({3, 0}));
  Arg s = b.call("softmax", "aten._softmax.default", {x, test::iarg(0), Arg::boolean(false)},
                 contiguous({0, 3}));
  Arg u = b.call("my_unknown_op", "aten.my_unknown_op.default", {x}, contiguous({0, 3}));
  ir::Program p = lower_graph(b.finish({v, s, u}));
  EXPECT_TRUE(p.externs.empty()) << p.to_text();
  for (const ir::Buffer& buf : p.buffers) {
    if (buf.kind != ir::Buffer::Kind::Computed) continue;
    EXPECT_FALSE(buf.is_reduction()) << p.to_text();
    EXPECT_TRUE(ir::loaded_buffers(buf.body).empty()) << p.to_text();
  }
}

// Regression (issue "Layouts"): conv(clone(permute(x * 2)).permute(...)) stored the
// convolution's input contiguous while its result was read with the channels-last strides eager's
// channels-last input gives it. A stored extern input now gets eager's layout, and the wrapper
// checks what a layout-following op returned.
TEST(Lowering, ExternInputIsStoredInEagersLayout) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({2, 8, 5, 5}));
  Arg w = b.input("arg1_1", contiguous({8, 8, 3, 3}));
  Arg m = b.call("mul", "aten.mul.Tensor", {x, test::farg(2.0)}, contiguous({2, 8, 5, 5}));
  Arg p = b.call("permute", "aten.permute.default", {m, ints({0, 2, 3, 1})},
                 test::strided({2, 5, 5, 8}, {200, 5, 1, 25}));
  Arg c = b.call("clone", "aten.clone.default", {p}, contiguous({2, 5, 5, 8}));
  Arg p1 = b.call("permute_1", "aten.permute.default", {c, ints({0, 3, 1, 2})},
                  test::strided({2, 8, 5, 5}, {200, 1, 40, 8}));
  Arg conv = b.call("convolution", "aten.convolution.default",
                    {p1, w, Arg::none(), ints({1, 1}), ints({1, 1}), ints({1, 1}),
                     test::barg(false), ints({0, 0}), test::iarg(1)},
                    test::strided({2, 8, 5, 5}, {200, 1, 40, 8}));
  ir::Program prog = lower_graph(b.finish({conv}));
  ASSERT_EQ(prog.externs.size(), 1u);
  const ir::ExternCall& call = prog.externs[0];
  ASSERT_EQ(call.tensors.size(), 2u);
  EXPECT_EQ(call.tensors[0].strides, (std::vector<Expr>{200, 1, 40, 8})) << prog.to_text();
  // What is stored is the clone, contiguous; the convolution gets its permute as a view.
  EXPECT_EQ(prog.buffer(call.tensors[0].buffer).layout.strides, (std::vector<Expr>{200, 40, 8, 1}));
  EXPECT_EQ(prog.buffer(call.tensors[0].buffer).layout.sizes, (std::vector<Expr>{2, 5, 5, 8}));
  EXPECT_TRUE(call.check_output_strides);
  EXPECT_EQ(prog.buffer(call.outputs[0]).layout.strides, (std::vector<Expr>{200, 1, 40, 8}));
}

// Attention ops get their inputs in eager's exact strides: the mask eager padded to rows of 8 and
// expanded over heads (stride 0) is stored once with padded rows and passed as a stride-0 view
// (efficient attention rejects a densely stored mask at an odd length). Static and symbolic sizes.
graph::Graph attention_with_mask(Expr s, Expr padded) {
  GraphBuilder b;
  Arg q = b.input("arg0_1", contiguous({2, 12, s, 64}));
  Arg mask = b.input("arg1_1", contiguous({2, 1, s, s}));
  Arg add = b.call("add", "aten.add.Tensor", {mask, test::farg(1.0)},
                   test::strided({2, 1, s, s}, {s * padded, s * padded, padded, 1}));
  Arg expand = b.call("expand", "aten.expand.default", {add, ints({2, 12, 7, 7})},
                      test::strided({2, 12, s, s}, {s * padded, 0, padded, 1}));
  Arg attn = b.call("attn", "aten._scaled_dot_product_efficient_attention.default",
                    {q, q, q, expand, test::barg(false)}, contiguous({2, 12, s, 64}));
  return b.finish({attn});
}

void expect_exact_mask(const ir::Program& prog, const std::vector<Expr>& strides) {
  ASSERT_EQ(prog.externs.size(), 1u);
  const ir::TensorRef& mask = prog.externs[0].tensors.at(3);
  EXPECT_EQ(mask.strides, strides) << prog.to_text();
  EXPECT_EQ(prog.buffer(mask.buffer).layout.sizes[1], Expr(1)) << prog.to_text();
}

TEST(Lowering, AttentionMaskKeepsEagersPaddedStrides) {
  ir::Program prog = lower_graph(attention_with_mask(7, 8));
  expect_exact_mask(prog, {56, 0, 8, 1});
}

TEST(Lowering, AttentionMaskKeepsEagersPaddedStridesWhenDynamic) {
  Expr s = Expr::symbol("s50");
  sym::RangeEnv sizes;
  sizes.set_range(s, {2, sym::Range::kPosInf});
  sizes.set_hint(s, 7);
  sym::SizeSymbolScope scope(sizes);
  Expr padded = sym::max(1, s - sym::mod(s, 8) + 8);
  graph::Graph g = attention_with_mask(s, padded);
  g.add_symbol({"s50", {2, sym::Range::kPosInf}, 7});
  ir::Program prog = lower_graph(g);
  expect_exact_mask(prog, {s * padded, 0, padded, 1});
}

TEST(Lowering, MatrixProductResultsAreNotChecked) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg y = b.input("arg1_1", contiguous({8, 3}));
  Arg mm = b.call("mm", "aten.mm.default", {x, y}, contiguous({4, 3}));
  ir::Program prog = lower_graph(b.finish({mm}));
  ASSERT_EQ(prog.externs.size(), 1u);
  EXPECT_FALSE(prog.externs[0].check_output_strides);
}

// GEMM padding (float32: 4-element alignment). A large product with an odd N: the weight is
// zero-extended to an aligned N (a copy: it is in memory), the library computes the wider product,
// and the graph's value is the view of its first N columns. A small one keeps its sizes but stores
// a computed operand with padded rows. Padding off (auto on the CPU): plain calls.
// A padded product that is itself a graph output (an LM head's logits, through a view) is written
// straight into eager's contiguous output by aligned products over groups of rows: one call whose
// result is the output.
TEST(Lowering, APaddedProductReturnedIsWrittenInPlaceByRowGroups) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4096, 768}));
  Arg w = b.input("arg1_1", contiguous({50257, 768}));
  Arg t = b.call("permute", "aten.permute.default", {w, ints({1, 0})},
                 test::strided({768, 50257}, {1, 768}));
  Arg mm = b.call("mm", "aten.mm.default", {x, t}, contiguous({4096, 50257}));
  Arg v =
      b.call("view", "aten.view.default", {mm, ints({8, 512, 50257})}, contiguous({8, 512, 50257}));
  LowerOptions on;
  on.gemm_padding = LowerOptions::Padding::On;
  ir::Program p = lower_graph(b.finish({v}), on);
  ASSERT_EQ(p.externs.size(), 1u);
  const ir::ExternCall& call = p.externs[0];
  EXPECT_EQ(call.op, "coil.mm_row_groups.default");
  // float32: 4-element vectors; 50257 is odd, so rows 4 apart start equally far from a vector.
  EXPECT_EQ(call.decision,
            "N 50257 written in place (a graph output): 4 groups of rows 4 apart, each one "
            "aligned product for cuBLAS's aligned kernels, and the end columns");
  EXPECT_EQ(call.args.at(3), graph::Arg::integer(4));  // the alignment in elements
  EXPECT_EQ(call.tensors.at(1).sizes, (std::vector<Expr>{768, 50257}));
  EXPECT_EQ(call.tensors.at(1).strides, (std::vector<Expr>{1, 768}));
  EXPECT_EQ(p.buffer(call.outputs[0]).layout.sizes, (std::vector<Expr>{4096, 50257}));
  EXPECT_EQ(p.buffer(call.outputs[0]).layout.strides, (std::vector<Expr>{50257, 1}));
  EXPECT_EQ(p.outputs[0].ref.buffer, call.outputs[0]);  // no copy
}

TEST(Lowering, MatrixProductsGetPaddedSizes) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4096, 768}));
  Arg w = b.input("arg1_1", contiguous({50257, 768}));
  Arg e = b.call("tanh", "aten.tanh.default", {x}, contiguous({4096, 768}));
  Arg t = b.call("permute", "aten.permute.default", {w, ints({1, 0})},
                 test::strided({768, 50257}, {1, 768}));
  Arg mm = b.call("mm", "aten.mm.default", {e, t}, contiguous({4096, 50257}));
  Arg y = b.call("relu", "aten.relu.default", {mm}, contiguous({4096, 50257}));
  graph::Graph g = b.finish({y});
  LowerOptions on;
  on.gemm_padding = LowerOptions::Padding::On;
  ir::Program p = lower_graph(g, on);
  ASSERT_EQ(p.externs.size(), 1u);
  const ir::ExternCall& call = p.externs[0];
  EXPECT_EQ(call.decision, "padded K 768->768, N 50257->50260 for cuBLAS's aligned kernels");
  ASSERT_EQ(call.tensors.size(), 2u);
  EXPECT_EQ(call.tensors[1].sizes, (std::vector<Expr>{768, 50260})) << p.to_text();
  EXPECT_EQ(call.tensors[1].strides, (std::vector<Expr>{1, 768}));  // the weight's orientation
  EXPECT_EQ(p.buffer(call.outputs[0]).layout.sizes, (std::vector<Expr>{4096, 50260}));
  // The graph output is eager's contiguous tensor: relu of the first 50257 columns.
  EXPECT_EQ(p.outputs[0].ref.sizes, (std::vector<Expr>{4096, 50257}));
  EXPECT_EQ(p.outputs[0].ref.strides, (std::vector<Expr>{50257, 1}));
  EXPECT_NE(p.outputs[0].ref.buffer, call.outputs[0]);

  GraphBuilder small;
  Arg xs = small.input("arg0_1", contiguous({6, 5}));
  Arg ys = small.input("arg1_1", contiguous({5, 7}));
  Arg es = small.call("exp", "aten.exp.default", {xs}, contiguous({6, 5}));
  Arg ms = small.call("mm", "aten.mm.default", {es, ys}, contiguous({6, 7}));
  ir::Program ps = lower_graph(small.finish({ms}), on);
  ASSERT_EQ(ps.externs.size(), 1u);
  EXPECT_EQ(ps.externs[0].decision, "");
  EXPECT_EQ(ps.externs[0].tensors[0].strides, (std::vector<Expr>{8, 1})) << ps.to_text();

  ir::Program plain = lower_graph(g);
  ASSERT_EQ(plain.externs.size(), 1u);
  EXPECT_EQ(plain.externs[0].tensors[1].sizes, (std::vector<Expr>{768, 50257}));
}

// One value two extern calls take (an attention mask every layer's attention reads) is stored
// once: GPT-2 on the H200 held twelve 4 MB copies of its mask, one per layer.
TEST(Lowering, AValueSeveralExternsTakeIsStoredOnce) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg w = b.input("arg1_1", contiguous({8, 8}));
  Arg e = b.call("add", "aten.add.Tensor", {x, test::farg(1.0)}, contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {e, w}, contiguous({8, 8}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {e, mm}, contiguous({8, 8}));
  ir::Program prog = lower_graph(b.finish({mm1}));
  ASSERT_EQ(prog.externs.size(), 2u);
  EXPECT_EQ(prog.externs[0].tensors[0].buffer, prog.externs[1].tensors[0].buffer) << prog.to_text();
  int computed = 0;
  for (const ir::Buffer& buf : prog.buffers) computed += buf.kind == ir::Buffer::Kind::Computed;
  EXPECT_EQ(computed, 1) << prog.to_text();
}

// A value coil computes that reaches a product through a reshape (BERT's layer norm output
// [1, S, D] viewed [S, D] for the next addmm) and is read again later (its residual add) is stored
// once, as eager lays it out, and the product gets the reshape as a view of it. The later reader
// used to compute the value again from its inputs, which kept them alive past the product: CPU
// BERT inference peaked at 2.63 MB where Inductor's peaks at 2.25.
TEST(Lowering, AValueReshapedForAProductIsStoredOnceForItsOtherReaders) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 8, 16}));
  Arg w = b.input("arg1_1", contiguous({16, 16}));
  Arg e = b.call("mul", "aten.mul.Tensor", {x, test::farg(2.0)}, contiguous({1, 8, 16}));
  Arg v = b.call("view", "aten.view.default", {e, ints({8, 16})}, contiguous({8, 16}));
  Arg mm = b.call("mm", "aten.mm.default", {v, w}, contiguous({8, 16}));
  Arg v1 = b.call("view_1", "aten.view.default", {mm, ints({1, 8, 16})}, contiguous({1, 8, 16}));
  Arg add = b.call("add", "aten.add.Tensor", {v1, e}, contiguous({1, 8, 16}));
  ir::Program prog = lower_graph(b.finish({add}));
  ASSERT_EQ(prog.externs.size(), 1u);
  const std::string stored = prog.externs[0].tensors[0].buffer;
  EXPECT_EQ(prog.externs[0].tensors[0].strides, (std::vector<Expr>{16, 1})) << prog.to_text();
  // The input is read once (by the stored value); the add reads the stored value.
  std::string text = prog.to_text();
  size_t reads = 0;
  for (size_t at = text.find("load(arg0_1"); at != std::string::npos;
       at = text.find("load(arg0_1", at + 1))
    ++reads;
  EXPECT_EQ(reads, 1u) << text;
  EXPECT_NE(text.find("load(" + stored + ","), std::string::npos) << text;
}

// A value two nodes read whose bits depend on a function's implementation (exp) is stored once
// for C++ kernels, so y == amax(y) compares the same bits; Triton kernels compute each op one
// way, and keep recomputing it.
TEST(Lowering, AnInexactValueTwoNodesReadIsStoredOnceForCppKernels) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg y = b.call("exp", "aten.exp.default", {x}, contiguous({4, 8}));
  Arg m = b.call("amax", "aten.amax.default", {y, ints({1}), test::barg(true)}, contiguous({4, 1}));
  Arg eq = b.call("eq", "aten.eq.Tensor", {y, m}, contiguous({4, 8}, graph::DType::Bool));
  graph::Graph g = b.finish({eq});
  auto exps = [](const ir::Program& p) {
    int n = 0;
    for (const ir::Buffer& buf : p.buffers) n += buf.origins == std::set<std::string>{"exp"};
    return n;
  };
  EXPECT_EQ(exps(lower_graph(g)), 1);
  LowerOptions triton;
  triton.triton = true;
  EXPECT_EQ(exps(lower_graph(g, triton)), 0);
}

TEST(Lowering, AResultOfSeveralIsStoredForItsOwnReaders) {
  // A training graph's layer norm: mean and rstd returned (saved for the backward), the output
  // read by one select. The output is computed where the select reads it (its rows only): the
  // node's three readers are not the output's. Read twice, it is stored.
  for (bool twice : {false, true}) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({4, 5, 16}));
    Arg w = b.input("arg1_1", contiguous({16}));
    Arg bias = b.input("arg2_1", contiguous({16}));
    std::vector<Arg> ln =
        b.call_tuple("native_layer_norm", "aten.native_layer_norm.default",
                     {x, ints({16}), w, bias, test::farg(1e-5)},
                     {contiguous({4, 5, 16}), contiguous({4, 5, 1}), contiguous({4, 5, 1})});
    Arg sel = b.call("select", "aten.select.int", {ln[0], test::iarg(1), test::iarg(0)},
                     test::strided({4, 16}, {80, 1}));
    Arg y = b.call("mul", "aten.mul.Tensor", {sel, test::farg(2.0)}, contiguous({4, 16}));
    std::vector<Arg> outs = {y, ln[1], ln[2]};
    if (twice) outs.push_back(b.call("relu", "aten.relu.default", {ln[0]}, contiguous({4, 5, 16})));
    ir::Program p = lower_graph(b.finish(outs));
    int whole = 0;  // stored [4, 5, 16] values of the norm's output
    for (const ir::Buffer& buf : p.buffers) {
      whole += buf.kind == ir::Buffer::Kind::Computed && buf.origins.count("native_layer_norm") &&
               buf.layout.sizes.size() == 3 && buf.layout.sizes[2] == sym::Expr(16) &&
               !buf.origins.count("relu");
    }
    EXPECT_EQ(whole, twice ? 1 : 0) << p.to_text();
  }
}

TEST(Lowering, UnknownOpBecomesAFallbackExtern) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({4, 8}));
  Arg u =
      b.call("my_unknown_op", "aten.my_unknown_op.default", {e, test::iarg(3)}, contiguous({4, 8}));
  Arg n = b.call("neg", "aten.neg.default", {u}, contiguous({4, 8}));
  graph::Graph g = b.finish({n});
  ir::Program p = lower_graph(g);
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "buf0: float32[4, 8] strides=[8, 1] flexible  origins: exp\n"
            "  pointwise ranges=[4, 8]\n"
            "    tmp0 = load(arg0_1, 8*v0 + v1) : f32\n"
            "    tmp1 = exp(tmp0) : f32\n"
            "    store buf0[8*v0 + v1]\n"
            "buf1: float32[4, 8] strides=[8, 1] fixed  (fallback aten.my_unknown_op.default from "
            "my_unknown_op)\n"
            "buf2: float32[4, 8] strides=[8, 1] fixed  origins: neg\n"
            "  pointwise ranges=[4, 8]\n"
            "    tmp0 = load(buf1, 8*v0 + v1) : f32\n"
            "    tmp1 = neg(tmp0) : f32\n"
            "    store buf2[8*v0 + v1]\n"
            "outputs: buf2[4, 8]\n");
  EXPECT_EQ(p.fallback_ops, (std::vector<std::string>{"aten.my_unknown_op.default"}));
  ASSERT_EQ(p.externs.size(), 1u);
  const ir::ExternCall& call = p.externs[0];
  EXPECT_TRUE(call.is_fallback);
  EXPECT_EQ(call.origin, "my_unknown_op");
  EXPECT_EQ(call.outputs, (std::vector<std::string>{"buf1"}));
  EXPECT_FALSE(call.returns_tuple);
  // The tensor argument is replaced by a reference to tensors[0]; the int stays as it was.
  ASSERT_EQ(call.args.size(), 2u);
  EXPECT_EQ(call.args[0], Arg::node_ref(0));
  EXPECT_EQ(call.args[1], Arg::integer(3));
  ASSERT_EQ(call.tensors.size(), 1u);
  EXPECT_EQ(call.tensors[0].buffer, "buf0");
  EXPECT_EQ(call.tensors[0].strides, (std::vector<Expr>{8, 1}));
  // The extern's node is the origin of its buffer, not of what reads it.
  EXPECT_EQ(p.buffer("buf1").origins, (std::set<std::string>{"my_unknown_op"}));
}

// x.sum().item() * 2 used by a tensor op: the number and what is computed from it are extern
// calls whose results live in wrapper variables; the tensor op reading it is a fallback.
graph::Graph item_graph() {
  graph::Graph g;
  int x = g.add_placeholder("arg0_1", {contiguous({4})});
  int sum = g.add_call("sum_1", "aten.sum.default", {Arg::node_ref(x)}, {}, {contiguous({})});
  int item = g.add_call("_local_scalar_dense", "aten._local_scalar_dense.default",
                        {Arg::node_ref(sum)}, {}, {}, "", "float");
  int mul = g.add_call("mul", "operator.mul", {Arg::node_ref(item), Arg::integer(2)}, {}, {}, "",
                       "float");
  int st = g.add_call("scalar_tensor", "aten.scalar_tensor.default", {Arg::node_ref(mul)},
                      {{"dtype", Arg::dtype_of(DType::Float32)}}, {contiguous({})});
  int add = g.add_call("add", "aten.add.Tensor", {Arg::node_ref(x), Arg::node_ref(st)}, {},
                       {contiguous({4})});
  g.set_output({Arg::node_ref(add), Arg::node_ref(mul)});
  return g;
}

TEST(Lowering, NumbersAreExternCallsWithWrapperVariables) {
  ir::Program p = lower_graph(item_graph());
  ASSERT_EQ(p.externs.size(), 3u);
  const ir::ExternCall& item = p.externs[0];
  EXPECT_EQ(item.op, "aten._local_scalar_dense.default");
  EXPECT_FALSE(item.is_fallback);  // no kernel makes a Python number: a deliberate call
  EXPECT_EQ(item.scalar_output, "_local_scalar_dense");
  EXPECT_TRUE(item.outputs.empty());
  ASSERT_EQ(item.tensors.size(), 1u);
  EXPECT_EQ(item.tensors[0].buffer, "buf0");  // the sum, realized for the call
  const ir::ExternCall& mul = p.externs[1];
  EXPECT_EQ(mul.op, "operator.mul");
  EXPECT_FALSE(mul.is_fallback);
  EXPECT_EQ(mul.scalar_output, "mul");
  EXPECT_EQ(mul.host_scalars, (std::vector<std::string>{"_local_scalar_dense"}));
  ASSERT_EQ(mul.args.size(), 2u);
  EXPECT_EQ(mul.args[0], Arg::node_ref(-1));  // host_scalars[0]
  EXPECT_EQ(mul.args[1], Arg::integer(2));
  const ir::ExternCall& st = p.externs[2];
  EXPECT_TRUE(st.is_fallback);  // a lowered op, but coil's kernels take no run-time numbers
  EXPECT_EQ(st.host_scalars, (std::vector<std::string>{"mul"}));
  EXPECT_EQ(st.outputs, (std::vector<std::string>{"buf1"}));
  EXPECT_EQ(p.fallback_ops, (std::vector<std::string>{"aten.scalar_tensor.default"}));
  ASSERT_EQ(p.outputs.size(), 2u);
  EXPECT_TRUE(p.outputs[0].is_tensor());
  EXPECT_FALSE(p.outputs[1].is_tensor());
  EXPECT_EQ(p.outputs[1].scalar, "mul");
  EXPECT_EQ(p.to_text().substr(p.to_text().find("outputs:")), "outputs: buf2[4] mul(number)\n");
}

// with_effects(token, op, args): the op is a fallback marked has_effects; the new token is the
// old one (an output that is the input itself).
TEST(Lowering, WithEffectsRunsItsOpAsAFallback) {
  graph::Graph g;
  int token = g.add_placeholder("arg0_1", {contiguous({0})});
  int x = g.add_placeholder("arg1_1", {contiguous({3})});
  int we = g.add_call("with_effects", "with_effects",
                      {Arg::node_ref(token), Arg::str("aten.my_effect.default"), Arg::node_ref(x)},
                      {{"flag", Arg::boolean(true)}}, {contiguous({0}), contiguous({3})});
  int tok =
      g.add_call("getitem", "getitem", {Arg::node_ref(we), Arg::integer(0)}, {}, {contiguous({0})});
  int out = g.add_call("getitem_1", "getitem", {Arg::node_ref(we), Arg::integer(1)}, {},
                       {contiguous({3})});
  g.set_output({Arg::node_ref(tok), Arg::node_ref(out)});
  ir::Program p = lower_graph(g);
  ASSERT_EQ(p.externs.size(), 1u);
  const ir::ExternCall& e = p.externs[0];
  EXPECT_EQ(e.op, "aten.my_effect.default");
  EXPECT_TRUE(e.has_effects);
  EXPECT_TRUE(e.is_fallback);
  EXPECT_FALSE(e.returns_tuple);
  ASSERT_EQ(e.args.size(), 1u);  // the token and the op name are not the op's arguments
  EXPECT_EQ(e.args[0], Arg::node_ref(0));
  EXPECT_EQ(e.tensors[0].buffer, "arg1_1");
  ASSERT_EQ(e.kwargs.size(), 1u);
  EXPECT_EQ(e.kwargs[0].first, "flag");
  EXPECT_EQ(e.outputs, (std::vector<std::string>{"buf0"}));
  EXPECT_EQ(p.fallback_ops, (std::vector<std::string>{"aten.my_effect.default"}));
  EXPECT_EQ(p.outputs[0].ref.buffer, "arg0_1");  // the token passes through, not copied
  EXPECT_EQ(p.outputs[1].ref.buffer, "buf0");
  EXPECT_TRUE(computed(p).empty());
}

// uint16/32/64: whatever reads or makes one runs in ATen, even ops coil lowers for other dtypes.
TEST(Lowering, WideUnsignedTensorsStayInATen) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4}, graph::DType::Int64));
  Arg h = b.call("hash_tensor", "aten.hash_tensor.default", {x}, contiguous({}, DType::UInt64));
  Arg a = b.call("add", "aten.add.Tensor", {h, h}, contiguous({}, DType::UInt64));
  Arg c = b.call("convert", "prims.convert_element_type.default", {x, Arg::dtype_of(DType::UInt32)},
                 contiguous({4}, DType::UInt32));
  Arg n = b.call("neg", "aten.neg.default", {x}, contiguous({4}, DType::Int64));
  ir::Program p = lower_graph(b.finish({a, c, n}));
  EXPECT_EQ(p.fallback_ops, (std::vector<std::string>{"aten.hash_tensor.default", "aten.add.Tensor",
                                                      "prims.convert_element_type.default"}));
  EXPECT_EQ(computed(p).size(), 1u);  // neg of the int64 input is lowered
}

TEST(Lowering, EveryFallbackOccurrenceIsListed) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4}));
  Arg u = b.call("op", "aten.my_unknown_op.default", {x}, contiguous({4}));
  Arg u1 = b.call("op_1", "aten.my_unknown_op.default", {u}, contiguous({4}));
  ir::Program p = lower_graph(b.finish({u1}));
  EXPECT_EQ(p.fallback_ops,
            (std::vector<std::string>{"aten.my_unknown_op.default", "aten.my_unknown_op.default"}));
  // An input buffer is passed to the extern as it is: nothing to realize.
  EXPECT_TRUE(computed(p).empty());
  EXPECT_EQ(p.outputs[0].ref.buffer, "buf1");
}

TEST(Lowering, TupleFallbackOutputsAreOneBufferEach) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 6}));
  std::vector<Arg> parts = b.call_tuple("my_split", "aten.my_split.default", {x},
                                        {contiguous({4, 2}), contiguous({4, 4})});
  ir::Program p = lower_graph(b.finish({parts[1], parts[0]}));
  ASSERT_EQ(p.externs.size(), 1u);
  EXPECT_TRUE(p.externs[0].returns_tuple);
  EXPECT_EQ(p.externs[0].outputs, (std::vector<std::string>{"buf0", "buf1"}));
  ASSERT_EQ(p.outputs.size(), 2u);
  EXPECT_EQ(p.outputs[0].ref.buffer, "buf1");
  EXPECT_EQ(p.outputs[1].ref.buffer, "buf0");
}

TEST(Lowering, GetitemOutOfRangeIsAnError) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  graph::Graph g = b.graph();
  int vm = g.add_call("var_mean", "aten.var_mean.correction", {x, ints({1})}, {},
                      {contiguous({8}), contiguous({8})});
  int gi =
      g.add_call("getitem", "getitem", {Arg::node_ref(vm), Arg::integer(2)}, {}, {contiguous({8})});
  g.set_output({Arg::node_ref(gi)});
  try {
    lower_graph(g);
    FAIL() << "expected a logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("getitem %getitem: index out of range"), std::string::npos)
        << e.what();
  }
}

// A view of an extern call's result is an origin of the kernel that reads it, as the same view
// of a graph input is (it once was not: every strided view of an extern buffer was taken for the
// extern's own result, so kernel headers and provenance.json never named the permute).
TEST(Lowering, ViewOfAnExternResultIsAnOrigin) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg t =
      b.call("permute", "aten.permute.default", {mm, ints({1, 0})}, test::strided({8, 8}, {1, 8}));
  Arg e = b.call("exp", "aten.exp.default", {t}, contiguous({8, 8}));
  ir::Program p = lower_graph(b.finish({e}));
  EXPECT_EQ(p.buffer(p.outputs[0].ref.buffer).origins, (std::set<std::string>{"exp", "permute"}));
}

// ---- outputs ----

TEST(Lowering, AnOutputThatIsAViewOfAnInputNeedsNoBuffer) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg t =
      b.call("permute", "aten.permute.default", {x, ints({1, 0})}, test::strided({8, 4}, {1, 8}));
  ir::Program p = lower_graph(b.finish({t, Arg::none()}));
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "outputs: arg0_1[8, 4] None\n");
  EXPECT_EQ(p.outputs[0].ref.strides, (std::vector<Expr>{1, 8}));
  EXPECT_TRUE(p.outputs[1].is_none);
}

TEST(Lowering, OutputsGetTheStridesEagerGivesThem) {
  // exp of a transposed input: eager keeps the input's memory format (strides {1, 8}).
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg t =
      b.call("permute", "aten.permute.default", {x, ints({1, 0})}, test::strided({8, 4}, {1, 8}));
  Arg e = b.call("exp", "aten.exp.default", {t}, test::strided({8, 4}, {1, 8}));
  ir::Program p = lower_graph(b.finish({e}));
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "buf0: float32[8, 4] strides=[1, 8] fixed  origins: exp, permute\n"
            "  pointwise ranges=[8, 4]\n"
            "    tmp0 = load(arg0_1, v0 + 8*v1) : f32\n"
            "    tmp1 = exp(tmp0) : f32\n"
            "    store buf0[v0 + 8*v1]\n"
            "outputs: buf0[8, 4]\n");
}

// ---- realization thresholds (ir/realize_policy.h) ----

// sum of `n` inputs (n - 1 add nodes), read by `users` exp/neg/... nodes that are the outputs.
graph::Graph sum_of_inputs(int n, int users) {
  GraphBuilder b;
  std::vector<Arg> in;
  for (int k = 0; k < n; ++k) in.push_back(b.input("in" + std::to_string(k), contiguous({8})));
  Arg acc = in[0];
  for (int k = 1; k < n; ++k) {
    acc = b.call("add_" + std::to_string(k), "aten.add.Tensor", {acc, in[k]}, contiguous({8}));
  }
  std::vector<Arg> outs;
  const char* unary[] = {"exp", "neg", "abs", "sin"};
  for (int u = 0; u < users; ++u) {
    outs.push_back(
        b.call(unary[u], std::string("aten.") + unary[u] + ".default", {acc}, contiguous({8})));
  }
  return b.finish(outs);
}

TEST(RealizePolicy, ReusedBodyWithManyReadsIsStored) {
  constexpr int kReads = ir::realize_policy::kReuseReadsThreshold + 1;
  ir::Program p = lower_graph(sum_of_inputs(kReads, 2));
  auto bufs = computed(p);
  // The sum is stored once and both users read it.
  ASSERT_EQ(bufs.size(), 3u) << p.to_text();
  EXPECT_EQ(ir::loaded_buffers(p.buffer(bufs[0].first).body).size(), size_t(kReads));
  EXPECT_EQ(ir::loaded_buffers(p.buffer(bufs[1].first).body),
            (std::vector<std::string>{bufs[0].first}));
  EXPECT_EQ(ir::loaded_buffers(p.buffer(bufs[2].first).body),
            (std::vector<std::string>{bufs[0].first}));
}

TEST(RealizePolicy, ReusedBodyWithFewReadsIsInlined) {
  constexpr int kReads = ir::realize_policy::kReuseReadsThreshold;
  ir::Program p = lower_graph(sum_of_inputs(kReads, 2));
  auto bufs = computed(p);
  // Each user recomputes the sum: two buffers, each reading every input.
  ASSERT_EQ(bufs.size(), 2u) << p.to_text();
  for (const auto& [name, origins] : bufs) {
    EXPECT_EQ(ir::loaded_buffers(p.buffer(name).body).size(), size_t(kReads)) << name;
    EXPECT_TRUE(origins.count("add_1")) << name;
  }
}

TEST(RealizePolicy, SingleUseBodyWithManyReadsIsInlined) {
  constexpr int kReads = ir::realize_policy::kReuseReadsThreshold + 1;
  ir::Program p = lower_graph(sum_of_inputs(kReads, 1));
  EXPECT_EQ(computed(p).size(), 1u) << p.to_text();
}

TEST(RealizePolicy, AccumulatedReadsAreStoredEvenWithOneUser) {
  constexpr int kReads = ir::realize_policy::kAccumulatedReadsThreshold + 1;
  ir::Program p = lower_graph(sum_of_inputs(kReads, 1));
  auto bufs = computed(p);
  ASSERT_EQ(bufs.size(), 2u) << p.to_text();
  EXPECT_EQ(ir::loaded_buffers(p.buffer(bufs[0].first).body).size(), size_t(kReads));
  EXPECT_TRUE(bufs[1].second.count("exp"));
  // One read fewer stays inlined.
  EXPECT_EQ(computed(lower_graph(sum_of_inputs(kReads - 1, 1))).size(), 1u);
}

// A chain of `ops` neg nodes over one input, read by `users` nodes.
graph::Graph neg_chain(int ops, int users) {
  GraphBuilder b;
  Arg acc = b.input("arg0_1", contiguous({8}));
  for (int k = 0; k < ops; ++k) {
    acc = b.call("neg_" + std::to_string(k), "aten.neg.default", {acc}, contiguous({8}));
  }
  std::vector<Arg> outs;
  for (int u = 0; u < users; ++u) {
    outs.push_back(b.call("abs_" + std::to_string(u), "aten.abs.default", {acc}, contiguous({8})));
  }
  return b.finish(outs);
}

TEST(RealizePolicy, ReusedBodyWithManyOpsIsStored) {
  constexpr int kOps = ir::realize_policy::kReuseOpsThreshold + 1;
  EXPECT_EQ(computed(lower_graph(neg_chain(kOps, 2))).size(), 3u);
  EXPECT_EQ(computed(lower_graph(neg_chain(kOps - 1, 2))).size(), 2u);
  EXPECT_EQ(computed(lower_graph(neg_chain(kOps, 1))).size(), 1u);
}

TEST(RealizePolicy, HugeBodiesAreAlwaysStored) {
  constexpr int kOps = ir::realize_policy::kMaxOpsThreshold + 1;
  ir::Program p = lower_graph(neg_chain(kOps, 1));
  auto bufs = computed(p);
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_EQ(ir::count_ops(p.buffer(bufs[0].first).body), kOps);
  EXPECT_EQ(ir::count_ops(p.buffer(bufs[1].first).body), 1);
}

// ---- as_strided_view ----

TensorBox box_of(Value body, std::vector<Expr> sizes, DType dtype = DType::Float32) {
  TensorBox b;
  b.dtype = dtype;
  b.sizes = std::move(sizes);
  b.body = body;
  return b;
}

TEST(AsStridedView, RecoversStridesAndOffset) {
  Expr v0 = ir::index_var(0), v1 = ir::index_var(1);
  auto ref = as_strided_view(box_of(ir::load("buf3", DType::Float32, v0 + v1 * 8 + 3), {8, 4}));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->buffer, "buf3");
  EXPECT_EQ(ref->dtype, DType::Float32);
  EXPECT_EQ(ref->sizes, (std::vector<Expr>{8, 4}));
  EXPECT_EQ(ref->strides, (std::vector<Expr>{1, 8}));
  EXPECT_EQ(ref->offset, Expr(3));
  // A broadcast dim has stride 0; a symbolic stride is kept as it is.
  Expr s0 = Expr::symbol("s0");
  ref = as_strided_view(box_of(ir::load("b", DType::Float32, v0 * s0), {4, 8}));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->strides, (std::vector<Expr>{s0, 0}));
  EXPECT_EQ(ref->offset, Expr(0));
}

TEST(AsStridedView, RejectsWhatIsNotAPlainStridedRead) {
  Expr v0 = ir::index_var(0);
  Value x = ir::load("b", DType::Float32, v0);
  EXPECT_FALSE(as_strided_view(box_of(ir::unary(ir::Op::Exp, x), {4})));
  EXPECT_FALSE(as_strided_view(box_of(ir::cast(x, DType::Float64), {4}, DType::Float64)));
  EXPECT_FALSE(as_strided_view(box_of(x, {4}, DType::Float16)));  // dtype differs
  EXPECT_FALSE(as_strided_view(box_of(ir::load("b", DType::Float32, sym::mod(v0, 2)), {4})));
  Value mask =
      ir::binary(ir::Op::Lt, ir::index_expr(v0, DType::Int64), ir::int_constant(2, DType::Int64));
  EXPECT_FALSE(as_strided_view(box_of(ir::load("b", DType::Float32, v0, mask), {4})));
  EXPECT_FALSE(as_strided_view(TensorBox{}));
}

// Found by the fuzzer (seed 8140): a flipped read has a negative stride, which no torch tensor
// has; mm got reinterpret_tensor(x, (1, 8), (0, -1), 7) and read memory before x. A size-1 dim's
// negative stride is harmless and becomes 0.
TEST(AsStridedView, NegativeStridesAreNoView) {
  Expr v0 = ir::index_var(0), v1 = ir::index_var(1);
  EXPECT_FALSE(as_strided_view(box_of(ir::load("b", DType::Float32, 7 - v1 + v0 * 8), {4, 8})));
  auto ref = as_strided_view(box_of(ir::load("b", DType::Float32, v1 - v0 * 8), {1, 8}));
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->strides, (std::vector<Expr>{0, 1}));
}

// ---- promote (torch.result_type) ----

using K = Operand::Kind;

TEST(Promote, FollowsTorchResultType) {
  // int tensor + float scalar -> the default float dtype, not float64.
  EXPECT_EQ(promote({{K::Tensor, DType::Int64}, {K::Scalar, DType::Float64}}), DType::Float32);
  // A 0-d tensor of the same category does not raise a dimensioned tensor's dtype.
  EXPECT_EQ(promote({{K::Tensor, DType::BFloat16}, {K::ZeroDimTensor, DType::Float32}}),
            DType::BFloat16);
  // bool tensor + int scalar -> int64.
  EXPECT_EQ(promote({{K::Tensor, DType::Bool}, {K::Scalar, DType::Int64}}), DType::Int64);
  // float16 and bfloat16 meet in float32.
  EXPECT_EQ(promote({{K::Tensor, DType::Float16}, {K::Tensor, DType::BFloat16}}), DType::Float32);
}

TEST(Promote, MoreCases) {
  EXPECT_EQ(promote({{K::Tensor, DType::Int32}, {K::Scalar, DType::Int64}}), DType::Int32);
  EXPECT_EQ(promote({{K::Tensor, DType::Float16}, {K::Scalar, DType::Float64}}), DType::Float16);
  EXPECT_EQ(promote({{K::Tensor, DType::Int32}, {K::ZeroDimTensor, DType::Float64}}),
            DType::Float64);
  EXPECT_EQ(promote({{K::Tensor, DType::Int32}, {K::ZeroDimTensor, DType::Int64}}), DType::Int32);
  EXPECT_EQ(promote({{K::Tensor, DType::Int32}, {K::Tensor, DType::Int64}}), DType::Int64);
  EXPECT_EQ(promote({{K::Tensor, DType::UInt8}, {K::Tensor, DType::Int8}}), DType::Int16);
  EXPECT_EQ(promote({{K::Tensor, DType::UInt8}, {K::Tensor, DType::Int32}}), DType::Int32);
  EXPECT_EQ(promote({{K::Tensor, DType::Float32}, {K::Tensor, DType::Float64}}), DType::Float64);
  EXPECT_EQ(promote({{K::Tensor, DType::Bool}, {K::Tensor, DType::Bool}}), DType::Bool);
  EXPECT_EQ(promote({{K::Tensor, DType::Bool}, {K::Scalar, DType::Bool}}), DType::Bool);
  // bool tensor + 0-d int32 tensor + float scalar: each class raises the category in turn.
  EXPECT_EQ(promote({{K::Tensor, DType::Bool},
                     {K::ZeroDimTensor, DType::Int32},
                     {K::Scalar, DType::Float64}}),
            DType::Float32);
  // Only 0-d tensors and scalars: the 0-d tensors decide.
  EXPECT_EQ(promote({{K::ZeroDimTensor, DType::Float16}, {K::Scalar, DType::Float64}}),
            DType::Float16);
  EXPECT_EQ(promote({{K::Scalar, DType::Int64}, {K::Scalar, DType::Float64}}), DType::Float32);
  EXPECT_THROW(promote({}), std::logic_error);
}

TEST(Promote, Opmath) {
  EXPECT_EQ(opmath(DType::BFloat16), DType::Float32);
  EXPECT_EQ(opmath(DType::Float16), DType::Float32);
  EXPECT_EQ(opmath(DType::Float64), DType::Float64);
  EXPECT_EQ(opmath(DType::Int32), DType::Int32);
}

TEST(Registry, KnowsTheFamiliesAndNotTheUnknown) {
  const Registry& r = registry();
  for (const char* op :
       {"aten.add.Tensor", "aten.amax.default", "aten._softmax.default",
        "aten.native_layer_norm.default", "aten.sum.dim_IntList", "aten.mm.default",
        "aten.permute.default", "aten.view.default", "aten.cat.default", "aten.full.default",
        "aten.max_pool2d_with_indices.default"}) {
    EXPECT_TRUE(r.count(op)) << op;
  }
  EXPECT_FALSE(r.count("aten.my_unknown_op.default"));
  std::vector<std::string> ops = lowered_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_NE(std::find(ops.begin(), ops.end(), "aten.add"), ops.end());
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "aten.add.Tensor"), ops.end());
}

}  // namespace
}  // namespace coil::lower
