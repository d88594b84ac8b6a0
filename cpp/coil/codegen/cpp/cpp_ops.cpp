#include "coil/codegen/cpp/cpp_ops.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace coil::codegen::cpp {

using graph::DType;
using ir::Op;
using ir::Value;

std::string ctype(DType d) {
  return graph::dtype_cpp_type(d);
}

std::string float_literal(double v, DType d) {
  std::string t = d == DType::Float64 ? "double" : "float";
  if (std::isnan(v)) return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  std::ostringstream s;
  s << std::setprecision(d == DType::Float64 ? 17 : 9) << v;
  std::string text = s.str();
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  if (d != DType::Float64) text += "f";
  return text;
}

std::string constant_text(Value v) {
  DType d = v.dtype();
  switch (d) {
    case DType::Bool:
      return v->ivalue ? "true" : "false";
    case DType::Float32:
    case DType::Float64:
      return float_literal(v->fvalue, d);
    case DType::BFloat16:
    case DType::Float16:
      return "static_cast<" + ctype(d) + ">(" + float_literal(v->fvalue, DType::Float32) + ")";
    case DType::Int64:
      if (v->ivalue == INT64_MIN) return "std::numeric_limits<int64_t>::min()";
      return "static_cast<int64_t>(" + std::to_string(v->ivalue) + "LL)";
    default:
      return "static_cast<" + ctype(d) + ">(" + std::to_string(v->ivalue) + ")";
  }
}

std::string unary_text(Op op, const std::string& a, DType d) {
  bool is_float = graph::is_floating(d);
  switch (op) {
    case Op::Neg:
      // (A space before an operand that starts with a minus: "--" is C++'s decrement; fuzzer
      // seed 800027 negated a masked fill of -inf.)
      return std::string(!a.empty() && a[0] == '-' ? "(- " : "(-") + a + ")";
    case Op::Abs:
      return "std::abs(" + a + ")";
    case Op::Exp:
      return "std::exp(" + a + ")";
    case Op::Exp2:
      return "std::exp2(" + a + ")";
    case Op::Log:
      return "std::log(" + a + ")";
    case Op::Log2:
      return "std::log2(" + a + ")";
    case Op::Log1p:
      return "std::log1p(" + a + ")";
    case Op::Expm1:
      return "std::expm1(" + a + ")";
    case Op::Sqrt:
      return "std::sqrt(" + a + ")";
    case Op::Rsqrt:
      return "(" + ctype(d) + "(1) / std::sqrt(" + a + "))";
    case Op::Sin:
      return "std::sin(" + a + ")";
    case Op::Cos:
      return "std::cos(" + a + ")";
    case Op::Tan:
      return "std::tan(" + a + ")";
    case Op::Asin:
      return "std::asin(" + a + ")";
    case Op::Acos:
      return "std::acos(" + a + ")";
    case Op::Atan:
      return "std::atan(" + a + ")";
    case Op::Sinh:
      return "std::sinh(" + a + ")";
    case Op::Cosh:
      return "std::cosh(" + a + ")";
    case Op::Tanh:
      return "std::tanh(" + a + ")";
    case Op::Sigmoid:
      return "coil_sigmoid(" + a + ")";
    case Op::Erf:
      return "std::erf(" + a + ")";
    case Op::Floor:
      return is_float ? "std::floor(" + a + ")" : a;
    case Op::Ceil:
      return is_float ? "std::ceil(" + a + ")" : a;
    case Op::Round:
      return is_float ? "std::nearbyint(" + a + ")" : a;
    case Op::Trunc:
      return is_float ? "std::trunc(" + a + ")" : a;
    case Op::Reciprocal:
      return "(" + ctype(d) + "(1) / " + a + ")";
    case Op::Sign:
      return "coil_sign(" + a + ")";
    case Op::IsNan:
      return "coil_isnan(" + a + ")";
    case Op::IsInf:
      return "coil_isinf(" + a + ")";
    case Op::LogicalNot:
      return "(!" + a + ")";
    case Op::BitwiseNot:
      return "(~" + a + ")";
    default:
      throw std::logic_error(std::string("cpp codegen: not a unary op: ") + ir::op_name(op));
  }
}

std::string binary_text(Op op, const std::string& a, const std::string& b, DType operand) {
  std::string t = ctype(operand);
  switch (op) {
    case Op::Add:
      return "(" + a + " + " + b + ")";
    case Op::Sub:
      return "(" + a + " - " + b + ")";
    case Op::Mul:
      return "(" + a + " * " + b + ")";
    case Op::Div:
      return "(" + a + " / " + b + ")";
    case Op::FloorDiv:
      return "coil_floordiv_t<" + t + ">(" + a + ", " + b + ")";
    case Op::TruncDiv:
      return "coil_truncdiv<" + t + ">(" + a + ", " + b + ")";
    case Op::Remainder:
      return "coil_remainder<" + t + ">(" + a + ", " + b + ")";
    case Op::Fmod:
      return "coil_fmod<" + t + ">(" + a + ", " + b + ")";
    case Op::Pow:
      return "coil_pow<" + t + ">(" + a + ", " + b + ")";
    case Op::Atan2:
      return "std::atan2(" + a + ", " + b + ")";
    case Op::Maximum:
      return "coil_max<" + t + ">(" + a + ", " + b + ")";
    case Op::Minimum:
      return "coil_min<" + t + ">(" + a + ", " + b + ")";
    case Op::Lt:
      return "(" + a + " < " + b + ")";
    case Op::Le:
      return "(" + a + " <= " + b + ")";
    case Op::Gt:
      return "(" + a + " > " + b + ")";
    case Op::Ge:
      return "(" + a + " >= " + b + ")";
    case Op::Eq:
      return "(" + a + " == " + b + ")";
    case Op::Ne:
      return "(" + a + " != " + b + ")";
    case Op::LogicalAnd:
      return "(" + a + " && " + b + ")";
    case Op::LogicalOr:
      return "(" + a + " || " + b + ")";
    case Op::LogicalXor:
      return "(" + a + " != " + b + ")";
    case Op::BitwiseAnd:
      return "(" + a + " & " + b + ")";
    case Op::BitwiseOr:
      return "(" + a + " | " + b + ")";
    case Op::BitwiseXor:
      return "(" + a + " ^ " + b + ")";
    default:
      throw std::logic_error(std::string("cpp codegen: not a binary op: ") + ir::op_name(op));
  }
}

std::string reduction_identity(ir::ReductionType t, DType d) {
  std::string ty = ctype(d);
  bool is_float = graph::is_floating(d);
  switch (t) {
    case ir::ReductionType::Sum:
      return ty + "(0)";
    case ir::ReductionType::Prod:
      return ty + "(1)";
    case ir::ReductionType::Max:
    case ir::ReductionType::ArgMax:
      return is_float ? "-std::numeric_limits<" + ty + ">::infinity()"
                      : "std::numeric_limits<" + ty + ">::lowest()";
    case ir::ReductionType::Min:
    case ir::ReductionType::ArgMin:
      return is_float ? "std::numeric_limits<" + ty + ">::infinity()"
                      : "std::numeric_limits<" + ty + ">::max()";
    case ir::ReductionType::Any:
      return "false";
    case ir::ReductionType::All:
      return "true";
    case ir::ReductionType::LogSumExp:
      return "-std::numeric_limits<" + ty + ">::infinity()";
  }
  return "";
}

}  // namespace coil::codegen::cpp
