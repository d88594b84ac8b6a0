// Vector C++ text of coil's scalar ops, through ATen's header-only SIMD library at::vec (what
// eager's own CPU kernels and Inductor's are written in; its math functions are SLEEF's, within
// 1 ulp). The kernel renderer (cpp_kernel.cpp) uses these for the innermost loop of a kernel when
// every value that varies along that loop has a vector form here; otherwise the loop stays scalar.
//
// A vector holds one lane per element of the loop: `VecF` (at::vec::Vectorized<float>) or `VecD`
// (double), names the vector prelude (prelude.h: kVecPrelude) defines. Booleans that vary along
// the loop are masks of the same type (all bits set in a true lane), as at::vec's comparisons
// return them.
#pragma once

#include <optional>
#include <string>

#include "coil/graph/graph.h"
#include "coil/ir/program.h"

namespace coil::codegen::cpp {

// "VecF" for float32, "VecD" for float64; nullopt for other types (they have no vector form).
std::optional<std::string> vec_type(graph::DType d);

// The vector form of a unary/binary op on vectors `a` (and `b`) of type `vec`; nullopt where there
// is none. Comparisons return masks.
std::optional<std::string> vec_unary_text(ir::Op op, const std::string& a, const std::string& vec);
std::optional<std::string> vec_binary_text(ir::Op op, const std::string& a, const std::string& b,
                                           const std::string& vec);

// How a reduction combines two vectors (`a` op `b`), for the loop and for the final horizontal
// reduction; nullopt for reductions without a vector form (arg-reductions, any/all).
std::optional<std::string> vec_combine_text(ir::ReductionType t, const std::string& a,
                                            const std::string& b);

}  // namespace coil::codegen::cpp
