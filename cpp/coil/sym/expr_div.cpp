// FloorDiv, Mod, Min, Max and comparisons of sym::Expr: the FloorDiv / Mod rules that hold for
// every value of the symbols, the constructors of those kinds, ceildiv, and with_operands (which
// re-canonicalizes a node of any kind). Rules that need ranges live in simplify.cpp.
//
// Tests: tests/cpp/sym/expr_test.cpp.
#include "coil/sym/expr.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil/sym/expr_build.h"

namespace coil::sym {

namespace {

// ---------------------------------------------------------------------------------------------
// FloorDiv / Mod rules that hold for every value of the symbols.

enum class DivOp { FloorDiv, Mod };

// FloorDiv(q*b + r, b) = q + FloorDiv(r, b) and Mod(q*b + r, b) = Mod(r, b), where q*b collects
// the terms that are exact multiples of the monomial b (and, for a constant b, the multiple of b
// in the constant term). Holds for every nonzero b.
std::optional<Expr> pull_out_multiples(DivOp op, const Expr& a, const Expr& b) {
  SumBuilder quotient;
  SumBuilder rest;
  bool pulled = false;
  int64_t constant = constant_part(a);
  if (b.is_int()) {
    int64_t q = floordiv_int(constant, b.int_value());
    if (q != 0) {
      pulled = true;
      quotient.add(q, 1);
      constant = mod_int(constant, b.int_value());
    }
  }
  rest.add(constant, 1);
  for (const Expr& t : term_list(a)) {
    if (std::optional<Expr> q = exact_div(t, b)) {
      quotient.add(*q, 1);
      pulled = true;
    } else {
      rest.add(t, 1);
    }
  }
  if (!pulled) return std::nullopt;
  if (op == DivOp::Mod) return mod(rest.build(), b);
  return quotient.build() + floordiv(rest.build(), b);
}

// With g > 1 the gcd of the divisor's integer content and the coefficients of the numerator's
// terms (divisor g*k), and the numerator's constant c = g*q + r (0 <= r < g):
//   FloorDiv(g*y + c, g*k) = FloorDiv(y + q, k)          (the low part r never carries)
//   Mod(g*y + c, g*k)      = g*Mod(y + q, k) + r
// That needs k > 0 when r != 0, so a symbolic k (sign unknown here) takes only r = 0.
std::optional<Expr> divide_out_content(DivOp op, const Expr& a, const Expr& b) {
  int64_t g = content(b);
  for (const Expr& t : term_list(a)) g = gcd_abs(g, as_monomial(t).coeff);
  if (g <= 1) return std::nullopt;
  int64_t c = constant_part(a);
  int64_t q = floordiv_int(c, g);
  int64_t r = mod_int(c, g);
  bool positive_k = b.is_int() && b.int_value() > 0;
  if (r != 0 && !positive_k) return std::nullopt;
  std::optional<Expr> k = exact_div(b, g);
  if (!k) return std::nullopt;
  Expr y = divide_coefficients(a - c, g) + q;
  if (op == DivOp::FloorDiv) return floordiv(y, *k);
  return g * mod(y, *k) + r;
}

// FloorDiv(a + FloorDiv(y, m), n) = FloorDiv(m*a + y, m*n) for n > 0: a + floor(y/m) is
// floor((m*a + y)/m), and floor(floor(z)/n) = floor(z/n). Flattening nested divisions gives one
// form however the inner division was built (FloorDiv(FloorDiv(y, 3), 4) and, after pulling out
// multiples, FloorDiv(-3*x + FloorDiv(z, 3), 4) for y = -9*x + z).
std::optional<Expr> merge_nested_floordiv(const Expr& a, const Expr& n) {
  if (!n.is_int() || n.int_value() <= 0) return std::nullopt;
  std::optional<Expr> inner;
  SumBuilder rest;
  rest.add(constant_part(a), 1);
  // With several candidates, prefer a constant inner divisor (the digit splits of an index), then
  // the first in term order, so the choice is deterministic.
  std::vector<Expr> terms = term_list(a);
  auto is_inner = [](const Expr& t) { return t.kind() == Kind::FloorDiv; };
  auto constant_inner = [&](const Expr& t) { return is_inner(t) && t.operands()[1].is_int(); };
  auto it = std::find_if(terms.begin(), terms.end(), constant_inner);
  if (it == terms.end()) it = std::find_if(terms.begin(), terms.end(), is_inner);
  if (it == terms.end()) return std::nullopt;
  inner = *it;
  for (const Expr& t : terms) {
    if (t != *inner) rest.add(t, 1);
  }
  const Expr& y = inner->operands()[0];
  const Expr& m = inner->operands()[1];
  // m*n and m*rest must fit in int64 (construction throws on overflow; skip the rule instead).
  try {
    return floordiv(m * rest.build() + y, m * n);
  } catch (const std::overflow_error&) {
    return std::nullopt;
  }
}

// In Mod(a, b), a term c*Mod(t, m) with m a multiple of b is congruent to c*t modulo b:
// Mod(Mod(x, 8) + y, 4) = Mod(x + y, 4), Mod(Mod(x, n), n) = Mod(x, n).
std::optional<Expr> strip_inner_mods(const Expr& a, const Expr& b) {
  SumBuilder s;
  s.add(constant_part(a), 1);
  bool stripped = false;
  for (const Expr& t : term_list(a)) {
    Monomial m = as_monomial(t);
    bool inner_mod = m.factors.size() == 1 && m.factors[0].kind() == Kind::Mod &&
                     exact_div(m.factors[0].operands()[1], b).has_value();
    if (!inner_mod) {
      s.add(t, 1);
      continue;
    }
    s.add(m.factors[0].operands()[0], m.coeff);
    stripped = true;
  }
  if (!stripped) return std::nullopt;
  return mod(s.build(), b);
}

void check_divisor(const char* what, const Expr& a, const Expr& b) {
  if (b.is_int() && b.int_value() == 0) {
    throw std::domain_error(std::string("coil::sym::") + what + ": division by zero in " + what +
                            "(" + a.str() + ", 0)");
  }
}

// ---------------------------------------------------------------------------------------------
// Min / Max / comparisons.

Expr min_max(Kind kind, const Expr& a, const Expr& b) {
  std::vector<Expr> ops;
  for (const Expr& e : {a, b}) {
    if (e.kind() == kind) {
      ops.insert(ops.end(), e.operands().begin(), e.operands().end());
    } else {
      ops.push_back(e);
    }
  }
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  // Operands that differ by a constant are ordered for every value of the symbols (this also
  // folds constants together): keep the one that wins.
  std::vector<bool> dropped(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = 0; j < ops.size() && !dropped[i]; ++j) {
      if (i == j || dropped[j]) continue;
      Expr d = ops[i] - ops[j];
      if (!d.is_int()) continue;
      dropped[i] = kind == Kind::Min ? d.int_value() >= 0 : d.int_value() <= 0;
    }
  }
  std::vector<Expr> kept;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!dropped[i]) kept.push_back(ops[i]);
  }
  if (kept.size() == 1) return kept[0];
  return make_node(kind, 0, std::move(kept));
}

bool compare_ints(Kind kind, int64_t d) {  // d = a - b
  switch (kind) {
    case Kind::Lt:
      return d < 0;
    case Kind::Le:
      return d <= 0;
    case Kind::Eq:
      return d == 0;
    default:
      return d != 0;
  }
}

Expr comparison(Kind kind, const Expr& a, const Expr& b) {
  Expr d = a - b;
  if (d.is_int()) return compare_ints(kind, d.int_value()) ? 1 : 0;
  bool symmetric = kind == Kind::Eq || kind == Kind::Ne;
  if (symmetric && b < a) return make_node(kind, 0, {b, a});
  return make_node(kind, 0, {a, b});
}

// The FloorDiv / Mod rules that hold for every value of the symbols, in the order tried (after
// constant folding and the trivial identities). Each returns the rewritten expression or nullopt.
using DivRule = std::optional<Expr> (*)(const Expr& a, const Expr& b);

const DivRule kFloorDivRules[] = {
    // FloorDiv(q*b + r, b) = q + FloorDiv(r, b)
    [](const Expr& a, const Expr& b) { return pull_out_multiples(DivOp::FloorDiv, a, b); },
    // FloorDiv(g*y + c, g*k) = FloorDiv(y + c // g, k) when the remainder c % g cannot carry
    [](const Expr& a, const Expr& b) { return divide_out_content(DivOp::FloorDiv, a, b); },
    // FloorDiv(a + FloorDiv(y, m), n) = FloorDiv(m*a + y, m*n) for n > 0
    merge_nested_floordiv,
};

const DivRule kModRules[] = {
    // Mod(c*Mod(t, m) + r, b) = Mod(c*t + r, b) when b divides m
    strip_inner_mods,
    // Mod(q*b + r, b) = Mod(r, b)
    [](const Expr& a, const Expr& b) { return pull_out_multiples(DivOp::Mod, a, b); },
    // Mod(g*y + c, g*k) = g*Mod(y + c // g, k) + c % g
    [](const Expr& a, const Expr& b) { return divide_out_content(DivOp::Mod, a, b); },
};

}  // namespace

Expr floordiv(const Expr& a, const Expr& b) {
  check_divisor("FloorDiv", a, b);
  if (a.is_int() && b.is_int()) return floordiv_int(a.int_value(), b.int_value());
  if (b == 1) return a;
  if (b == -1) return -a;
  if (a == 0) return 0;
  if (a == b) return 1;
  for (DivRule rule : kFloorDivRules) {
    if (std::optional<Expr> r = rule(a, b)) return *r;
  }
  return make_node(Kind::FloorDiv, 0, {a, b});
}

Expr mod(const Expr& a, const Expr& b) {
  check_divisor("Mod", a, b);
  if (a.is_int() && b.is_int()) return mod_int(a.int_value(), b.int_value());
  if (b == 1 || b == -1 || a == 0 || a == b) return 0;
  for (DivRule rule : kModRules) {
    if (std::optional<Expr> r = rule(a, b)) return *r;
  }
  return make_node(Kind::Mod, 0, {a, b});
}

Expr min(const Expr& a, const Expr& b) {
  return min_max(Kind::Min, a, b);
}
Expr max(const Expr& a, const Expr& b) {
  return min_max(Kind::Max, a, b);
}
Expr lt(const Expr& a, const Expr& b) {
  return comparison(Kind::Lt, a, b);
}
Expr le(const Expr& a, const Expr& b) {
  return comparison(Kind::Le, a, b);
}
Expr eq(const Expr& a, const Expr& b) {
  return comparison(Kind::Eq, a, b);
}
Expr ne(const Expr& a, const Expr& b) {
  return comparison(Kind::Ne, a, b);
}

Expr ceildiv(const Expr& a, const Expr& b) {
  return floordiv(a + b - 1, b);
}

Expr with_operands(const Expr& e, const std::vector<Expr>& ops) {
  auto binary = [&](Expr (*make)(const Expr&, const Expr&)) {
    if (ops.size() != 2) {
      throw std::invalid_argument(std::string("coil::sym::with_operands: ") + kind_name(e.kind()) +
                                  " takes 2 operands, got " + std::to_string(ops.size()));
    }
    return make(ops[0], ops[1]);
  };
  auto fold = [&](Expr (*make)(const Expr&, const Expr&)) {
    if (ops.empty()) {
      throw std::invalid_argument(std::string("coil::sym::with_operands: ") + kind_name(e.kind()) +
                                  " needs at least one operand");
    }
    Expr r = ops[0];
    for (size_t i = 1; i < ops.size(); ++i) r = make(r, ops[i]);
    return r;
  };
  switch (e.kind()) {
    case Kind::Int:
    case Kind::Symbol:
      return e;
    case Kind::Add: {
      SumBuilder s;
      s.add(e.int_value(), 1);
      for (const Expr& op : ops) s.add(op, 1);
      return s.build();
    }
    case Kind::Mul: {
      Expr r = e.int_value();
      for (const Expr& op : ops) r = r * op;
      return r;
    }
    case Kind::FloorDiv:
      return binary(floordiv);
    case Kind::Mod:
      return binary(mod);
    case Kind::Min:
      return fold(min);
    case Kind::Max:
      return fold(max);
    case Kind::Lt:
      return binary(lt);
    case Kind::Le:
      return binary(le);
    case Kind::Eq:
      return binary(eq);
    case Kind::Ne:
      return binary(ne);
  }
  return e;
}

}  // namespace coil::sym
