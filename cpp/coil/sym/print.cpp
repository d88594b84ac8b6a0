// Printers for sym::Expr: str() (readable), to_python (Python / Triton) and to_cpp (C++ kernels).
//
// One renderer walks the expression; a Syntax record says how each target spells the operators
// that differ. Every printed operand carries its precedence, and the parent parenthesizes an
// operand that binds more loosely than its position needs, so output is parenthesized exactly
// where the target's grammar requires it (plus around // and % operands, for readability).
//
// Tests: tests/cpp/sym/print_test.cpp.
#include "coil/sym/expr.h"

namespace coil::sym {

namespace {

enum class Target { Str, Python, Cpp };

// Binding strength of printed text, loosest first.
enum Prec : int { kCompare = 1, kSum = 2, kProduct = 3, kUnary = 4, kAtom = 5 };

struct Printed {
  std::string text;
  int prec;
};

struct Syntax {
  const char* floordiv_op;    // infix operator when division is known safe, else nullptr
  const char* mod_op;         // likewise
  const char* floordiv_call;  // function form
  const char* mod_call;
  const char* min_call;
  const char* max_call;
  bool nest_min_max;  // call takes exactly two arguments
};

constexpr Syntax kStrSyntax{nullptr, nullptr, "FloorDiv", "Mod", "Min", "Max", false};
constexpr Syntax kPythonSyntax{"//", "%", nullptr, nullptr, "min", "max", false};
constexpr Syntax kCppSyntax{
    "/", "%", "coil_floordiv", "coil_mod", "std::min<int64_t>", "std::max<int64_t>", true};

const char* comparison_op(Kind k) {
  switch (k) {
    case Kind::Lt:
      return "<";
    case Kind::Le:
      return "<=";
    case Kind::Eq:
      return "==";
    default:
      return "!=";
  }
}

class Printer {
 public:
  Printer(Target target, const RangeEnv* env)
      : target_(target),
        syntax_(target == Target::Str      ? kStrSyntax
                : target == Target::Python ? kPythonSyntax
                                           : kCppSyntax),
        env_(env) {}

  std::string print(const Expr& e) { return render(e).text; }

 private:
  Printed render(const Expr& e) {
    switch (e.kind()) {
      case Kind::Int:
        return render_int(e.int_value());
      case Kind::Symbol:
        return {e.name(), kAtom};
      case Kind::Add:
        return render_sum(e);
      case Kind::Mul:
        return render_product(e);
      case Kind::FloorDiv:
      case Kind::Mod:
        return render_division(e);
      case Kind::Min:
      case Kind::Max:
        return render_min_max(e);
      case Kind::Lt:
      case Kind::Le:
      case Kind::Eq:
      case Kind::Ne:
        return render_comparison(e);
    }
    return {"?", kAtom};
  }

  // The operand's text, parenthesized unless it binds at least as tightly as min_prec.
  std::string operand(const Expr& e, int min_prec) {
    Printed p = render(e);
    if (p.prec >= min_prec) return p.text;
    return "(" + p.text + ")";
  }

  Printed render_int(int64_t v) {
    if (target_ == Target::Cpp && v == INT64_MIN) return {"(-9223372036854775807LL - 1)", kAtom};
    std::string s = std::to_string(v);
    // Beyond int range a C++ literal gets an explicit 64-bit type.
    if (target_ == Target::Cpp && (v > INT32_MAX || v < INT32_MIN)) s += "LL";
    return {s, v < 0 ? kUnary : kAtom};
  }

  // A term with its sign split off: "3*b" and negative for -3*b. A leading minus binds tighter
  // than // and %, so "-(a // b)" keeps its parentheses (Python reads -a // b as (-a) // b).
  std::pair<bool, std::string> signed_term(const Expr& t, bool leading) {
    if (t.kind() == Kind::Mul && t.int_value() < 0 && t.int_value() != INT64_MIN) {
      Expr positive = -t;
      bool division = positive.kind() == Kind::FloorDiv || positive.kind() == Kind::Mod;
      return {true, operand(positive, leading && division ? kUnary : kProduct)};
    }
    return {false, operand(t, kSum + 1)};
  }

  Printed render_sum(const Expr& e) {
    std::string s;
    bool first = true;
    for (const Expr& t : e.operands()) {
      auto [negative, text] = signed_term(t, first);
      if (first) {
        s = negative ? "-" + text : text;
      } else {
        s += negative ? " - " : " + ";
        s += text;
      }
      first = false;
    }
    int64_t c = e.int_value();
    if (c > 0) s += " + " + render_int(c).text;
    if (c < 0 && c != INT64_MIN) s += " - " + render_int(-c).text;
    if (c == INT64_MIN) s += " + " + render_int(c).text;
    return {s, kSum};
  }

  Printed render_product(const Expr& e) {
    std::string s;
    int64_t c = e.int_value();
    if (c == -1) {
      s = "-";
    } else if (c != 1) {
      s = render_int(c).text + "*";
    }
    bool first = true;
    for (const Expr& f : e.operands()) {
      if (!first) s += "*";
      // Factors must be atoms: "2*(x // 8)" differs from "2*x // 8".
      s += operand(f, kAtom);
      first = false;
    }
    return {s, c < 0 ? kUnary : kProduct};
  }

  bool known_nonneg(const Expr& e) {
    return env_ != nullptr && statically_known_true(le(0, e), *env_);
  }

  Printed render_division(const Expr& e) {
    bool is_div = e.kind() == Kind::FloorDiv;
    const Expr& a = e.operands()[0];
    const Expr& b = e.operands()[1];
    const char* op = is_div ? syntax_.floordiv_op : syntax_.mod_op;
    const char* call = is_div ? syntax_.floordiv_call : syntax_.mod_call;
    // C's / and % truncate toward zero; they agree with Python's only for non-negative operands.
    bool infix = op != nullptr && (target_ != Target::Cpp || (known_nonneg(a) && known_nonneg(b)));
    if (infix) return {operand(a, kAtom) + " " + op + " " + operand(b, kAtom), kProduct};
    return {std::string(call) + "(" + print(a) + ", " + print(b) + ")", kAtom};
  }

  Printed render_min_max(const Expr& e) {
    const char* call = e.kind() == Kind::Min ? syntax_.min_call : syntax_.max_call;
    const std::vector<Expr>& ops = e.operands();
    if (!syntax_.nest_min_max) {
      std::string s = std::string(call) + "(";
      for (size_t i = 0; i < ops.size(); ++i) s += (i == 0 ? "" : ", ") + print(ops[i]);
      return {s + ")", kAtom};
    }
    // f(a, f(b, c)), built from the right.
    std::string s = print(ops.back());
    for (size_t i = ops.size() - 1; i-- > 0;) {
      s = std::string(call) + "(" + print(ops[i]) + ", " + s + ")";
    }
    return {s, kAtom};
  }

  Printed render_comparison(const Expr& e) {
    // Operands bind tighter than a comparison; a nested comparison is parenthesized (Python would
    // otherwise read a < b < c as a chain).
    std::string s = operand(e.operands()[0], kSum) + " " + comparison_op(e.kind()) + " " +
                    operand(e.operands()[1], kSum);
    // Kernel code reads better with every comparison in parentheses: "(x0 < s0)*4".
    if (target_ != Target::Str) return {"(" + s + ")", kAtom};
    return {s, kCompare};
  }

  Target target_;
  const Syntax& syntax_;
  const RangeEnv* env_;
};

}  // namespace

std::string Expr::str() const {
  return Printer(Target::Str, nullptr).print(*this);
}

std::string to_python(const Expr& e) {
  return Printer(Target::Python, nullptr).print(e);
}

std::string to_cpp(const Expr& e, const RangeEnv& env) {
  return Printer(Target::Cpp, &env).print(e);
}

}  // namespace coil::sym
