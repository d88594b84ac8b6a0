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
// compute, and cast the result back, so each ATen op rounds exactly once, as eager does.
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
#define COIL_SCALAR_OPS(X)        \
  X(Constant, -1, "constant")     \
  X(IndexExpr, -1, "index")       \
  X(Load, -1, "load")             \
  X(Cast, 1, "cast")              \
  X(Neg, 1, "neg")                \
  X(Abs, 1, "abs")                \
  X(Exp, 1, "exp")                \
  X(Exp2, 1, "exp2")              \
  X(Log, 1, "log")                \
  X(Log2, 1, "log2")              \
  X(Log1p, 1, "log1p")            \
  X(Expm1, 1, "expm1")            \
  X(Sqrt, 1, "sqrt")              \
  X(Rsqrt, 1, "rsqrt")            \
  X(Sin, 1, "sin")                \
  X(Cos, 1, "cos")                \
  X(Tan, 1, "tan")                \
  X(Asin, 1, "asin")              \
  X(Acos, 1, "acos")              \
  X(Atan, 1, "atan")              \
  X(Sinh, 1, "sinh")              \
  X(Cosh, 1, "cosh")              \
  X(Tanh, 1, "tanh")              \
  X(Sigmoid, 1, "sigmoid")        \
  X(Erf, 1, "erf")                \
  X(Floor, 1, "floor")            \
  X(Ceil, 1, "ceil")              \
  X(Round, 1, "round")            \
  X(Trunc, 1, "trunc")            \
  X(Reciprocal, 1, "reciprocal")  \
  X(Sign, 1, "sign")              \
  X(IsNan, 1, "isnan")            \
  X(IsInf, 1, "isinf")            \
  X(LogicalNot, 1, "logical_not") \
  X(BitwiseNot, 1, "bitwise_not") \
  X(Add, 2, "add")                \
  X(Sub, 2, "sub")                \
  X(Mul, 2, "mul")                \
  X(Div, 2, "truediv")            \
  X(FloorDiv, 2, "floordiv")      \
  X(TruncDiv, 2, "truncdiv")      \
  X(Remainder, 2, "remainder")    \
  X(Fmod, 2, "fmod")              \
  X(Pow, 2, "pow")                \
  X(Atan2, 2, "atan2")            \
  X(Maximum, 2, "maximum")        \
  X(Minimum, 2, "minimum")        \
  X(Lt, 2, "lt")                  \
  X(Le, 2, "le")                  \
  X(Gt, 2, "gt")                  \
  X(Ge, 2, "ge")                  \
  X(Eq, 2, "eq")                  \
  X(Ne, 2, "ne")                  \
  X(LogicalAnd, 2, "logical_and") \
  X(LogicalOr, 2, "logical_or")   \
  X(LogicalXor, 2, "logical_xor") \
  X(BitwiseAnd, 2, "bitwise_and") \
  X(BitwiseOr, 2, "bitwise_or")   \
  X(BitwiseXor, 2, "bitwise_xor") \
  X(Where, 3, "where")

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
  std::vector<Value> args;  // operands; for Load: {mask} when masked, else empty
  // Constant payload: numbers are kept as double (floats, bools) or int64 (integers).
  double fvalue = 0.0;
  int64_t ivalue = 0;
  // Load payload: buffer name and element index (in the buffer's storage, offset included).
  std::string buffer;
  sym::Expr index;  // Load, IndexExpr
  size_t hash = 0;
};

// ---- builders ----
Value constant(double v, DType dtype);  // floats and bool (0/1)
Value int_constant(int64_t v, DType dtype);
Value index_expr(const sym::Expr& e, DType dtype);  // dtype int64 or int32
// Load buffer[index]; when mask is given (a bool Value), elements where the mask is false are not
// read and yield 0 (callers combine with where() to pick the value they want there).
Value load(const std::string& buffer, DType dtype, const sym::Expr& index, Value mask = Value());
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

bool is_constant(Value v);
bool is_float_constant(Value v, double x);

// ---- walks ----
// Nodes reachable from roots in a deterministic topological order (operands before users).
std::vector<Value> topo_order(const std::vector<Value>& roots);
// Replace index symbols in every Load/IndexExpr index (simultaneous substitution), rebuilding.
Value substitute_indices(Value root, const sym::ExprMap& repl);
// Replace loads of one buffer: fn(old_load, rebuilt_mask) returns the replacement value.
Value replace_loads(Value root, const std::string& buffer,
                    const std::function<Value(Value, Value)>& fn);
// Distinct buffers loaded, in first-use order.
std::vector<std::string> loaded_buffers(Value root);
// Number of non-leaf ops (a measure of body size for realization decisions).
int count_ops(Value root);
// One line per node: "tmp3 = add(tmp1, tmp2) : f32"; loads print their buffer and index.
std::string body_to_text(const std::vector<Value>& roots);

}  // namespace coil::ir
