#include "coil/ir/fold.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace coil::ir {

using sym::Expr;

namespace {

// An ordering or equality comparison (not a logical op: scalar.cpp's is_comparison).
bool is_order_comparison(Op op) {
  return op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge || op == Op::Eq ||
         op == Op::Ne;
}

// The integer an index value stands for, as an expression: an IndexExpr without indirect
// symbols, an integer constant, or sums, differences, products and negations of those (an
// arange's start + step * x, computed by value ops).
std::optional<Expr> index_value(Value v, int depth = 0) {
  if (graph::is_floating(v.dtype()) || v.dtype() == DType::Bool || depth > 8) return std::nullopt;
  switch (v.op()) {
    case Op::IndexExpr:
      if (has_indirect(v->index)) return std::nullopt;
      return v->index;
    case Op::Constant:
      return Expr(v->ivalue);
    case Op::Neg:
      if (auto a = index_value(v->args[0], depth + 1)) return -*a;
      return std::nullopt;
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      auto a = index_value(v->args[0], depth + 1);
      auto b = a ? index_value(v->args[1], depth + 1) : std::nullopt;
      if (!b) return std::nullopt;
      if (v.op() == Op::Add) return *a + *b;
      if (v.op() == Op::Sub) return *a - *b;
      return *a * *b;
    }
    default:
      return std::nullopt;
  }
}

std::optional<bool> bool_constant(Value v) {
  if (v.op() != Op::Constant || v.dtype() != DType::Bool) return std::nullopt;
  return v->ivalue != 0;
}

// The outcome of `l op r` over env's ranges, when the ranges decide it.
std::optional<bool> decide(Op op, const Expr& l, const Expr& r, const sym::RangeEnv& env) {
  sym::Range d = sym::bounds(sym::simplify(l - r, env), env);
  bool neg = d.hi != sym::Range::kPosInf && d.hi < 0;  // l < r everywhere
  bool pos = d.lo != sym::Range::kNegInf && d.lo > 0;  // l > r everywhere
  bool nonpos = d.hi != sym::Range::kPosInf && d.hi <= 0;
  bool nonneg = d.lo != sym::Range::kNegInf && d.lo >= 0;
  bool zero = d.is_const() && d.lo == 0;
  switch (op) {
    case Op::Lt:
      if (neg) return true;
      if (nonneg) return false;
      break;
    case Op::Le:
      if (nonpos) return true;
      if (pos) return false;
      break;
    case Op::Gt:
      if (pos) return true;
      if (nonpos) return false;
      break;
    case Op::Ge:
      if (nonneg) return true;
      if (neg) return false;
      break;
    case Op::Eq:
      if (zero) return true;
      if (neg || pos) return false;
      break;
    case Op::Ne:
      if (zero) return false;
      if (neg || pos) return true;
      break;
    default:
      break;
  }
  return std::nullopt;
}

Value fold_node(Value v, const sym::RangeEnv& env) {
  const std::vector<Value>& a = v->args;
  switch (v.op()) {
    case Op::IndexExpr:
    case Op::Neg:
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      // An index value that is one integer over the ranges.
      auto e = index_value(v);
      if (!e) return v;
      if (auto c = sym::simplify(*e, env).as_int()) return int_constant(*c, v.dtype());
      return v;
    }
    case Op::LogicalNot:
      if (auto c = bool_constant(a[0])) return constant(!*c, DType::Bool);
      return v;
    case Op::LogicalAnd:
    case Op::LogicalOr: {
      bool is_and = v.op() == Op::LogicalAnd;
      for (int i = 0; i < 2; ++i) {
        auto c = bool_constant(a[i]);
        if (!c) continue;
        if (*c != is_and) return constant(*c, DType::Bool);    // false && x, true || x
        if (a[1 - i].dtype() == DType::Bool) return a[1 - i];  // true && x = x
      }
      return v;
    }
    case Op::Where:
      if (auto c = bool_constant(a[0])) return *c ? a[1] : a[2];
      return v;
    case Op::Load: {
      if (!v->masked) return v;
      auto c = bool_constant(a[0]);
      if (!c) return v;
      if (!*c) return int_constant(0, v.dtype());  // a masked-off load yields 0
      return load(v->buffer, v.dtype(), v->index);
    }
    default:
      break;
  }
  if (is_order_comparison(v.op())) {
    auto l = index_value(a[0]), r = index_value(a[1]);
    if (l && r) {
      if (auto c = decide(v.op(), *l, *r, env)) return constant(*c, DType::Bool);
    }
  }
  return v;
}

// e as s*var + k with integer s != 0 and k free of var: (s, k); nullopt otherwise.
std::optional<std::pair<int64_t, Expr>> affine_in(const Expr& e, const Expr& var,
                                                  const sym::RangeEnv& env) {
  Expr at0 = sym::simplify(sym::substitute(e, {{var, Expr(0)}}), env);
  Expr step = sym::simplify(sym::substitute(e, {{var, var + 1}}) - e, env);
  auto s = step.as_int();
  if (!s || *s == 0) return std::nullopt;
  // affine: e == s*var + e(0) exactly
  if (!(sym::simplify(e - (Expr(*s) * var + at0), env).as_int() == std::optional<int64_t>(0))) {
    return std::nullopt;
  }
  return std::make_pair(*s, at0);
}

// Where s*x + k - c crosses zero, t = (c - k) / s: the first x past the region below t
// (ceil(t)) and past the region at or below t (floor(t) + 1), for the crossings `which` asks.
enum class Crossing { Below, AtOrBelow, Both };
void crossings(int64_t s, int64_t k, int64_t c, Crossing which, std::vector<int64_t>& out) {
  int64_t num = c - k, den = s;
  if (den < 0) {
    num = -num;
    den = -den;
  }
  int64_t fl = sym::floordiv_int(num, den);
  int64_t ceil = num % den == 0 ? fl : fl + 1;
  if (which != Crossing::AtOrBelow) out.push_back(ceil);
  if (which != Crossing::Below) out.push_back(fl + 1);
}

}  // namespace

Value fold_in_ranges(Value root, const sym::RangeEnv& env) {
  std::unordered_map<const ScalarNode*, Value> memo;
  for (const Value& v : topo_order({root})) {
    std::vector<Value> args;
    for (const Value& a : v->args) args.push_back(memo.at(a.get()));
    Value now = v;
    if (v.op() == Op::Load || v.op() == Op::IndexExpr || v.op() == Op::Guard) {
      // Only a load's mask is rebuilt: indirect operands stay bound to their symbols.
      if (v.op() == Op::Load && v->masked && args[0] != v->args[0]) {
        std::vector<Value> kept = v->args;
        kept[0] = args[0];
        now = with_args(v, kept);
      }
    } else {
      now = with_args(v, args);
    }
    memo[v.get()] = fold_node(now, env);
  }
  return memo.at(root.get());
}

std::vector<int64_t> index_breakpoints(const std::vector<Value>& roots, const Expr& var,
                                       int64_t extent, const sym::RangeEnv& env) {
  std::vector<int64_t> points;
  for (const Value& v : topo_order(roots)) {
    if (!is_order_comparison(v.op())) continue;
    auto l = index_value(v->args[0]), r = index_value(v->args[1]);
    if (!l || !r) continue;
    Expr d = sym::simplify(*l - *r, env);  // the comparison is d's sign against 0
    bool mentions = false;
    for (const Expr& s : sym::free_symbols(d)) mentions |= s == var;
    if (!mentions) continue;
    if (auto aff = affine_in(d, var, env)) {
      // d < 0 (Lt, Ge) changes where d crosses below 0; d <= 0 (Le, Gt) where it crosses 0
      // itself; d == 0 at both. (s < 0 mirrors which side is which: the two points cover it.)
      Crossing which = v.op() == Op::Lt || v.op() == Op::Ge   ? Crossing::Below
                       : v.op() == Op::Le || v.op() == Op::Gt ? Crossing::AtOrBelow
                                                              : Crossing::Both;
      if (aff->first < 0 && which != Crossing::Both) {
        which = which == Crossing::Below ? Crossing::AtOrBelow : Crossing::Below;
      }
      if (auto k = aff->second.as_int()) crossings(aff->first, *k, 0, which, points);
      continue;
    }
    // FloorDiv(u, D) + c with u affine in var: zero where -c*D <= u < (1 - c)*D, so its sign
    // changes where u crosses those two.
    int64_t c = 0;
    Expr fd = d;
    if (d.kind() == sym::Kind::Add) {
      if (d.operands().size() != 1) continue;
      c = d.int_value();
      fd = d.operands()[0];
    }
    if (fd.kind() != sym::Kind::FloorDiv) continue;
    auto den = fd.operands()[1].as_int();
    auto aff = affine_in(fd.operands()[0], var, env);
    if (!den || *den <= 0 || !aff || !aff->second.as_int()) continue;
    int64_t k = *aff->second.as_int();
    Crossing which = aff->first > 0 ? Crossing::Below : Crossing::AtOrBelow;
    crossings(aff->first, k, -c * *den, which, points);
    crossings(aff->first, k, (1 - c) * *den, which, points);
  }
  std::vector<int64_t> out;
  for (int64_t p : points) {
    if (p > 0 && p < extent) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace coil::ir
