// Range-aware analyses and rewrites of sym::Expr: RangeEnv, bounds (interval arithmetic),
// simplify (bottom-up rewrite rules that may use symbol ranges), statically_known_true and
// size_hint.
//
// Proofs of "a >= 0" first try numeric interval bounds, then a symbolic step for index
// variables: an index variable v registered with extent E lies in [0, E - 1], so in an
// expression monotone in v, v can be replaced by 0 or E - 1 (whichever end is smaller). That
// proves x1 < s0 for an index variable x1 of extent s0 although its numeric range is only
// [0, inf) (or [0, hint - 1]), and FloorDiv(x0, s1) < s0 for x0 of extent s0*s1.
//
// Tests: tests/cpp/sym/simplify_test.cpp.
#include "coil/sym/expr.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

namespace coil::sym {

namespace {

constexpr int64_t kNegInf = Range::kNegInf;
constexpr int64_t kPosInf = Range::kPosInf;

// ---------------------------------------------------------------------------------------------
// Interval endpoints in 128 bits: infinities become +-2^100, so a sum or product of finite int64
// endpoints (at most 2^126) is exact and infinities dominate it. Narrowing back saturates in the
// sound direction (an overflowing lower bound becomes -inf, an upper one +inf).

using i128 = __int128;
constexpr i128 kInf128 = static_cast<i128>(1) << 100;

i128 widen(int64_t v) {
  if (v == kNegInf) return -kInf128;
  if (v == kPosInf) return kInf128;
  return v;
}

bool is_inf(i128 v) {
  return v <= -kInf128 || v >= kInf128;
}

int64_t narrow_lo(i128 v) {
  if (v <= kNegInf) return kNegInf;
  if (v >= kPosInf) return kPosInf - 1;
  return static_cast<int64_t>(v);
}

int64_t narrow_hi(i128 v) {
  if (v >= kPosInf) return kPosInf;
  if (v <= kNegInf) return kNegInf + 1;
  return static_cast<int64_t>(v);
}

// 0 * inf is 0: an infinite endpoint stands for "unbounded", and a zero factor bounds the product.
i128 mul_ext(i128 a, i128 b) {
  if (a == 0 || b == 0) return 0;
  if (is_inf(a) || is_inf(b)) return (a < 0) != (b < 0) ? -kInf128 : kInf128;
  return a * b;
}

i128 floordiv_i128(i128 a, i128 b) {
  i128 q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// floor(x / y) for y >= 1, where x and y may be infinite.
i128 floordiv_ext(i128 x, i128 y) {
  if (is_inf(x)) return x < 0 ? -kInf128 : kInf128;
  if (is_inf(y)) return x >= 0 ? 0 : -1;
  return floordiv_i128(x, y);
}

Range make_range(i128 lo, i128 hi) {
  return Range{narrow_lo(lo), narrow_hi(hi)};
}

Range add_ranges(Range a, Range b) {
  Range r;
  r.lo = (a.lo == kNegInf || b.lo == kNegInf) ? kNegInf : narrow_lo(widen(a.lo) + widen(b.lo));
  r.hi = (a.hi == kPosInf || b.hi == kPosInf) ? kPosInf : narrow_hi(widen(a.hi) + widen(b.hi));
  return r;
}

Range mul_ranges(Range a, Range b) {
  i128 c[4] = {mul_ext(widen(a.lo), widen(b.lo)), mul_ext(widen(a.lo), widen(b.hi)),
               mul_ext(widen(a.hi), widen(b.lo)), mul_ext(widen(a.hi), widen(b.hi))};
  return make_range(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}

// Collects the union of several candidate intervals.
class RangeUnion {
 public:
  void include(Range r) {
    if (!any_) {
      r_ = r;
      any_ = true;
      return;
    }
    r_.lo = std::min(r_.lo, r.lo);
    r_.hi = std::max(r_.hi, r.hi);
  }
  Range get() const { return any_ ? r_ : Range{}; }

 private:
  Range r_;
  bool any_ = false;
};

// floor(x / d) for x in [xlo, xhi] and d in [dlo, dhi] with dlo >= 1: increasing in x, monotone
// in d for fixed x, so the extremes are at the corners.
Range floordiv_positive(i128 xlo, i128 xhi, i128 dlo, i128 dhi) {
  i128 lo = std::min(floordiv_ext(xlo, dlo), floordiv_ext(xlo, dhi));
  i128 hi = std::max(floordiv_ext(xhi, dlo), floordiv_ext(xhi, dhi));
  return make_range(lo, hi);
}

// The divisor's range is split into its positive and negative parts (the value 0 is excluded:
// the expression is undefined there). FloorDiv(x, d) = FloorDiv(-x, -d) handles the negative one.
Range floordiv_range(Range x, Range d) {
  RangeUnion u;
  if (d.hi >= 1) {
    u.include(
        floordiv_positive(widen(x.lo), widen(x.hi), std::max<i128>(widen(d.lo), 1), widen(d.hi)));
  }
  if (d.lo <= -1) {
    u.include(floordiv_positive(-widen(x.hi), -widen(x.lo), std::max<i128>(-widen(d.hi), 1),
                                -widen(d.lo)));
  }
  return u.get();
}

// Mod(x, d) for d in [dlo, dhi], dlo >= 1.
Range mod_positive(Range x, int64_t dlo, int64_t dhi) {
  bool finite_x = x.lo != kNegInf && x.hi != kPosInf;
  if (dlo == dhi && finite_x) {
    // All of x within one period [q*d, (q+1)*d): Mod(x, d) = x - q*d.
    i128 q = floordiv_i128(x.lo, dlo);
    if (q == floordiv_i128(x.hi, dlo)) return make_range(x.lo - q * dlo, x.hi - q * dlo);
  }
  if (x.lo >= 0 && x.hi < dlo) return x;
  i128 hi = widen(dhi) - 1;
  if (x.lo >= 0) hi = std::min<i128>(hi, widen(x.hi));
  return make_range(0, hi);
}

Range mod_range(Range x, Range d) {
  RangeUnion u;
  if (d.hi >= 1) u.include(mod_positive(x, std::max<int64_t>(d.lo, 1), d.hi));
  if (d.lo <= -1) {
    // Mod(x, d) = -Mod(-x, -d).
    Range neg_x{narrow_lo(-widen(x.hi)), narrow_hi(-widen(x.lo))};
    Range m = mod_positive(neg_x, narrow_lo(-widen(std::min<int64_t>(d.hi, -1))),
                           narrow_hi(-widen(d.lo)));
    u.include(Range{narrow_lo(-widen(m.hi)), narrow_hi(-widen(m.lo))});
  }
  return u.get();
}

// ---------------------------------------------------------------------------------------------
// Monomial view (coefficient * factors), as construction stores terms.

std::vector<Expr> term_list(const Expr& e) {
  if (e.is_int()) return {};
  if (e.kind() == Kind::Add) return e.operands();
  return {e};
}

int64_t constant_part(const Expr& e) {
  return (e.is_int() || e.kind() == Kind::Add) ? e.int_value() : 0;
}

// gcd of the constant and the coefficients of e's terms.
int64_t integer_content(const Expr& e) {
  int64_t g = constant_part(e);
  for (const Expr& t : term_list(e)) {
    int64_t c = t.kind() == Kind::Mul ? t.int_value() : 1;
    if (c == INT64_MIN || g == INT64_MIN) return 1;
    g = std::gcd(g, c);
  }
  return g;
}

// The largest monomial dividing both a and b: gcd of the coefficients times the common factors.
Expr monomial_gcd(const Expr& a, const Expr& b) {
  auto coeff = [](const Expr& e) { return e.kind() == Kind::Mul ? e.int_value() : int64_t{1}; };
  auto factors = [](const Expr& e) {
    return e.kind() == Kind::Mul ? e.operands() : std::vector<Expr>{e};
  };
  int64_t ca = coeff(a);
  int64_t cb = b.is_int() ? b.int_value() : coeff(b);
  if (ca == INT64_MIN || cb == INT64_MIN) return 1;
  Expr g = std::gcd(ca, cb);
  if (b.is_int()) return g;
  std::vector<Expr> fa = factors(a);
  std::vector<Expr> fb = factors(b);
  std::vector<Expr> common;
  std::set_intersection(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(common));
  for (const Expr& f : common) g = g * f;
  return g;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The analyzer: bounds and proofs, cached for the duration of one query.

namespace {

// How an expression changes as one variable grows (the others fixed at any in-range values).
enum class Mono { kConst, kInc, kDec, kUnknown };

Mono flip(Mono m) {
  if (m == Mono::kInc) return Mono::kDec;
  if (m == Mono::kDec) return Mono::kInc;
  return m;
}

// The direction of a + b given those of a and b.
Mono join(Mono a, Mono b) {
  if (a == Mono::kConst) return b;
  if (b == Mono::kConst || a == b) return a;
  return Mono::kUnknown;
}

// Multiplying by a factor of known sign keeps or flips the direction.
Mono scale_by_sign(Mono m, Range factor) {
  if (m == Mono::kConst) return m;
  if (factor.lo >= 0) return m;
  if (factor.hi <= 0) return flip(m);
  return Mono::kUnknown;
}

class Analyzer {
 public:
  explicit Analyzer(const RangeEnv& env) : env_(env) {}

  Range bounds(const Expr& e) {
    if (e.is_int()) return Range{e.int_value(), e.int_value()};
    if (e.is_symbol()) return env_.range_of_symbol(e);
    auto it = bounds_cache_.find(e.node());
    if (it != bounds_cache_.end()) return it->second;
    Range r = compute_bounds(e);
    bounds_cache_[e.node()] = r;
    return r;
  }

  // True when e >= 0 for every value of the symbols within range.
  bool nonneg(const Expr& e) {
    if (bounds(e).lo >= 0) return true;
    return bounds(eliminate_index_vars(e)).lo >= 0;
  }
  bool positive(const Expr& e) { return nonneg(e - 1); }
  bool less(const Expr& a, const Expr& b) { return nonneg(b - a - 1); }
  bool less_equal(const Expr& a, const Expr& b) { return nonneg(b - a); }

  Expr simplify(const Expr& e);

 private:
  Range compute_bounds(const Expr& e);
  Range comparison_bounds(const Expr& e);
  Mono monotonicity(const Expr& e, const Expr& v);
  Expr eliminate_index_vars(const Expr& e);
  Expr apply_rules(const Expr& e);

  const RangeEnv& env_;
  std::unordered_map<const Node*, Range> bounds_cache_;
  std::unordered_map<const Node*, Expr> simplify_cache_;
  int rewrite_depth_ = 0;
};

Range Analyzer::compute_bounds(const Expr& e) {
  const std::vector<Expr>& ops = e.operands();
  switch (e.kind()) {
    case Kind::Int:
    case Kind::Symbol:
      return bounds(e);
    case Kind::Add: {
      Range r{e.int_value(), e.int_value()};
      for (const Expr& t : ops) r = add_ranges(r, bounds(t));
      return r;
    }
    case Kind::Mul: {
      Range r{e.int_value(), e.int_value()};
      for (const Expr& f : ops) r = mul_ranges(r, bounds(f));
      return r;
    }
    case Kind::FloorDiv:
      return floordiv_range(bounds(ops[0]), bounds(ops[1]));
    case Kind::Mod:
      return mod_range(bounds(ops[0]), bounds(ops[1]));
    case Kind::Min:
    case Kind::Max: {
      Range r = bounds(ops[0]);
      for (size_t i = 1; i < ops.size(); ++i) {
        Range o = bounds(ops[i]);
        bool is_min = e.kind() == Kind::Min;
        r.lo = is_min ? std::min(r.lo, o.lo) : std::max(r.lo, o.lo);
        r.hi = is_min ? std::min(r.hi, o.hi) : std::max(r.hi, o.hi);
      }
      return r;
    }
    case Kind::Lt:
    case Kind::Le:
    case Kind::Eq:
    case Kind::Ne:
      return comparison_bounds(e);
  }
  return Range{};
}

// A comparison is 0 or 1; the bounds of a - b may decide it.
Range Analyzer::comparison_bounds(const Expr& e) {
  Range d = bounds(e.operands()[0] - e.operands()[1]);
  std::optional<bool> decided;
  switch (e.kind()) {
    case Kind::Lt:
      if (d.hi < 0) decided = true;
      if (d.lo >= 0) decided = false;
      break;
    case Kind::Le:
      if (d.hi <= 0) decided = true;
      if (d.lo > 0) decided = false;
      break;
    case Kind::Eq:
    case Kind::Ne:
      if (d.is_const() && d.lo == 0) decided = true;
      if (d.lo > 0 || d.hi < 0) decided = false;
      if (decided && e.kind() == Kind::Ne) decided = !*decided;
      break;
    default:
      break;
  }
  if (!decided) return Range{0, 1};
  return *decided ? Range{1, 1} : Range{0, 0};
}

Mono Analyzer::monotonicity(const Expr& e, const Expr& v) {
  if (e == v) return Mono::kInc;
  if (e.is_int() || e.is_symbol()) return Mono::kConst;
  const std::vector<Expr>& ops = e.operands();
  switch (e.kind()) {
    case Kind::Add:
    case Kind::Min:
    case Kind::Max: {
      // Sums, minima and maxima of functions moving the same way move that way.
      Mono m = Mono::kConst;
      for (const Expr& op : ops) m = join(m, monotonicity(op, v));
      return m;
    }
    case Kind::Mul: {
      std::optional<size_t> moving;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (!depends_on(ops[i], v)) continue;
        if (moving) return Mono::kUnknown;  // v in two factors (v*v, ...)
        moving = i;
      }
      if (!moving) return Mono::kConst;
      Expr rest = e.int_value();
      for (size_t i = 0; i < ops.size(); ++i) {
        if (i != *moving) rest = rest * ops[i];
      }
      return scale_by_sign(monotonicity(ops[*moving], v), bounds(rest));
    }
    case Kind::FloorDiv: {
      // floor(x / d) is increasing in x for d > 0 and decreasing for d < 0.
      if (depends_on(ops[1], v)) return Mono::kUnknown;
      Mono m = monotonicity(ops[0], v);
      if (m == Mono::kConst) return m;
      if (positive(ops[1])) return m;
      if (positive(-ops[1])) return flip(m);
      return Mono::kUnknown;
    }
    case Kind::Lt:
    case Kind::Le:
      return join(monotonicity(ops[1], v), flip(monotonicity(ops[0], v)));
    case Kind::Mod:
    case Kind::Eq:
    case Kind::Ne:
    case Kind::Int:
    case Kind::Symbol:
      return depends_on(e, v) ? Mono::kUnknown : Mono::kConst;
  }
  return Mono::kUnknown;
}

// Replaces each index variable v registered with a symbolic extent E (so 0 <= v <= E - 1) by the
// end of that interval where e is smallest, when e is monotone in v. The result is a lower bound
// of e for every value of the symbols, so its numeric bounds bound e from below.
Expr Analyzer::eliminate_index_vars(const Expr& e) {
  Expr cur = e;
  std::set<Expr> done;
  bool progress = true;
  while (progress) {
    progress = false;
    for (const Expr& v : free_symbols(cur)) {
      if (done.count(v) != 0) continue;
      std::optional<Expr> extent = env_.extent_of_symbol(v);
      if (!extent) continue;
      Mono m = monotonicity(cur, v);
      if (m != Mono::kInc && m != Mono::kDec) continue;
      Expr value = m == Mono::kInc ? Expr(0) : *extent - 1;
      cur = substitute(cur, ExprMap{{v, value}});
      done.insert(v);
      progress = true;
      break;
    }
  }
  return cur;
}

// ---------------------------------------------------------------------------------------------
// Rewrite rules. Each rule sees a node whose operands are already simplified and returns the
// rewritten expression, or nullopt when it does not apply.

using RuleFn = std::optional<Expr> (*)(Analyzer&, const Expr&);

struct Rule {
  Kind kind;
  const char* name;
  RuleFn apply;
};

// x = g*high + low with 0 <= low < g, and the divisor d = g*k with g, k > 0. Then
// FloorDiv(x, d) = FloorDiv(high, k) and Mod(x, d) = g*Mod(high, k) + low.
struct LowSplit {
  Expr high;
  Expr low;
  Expr g;
  Expr k;
};

std::optional<LowSplit> split_low_part(Analyzer& an, const Expr& x, const Expr& d) {
  if (!an.positive(d)) return std::nullopt;
  std::vector<Expr> candidates;
  for (const Expr& t : term_list(x)) {
    // A sum divisor contributes its integer content only.
    candidates.push_back(d.kind() == Kind::Add ? monomial_gcd(t, integer_content(d))
                                               : monomial_gcd(t, d));
  }
  if (d.is_int() && constant_part(x) != 0) candidates.push_back(monomial_gcd(constant_part(x), d));
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (const Expr& g : candidates) {
    if (g == 1 || !an.positive(g)) continue;
    Expr high = 0;
    Expr low = 0;
    int64_t c = constant_part(x);
    if (g.is_int()) {
      high = floordiv_int(c, g.int_value());
      low = mod_int(c, g.int_value());
    } else {
      low = c;
    }
    bool any_high = high != 0;
    for (const Expr& t : term_list(x)) {
      if (std::optional<Expr> q = exact_div(t, g)) {
        high = high + *q;
        any_high = true;
      } else {
        low = low + t;
      }
    }
    if (!any_high || !an.nonneg(low) || !an.less(low, g)) continue;
    std::optional<Expr> k = exact_div(d, g);
    if (!k) continue;
    return LowSplit{high, low, g, *k};
  }
  return std::nullopt;
}

bool small_nonneg(Analyzer& an, const Expr& x, const Expr& d) {
  return an.nonneg(x) && an.less(x, d);
}

// ---- FloorDiv(x, d) ----
std::optional<Expr> floordiv_small(Analyzer& an, const Expr& e) {
  if (!small_nonneg(an, e.operands()[0], e.operands()[1])) return std::nullopt;
  return Expr(0);
}

std::optional<Expr> floordiv_drop_low(Analyzer& an, const Expr& e) {
  std::optional<LowSplit> s = split_low_part(an, e.operands()[0], e.operands()[1]);
  if (!s) return std::nullopt;
  return floordiv(s->high, s->k);
}

// FloorDiv(a + FloorDiv(y, m), d) = FloorDiv(m*a + y, m*d) for d > 0 (construction does this
// for constant d only).
std::optional<Expr> floordiv_nested(Analyzer& an, const Expr& e) {
  const Expr& x = e.operands()[0];
  const Expr& d = e.operands()[1];
  std::vector<Expr> terms = term_list(x);
  auto inner = std::find_if(terms.begin(), terms.end(),
                            [](const Expr& t) { return t.kind() == Kind::FloorDiv; });
  if (inner == terms.end() || !an.positive(d)) return std::nullopt;
  const Expr& m = inner->operands()[1];
  Expr rest = x - *inner;
  return floordiv(m * rest + inner->operands()[0], m * d);
}

// ---- Mod(x, d) ----
std::optional<Expr> mod_small(Analyzer& an, const Expr& e) {
  if (!small_nonneg(an, e.operands()[0], e.operands()[1])) return std::nullopt;
  return e.operands()[0];
}

std::optional<Expr> mod_one_period(Analyzer& an, const Expr& e) {
  const Expr& x = e.operands()[0];
  const Expr& d = e.operands()[1];
  if (!d.is_int() || d.int_value() <= 0) return std::nullopt;
  Range r = an.bounds(x);
  if (r.lo == kNegInf || r.hi == kPosInf) return std::nullopt;
  int64_t q = floordiv_int(r.lo, d.int_value());
  if (q == 0 || q != floordiv_int(r.hi, d.int_value())) return std::nullopt;
  return x - q * d;
}

std::optional<Expr> mod_drop_low(Analyzer& an, const Expr& e) {
  std::optional<LowSplit> s = split_low_part(an, e.operands()[0], e.operands()[1]);
  if (!s) return std::nullopt;
  return s->g * mod(s->high, s->k) + s->low;
}

// ---- Min / Max ----
// Drops every operand that another (not dropped) operand provably beats.
std::optional<Expr> drop_dominated(Analyzer& an, const Expr& e) {
  const std::vector<Expr>& ops = e.operands();
  bool is_min = e.kind() == Kind::Min;
  std::vector<bool> dropped(ops.size(), false);
  bool any = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = 0; j < ops.size() && !dropped[i]; ++j) {
      if (i == j || dropped[j]) continue;
      dropped[i] = is_min ? an.less_equal(ops[j], ops[i]) : an.less_equal(ops[i], ops[j]);
    }
    any = any || dropped[i];
  }
  if (!any) return std::nullopt;
  std::optional<Expr> r;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (dropped[i]) continue;
    r = !r ? ops[i] : (is_min ? min(*r, ops[i]) : max(*r, ops[i]));
  }
  return r;
}

// ---- comparisons ----
std::optional<Expr> decide_comparison(Analyzer& an, const Expr& e) {
  const Expr& a = e.operands()[0];
  const Expr& b = e.operands()[1];
  std::optional<bool> r;
  switch (e.kind()) {
    case Kind::Lt:
      if (an.less(a, b)) r = true;
      if (!r && an.less_equal(b, a)) r = false;
      break;
    case Kind::Le:
      if (an.less_equal(a, b)) r = true;
      if (!r && an.less(b, a)) r = false;
      break;
    case Kind::Eq:
    case Kind::Ne: {
      bool differ = an.less(a, b) || an.less(b, a);
      if (differ) r = e.kind() == Kind::Ne;
      break;
    }
    default:
      break;
  }
  if (!r) return std::nullopt;
  return Expr(*r ? 1 : 0);
}

// ---- Add ----
// How many FloorDiv and Mod nodes e holds (counting repeats): what digit recombination reduces.
size_t division_count(const Expr& e) {
  size_t n = 0;
  std::vector<Expr> work{e};
  while (!work.empty()) {
    Expr cur = work.back();
    work.pop_back();
    n += cur.kind() == Kind::FloorDiv || cur.kind() == Kind::Mod;
    for (const Expr& op : cur.operands()) work.push_back(op);
  }
  return n;
}

// The Mod factor of a term when it has exactly one.
std::optional<Expr> single_mod_factor(const Expr& t) {
  std::vector<Expr> factors = t.kind() == Kind::Mul ? t.operands() : std::vector<Expr>{t};
  auto is_mod = [](const Expr& f) { return f.kind() == Kind::Mod; };
  if (std::count_if(factors.begin(), factors.end(), is_mod) != 1) return std::nullopt;
  return *std::find_if(factors.begin(), factors.end(), is_mod);
}

// m*Mod(x, d) + m*d*FloorDiv(x, d) -> m*x, where m collects every term's multiplier of the same
// Mod (construction distributes (s + 1)*Mod(..) into s*Mod(..) + Mod(..)) and the FloorDiv may
// only match after simplification (construction pairs exact forms with constant multipliers;
// with symbolic radices FloorDiv(FloorDiv(x, s2), s1) needs s1 > 0 to become
// FloorDiv(x, s1*s2)). The rewrite is an identity, kept only when it removes divisions.
std::optional<Expr> add_recombine_digits(Analyzer& an, const Expr& e) {
  std::vector<Expr> mods;
  for (const Expr& t : e.operands()) {
    std::optional<Expr> base = single_mod_factor(t);
    if (base && std::find(mods.begin(), mods.end(), *base) == mods.end()) mods.push_back(*base);
  }
  size_t cost = mods.empty() ? 0 : division_count(e);
  for (const Expr& base : mods) {
    Expr m = 0;
    for (const Expr& t : e.operands()) {
      if (single_mod_factor(t) != base) continue;
      std::optional<Expr> q = exact_div(t, base);
      if (q) m = m + *q;
    }
    const Expr& x = base.operands()[0];
    const Expr& d = base.operands()[1];
    Expr f = an.simplify(floordiv(x, d));
    // Equal in value to e, as d*f + Mod(x, d) == x. Subtracted one part at a time: construction
    // would pair d*f + Mod(x, d) back into x before it could cancel anything.
    Expr candidate = e - m * base - m * (d * f) + m * x;
    if (division_count(candidate) < cost) return candidate;
  }
  return std::nullopt;
}

const Rule kRules[] = {
    // Add
    {Kind::Add, "c*Mod(x, d) + c*d*FloorDiv(x, d) = c*x after simplification",
     add_recombine_digits},
    // FloorDiv(x, d)
    {Kind::FloorDiv, "FloorDiv(x, d) = 0 when 0 <= x < d", floordiv_small},
    {Kind::FloorDiv, "FloorDiv(g*a + b, g*k) = FloorDiv(a, k) when 0 <= b < g", floordiv_drop_low},
    {Kind::FloorDiv, "FloorDiv(a + FloorDiv(y, m), d) = FloorDiv(m*a + y, m*d) when d > 0",
     floordiv_nested},
    // Mod(x, d)
    {Kind::Mod, "Mod(x, d) = x when 0 <= x < d", mod_small},
    {Kind::Mod, "Mod(x, n) = x - q*n when q*n <= x < (q+1)*n", mod_one_period},
    {Kind::Mod, "Mod(g*a + b, g*k) = g*Mod(a, k) + b when 0 <= b < g", mod_drop_low},
    // Min / Max
    {Kind::Min, "Min drops operands another one is <= to", drop_dominated},
    {Kind::Max, "Max drops operands another one is >= to", drop_dominated},
    // comparisons
    {Kind::Lt, "a < b decided by a proof", decide_comparison},
    {Kind::Le, "a <= b decided by a proof", decide_comparison},
    {Kind::Eq, "a == b decided by a proof", decide_comparison},
    {Kind::Ne, "a != b decided by a proof", decide_comparison},
};

// Rewrites feed back into simplify (a rewrite may enable another); rules shrink the expression,
// and this cap guards against a pair of rules undoing each other.
constexpr int kMaxRewriteDepth = 32;

Expr Analyzer::apply_rules(const Expr& e) {
  Range r = bounds(e);
  if (r.is_const()) return r.lo;
  for (const Rule& rule : kRules) {
    if (rule.kind != e.kind()) continue;
    std::optional<Expr> next = rule.apply(*this, e);
    if (!next || *next == e) continue;
    if (rewrite_depth_ >= kMaxRewriteDepth) return *next;
    ++rewrite_depth_;
    Expr out = simplify(*next);
    --rewrite_depth_;
    return out;
  }
  return e;
}

Expr Analyzer::simplify(const Expr& e) {
  if (e.is_int()) return e;
  auto it = simplify_cache_.find(e.node());
  if (it != simplify_cache_.end()) return it->second;
  std::vector<Expr> ops;
  bool changed = false;
  for (const Expr& op : e.operands()) {
    ops.push_back(simplify(op));
    changed = changed || ops.back() != op;
  }
  // A rewrite that divides by a constant 0 (a divisor 0 everywhere in range: e is undefined
  // there anyway) or needs a constant beyond int64 is skipped; what was built so far stands.
  Expr out = e;
  try {
    out = changed ? with_operands(e, ops) : e;
    out = apply_rules(out);
  } catch (const std::domain_error&) {
  } catch (const std::overflow_error&) {
  }
  simplify_cache_.insert_or_assign(e.node(), out);
  simplify_cache_.insert_or_assign(out.node(), out);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

Range bounds(const Expr& e, const RangeEnv& env) {
  return Analyzer(env).bounds(e);
}

Expr simplify(const Expr& e, const RangeEnv& env) {
  return Analyzer(env).simplify(e);
}

bool statically_known_true(const Expr& pred, const RangeEnv& env) {
  Analyzer an(env);
  Expr s = an.simplify(pred);
  if (s.is_int()) return s.int_value() != 0;
  const std::vector<Expr>& ops = s.operands();
  switch (s.kind()) {
    case Kind::Lt:
      return an.less(ops[0], ops[1]);
    case Kind::Le:
      return an.less_equal(ops[0], ops[1]);
    case Kind::Eq:
      return false;  // an equality that holds everywhere folds to 1 above
    case Kind::Ne:
      return an.less(ops[0], ops[1]) || an.less(ops[1], ops[0]);
    default: {
      // Read as "s != 0".
      Range r = an.bounds(s);
      return r.lo > 0 || r.hi < 0 || an.positive(s) || an.positive(-s);
    }
  }
}

int64_t size_hint(const Expr& e, const RangeEnv& env) {
  std::map<std::string, int64_t> values;
  for (const Expr& s : free_symbols(e)) {
    std::optional<int64_t> h = env.hint_of_symbol(s);
    if (!h) {
      throw std::runtime_error("coil::sym::size_hint: symbol " + s.name() + " in " + e.str() +
                               " has no hint; register one with RangeEnv::set_hint");
    }
    values[s.name()] = *h;
  }
  return evaluate(e, values);
}

}  // namespace coil::sym
