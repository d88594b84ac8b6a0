#include "coil/codegen/triton/triton_ops.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace coil::codegen::triton {

using graph::DType;
using ir::Op;
using ir::ReductionType;

namespace {

bool is_float(DType d) {
  return graph::is_floating(d);
}

std::string float_literal(double v) {
  if (std::isnan(v)) return "float(\"nan\")";
  if (std::isinf(v)) return v > 0 ? "float(\"inf\")" : "float(\"-inf\")";
  std::ostringstream s;
  s << std::setprecision(17) << v;
  std::string text = s.str();
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string call(const std::string& fn, const std::string& a) {
  return fn + "(" + a + ")";
}
std::string call(const std::string& fn, const std::string& a, const std::string& b) {
  return fn + "(" + a + ", " + b + ")";
}

}  // namespace

std::string dtype_text(DType d) {
  switch (d) {
    case DType::Bool:
      return "tl.int1";
    case DType::UInt8:
      return "tl.uint8";
    case DType::Int8:
      return "tl.int8";
    case DType::Int16:
      return "tl.int16";
    case DType::Int32:
      return "tl.int32";
    case DType::Int64:
      return "tl.int64";
    case DType::Float16:
      return "tl.float16";
    case DType::BFloat16:
      return "tl.bfloat16";
    case DType::Float32:
      return "tl.float32";
    case DType::Float64:
      return "tl.float64";
    case DType::UInt16:
      return "tl.uint16";
    case DType::UInt32:
      return "tl.uint32";
    case DType::UInt64:
      return "tl.uint64";
    case DType::Complex64:
    case DType::Complex128:
      break;  // opaque: no kernel computes in them
  }
  return "?";
}

std::string literal_text(ir::Value c) {
  if (c.dtype() == DType::Bool) return c->ivalue ? "True" : "False";
  if (is_float(c.dtype())) return float_literal(c->fvalue);
  return std::to_string(c->ivalue);
}

std::string constant_tensor_text(ir::Value c) {
  // Reduced-precision constants are made in float32 and converted (Triton's interpreter cannot
  // make a bfloat16 constant directly).
  if (c.dtype() == DType::BFloat16 || c.dtype() == DType::Float16) {
    return "tl.full([1], " + literal_text(c) + ", tl.float32).to(" + dtype_text(c.dtype()) + ")";
  }
  return "tl.full([1], " + literal_text(c) + ", " + dtype_text(c.dtype()) + ")";
}

std::string unary_text(Op op, const std::string& a, DType d) {
  bool f = is_float(d);
  switch (op) {
    case Op::Neg:
      // Triton's unary minus is 0 - x, which makes -(0.0) +0.0 where eager gives -0.0 (fuzzer
      // --triton-check seed 501212); a product with -1 is exact, and keeps NaN and infinities.
      return f ? "(" + a + " * -1.0)" : "-" + a;
    case Op::Abs:
      return call("tl.abs", a);
    case Op::Exp:
      return call("tl.exp", a);
    case Op::Exp2:
      return call("tl.exp2", a);
    case Op::Log:
      return call("tl.log", a);
    case Op::Log2:
      return call("tl.log2", a);
    case Op::Log1p:
      return call("libdevice.log1p", a);
    case Op::Expm1:
      return call("libdevice.expm1", a);
    // sqrt_rn: correctly rounded, as torch's sqrt; tl.sqrt may be approximate.
    // (fp64 has no sqrt_rn; its tl.sqrt is correctly rounded already).
    case Op::Sqrt:
      return call(d == DType::Float64 ? "tl.sqrt" : "tl.sqrt_rn", a);
    case Op::Rsqrt:
      return call("tl.rsqrt", a);
    case Op::Sin:
      return call("tl.sin", a);
    case Op::Cos:
      return call("tl.cos", a);
    case Op::Tan:
      return call("libdevice.tan", a);
    case Op::Asin:
      return call("libdevice.asin", a);
    case Op::Acos:
      return call("libdevice.acos", a);
    case Op::Atan:
      return call("libdevice.atan", a);
    case Op::Sinh:
      return call("libdevice.sinh", a);
    case Op::Cosh:
      return call("libdevice.cosh", a);
    case Op::Tanh:
      return call("libdevice.tanh", a);
    case Op::Sigmoid:
      return call("tl.sigmoid", a);
    case Op::Erf:
      return call("tl.erf", a);
    case Op::Floor:
      return f ? call("tl.floor", a) : a;
    case Op::Ceil:
      return f ? call("tl.ceil", a) : a;
    // Round half to even, as torch.round.
    case Op::Round:
      return f ? call("libdevice.nearbyint", a) : a;
    case Op::Trunc:
      return f ? call("libdevice.trunc", a) : a;
    case Op::Reciprocal:
      return "1.0 / " + a;
    case Op::Sign:  // (of a bool: itself; its int1 lanes have no subtraction)
      return d == DType::Bool ? a : call("coil_sign", a);
    case Op::IsNan:
      return f ? "(" + a + " != " + a + ")" : "(" + a + " != " + a + ")";
    case Op::IsInf:
      return f ? "(tl.abs(" + a + ") == float(\"inf\"))" : "(" + a + " != " + a + ")";
    case Op::LogicalNot:
      return "(" + a + " == 0)";
    case Op::BitwiseNot:
      // Unsigned: an xor with all ones of the dtype (the same on a GPU; Triton's interpreter
      // makes ~ an xor with -1, which NumPy 2 refuses for unsigned arrays).
      if (d == DType::UInt8) return "(" + a + " ^ tl.full([1], 255, tl.uint8))";
      if (d == DType::UInt16) return "(" + a + " ^ tl.full([1], 65535, tl.uint16))";
      if (d == DType::UInt32) return "(" + a + " ^ tl.full([1], 4294967295, tl.uint32))";
      return "~" + a;
    // The sign bit itself (std::signbit: true for -0.0 and negative NaNs).
    case Op::SignBit:
      return "(" + a + ".to(" + (d == DType::Float64 ? "tl.int64" : "tl.int32") +
             ", bitcast=True) < 0)";
    case Op::Acosh:
      return call("libdevice.acosh", a);
    case Op::Asinh:
      return call("libdevice.asinh", a);
    case Op::Atanh:
      return call("libdevice.atanh", a);
    case Op::Log10:
      return call("libdevice.log10", a);
    case Op::Erfc:
      return call("libdevice.erfc", a);
    case Op::Erfinv:
      return call("libdevice.erfinv", a);
    case Op::Erfcx:
      return call("libdevice.erfcx", a);
    case Op::Ndtri:
      return call("libdevice.normcdfinv", a);
    case Op::Lgamma:
      return call("libdevice.lgamma", a);
    case Op::I0:
    case Op::BesselI0:
      return call("libdevice.cyl_bessel_i0", a);
    case Op::I1:
    case Op::BesselI1:
      return call("libdevice.cyl_bessel_i1", a);
    case Op::BesselJ0:
      return call("libdevice.j0", a);
    case Op::BesselJ1:
      return call("libdevice.j1", a);
    case Op::BesselY0:
      return call("libdevice.y0", a);
    case Op::BesselY1:
      return call("libdevice.y1", a);
    default:
      throw std::logic_error(std::string("triton codegen: no Triton form for unary op ") +
                             ir::op_name(op));
  }
}

std::string binary_text(Op op, const std::string& a, const std::string& b, DType d) {
  bool f = is_float(d);
  bool boolean = d == DType::Bool;
  auto infix = [&](const char* o) { return a + " " + o + " " + b; };
  auto truthy = [&](const std::string& x) { return boolean ? x : "(" + x + " != 0)"; };
  switch (op) {
    // Sums and products of bools are torch's or and and: Triton's + of two int1 values wraps
    // (True + True is False on the GPU, while the interpreter's NumPy bools give True: a
    // log_softmax over a square of `b + b` came out 1.55 off on the H200 alone, perf fuzzer
    // seed 1059).
    case Op::Add:
      return boolean ? infix("|") : infix("+");
    case Op::Sub:
      return infix("-");
    case Op::Mul:
      return boolean ? infix("&") : infix("*");
    case Op::Div:
      return infix("/");
    case Op::FloorDiv:
      return call(f ? "coil_ffloordiv" : "coil_floordiv", a, b);
    // Triton's integer // already truncates toward zero.
    // IEEE-exact float32 division under trunc (Triton's `/` is approximate; see
    // mark_exact_divisions in triton_values.cpp); float64's `/` is exact already.
    case Op::TruncDiv:
      if (d == DType::Float32) return call("libdevice.trunc", call("tl.math.div_rn", a, b));
      return f ? call("libdevice.trunc", a + " / " + b) : infix("//");
    case Op::Remainder:
      return call(f ? "coil_fremainder" : "coil_mod", a, b);
    // Triton's % is C's fmod for both floats and integers.
    case Op::Fmod:
      return infix("%");
    case Op::Pow:
      return f ? call("libdevice.pow", a, b) : call("coil_ipow", a, b);
    case Op::Atan2:
      return call("libdevice.atan2", a, b);
    case Op::Maximum:
      if (boolean) return infix("|");
      return f ? call("coil_fmax", a, b) : call("tl.maximum", a, b);
    case Op::Minimum:
      if (boolean) return infix("&");
      return f ? call("coil_fmin", a, b) : call("tl.minimum", a, b);
    case Op::Lt:
      return infix("<");
    case Op::Le:
      return infix("<=");
    case Op::Gt:
      return infix(">");
    case Op::Ge:
      return infix(">=");
    case Op::Eq:
      return infix("==");
    case Op::Ne:
      return infix("!=");
    case Op::LogicalAnd:
      return truthy(a) + " & " + truthy(b);
    case Op::LogicalOr:
      return truthy(a) + " | " + truthy(b);
    case Op::LogicalXor:
      return truthy(a) + " ^ " + truthy(b);
    case Op::BitwiseAnd:
      return infix("&");
    case Op::BitwiseOr:
      return infix("|");
    case Op::BitwiseXor:
      return infix("^");
    // Triton's own Philox generator (the same counter-based scheme as the C++ prelude's).
    case Op::Rand:
      return call("tl.rand", a, b);
    case Op::Randn:
      return call("tl.randn", a, b);
    case Op::ShiftLeft:
      return "coil_shl(" + a + ", " + b + ", " + std::to_string(graph::dtype_itemsize(d) * 8) + ")";
    case Op::ShiftRight:
      return "coil_shr(" + a + ", " + b + ", " + std::to_string(graph::dtype_itemsize(d) * 8) +
             ", " + (d == DType::UInt8 ? "0" : "1") + ")";
    case Op::CopySign:
      return call("libdevice.copysign", a, b);
    case Op::Hypot:
      return call("libdevice.hypot", a, b);
    case Op::NextAfter:
      if (d == DType::Float32 || d == DType::Float64) return call("libdevice.nextafter", a, b);
      break;
    // The exponent arrives as a float (the IR's operands share a dtype); clamped where the result
    // is 0 or infinite already, as the C++ prelude's coil_ldexp does.
    case Op::Ldexp:
      return "libdevice.ldexp(" + a + ", tl.minimum(tl.maximum(" + b +
             ", -4096.0), 4096.0).to(tl.int32))";
    default:
      break;
  }
  throw std::logic_error(std::string("triton codegen: no Triton form for binary op ") +
                         ir::op_name(op) + " on " + graph::dtype_name(d));
}

bool has_op_text(Op op, DType d) {
  switch (op) {
    case Op::Digamma:
    case Op::Trigamma:
    case Op::Polygamma:
    case Op::Zeta:
    case Op::Igamma:
    case Op::Igammac:
    case Op::I0e:
    case Op::I1e:
    case Op::BesselK0:
    case Op::BesselK1:
    case Op::ScaledBesselK0:
    case Op::ScaledBesselK1:
    case Op::AiryAi:
    case Op::ChebyshevT:
    case Op::ChebyshevU:
    case Op::ChebyshevV:
    case Op::ChebyshevW:
    case Op::ShiftedChebyshevT:
    case Op::ShiftedChebyshevU:
    case Op::ShiftedChebyshevV:
    case Op::ShiftedChebyshevW:
    case Op::HermiteH:
    case Op::HermiteHe:
    case Op::LaguerreL:
    case Op::LegendreP:
      return false;
    case Op::NextAfter:
      return d == DType::Float32 || d == DType::Float64;
    default:
      return true;
  }
}

std::string cast_text(const std::string& a, DType from, DType to, bool interpreted) {
  auto reduced = [](DType d) { return d == DType::BFloat16 || d == DType::Float16; };
  // Conversions to and from bfloat16/float16 go through float32, as torch's do (c10::BFloat16 is
  // made from a float: a double is rounded twice). Triton's interpreter also converts only
  // float32 <-> bfloat16 correctly.
  bool via_f32 = (reduced(from) || reduced(to)) && from != DType::Float32 && to != DType::Float32;
  std::string x = via_f32 ? a + ".to(tl.float32)" : a;
  // Any nonzero value is true, as in torch; spelled out rather than left to Triton's cast rules.
  if (to == DType::Bool) return "(" + x + " != 0)";
  if (to == DType::BFloat16 && interpreted) return "coil_f32_to_bf16(" + x + ")";
  return x + ".to(" + dtype_text(to) + ")";
}

std::string reduction_identity(ReductionType t, DType d) {
  bool f = is_float(d);
  bool boolean = d == DType::Bool;
  int bits = graph::dtype_itemsize(d) * 8;
  bool is_unsigned = d == DType::UInt8;
  std::string lowest = is_unsigned ? "0"
                                   : (bits == 64 ? "-9223372036854775808"
                                                 : "-" + std::to_string(int64_t{1} << (bits - 1)));
  std::string highest =
      std::to_string(is_unsigned ? 255 : (bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1));
  switch (t) {
    case ReductionType::Sum:
      return f ? "0.0" : (boolean ? "False" : "0");
    case ReductionType::Prod:
      return f ? "1.0" : (boolean ? "True" : "1");
    case ReductionType::Max:
    case ReductionType::ArgMax:
      return f ? "float(\"-inf\")" : (boolean ? "False" : lowest);
    case ReductionType::Min:
    case ReductionType::ArgMin:
      return f ? "float(\"inf\")" : (boolean ? "True" : highest);
    case ReductionType::Any:
      return "False";
    case ReductionType::All:
      return "True";
    case ReductionType::LogSumExp:
      return "float(\"-inf\")";
  }
  return "0";
}

std::string reduction_combine(ReductionType t, DType d, const std::string& acc,
                              const std::string& v) {
  bool boolean = d == DType::Bool;
  switch (t) {
    case ReductionType::Sum:
      return acc + " + " + v;
    case ReductionType::Prod:
      return acc + " * " + v;
    case ReductionType::Max:
      return boolean ? acc + " | " + v : binary_text(Op::Maximum, acc, v, d);
    case ReductionType::Min:
      return boolean ? acc + " & " + v : binary_text(Op::Minimum, acc, v, d);
    case ReductionType::Any:
      return acc + " | " + v;
    case ReductionType::All:
      return acc + " & " + v;
    case ReductionType::LogSumExp:
      return "coil_logaddexp(" + acc + ", " + v + ")";
    case ReductionType::ArgMax:
    case ReductionType::ArgMin:
      break;
  }
  throw std::logic_error("triton codegen: argmax/argmin combine pairs (value, index)");
}

std::string scan_text(ReductionType t, DType d, const std::string& block) {
  switch (t) {
    case ReductionType::Sum:
      return "tl.cumsum(" + block + ", 1)";
    case ReductionType::Prod:
      return "tl.cumprod(" + block + ", 1)";
    // (coil_max_combine: NaN-propagating for floats, plain for integers.)
    case ReductionType::Max:
      if (d != DType::Bool) return "tl.associative_scan(" + block + ", 1, coil_max_combine)";
      break;
    case ReductionType::Min:
      if (d != DType::Bool) return "tl.associative_scan(" + block + ", 1, coil_min_combine)";
      break;
    case ReductionType::LogSumExp:
      return "tl.associative_scan(" + block + ", 1, coil_logaddexp)";
    default:
      break;
  }
  throw std::logic_error(std::string("triton codegen: no scan form for ") + ir::reduction_name(t) +
                         " of " + graph::dtype_name(d));
}

std::string reduction_final(ReductionType t, DType d, const std::string& block) {
  bool f = is_float(d);
  bool boolean = d == DType::Bool;
  switch (t) {
    case ReductionType::Sum:
      return "tl.sum(" + block + ", 1)[:, None]";
    case ReductionType::Prod:
      return "tl.reduce(" + block + ", 1, coil_prod_combine)[:, None]";
    // Reductions of bools go through int8: max/min of int1 blocks are not reliable everywhere.
    case ReductionType::Any:
      return "(tl.max(" + block + ".to(tl.int8), 1) != 0)[:, None]";
    case ReductionType::All:
      return "(tl.min(" + block + ".to(tl.int8), 1) != 0)[:, None]";
    case ReductionType::Max:
      if (boolean) return "(tl.max(" + block + ".to(tl.int8), 1) != 0)[:, None]";
      // tl.max drops NaNs; torch.amax propagates them.
      return f ? "tl.reduce(" + block + ", 1, coil_max_combine)[:, None]"
               : "tl.max(" + block + ", 1)[:, None]";
    case ReductionType::Min:
      if (boolean) return "(tl.min(" + block + ".to(tl.int8), 1) != 0)[:, None]";
      return f ? "tl.reduce(" + block + ", 1, coil_min_combine)[:, None]"
               : "tl.min(" + block + ", 1)[:, None]";
    case ReductionType::LogSumExp:
      return "tl.reduce(" + block + ", 1, coil_logaddexp)[:, None]";
    case ReductionType::ArgMax:
    case ReductionType::ArgMin:
      break;
  }
  throw std::logic_error("triton codegen: argmax/argmin reduce pairs (value, index)");
}

std::string scatter_op_text(ir::ScatterMode m, DType d) {
  bool wide_int = d == DType::Int32 || d == DType::Int64;
  bool wide_float = d == DType::Float32 || d == DType::Float64;
  switch (m) {
    case ir::ScatterMode::Store:
      return "tl.store";
    case ir::ScatterMode::Add:
      return wide_int || wide_float ? "tl.atomic_add" : "";
    case ir::ScatterMode::Max:
      return wide_int ? "tl.atomic_max" : "";
    case ir::ScatterMode::Min:
      return wide_int ? "tl.atomic_min" : "";
    case ir::ScatterMode::Mul:
      return "";
  }
  return "";
}

}  // namespace coil::codegen::triton
