// Index expressions (sym::Expr) printed in Triton syntax, for the Triton renderer
// (triton_emitter.h).
#pragma once

#include <string>

#include "coil/sym/expr.h"

namespace coil::codegen::triton {

// Like sym::to_python, except that // and % print as operators only when both operands are known
// non-negative: Triton's integer // and % truncate toward zero (C semantics), so anything else goes
// through the prelude's coil_floordiv / coil_mod. Min/Max print as tl.minimum / tl.maximum.
class IndexPrinter {
 public:
  explicit IndexPrinter(const sym::RangeEnv& env) : env_(env) {}
  std::string print(const sym::Expr& e) { return render(e).text; }

 private:
  // Binding strength of printed text, loosest first (as in sym/print.cpp).
  enum Prec : int { kSum = 2, kProduct = 3, kUnary = 4, kAtom = 5 };
  struct Printed {
    std::string text;
    int prec;
  };
  using Expr = sym::Expr;

  Printed render(const Expr& e) {
    switch (e.kind()) {
      case sym::Kind::Int:
        return {std::to_string(e.int_value()), e.int_value() < 0 ? kUnary : kAtom};
      case sym::Kind::Symbol:
        return {e.name(), kAtom};
      case sym::Kind::Add:
        return render_sum(e);
      case sym::Kind::Mul:
        return render_product(e);
      case sym::Kind::FloorDiv:
      case sym::Kind::Mod:
        return render_division(e);
      case sym::Kind::Min:
      case sym::Kind::Max:
        return render_min_max(e);
      default:
        return render_comparison(e);
    }
  }

  std::string operand(const Expr& e, int min_prec) {
    Printed p = render(e);
    return p.prec >= min_prec ? p.text : "(" + p.text + ")";
  }

  Printed render_sum(const Expr& e) {
    std::string s;
    for (const Expr& t : e.operands()) {
      bool negative = t.kind() == sym::Kind::Mul && t.int_value() < 0;
      std::string text = operand(negative ? -t : t, kProduct);
      if (s.empty()) {
        s = negative ? "-" + operand(-t, kUnary) : text;
      } else {
        s += (negative ? " - " : " + ") + text;
      }
    }
    int64_t c = e.int_value();
    if (c > 0) s += " + " + std::to_string(c);
    if (c < 0) s += " - " + std::to_string(-c);
    return {s, kSum};
  }

  Printed render_product(const Expr& e) {
    int64_t c = e.int_value();
    std::string s = c == 1 ? "" : (c == -1 ? "-" : std::to_string(c) + "*");
    bool first = true;
    for (const Expr& f : e.operands()) {
      s += (first ? "" : "*") + operand(f, kAtom);
      first = false;
    }
    return {s, c < 0 ? kUnary : kProduct};
  }

  bool nonneg(const Expr& e) const { return sym::statically_known_true(sym::le(0, e), env_); }

  Printed render_division(const Expr& e) {
    bool is_div = e.kind() == sym::Kind::FloorDiv;
    const Expr& a = e.operands()[0];
    const Expr& b = e.operands()[1];
    if (nonneg(a) && nonneg(b))
      return {operand(a, kAtom) + (is_div ? " // " : " % ") + operand(b, kAtom), kProduct};
    return {std::string(is_div ? "coil_floordiv(" : "coil_mod(") + print(a) + ", " + print(b) + ")",
            kAtom};
  }

  Printed render_min_max(const Expr& e) {
    std::string fn = e.kind() == sym::Kind::Min ? "tl.minimum" : "tl.maximum";
    const std::vector<Expr>& ops = e.operands();
    std::string s = print(ops.back());
    for (size_t i = ops.size() - 1; i-- > 0;) s = fn + "(" + print(ops[i]) + ", " + s + ")";
    return {s, kAtom};
  }

  Printed render_comparison(const Expr& e) {
    const char* op = e.kind() == sym::Kind::Lt   ? "<"
                     : e.kind() == sym::Kind::Le ? "<="
                     : e.kind() == sym::Kind::Eq ? "=="
                                                 : "!=";
    return {"(" + operand(e.operands()[0], kSum) + " " + op + " " + operand(e.operands()[1], kSum) +
                ")",
            kAtom};
  }

  const sym::RangeEnv& env_;
};

}  // namespace coil::codegen::triton
