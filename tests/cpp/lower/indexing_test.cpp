// Tests for lower/indexing.cpp: reads through indirect indices (gather, embedding, x[idx]) are
// lazy bodies whose loads carry the index values and their checks; writes (index_put, scatter)
// are a copy plus a scatter buffer; what the lowerings do not cover falls back to ATen.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"

namespace coil::lower {
namespace {

using graph::Arg;
using graph::DType;
using test::barg;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;
using test::ints;
using test::strided;

// The body text of the last buffer of the program (its only kernel, for the reads below).
std::string last_body(const ir::Program& p) {
  return ir::body_to_text({p.buffers.back().body});
}

TEST(Indexing, EmbeddingReadsTheWeightRowItsIndexNames) {
  ir::Program p = lower_graph(test::embedding_add());
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[10, 16] strides=[16, 1] fixed  (input)\n"
            "arg1_1: int64[4, 3] strides=[3, 1] fixed  (input)\n"
            "arg2_1: float32[3, 16] strides=[16, 1] fixed  (input)\n"
            "buf0: float32[4, 3, 16] strides=[48, 16, 1] fixed  origins: add, embedding\n"
            "  pointwise ranges=[4, 3, 16]\n"
            "    tmp0 = load(arg1_1, 3*v0 + v1) : i64\n"
            "    tmp1 = load(arg0_1, 16*tmp0 + v2, check 0 <= tmp0 < 10) : f32\n"
            "    tmp2 = load(arg2_1, 16*v1 + v2) : f32\n"
            "    tmp3 = add(tmp1, tmp2) : f32\n"
            "    store buf0[48*v0 + 16*v1 + v2]\n"
            "outputs: buf0[4, 3, 16]\n");
  EXPECT_TRUE(p.fallback_ops.empty());
}

TEST(Indexing, IndexPutIsACopyAndAScatterIntoIt) {
  ir::Program p = lower_graph(test::index_put_accumulate());
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[6, 4] strides=[4, 1] fixed  (input)\n"
            "arg1_1: int64[3] strides=[1] fixed  (input)\n"
            "arg2_1: float32[3, 4] strides=[4, 1] fixed  (input)\n"
            "buf0: float32[6, 4] strides=[4, 1] flexible  origins: index_put\n"
            "  pointwise ranges=[6, 4]\n"
            "    tmp0 = load(arg0_1, 4*v0 + v1) : f32\n"
            "    store buf0[4*v0 + v1]\n"
            "buf1: float32[6, 4] strides=[4, 1] flexible  origins: index_put\n"
            "  scatter add into a copy of buf0 ranges=[3, 4]\n"
            "    tmp0 = load(arg2_1, 4*v0 + v1) : f32\n"
            "    tmp1 = load(arg1_1, v0) : i64\n"
            "    tmp2 = index(4*tmp1 + v1, check -6 <= tmp1 < 6) : i64\n"
            "    add buf1[tmp2] <- tmp0\n"
            "outputs: buf1[6, 4]\n");
}

// x f32[4, 5] indexed by a list of index tensors (1: arg1_1, 0: None).
ir::Program index_graph(const std::vector<int>& positions, graph::TensorMeta out,
                        DType index_dtype = DType::Int64) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 5}));
  Arg i = b.input("arg1_1", contiguous({3}, index_dtype));
  std::vector<Arg> list;
  for (int pos : positions) list.push_back(pos ? i : Arg::none());
  Arg r = b.call("index", "aten.index.Tensor", {x, Arg::list_of(list)}, std::move(out));
  return lower_graph(b.finish({r}));
}

TEST(Indexing, IndexWithANoneEntryKeepsThatDim) {
  ir::Program p = index_graph({0, 1}, contiguous({4, 3}));
  EXPECT_EQ(last_body(p),
            "tmp0 = load(arg1_1, v1) : i64\n"
            "tmp1 = load(arg0_1, tmp0 + 5*v0, check -5 <= tmp0 < 5) : f32\n");
}

TEST(Indexing, IndexTensorsBroadcastTogether) {
  ir::Program p = index_graph({1, 1}, contiguous({3}));
  EXPECT_EQ(last_body(p),
            "tmp0 = load(arg1_1, v0) : i64\n"
            "tmp1 = load(arg0_1, tmp0 + 5*tmp0_2, check -5 <= tmp0 < 5, check -4 <= tmp0_2 < 4) "
            ": f32\n");
}

TEST(Indexing, ABooleanMaskFallsBack) {
  ir::Program p = index_graph({1}, contiguous({3, 5}), DType::Bool);
  ASSERT_EQ(p.fallback_ops.size(), 1u);
  EXPECT_EQ(p.fallback_ops[0], "aten.index.Tensor");
}

TEST(Indexing, GatherFromABroadcastInputStillChecksItsIndex) {
  // The gathered dim has stride 0: the load no longer mentions the index, a guard keeps its check.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 4}));
  Arg idx = b.input("arg1_1", contiguous({5, 4}, DType::Int64));
  Arg e = b.call("expand", "aten.expand.default", {x, ints({5, 4})}, strided({5, 4}, {0, 1}));
  Arg g = b.call("gather", "aten.gather.default", {e, iarg(0), idx}, contiguous({5, 4}));
  ir::Program p = lower_graph(b.finish({g}));
  EXPECT_EQ(last_body(p),
            "tmp0 = load(arg0_1, v1) : f32\n"
            "tmp1 = load(arg1_1, 4*v0 + v1) : i64\n"
            "tmp2 = guard(tmp0, check 0 <= tmp1 < 5) : f32\n");
}

TEST(Indexing, AProducerIsComputedAtTheGatheredPosition) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({6, 4}));
  Arg idx = b.input("arg1_1", contiguous({2}, DType::Int64));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({6, 4}));
  Arg s =
      b.call("index_select", "aten.index_select.default", {e, iarg(0), idx}, contiguous({2, 4}));
  ir::Program p = lower_graph(b.finish({s}));
  EXPECT_EQ(p.buffers.size(), 3u);  // two inputs and the result: exp is not stored
  EXPECT_EQ(last_body(p),
            "tmp0 = load(arg1_1, v0) : i64\n"
            "tmp1 = load(arg0_1, 4*tmp0 + v1, check 0 <= tmp0 < 6) : f32\n"
            "tmp2 = exp(tmp1) : f32\n");
}

// nll_loss's backward: a number scattered into zeros, one index per row, is a pointwise select
// (no scatter buffer, no stored zeros) that keeps the index's bounds check.
TEST(Indexing, ANumberScatteredIntoAConstantIsPointwise) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({5, 9}));
  Arg idx = b.input("arg1_1", contiguous({5, 1}, DType::Int64));
  Arg z = b.call("zeros_like", "aten.zeros_like.default", {x}, contiguous({5, 9}));
  Arg s = b.call("scatter", "aten.scatter.value", {z, iarg(1), idx, Arg::floating(-1.0)},
                 contiguous({5, 9}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({5, 9}));
  Arg m = b.call("mul", "aten.mul.Tensor", {s, e}, contiguous({5, 9}));
  ir::Program p = lower_graph(b.finish({m}));
  std::string text = p.to_text();
  EXPECT_EQ(text.find("scatter store"), std::string::npos) << text;
  EXPECT_EQ(p.buffers.size(), 3u) << text;  // the inputs and the product
  EXPECT_NE(text.find("check 0 <= tmp0 < 9"), std::string::npos) << text;
  // Two indices per row may hit one element twice: still a scatter.
  GraphBuilder b2;
  Arg x2 = b2.input("arg0_1", contiguous({5, 9}));
  Arg idx2 = b2.input("arg1_1", contiguous({5, 2}, DType::Int64));
  Arg z2 = b2.call("zeros_like", "aten.zeros_like.default", {x2}, contiguous({5, 9}));
  Arg s2 = b2.call("scatter", "aten.scatter.value", {z2, iarg(1), idx2, Arg::floating(1.0)},
                   contiguous({5, 9}));
  std::string text2 = lower_graph(b2.finish({s2})).to_text();
  EXPECT_NE(text2.find("scatter store into a copy"), std::string::npos) << text2;
}

// x[mask] = v with one value for every selected element: where(mask, v, x), no fallback; values
// in mask order (one row per selected element) stay with ATen.
TEST(Indexing, AMaskFilledWithOneValueIsPointwise) {
  auto graph_with = [](graph::TensorMeta values) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({2, 32}));
    Arg m = b.input("arg1_1", contiguous({2, 32}, DType::Bool));
    Arg v = b.input("arg2_1", values);
    Arg r = b.call("index_put", "aten.index_put.default", {x, Arg::list_of({m}), v},
                   contiguous({2, 32}));
    return b.finish({r});
  };
  ir::Program p = lower_graph(graph_with(contiguous({})));
  EXPECT_TRUE(p.fallback_ops.empty());
  EXPECT_EQ(last_body(p),
            "tmp0 = load(arg1_1, 32*v0 + v1) : b8\n"
            "tmp1 = load(arg2_1, 0) : f32\n"
            "tmp2 = load(arg0_1, 32*v0 + v1) : f32\n"
            "tmp3 = where(tmp0, tmp1, tmp2) : f32\n");
  EXPECT_EQ(lower_graph(graph_with(contiguous({3}))).fallback_ops,
            std::vector<std::string>{"aten.index_put.default"});
}

TEST(Indexing, ScatterReduceWithoutSelfStartsFromTheIdentity) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({3, 2}));
  Arg idx = b.input("arg1_1", contiguous({2, 2}, DType::Int64));
  Arg src = b.input("arg2_1", contiguous({2, 2}));
  Arg r = b.call("scatter_reduce", "aten.scatter_reduce.two",
                 {x, iarg(0), idx, src, Arg::str("amax"), barg(false)}, contiguous({3, 2}));
  ir::Program p = lower_graph(b.finish({r}));
  std::string text = p.to_text();
  EXPECT_NE(text.find("scatter store into a copy of buf0"), std::string::npos) << text;
  EXPECT_NE(text.find("tmp0 = constant(-inf) : f32"), std::string::npos) << text;
  EXPECT_NE(text.find("scatter max into a copy of buf2"), std::string::npos) << text;
  EXPECT_TRUE(p.fallback_ops.empty());
}

graph::Graph scatter_reduce_graph(DType dtype, const std::string& reduce) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({3, 2}, dtype));
  Arg idx = b.input("arg1_1", contiguous({2, 2}, DType::Int64));
  Arg r = b.call("scatter_reduce", "aten.scatter_reduce.two",
                 {x, iarg(0), idx, x, Arg::str(reduce)}, contiguous({3, 2}, dtype));
  return b.finish({r});
}

TEST(Indexing, ForTritonAScatterWithoutAnAtomicFormFallsBack) {
  LowerOptions triton{/*triton=*/true};
  // Float amax (NaN must propagate) and any prod have no atomic: ATen runs them.
  EXPECT_EQ(lower_graph(scatter_reduce_graph(DType::Float32, "amax"), triton).fallback_ops,
            std::vector<std::string>{"aten.scatter_reduce.two"});
  EXPECT_EQ(lower_graph(scatter_reduce_graph(DType::Int64, "prod"), triton).fallback_ops,
            std::vector<std::string>{"aten.scatter_reduce.two"});
  EXPECT_TRUE(lower_graph(scatter_reduce_graph(DType::Int64, "amax"), triton).fallback_ops.empty());
  EXPECT_TRUE(
      lower_graph(scatter_reduce_graph(DType::Float32, "sum"), triton).fallback_ops.empty());
  // The C++ kernels combine serially where they must: everything is lowered.
  EXPECT_TRUE(lower_graph(scatter_reduce_graph(DType::Float32, "amax")).fallback_ops.empty());
}

}  // namespace
}  // namespace coil::lower
