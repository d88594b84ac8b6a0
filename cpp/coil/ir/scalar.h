// ir::Value — the scalar body DAG of the loop-level IR.
//
// A lowering describes one element of a tensor as a function of index variables by calling the
// builders below (load, add, exp, where, cast, ...). Every builder returns an interned node, so
// building the same expression twice yields the same Value: common subexpressions merge for free,
// bodies hash and compare by pointer, and later stages (dependency extraction, op counting,
// fusion, code generation) walk data rather than re-run closures.
//
// Dtype discipline: a Value has exactly one dtype, and an op's operands already have the dtypes
// the op computes in (lowerings insert casts; builders check). Reduced-precision floats
// (bfloat16, float16) never flow into arithmetic: lowerings cast them to float32 ("opmath"),
// compute, and cast the result back, so each ATen op rounds exactly once, as eager does. Two
// exceptions follow eager, which computes them in the tensor's own dtype: nextafter (the next
// representable bfloat16 is not the next float32) and polygamma of order >= 2 (ATen's
// calc_polygamma<c10::BFloat16> rounds its intermediate products to bfloat16).
//
// Indirect indices: an element index may depend on data (gather, embedding, x[idx]). Such an index
// mentions *indirect symbols*, each bound to a scalar Value computed in the same body (an element
// of the index tensor) together with the size of the dimension it indexes. A node whose index
// mentions indirect symbols (Load, IndexExpr, Guard) carries their Values as operands, so every
// walk sees the dependency and substitution rebuilds them. Kernels check every indirect index when
// they use it: an index outside [0, size) (after wrapping negatives, where the op does) records an
// error the wrapper raises, and the access uses position 0 instead, so no memory outside a buffer
// is touched. Symbol names derive from the bound Value's structure (never from a process-global
// counter), and printers show them as the temporaries that hold their values.
//
// Tests: tests/cpp/ir/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coil/graph/graph.h"
#include "coil/sym/expr.h"

namespace coil::ir {

using graph::DType;

// All scalar op kinds in one list: X(Name, arity, "text"). Arity -1 = leaf with payload.
#define COIL_SCALAR_OPS(X)                                  \
  X(Constant, -1, "constant")                               \
  X(IndexExpr, -1, "index")                                 \
  X(Load, -1, "load")                                       \
  X(Guard, -1, "guard")                                     \
  X(Cast, 1, "cast")                                        \
  X(Neg, 1, "neg")                                          \
  X(Abs, 1, "abs")                                          \
  X(Exp, 1, "exp")                                          \
  X(Exp2, 1, "exp2")                                        \
  X(Log, 1, "log")                                          \
  X(Log2, 1, "log2")                                        \
  X(Log1p, 1, "log1p")                                      \
  X(Expm1, 1, "expm1")                                      \
  X(Sqrt, 1, "sqrt")                                        \
  X(Rsqrt, 1, "rsqrt")                                      \
  X(Sin, 1, "sin")                                          \
  X(Cos, 1, "cos")                                          \
  X(Tan, 1, "tan")                                          \
  X(Asin, 1, "asin")                                        \
  X(Acos, 1, "acos")                                        \
  X(Atan, 1, "atan")                                        \
  X(Sinh, 1, "sinh")                                        \
  X(Cosh, 1, "cosh")                                        \
  X(Tanh, 1, "tanh")                                        \
  X(Sigmoid, 1, "sigmoid")                                  \
  X(Erf, 1, "erf")                                          \
  X(Floor, 1, "floor")                                      \
  X(Ceil, 1, "ceil")                                        \
  X(Round, 1, "round")                                      \
  X(Trunc, 1, "trunc")                                      \
  X(Reciprocal, 1, "reciprocal")                            \
  X(Sign, 1, "sign")                                        \
  X(IsNan, 1, "isnan")                                      \
  X(IsInf, 1, "isinf")                                      \
  X(LogicalNot, 1, "logical_not")                           \
  X(BitwiseNot, 1, "bitwise_not")                           \
  X(SignBit, 1, "signbit")                                  \
  X(Acosh, 1, "acosh")                                      \
  X(Asinh, 1, "asinh")                                      \
  X(Atanh, 1, "atanh")                                      \
  X(Log10, 1, "log10")                                      \
  X(Erfc, 1, "erfc")                                        \
  X(Erfinv, 1, "erfinv")                                    \
  X(Erfcx, 1, "erfcx")                                      \
  X(Ndtri, 1, "ndtri")                                      \
  X(Lgamma, 1, "lgamma")                                    \
  X(Digamma, 1, "digamma")                                  \
  X(Trigamma, 1, "trigamma")                                \
  X(I0, 1, "i0")                                            \
  X(I0e, 1, "i0e")                                          \
  X(I1, 1, "i1")                                            \
  X(I1e, 1, "i1e")                                          \
  X(BesselJ0, 1, "bessel_j0")                               \
  X(BesselJ1, 1, "bessel_j1")                               \
  X(BesselY0, 1, "bessel_y0")                               \
  X(BesselY1, 1, "bessel_y1")                               \
  X(BesselI0, 1, "modified_bessel_i0")                      \
  X(BesselI1, 1, "modified_bessel_i1")                      \
  X(BesselK0, 1, "modified_bessel_k0")                      \
  X(BesselK1, 1, "modified_bessel_k1")                      \
  X(ScaledBesselK0, 1, "scaled_modified_bessel_k0")         \
  X(ScaledBesselK1, 1, "scaled_modified_bessel_k1")         \
  X(AiryAi, 1, "airy_ai")                                   \
  X(Add, 2, "add")                                          \
  X(Sub, 2, "sub")                                          \
  X(Mul, 2, "mul")                                          \
  X(Div, 2, "truediv")                                      \
  X(FloorDiv, 2, "floordiv")                                \
  X(TruncDiv, 2, "truncdiv")                                \
  X(Remainder, 2, "remainder")                              \
  X(Fmod, 2, "fmod")                                        \
  X(Pow, 2, "pow")                                          \
  X(Atan2, 2, "atan2")                                      \
  X(Maximum, 2, "maximum")                                  \
  X(Minimum, 2, "minimum")                                  \
  X(Lt, 2, "lt")                                            \
  X(Le, 2, "le")                                            \
  X(Gt, 2, "gt")                                            \
  X(Ge, 2, "ge")                                            \
  X(Eq, 2, "eq")                                            \
  X(Ne, 2, "ne")                                            \
  X(LogicalAnd, 2, "logical_and")                           \
  X(LogicalOr, 2, "logical_or")                             \
  X(LogicalXor, 2, "logical_xor")                           \
  X(BitwiseAnd, 2, "bitwise_and")                           \
  X(BitwiseOr, 2, "bitwise_or")                             \
  X(BitwiseXor, 2, "bitwise_xor")                           \
  X(ShiftLeft, 2, "bitwise_left_shift")                     \
  X(ShiftRight, 2, "bitwise_right_shift")                   \
  X(CopySign, 2, "copysign")                                \
  X(Hypot, 2, "hypot")                                      \
  X(NextAfter, 2, "nextafter")                              \
  X(Ldexp, 2, "ldexp")                                      \
  X(Polygamma, 2, "polygamma")                              \
  X(Zeta, 2, "zeta")                                        \
  X(Igamma, 2, "igamma")                                    \
  X(Igammac, 2, "igammac")                                  \
  X(ChebyshevT, 2, "chebyshev_polynomial_t")                \
  X(ChebyshevU, 2, "chebyshev_polynomial_u")                \
  X(ChebyshevV, 2, "chebyshev_polynomial_v")                \
  X(ChebyshevW, 2, "chebyshev_polynomial_w")                \
  X(ShiftedChebyshevT, 2, "shifted_chebyshev_polynomial_t") \
  X(ShiftedChebyshevU, 2, "shifted_chebyshev_polynomial_u") \
  X(ShiftedChebyshevV, 2, "shifted_chebyshev_polynomial_v") \
  X(ShiftedChebyshevW, 2, "shifted_chebyshev_polynomial_w") \
  X(HermiteH, 2, "hermite_polynomial_h")                    \
  X(HermiteHe, 2, "hermite_polynomial_he")                  \
  X(LaguerreL, 2, "laguerre_polynomial_l")                  \
  X(LegendreP, 2, "legendre_polynomial_p")                  \
  X(Rand, 2, "rand")                                        \
  X(Randn, 2, "randn")                                      \
  X(Where, 3, "where")

// SignBit..AiryAi and ShiftLeft..LegendreP are the special functions of lower/special.cpp. The
// C++ renderer calls ATen's own scalar implementations for those <cmath> lacks
// (codegen/cpp/cpp_special.h); the Triton renderer knows only those with a libdevice or
// tl form (lowerings leave the rest to the ATen fallback on Triton targets).
enum class Op : uint8_t {
#define COIL_X(name, arity, text) name,
  COIL_SCALAR_OPS(COIL_X)
#undef COIL_X
};

const char* op_name(Op op);
int op_arity(Op op);

struct ScalarNode;

// A handle to an interned scalar node; == is pointer equality.
class Value {
 public:
  Value() = default;
  explicit Value(const ScalarNode* n) : node_(n) {}
  const ScalarNode* operator->() const { return node_; }
  const ScalarNode& operator*() const { return *node_; }
  const ScalarNode* get() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }
  bool operator==(const Value& o) const { return node_ == o.node_; }
  bool operator!=(const Value& o) const { return node_ != o.node_; }

  DType dtype() const;
  Op op() const;

 private:
  const ScalarNode* node_ = nullptr;
};

struct ValueHash {
  size_t operator()(const Value& v) const { return std::hash<const void*>()(v.get()); }
};

struct ScalarNode {
  Op op;
  DType dtype;
  // Operands. Load: the mask (when masked), then one Value per indirect symbol of `index` (in the
  // order indirect_symbols gives). IndexExpr: the indirect Values. Guard: the guarded value, then
  // the indirect Values.
  std::vector<Value> args;
  bool masked = false;  // Load: args[0] is a mask
  // Constant payload: numbers are kept as double (floats, bools) or int64 (integers).
  double fvalue = 0.0;
  int64_t ivalue = 0;
  // Load payload: buffer name and element index (in the buffer's storage, offset included).
  std::string buffer;
  sym::Expr index;  // Load, IndexExpr; Guard: the indirect symbols it checks (their sum)
  size_t hash = 0;  // structural (operands contribute their hashes): the same in every process
};

// ---- indirect indices ----
struct Indirect {
  Value value;     // the raw index (int64), an element of an index tensor
  sym::Expr size;  // the size of the indexed dimension: valid positions are [0, size)
  bool wrap;       // a negative index counts from the end (x[-1]); gather/scatter do not wrap
};
// The symbol standing for `value` used as an index into a dimension of `size` elements. The same
// (value, size, wrap) always gives the same symbol. value is cast to int64.
sym::Expr indirect(Value value, const sym::Expr& size, bool wrap);
// The binding of an indirect symbol; nullptr for any other expression.
const Indirect* indirect_of(const sym::Expr& symbol);
// The indirect symbols e mentions, in a deterministic order.
std::vector<sym::Expr> indirect_symbols(const sym::Expr& e);
bool has_indirect(const sym::Expr& e);

// ---- builders ----
Value constant(double v, DType dtype);  // floats and bool (0/1)
Value int_constant(int64_t v, DType dtype);
Value index_expr(const sym::Expr& e, DType dtype);  // dtype int64 or int32
// Load buffer[index]; when mask is given (a bool Value), elements where the mask is false are not
// read and yield 0 (callers combine with where() to pick the value they want there).
Value load(const std::string& buffer, DType dtype, const sym::Expr& index, Value mask = Value());
// `value`, once the indirect symbols of `index` (any expression mentioning them) are checked: keeps
// the bounds check of an indirect index whose symbol no longer appears in a load (a gather of a
// broadcast or constant tensor reads the same element whatever the index, but eager still raises).
Value guard(Value value, const sym::Expr& index);
// Guards `value` with every indirect symbol of `syms` that no Load/IndexExpr/Guard of it mentions.
Value guard_missing(Value value, const std::vector<sym::Expr>& syms);
Value cast(Value v, DType to);
Value unary(Op op, Value a);
Value binary(Op op, Value a, Value b);
Value where(Value cond, Value a, Value b);

inline Value add(Value a, Value b) {
  return binary(Op::Add, a, b);
}
inline Value sub(Value a, Value b) {
  return binary(Op::Sub, a, b);
}
inline Value mul(Value a, Value b) {
  return binary(Op::Mul, a, b);
}
inline Value div(Value a, Value b) {
  return binary(Op::Div, a, b);
}

// A Load's mask (null when unmasked), and the Values bound to a node's indirect symbols.
Value load_mask(Value v);
std::vector<Value> indirect_operands(Value v);

bool is_constant(Value v);
bool is_float_constant(Value v, double x);

// ---- walks ----
// Nodes reachable from roots in a deterministic topological order (operands before users).
std::vector<Value> topo_order(const std::vector<Value>& roots);
// Replace index symbols in every Load/IndexExpr index (simultaneous substitution), rebuilding.
// Indirect symbols follow their Values: a rebuilt operand gets its own symbol.
Value substitute_indices(Value root, const sym::ExprMap& repl);
// The same node over other operands (of the same kinds and dtypes; a Load's or IndexExpr's
// indirect operands must still match its index).
Value with_args(Value v, std::vector<Value> args);
// Replace loads of one buffer: fn(load, rebuilt_mask) returns the replacement value, where load
// is the load with its operands already rebuilt.
Value replace_loads(Value root, const std::string& buffer,
                    const std::function<Value(Value, Value)>& fn);
// Distinct buffers loaded, in first-use order.
std::vector<std::string> loaded_buffers(Value root);
// Number of non-leaf ops (a measure of body size for realization decisions).
int count_ops(Value root);
// Whether the body applies a floating-point function that is not one correctly rounded operation
// (exp, log, tanh, pow, erf, ...): its bits depend on the implementation that computes it
// (libm, glibc's libmvec, SLEEF), so two C++ kernels computing it can disagree in the last place.
// (rsqrt counts as exact: the C++ kernels compute 1 / sqrt(x), scalar and vector alike.)
bool computes_inexactly(Value root);
// Whether op, giving a value of `dtype`, is such a function (computes_inexactly of one node).
bool inexact_op(Op op, DType dtype);
// One line per node: "tmp3 = add(tmp1, tmp2) : f32"; loads print their buffer and index, with
// indirect symbols shown as the temporaries holding their values: "load(w, 4*tmp1 + v1)".
std::string body_to_text(const std::vector<Value>& roots);

}  // namespace coil::ir
