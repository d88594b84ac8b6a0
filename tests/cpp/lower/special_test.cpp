// Tests for lower/special.cpp: the dtype each special function computes in (eager's), the
// compositions that mirror ATen's kernels, and which ops fall back to ATen on Triton targets.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/codegen/triton/triton_ops.h"
#include "coil/lower/lowering.h"

namespace coil::lower {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;

// The body of the graph's only output, as text.
std::string output_body(const graph::Graph& g) {
  ir::Program p = lower_graph(g);
  EXPECT_TRUE(p.fallback_ops.empty()) << p.fallback_ops.at(0);
  const ir::Buffer& b = p.buffer(p.outputs.at(0).ref.buffer);
  return ir::body_to_text({b.body});
}

// target(x, extra...) over a [4] tensor x of dtype `in`, giving dtype `out`.
graph::Graph unary(const std::string& target, DType in, DType out, std::vector<Arg> before = {},
                   std::vector<std::pair<std::string, Arg>> kwargs = {}) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4}, in));
  before.push_back(x);
  Arg r = b.call("op", target, before, contiguous({4}, out), std::move(kwargs));
  return b.finish({r});
}

graph::Graph binary(const std::string& target, DType a, DType b_dtype, DType out) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4}, a));
  Arg y = b.input("arg1_1", contiguous({4}, b_dtype));
  Arg r = b.call("op", target, {x, y}, contiguous({4}, out));
  return b.finish({r});
}

TEST(Special, IntegerInputsPromoteToFloat32) {
  EXPECT_EQ(output_body(unary("aten.digamma.default", DType::Int64, DType::Float32)),
            "tmp0 = load(arg0_1, v0) : i64\n"
            "tmp1 = cast(tmp0) : f32\n"
            "tmp2 = digamma(tmp1) : f32\n");
}

TEST(Special, Bfloat16ComputesInFloat32) {
  EXPECT_EQ(output_body(unary("aten.special_i0e.default", DType::BFloat16, DType::BFloat16)),
            "tmp0 = load(arg0_1, v0) : bf16\n"
            "tmp1 = cast(tmp0) : f32\n"
            "tmp2 = i0e(tmp1) : f32\n"
            "tmp3 = cast(tmp2) : bf16\n");
}

TEST(Special, PolygammaOfOrderTwoAndMoreRunsInTheTensorsDtype) {
  // ATen: digamma for n = 0, trigamma for n = 1 (both in float32 for bfloat16), and
  // calc_polygamma<BFloat16> otherwise.
  EXPECT_EQ(
      output_body(unary("aten.polygamma.default", DType::BFloat16, DType::BFloat16, {iarg(1)})),
      "tmp0 = load(arg0_1, v0) : bf16\n"
      "tmp1 = cast(tmp0) : f32\n"
      "tmp2 = trigamma(tmp1) : f32\n"
      "tmp3 = cast(tmp2) : bf16\n");
  EXPECT_EQ(
      output_body(unary("aten.polygamma.default", DType::BFloat16, DType::BFloat16, {iarg(3)})),
      "tmp0 = constant(3) : bf16\n"
      "tmp1 = load(arg0_1, v0) : bf16\n"
      "tmp2 = polygamma(tmp0, tmp1) : bf16\n");
}

TEST(Special, NextafterStepsInTheTensorsDtype) {
  EXPECT_EQ(output_body(binary("aten.nextafter.default", DType::BFloat16, DType::BFloat16,
                               DType::BFloat16)),
            "tmp0 = load(arg0_1, v0) : bf16\n"
            "tmp1 = load(arg1_1, v0) : bf16\n"
            "tmp2 = nextafter(tmp0, tmp1) : bf16\n");
}

TEST(Special, SignbitOfIntegersIsAComparisonAndOfBoolsFalse) {
  EXPECT_EQ(output_body(unary("aten.signbit.default", DType::Float32, DType::Bool)),
            "tmp0 = load(arg0_1, v0) : f32\n"
            "tmp1 = signbit(tmp0) : b8\n");
  EXPECT_EQ(output_body(unary("aten.signbit.default", DType::Int64, DType::Bool)),
            "tmp0 = load(arg0_1, v0) : i64\n"
            "tmp1 = constant(0) : i64\n"
            "tmp2 = lt(tmp0, tmp1) : b8\n");
  EXPECT_EQ(output_body(unary("aten.signbit.default", DType::Bool, DType::Bool)),
            "tmp0 = constant(0) : b8\n");
}

TEST(Special, RoundWithNegativeDecimalsDividesFirst) {
  EXPECT_EQ(output_body(unary("aten.round.decimals", DType::Float32, DType::Float32, {},
                              {{"decimals", iarg(-2)}})),
            "tmp0 = load(arg0_1, v0) : f32\n"
            "tmp1 = constant(100) : f32\n"
            "tmp2 = truediv(tmp0, tmp1) : f32\n"
            "tmp3 = round(tmp2) : f32\n"
            "tmp4 = mul(tmp3, tmp1) : f32\n");
  EXPECT_EQ(output_body(unary("aten.round.decimals", DType::Float32, DType::Float32, {},
                              {{"decimals", iarg(2)}})),
            "tmp0 = load(arg0_1, v0) : f32\n"
            "tmp1 = constant(100) : f32\n"
            "tmp2 = mul(tmp0, tmp1) : f32\n"
            "tmp3 = round(tmp2) : f32\n"
            "tmp4 = truediv(tmp3, tmp1) : f32\n");
}

TEST(Special, LdexpScalesByAnIntegerExponentAndMultipliesByAFloatOnesPower) {
  EXPECT_EQ(output_body(binary("aten.ldexp.Tensor", DType::Float32, DType::Int64, DType::Float32)),
            "tmp0 = load(arg0_1, v0) : f32\n"
            "tmp1 = load(arg1_1, v0) : i64\n"
            "tmp2 = cast(tmp1) : f32\n"
            "tmp3 = ldexp(tmp0, tmp2) : f32\n");
  // pow(2, e) is rounded to e's dtype (bfloat16) before the product, as eager's two ops are.
  EXPECT_EQ(
      output_body(binary("aten.ldexp.Tensor", DType::Float32, DType::BFloat16, DType::Float32)),
      "tmp0 = load(arg0_1, v0) : f32\n"
      "tmp1 = constant(2) : f32\n"
      "tmp2 = load(arg1_1, v0) : bf16\n"
      "tmp3 = cast(tmp2) : f32\n"
      "tmp4 = pow(tmp1, tmp3) : f32\n"
      "tmp5 = cast(tmp4) : bf16\n"
      "tmp6 = cast(tmp5) : f32\n"
      "tmp7 = mul(tmp0, tmp6) : f32\n");
}

TEST(Special, FminOfFloatsPrefersTheNumberOverNan) {
  EXPECT_EQ(
      output_body(binary("aten.fmin.default", DType::Float32, DType::Float32, DType::Float32)),
      "tmp0 = load(arg0_1, v0) : f32\n"
      "tmp1 = isnan(tmp0) : b8\n"
      "tmp2 = load(arg1_1, v0) : f32\n"
      "tmp3 = isnan(tmp2) : b8\n"
      "tmp4 = minimum(tmp0, tmp2) : f32\n"
      "tmp5 = where(tmp3, tmp0, tmp4) : f32\n"
      "tmp6 = where(tmp1, tmp2, tmp5) : f32\n");
  EXPECT_EQ(output_body(binary("aten.fmax.default", DType::Int64, DType::Int64, DType::Int64)),
            "tmp0 = load(arg0_1, v0) : i64\n"
            "tmp1 = load(arg1_1, v0) : i64\n"
            "tmp2 = maximum(tmp0, tmp1) : i64\n");
}

TEST(Special, ShiftsComputeInThePromotedIntegerType) {
  EXPECT_EQ(output_body(
                binary("aten.bitwise_left_shift.Tensor", DType::Int32, DType::Int64, DType::Int64)),
            "tmp0 = load(arg0_1, v0) : i32\n"
            "tmp1 = cast(tmp0) : i64\n"
            "tmp2 = load(arg1_1, v0) : i64\n"
            "tmp3 = bitwise_left_shift(tmp1, tmp2) : i64\n");
}

TEST(Special, OnTritonOpsWithoutATritonFormFallBack) {
  LowerOptions triton{/*triton=*/true};
  auto fallbacks = [&](const graph::Graph& g) { return lower_graph(g, triton).fallback_ops; };
  using Names = std::vector<std::string>;
  EXPECT_EQ(fallbacks(unary("aten.digamma.default", DType::Float32, DType::Float32)),
            Names{"aten.digamma.default"});
  EXPECT_EQ(fallbacks(binary("aten.special_chebyshev_polynomial_t.default", DType::Float32,
                             DType::Float32, DType::Float32)),
            Names{"aten.special_chebyshev_polynomial_t.default"});
  EXPECT_EQ(fallbacks(binary("aten.nextafter.default", DType::BFloat16, DType::BFloat16,
                             DType::BFloat16)),
            Names{"aten.nextafter.default"});
  EXPECT_TRUE(fallbacks(unary("aten.acosh.default", DType::Float32, DType::Float32)).empty());
  EXPECT_TRUE(
      fallbacks(binary("aten.nextafter.default", DType::Float32, DType::Float32, DType::Float32))
          .empty());
  // Compositions of ops Triton has run everywhere.
  EXPECT_TRUE(
      fallbacks(unary("aten.special_log_ndtr.default", DType::Float64, DType::Float64)).empty());
  // The C++ kernels have every op.
  EXPECT_TRUE(lower_graph(unary("aten.digamma.default", DType::Float32, DType::Float32))
                  .fallback_ops.empty());
}

// The lowering's has_op_text answers must match what the Triton op table renders.
TEST(Special, TritonHasATextExactlyWhereItSaysSo) {
  int checked = 0;
  for (int i = 0; i <= static_cast<int>(ir::Op::Where); ++i) {
    auto op = static_cast<ir::Op>(i);
    int arity = ir::op_arity(op);
    // Casts have their own text (cast_text); where() is rendered by the kernel walk.
    if (op == ir::Op::Cast || (arity != 1 && arity != 2)) continue;
    for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
      bool rendered = true;
      try {
        if (arity == 1) {
          codegen::triton::unary_text(op, "a", d);
        } else {
          codegen::triton::binary_text(op, "a", "b", d);
        }
      } catch (const std::logic_error&) {
        rendered = false;
      }
      EXPECT_EQ(rendered, codegen::triton::has_op_text(op, d))
          << ir::op_name(op) << " " << graph::dtype_name(d);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace coil::lower
