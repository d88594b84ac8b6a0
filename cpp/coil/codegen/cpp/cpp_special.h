// How the C++ renderer spells the special-function ops of ir/scalar.h (lower/special.cpp): <cmath>
// where it has the function, the prelude's helpers for the bit-level utilities, and otherwise
// ATen's own scalar implementations from <ATen/native/Math.h> (calc_digamma, bessel_j0_forward,
// chebyshev_polynomial_t_forward, ...) — the functions eager's CPU kernels call, so that coil
// computes what eager computes. Kernel files that call those include the header (prelude.h's
// kAtenMathPrelude); the others stay free of it.
//
// Tests: tests/cpp/codegen/cpp_kernel_test.cpp; numerics in tests/python/test_special.py.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coil/ir/scalar.h"

namespace coil::codegen {

struct SpecialText {
  std::string text;
  bool aten_math = false;  // calls a function of <ATen/native/Math.h>
};

// The C++ expression for op applied to args (C++ expressions of operand dtype `operand`);
// nullopt when op is not one of the special-function ops.
std::optional<SpecialText> special_op_text(ir::Op op, const std::vector<std::string>& args,
                                           graph::DType operand);

}  // namespace coil::codegen
