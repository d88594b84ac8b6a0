// Nodes, interning, the structural order, and canonicalizing construction of sym::Expr.
//
// Everything here holds for every integer value of the symbols; rules that need ranges live in
// simplify.cpp. Tests: tests/cpp/sym/expr_test.cpp.
#include "coil/sym/expr.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <unordered_set>

namespace coil::sym {

struct Node {
  Kind kind = Kind::Int;
  int64_t int_value = 0;
  std::string name;
  std::vector<Expr> operands;
  size_t hash = 0;
};

Expr intern(Node&& n);

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

int64_t gcd_abs(int64_t a, int64_t b) {
  // std::gcd on INT64_MIN is undefined (|INT64_MIN| does not fit); such a coefficient gets no
  // gcd-based rewrite.
  if (a == INT64_MIN || b == INT64_MIN) return 1;
  return std::gcd(a, b);
}

// ---------------------------------------------------------------------------------------------
// Interning.

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// Structural (operands contribute their hashes, not addresses) so that hash order, and anything
// that leaks it, is the same in every run.
size_t structural_hash(const Node& n) {
  size_t h = std::hash<int>()(static_cast<int>(n.kind));
  h = hash_combine(h, std::hash<int64_t>()(n.int_value));
  if (!n.name.empty()) h = hash_combine(h, std::hash<std::string>()(n.name));
  for (const Expr& op : n.operands) h = hash_combine(h, op.hash());
  return h;
}

struct NodePtrHash {
  size_t operator()(const Node* n) const { return n->hash; }
};

// Operands are already interned, so comparing them is comparing pointers.
struct NodePtrEq {
  bool operator()(const Node* a, const Node* b) const {
    return a->kind == b->kind && a->int_value == b->int_value && a->name == b->name &&
           a->operands == b->operands;
  }
};

struct InternTable {
  std::mutex mu;
  std::unordered_set<const Node*, NodePtrHash, NodePtrEq> nodes;
};

// Never destroyed: nodes live for the process, and Exprs held in other static objects must stay
// valid during exit.
InternTable& intern_table() {
  static InternTable* table = new InternTable;
  return *table;
}

constexpr int64_t kSmallIntLo = -128;
constexpr int64_t kSmallIntHi = 1024;

// Small integers are built on every arithmetic step; caching them skips the table lock.
const std::vector<const Node*>& small_ints() {
  static const std::vector<const Node*> cache = [] {
    std::vector<const Node*> v;
    for (int64_t i = kSmallIntLo; i <= kSmallIntHi; ++i) {
      v.push_back(intern(Node{Kind::Int, i, {}, {}, 0}).node());
    }
    return v;
  }();
  return cache;
}

Expr make_node(Kind kind, int64_t value, std::vector<Expr> operands) {
  return intern(Node{kind, value, {}, std::move(operands), 0});
}

int compare_exprs(const Expr& a, const Expr& b) {
  if (a == b) return 0;
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  if (a.int_value() != b.int_value()) return a.int_value() < b.int_value() ? -1 : 1;
  if (int c = a.name().compare(b.name()); c != 0) return c < 0 ? -1 : 1;
  const std::vector<Expr>& x = a.operands();
  const std::vector<Expr>& y = b.operands();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (int c = compare_exprs(x[i], y[i]); c != 0) return c;
  }
  if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Monomials: a term of a sum seen as coefficient * (sorted factors, none Int or Mul).

struct Monomial {
  int64_t coeff = 1;
  std::vector<Expr> factors;
};

Monomial as_monomial(const Expr& e) {
  if (e.is_int()) return {e.int_value(), {}};
  if (e.kind() == Kind::Mul) return {e.int_value(), e.operands()};
  return {1, {e}};
}

Expr scale(const Expr& e, int64_t c);

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

// Accumulates constant + sum of coeff * base, merging like terms; build() gives the canonical
// Add (terms ordered by their base, so a term keeps its place when its coefficient changes).
class SumBuilder {
 public:
  void add(const Expr& e, int64_t scale) {
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

  Expr build() {
    if (!terms_.empty()) fold_div_mod_pairs();
    std::vector<Expr> terms;
    for (const auto& [base, coeff] : terms_) {
      if (coeff != 0) terms.push_back(make_term(coeff, base));
    }
    if (terms.empty()) return constant_;
    if (terms.size() == 1 && constant_ == 0) return terms[0];
    return make_node(Kind::Add, constant_, std::move(terms));
  }

 private:
  void add_term(const Expr& t, int64_t scale) {
    Monomial m = as_monomial(t);
    Expr base = from_monomial(1, std::move(m.factors));
    int64_t& c = terms_[base];
    c = add_checked(c, mul_checked(m.coeff, scale));
  }

  // The base and coefficient of a term-shaped expression; nullopt for a sum or a constant.
  static std::optional<std::pair<Expr, int64_t>> as_single_term(const Expr& e) {
    if (e.is_int() || e.kind() == Kind::Add) return std::nullopt;
    Monomial m = as_monomial(e);
    return std::pair{from_monomial(1, std::move(m.factors)), m.coeff};
  }

  int64_t coeff_of(const Expr& base) const {
    auto it = terms_.find(base);
    return it == terms_.end() ? 0 : it->second;
  }

  // Whether the sum holds c*t for every term t of x (true for a constant x).
  bool contains_scaled(const Expr& x, int64_t c) const {
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
  void fold_div_mod_pairs() {
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

  using TermList = std::vector<std::pair<Expr, int64_t>>;  // (base, coefficient)

  // The canonical terms of d*f, for a term f without sum factors, built without re-entering
  // SumBuilder: construction distributes d's summands over f.
  static std::optional<TermList> partner_terms(const Expr& d, const Expr& f) {
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
  bool contains_terms(const TermList& ts, int64_t scale) const {
    for (const auto& [base, coeff] : ts) {
      int64_t want;
      if (__builtin_mul_overflow(coeff, scale, &want) || coeff_of(base) != want) return false;
    }
    return true;
  }

  void erase_terms(const TermList& ts) {
    for (const auto& [base, coeff] : ts) terms_[base] = 0;
  }

  // cm*Mod(x, d) + cm*d*FloorDiv(x, d) -> cm*x. The FloorDiv partner is found by constructing
  // it, so nested splits (whose FloorDivs were merged, FloorDiv(FloorDiv(y, 4), 4) = ...(y, 16))
  // still pair up.
  bool merge_mod_with_div(const Expr& base, int64_t cm) {
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
  bool merge_div_with_sum(const Expr& base, int64_t coeff) {
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
  static std::optional<Expr> floordiv_factor(const Expr& base) {
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

  int64_t constant_ = 0;
  std::map<Expr, int64_t> terms_;
};

Expr scale(const Expr& e, int64_t c) {
  SumBuilder s;
  s.add(e, c);
  return s.build();
}

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Interning and the Expr handle.

Expr intern(Node&& n) {
  n.hash = structural_hash(n);
  InternTable& table = intern_table();
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = table.nodes.find(&n);
  if (it != table.nodes.end()) return Expr(*it);
  const Node* stored = new Node(std::move(n));
  table.nodes.insert(stored);
  return Expr(stored);
}

const char* kind_name(Kind k) {
  static constexpr const char* kNames[] = {"Int", "Symbol", "Add", "Mul", "FloorDiv", "Mod",
                                           "Min", "Max",    "Lt",  "Le",  "Eq",       "Ne"};
  auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Expr::Expr() : Expr(int64_t{0}) {}

Expr::Expr(int64_t value) {
  if (value >= kSmallIntLo && value <= kSmallIntHi) {
    node_ = small_ints()[static_cast<size_t>(value - kSmallIntLo)];
    return;
  }
  node_ = intern(Node{Kind::Int, value, {}, {}, 0}).node_;
}

Expr Expr::symbol(const std::string& name) {
  if (name.empty()) throw std::invalid_argument("coil::sym::Expr::symbol: empty symbol name");
  return intern(Node{Kind::Symbol, 0, name, {}, 0});
}

Kind Expr::kind() const {
  return node_->kind;
}
int64_t Expr::int_value() const {
  return node_->int_value;
}
std::optional<int64_t> Expr::as_int() const {
  if (is_int()) return node_->int_value;
  return std::nullopt;
}
const std::string& Expr::name() const {
  return node_->name;
}
const std::vector<Expr>& Expr::operands() const {
  return node_->operands;
}
size_t Expr::hash() const {
  return node_->hash;
}
bool Expr::operator<(const Expr& o) const {
  return compare_exprs(*this, o) < 0;
}

// ---------------------------------------------------------------------------------------------
// Integer helpers.

int64_t floordiv_int(int64_t a, int64_t b) {
  if (b == 0)
    throw std::domain_error("coil::sym: division by zero: " + std::to_string(a) + " // 0");
  if (a == INT64_MIN && b == -1)
    throw std::overflow_error("coil::sym: int64 overflow in MIN // -1");
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t mod_int(int64_t a, int64_t b) {
  if (b == 0) throw std::domain_error("coil::sym: modulo by zero: " + std::to_string(a) + " % 0");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

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

namespace {

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
