#include "coil/codegen/cpp/cpp_special.h"

#include <utility>

namespace coil::codegen {

using graph::DType;
using ir::Op;

namespace {

struct Spelling {
  Op op;
  const char* fn;
  bool aten_math;
};

// One function call per op, its arguments in the IR's operand order.
constexpr Spelling kSpellings[] = {
    {Op::SignBit, "std::signbit", false},
    {Op::Acosh, "std::acosh", false},
    {Op::Asinh, "std::asinh", false},
    {Op::Atanh, "std::atanh", false},
    {Op::Log10, "std::log10", false},
    {Op::Erfc, "std::erfc", false},
    {Op::Lgamma, "std::lgamma", false},
    {Op::CopySign, "std::copysign", false},
    {Op::Hypot, "std::hypot", false},
    {Op::Erfinv, "calc_erfinv", true},
    {Op::Erfcx, "calc_erfcx", true},
    {Op::Ndtri, "calc_ndtri", true},
    {Op::Digamma, "calc_digamma", true},
    {Op::Trigamma, "trigamma", true},
    {Op::I0, "calc_i0", true},
    {Op::I0e, "calc_i0e", true},
    {Op::I1, "calc_i1", true},
    {Op::I1e, "calc_i1e", true},
    {Op::BesselJ0, "bessel_j0_forward", true},
    {Op::BesselJ1, "bessel_j1_forward", true},
    {Op::BesselY0, "bessel_y0_forward", true},
    {Op::BesselY1, "bessel_y1_forward", true},
    {Op::BesselI0, "modified_bessel_i0_forward", true},
    {Op::BesselI1, "modified_bessel_i1_forward", true},
    {Op::BesselK0, "modified_bessel_k0_forward", true},
    {Op::BesselK1, "modified_bessel_k1_forward", true},
    {Op::ScaledBesselK0, "scaled_modified_bessel_k0_forward", true},
    {Op::ScaledBesselK1, "scaled_modified_bessel_k1_forward", true},
    {Op::AiryAi, "airy_ai_forward", true},
    {Op::Polygamma, "coil_polygamma", true},
    {Op::Zeta, "zeta", true},
    {Op::Igamma, "calc_igamma", true},
    {Op::Igammac, "calc_igammac", true},
    {Op::ChebyshevT, "chebyshev_polynomial_t_forward", true},
    {Op::ChebyshevU, "chebyshev_polynomial_u_forward", true},
    {Op::ChebyshevV, "chebyshev_polynomial_v_forward", true},
    {Op::ChebyshevW, "chebyshev_polynomial_w_forward", true},
    {Op::ShiftedChebyshevT, "shifted_chebyshev_polynomial_t_forward", true},
    {Op::ShiftedChebyshevU, "shifted_chebyshev_polynomial_u_forward", true},
    {Op::ShiftedChebyshevV, "shifted_chebyshev_polynomial_v_forward", true},
    {Op::ShiftedChebyshevW, "shifted_chebyshev_polynomial_w_forward", true},
    {Op::HermiteH, "hermite_polynomial_h_forward", true},
    {Op::HermiteHe, "hermite_polynomial_he_forward", true},
    {Op::LaguerreL, "laguerre_polynomial_l_forward", true},
    {Op::LegendreP, "legendre_polynomial_p_forward", true},
};

std::string call(const std::string& fn, const std::vector<std::string>& args) {
  std::string out = fn + "(";
  for (size_t i = 0; i < args.size(); ++i) out += (i ? ", " : "") + args[i];
  return out + ")";
}

}  // namespace

std::optional<SpecialText> special_op_text(Op op, const std::vector<std::string>& args,
                                           DType operand) {
  std::string t = graph::dtype_cpp_type(operand);
  switch (op) {
    // Helpers of the prelude: the operand type is explicit, as for coil_max and friends.
    case Op::ShiftLeft:
      return SpecialText{call("coil_shl<" + t + ">", args)};
    case Op::Rand:
      return SpecialText{call("coil_rand", args)};
    case Op::Randn:
      return SpecialText{call("coil_randn", args)};
    case Op::ShiftRight:
      return SpecialText{call("coil_shr<" + t + ">", args)};
    case Op::Ldexp:
      return SpecialText{call("coil_ldexp<" + t + ">", args)};
    // bfloat16/float16 step on their own bits (coil_nextafter); float and double through libm.
    case Op::NextAfter:
      return SpecialText{call(operand == DType::Float32 || operand == DType::Float64
                                  ? "std::nextafter"
                                  : "coil_nextafter<" + t + ">",
                              args)};
    default:
      break;
  }
  for (const Spelling& s : kSpellings) {
    if (s.op == op) return SpecialText{call(s.fn, args), s.aten_math};
  }
  return std::nullopt;
}

}  // namespace coil::codegen
