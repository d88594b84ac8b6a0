// The building blocks of sym::Expr's canonicalizing construction, shared by its files: expr.cpp
// (interning: make_node), expr_sum.cpp (sums and products: monomials, SumBuilder, content) and
// expr_div.cpp (FloorDiv, Mod, Min, Max, comparisons, which build sums through SumBuilder).
// Internal to sym; the interface is expr.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "coil/sym/expr.h"

namespace coil::sym {

// ---- expr.cpp ----
Expr make_node(Kind kind, int64_t value, std::vector<Expr> operands);

// ---- expr_sum.cpp ----
int64_t gcd_abs(int64_t a, int64_t b);

// Monomials: a term of a sum seen as coefficient * (sorted factors, none Int or Mul).
struct Monomial {
  int64_t coeff = 1;
  std::vector<Expr> factors;
};

Monomial as_monomial(const Expr& e);
int64_t constant_part(const Expr& e);
std::vector<Expr> term_list(const Expr& e);
int64_t content(const Expr& e);
Expr divide_coefficients(const Expr& e, int64_t g);

// Accumulates constant + sum of coeff * base, merging like terms; build() gives the canonical
// Add (terms ordered by their base, so a term keeps its place when its coefficient changes).
class SumBuilder {
 public:
  void add(const Expr& e, int64_t scale);
  Expr build();

 private:
  using TermList = std::vector<std::pair<Expr, int64_t>>;  // (base, coefficient)

  void add_term(const Expr& t, int64_t scale);
  static std::optional<std::pair<Expr, int64_t>> as_single_term(const Expr& e);
  int64_t coeff_of(const Expr& base) const;
  bool contains_scaled(const Expr& x, int64_t c) const;
  void fold_div_mod_pairs();
  static std::optional<TermList> partner_terms(const Expr& d, const Expr& f);
  bool contains_terms(const TermList& ts, int64_t scale) const;
  void erase_terms(const TermList& ts);
  bool merge_mod_with_div(const Expr& base, int64_t cm);
  bool merge_div_with_sum(const Expr& base, int64_t coeff);
  static std::optional<Expr> floordiv_factor(const Expr& base);

  int64_t constant_ = 0;
  std::map<Expr, int64_t> terms_;
};

}  // namespace coil::sym
