// Canonical sums and products of sym::Expr: checked coefficient arithmetic, the monomial view of
// a term, SumBuilder (like terms merged, an index split into digits recombined), sum factors in
// primitive form, and operator+, operator-, operator* and exact_div. Everything here holds for
// every integer value of the symbols; rules that need ranges live in simplify.cpp.
//
// Tests: tests/cpp/sym/expr_test.cpp.
#include "coil/sym/expr.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coil/sym/expr_build.h"

namespace coil::sym {

namespace {

// ---------------------------------------------------------------------------------------------
// Checked integer arithmetic: a silently wrapped coefficient would be a wrong index.

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw std::overflow_error("coil::sym: int64 overflow in " + std::to_string(a) + " + " +
                              std::to_string(b));
  }
  return r;
}

int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw std::overflow_error("coil::sym: int64 overflow in " + std::to_string(a) + " * " +
                              std::to_string(b));
  }
  return r;
}

// Whether x / d is an exact int64 (INT64_MIN / -1 is not: it overflows).
bool divides(int64_t d, int64_t x) {
  if (d == 0) return false;
  if (d == -1) return x != INT64_MIN;
  return x % d == 0;
}

}  // namespace

int64_t gcd_abs(int64_t a, int64_t b) {
  // std::gcd on INT64_MIN is undefined (|INT64_MIN| does not fit); such a coefficient gets no
  // gcd-based rewrite.
  if (a == INT64_MIN || b == INT64_MIN) return 1;
  return std::gcd(a, b);
}

// ---------------------------------------------------------------------------------------------
// Monomials: a term of a sum seen as coefficient * (sorted factors, none Int or Mul).

Monomial as_monomial(const Expr& e) {
  if (e.is_int()) return {e.int_value(), {}};
  if (e.kind() == Kind::Mul) return {e.int_value(), e.operands()};
  return {1, {e}};
}

namespace {

Expr scale(const Expr& e, int64_t c);

}  // namespace

// The constant term and the non-constant terms of e, whatever its kind.
int64_t constant_part(const Expr& e) {
  if (e.is_int() || e.kind() == Kind::Add) return e.int_value();
  return 0;
}

std::vector<Expr> term_list(const Expr& e) {
  if (e.is_int()) return {};
  if (e.kind() == Kind::Add) return e.operands();
  return {e};
}

namespace {

// factors must be sorted and contain no Int or Mul.
Expr from_monomial(int64_t coeff, std::vector<Expr> factors) {
  if (coeff == 0) return 0;
  if (factors.empty()) return coeff;
  if (factors.size() == 1) {
    if (coeff == 1) return factors[0];
    // c * (a + b) is kept as a flat sum.
    if (factors[0].kind() == Kind::Add) return scale(factors[0], coeff);
  }
  return make_node(Kind::Mul, coeff, std::move(factors));
}

// The term coeff * base, where base is a term with coefficient 1 (a non-Mul, or a Mul with
// coefficient 1).
Expr make_term(int64_t coeff, const Expr& base) {
  if (coeff == 1) return base;
  if (base.kind() == Kind::Mul) return make_node(Kind::Mul, coeff, base.operands());
  return make_node(Kind::Mul, coeff, {base});
}

std::optional<Monomial> divisor_monomial(const Expr& b);
bool has_sum_factor(const Expr& e);

}  // namespace

// ---------------------------------------------------------------------------------------------
// SumBuilder (declared in expr_build.h).

void SumBuilder::add(const Expr& e, int64_t scale) {
  if (scale == 0) return;
  if (e.is_int()) {
    constant_ = add_checked(constant_, mul_checked(scale, e.int_value()));
    return;
  }
  if (e.kind() != Kind::Add) {
    add_term(e, scale);
    return;
  }
  constant_ = add_checked(constant_, mul_checked(scale, e.int_value()));
  for (const Expr& t : e.operands()) add_term(t, scale);
}

Expr SumBuilder::build() {
  if (!terms_.empty()) fold_div_mod_pairs();
  std::vector<Expr> terms;
  for (const auto& [base, coeff] : terms_) {
    if (coeff != 0) terms.push_back(make_term(coeff, base));
  }
  if (terms.empty()) return constant_;
  if (terms.size() == 1 && constant_ == 0) return terms[0];
  return make_node(Kind::Add, constant_, std::move(terms));
}

void SumBuilder::add_term(const Expr& t, int64_t scale) {
  Monomial m = as_monomial(t);
  Expr base = from_monomial(1, std::move(m.factors));
  int64_t& c = terms_[base];
  c = add_checked(c, mul_checked(m.coeff, scale));
}

// The base and coefficient of a term-shaped expression; nullopt for a sum or a constant.
std::optional<std::pair<Expr, int64_t>> SumBuilder::as_single_term(const Expr& e) {
  if (e.is_int() || e.kind() == Kind::Add) return std::nullopt;
  Monomial m = as_monomial(e);
  return std::pair{from_monomial(1, std::move(m.factors)), m.coeff};
}

int64_t SumBuilder::coeff_of(const Expr& base) const {
  auto it = terms_.find(base);
  return it == terms_.end() ? 0 : it->second;
}

// Whether the sum holds c*t for every term t of x (true for a constant x).
bool SumBuilder::contains_scaled(const Expr& x, int64_t c) const {
  for (const Expr& t : term_list(x)) {
    std::optional<std::pair<Expr, int64_t>> bt = as_single_term(t);
    int64_t want;
    if (!bt || __builtin_mul_overflow(bt->second, c, &want) || coeff_of(bt->first) != want) {
      return false;
    }
  }
  return true;
}

// d*FloorDiv(x, d) + Mod(x, d) = x for every x and nonzero d (Python semantics), so
//   c*d*FloorDiv(x, d) + c*Mod(x, d)  ->  c*x               (an index split into digits and
//   c*x - c*d*FloorDiv(x, d)          ->  c*Mod(x, d)        recombined is the index again)
// Each rewrite replaces a FloorDiv term by parts of that FloorDiv's own operand, so this
// terminates.
void SumBuilder::fold_div_mod_pairs() {
  // Pairing constructs FloorDiv/Mod of subexpressions, which build sums of their own; the
  // nesting follows the expression's depth, and this cap keeps a pathological input from
  // exhausting the stack (deeper sums are simply left unpaired).
  static thread_local int nesting = 0;
  if (nesting >= 16) return;
  ++nesting;
  struct Exit {
    ~Exit() { --nesting; }
  } exit_guard;
  for (bool again = true; again;) {
    again = false;
    for (const auto& [base, coeff] : terms_) {
      if (coeff == 0) continue;
      again = merge_mod_with_div(base, coeff) || merge_div_with_sum(base, coeff);
      if (again) break;
    }
  }
}

// The canonical terms of d*f, for a term f without sum factors, built without re-entering
// SumBuilder: construction distributes d's summands over f.
std::optional<SumBuilder::TermList> SumBuilder::partner_terms(const Expr& d, const Expr& f) {
  if (f.is_int() || f.kind() == Kind::Add || has_sum_factor(f)) return std::nullopt;
  Monomial mf = as_monomial(f);
  TermList out;
  std::vector<Expr> ds = d.kind() == Kind::Add ? d.operands() : std::vector<Expr>{d};
  if (d.kind() == Kind::Add && d.int_value() != 0) ds.push_back(d.int_value());
  for (const Expr& di : ds) {
    Monomial m = as_monomial(di);
    int64_t coeff;
    if (__builtin_mul_overflow(m.coeff, mf.coeff, &coeff)) return std::nullopt;
    m.factors.insert(m.factors.end(), mf.factors.begin(), mf.factors.end());
    std::sort(m.factors.begin(), m.factors.end());
    out.emplace_back(from_monomial(1, std::move(m.factors)), coeff);
  }
  return out;
}

// Whether the sum holds scale * (the terms of ts).
bool SumBuilder::contains_terms(const TermList& ts, int64_t scale) const {
  for (const auto& [base, coeff] : ts) {
    int64_t want;
    if (__builtin_mul_overflow(coeff, scale, &want) || coeff_of(base) != want) return false;
  }
  return true;
}

void SumBuilder::erase_terms(const TermList& ts) {
  for (const auto& [base, coeff] : ts) terms_[base] = 0;
}

// cm*Mod(x, d) + cm*d*FloorDiv(x, d) -> cm*x. The FloorDiv partner is found by constructing
// it, so nested splits (whose FloorDivs were merged, FloorDiv(FloorDiv(y, 4), 4) = ...(y, 16))
// still pair up.
bool SumBuilder::merge_mod_with_div(const Expr& base, int64_t cm) {
  if (base.kind() != Kind::Mod) return false;
  const Expr& x = base.operands()[0];
  const Expr& d = base.operands()[1];
  std::optional<TermList> partner = partner_terms(d, floordiv(x, d));
  if (!partner || !contains_terms(*partner, cm)) return false;
  erase_terms(*partner);
  terms_[base] = 0;
  add(x, cm);
  return true;
}

// From the FloorDiv side: q*d*FloorDiv(x, d) + q*Mod(x, d) -> q*x, where Mod(x, d) is found by
// constructing it (Mod(Mod(s, 3*s), 3) is Mod(s, 3));
// and q*d*FloorDiv(x, d) - q*x -> -q*Mod(x, d), when the sum holds all of -q*x.
bool SumBuilder::merge_div_with_sum(const Expr& base, int64_t coeff) {
  std::optional<Expr> div = floordiv_factor(base);
  if (!div) return false;
  const Expr& x = div->operands()[0];
  const Expr& d = div->operands()[1];
  std::optional<TermList> partner = partner_terms(d, *div);
  if (!partner) return false;
  auto mine = std::find_if(partner->begin(), partner->end(),
                           [&](const auto& t) { return t.first == base; });
  if (mine == partner->end() || !divides(mine->second, coeff)) return false;
  int64_t q = coeff / mine->second;  // the partner terms are q*d*FloorDiv(x, d)
  if (q == INT64_MIN || !contains_terms(*partner, q)) return false;
  Expr rem = mod(x, d);
  if (contains_scaled(rem, q)) {
    erase_terms(*partner);
    add(rem, -q);
    add(x, q);
    return true;
  }
  // A constant x would only trade the FloorDiv for a Mod.
  if (term_list(x).empty() || !contains_scaled(x, -q)) return false;
  erase_terms(*partner);
  add(x, q);
  add(rem, -q);
  return true;
}

// F when base is F = FloorDiv(x, d) or F times other factors.
std::optional<Expr> SumBuilder::floordiv_factor(const Expr& base) {
  if (base.kind() == Kind::FloorDiv) return base;
  if (base.kind() != Kind::Mul) return std::nullopt;
  std::optional<Expr> found;
  for (const Expr& f : base.operands()) {
    if (f.kind() != Kind::FloorDiv) continue;
    if (found) return std::nullopt;
    found = f;
  }
  return found;
}

namespace {

Expr scale(const Expr& e, int64_t c) {
  SumBuilder s;
  s.add(e, c);
  return s.build();
}

}  // namespace

// gcd of the constant and all coefficients of e (0 for the expression 0).
int64_t content(const Expr& e) {
  int64_t g = gcd_abs(constant_part(e), 0);
  for (const Expr& t : term_list(e)) g = gcd_abs(g, as_monomial(t).coeff);
  return g;
}

// e with the constant and every coefficient divided by g (which must divide them all).
Expr divide_coefficients(const Expr& e, int64_t g) {
  SumBuilder s;
  s.add(constant_part(e) / g, 1);
  for (const Expr& t : term_list(e)) {
    Monomial m = as_monomial(t);
    s.add(from_monomial(m.coeff / g, std::move(m.factors)), 1);
  }
  return s.build();
}

namespace {

// A sum factor of a product is stored primitive: its content is moved into the coefficient and
// its first term made positive, so (2*x + 2)*(y + 1) and 2*((x + 1)*(y + 1)) are one node.
std::pair<int64_t, Expr> primitive_part(const Expr& sum) {
  int64_t g = content(sum);
  if (g == 0) return {1, sum};
  if (as_monomial(sum.operands().front()).coeff < 0) g = -g;
  if (g == 1) return {1, sum};
  return {g, divide_coefficients(sum, g)};
}

// t / d for monomials: the coefficient must divide and d's factors must be among t's.
std::optional<Monomial> divide_monomial(const Monomial& t, const Monomial& d) {
  if (!divides(d.coeff, t.coeff)) return std::nullopt;
  // Multiset difference t.factors - d.factors; both are sorted, so a walk suffices.
  std::vector<Expr> rest;
  size_t j = 0;
  for (const Expr& f : t.factors) {
    if (j < d.factors.size() && f == d.factors[j]) {
      ++j;
    } else {
      rest.push_back(f);
    }
  }
  if (j != d.factors.size()) return std::nullopt;
  return Monomial{t.coeff / d.coeff, std::move(rest)};
}

// A sum as a factor of a product, in one form however it was built: its integer content (signed
// so the first term is positive) and the factors all its terms share move out, leaving a
// primitive sum. (2*x + 2) -> 2 * (x + 1); s*F + F -> F * (s + 1).
Monomial primitive_monomial(const Expr& sum) {
  auto [g, prim] = primitive_part(sum);
  if (prim.kind() != Kind::Add || prim.int_value() != 0) return Monomial{g, {prim}};
  const std::vector<Expr>& terms = prim.operands();
  std::vector<Expr> common = as_monomial(terms[0]).factors;
  for (size_t i = 1; i < terms.size() && !common.empty(); ++i) {
    std::vector<Expr> fs = as_monomial(terms[i]).factors;
    std::vector<Expr> both;
    std::set_intersection(common.begin(), common.end(), fs.begin(), fs.end(),
                          std::back_inserter(both));
    common = std::move(both);
  }
  if (common.empty()) return Monomial{g, {prim}};
  SumBuilder reduced;
  for (const Expr& t : terms) {
    Monomial q = *divide_monomial(as_monomial(t), Monomial{1, common});
    reduced.add(from_monomial(q.coeff, std::move(q.factors)), 1);
  }
  // Dividing may reorder the terms; keep the first one positive.
  auto [sign, rest] = primitive_part(reduced.build());
  common.push_back(rest);
  std::sort(common.begin(), common.end());
  return Monomial{mul_checked(g, sign), std::move(common)};
}

// The divisor b as a monomial: a sum counts as a factor (in the form products store it), so
// (s1 + 1)*x is a multiple of s1 + 1. nullopt for 0.
std::optional<Monomial> divisor_monomial(const Expr& b) {
  if (b.is_int() && b.int_value() == 0) return std::nullopt;
  if (b.kind() != Kind::Add) return as_monomial(b);
  return primitive_monomial(b);
}

// a * b for non-constant a and b, without distributing.
Expr product(const Expr& a, const Expr& b) {
  int64_t coeff = 1;
  std::vector<Expr> factors;
  for (const Expr& e : {a, b}) {
    Monomial m = as_monomial(e);
    coeff = mul_checked(coeff, m.coeff);
    for (const Expr& f : m.factors) {
      if (f.kind() != Kind::Add) {
        factors.push_back(f);
        continue;
      }
      Monomial pm = primitive_monomial(f);
      coeff = mul_checked(coeff, pm.coeff);
      factors.insert(factors.end(), pm.factors.begin(), pm.factors.end());
    }
  }
  std::sort(factors.begin(), factors.end());
  return from_monomial(coeff, std::move(factors));
}

bool has_sum_factor(const Expr& e) {
  if (e.kind() == Kind::Add) return true;
  if (e.kind() != Kind::Mul) return false;
  const std::vector<Expr>& fs = e.operands();
  return std::any_of(fs.begin(), fs.end(), [](const Expr& f) { return f.kind() == Kind::Add; });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction.

Expr operator+(const Expr& a, const Expr& b) {
  if (a.is_int() && b.is_int()) return add_checked(a.int_value(), b.int_value());
  SumBuilder s;
  s.add(a, 1);
  s.add(b, 1);
  return s.build();
}

Expr operator-(const Expr& a, const Expr& b) {
  SumBuilder s;
  s.add(a, 1);
  s.add(b, -1);
  return s.build();
}

Expr operator-(const Expr& a) {
  return scale(a, -1);
}

Expr operator*(const Expr& a, const Expr& b) {
  if (a.is_int()) return scale(b, a.int_value());
  if (b.is_int()) return scale(a, b.int_value());
  bool a_sum = a.kind() == Kind::Add;
  bool b_sum = b.kind() == Kind::Add;
  // A monomial times a sum is distributed so index expressions stay flat sums; a product of two
  // sums is kept as a product (expanding it can blow up and hides the structure).
  if (a_sum != b_sum) {
    const Expr& sum = a_sum ? a : b;
    const Expr& other = a_sum ? b : a;
    if (!has_sum_factor(other)) {
      SumBuilder s;
      s.add(other, sum.int_value());
      for (const Expr& t : sum.operands()) s.add(product(other, t), 1);
      return s.build();
    }
  }
  return product(a, b);
}

std::optional<Expr> exact_div(const Expr& a, const Expr& b) {
  std::optional<Monomial> divisor = divisor_monomial(b);
  if (!divisor) return std::nullopt;
  const Monomial& d = *divisor;
  if (a == b) return 1;
  if (a.kind() == Kind::Add && has_sum_factor(b)) {
    // k*p over g*p, p the common primitive sum (and common factors).
    if (std::optional<Monomial> q = divide_monomial(primitive_monomial(a), d)) {
      return from_monomial(q->coeff, std::move(q->factors));
    }
  }
  SumBuilder s;
  int64_t c = constant_part(a);
  if (c != 0) {
    if (!d.factors.empty() || !divides(d.coeff, c)) return std::nullopt;
    s.add(c / d.coeff, 1);
  }
  for (const Expr& t : term_list(a)) {
    std::optional<Monomial> q = divide_monomial(as_monomial(t), d);
    if (!q) return std::nullopt;
    s.add(from_monomial(q->coeff, std::move(q->factors)), 1);
  }
  return s.build();
}

}  // namespace coil::sym
