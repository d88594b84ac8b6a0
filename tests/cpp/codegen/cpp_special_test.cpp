// Tests for codegen/cpp/cpp_special.h: how special-function ops are spelled in C++, and that only
// kernel files calling ATen's scalar functions include its header and ask for torch's headers.
#include "coil/codegen/cpp/cpp_special.h"

#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/compile.h"

namespace coil::codegen {
namespace {

using graph::Arg;
using graph::DType;
using ir::Op;
using test::contiguous;
using test::GraphBuilder;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CppSpecial, CmathFunctionsNeedNoAtenHeader) {
  auto t = special_op_text(Op::Acosh, {"x"}, DType::Float32);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->text, "std::acosh(x)");
  EXPECT_FALSE(t->aten_math);
}

TEST(CppSpecial, AtenFunctionsAreTheOnesEagerCalls) {
  auto digamma = special_op_text(Op::Digamma, {"x"}, DType::Float64);
  ASSERT_TRUE(digamma);
  EXPECT_EQ(digamma->text, "calc_digamma(x)");
  EXPECT_TRUE(digamma->aten_math);
  auto cheb = special_op_text(Op::ChebyshevT, {"x", "n"}, DType::Float32);
  ASSERT_TRUE(cheb);
  EXPECT_EQ(cheb->text, "chebyshev_polynomial_t_forward(x, n)");
  EXPECT_TRUE(cheb->aten_math);
}

TEST(CppSpecial, NextafterOf16BitFloatsStepsOnTheirBits) {
  EXPECT_EQ(special_op_text(Op::NextAfter, {"a", "b"}, DType::BFloat16)->text,
            "coil_nextafter<coil_bf16>(a, b)");
  EXPECT_EQ(special_op_text(Op::NextAfter, {"a", "b"}, DType::Float32)->text,
            "std::nextafter(a, b)");
}

TEST(CppSpecial, OtherOpsAreNotSpecial) {
  EXPECT_FALSE(special_op_text(Op::Add, {"a", "b"}, DType::Float32));
  EXPECT_FALSE(special_op_text(Op::Exp, {"a"}, DType::Float32));
}

CompileResult compile_unary(const std::string& op) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8}));
  Arg y = b.call(op, "aten." + op + ".default", {x}, contiguous({8}));
  return compile_graph(b.finish({y}), CompileOptions{});
}

TEST(CppSpecial, OnlyKernelFilesCallingAtenIncludeItsHeader) {
  CompileResult digamma = compile_unary("digamma");
  EXPECT_TRUE(contains(digamma.kernel_source, "float tmp1 = calc_digamma(tmp0);"))
      << digamma.kernel_source;
  EXPECT_TRUE(contains(digamma.kernel_source, "#include <ATen/native/Math.h>"));
  EXPECT_TRUE(contains(digamma.output_code, "load_cpp(CPP_SOURCE, aten_headers=True)"));

  CompileResult acosh = compile_unary("acosh");
  EXPECT_TRUE(contains(acosh.kernel_source, "std::acosh(tmp0)")) << acosh.kernel_source;
  EXPECT_FALSE(contains(acosh.kernel_source, "#include <ATen"));
  EXPECT_TRUE(contains(acosh.output_code, "load_cpp(CPP_SOURCE)\n"));
}

}  // namespace
}  // namespace coil::codegen
