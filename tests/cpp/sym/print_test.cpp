// Tests for the sym printers (cpp/coil/sym/print.cpp): exact text of str(), to_python, to_cpp.
#include "coil/sym/expr.h"

#include <gtest/gtest.h>

namespace coil::sym {
namespace {

class SymPrint : public ::testing::Test {
 protected:
  Expr a = Expr::symbol("a");
  Expr b = Expr::symbol("b");
  Expr x0 = Expr::symbol("x0");
  Expr x1 = Expr::symbol("x1");
  Expr r0 = Expr::symbol("r0");
  Expr s0 = Expr::symbol("s0");
  Expr u = Expr::symbol("u");
  RangeEnv env;

  void SetUp() override {
    env.set_range(s0, Range{2, Range::kPosInf});
    env.set_hint(s0, 64);
    env.add_index_var(x0, s0);
    env.add_index_var(x1, 8);
    env.add_index_var(r0, 4096);
  }
};

TEST_F(SymPrint, Str) {
  EXPECT_EQ(Expr(42).str(), "42");
  EXPECT_EQ(Expr(-42).str(), "-42");
  EXPECT_EQ(x0.str(), "x0");
  EXPECT_EQ((4096 * x0 + r0).str(), "r0 + 4096*x0");
  EXPECT_EQ((s0 * x1 + 4).str(), "s0*x1 + 4");
  EXPECT_EQ((a - 3 * b).str(), "a - 3*b");
  EXPECT_EQ((-3 * b + a).str(), "a - 3*b");
  EXPECT_EQ((-a - b - 1).str(), "-a - b - 1");
  EXPECT_EQ((-a).str(), "-a");
  EXPECT_EQ((-2 * a * b).str(), "-2*a*b");
  EXPECT_EQ(floordiv(x0, 8).str(), "FloorDiv(x0, 8)");
  EXPECT_EQ(mod(x0, 8).str(), "Mod(x0, 8)");
  EXPECT_EQ((2 * floordiv(a + 1, 8)).str(), "2*FloorDiv(a + 1, 8)");
  EXPECT_EQ(min(a, b).str(), "Min(a, b)");
  EXPECT_EQ(max(max(a, b), s0).str(), "Max(a, b, s0)");
  EXPECT_EQ(lt(a, b + 1).str(), "a < b + 1");
  EXPECT_EQ(le(a, b).str(), "a <= b");
  EXPECT_EQ(eq(b, a).str(), "a == b");
  EXPECT_EQ(ne(a, b).str(), "a != b");
  EXPECT_EQ((3 * lt(a, b) + 1).str(), "3*(a < b) + 1");
  // Factors in structural order: an Add compares by its constant before its terms.
  EXPECT_EQ(((a + 1) * (b - 1)).str(), "(b - 1)*(a + 1)");
  EXPECT_EQ((a * b - 2 * (a + 1) * (b - 1)).str(), "a*b - 2*(b - 1)*(a + 1)");
}

TEST_F(SymPrint, Python) {
  EXPECT_EQ(to_python(4096 * x0 + r0), "r0 + 4096*x0");
  EXPECT_EQ(to_python(floordiv(x0, 8)), "x0 // 8");
  EXPECT_EQ(to_python(mod(floordiv(a, 8), 4)), "(a // 8) % 4");
  EXPECT_EQ(to_python(floordiv(a + 1, s0)), "(a + 1) // s0");
  EXPECT_EQ(to_python(floordiv(a, 4 * s0)), "a // (4*s0)");
  EXPECT_EQ(to_python(floordiv(a, -8)), "a // (-8)");
  EXPECT_EQ(to_python(floordiv(-a, 8)), "(-a) // 8");
  EXPECT_EQ(to_python(2 * floordiv(a, 8)), "2*(a // 8)");
  EXPECT_EQ(to_python(a - floordiv(a, 8)), "a - a // 8");
  // Unary minus binds tighter than // and % in Python: -a % 5 is (-a) % 5.
  EXPECT_EQ(to_python(1 - mod(a, 5)), "-(a % 5) + 1");
  EXPECT_EQ(to_python(-floordiv(a, 5)), "-(a // 5)");
  EXPECT_EQ(to_python(b - 2 * mod(a, 5)), "b - 2*(a % 5)");
  EXPECT_EQ((1 - mod(a, 5)).str(), "-Mod(a, 5) + 1");
  EXPECT_EQ(to_python(b + floordiv(a, 8)), "b + a // 8");
  EXPECT_EQ(to_python(min(a, b) + max(a, b)), "min(a, b) + max(a, b)");
  EXPECT_EQ(to_python(lt(a, b)), "(a < b)");
  EXPECT_EQ(to_python(2 * ne(a, b)), "2*(a != b)");
  EXPECT_EQ(to_python(lt(lt(a, b), u)), "((a < b) < u)");
}

TEST_F(SymPrint, CppUsesNativeDivisionOnlyWhenNonNegative) {
  EXPECT_EQ(to_cpp(floordiv(4096 * x0 + r0, 7), env), "(r0 + 4096*x0) / 7");
  EXPECT_EQ(to_cpp(mod(r0, s0), env), "r0 % s0");
  EXPECT_EQ(to_cpp(floordiv(u, 8), env), "coil_floordiv(u, 8)");
  EXPECT_EQ(to_cpp(mod(u, 8), env), "coil_mod(u, 8)");
  EXPECT_EQ(to_cpp(mod(x1, u), env), "coil_mod(x1, u)");
  EXPECT_EQ(to_cpp(2 * floordiv(x0, 3), env), "2*(x0 / 3)");
  EXPECT_EQ(to_cpp(floordiv(r0, 8) - 1, env), "r0 / 8 - 1");
}

TEST_F(SymPrint, CppMinMaxComparisonsLiterals) {
  EXPECT_EQ(to_cpp(min(x0, s0), env), "std::min<int64_t>(s0, x0)");
  EXPECT_EQ(to_cpp(max(max(a, b), u), env), "std::max<int64_t>(a, std::max<int64_t>(b, u))");
  EXPECT_EQ(to_cpp(lt(x0, s0), env), "(x0 < s0)");
  EXPECT_EQ(to_cpp(3 * eq(a, b), env), "3*(a == b)");
  EXPECT_EQ(to_cpp(x0 + (int64_t{1} << 40), env), "x0 + 1099511627776LL");
  EXPECT_EQ(to_cpp(x0 - (int64_t{1} << 40), env), "x0 - 1099511627776LL");
  EXPECT_EQ(to_cpp(Expr(INT64_MIN), env), "(-9223372036854775807LL - 1)");
  EXPECT_EQ(to_cpp(a - 3 * b, env), "a - 3*b");
}

}  // namespace
}  // namespace coil::sym
