// Scalar C++ text of coil's scalar ops, for the C++ kernel renderer (cpp_kernel.cpp): types,
// literals, unary and binary operators with PyTorch's semantics (through prelude.h's helpers), and
// reduction identities. The vector forms are in cpp_vec.h.
#pragma once

#include <string>

#include "coil/graph/graph.h"
#include "coil/ir/program.h"

namespace coil::codegen::cpp {

std::string ctype(graph::DType d);
std::string float_literal(double v, graph::DType d);
std::string constant_text(ir::Value v);
std::string unary_text(ir::Op op, const std::string& a, graph::DType d);
std::string binary_text(ir::Op op, const std::string& a, const std::string& b,
                        graph::DType operand);
std::string reduction_identity(ir::ReductionType t, graph::DType d);

}  // namespace coil::codegen::cpp
