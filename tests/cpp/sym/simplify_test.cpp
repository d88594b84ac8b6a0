// Tests for the range-aware part of sym (cpp/coil/sym/simplify.cpp): RangeEnv, bounds,
// simplify, statically_known_true, size_hint.
#include "coil/sym/expr.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace coil::sym {
namespace {

constexpr int64_t kInf = Range::kPosInf;
constexpr int64_t kNInf = Range::kNegInf;

class SymSimplify : public ::testing::Test {
 protected:
  Expr x = Expr::symbol("x");
  Expr x0 = Expr::symbol("x0");
  Expr x1 = Expr::symbol("x1");
  Expr x2 = Expr::symbol("x2");
  Expr r0 = Expr::symbol("r0");
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
  Expr u = Expr::symbol("u");  // unknown range
  RangeEnv env;

  void add_size(const Expr& s, int64_t hint) {
    env.set_range(s, Range{2, kInf});
    env.set_hint(s, hint);
  }
};

void expect_range(Range r, int64_t lo, int64_t hi) {
  EXPECT_EQ(r.lo, lo);
  EXPECT_EQ(r.hi, hi);
}

// ---- RangeEnv ----

TEST_F(SymSimplify, RangeEnvStoresRangesHintsExtents) {
  add_size(s0, 64);
  env.add_index_var(x0, s0);
  env.add_index_var(x1, 8);
  expect_range(env.range_of_symbol(s0), 2, kInf);
  expect_range(env.range_of_symbol(x0), 0, kInf);
  expect_range(env.range_of_symbol(x1), 0, 7);
  expect_range(env.range_of_symbol(u), kNInf, kInf);
  EXPECT_EQ(env.hint_of_symbol(s0), 64);
  EXPECT_EQ(env.hint_of_symbol(x0), std::nullopt);
  EXPECT_EQ(env.extent_of_symbol(x0), s0);
  EXPECT_EQ(env.extent_of_symbol(s0), std::nullopt);
  EXPECT_THROW(env.set_range(s0 + 1, Range{}), std::invalid_argument);
}

// ---- bounds ----

TEST_F(SymSimplify, BoundsIntervalArithmetic) {
  env.add_index_var(x0, 4);
  env.add_index_var(x1, 8);
  env.set_range(x, Range{-3, 5});
  expect_range(bounds(8 * x0 + x1, env), 0, 31);
  expect_range(bounds(x0 - x1, env), -7, 3);
  expect_range(bounds(x * x1, env), -21, 35);
  expect_range(bounds(floordiv(x, 2), env), -2, 2);
  expect_range(bounds(floordiv(x, -2), env), -3, 1);
  expect_range(bounds(mod(x, 4), env), 0, 3);
  expect_range(bounds(mod(x1, 16), env), 0, 7);
  expect_range(bounds(mod(x1 + 8, 8), env), 0, 7);
  expect_range(bounds(mod(x, -4), env), -3, 0);
  expect_range(bounds(min(x0, x), env), -3, 3);
  expect_range(bounds(max(x0, x), env), 0, 5);
  expect_range(bounds(lt(x0, x1 + 8), env), 1, 1);
  expect_range(bounds(lt(x0, x1), env), 0, 1);
  expect_range(bounds(Expr(7), env), 7, 7);
}

TEST_F(SymSimplify, BoundsUnboundedAndSaturating) {
  add_size(s0, 64);
  expect_range(bounds(u, env), kNInf, kInf);
  expect_range(bounds(3 * s0 + 1, env), 7, kInf);
  expect_range(bounds(-s0, env), kNInf, -2);
  expect_range(bounds(s0 * u, env), kNInf, kInf);
  expect_range(bounds(floordiv(s0, 4), env), 0, kInf);
  expect_range(bounds(mod(u, s0), env), 0, kInf);
  expect_range(bounds(mod(u, 8), env), 0, 7);
  env.set_range(x, Range{int64_t{1} << 40, int64_t{1} << 41});
  // (2^41)^2 overflows int64: the upper bound saturates to +inf, the lower one stays exact.
  Range r = bounds(x * x, env);
  EXPECT_EQ(r.hi, kInf);
  EXPECT_EQ(r.lo, kInf - 1);  // 2^80 does not fit either; clamped to the largest finite value
  Range neg = bounds(-(x * x), env);
  EXPECT_EQ(neg.lo, kNInf);
}

TEST_F(SymSimplify, BoundsOfDivisionByRangeContainingZero) {
  env.set_range(x, Range{-4, 4});
  env.set_range(u, Range{0, 10});
  env.add_index_var(x1, 100);
  // The divisor's zero is excluded (undefined there): x1 // d for d in [1, 4] and [-4, -1].
  expect_range(bounds(floordiv(x1, x), env), -99, 99);
  expect_range(bounds(floordiv(x1, u), env), 0, 99);
}

// ---- simplify: the index cases codegen relies on ----

TEST_F(SymSimplify, FlatIndexSplitsBack) {
  env.add_index_var(x0, 1000);
  env.add_index_var(r0, 4096);
  EXPECT_EQ(simplify(floordiv(4096 * x0 + r0, 4096), env), x0);
  EXPECT_EQ(simplify(mod(4096 * x0 + r0, 4096), env), r0);
}

TEST_F(SymSimplify, FlatIndexSplitsBackWithUnboundedOuter) {
  add_size(s0, 1000);
  env.add_index_var(x0, s0);
  env.add_index_var(r0, 4096);
  EXPECT_EQ(simplify(floordiv(4096 * x0 + r0, 4096), env), x0);
  EXPECT_EQ(simplify(mod(4096 * x0 + r0, 4096), env), r0);
}

TEST_F(SymSimplify, SmallTiles) {
  env.add_index_var(x0, 4);
  env.add_index_var(x1, 8);
  env.add_index_var(x, 32);
  EXPECT_EQ(simplify(floordiv(8 * x0 + x1, 8), env), x0);
  EXPECT_EQ(simplify(mod(8 * x0 + x1, 8), env), x1);
  EXPECT_EQ(simplify(mod(floordiv(x, 8), 4), env), floordiv(x, 8));
  EXPECT_EQ(simplify(floordiv(8 * x0 + x1, 32), env), Expr(0));
  EXPECT_EQ(simplify(mod(8 * x0 + x1, 32), env), 8 * x0 + x1);
}

TEST_F(SymSimplify, DropLowPart) {
  env.add_index_var(x0, 100);
  env.add_index_var(x1, 2);
  env.add_index_var(x2, 4);
  // 16*x0 + 4*x1 + x2 over 8: x2 < 4 never carries into the 4s digit.
  EXPECT_EQ(simplify(floordiv(16 * x0 + 4 * x1 + x2, 8), env), 2 * x0);
  EXPECT_EQ(simplify(floordiv(4 * x0 + x2, 8), env), floordiv(x0, 2));
  EXPECT_EQ(simplify(mod(4 * x0 + x2, 8), env), 4 * mod(x0, 2) + x2);
}

TEST_F(SymSimplify, SymbolicDivisors) {
  add_size(s0, 64);
  add_size(s1, 32);
  env.add_index_var(x0, 128);
  env.add_index_var(x1, s0);
  env.add_index_var(x2, s1);
  EXPECT_EQ(simplify(floordiv(s0 * x0 + x1, s0), env), x0);
  EXPECT_EQ(simplify(mod(s0 * x0 + x1, s0), env), x1);
  EXPECT_EQ(simplify(floordiv(x1, s0), env), Expr(0));
  EXPECT_EQ(simplify(mod(x1, s0), env), x1);
  // Three-level tiling over sizes [?, s0, s1].
  Expr flat = s0 * s1 * x0 + s1 * x1 + x2;
  EXPECT_EQ(simplify(floordiv(flat, s0 * s1), env), x0);
  EXPECT_EQ(simplify(mod(floordiv(flat, s1), s0), env), x1);
  EXPECT_EQ(simplify(mod(flat, s1), env), x2);
  EXPECT_EQ(simplify(floordiv(s1 * x1 + x2, s0 * s1), env), Expr(0));
}

TEST_F(SymSimplify, DelinearizeFlatIndexWithSymbolicSizes) {
  // A flat index var over s0*s1 split back into [s0, s1] digits (as fusion's delinearize does).
  add_size(s0, 64);
  add_size(s1, 32);
  env.add_index_var(x, s0 * s1);
  EXPECT_EQ(simplify(mod(floordiv(x, s1), s0), env), floordiv(x, s1));
  EXPECT_EQ(simplify(mod(x, s1), env), mod(x, s1));
  EXPECT_TRUE(statically_known_true(lt(floordiv(x, s1), s0), env));
  EXPECT_FALSE(statically_known_true(lt(floordiv(x, s1), s0 - 1), env));
  // Recombining the digits gives the flat index back.
  Expr digits = s1 * simplify(mod(floordiv(x, s1), s0), env) + simplify(mod(x, s1), env);
  EXPECT_EQ(digits, x);
}

TEST_F(SymSimplify, ThreeLevelSymbolicDigitsRecombine) {
  // x over [s0*s1*s2] split into [s0, s1, s2] digits and flattened again.
  Expr s2 = Expr::symbol("s2");
  add_size(s0, 4);
  add_size(s1, 5);
  add_size(s2, 6);
  env.add_index_var(x, s0 * s1 * s2);
  Expr g0 = simplify(floordiv(x, s1 * s2), env);
  Expr g1 = simplify(mod(floordiv(x, s2), s1), env);
  Expr g2 = simplify(mod(x, s2), env);
  EXPECT_EQ(g0, floordiv(x, s1 * s2));
  EXPECT_EQ(g2, mod(x, s2));
  EXPECT_EQ(simplify((g0 * s1 + g1) * s2 + g2, env), x);
  EXPECT_EQ(simplify(floordiv(floordiv(x, s2) + 3, s1), env), floordiv(x + 3 * s2, s1 * s2));
}

TEST_F(SymSimplify, ReshapeRoundTrip) {
  // [4, 8] viewed as [32] viewed as [2, 16] and indexed back: digits recombine exactly.
  env.add_index_var(x0, 2);
  env.add_index_var(x1, 16);
  Expr flat = 16 * x0 + x1;
  Expr i0 = simplify(floordiv(flat, 8), env);
  Expr i1 = simplify(mod(flat, 8), env);
  EXPECT_EQ(i0, 2 * x0 + floordiv(x1, 8));
  EXPECT_EQ(i1, mod(x1, 8));
  EXPECT_EQ(simplify(8 * i0 + i1, env), flat);
}

TEST_F(SymSimplify, SymbolicProofWorksWithHintRanges) {
  // The caller recorded only [0, hint - 1] numerically; the registered extent still proves
  // x1 < s0.
  add_size(s0, 64);
  env.add_index_var(x1, s0);
  env.set_range(x1, Range{0, 63});
  env.add_index_var(x0, 10);
  EXPECT_EQ(simplify(floordiv(s0 * x0 + x1, s0), env), x0);
  EXPECT_TRUE(statically_known_true(lt(x1, s0), env));
  EXPECT_FALSE(statically_known_true(lt(x1, s0 - 1), env));
}

TEST_F(SymSimplify, NoRangeNoRewrite) {
  // Without ranges, nothing range-dependent may fire.
  EXPECT_EQ(simplify(floordiv(8 * u + x, 8), env), u + floordiv(x, 8));
  EXPECT_EQ(simplify(mod(x, 8), env), mod(x, 8));
  EXPECT_EQ(simplify(min(x, u), env), min(x, u));
}

TEST_F(SymSimplify, ModWithinOnePeriod) {
  env.set_range(x, Range{8, 15});
  EXPECT_EQ(simplify(mod(x, 8), env), x - 8);
  EXPECT_EQ(simplify(floordiv(x, 8), env), Expr(1));
  env.set_range(u, Range{-8, -1});
  EXPECT_EQ(simplify(mod(u, 8), env), u + 8);
  EXPECT_EQ(simplify(floordiv(u, 8), env), Expr(-1));
}

TEST_F(SymSimplify, NestedFloorDivWithSymbolicDivisor) {
  add_size(s0, 64);
  EXPECT_EQ(simplify(floordiv(floordiv(x, 4), s0), env), floordiv(x, 4 * s0));
}

TEST_F(SymSimplify, MinMaxFoldByBounds) {
  add_size(s0, 64);
  env.add_index_var(x0, 8);
  env.add_index_var(x1, s0);
  EXPECT_EQ(simplify(min(x0, 100), env), x0);
  EXPECT_EQ(simplify(max(x0, 100), env), Expr(100));
  EXPECT_EQ(simplify(max(x0, -1), env), x0);
  EXPECT_EQ(simplify(min(x1, s0), env), x1);  // symbolic proof x1 <= s0
  EXPECT_EQ(simplify(max(x1 + 1, s0), env), s0);
  EXPECT_EQ(simplify(min(min(x0, s0), 9), env), min(x0, s0));  // x0 = 7 > s0 = 2 is possible
  EXPECT_EQ(simplify(min(min(x0, s0 + 6), 9), env), x0);
  EXPECT_EQ(simplify(min(x0, u), env), min(x0, u));
}

TEST_F(SymSimplify, ComparisonsFold) {
  add_size(s0, 64);
  env.add_index_var(x0, 8);
  env.add_index_var(x1, s0);
  EXPECT_EQ(simplify(lt(x0, 8), env), Expr(1));
  EXPECT_EQ(simplify(lt(x0, 7), env), lt(x0, 7));
  EXPECT_EQ(simplify(le(8, x0), env), Expr(0));
  EXPECT_EQ(simplify(eq(x0, 8), env), Expr(0));
  EXPECT_EQ(simplify(ne(x0, -1), env), Expr(1));
  EXPECT_EQ(simplify(lt(x1, s0), env), Expr(1));
  EXPECT_EQ(simplify(le(s0, x1), env), Expr(0));
  EXPECT_EQ(simplify(lt(x0, u), env), lt(x0, u));
}

TEST_F(SymSimplify, SimplifyIsBottomUp) {
  env.add_index_var(x0, 4);
  env.add_index_var(x1, 8);
  Expr inner = floordiv(8 * x0 + x1, 8);  // -> x0
  EXPECT_EQ(simplify(s0 * inner + min(x1, 10), env), s0 * x0 + x1);
  EXPECT_EQ(simplify(lt(inner, 4) * u, env), u);
  // A symbol with a single-value range is a constant.
  env.set_range(x2, Range{3, 3});
  EXPECT_EQ(simplify(x2 + u, env), u + 3);
}

// ---- statically_known_true ----

TEST_F(SymSimplify, StaticallyKnownTrue) {
  add_size(s0, 64);
  env.add_index_var(x0, 8);
  env.add_index_var(x1, s0);
  EXPECT_TRUE(statically_known_true(lt(x0, 8), env));
  EXPECT_FALSE(statically_known_true(lt(x0, 7), env));
  EXPECT_TRUE(statically_known_true(le(0, x0), env));
  EXPECT_TRUE(statically_known_true(le(0, x0 * s0), env));
  EXPECT_TRUE(statically_known_true(le(2, s0), env));
  EXPECT_FALSE(statically_known_true(le(3, s0), env));  // "not known", not "false"
  EXPECT_TRUE(statically_known_true(ne(s0, 0), env));
  EXPECT_TRUE(statically_known_true(eq(x0 + 1, 1 + x0), env));
  EXPECT_FALSE(statically_known_true(eq(x0, 0), env));
  EXPECT_TRUE(statically_known_true(Expr(3), env));
  EXPECT_FALSE(statically_known_true(Expr(0), env));
  EXPECT_TRUE(statically_known_true(s0, env));  // read as s0 != 0
  EXPECT_FALSE(statically_known_true(x0, env));
  EXPECT_TRUE(statically_known_true(lt(x1, s0), env));
  EXPECT_TRUE(statically_known_true(le(x1 + 1, s0), env));
  EXPECT_FALSE(statically_known_true(lt(x1 + 1, s0), env));
  EXPECT_FALSE(statically_known_true(lt(u, 3), env));
}

// ---- size_hint ----

TEST_F(SymSimplify, SizeHint) {
  add_size(s0, 64);
  add_size(s1, 3);
  EXPECT_EQ(size_hint(s0 * s1 + floordiv(s0, 5), env), 64 * 3 + 12);
  EXPECT_EQ(size_hint(Expr(9), env), 9);
  try {
    size_hint(s0 + u, env);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("symbol u"), std::string::npos) << e.what();
  }
}

// Dynamic shapes: a row padded to a multiple of 8 (eager pads attention masks so) provably clears
// the row, and a size symbol's range comes from the current SizeSymbolScope.
TEST(SymSizeScope, PaddedRowClearsItsRow) {
  Expr s = Expr::symbol("s50");
  RangeEnv sizes;
  sizes.set_range(s, {2, Range::kPosInf});
  sizes.set_hint(s, 7);
  Expr padded = s - mod(s, 8) + 8;
  RangeEnv local;                                             // knows nothing itself
  EXPECT_TRUE(statically_known_true(le(s, padded), local));   // 8 - Mod(s, 8) >= 1 for any s
  EXPECT_FALSE(statically_known_true(le(1, padded), local));  // s may be negative
  {
    SizeSymbolScope scope(sizes);
    EXPECT_TRUE(statically_known_true(le(1, padded), local));
    EXPECT_TRUE(statically_known_true(le(1, max(1, padded)), local));
    EXPECT_EQ(size_hint(padded, local), 8);
  }
  EXPECT_EQ(SizeSymbolScope::current(), nullptr);
}

}  // namespace
}  // namespace coil::sym
