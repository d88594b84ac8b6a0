// Written-out attention -> one scaled_dot_product_attention call (lower/attention_pattern.h).
#include "coil/lower/attention_pattern.h"

#include <gtest/gtest.h>

#include <limits>

#include "../test_graphs.h"

namespace coil::lower {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::ints;
using test::strided;

struct Options {
  bool scores_read_twice = false;  // the scores also an output: nothing may replace them
  bool broadcast_v = false;        // v expanded over the heads
  bool k_transposed = true;        // q @ k^T (else q @ k: no attention)
  const char* scale_op = "aten.div.Tensor";
  // bf16 products, the softmax in float32 between two casts (what CUDA autocast leaves);
  // with cast_back = false the probabilities stay float32 (no product could read them).
  bool autocast = false;
  bool cast_back = true;
  bool mask = false;       // a [2, 1, 1, 16] additive mask on the scaled scores
  bool bool_mask = false;  // a [16, 16] bool mask whose true places get -inf (masked_fill)
  double fill = -std::numeric_limits<double>::infinity();
  // Dropout(0.1) on the probabilities before the second product, as a training graph traces it
  // before AOTAutograd: "native" (native_dropout and its getitems, CUDA) or "cpu" (x *
  // bernoulli_(empty_like(x), 0.9) / 0.9).
  const char* dropout = nullptr;
  // Under autocast: the dropout on the float32 probabilities, before their cast down (what CUDA
  // autocast gives: dropout keeps its input's dtype); else after it.
  bool dropout_in_float32 = false;
};

// softmax(q @ k^T / 8) @ v on [2, 4, 16, 8] q, k, v, as AOTAutograd leaves it.
graph::Graph attention(const Options& o) {
  GraphBuilder b;
  graph::DType dt = o.autocast ? graph::DType::BFloat16 : graph::DType::Float32;
  auto contiguous = [dt](std::vector<sym::Expr> sizes) { return test::contiguous(sizes, dt); };
  auto strided = [dt](std::vector<sym::Expr> sizes, std::vector<sym::Expr> strides) {
    return test::strided(sizes, strides, dt);
  };
  auto cast = [&](const char* name, Arg x, graph::DType to) {
    std::vector<std::pair<std::string, Arg>> kwargs = {{"dtype", Arg::dtype_of(to)}};
    if (to == graph::DType::Float32) {  // how CUDA autocast casts up
      kwargs.emplace_back("layout", Arg::enum_text("torch.strided"));
      kwargs.emplace_back("device", Arg::enum_text("device:cpu"));
    }
    return b.call(name, "aten._to_copy.default", {x}, test::contiguous({2, 4, 16, 16}, to), kwargs);
  };
  Arg q = b.input("arg0_1", contiguous({2, 4, 16, 8}));
  Arg k = b.input("arg1_1", contiguous({2, 4, 16, 8}));
  Arg v = b.input("arg2_1", contiguous({2, o.broadcast_v ? 1 : 4, 16, 8}));
  Arg mask = o.mask ? b.input("arg3_1", contiguous({2, 1, 1, 16})) : Arg{};
  Arg drop =
      o.bool_mask ? b.input("arg4_1", test::contiguous({16, 16}, graph::DType::Bool)) : Arg{};
  Arg eq =
      b.call("expand", "aten.expand.default", {q, ints({2, 4, 16, 8})}, contiguous({2, 4, 16, 8}));
  Arg vq = b.call("view", "aten.view.default", {eq, ints({8, 16, 8})}, contiguous({8, 16, 8}));
  Arg kt = o.k_transposed ? b.call("permute", "aten.permute.default", {k, ints({0, 1, 3, 2})},
                                   strided({2, 4, 8, 16}, {512, 128, 1, 8}))
                          : b.call("view_k", "aten.view.default", {k, ints({2, 4, 8, 16})},
                                   contiguous({2, 4, 8, 16}));
  Arg ek =
      b.call("expand_1", "aten.expand.default", {kt, ints({2, 4, 8, 16})},
             o.k_transposed ? strided({2, 4, 8, 16}, {512, 128, 1, 8}) : contiguous({2, 4, 8, 16}));
  Arg vk = b.call("view_1", "aten.view.default", {ek, ints({8, 8, 16})}, contiguous({8, 8, 16}));
  Arg bmm = b.call("bmm", "aten.bmm.default", {vq, vk}, contiguous({8, 16, 16}));
  Arg s4 = b.call("view_2", "aten.view.default", {bmm, ints({2, 4, 16, 16})},
                  contiguous({2, 4, 16, 16}));
  Arg sc = b.call("div", o.scale_op, {s4, test::farg(8.0)}, contiguous({2, 4, 16, 16}));
  if (o.mask) {
    sc = b.call("add", "aten.add.Tensor", {sc, mask}, contiguous({2, 4, 16, 16}));
  }
  if (o.bool_mask) {
    sc = b.call("masked_fill", "aten.masked_fill.Scalar", {sc, drop, test::farg(o.fill)},
                contiguous({2, 4, 16, 16}));
  }
  if (o.autocast) sc = cast("_to_copy", sc, graph::DType::Float32);
  Arg p = b.call("_softmax", "aten._softmax.default", {sc, test::iarg(-1), test::barg(false)},
                 o.autocast ? test::contiguous({2, 4, 16, 16}) : contiguous({2, 4, 16, 16}));
  // The dropout, in the probabilities' dtype where it runs.
  auto dropout = [&](Arg x, graph::DType d) {
    auto like = [d] { return test::contiguous({2, 4, 16, 16}, d); };
    if (std::string(o.dropout) == "native") {
      return b
          .call_tuple("native_dropout", "aten.native_dropout.default",
                      {x, test::farg(0.1), test::barg(true)},
                      {like(), test::contiguous({2, 4, 16, 16}, graph::DType::Bool)})
          .at(0);
    }
    Arg e = b.call("empty_like", "aten.empty_like.default", {x}, like());
    Arg r = b.call("bernoulli_", "aten.bernoulli_.float", {e, test::farg(0.9)}, like());
    Arg dv = b.call("div_", "aten.div_.Scalar", {r, test::farg(0.9)}, like());
    return b.call("mul_1", "aten.mul.Tensor", {x, dv}, like());
  };
  if (o.dropout && o.autocast && o.dropout_in_float32) p = dropout(p, graph::DType::Float32);
  if (o.autocast && o.cast_back) p = cast("_to_copy_1", p, dt);
  if (o.dropout && !(o.autocast && o.dropout_in_float32)) p = dropout(p, dt);
  Arg ep = b.call("expand_2", "aten.expand.default", {p, ints({2, 4, 16, 16})},
                  contiguous({2, 4, 16, 16}));
  Arg vp = b.call("view_3", "aten.view.default", {ep, ints({8, 16, 16})}, contiguous({8, 16, 16}));
  Arg ev = b.call("expand_3", "aten.expand.default", {v, ints({2, 4, 16, 8})},
                  contiguous({2, 4, 16, 8}));
  Arg vv = b.call("view_4", "aten.view.default", {ev, ints({8, 16, 8})}, contiguous({8, 16, 8}));
  Arg out = b.call("bmm_1", "aten.bmm.default", {vp, vv}, contiguous({8, 16, 8}));
  Arg o4 =
      b.call("view_5", "aten.view.default", {out, ints({2, 4, 16, 8})}, contiguous({2, 4, 16, 8}));
  if (o.scores_read_twice) return b.finish({o4, p});
  return b.finish({o4});
}

bool mentions(const graph::Graph& g, const std::string& part) {
  return g.to_text().find(part) != std::string::npos;
}

TEST(AttentionPattern, TheWrittenOutFormBecomesOneCall) {
  std::vector<std::string> notes;
  std::optional<graph::Graph> rewritten = rewrite_attention(attention({}), &notes);
  ASSERT_TRUE(rewritten.has_value());
  const graph::Graph& g = *rewritten;
  EXPECT_EQ(
      g.to_text(),
      "%arg0_1 : f32[2, 4, 16, 8]{512, 128, 8, 1} = placeholder\n"
      "%arg1_1 : f32[2, 4, 16, 8]{512, 128, 8, 1} = placeholder\n"
      "%arg2_1 : f32[2, 4, 16, 8]{512, 128, 8, 1} = placeholder\n"
      "%bmm_1_attention : f32[2, 4, 16, 8]{512, 128, 8, 1} = "
      "aten.scaled_dot_product_attention.default(%arg0_1, %arg1_1, %arg2_1, scale=0.125)\n"
      "%bmm_1 : f32[8, 16, 8]{128, 8, 1} = aten.view.default(%bmm_1_attention, [8, 16, 8])\n"
      "%view_5 : f32[2, 4, 16, 8]{512, 128, 8, 1} = aten.view.default(%bmm_1, [2, 4, 16, 8])\n"
      "return (%view_5,)\n");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("replaced by one scaled_dot_product_attention call"), std::string::npos);
}

TEST(AttentionPattern, AMultiplyingScaleIsTheScaleItself) {
  Options o;
  o.scale_op = "aten.mul.Tensor";
  std::optional<graph::Graph> g = rewrite_attention(attention(o));
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(mentions(*g, "scale=8.0)")) << g->to_text();
}

TEST(AttentionPattern, AutocastsFloat32SoftmaxBetweenBf16ProductsIsAbsorbed) {
  Options o;
  o.autocast = true;
  std::optional<graph::Graph> g = rewrite_attention(attention(o));
  ASSERT_TRUE(g.has_value());
  EXPECT_FALSE(mentions(*g, "_to_copy")) << g->to_text();
  EXPECT_TRUE(mentions(*g, "%bmm_1_attention : bf16[2, 4, 16, 8]")) << g->to_text();
  std::vector<AttentionMatch> found = find_attention(attention(o));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].absorbed.size(), 16u);  // the 14 nodes from q, k, v to bmm_1, and both casts
}

TEST(AttentionPattern, AnAdditiveMaskBecomesTheAttentionMask) {
  Options o;
  o.mask = true;
  std::optional<graph::Graph> g = rewrite_attention(attention(o));
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(mentions(*g, "(%arg0_1, %arg1_1, %arg2_1, attn_mask=%arg3_1, scale=0.125)"))
      << g->to_text();
  EXPECT_FALSE(mentions(*g, "aten.add.Tensor")) << g->to_text();
}

TEST(AttentionPattern, MinusInfinityWhereABoolMaskIsTrueIsItsNegationAsTheAttentionMask) {
  Options o;
  o.bool_mask = true;
  std::optional<graph::Graph> g = rewrite_attention(attention(o));
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(mentions(*g, "= aten.logical_not.default(%arg4_1)")) << g->to_text();
  EXPECT_TRUE(mentions(*g, "attn_mask=%bmm_1_keep, scale=0.125)")) << g->to_text();
  o.fill = -1e4;  // a finite fill is no mask: a row masked out entirely would differ
  EXPECT_TRUE(find_attention(attention(o)).empty());
}

TEST(AttentionPattern, AFloat32SoftmaxNotCastBackIsNoAttention) {
  Options o;
  o.autocast = true;
  o.cast_back = false;
  EXPECT_TRUE(find_attention(attention(o)).empty());
}

TEST(AttentionPattern, WhatIsNotExactlyAttentionStaysAsItIs) {
  // The probabilities read by another node (a training graph saves them), v broadcast over the
  // heads, or q @ k without the transpose: nothing to rewrite (and no copy of the graph).
  Options twice, broadcast, plain;
  twice.scores_read_twice = true;
  broadcast.broadcast_v = true;
  plain.k_transposed = false;
  for (const Options& o : {twice, broadcast, plain}) {
    std::vector<std::string> notes;
    EXPECT_FALSE(rewrite_attention(attention(o), &notes).has_value());
    EXPECT_TRUE(notes.empty());
  }
}

TEST(AttentionPattern, DropoutOnTheProbabilitiesIsTheCallsDropoutWhereAsked) {
  // Both forms dropout traces to: absorbed with its probability where random numbers need not
  // be eager's (training graphs before AOTAutograd), else the attention stays written out.
  for (const char* form : {"native", "cpu"}) {
    Options o;
    o.dropout = form;
    std::vector<AttentionMatch> found = find_attention(attention(o), /*dropout=*/true);
    ASSERT_EQ(found.size(), 1u) << form;
    EXPECT_DOUBLE_EQ(found[0].dropout, 0.1) << form;
    EXPECT_DOUBLE_EQ(found[0].scale, 0.125) << form;
    EXPECT_TRUE(find_attention(attention(o)).empty()) << form;
    EXPECT_FALSE(rewrite_attention(attention(o)).has_value()) << form;
  }
  // Under autocast, on either side of the probabilities' cast down to bf16.
  for (const char* form : {"native", "cpu"}) {
    for (bool in_float32 : {true, false}) {
      Options o;
      o.autocast = true;
      o.dropout = form;
      o.dropout_in_float32 = in_float32;
      std::vector<AttentionMatch> found = find_attention(attention(o), /*dropout=*/true);
      ASSERT_EQ(found.size(), 1u) << form << " " << in_float32;
      EXPECT_DOUBLE_EQ(found[0].dropout, 0.1) << form << " " << in_float32;
      EXPECT_TRUE(find_attention(attention(o)).empty()) << form << " " << in_float32;
    }
  }
  // Without a dropout nothing changes when dropout is allowed.
  std::vector<AttentionMatch> plain = find_attention(attention({}), /*dropout=*/true);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].dropout, 0.0);
}

}  // namespace
}  // namespace coil::lower
