// Tests for canonical construction of sym::Expr (cpp/coil/sym/expr.cpp, expr_sum.cpp,
// expr_div.cpp) and the range-free queries (cpp/coil/sym/query.cpp).
#include "coil/sym/expr.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace coil::sym {
namespace {

class SymExpr : public ::testing::Test {
 protected:
  Expr x = Expr::symbol("x");
  Expr y = Expr::symbol("y");
  Expr z = Expr::symbol("z");
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
};

// ---- interning and order ----

TEST_F(SymExpr, InterningGivesPointerEquality) {
  EXPECT_EQ(Expr::symbol("x"), x);
  EXPECT_EQ(Expr(5), Expr(int64_t{5}));
  EXPECT_EQ(Expr(int64_t{1} << 40), Expr(int64_t{1} << 40));
  EXPECT_EQ(Expr(), Expr(0));
  EXPECT_EQ((x + 2 * y).node(), (2 * y + x).node());
  EXPECT_NE(x, y);
}

TEST_F(SymExpr, Accessors) {
  EXPECT_EQ(Expr(7).as_int(), 7);
  EXPECT_EQ(x.as_int(), std::nullopt);
  EXPECT_EQ(x.name(), "x");
  EXPECT_TRUE(x.operands().empty());
  Expr e = 3 * x + 4;
  EXPECT_EQ(e.kind(), Kind::Add);
  EXPECT_EQ(e.int_value(), 4);
  ASSERT_EQ(e.operands().size(), 1u);
  EXPECT_EQ(e.operands()[0].kind(), Kind::Mul);
  EXPECT_EQ(e.operands()[0].int_value(), 3);
  EXPECT_STREQ(kind_name(Kind::FloorDiv), "FloorDiv");
  EXPECT_STREQ(kind_name(Kind::Ne), "Ne");
}

TEST_F(SymExpr, HashIsStructuralAndConsistent) {
  EXPECT_EQ((x + y).hash(), (y + x).hash());
  EXPECT_EQ(std::hash<Expr>()(x), x.hash());
  ExprMap m;
  m[x + 1] = y;
  EXPECT_EQ(m.at(1 + x), y);
}

TEST_F(SymExpr, OrderIsStructuralTotalAndDeterministic) {
  EXPECT_TRUE(Expr(1) < x);  // Int before Symbol
  EXPECT_TRUE(x < y);        // by name
  EXPECT_FALSE(y < x);
  EXPECT_FALSE(x < x);
  EXPECT_TRUE(Expr(-3) < Expr(2));
  Expr a = floordiv(x, 2);
  Expr b = floordiv(x, 3);
  EXPECT_TRUE(a < b);  // same kind, operands compared lexicographically
  EXPECT_FALSE(b < a);
}

TEST_F(SymExpr, ConcurrentInterningAgrees) {
  std::vector<const Node*> seen(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&seen, i] {
      Expr e = 0;
      for (int k = 0; k < 200; ++k) e = e + Expr::symbol("t" + std::to_string(k % 13)) * (k + 1000);
      seen[i] = floordiv(e, 4099).node();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Node* n : seen) EXPECT_EQ(n, seen[0]);
}

// ---- sums ----

TEST_F(SymExpr, SumsMergeLikeTerms) {
  EXPECT_EQ(x + x, 2 * x);
  EXPECT_EQ((x + 1) - 1, x);
  EXPECT_EQ(x - x, Expr(0));
  EXPECT_EQ(x + y, y + x);
  EXPECT_EQ((x + y) + z, x + (y + z));
  EXPECT_EQ(3 * x - 2 * x, x);
  EXPECT_EQ(2 * x + 3 + 4 * x - 3, 6 * x);
  EXPECT_EQ(Expr(2) + Expr(3), Expr(5));
  EXPECT_EQ(-(-x), x);
  EXPECT_EQ(x * 0, Expr(0));
  EXPECT_EQ(1 * x, x);
}

TEST_F(SymExpr, SumShape) {
  Expr e = y + 4096 * x + 7;
  ASSERT_EQ(e.kind(), Kind::Add);
  EXPECT_EQ(e.int_value(), 7);
  ASSERT_EQ(e.operands().size(), 2u);
  // Terms ordered by their base (the term without its coefficient).
  EXPECT_EQ(e.operands()[0], 4096 * x);
  EXPECT_EQ(e.operands()[1], y);
  EXPECT_EQ((x + 5).str(), "x + 5");
}

TEST_F(SymExpr, IntegerTimesSumDistributes) {
  EXPECT_EQ(2 * (x + 1), 2 * x + 2);
  EXPECT_EQ((x + 1) * 2 - 2, 2 * x);
  EXPECT_EQ(-(x - y), y - x);
}

TEST_F(SymExpr, MonomialTimesSumDistributes) {
  EXPECT_EQ(s0 * (x + 1), s0 * x + s0);
  EXPECT_EQ((x + y) * s0 - s0 * y, s0 * x);
}

TEST_F(SymExpr, ProductOfSumsIsKept) {
  Expr p = (x + 1) * (y + 1);
  EXPECT_EQ(p.kind(), Kind::Mul);
  EXPECT_EQ(p, (y + 1) * (x + 1));
  // Content of a sum factor moves into the coefficient.
  EXPECT_EQ((2 * x + 2) * (y + 1), 2 * p);
  EXPECT_EQ((1 - x) * (y + 1), -((x - 1) * (y + 1)));
  EXPECT_EQ(p.str(), "(x + 1)*(y + 1)");
}

TEST_F(SymExpr, ProductsFlattenAndOrder) {
  EXPECT_EQ(x * y, y * x);
  EXPECT_EQ((x * y) * z, x * (y * z));
  EXPECT_EQ((2 * x) * (3 * y), 6 * (x * y));
  Expr p = 2 * x * y;
  EXPECT_EQ(p.kind(), Kind::Mul);
  EXPECT_EQ(p.int_value(), 2);
  ASSERT_EQ(p.operands().size(), 2u);
  EXPECT_EQ(p.operands()[0], x);
  EXPECT_EQ(x * x - x * x, Expr(0));
  EXPECT_EQ(x * y + y * x, 2 * x * y);
}

TEST_F(SymExpr, OverflowThrows) {
  Expr big = Expr(int64_t{1} << 62);
  EXPECT_THROW(big + big, std::overflow_error);
  EXPECT_THROW(big * 4, std::overflow_error);
}

// ---- FloorDiv / Mod exact rules ----

TEST_F(SymExpr, DivModFoldConstantsWithPythonSemantics) {
  EXPECT_EQ(floordiv(7, 2), Expr(3));
  EXPECT_EQ(floordiv(-7, 2), Expr(-4));
  EXPECT_EQ(floordiv(7, -2), Expr(-4));
  EXPECT_EQ(floordiv(-7, -2), Expr(3));
  EXPECT_EQ(mod(7, 3), Expr(1));
  EXPECT_EQ(mod(-7, 3), Expr(2));
  EXPECT_EQ(mod(7, -3), Expr(-2));
  EXPECT_EQ(mod(-7, -3), Expr(-1));
  EXPECT_EQ(floordiv_int(-1, 4096), -1);
  EXPECT_EQ(mod_int(-1, 4096), 4095);
  EXPECT_THROW(floordiv(x, 0), std::domain_error);
  EXPECT_THROW(mod(x, 0), std::domain_error);
  EXPECT_THROW(floordiv_int(1, 0), std::domain_error);
  EXPECT_THROW(floordiv_int(INT64_MIN, -1), std::overflow_error);
  EXPECT_EQ(mod_int(INT64_MIN, -1), 0);
}

TEST_F(SymExpr, DivModTrivialRules) {
  EXPECT_EQ(floordiv(x, 1), x);
  EXPECT_EQ(floordiv(x, -1), -x);
  EXPECT_EQ(mod(x, 1), Expr(0));
  EXPECT_EQ(floordiv(0, x), Expr(0));
  EXPECT_EQ(mod(0, x), Expr(0));
  EXPECT_EQ(floordiv(x, x), Expr(1));
  EXPECT_EQ(mod(x, x), Expr(0));
  EXPECT_EQ(floordiv(3 * x, 3), x);
  EXPECT_EQ(mod(3 * x, 3), Expr(0));
}

TEST_F(SymExpr, FloorDivPullsOutMultiples) {
  EXPECT_EQ(floordiv(4096 * x + y, 4096), x + floordiv(y, 4096));
  EXPECT_EQ(floordiv(8 * x + 16 * z + y + 3, 8), x + 2 * z + floordiv(y + 3, 8));
  // The multiple of the divisor in the constant comes out too.
  EXPECT_EQ(floordiv(y + 13, 8), 1 + floordiv(y + 5, 8));
  EXPECT_EQ(floordiv(y - 3, 8), floordiv(y + 5, 8) - 1);
  // Symbolic divisors.
  EXPECT_EQ(floordiv(s0 * x + y, s0), x + floordiv(y, s0));
  EXPECT_EQ(floordiv(s0 * s1 * x + s0 * y, s0), s1 * x + y);
  EXPECT_EQ(floordiv(2 * s0 * x, 2 * s0), x);
}

TEST_F(SymExpr, ModDropsMultiples) {
  EXPECT_EQ(mod(4096 * x + y, 4096), mod(y, 4096));
  EXPECT_EQ(mod(y + 13, 8), mod(y + 5, 8));
  EXPECT_EQ(mod(s0 * x + y, s0), mod(y, s0));
  EXPECT_EQ(mod(s0 * x, s0), Expr(0));
}

TEST_F(SymExpr, DivModDivideOutCommonFactor) {
  EXPECT_EQ(floordiv(4 * x, 8), floordiv(x, 2));
  EXPECT_EQ(floordiv(4 * x + 2, 6), floordiv(2 * x + 1, 3));
  EXPECT_EQ(mod(4 * x, 8), 4 * mod(x, 2));
  EXPECT_EQ(mod(6 * x + 2, 4), 2 * mod(3 * x + 1, 2));
  // The low part (the constant's remainder) never carries into the divided-out digits.
  EXPECT_EQ(floordiv(-6 * x + 1, 9), floordiv(-2 * x, 3));
  EXPECT_EQ(mod(-6 * x + 1, 9), 3 * mod(-2 * x, 3) + 1);
  EXPECT_EQ(floordiv(6 * x + 7, 4), floordiv(3 * x + 3, 2));
  // Symbolic divisors with integer content: only when no remainder is left (sign of k unknown).
  EXPECT_EQ(floordiv(4 * x, 2 * s0 + 2), floordiv(2 * x, s0 + 1));
  EXPECT_EQ(mod(4 * x, 2 * s0), 2 * mod(2 * x, s0));
  EXPECT_EQ(floordiv(4 * x + 1, 2 * s0).kind(), Kind::FloorDiv);
  EXPECT_EQ(floordiv(4 * x + 1, 2 * s0).operands()[1], 2 * s0);
  EXPECT_EQ(floordiv(4 * x, -6), floordiv(2 * x, -3));
  EXPECT_EQ(floordiv(4 * x - 5, -6).kind(), Kind::FloorDiv);
  EXPECT_EQ(floordiv(4 * x - 5, -6).operands()[1], Expr(-6));
}

TEST_F(SymExpr, NestedDivMod) {
  EXPECT_EQ(floordiv(floordiv(x, 4), 8), floordiv(x, 32));
  EXPECT_EQ(floordiv(floordiv(x, s0), 8), floordiv(x, 8 * s0));
  EXPECT_EQ(mod(mod(x, 8), 8), mod(x, 8));
  EXPECT_EQ(mod(mod(x, 8), 4), mod(x, 4));
  EXPECT_EQ(mod(mod(x, s0), s0), mod(x, s0));
  EXPECT_EQ(mod(mod(x, 8) + y, 4), mod(x + y, 4));
  EXPECT_NE(mod(mod(x, 4), 8), mod(x, 8));  // 4 is not a multiple of 8: must stay
}

TEST_F(SymExpr, DivModPairsRecombine) {
  EXPECT_EQ(8 * floordiv(x, 8) + mod(x, 8), x);
  EXPECT_EQ(mod(x, 8) + 8 * floordiv(x, 8), x);
  EXPECT_EQ(3 * (8 * floordiv(x, 8) + mod(x, 8)), 3 * x);
  EXPECT_EQ(s0 * floordiv(x + y, s0) + mod(x + y, s0) + z, x + y + z);
  EXPECT_EQ(x - 8 * floordiv(x, 8), mod(x, 8));
  EXPECT_EQ(x + y - s0 * floordiv(x + y, s0), mod(x + y, s0));
  EXPECT_EQ(2 * x + 1 - 2 * (4 * floordiv(x, 4)), 2 * mod(x, 4) + 1);
  // Two-digit split of a flat index and back.
  Expr flat = 32 * z + y;
  Expr digits = 16 * floordiv(flat, 16) + 4 * mod(floordiv(flat, 4), 4) + mod(flat, 4);
  EXPECT_EQ(digits, flat);
  // Not a pair: the coefficients do not match.
  EXPECT_NE(4 * floordiv(x, 8) + mod(x, 8), x);
  EXPECT_EQ((x - 4 * floordiv(x, 8)).kind(), Kind::Add);
}

TEST_F(SymExpr, CeilDiv) {
  EXPECT_EQ(ceildiv(x, 4), floordiv(x + 3, 4));
  EXPECT_EQ(ceildiv(10, 4), Expr(3));
  EXPECT_EQ(ceildiv(8, 4), Expr(2));
}

// ---- Min / Max / comparisons ----

TEST_F(SymExpr, MinMax) {
  EXPECT_EQ(min(3, 5), Expr(3));
  EXPECT_EQ(max(3, 5), Expr(5));
  EXPECT_EQ(min(x, x), x);
  EXPECT_EQ(min(x, x + 1), x);
  EXPECT_EQ(max(x, x + 1), x + 1);
  EXPECT_EQ(min(x, y), min(y, x));
  EXPECT_EQ(min(min(x, y), z), min(x, min(y, z)));
  EXPECT_EQ(min(min(x, 3), 5), min(x, 3));
  Expr m = max(max(x, y), z);
  EXPECT_EQ(m.kind(), Kind::Max);
  EXPECT_EQ(m.operands().size(), 3u);
}

TEST_F(SymExpr, Comparisons) {
  EXPECT_EQ(lt(1, 2), Expr(1));
  EXPECT_EQ(le(2, 2), Expr(1));
  EXPECT_EQ(eq(2, 3), Expr(0));
  EXPECT_EQ(ne(2, 3), Expr(1));
  EXPECT_EQ(lt(x, x + 1), Expr(1));
  EXPECT_EQ(le(x + 1, x), Expr(0));
  EXPECT_EQ(eq(x + y, y + x), Expr(1));
  EXPECT_EQ(eq(x, y), eq(y, x));
  EXPECT_EQ(lt(x, y).kind(), Kind::Lt);
  EXPECT_NE(lt(x, y), lt(y, x));
}

// ---- rewriting and queries ----

TEST_F(SymExpr, WithOperandsRecanonicalizes) {
  Expr e = floordiv(x, 8);
  EXPECT_EQ(with_operands(e, {16 * y, 8}), 2 * y);
  EXPECT_EQ(with_operands(x, {}), x);
  EXPECT_EQ(with_operands(min(x, y), {Expr(3), Expr(4)}), Expr(3));
  EXPECT_THROW(with_operands(e, {x}), std::invalid_argument);
}

TEST_F(SymExpr, SumDivisors) {
  // A sum divisor divides products that have it as a factor.
  Expr p = (x + y) * (s1 + 1);
  EXPECT_EQ(exact_div(p, s1 + 1), x + y);
  EXPECT_EQ(exact_div(2 * s1 + 2, s1 + 1), Expr(2));
  EXPECT_EQ(exact_div(s1 + 1, s1 + 1), Expr(1));
  EXPECT_EQ(exact_div(-s1 - 1, s1 + 1), Expr(-1));
  EXPECT_EQ(exact_div(s1 + 2, s1 + 1), std::nullopt);
  EXPECT_EQ(floordiv(p + z, s1 + 1), x + y + floordiv(z, s1 + 1));
  EXPECT_EQ(mod(p + z, s1 + 1), mod(z, s1 + 1));
  EXPECT_EQ((s1 + 1) * floordiv(z, s1 + 1) + mod(z, s1 + 1), z);
}

TEST_F(SymExpr, ExactDiv) {
  EXPECT_EQ(exact_div(8 * x + 4 * s0 * y, 4), 2 * x + s0 * y);
  EXPECT_EQ(exact_div(8 * x + 4, 4), 2 * x + 1);
  EXPECT_EQ(exact_div(s0 * x + s0, s0), x + 1);
  EXPECT_EQ(exact_div(8 * x + 2, 4), std::nullopt);
  EXPECT_EQ(exact_div(s0 * x + 1, s0), std::nullopt);
  EXPECT_EQ(exact_div(x, x + 1), std::nullopt);
}

TEST_F(SymExpr, Substitute) {
  ExprMap m{{x, y + 1}};
  EXPECT_EQ(substitute(2 * x + 3, m), 2 * y + 5);
  EXPECT_EQ(substitute(floordiv(4 * x, 4), m), y + 1);
  EXPECT_EQ(substitute(floordiv(x + 7, 8), {{x, 8 * z + 1}}), z + 1);
  EXPECT_EQ(substitute(z, m), z);
  EXPECT_THROW(substitute(x, {{x + 1, y}}), std::invalid_argument);
}

TEST_F(SymExpr, Evaluate) {
  std::map<std::string, int64_t> v{{"x", -7}, {"y", 2}, {"s0", 3}};
  EXPECT_EQ(evaluate(floordiv(x, y), v), -4);
  EXPECT_EQ(evaluate(mod(x, y), v), 1);
  EXPECT_EQ(evaluate(mod(x, -y), v), -1);
  EXPECT_EQ(evaluate(3 * x + y * s0, v), -15);
  EXPECT_EQ(evaluate(min(x, y) + max(x, y), v), -5);
  EXPECT_EQ(evaluate(lt(x, y) + 2 * eq(y, 2) + 4 * ne(s0, 3) + 8 * le(y, 2), v), 11);
  EXPECT_THROW(evaluate(z, v), std::runtime_error);
  EXPECT_THROW(evaluate(floordiv(x, y - 2), v), std::domain_error);
}

TEST_F(SymExpr, FreeSymbolsAndDependsOn) {
  Expr e = floordiv(y * s0 + x, 4) + min(z, x);
  std::vector<Expr> fs = free_symbols(e);
  ASSERT_EQ(fs.size(), 4u);
  EXPECT_EQ(fs[0], s0);
  EXPECT_EQ(fs[1], x);
  EXPECT_EQ(fs[2], y);
  EXPECT_EQ(fs[3], z);
  EXPECT_TRUE(depends_on(e, z));
  EXPECT_FALSE(depends_on(e, s1));
  EXPECT_TRUE(free_symbols(Expr(3)).empty());
}

TEST_F(SymExpr, AsAffine) {
  std::optional<Affine> a = as_affine(4096 * x + s0 * y + 2 * s0 + 7, {x, y});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->coeffs[0], Expr(4096));
  EXPECT_EQ(a->coeffs[1], s0);
  EXPECT_EQ(a->constant, 2 * s0 + 7);

  std::optional<Affine> b = as_affine(3 * s0 * s1 * x + x, {x});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->coeffs[0], 3 * s0 * s1 + 1);
  EXPECT_EQ(b->constant, Expr(0));

  std::optional<Affine> c = as_affine(s0, {x, y});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->coeffs[0], Expr(0));
  EXPECT_EQ(c->constant, s0);

  // Products of sums are multiplied out when they mention a var.
  std::optional<Affine> d = as_affine((x + 1) * (s0 + 1) + y, {x, y});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->coeffs[0], s0 + 1);
  EXPECT_EQ(d->coeffs[1], Expr(1));
  EXPECT_EQ(d->constant, s0 + 1);
  std::optional<Affine> f = as_affine(((x * s0 + x + y) * (s1 + 1) + z), {x, y, z});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->coeffs[0], s0 * s1 + s0 + s1 + 1);
  EXPECT_EQ(f->coeffs[1], s1 + 1);
  EXPECT_EQ(f->coeffs[2], Expr(1));
  EXPECT_FALSE(as_affine((x + 1) * (x + 2), {x}).has_value());

  EXPECT_FALSE(as_affine(floordiv(x, 2), {x}).has_value());
  EXPECT_FALSE(as_affine(x * y, {x, y}).has_value());
  EXPECT_FALSE(as_affine(x * x, {x}).has_value());
  EXPECT_FALSE(as_affine(min(x, 3) + y, {x, y}).has_value());
  EXPECT_FALSE(as_affine(lt(x, 3), {x}).has_value());
  EXPECT_FALSE(as_affine(mod(s0, 4) + (x + 1) * (y + 1), {x, y}).has_value());
  EXPECT_TRUE(as_affine(mod(s0, 4) + (x + 1) * (y + 1), {x}).has_value());
  EXPECT_TRUE(as_affine(mod(s0, 4) + x, {x}).has_value());
}

}  // namespace
}  // namespace coil::sym
