// Lowerings of elementwise special functions: inverse hyperbolics, the error and gamma function
// families, Bessel and Airy functions, orthogonal polynomials, incomplete gamma and zeta, and the
// float utilities next to them (signbit, copysign, fmin/fmax, hypot, nextafter, ldexp, angle, bit
// shifts, round with decimals).
//
// Each computes what eager's CPU kernel computes, in the dtype it computes in: float32 for
// bfloat16/float16 inputs (except nextafter and polygamma, see ir/scalar.h), float64 for float64,
// integer and bool inputs promoted to the output's float dtype. Where ATen composes an op from
// others (log_ndtr, angle, round with decimals, ldexp of a float exponent, spherical_bessel_j0),
// the body is that composition, so it needs no op of its own and runs on every target.
//
// On Triton targets, an op the Triton op table has no form for (codegen::triton::has_op_text:
// digamma, zeta, the polynomials, ...) is left to the ATen fallback.
//
// Tests: tests/cpp/lower/special_test.cpp (IR text), tests/python/test_special.py (numerics).
#include <cmath>

#include "coil/codegen/triton/triton_ops.h"
#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

namespace {

// Whether the target can render op computing in dtype d; a lowering that says no leaves the node
// to the ATen fallback.
bool renders(const Lowering& L, Op op, DType d) {
  return !L.options().triton || codegen::triton::has_op_text(op, d);
}

// op over the node's first `arity` positional inputs (tensors or numbers), computed in the
// output's opmath dtype: the float functions, whose integer and bool inputs promote to float.
void reg_float(Registry& r, const std::string& target, size_t arity, Op op) {
  r[target] = [arity, op](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    DType d = opmath(L.meta(n).dtype);
    if (!renders(L, op, d)) return {};
    auto inputs = positional(n, arity);
    return {make_pointwise(
        L, n, inputs, d,
        [op](const std::vector<Value>& v) {
          return v.size() == 1 ? ir::unary(op, v[0]) : ir::binary(op, v[0], v[1]);
        },
        common_dtype(L, inputs))};
  };
}

// The float functions of two arguments and their number overloads (`x_scalar`, `self_scalar`,
// `Scalar`, ...: the same body, with a constant operand).
void reg_float2(Registry& r, const std::string& name, Op op,
                std::initializer_list<const char*> overloads) {
  for (const char* overload : overloads) reg_float(r, "aten." + name + "." + overload, 2, op);
}

Value fconst(double v, DType d) {
  return ir::constant(v, d);
}

// log(Phi(x)), as ATen's calc_log_ndtr: through erfcx below -1, where 1 - erfc/2 loses all
// precision, and through log1p elsewhere.
Value log_ndtr(Value x) {
  DType d = x.dtype();
  Value t = ir::mul(x, fconst(M_SQRT1_2, d));
  Value low = ir::sub(
      ir::unary(Op::Log, ir::div(ir::unary(Op::Erfcx, ir::unary(Op::Neg, t)), fconst(2.0, d))),
      ir::mul(t, t));
  Value high =
      ir::unary(Op::Log1p, ir::unary(Op::Neg, ir::div(ir::unary(Op::Erfc, t), fconst(2.0, d))));
  return ir::where(ir::binary(Op::Lt, x, fconst(-1.0, d)), low, high);
}

// sin(x) / x, with ATen's Taylor series below |x| = 0.5 (spherical_bessel_j0_forward) and 0 at
// infinity.
Value spherical_bessel_j0(Value x) {
  DType d = x.dtype();
  // The series' coefficients (-1)^k / (2k + 1)!, innermost first, each rounded once to d as ATen's
  // T(1.0) / T(n) is.
  const double factorials[] = {6227020800.0, 39916800.0, 362880.0, 5040.0, 120.0, 6.0};
  auto coefficient = [d](int k, double f) {
    double sign = k % 2 ? -1.0 : 1.0;
    if (d == DType::Float64) return fconst(sign / f, d);
    return fconst(static_cast<float>(sign) / static_cast<float>(f), d);
  };
  Value x2 = ir::mul(x, x);
  Value acc = coefficient(6, factorials[0]);
  for (int i = 1; i < 6; ++i) acc = ir::add(coefficient(6 - i, factorials[i]), ir::mul(x2, acc));
  Value series = ir::add(fconst(1.0, d), ir::mul(x2, acc));
  Value ratio = ir::div(ir::unary(Op::Sin, x), x);
  Value small = ir::binary(Op::Lt, ir::unary(Op::Abs, x), fconst(0.5, d));
  return ir::where(ir::unary(Op::IsInf, x), fconst(0.0, d), ir::where(small, series, ratio));
}

// angle of a real number: pi below zero, 0 otherwise, NaN kept.
Value angle(Value x) {
  DType d = x.dtype();
  Value pi_or_zero =
      ir::where(ir::binary(Op::Lt, x, fconst(0.0, d)), fconst(M_PI, d), fconst(0.0, d));
  return ir::where(ir::unary(Op::IsNan, x), x, pi_or_zero);
}

// fmin/fmax: a NaN operand loses to a number (torch.minimum/maximum propagate it instead).
Value fmin_fmax(Value a, Value b, bool is_max) {
  DType d = a.dtype();
  if (d == DType::Bool) return ir::binary(is_max ? Op::LogicalOr : Op::LogicalAnd, a, b);
  Value m = ir::binary(is_max ? Op::Maximum : Op::Minimum, a, b);
  if (!graph::is_floating(d)) return m;
  return ir::where(ir::unary(Op::IsNan, a), b, ir::where(ir::unary(Op::IsNan, b), a, m));
}

std::vector<TensorBox> lower_signbit(Lowering& L, const Node& n) {
  auto inputs = positional(n, 1);
  DType in = L.box_of(n, 0).dtype;
  DType d = graph::is_floating(in) ? opmath(in) : in;
  if (!renders(L, Op::SignBit, d)) return {};
  return {make_pointwise(L, n, inputs, d, [](const std::vector<Value>& v) {
    DType t = v[0].dtype();
    if (graph::is_floating(t)) return ir::unary(Op::SignBit, v[0]);
    if (t == DType::Bool || t == DType::UInt8) return ir::int_constant(0, DType::Bool);
    return ir::binary(Op::Lt, v[0], ir::int_constant(0, t));
  })};
}

// polygamma(n, x): ATen's kernel is digamma for n = 0 and trigamma for n = 1 (both computed in
// float32 for reduced-precision inputs); for n >= 2 calc_polygamma runs in the tensor's dtype.
std::vector<TensorBox> lower_polygamma(Lowering& L, const Node& n) {
  auto order = L.int_arg(n.args.at(0)).as_int();
  if (!order || *order < 0) return {};
  DType out = L.meta(n).dtype;
  std::vector<const Arg*> inputs = {&n.args.at(1)};
  Op op = *order == 0 ? Op::Digamma : (*order == 1 ? Op::Trigamma : Op::Polygamma);
  DType d = op == Op::Polygamma ? out : opmath(out);
  if (!renders(L, op, d)) return {};
  int64_t k = *order;
  return {make_pointwise(
      L, n, inputs, d,
      [op, k](const std::vector<Value>& v) {
        if (op != Op::Polygamma) return ir::unary(op, v[0]);
        return ir::binary(op, ir::constant(static_cast<double>(k), v[0].dtype()), v[0]);
      },
      common_dtype(L, inputs))};
}

// nextafter steps to the neighbouring value of the tensor's own dtype.
std::vector<TensorBox> lower_nextafter(Lowering& L, const Node& n) {
  DType d = L.meta(n).dtype;
  if (!renders(L, Op::NextAfter, d)) return {};
  auto inputs = positional(n, 2);
  return {make_pointwise(L, n, inputs, d, [](const std::vector<Value>& v) {
    return ir::binary(Op::NextAfter, v[0], v[1]);
  })};
}

// ldexp(x, e) = x * 2^e. ATen (2.13) scales by the exponent (std::ldexp) when e is an integer
// tensor and x a float one; otherwise it multiplies by pow(2, e) computed in e's float dtype (the
// default float32 for integer e). Torch versions that always multiply differ only where 2^e
// alone over- or underflows.
std::vector<TensorBox> lower_ldexp(Lowering& L, const Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  const Arg& self = n.args.at(0);
  const Arg& other = n.args.at(1);
  DType self_dtype = L.operand(self).dtype;
  DType other_dtype = L.operand(other).dtype;
  DType d = opmath(m.dtype);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  Value x = read_operand(L, self, m.sizes, idx, d);
  Value body;
  if (graph::is_floating(self_dtype) && !graph::is_floating(other_dtype)) {
    if (!renders(L, Op::Ldexp, d)) return {};
    body = ir::binary(Op::Ldexp, x, read_operand(L, other, m.sizes, idx, d));
  } else {
    DType p = graph::is_floating(other_dtype) ? other_dtype : DType::Float32;
    Value e = read_operand(L, other, m.sizes, idx, opmath(p));
    Value pow2 = ir::cast(ir::binary(Op::Pow, fconst(2.0, opmath(p)), e), p);
    body = ir::mul(x, ir::cast(ir::cast(pow2, m.dtype), d));
  }
  TensorBox out{m.dtype, m.device, m.sizes, ir::cast(body, m.dtype), {}};
  out.origins = inlined_origins(L, {&self, &other});
  return {out};
}

// round(x, decimals): ATen's round_decimals_kernel scales by 10^|decimals| in opmath, dividing
// first for negative decimals.
std::vector<TensorBox> lower_round_decimals(Lowering& L, const Node& n) {
  const Arg* decimals = L.arg(n, 1, "decimals");
  int64_t k = decimals ? L.int_arg(*decimals).as_int().value_or(0) : 0;
  DType out = L.meta(n).dtype;
  DType d = opmath(out);
  return {make_pointwise(L, n, positional(n, 1), d, [k](const std::vector<Value>& v) {
    Value x = v[0];
    if (!graph::is_floating(x.dtype())) return x;
    if (k == 0) return ir::unary(Op::Round, x);
    DType t = x.dtype();
    Value ten = fconst(std::pow(10.0, static_cast<double>(k < 0 ? -k : k)), t);
    if (k < 0) return ir::mul(ir::unary(Op::Round, ir::div(x, ten)), ten);
    return ir::div(ir::unary(Op::Round, ir::mul(x, ten)), ten);
  })};
}

// Bit shifts in the promoted integer dtype, with ATen's results for shifts outside [0, bits).
// `x << 2` in Python traces to aten.__lshift__.Scalar, the same function under another name.
void reg_shift(Registry& r, const std::string& name, Op op) {
  bool dunder = name.rfind("__", 0) == 0;
  for (const char* overload :
       dunder ? std::vector<const char*>{".Tensor", ".Scalar"}
              : std::vector<const char*>{".Tensor", ".Tensor_Scalar", ".Scalar_Tensor"}) {
    r["aten." + name + overload] = [op](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      DType d = L.meta(n).dtype;
      if (graph::is_floating(d) || d == DType::Bool || !renders(L, op, d)) return {};
      auto inputs = positional(n, 2);
      return {make_pointwise(
          L, n, inputs, d, [op](const std::vector<Value>& v) { return ir::binary(op, v[0], v[1]); },
          common_dtype(L, inputs))};
    };
  }
}

}  // namespace

void register_special(Registry& r) {
  const std::pair<const char*, Op> unary[] = {
      {"acosh", Op::Acosh},
      {"asinh", Op::Asinh},
      {"atanh", Op::Atanh},
      {"log10", Op::Log10},
      {"erfc", Op::Erfc},
      {"erfinv", Op::Erfinv},
      {"lgamma", Op::Lgamma},
      {"digamma", Op::Digamma},
      {"i0", Op::I0},
      {"special_i0e", Op::I0e},
      {"special_i1", Op::I1},
      {"special_i1e", Op::I1e},
      {"special_erfcx", Op::Erfcx},
      {"special_ndtri", Op::Ndtri},
      {"special_bessel_j0", Op::BesselJ0},
      {"special_bessel_j1", Op::BesselJ1},
      {"special_bessel_y0", Op::BesselY0},
      {"special_bessel_y1", Op::BesselY1},
      {"special_modified_bessel_i0", Op::BesselI0},
      {"special_modified_bessel_i1", Op::BesselI1},
      {"special_modified_bessel_k0", Op::BesselK0},
      {"special_modified_bessel_k1", Op::BesselK1},
      {"special_scaled_modified_bessel_k0", Op::ScaledBesselK0},
      {"special_scaled_modified_bessel_k1", Op::ScaledBesselK1},
      {"special_airy_ai", Op::AiryAi},
  };
  for (const auto& [name, op] : unary)
    reg_float(r, std::string("aten.") + name + ".default", 1, op);

  reg_float2(r, "copysign", Op::CopySign, {"Tensor", "Scalar"});
  reg_float2(r, "hypot", Op::Hypot, {"default"});
  reg_float2(r, "igamma", Op::Igamma, {"default"});
  reg_float2(r, "igammac", Op::Igammac, {"default"});
  reg_float2(r, "special_zeta", Op::Zeta, {"default", "self_scalar", "other_scalar"});
  const std::pair<const char*, Op> polynomials[] = {
      {"chebyshev_polynomial_t", Op::ChebyshevT},
      {"chebyshev_polynomial_u", Op::ChebyshevU},
      {"chebyshev_polynomial_v", Op::ChebyshevV},
      {"chebyshev_polynomial_w", Op::ChebyshevW},
      {"shifted_chebyshev_polynomial_t", Op::ShiftedChebyshevT},
      {"shifted_chebyshev_polynomial_u", Op::ShiftedChebyshevU},
      {"shifted_chebyshev_polynomial_v", Op::ShiftedChebyshevV},
      {"shifted_chebyshev_polynomial_w", Op::ShiftedChebyshevW},
      {"hermite_polynomial_h", Op::HermiteH},
      {"hermite_polynomial_he", Op::HermiteHe},
      {"laguerre_polynomial_l", Op::LaguerreL},
      {"legendre_polynomial_p", Op::LegendreP},
  };
  for (const auto& [name, op] : polynomials) {
    reg_float2(r, std::string("special_") + name, op, {"default", "x_scalar", "n_scalar"});
  }

  // Compositions (see the header comment).
  const std::pair<const char*, Value (*)(Value)> composed[] = {
      {"aten.special_log_ndtr.default", log_ndtr},
      {"aten.special_spherical_bessel_j0.default", spherical_bessel_j0},
      {"aten.angle.default", angle},
  };
  for (const auto& [target, fn] : composed) {
    r[target] = [fn = fn](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      auto inputs = positional(n, 1);
      return {make_pointwise(L, n, inputs, opmath(L.meta(n).dtype),
                             [fn](const std::vector<Value>& v) { return fn(v[0]); })};
    };
  }
  for (const char* name : {"fmin", "fmax"}) {
    bool is_max = std::string(name) == "fmax";
    r[std::string("aten.") + name + ".default"] =
        [is_max](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      auto inputs = positional(n, 2);
      return {make_pointwise(
          L, n, inputs, opmath(L.meta(n).dtype),
          [is_max](const std::vector<Value>& v) { return fmin_fmax(v[0], v[1], is_max); },
          common_dtype(L, inputs))};
    };
  }
  r["aten.signbit.default"] = lower_signbit;
  r["aten.polygamma.default"] = lower_polygamma;
  r["aten.nextafter.default"] = lower_nextafter;
  r["aten.ldexp.Tensor"] = lower_ldexp;
  r["aten.round.decimals"] = lower_round_decimals;
  reg_shift(r, "bitwise_left_shift", Op::ShiftLeft);
  reg_shift(r, "bitwise_right_shift", Op::ShiftRight);
  reg_shift(r, "__lshift__", Op::ShiftLeft);
  reg_shift(r, "__rshift__", Op::ShiftRight);
}

}  // namespace coil::lower
