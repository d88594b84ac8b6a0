#include "coil/ir/scalar.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace coil::ir {

namespace {

struct OpInfo {
  const char* name;
  int arity;
};

constexpr OpInfo kOpInfo[] = {
#define COIL_X(name, arity, text) {text, arity},
    COIL_SCALAR_OPS(COIL_X)
#undef COIL_X
};

size_t hash_combine(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

size_t structural_hash(const ScalarNode& n) {
  size_t h = static_cast<size_t>(n.op) * 131 + static_cast<size_t>(n.dtype);
  for (const Value& a : n.args) h = hash_combine(h, a->hash);
  h = hash_combine(h, n.masked ? 1 : 0);
  uint64_t bits;
  std::memcpy(&bits, &n.fvalue, sizeof(bits));
  h = hash_combine(h, bits);
  h = hash_combine(h, static_cast<size_t>(n.ivalue));
  h = hash_combine(h, std::hash<std::string>()(n.buffer));
  h = hash_combine(h, n.index.hash());
  return h;
}

bool same_fvalue(double a, double b) {
  // Bitwise: distinguishes -0.0 from 0.0 and lets NaN constants intern.
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

bool structurally_equal(const ScalarNode& a, const ScalarNode& b) {
  return a.op == b.op && a.dtype == b.dtype && a.args == b.args && a.masked == b.masked &&
         same_fvalue(a.fvalue, b.fvalue) && a.ivalue == b.ivalue && a.buffer == b.buffer &&
         a.index == b.index;
}

struct NodePtrHash {
  size_t operator()(const ScalarNode* n) const { return n->hash; }
};
struct NodePtrEq {
  bool operator()(const ScalarNode* a, const ScalarNode* b) const {
    return structurally_equal(*a, *b);
  }
};

// Interned nodes live for the process: Values are plain pointers into this table.
Value intern(ScalarNode&& n) {
  static std::mutex mu;
  static std::unordered_set<const ScalarNode*, NodePtrHash, NodePtrEq> table;
  n.hash = structural_hash(n);
  std::lock_guard<std::mutex> lock(mu);
  auto it = table.find(&n);
  if (it != table.end()) return Value(*it);
  const ScalarNode* owned = new ScalarNode(std::move(n));
  table.insert(owned);
  return Value(owned);
}

bool is_comparison(Op op) {
  switch (op) {
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
    case Op::LogicalNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::SignBit:
      return true;
    default:
      return false;
  }
}

ScalarNode make_node(Op op, DType dtype, std::vector<Value> args) {
  ScalarNode n;
  n.op = op;
  n.dtype = dtype;
  n.args = std::move(args);
  return n;
}

// ---- indirect symbols ----

struct IndirectKey {
  const ScalarNode* value;
  const void* size;
  bool wrap;
  bool operator<(const IndirectKey& o) const {
    return std::tie(value, size, wrap) < std::tie(o.value, o.size, o.wrap);
  }
};

struct IndirectRegistry {
  std::mutex mu;
  std::map<IndirectKey, sym::Expr> symbols;
  std::unordered_map<const void*, Indirect> bindings;  // symbol node -> binding
  std::unordered_set<std::string> names;
};

IndirectRegistry& indirect_registry() {
  static IndirectRegistry* r = new IndirectRegistry();
  return *r;
}

std::string hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = digits[v & 15];
  return s;
}

// Operands a node with an index gets from its indirect symbols.
void append_indirect_operands(std::vector<Value>& args, const sym::Expr& index) {
  for (const sym::Expr& s : indirect_symbols(index)) args.push_back(indirect_of(s)->value);
}

}  // namespace

sym::Expr indirect(Value value, const sym::Expr& size, bool wrap) {
  if (!value) throw std::logic_error("indirect: null value");
  if (graph::is_floating(value.dtype()) || value.dtype() == DType::Bool)
    throw std::logic_error(std::string("indirect: an index must be an integer, got ") +
                           graph::dtype_name(value.dtype()));
  value = cast(value, DType::Int64);
  IndirectRegistry& r = indirect_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  IndirectKey key{value.get(), size.node(), wrap};
  auto it = r.symbols.find(key);
  if (it != r.symbols.end()) return it->second;
  // The name comes from the structure of what it stands for, so it is the same in every process
  // (and with it the order of operands and everything printed from them).
  uint64_t h = hash_combine(hash_combine(value->hash, size.hash()), wrap ? 0x5bd1e995 : 0x27d4eb2f);
  std::string name = "ind" + hex(h);
  for (int k = 1; r.names.count(name); ++k) name = "ind" + hex(h) + "_" + std::to_string(k);
  r.names.insert(name);
  sym::Expr s = sym::Expr::symbol(name);
  r.symbols.emplace(key, s);
  r.bindings.emplace(s.node(), Indirect{value, size, wrap});
  return s;
}

const Indirect* indirect_of(const sym::Expr& symbol) {
  if (!symbol.is_symbol() || symbol.name().compare(0, 3, "ind") != 0) return nullptr;
  IndirectRegistry& r = indirect_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.bindings.find(symbol.node());
  return it == r.bindings.end() ? nullptr : &it->second;
}

std::vector<sym::Expr> indirect_symbols(const sym::Expr& e) {
  std::vector<sym::Expr> out;
  for (const sym::Expr& s : sym::free_symbols(e)) {
    if (indirect_of(s)) out.push_back(s);
  }
  return out;
}

bool has_indirect(const sym::Expr& e) {
  return !indirect_symbols(e).empty();
}

const char* op_name(Op op) {
  return kOpInfo[static_cast<int>(op)].name;
}
int op_arity(Op op) {
  return kOpInfo[static_cast<int>(op)].arity;
}

DType Value::dtype() const {
  return node_->dtype;
}
Op Value::op() const {
  return node_->op;
}

namespace {

// An integer constant's value as its dtype holds it: C++'s conversion, as eager converts a scalar
// operand (clamp(uint8, -10, 10) compares with 246). Kernels print the value as a literal, and a
// literal outside the dtype's range meant another number to Triton than to C++.
int64_t wrap_to(int64_t v, DType dtype) {
  switch (dtype) {
    case DType::UInt8:
      return static_cast<uint8_t>(v);
    case DType::Int8:
      return static_cast<int8_t>(v);
    case DType::Int16:
      return static_cast<int16_t>(v);
    case DType::UInt16:
      return static_cast<uint16_t>(v);
    case DType::Int32:
      return static_cast<int32_t>(v);
    case DType::UInt32:
      return static_cast<uint32_t>(v);
    default:
      return v;
  }
}

}  // namespace

Value constant(double v, DType dtype) {
  ScalarNode n = make_node(Op::Constant, dtype, {});
  if (graph::is_floating(dtype)) {
    n.fvalue = v;
  } else if (dtype == DType::Bool) {
    n.ivalue = v != 0.0;
  } else {
    n.ivalue = wrap_to(static_cast<int64_t>(v), dtype);
  }
  return intern(std::move(n));
}

Value int_constant(int64_t v, DType dtype) {
  if (graph::is_floating(dtype)) return constant(static_cast<double>(v), dtype);
  ScalarNode n = make_node(Op::Constant, dtype, {});
  n.ivalue = dtype == DType::Bool ? (v != 0) : wrap_to(v, dtype);
  return intern(std::move(n));
}

Value index_expr(const sym::Expr& e, DType dtype) {
  if (auto v = e.as_int()) return int_constant(*v, dtype);
  ScalarNode n = make_node(Op::IndexExpr, dtype, {});
  n.index = e;
  append_indirect_operands(n.args, e);
  return intern(std::move(n));
}

Value load(const std::string& buffer, DType dtype, const sym::Expr& index, Value mask) {
  ScalarNode n = make_node(Op::Load, dtype, {});
  if (mask) {
    if (mask.dtype() != DType::Bool) throw std::logic_error("load: mask must be bool");
    n.args.push_back(mask);
    n.masked = true;
  }
  n.buffer = buffer;
  n.index = index;
  append_indirect_operands(n.args, index);
  return intern(std::move(n));
}

Value guard(Value value, const sym::Expr& index) {
  std::vector<sym::Expr> syms = indirect_symbols(index);
  if (syms.empty()) return value;
  sym::Expr sum = 0;
  for (const sym::Expr& s : syms) sum = sum + s;
  ScalarNode n = make_node(Op::Guard, value.dtype(), {value});
  n.index = sum;
  append_indirect_operands(n.args, sum);
  return intern(std::move(n));
}

Value guard_missing(Value value, const std::vector<sym::Expr>& syms) {
  std::set<const void*> present;
  for (const Value& v : topo_order({value})) {
    if (v.op() != Op::Load && v.op() != Op::IndexExpr && v.op() != Op::Guard) continue;
    for (const sym::Expr& s : indirect_symbols(v->index)) present.insert(s.node());
  }
  sym::Expr missing = 0;
  for (const sym::Expr& s : syms) {
    if (!present.count(s.node())) missing = missing + s;
  }
  return guard(value, missing);
}

Value load_mask(Value v) {
  return v.op() == Op::Load && v->masked ? v->args[0] : Value();
}

std::vector<Value> indirect_operands(Value v) {
  size_t first = v->masked ? 1 : 0;
  if (v.op() == Op::Guard) first = 1;
  if (v.op() != Op::Load && v.op() != Op::IndexExpr && v.op() != Op::Guard) return {};
  return {v->args.begin() + static_cast<std::ptrdiff_t>(first), v->args.end()};
}

Value cast(Value v, DType to) {
  if (v.dtype() == to) return v;
  if (v.op() == Op::Constant) {
    if (graph::is_floating(v.dtype())) return constant(v->fvalue, to);
    return int_constant(v->ivalue, to);
  }
  ScalarNode n = make_node(Op::Cast, to, {v});
  return intern(std::move(n));
}

Value unary(Op op, Value a) {
  if (op_arity(op) != 1)
    throw std::logic_error(std::string("unary: not a unary op: ") + op_name(op));
  DType out = is_comparison(op) ? DType::Bool : a.dtype();
  ScalarNode n = make_node(op, out, {a});
  return intern(std::move(n));
}

Value binary(Op op, Value a, Value b) {
  if (op_arity(op) != 2)
    throw std::logic_error(std::string("binary: not a binary op: ") + op_name(op));
  if (a.dtype() != b.dtype()) {
    throw std::logic_error(std::string("binary ") + op_name(op) + ": operand dtypes differ (" +
                           graph::dtype_name(a.dtype()) + " vs " + graph::dtype_name(b.dtype()) +
                           "); the lowering must cast first");
  }
  DType out = is_comparison(op) ? DType::Bool : a.dtype();
  // Random numbers: (int64 seed, int64 element counter) -> float32.
  if (op == Op::Rand || op == Op::Randn) {
    if (a.dtype() != DType::Int64) throw std::logic_error("rand: seed and counter must be int64");
    out = DType::Float32;
  }
  ScalarNode n = make_node(op, out, {a, b});
  return intern(std::move(n));
}

Value where(Value cond, Value a, Value b) {
  if (cond.dtype() != DType::Bool) throw std::logic_error("where: condition must be bool");
  if (a.dtype() != b.dtype()) throw std::logic_error("where: branch dtypes differ");
  if (a == b) return a;
  ScalarNode n = make_node(Op::Where, a.dtype(), {cond, a, b});
  return intern(std::move(n));
}

bool is_constant(Value v) {
  return v.op() == Op::Constant;
}

bool is_float_constant(Value v, double x) {
  if (v.op() != Op::Constant) return false;
  return graph::is_floating(v.dtype()) ? v->fvalue == x : static_cast<double>(v->ivalue) == x;
}

std::vector<Value> topo_order(const std::vector<Value>& roots) {
  std::vector<Value> order;
  std::unordered_set<const ScalarNode*> done;
  // Explicit stack: (node, next operand to visit).
  std::vector<std::pair<Value, size_t>> stack;
  for (const Value& root : roots) {
    if (!root || done.count(root.get())) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < v->args.size()) {
        Value child = v->args[next++];
        if (!done.count(child.get())) stack.push_back({child, 0});
        continue;
      }
      if (done.insert(v.get()).second) order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

namespace {

bool has_index(Value v) {
  return v.op() == Op::Load || v.op() == Op::IndexExpr || v.op() == Op::Guard;
}

// Rebuilds the DAG bottom-up. A node with an index gets its rebuilt operands and its index with
// `repl` applied and its indirect symbols renamed after their rebuilt Values (one simultaneous
// substitution: symbols of the old index keep their old meaning); `leaf` may then replace a
// rebuilt Load or IndexExpr.
Value rebuild(Value root, const sym::ExprMap& repl, const std::function<Value(Value)>& leaf) {
  std::unordered_map<const ScalarNode*, Value> memo;
  for (const Value& v : topo_order({root})) {
    std::vector<Value> args;
    args.reserve(v->args.size());
    bool changed = false;
    for (const Value& a : v->args) {
      args.push_back(memo.at(a.get()));
      changed |= args.back() != a;
    }
    Value out;
    if (has_index(v)) {
      sym::ExprMap m = repl;
      std::vector<sym::Expr> syms = indirect_symbols(v->index);
      std::vector<Value> ops = indirect_operands(v);
      for (size_t i = 0; i < syms.size(); ++i) {
        Value now = memo.at(ops[i].get());
        if (now == ops[i]) continue;
        const Indirect* b = indirect_of(syms[i]);
        m[syms[i]] = indirect(now, b->size, b->wrap);
      }
      sym::Expr index = m.empty() ? v->index : sym::substitute(v->index, m);
      if (!changed && index == v->index) {
        out = v;
      } else if (v.op() == Op::Guard) {
        out = guard(args[0], index);
      } else {
        // The same node over the new index (an IndexExpr is not folded into a constant here).
        ScalarNode n = *v;
        n.args.clear();
        if (v->masked) n.args.push_back(args[0]);
        n.index = index;
        append_indirect_operands(n.args, index);
        out = intern(std::move(n));
      }
      if (v.op() != Op::Guard && leaf) out = leaf(out);
    } else if (!changed) {
      out = v;
    } else {
      ScalarNode n = *v;
      n.args = args;
      out = intern(std::move(n));
    }
    memo[v.get()] = out;
  }
  return memo.at(root.get());
}

}  // namespace

Value with_args(Value v, std::vector<Value> args) {
  if (args == v->args) return v;
  ScalarNode n = *v;
  n.args = std::move(args);
  return intern(std::move(n));
}

Value substitute_indices(Value root, const sym::ExprMap& repl) {
  return rebuild(root, repl, nullptr);
}

Value replace_loads(Value root, const std::string& buffer,
                    const std::function<Value(Value, Value)>& fn) {
  return rebuild(root, {}, [&](Value v) {
    if (v.op() == Op::Load && v->buffer == buffer) return fn(v, load_mask(v));
    return v;
  });
}

std::vector<std::string> loaded_buffers(Value root) {
  std::vector<std::string> out;
  for (const Value& v : topo_order({root})) {
    if (v.op() != Op::Load) continue;
    bool seen = false;
    for (const auto& b : out) seen |= b == v->buffer;
    if (!seen) out.push_back(v->buffer);
  }
  return out;
}

int count_ops(Value root) {
  int n = 0;
  for (const Value& v : topo_order({root})) {
    if (v.op() != Op::Constant && v.op() != Op::IndexExpr && v.op() != Op::Load &&
        v.op() != Op::Guard)
      ++n;
  }
  return n;
}

bool inexact_op(Op op, DType dtype) {
  if (!graph::is_floating(dtype)) return false;
  switch (op) {
    // Exact: leaves, conversions, IEEE's correctly rounded operations, comparisons, selection.
    case Op::Constant:
    case Op::IndexExpr:
    case Op::Load:
    case Op::Guard:
    case Op::Cast:
    case Op::Neg:
    case Op::Abs:
    case Op::Sqrt:
    case Op::Rsqrt:  // (1 / sqrt(x) on the CPU, scalar and vector: two correctly rounded ops)
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc:
    case Op::Reciprocal:
    case Op::Sign:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::FloorDiv:
    case Op::TruncDiv:
    case Op::Remainder:
    case Op::Fmod:
    case Op::Maximum:
    case Op::Minimum:
    case Op::CopySign:
    case Op::NextAfter:
    case Op::Ldexp:
    case Op::Where:
      return false;
    default:
      return true;
  }
}

bool computes_inexactly(Value root) {
  for (const Value& v : topo_order({root})) {
    if (inexact_op(v.op(), v.dtype())) return true;
  }
  return false;
}

namespace {

// An index with its indirect symbols shown as the temporaries that hold their values, followed by
// the checks they get: "4*tmp1 + v1, check 0 <= tmp1 < 10".
std::string index_text(const sym::Expr& index,
                       const std::unordered_map<const ScalarNode*, std::string>& names) {
  sym::ExprMap shown;
  std::string checks;
  std::map<std::string, int> uses;  // one value may index two dims: x[i, i]
  for (const sym::Expr& s : indirect_symbols(index)) {
    const Indirect* b = indirect_of(s);
    std::string name = names.at(b->value.get());
    if (uses[name]++) name += "_" + std::to_string(uses[name]);
    shown[s] = sym::Expr::symbol(name);
    std::string lo = b->wrap ? (-b->size).str() : "0";
    checks += ", check " + lo + " <= " + name + " < " + b->size.str();
  }
  return (shown.empty() ? index : sym::substitute(index, shown)).str() + checks;
}

}  // namespace

std::string body_to_text(const std::vector<Value>& roots) {
  std::unordered_map<const ScalarNode*, std::string> names;
  std::ostringstream out;
  int counter = 0;
  for (const Value& v : topo_order(roots)) {
    std::string name = "tmp" + std::to_string(counter++);
    names[v.get()] = name;
    out << name << " = ";
    switch (v.op()) {
      case Op::Constant:
        if (graph::is_floating(v.dtype())) {
          std::ostringstream num;
          num.precision(17);
          num << v->fvalue;
          out << "constant(" << num.str() << ")";
        } else {
          out << "constant(" << v->ivalue << ")";
        }
        break;
      case Op::IndexExpr:
        out << "index(" << index_text(v->index, names) << ")";
        break;
      case Op::Load:
        out << "load(" << v->buffer << ", " << index_text(v->index, names);
        if (v->masked) out << ", mask=" << names.at(v->args[0].get());
        out << ")";
        break;
      case Op::Guard: {
        std::string checks = index_text(v->index, names);
        out << "guard(" << names.at(v->args[0].get()) << checks.substr(checks.find(',')) << ")";
        break;
      }
      default: {
        out << op_name(v.op()) << "(";
        for (size_t i = 0; i < v->args.size(); ++i) {
          if (i) out << ", ";
          out << names.at(v->args[i].get());
        }
        out << ")";
      }
    }
    out << " : " << graph::dtype_tag(v.dtype()) << "\n";
  }
  return out.str();
}

}  // namespace coil::ir
