#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

using graph::DType;
using ir::Op;

std::optional<std::string> vec_type(DType d) {
  if (d == DType::Float32) return "VecF";
  if (d == DType::Float64) return "VecD";
  return std::nullopt;
}

std::optional<std::string> vec_unary_text(Op op, const std::string& a, const std::string& vec) {
  auto method = [&](const char* name) { return a + "." + name + "()"; };
  switch (op) {
    case Op::Neg:
      return method("neg");
    case Op::Abs:
      return method("abs");
    case Op::Exp:
      // float32: at::vec's exp_u20 (within 2 ulp; what eager's softmax kernels use), about
      // twice the speed of SLEEF's 1-ulp exp that bounds softmax-like kernels on the CPU. It
      // returns inf for a NaN (its clamps drop NaN): coil_exp_u20 (prelude.h) passes NaN through.
      return vec == "VecF" ? "coil_exp_u20(" + a + ")" : method("exp");
    case Op::Exp2:
      return method("exp2");
    case Op::Log:
      return method("log");
    case Op::Log2:
      return method("log2");
    case Op::Log1p:
      return method("log1p");
    case Op::Expm1:
      return method("expm1");
    case Op::Sqrt:
      return method("sqrt");
    case Op::Rsqrt:
      // As the scalar form, 1 / sqrt(x) (at::vec's rsqrt is the same division).
      return "(" + vec + "(1) / " + method("sqrt") + ")";
    case Op::Sin:
      return method("sin");
    case Op::Cos:
      return method("cos");
    case Op::Tan:
      return method("tan");
    case Op::Asin:
      return method("asin");
    case Op::Acos:
      return method("acos");
    case Op::Atan:
      return method("atan");
    case Op::Sinh:
      return method("sinh");
    case Op::Cosh:
      return method("cosh");
    case Op::Tanh:
      return method("tanh");
    case Op::Erf:
      // float32: coil_erf (prelude.h), at::vec's erf with its exp from exp_u20.
      return vec == "VecF" ? "coil_erf(" + a + ")" : method("erf");
    case Op::Sigmoid:
      // The scalar form's formula, 1 / (1 + exp(-x)), lane by lane, its exp as Op::Exp's.
      return "(" + vec + "(1) / (" + vec + "(1) + " +
             (vec == "VecF" ? "coil_exp_u20(" + a + ".neg())" : a + ".neg().exp()") + "))";
    case Op::Floor:
      return method("floor");
    case Op::Ceil:
      return method("ceil");
    case Op::Round:
      // at::vec's round is round-half-to-even, as std::nearbyint in the default rounding mode.
      return method("round");
    case Op::Trunc:
      return method("trunc");
    case Op::Reciprocal:
      return "(" + vec + "(1) / " + a + ")";
    case Op::IsNan:
      return method("isnan");
    default:
      return std::nullopt;
  }
}

std::optional<std::string> vec_binary_text(Op op, const std::string& a, const std::string& b,
                                           const std::string& vec) {
  (void)vec;
  auto infix = [&](const char* o) { return "(" + a + " " + o + " " + b + ")"; };
  switch (op) {
    case Op::Add:
      return infix("+");
    case Op::Sub:
      return infix("-");
    case Op::Mul:
      return infix("*");
    case Op::Div:
      return infix("/");
    case Op::FloorDiv:  // (float lanes only: integer values have no lanes)
      return "coil_vfloordiv(" + a + ", " + b + ")";
    case Op::Maximum:
      // Both propagate NaN, as torch.maximum/minimum do.
      return "at::vec::maximum(" + a + ", " + b + ")";
    case Op::Minimum:
      return "at::vec::minimum(" + a + ", " + b + ")";
    case Op::Pow:
      return a + ".pow(" + b + ")";
    case Op::Atan2:
      return a + ".atan2(" + b + ")";
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
      return infix("&");  // of masks
    case Op::LogicalOr:
      return infix("|");
    case Op::LogicalXor:
      return infix("^");
    default:
      return std::nullopt;
  }
}

std::optional<std::string> vec_combine_text(ir::ReductionType t, const std::string& a,
                                            const std::string& b) {
  switch (t) {
    case ir::ReductionType::Sum:
      return "(" + a + " + " + b + ")";
    case ir::ReductionType::Prod:
      return "(" + a + " * " + b + ")";
    case ir::ReductionType::Max:
      return "at::vec::maximum(" + a + ", " + b + ")";
    case ir::ReductionType::Min:
      return "at::vec::minimum(" + a + ", " + b + ")";
    default:
      return std::nullopt;
  }
}

}  // namespace coil::codegen::cpp
