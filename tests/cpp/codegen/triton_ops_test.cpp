// The Triton op table (codegen/triton/triton_ops.h): texts whose meaning on a GPU differs from
// what Triton's interpreter (NumPy) gives them, so CPU runs of the Triton path cannot catch them.
#include "coil/codegen/triton/triton_ops.h"

#include <gtest/gtest.h>

namespace coil {
namespace {

using graph::DType;
using ir::Op;

// Sums and products of bools are torch's or and and. Triton's + of int1 values wraps on the GPU
// (True + True is False); the interpreter's NumPy bools give True (perf fuzzer seed 1059: a
// log_softmax over a square of `b + b`, 1.55 off on the H200 only).
TEST(TritonOps, BoolSumsAndProductsAreOrAndAnd) {
  EXPECT_EQ(codegen::triton::binary_text(Op::Add, "a", "b", DType::Bool), "a | b");
  EXPECT_EQ(codegen::triton::binary_text(Op::Mul, "a", "b", DType::Bool), "a & b");
  EXPECT_EQ(codegen::triton::binary_text(Op::Maximum, "a", "b", DType::Bool), "a | b");
  EXPECT_EQ(codegen::triton::binary_text(Op::Minimum, "a", "b", DType::Bool), "a & b");
  EXPECT_EQ(codegen::triton::binary_text(Op::Add, "a", "b", DType::Int8), "a + b");
  EXPECT_EQ(codegen::triton::binary_text(Op::Mul, "a", "b", DType::Float32), "a * b");
}

}  // namespace
}  // namespace coil
