// The Triton op table: how each scalar IR op, dtype, constant and reduction is spelled in Triton.
//
// Data for the Triton renderer (triton_values.cpp, triton_stages.cpp), kept apart from the walk
// over the kernel plan.
// Math goes through tl.* where Triton (and its interpreter) has the function, and through
// `libdevice` (triton.language.extra.libdevice on GPUs; a NumPy stand-in under TRITON_INTERPRET=1,
// see python/coil/triton_launcher.py) otherwise. Helpers named coil_* are defined by the prelude
// (triton_prelude.h).
//
// Tests: tests/python/test_triton_interpret.py (numerics under the interpreter), tests/gpu/.
#pragma once

#include <string>

#include "coil/ir/program.h"
#include "coil/ir/scalar.h"

namespace coil::codegen::triton {

std::string dtype_text(graph::DType d);  // "tl.float32", "tl.int1", ...

// A constant as a Python literal ("1.0", "float(\"-inf\")", "True", "3"): right wherever Triton
// gives it the type of the tensor it meets (an operand of a binary op or a where()).
std::string literal_text(ir::Value constant);
// A constant as a typed one-element tensor, for every other use: tl.full([1], 3, tl.int64).
std::string constant_tensor_text(ir::Value constant);

// `a` and `b` are operand texts; `operand` is the operands' dtype.
std::string unary_text(ir::Op op, const std::string& a, graph::DType operand);
std::string binary_text(ir::Op op, const std::string& a, const std::string& b,
                        graph::DType operand);
// Whether unary_text/binary_text have a form for op computing in dtype d. Every op has one but
// some special functions (digamma, zeta, the orthogonal polynomials, ... : neither tl nor
// libdevice has them) and nextafter of 16-bit floats; the lowering leaves those to the ATen
// fallback on Triton targets.
bool has_op_text(ir::Op op, graph::DType d);
// interpreted: the kernel runs under Triton's interpreter (CPU tensors), whose float32 -> bfloat16
// conversion does not round to nearest even; the prelude's coil_f32_to_bf16 does it exactly.
std::string cast_text(const std::string& a, graph::DType from, graph::DType to, bool interpreted);

// Reductions over a block accumulator [XBLOCK, RBLOCK] of dtype d (not for ArgMax/ArgMin, whose
// combine is coil_argmax_combine / coil_argmin_combine over (value, index) pairs).
std::string reduction_identity(ir::ReductionType t, graph::DType d);
std::string reduction_combine(ir::ReductionType t, graph::DType d, const std::string& acc,
                              const std::string& v);
// The call that combines a scatter's update into its target ("tl.store", "tl.atomic_add", ...),
// or "" where Triton has no atomic that matches torch: float max/min (NaN must propagate), mul,
// 16-bit float adds (their atomics exist only on recent GPUs), and anything on bool or 8/16-bit
// integers. The lowering leaves those scatters to ATen when it targets Triton.
std::string scatter_op_text(ir::ScatterMode m, graph::DType d);

// Reduces `block` along axis 1, keeping a [XBLOCK, 1] result.
std::string reduction_final(ir::ReductionType t, graph::DType d, const std::string& block);
// The inclusive scan of an [XBLOCK, RBLOCK] block along axis 1 (cumsum, cumprod; running
// max/min propagate NaN).
std::string scan_text(ir::ReductionType t, graph::DType d, const std::string& block);

}  // namespace coil::codegen::triton
