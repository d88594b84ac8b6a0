// Randomized tests for sym: random expressions are checked by brute-force evaluation.
//   * construction: evaluate(op(a, b)) == op(evaluate(a), evaluate(b)) with Python semantics;
//   * simplify: evaluate(simplify(e)) == evaluate(e) at points within the ranges;
//   * bounds contain every value; statically_known_true only claims what holds; as_affine and
//     substitute preserve values.
// The seed is printed; rerun one with COIL_TEST_SEED=<seed>. A failing seed becomes a regression
// test in expr_test.cpp / simplify_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <stdexcept>

#include "coil/sym/expr.h"

namespace coil::sym {
namespace {

using Values = std::map<std::string, int64_t>;

uint64_t test_seed() {
  const char* s = std::getenv("COIL_TEST_SEED");
  if (s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 10);
  return 20240611;
}

enum class Op { Add, Sub, Mul, FloorDiv, Mod, Min, Max, Lt, Le, Eq, Ne, kCount };

// Python semantics over int64; nullopt where Python would raise (division by zero) or the value
// leaves int64.
std::optional<int64_t> apply_op(Op op, int64_t a, int64_t b) {
  int64_t r;
  switch (op) {
    case Op::Add:
      return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case Op::Sub:
      return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case Op::Mul:
      return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
    case Op::FloorDiv: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      int64_t q = a / b;
      if (q * b != a && ((a < 0) != (b < 0))) --q;
      return q;
    }
    case Op::Mod: {
      if (b == 0) return std::nullopt;
      if (b == -1) return 0;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m;
    }
    case Op::Min:
      return std::min(a, b);
    case Op::Max:
      return std::max(a, b);
    case Op::Lt:
      return a < b ? 1 : 0;
    case Op::Le:
      return a <= b ? 1 : 0;
    case Op::Eq:
      return a == b ? 1 : 0;
    case Op::Ne:
      return a != b ? 1 : 0;
    case Op::kCount:
      break;
  }
  return std::nullopt;
}

Expr build_op(Op op, const Expr& a, const Expr& b) {
  switch (op) {
    case Op::Add:
      return a + b;
    case Op::Sub:
      return a - b;
    case Op::Mul:
      return a * b;
    case Op::FloorDiv:
      return floordiv(a, b);
    case Op::Mod:
      return mod(a, b);
    case Op::Min:
      return min(a, b);
    case Op::Max:
      return max(a, b);
    case Op::Lt:
      return lt(a, b);
    case Op::Le:
      return le(a, b);
    case Op::Eq:
      return eq(a, b);
    case Op::Ne:
      return ne(a, b);
    case Op::kCount:
      break;
  }
  return a;
}

std::optional<int64_t> try_eval(const Expr& e, const Values& v) {
  try {
    return evaluate(e, v);
  } catch (const std::domain_error&) {
    return std::nullopt;
  } catch (const std::overflow_error&) {
    return std::nullopt;
  }
}

// Symbols shaped like a kernel's: x an index var of extent 8, s a size in [1, 6], y an index var
// of symbolic extent s, z a signed value in [-5, 5].
class RandomSym : public ::testing::Test {
 protected:
  Expr x = Expr::symbol("x");
  Expr y = Expr::symbol("y");
  Expr z = Expr::symbol("z");
  Expr s = Expr::symbol("s");
  RangeEnv env;
  std::mt19937_64 rng;

  void SetUp() override {
    env.set_range(s, Range{1, 6});
    env.set_hint(s, 4);
    env.add_index_var(x, 8);
    env.add_index_var(y, s);
    env.set_range(z, Range{-5, 5});
    uint64_t seed = test_seed();
    std::cout << "[ sym random ] COIL_TEST_SEED=" << seed << "\n";
    rng.seed(seed);
  }

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }

  Values random_point() {
    Values v;
    v["s"] = uniform(1, 6);
    v["y"] = uniform(0, v["s"] - 1);
    v["x"] = uniform(0, 7);
    v["z"] = uniform(-5, 5);
    return v;
  }

  Expr leaf() {
    switch (uniform(0, 5)) {
      case 0:
        return x;
      case 1:
        return y;
      case 2:
        return z;
      case 3:
        return s;
      default:
        return Expr(uniform(-6, 9));
    }
  }

  // Divisors lean towards the shapes index math uses (positive constants, sizes) but include
  // negative constants and arbitrary subexpressions (points where those are 0 are skipped).
  Expr divisor(int depth) {
    switch (uniform(0, 5)) {
      case 0:
        return Expr(uniform(1, 9));
      case 1:
        return Expr(-uniform(1, 5));
      case 2:
        return s;
      case 3:
        return s * uniform(1, 3);
      case 4:
        return Expr(uniform(2, 4)) * uniform(1, 2);
      default:
        return random_expr(depth);
    }
  }

  Expr random_expr(int depth) {
    if (depth <= 0 || uniform(0, 4) == 0) return leaf();
    auto op = static_cast<Op>(uniform(0, static_cast<int64_t>(Op::kCount) - 1));
    Expr a = random_expr(depth - 1);
    Expr b = (op == Op::FloorDiv || op == Op::Mod) ? divisor(depth - 1) : random_expr(depth - 1);
    try {
      return build_op(op, a, b);
    } catch (const std::domain_error&) {
      return a;  // a divisor that folded to 0
    }
  }
};

TEST_F(RandomSym, ConstructionMatchesPythonSemantics) {
  SCOPED_TRACE("COIL_TEST_SEED=" + std::to_string(test_seed()));
  int checked = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto op = static_cast<Op>(uniform(0, static_cast<int64_t>(Op::kCount) - 1));
    Expr a = random_expr(3);
    Expr b = (op == Op::FloorDiv || op == Op::Mod) ? divisor(3) : random_expr(3);
    std::optional<Expr> e;
    try {
      e = build_op(op, a, b);
    } catch (const std::domain_error&) {
      continue;
    }
    for (int p = 0; p < 8; ++p) {
      Values v = random_point();
      std::optional<int64_t> va = try_eval(a, v);
      std::optional<int64_t> vb = try_eval(b, v);
      if (!va || !vb) continue;
      std::optional<int64_t> want = apply_op(op, *va, *vb);
      if (!want) continue;
      std::optional<int64_t> got = try_eval(*e, v);
      ASSERT_EQ(got, want) << "op " << static_cast<int>(op) << " a = " << a.str()
                           << " b = " << b.str() << " built = " << e->str() << " at x=" << v["x"]
                           << " y=" << v["y"] << " z=" << v["z"] << " s=" << v["s"];
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST_F(RandomSym, SimplifyPreservesValuesWithinRanges) {
  SCOPED_TRACE("COIL_TEST_SEED=" + std::to_string(test_seed()));
  int checked = 0;
  int changed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Expr e = random_expr(4);
    Expr simple = simplify(e, env);
    changed += simple != e;
    Range r = bounds(e, env);
    bool known = statically_known_true(e, env);
    for (int p = 0; p < 12; ++p) {
      Values v = random_point();
      std::optional<int64_t> want = try_eval(e, v);
      if (!want) continue;
      std::string where = " at x=" + std::to_string(v["x"]) + " y=" + std::to_string(v["y"]) +
                          " z=" + std::to_string(v["z"]) + " s=" + std::to_string(v["s"]);
      ASSERT_EQ(try_eval(simple, v), want)
          << "e = " << e.str() << "\nsimplified = " << simple.str() << where;
      ASSERT_LE(r.lo, *want) << "bounds of " << e.str() << where;
      ASSERT_GE(r.hi, *want) << "bounds of " << e.str() << where;
      ASSERT_TRUE(!known || *want != 0) << "statically_known_true(" << e.str() << ")" << where;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(changed, 100);
}

TEST_F(RandomSym, AffineAndSubstitutePreserveValues) {
  SCOPED_TRACE("COIL_TEST_SEED=" + std::to_string(test_seed()));
  int affine = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    Expr e = random_expr(3);
    std::optional<Affine> a = as_affine(e, {x, y});
    Expr back = a ? a->constant + a->coeffs[0] * x + a->coeffs[1] * y : e;
    affine += a.has_value();
    if (a) {
      ASSERT_FALSE(depends_on(a->constant, x) || depends_on(a->constant, y)) << e.str();
    }
    std::optional<Expr> sub;
    try {
      sub = substitute(e, {{x, y + 2}, {z, s - 1}});
    } catch (const std::domain_error&) {
      // A divisor became the constant 0: e is undefined wherever x = y + 2 and z = s - 1.
    }
    for (int p = 0; p < 6; ++p) {
      Values v = random_point();
      std::optional<int64_t> want = try_eval(e, v);
      if (!want) continue;
      ASSERT_EQ(try_eval(back, v), want) << "as_affine of " << e.str();
      Values w = v;
      w["x"] = v["y"] + 2;
      w["z"] = v["s"] - 1;
      std::optional<int64_t> want_sub = try_eval(e, w);
      if (!want_sub) continue;
      ASSERT_TRUE(sub.has_value()) << "substitute in " << e.str();
      ASSERT_EQ(try_eval(*sub, v), want_sub) << "substitute in " << e.str();
    }
  }
  EXPECT_GT(affine, 100);
}

// An index split into digits (FloorDiv/Mod by running products of radices) and recombined with
// the same strides is the index again: exactly by construction for an affine index and constant
// radices, and in value always. For arbitrary indices and symbolic radices the rate of exact
// recombination is printed (construction is not confluent there: Mod(Mod(s, 2*s) + y, 2) is
// Mod(s + y, 2), which forgets the inner Mod its FloorDiv partner still has).
TEST_F(RandomSym, DigitSplitsRecombine) {
  SCOPED_TRACE("COIL_TEST_SEED=" + std::to_string(test_seed()));
  int other = 0;
  int other_exact = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    bool affine = uniform(0, 1) == 0;
    Expr flat =
        affine ? uniform(-9, 9) * x + uniform(-9, 9) * y + uniform(-3, 3) * z * s + uniform(-20, 20)
               : random_expr(2);
    bool all_constant = true;
    Expr stride = 1;
    Expr sum = 0;
    int64_t digits = uniform(1, 3);
    for (int64_t i = 0; i < digits; ++i) {
      Expr radix = Expr(uniform(1, 6));
      if (uniform(0, 2) == 0) {
        radix = uniform(0, 1) == 0 ? s : s + 1;
        all_constant = false;
      }
      sum = sum + stride * mod(floordiv(flat, stride), radix);
      stride = stride * radix;
    }
    sum = sum + stride * floordiv(flat, stride);
    if (affine && all_constant) {
      ASSERT_EQ(sum, flat) << sum.str() << " vs " << flat.str();
    } else {
      ++other;
      other_exact += simplify(sum, env) == simplify(flat, env);
    }
    for (int p = 0; p < 6; ++p) {
      Values v = random_point();
      std::optional<int64_t> want = try_eval(flat, v);
      if (!want) continue;
      ASSERT_EQ(try_eval(sum, v), want) << sum.str() << " vs " << flat.str();
    }
  }
  std::cout << "[ sym random ] other digit splits recombined exactly: " << other_exact << " / "
            << other << "\n";
}

}  // namespace
}  // namespace coil::sym
