// sym::Expr — immutable, hash-consed integer expressions for sizes, strides and indices.
//
// Every size, stride, offset and index in coil is an Expr. Construction canonicalizes:
//   * sums are flattened into (constant + sum of coefficient * term), terms in a fixed order,
//     like terms merged, zero coefficients dropped;
//   * products are flattened into (coefficient * product of factors), factors ordered, constants
//     folded; a product with one factor and coefficient 1 is the factor itself;
//   * FloorDiv/Mod/Min/Max/comparisons fold when their operands are constants, and apply the
//     rules that hold for every value of the symbols (e.g. FloorDiv(a*n + b, n) = a + FloorDiv(b,
//     n)).
// Two structurally equal expressions are the same node, so equality is pointer equality.
//
// Range-aware rules (FloorDiv(x, n) == 0 when 0 <= x < n, Mod(x, n) == x likewise, ...) need to
// know what values symbols take; they live in simplify(), which takes a RangeEnv.
//
// Semantics: FloorDiv and Mod are Python's (floor division; the remainder has the divisor's sign).
// Comparisons evaluate to 0 or 1.
//
// Tests: tests/cpp/sym/ (brute-force evaluation of random expressions against simplified forms).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace coil::sym {

enum class Kind : uint8_t {
  Int,       // an integer constant
  Symbol,    // a named integer variable (size symbol s0, index variable x0, r0, ...)
  Add,       // operands: terms; constant term folded into int_value (the "offset")
  Mul,       // operands: factors; integer coefficient in int_value
  FloorDiv,  // operands: {numerator, denominator}
  Mod,       // operands: {x, modulus}
  Min,       // operands: two or more, ordered
  Max,       // operands: two or more, ordered
  Lt,        // operands: {a, b}: a < b
  Le,        // a <= b
  Eq,        // a == b
  Ne,        // a != b
};

const char* kind_name(Kind k);

struct Node;

// A handle to an interned expression node. Cheap to copy; == is pointer equality.
class Expr {
 public:
  Expr();               // the integer 0
  Expr(int64_t value);  // NOLINT(google-explicit-constructor): integers convert implicitly
  Expr(int value) : Expr(static_cast<int64_t>(value)) {}  // NOLINT

  static Expr symbol(const std::string& name);

  Kind kind() const;
  bool is_int() const { return kind() == Kind::Int; }
  bool is_symbol() const { return kind() == Kind::Symbol; }
  // For Int: the value. For Add: the constant term. For Mul: the coefficient. Otherwise 0.
  int64_t int_value() const;
  std::optional<int64_t> as_int() const;
  // For Symbol: the name. Otherwise empty.
  const std::string& name() const;
  // Operands (see Kind). Empty for Int and Symbol.
  const std::vector<Expr>& operands() const;

  size_t hash() const;
  const Node* node() const { return node_; }
  bool operator==(const Expr& o) const { return node_ == o.node_; }
  bool operator!=(const Expr& o) const { return node_ != o.node_; }
  // A total order that is deterministic across runs (structural, not by address).
  bool operator<(const Expr& o) const;

  // Human-readable form, Python-like syntax: "s0*x1 + 4", "FloorDiv(x0, 8)", "Mod(x0, 8)".
  std::string str() const;

 private:
  explicit Expr(const Node* n) : node_(n) {}
  const Node* node_;
  friend Expr intern(Node&& n);
};

struct ExprHash {
  size_t operator()(const Expr& e) const { return e.hash(); }
};
using ExprMap = std::unordered_map<Expr, Expr, ExprHash>;

// ---- construction (canonicalizing) ----
Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator*(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr lt(const Expr& a, const Expr& b);
Expr le(const Expr& a, const Expr& b);
Expr eq(const Expr& a, const Expr& b);
Expr ne(const Expr& a, const Expr& b);
// Ceil division for non-negative operands: FloorDiv(a + b - 1, b).
Expr ceildiv(const Expr& a, const Expr& b);
// The same kind of node as e over new operands, re-canonicalized (for Int/Symbol: e itself).
// For Add and Mul the constant term / coefficient of e is kept. The building block of rewriters.
Expr with_operands(const Expr& e, const std::vector<Expr>& operands);
// a / b when every term of a is an exact multiple of the monomial b (a constant, symbol or
// product; not a sum), e.g. exact_div(8*x + 4*s0*y, 4) == 2*x + s0*y. Otherwise nullopt.
// Exact for every value of the symbols.
std::optional<Expr> exact_div(const Expr& a, const Expr& b);

// ---- integer helpers with Python semantics ----
// Throw std::domain_error on division by zero and std::overflow_error on int64 overflow.
int64_t floordiv_int(int64_t a, int64_t b);
int64_t mod_int(int64_t a, int64_t b);

// ---- ranges ----
// An inclusive integer interval. kNegInf/kPosInf stand for unbounded ends.
struct Range {
  static constexpr int64_t kNegInf = INT64_MIN;
  static constexpr int64_t kPosInf = INT64_MAX;
  int64_t lo = kNegInf;
  int64_t hi = kPosInf;
  bool is_const() const { return lo == hi && lo != kNegInf; }
};

// What is known about symbols: a value range and a size hint (a concrete example value used by
// heuristics). Index variables are registered with range [0, extent - 1]; size symbols with
// [0 or 2, inf) and the example value as hint.
class RangeEnv {
 public:
  void set_range(const Expr& symbol, Range r);
  void set_hint(const Expr& symbol, int64_t hint);
  // Registers an index variable ranging over [0, extent): range [0, upper bound of extent - 1].
  void add_index_var(const Expr& var, const Expr& extent);
  Range range_of_symbol(const Expr& symbol) const;  // unbounded if unknown
  std::optional<int64_t> hint_of_symbol(const Expr& symbol) const;
  // The symbolic extent an index variable was registered with (var < extent), if any. Lets
  // simplify() prove x1 < s0 when x1's numeric range says only [0, inf) or [0, hint - 1].
  std::optional<Expr> extent_of_symbol(const Expr& symbol) const;

 private:
  std::unordered_map<const Node*, Range> ranges_;
  std::unordered_map<const Node*, int64_t> hints_;
  std::unordered_map<const Node*, Expr> extents_;
};

// The size symbols of the graph being compiled (Dynamo's s0, s1, ...: ranges and hints), known to
// every RangeEnv on this thread while a scope lives: a RangeEnv asked about a symbol it was not
// told about answers from the current scope. Compiling a graph opens one (compile.cpp), so the
// many local environments of lowering, scheduling and codegen all know that s0 >= 2 without each
// being handed the graph. Scopes nest; the innermost wins.
class SizeSymbolScope {
 public:
  explicit SizeSymbolScope(const RangeEnv& symbols);
  ~SizeSymbolScope();
  SizeSymbolScope(const SizeSymbolScope&) = delete;
  SizeSymbolScope& operator=(const SizeSymbolScope&) = delete;
  static const RangeEnv* current();  // nullptr outside any scope

 private:
  const RangeEnv* previous_;
};

// Bounds of an expression given the symbols' ranges (interval arithmetic; conservative).
Range bounds(const Expr& e, const RangeEnv& env);

// Range-aware simplification. Never changes the value of e for any symbol values within range.
Expr simplify(const Expr& e, const RangeEnv& env);

// True only when pred (a comparison, or any expression read as "!= 0") holds for every value
// of its symbols within their ranges. False means "not known", not "false".
bool statically_known_true(const Expr& pred, const RangeEnv& env);

// The value of e with every symbol replaced by its hint. Throws std::runtime_error naming the
// symbol when one has no hint.
int64_t size_hint(const Expr& e, const RangeEnv& env);
// size_hint, or nullopt where a symbol has no hint (heuristics that then keep their default).
inline std::optional<int64_t> try_size_hint(const Expr& e, const RangeEnv& env = {}) {
  try {
    return size_hint(e, env);
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

// ---- rewriting and queries ----
// Replace symbols (keys must be symbols) by expressions, re-canonicalizing.
Expr substitute(const Expr& e, const ExprMap& repl);
// Evaluate with concrete symbol values; throws std::runtime_error for unknown symbols or /0.
int64_t evaluate(const Expr& e, const std::map<std::string, int64_t>& values);
// The symbols e mentions, in deterministic (sorted by name) order.
std::vector<Expr> free_symbols(const Expr& e);
bool depends_on(const Expr& e, const Expr& symbol);

// If e is affine in vars (e == constant + sum coeffs[i] * vars[i], where the constant and the
// coefficients do not mention any of vars), returns {coeffs, constant}. Otherwise nullopt.
struct Affine {
  std::vector<Expr> coeffs;  // one per var, 0 where absent
  Expr constant;
};
std::optional<Affine> as_affine(const Expr& e, const std::vector<Expr>& vars);

// ---- printers ----
// C++: integers as int64 literals; FloorDiv/Mod print as "/" and "%" when both operands are
// known non-negative under env, else as calls to coil_floordiv/coil_mod (which the C++ kernel
// prelude defines with Python semantics). Min/Max as std::min/std::max over int64_t.
std::string to_cpp(const Expr& e, const RangeEnv& env);
// Python / Triton: "//" and "%" (Python semantics already), min()/max() for Min/Max.
std::string to_python(const Expr& e);

}  // namespace coil::sym

template <>
struct std::hash<coil::sym::Expr> {
  size_t operator()(const coil::sym::Expr& e) const { return e.hash(); }
};
