// Queries and rewrites over sym::Expr that need no ranges: substitute, evaluate, free_symbols,
// depends_on, as_affine.
//
// Tests: tests/cpp/sym/expr_test.cpp.
#include "coil/sym/expr.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace coil::sym {

namespace {

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw std::overflow_error("coil::sym::evaluate: int64 overflow in " + std::to_string(a) +
                              " + " + std::to_string(b));
  }
  return r;
}

int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw std::overflow_error("coil::sym::evaluate: int64 overflow in " + std::to_string(a) +
                              " * " + std::to_string(b));
  }
  return r;
}

class Evaluator {
 public:
  explicit Evaluator(const std::map<std::string, int64_t>& values) : values_(values) {}

  int64_t eval(const Expr& e) {
    if (e.is_int()) return e.int_value();
    if (e.is_symbol()) return symbol_value(e);
    auto it = cache_.find(e.node());
    if (it != cache_.end()) return it->second;
    int64_t v = eval_node(e);
    cache_[e.node()] = v;
    return v;
  }

 private:
  int64_t symbol_value(const Expr& s) const {
    auto it = values_.find(s.name());
    if (it == values_.end()) {
      throw std::runtime_error("coil::sym::evaluate: no value given for symbol " + s.name());
    }
    return it->second;
  }

  int64_t eval_node(const Expr& e) {
    const std::vector<Expr>& ops = e.operands();
    switch (e.kind()) {
      case Kind::Int:
        return e.int_value();
      case Kind::Symbol:
        return symbol_value(e);
      case Kind::Add: {
        int64_t v = e.int_value();
        for (const Expr& t : ops) v = add_checked(v, eval(t));
        return v;
      }
      case Kind::Mul: {
        int64_t v = e.int_value();
        for (const Expr& f : ops) v = mul_checked(v, eval(f));
        return v;
      }
      case Kind::FloorDiv:
        return floordiv_int(eval(ops[0]), eval(ops[1]));
      case Kind::Mod:
        return mod_int(eval(ops[0]), eval(ops[1]));
      case Kind::Min:
      case Kind::Max: {
        int64_t v = eval(ops[0]);
        for (size_t i = 1; i < ops.size(); ++i) {
          int64_t o = eval(ops[i]);
          v = e.kind() == Kind::Min ? std::min(v, o) : std::max(v, o);
        }
        return v;
      }
      case Kind::Lt:
        return eval(ops[0]) < eval(ops[1]) ? 1 : 0;
      case Kind::Le:
        return eval(ops[0]) <= eval(ops[1]) ? 1 : 0;
      case Kind::Eq:
        return eval(ops[0]) == eval(ops[1]) ? 1 : 0;
      case Kind::Ne:
        return eval(ops[0]) != eval(ops[1]) ? 1 : 0;
    }
    throw std::logic_error("coil::sym::evaluate: unknown node kind");
  }

  const std::map<std::string, int64_t>& values_;
  std::unordered_map<const Node*, int64_t> cache_;
};

class Substituter {
 public:
  explicit Substituter(const ExprMap& repl) : repl_(repl) {}

  Expr run(const Expr& e) {
    if (e.is_int()) return e;
    if (e.is_symbol()) {
      auto it = repl_.find(e);
      return it == repl_.end() ? e : it->second;
    }
    auto it = cache_.find(e.node());
    if (it != cache_.end()) return it->second;
    std::vector<Expr> ops;
    bool changed = false;
    for (const Expr& op : e.operands()) {
      ops.push_back(run(op));
      changed = changed || ops.back() != op;
    }
    Expr out = changed ? with_operands(e, ops) : e;
    cache_.insert_or_assign(e.node(), out);
    return out;
  }

 private:
  const ExprMap& repl_;
  std::unordered_map<const Node*, Expr> cache_;
};

// Index of e in vars, or -1.
int index_of(const Expr& e, const std::vector<Expr>& vars) {
  auto it = std::find(vars.begin(), vars.end(), e);
  return it == vars.end() ? -1 : static_cast<int>(it - vars.begin());
}

bool mentions_any(const Expr& e, const std::vector<Expr>& vars) {
  return std::any_of(vars.begin(), vars.end(), [&](const Expr& v) { return depends_on(e, v); });
}

// The terms of e with its constant as one more term.
std::vector<Expr> summands(const Expr& e) {
  if (e.kind() != Kind::Add) return {e};
  std::vector<Expr> out = e.operands();
  if (e.int_value() != 0) out.push_back(e.int_value());
  return out;
}

// a * b with sums multiplied out one level (construction keeps a product of two sums).
Expr multiply_out(const Expr& a, const Expr& b) {
  Expr sum = 0;
  for (const Expr& x : summands(a)) {
    for (const Expr& y : summands(b)) sum = sum + x * y;
  }
  return sum;
}

// A product with a sum factor that mentions vars, e.g. (x0 + 1)*(s0 + 1), multiplied out.
std::optional<Expr> expand_for_vars(const Expr& t, const std::vector<Expr>& vars) {
  if (t.kind() != Kind::Mul) return std::nullopt;
  const std::vector<Expr>& fs = t.operands();
  bool needed = std::any_of(fs.begin(), fs.end(), [&](const Expr& f) {
    return f.kind() == Kind::Add && mentions_any(f, vars);
  });
  if (!needed) return std::nullopt;
  Expr r = t.int_value();
  for (const Expr& f : fs) r = multiply_out(r, f);
  return r;
}

}  // namespace

Expr substitute(const Expr& e, const ExprMap& repl) {
  for (const auto& [key, value] : repl) {
    if (!key.is_symbol()) {
      throw std::invalid_argument("coil::sym::substitute: keys must be symbols, got " + key.str());
    }
  }
  return Substituter(repl).run(e);
}

int64_t evaluate(const Expr& e, const std::map<std::string, int64_t>& values) {
  return Evaluator(values).eval(e);
}

std::vector<Expr> free_symbols(const Expr& e) {
  std::vector<Expr> out;
  std::unordered_set<const Node*> seen;
  std::vector<Expr> work{e};
  while (!work.empty()) {
    Expr cur = work.back();
    work.pop_back();
    if (!seen.insert(cur.node()).second) continue;
    if (cur.is_symbol()) out.push_back(cur);
    for (const Expr& op : cur.operands()) work.push_back(op);
  }
  std::sort(out.begin(), out.end(),
            [](const Expr& a, const Expr& b) { return a.name() < b.name(); });
  return out;
}

bool depends_on(const Expr& e, const Expr& symbol) {
  std::unordered_set<const Node*> seen;
  std::vector<Expr> work{e};
  while (!work.empty()) {
    Expr cur = work.back();
    work.pop_back();
    if (cur == symbol) return true;
    if (!seen.insert(cur.node()).second) continue;
    for (const Expr& op : cur.operands()) work.push_back(op);
  }
  return false;
}

std::optional<Affine> as_affine(const Expr& e, const std::vector<Expr>& vars) {
  Affine out;
  out.coeffs.assign(vars.size(), Expr(0));
  out.constant = 0;
  if (e.is_int()) {
    out.constant = e;
    return out;
  }
  std::vector<Expr> terms = e.kind() == Kind::Add ? e.operands() : std::vector<Expr>{e};
  if (e.kind() == Kind::Add) out.constant = e.int_value();
  for (const Expr& t : terms) {
    if (std::optional<Expr> expanded = expand_for_vars(t, vars)) {
      // The expansion's terms have no sum factor mentioning vars at this level, so this recursion
      // goes one level deeper into the expression each time.
      std::optional<Affine> inner = as_affine(*expanded, vars);
      if (!inner) return std::nullopt;
      out.constant = out.constant + inner->constant;
      for (size_t i = 0; i < vars.size(); ++i) out.coeffs[i] = out.coeffs[i] + inner->coeffs[i];
      continue;
    }
    int64_t coeff = t.kind() == Kind::Mul ? t.int_value() : 1;
    std::vector<Expr> factors = t.kind() == Kind::Mul ? t.operands() : std::vector<Expr>{t};
    int var = -1;
    Expr rest = coeff;
    for (const Expr& f : factors) {
      int i = index_of(f, vars);
      if (i >= 0) {
        if (var >= 0) return std::nullopt;  // a product of vars (or a var squared)
        var = i;
        continue;
      }
      if (mentions_any(f, vars)) return std::nullopt;  // a var inside FloorDiv, Min, a sum, ...
      rest = rest * f;
    }
    if (var < 0) {
      out.constant = out.constant + rest;
    } else {
      out.coeffs[var] = out.coeffs[var] + rest;
    }
  }
  return out;
}

}  // namespace coil::sym
