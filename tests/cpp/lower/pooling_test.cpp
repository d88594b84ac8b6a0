// Tests for lower/pooling.cpp: small windows are unrolled pointwise bodies (masked loads where a
// slot leaves the input), large average windows are sum reductions, large max windows fall back,
// and backward ops are gathers (pointwise, no scatter), so the Triton target needs no atomics.
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

// max_pool2d_with_indices(x f32[1, 1, in, in], [k, k], [s, s], [p, p]) -> (values, indices).
graph::Graph max_pool(int64_t in, int64_t k, int64_t s, int64_t p, int64_t out) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 1, in, in}));
  std::vector<Arg> r =
      b.call_tuple("max_pool2d_with_indices", "aten.max_pool2d_with_indices.default",
                   {x, ints({k, k}), ints({s, s}), ints({p, p})},
                   {contiguous({1, 1, out, out}), contiguous({1, 1, out, out}, DType::Int64)});
  return b.finish(r);
}

int count_loads(const ir::Buffer& b, bool masked_only = false) {
  int n = 0;
  for (const Value& v : ir::topo_order({b.body}))
    n += v.op() == ir::Op::Load && (!masked_only || v->masked);
  return n;
}

int count_kind(const ir::Program& p, ir::Buffer::Kind kind) {
  int n = 0;
  for (const ir::Buffer& b : p.buffers) n += b.kind == kind;
  return n;
}

TEST(Pooling, MaxPoolWithoutPaddingScansTheWindowInOrder) {
  // 2x2 windows, stride 2, inside a 4x4 input: no masks. The index starts at the first slot and
  // moves to a later slot only when its value is greater, or NaN.
  ir::Program p = lower_graph(max_pool(4, 2, 2, 0, 2));
  EXPECT_EQ(
      p.to_text(),
      "arg0_1: float32[1, 1, 4, 4] strides=[16, 16, 4, 1] fixed  (input)\n"
      "buf0: float32[1, 1, 2, 2] strides=[4, 4, 2, 1] fixed  origins: max_pool2d_with_indices\n"
      "  pointwise ranges=[1, 1, 2, 2]\n"
      "    tmp0 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3) : f32\n"
      "    tmp1 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 1) : f32\n"
      "    tmp2 = maximum(tmp0, tmp1) : f32\n"
      "    tmp3 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 4) : f32\n"
      "    tmp4 = maximum(tmp2, tmp3) : f32\n"
      "    tmp5 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 5) : f32\n"
      "    tmp6 = maximum(tmp4, tmp5) : f32\n"
      "    store buf0[4*v0 + 4*v1 + 2*v2 + v3]\n"
      "buf1: int64[1, 1, 2, 2] strides=[4, 4, 2, 1] fixed  origins: max_pool2d_with_indices\n"
      "  pointwise ranges=[1, 1, 2, 2]\n"
      "    tmp0 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 5) : f32\n"
      "    tmp1 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3) : f32\n"
      "    tmp2 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 1) : f32\n"
      "    tmp3 = maximum(tmp1, tmp2) : f32\n"
      "    tmp4 = load(arg0_1, 16*v0 + 16*v1 + 8*v2 + 2*v3 + 4) : f32\n"
      "    tmp5 = maximum(tmp3, tmp4) : f32\n"
      "    tmp6 = gt(tmp0, tmp5) : b8\n"
      "    tmp7 = isnan(tmp0) : b8\n"
      "    tmp8 = logical_or(tmp6, tmp7) : b8\n"
      "    tmp9 = index(8*v2 + 2*v3 + 5) : i64\n"
      "    tmp10 = gt(tmp4, tmp3) : b8\n"
      "    tmp11 = isnan(tmp4) : b8\n"
      "    tmp12 = logical_or(tmp10, tmp11) : b8\n"
      "    tmp13 = index(8*v2 + 2*v3 + 4) : i64\n"
      "    tmp14 = gt(tmp2, tmp1) : b8\n"
      "    tmp15 = isnan(tmp2) : b8\n"
      "    tmp16 = logical_or(tmp14, tmp15) : b8\n"
      "    tmp17 = index(8*v2 + 2*v3 + 1) : i64\n"
      "    tmp18 = index(8*v2 + 2*v3) : i64\n"
      "    tmp19 = where(tmp16, tmp17, tmp18) : i64\n"
      "    tmp20 = where(tmp12, tmp13, tmp19) : i64\n"
      "    tmp21 = where(tmp8, tmp9, tmp20) : i64\n"
      "    store buf1[4*v0 + 4*v1 + 2*v2 + v3]\n"
      "outputs: buf0[1, 1, 2, 2] buf1[1, 1, 2, 2]\n");
}

TEST(Pooling, MaxPoolOffsetsAreTheWinningSlotInTheWindow) {
  // coil.max_pool2d_offsets: the same scan, but the second result is the slot (kh * KW + kw) as
  // int8, the same number for every window: what training graphs save instead of indices. With
  // padding, a window whose first slots are missing starts at its first existing slot.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 1, 5, 5}));
  std::vector<Arg> r =
      b.call_tuple("max_pool2d_offsets", "coil.max_pool2d_offsets.default",
                   {x, ints({3, 3}), ints({2, 2}), ints({1, 1}), ints({1, 1}), barg(false)},
                   {contiguous({1, 1, 3, 3}), contiguous({1, 1, 3, 3}, DType::Int8)});
  ir::Program p = lower_graph(b.finish(r));
  EXPECT_TRUE(p.fallback_ops.empty());
  const ir::Buffer* slots = nullptr;
  for (const ir::Buffer& buf : p.buffers)
    if (buf.layout.dtype == DType::Int8) slots = &buf;
  ASSERT_NE(slots, nullptr) << p.to_text();
  std::string text = p.to_text();
  // Slot 8 (the last) is a constant; the first existing slot depends on the window's position.
  EXPECT_NE(text.find("constant(8) : i64"), std::string::npos) << text;
  EXPECT_NE(text.find("index(3*Max(0, -2*v2 + 1) + Max(0, -2*v3 + 1)) : i64"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("index(10*v2"), std::string::npos) << text;  // no input-plane positions
}

TEST(Pooling, MaxPoolPaddingMasksTheLoadsOfMissingSlots) {
  // 3x3 windows, stride 2, padding 1 over 5x5: the first row and column of windows reach into
  // the padding on one side, the last ones on the other. Only the centre slot always exists.
  ir::Program p = lower_graph(max_pool(5, 3, 2, 1, 3));
  EXPECT_TRUE(p.fallback_ops.empty());
  ASSERT_EQ(count_kind(p, ir::Buffer::Kind::Computed), 2) << p.to_text();  // values, indices
  for (const ir::Buffer& b : p.buffers) {
    if (b.kind != ir::Buffer::Kind::Computed) continue;
    EXPECT_EQ(count_loads(b), 9) << b.name;
    EXPECT_EQ(count_loads(b, /*masked_only=*/true), 8) << b.name;
  }
}

TEST(Pooling, MaxPoolBeyondTheUnrollLimitFallsBack) {
  // 6x6 = 36 slots: the ATen op runs it.
  ir::Program p = lower_graph(max_pool(12, 6, 6, 0, 2));
  EXPECT_EQ(p.fallback_ops, std::vector<std::string>{"aten.max_pool2d_with_indices.default"});
}

// avg_pool2d(x f32[1, 1, h, w], k, s, p, ceil_mode=False, count_include_pad) -> f32[1, 1, oh, ow].
graph::Graph avg_pool(std::vector<int64_t> in, std::vector<int64_t> k, std::vector<int64_t> s,
                      std::vector<int64_t> p, std::vector<int64_t> out, bool count_include_pad) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 1, in[0], in[1]}));
  Arg r = b.call("avg_pool2d", "aten.avg_pool2d.default",
                 {x, ints(k), ints(s), ints(p), barg(false), barg(count_include_pad)},
                 contiguous({1, 1, out[0], out[1]}));
  return b.finish({r});
}

TEST(Pooling, AvgPoolDividesByTheWindowItCounts) {
  // Windows of 1x3, stride 2, padding 1 over a row of 4, not counting the padding: the first window
  // holds 2 elements, the second 3. The divisor is computed from the output position.
  ir::Program p = lower_graph(avg_pool({1, 4}, {1, 3}, {1, 2}, {0, 1}, {1, 2}, false));
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[1, 1, 1, 4] strides=[4, 4, 4, 1] fixed  (input)\n"
            "buf0: float32[1, 1, 1, 2] strides=[2, 2, 2, 1] fixed  origins: avg_pool2d\n"
            "  pointwise ranges=[1, 1, 1, 2]\n"
            "    tmp0 = constant(0) : i64\n"
            "    tmp1 = index(2*v3 - 1) : i64\n"
            "    tmp2 = le(tmp0, tmp1) : b8\n"
            "    tmp3 = load(arg0_1, 4*v0 + 4*v1 + 2*v3 - 1, mask=tmp2) : f32\n"
            "    tmp4 = constant(0) : f32\n"
            "    tmp5 = where(tmp2, tmp3, tmp4) : f32\n"
            "    tmp6 = load(arg0_1, 4*v0 + 4*v1 + 2*v3) : f32\n"
            "    tmp7 = add(tmp5, tmp6) : f32\n"
            "    tmp8 = load(arg0_1, 4*v0 + 4*v1 + 2*v3 + 1) : f32\n"
            "    tmp9 = add(tmp7, tmp8) : f32\n"
            "    tmp10 = index(2*v3 - Max(0, 2*v3 - 1) + 2) : i64\n"
            "    tmp11 = cast(tmp10) : f32\n"
            "    tmp12 = truediv(tmp9, tmp11) : f32\n"
            "    store buf0[2*v0 + 2*v1 + 2*v2 + v3]\n"
            "outputs: buf0[1, 1, 1, 2]\n");
}

TEST(Pooling, AvgPoolOfALargeWindowIsASumReduction) {
  // 7x7 = 49 slots: a reduction over the window's slots, then the division.
  ir::Program p = lower_graph(avg_pool({14, 14}, {7, 7}, {7, 7}, {0, 0}, {2, 2}, true));
  EXPECT_TRUE(p.fallback_ops.empty());
  const ir::Buffer* red = nullptr;
  for (const ir::Buffer& b : p.buffers)
    if (b.is_reduction()) red = &b;
  ASSERT_NE(red, nullptr) << p.to_text();
  EXPECT_EQ(red->reduction_ranges, (std::vector<Expr>{7, 7}));
  EXPECT_EQ(ir::body_to_text({red->body}),
            "tmp0 = load(arg0_1, 14*u0 + u1 + 196*v0 + 196*v1 + 98*v2 + 7*v3) : f32\n");
}

TEST(Pooling, AdaptiveAvgPoolWindowsFollowFloorAndCeil) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5) along each dim (sizes 2, 3, 2).
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({1, 5, 5}));
  Arg r = b.call("_adaptive_avg_pool2d", "aten._adaptive_avg_pool2d.default", {x, ints({3, 3})},
                 contiguous({1, 3, 3}));
  ir::Program p = lower_graph(b.finish({r}));
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[1, 5, 5] strides=[25, 5, 1] fixed  (input)\n"
            "buf0: float32[1, 3, 3] strides=[9, 3, 1] fixed  origins: _adaptive_avg_pool2d\n"
            "  pointwise ranges=[1, 3, 3]\n"
            "    tmp0 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3)) : f32\n"
            "    tmp1 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 1) : f32\n"
            "    tmp2 = add(tmp0, tmp1) : f32\n"
            "    tmp3 = index(FloorDiv(5*v2, 3) + 3) : i64\n"
            "    tmp4 = index(FloorDiv(5*v2 + 1, 3) + 2) : i64\n"
            "    tmp5 = le(tmp3, tmp4) : b8\n"
            "    tmp6 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 2, "
            "mask=tmp5) : f32\n"
            "    tmp7 = constant(0) : f32\n"
            "    tmp8 = where(tmp5, tmp6, tmp7) : f32\n"
            "    tmp9 = add(tmp2, tmp8) : f32\n"
            "    tmp10 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 5) : f32\n"
            "    tmp11 = add(tmp9, tmp10) : f32\n"
            "    tmp12 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 6) : f32\n"
            "    tmp13 = add(tmp11, tmp12) : f32\n"
            "    tmp14 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 7, "
            "mask=tmp5) : f32\n"
            "    tmp15 = where(tmp5, tmp14, tmp7) : f32\n"
            "    tmp16 = add(tmp13, tmp15) : f32\n"
            "    tmp17 = index(FloorDiv(5*v1, 3) + 3) : i64\n"
            "    tmp18 = index(FloorDiv(5*v1 + 1, 3) + 2) : i64\n"
            "    tmp19 = le(tmp17, tmp18) : b8\n"
            "    tmp20 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 10, "
            "mask=tmp19) : f32\n"
            "    tmp21 = where(tmp19, tmp20, tmp7) : f32\n"
            "    tmp22 = add(tmp16, tmp21) : f32\n"
            "    tmp23 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 11, "
            "mask=tmp19) : f32\n"
            "    tmp24 = where(tmp19, tmp23, tmp7) : f32\n"
            "    tmp25 = add(tmp22, tmp24) : f32\n"
            "    tmp26 = logical_and(tmp19, tmp5) : b8\n"
            "    tmp27 = load(arg0_1, 25*v0 + 5*FloorDiv(5*v1, 3) + FloorDiv(5*v2, 3) + 12, "
            "mask=tmp26) : f32\n"
            "    tmp28 = where(tmp26, tmp27, tmp7) : f32\n"
            "    tmp29 = add(tmp25, tmp28) : f32\n"
            "    tmp30 = index(FloorDiv(5*v1 + 1, 3) - FloorDiv(5*v1, 3) + 2) : i64\n"
            "    tmp31 = cast(tmp30) : f32\n"
            "    tmp32 = truediv(tmp29, tmp31) : f32\n"
            "    tmp33 = index(FloorDiv(5*v2 + 1, 3) - FloorDiv(5*v2, 3) + 2) : i64\n"
            "    tmp34 = cast(tmp33) : f32\n"
            "    tmp35 = truediv(tmp32, tmp34) : f32\n"
            "    store buf0[9*v0 + 3*v1 + v2]\n"
            "outputs: buf0[1, 3, 3]\n");
}

// max_pool2d_with_indices_backward(grad f32[1, 1, 3, 3], x f32[1, 1, 5, 5], [3, 3], [2, 2],
// [1, 1], [1, 1], False, indices i64[1, 1, 3, 3]).
graph::Graph max_pool_backward() {
  GraphBuilder b;
  Arg grad = b.input("arg0_1", contiguous({1, 1, 3, 3}));
  Arg x = b.input("arg1_1", contiguous({1, 1, 5, 5}));
  Arg idx = b.input("arg2_1", contiguous({1, 1, 3, 3}, DType::Int64));
  Arg r =
      b.call("max_pool2d_with_indices_backward", "aten.max_pool2d_with_indices_backward.default",
             {grad, x, ints({3, 3}), ints({2, 2}), ints({1, 1}), ints({1, 1}), barg(false), idx},
             contiguous({1, 1, 5, 5}));
  return b.finish({r});
}

TEST(Pooling, MaxPoolBackwardGathersFromTheWindowsThatMayHoldEachElement) {
  // Stride 2, 3x3 windows: each input element is in at most 2x2 windows. For each, the saved
  // index says whether the window's gradient goes here.
  ir::Program p = lower_graph(max_pool_backward());
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[1, 1, 3, 3] strides=[9, 9, 3, 1] fixed  (input)\n"
            "arg1_1: float32[1, 1, 5, 5] strides=[25, 25, 5, 1] fixed  (input)\n"
            "arg2_1: int64[1, 1, 3, 3] strides=[9, 9, 3, 1] fixed  (input)\n"
            "buf0: float32[1, 1, 5, 5] strides=[25, 25, 5, 1] fixed  origins: "
            "max_pool2d_with_indices_backward\n"
            "  pointwise ranges=[1, 1, 5, 5]\n"
            "    tmp0 = load(arg2_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2)) : i64\n"
            "    tmp1 = index(5*v2 + v3) : i64\n"
            "    tmp2 = eq(tmp0, tmp1) : b8\n"
            "    tmp3 = load(arg0_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2)) : f32\n"
            "    tmp4 = constant(0) : f32\n"
            "    tmp5 = where(tmp2, tmp3, tmp4) : f32\n"
            "    tmp6 = index(FloorDiv(v3, 2) + 2) : i64\n"
            "    tmp7 = constant(3) : i64\n"
            "    tmp8 = le(tmp6, tmp7) : b8\n"
            "    tmp9 = load(arg2_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 1, "
            "mask=tmp8) : i64\n"
            "    tmp10 = eq(tmp9, tmp1) : b8\n"
            "    tmp11 = load(arg0_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 1, "
            "mask=tmp8) : f32\n"
            "    tmp12 = where(tmp10, tmp11, tmp4) : f32\n"
            "    tmp13 = where(tmp8, tmp12, tmp4) : f32\n"
            "    tmp14 = add(tmp5, tmp13) : f32\n"
            "    tmp15 = index(FloorDiv(v2, 2) + 2) : i64\n"
            "    tmp16 = le(tmp15, tmp7) : b8\n"
            "    tmp17 = load(arg2_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 3, "
            "mask=tmp16) : i64\n"
            "    tmp18 = eq(tmp17, tmp1) : b8\n"
            "    tmp19 = load(arg0_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 3, "
            "mask=tmp16) : f32\n"
            "    tmp20 = where(tmp18, tmp19, tmp4) : f32\n"
            "    tmp21 = where(tmp16, tmp20, tmp4) : f32\n"
            "    tmp22 = add(tmp14, tmp21) : f32\n"
            "    tmp23 = logical_and(tmp16, tmp8) : b8\n"
            "    tmp24 = load(arg2_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 4, "
            "mask=tmp23) : i64\n"
            "    tmp25 = eq(tmp24, tmp1) : b8\n"
            "    tmp26 = load(arg0_1, 9*v0 + 9*v1 + 3*FloorDiv(v2, 2) + FloorDiv(v3, 2) + 4, "
            "mask=tmp23) : f32\n"
            "    tmp27 = where(tmp25, tmp26, tmp4) : f32\n"
            "    tmp28 = where(tmp23, tmp27, tmp4) : f32\n"
            "    tmp29 = add(tmp22, tmp28) : f32\n"
            "    store buf0[25*v0 + 25*v1 + 5*v2 + v3]\n"
            "outputs: buf0[1, 1, 5, 5]\n");
}

TEST(Pooling, ForTritonTheBackwardNeedsNoAtomics) {
  ir::Program p = lower_graph(max_pool_backward(), LowerOptions{/*triton=*/true});
  EXPECT_TRUE(p.fallback_ops.empty());
  EXPECT_EQ(count_kind(p, ir::Buffer::Kind::Scatter), 0);
}

}  // namespace
}  // namespace coil::lower

namespace coil::lower {
namespace {

// pool(producer) over f32[1, 2, 8, 8]: max_pool2d 3x3 stride 2 padding 1 (overlapping windows)
// or avg_pool2d 2x2 stride 2 (disjoint). The producer is relu(x) (cheap) or, like an eval batch
// norm + ReLU, relu((x - a) * b * c + d) over five buffers (costly).
graph::Graph pool_of(bool overlapping, bool costly) {
  GraphBuilder b;
  auto meta = [] { return contiguous({1, 2, 8, 8}); };
  Arg x = b.input("arg0_1", meta());
  Arg v = x;
  if (costly) {
    Arg a = b.input("arg1_1", meta()), s = b.input("arg2_1", meta());
    Arg c = b.input("arg3_1", meta()), d = b.input("arg4_1", meta());
    v = b.call("sub", "aten.sub.Tensor", {v, a}, meta());
    v = b.call("mul", "aten.mul.Tensor", {v, s}, meta());
    v = b.call("mul_1", "aten.mul.Tensor", {v, c}, meta());
    v = b.call("add", "aten.add.Tensor", {v, d}, meta());
  }
  Arg r = b.call("relu", "aten.relu.default", {v}, meta());
  if (overlapping) {
    std::vector<Arg> out =
        b.call_tuple("max_pool2d_with_indices", "aten.max_pool2d_with_indices.default",
                     {r, ints({3, 3}), ints({2, 2}), ints({1, 1})},
                     {contiguous({1, 2, 4, 4}), contiguous({1, 2, 4, 4}, DType::Int64)});
    return b.finish({out[0]});
  }
  Arg out = b.call("avg_pool2d", "aten.avg_pool2d.default", {r, ints({2, 2}), ints({2, 2})},
                   contiguous({1, 2, 4, 4}));
  return b.finish({out});
}

// A buffer holding the producer (its origins include `origin`, and no pooling op).
bool has_buffer_with(const ir::Program& p, const std::string& origin) {
  for (const ir::Buffer& b : p.buffers) {
    bool pooled = false;
    for (const std::string& o : b.origins) pooled |= o.find("pool") != std::string::npos;
    if (b.origins.count(origin) && !pooled) return true;
  }
  return false;
}

TEST(Pooling, OverlappingWindowsReadACostlyProducerFromMemory) {
  // 9 reads per output over 16 outputs per plane = 144 > 64 input elements: the five-buffer
  // producer is stored once instead of being recomputed in every slot.
  ir::Program p = lower_graph(pool_of(/*overlapping=*/true, /*costly=*/true));
  EXPECT_TRUE(has_buffer_with(p, "relu")) << p.to_text();
}

TEST(Pooling, CheapProducersAndDisjointWindowsStayInline) {
  EXPECT_FALSE(has_buffer_with(lower_graph(pool_of(true, false)), "relu"));
  EXPECT_FALSE(has_buffer_with(lower_graph(pool_of(false, true)), "relu"));
}

}  // namespace
}  // namespace coil::lower
