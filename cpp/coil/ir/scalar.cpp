#include "coil/ir/scalar.h"

#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
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
  for (const Value& a : n.args) h = hash_combine(h, std::hash<const void*>()(a.get()));
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
  return a.op == b.op && a.dtype == b.dtype && a.args == b.args &&
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

}  // namespace

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

Value constant(double v, DType dtype) {
  ScalarNode n = make_node(Op::Constant, dtype, {});
  if (graph::is_floating(dtype)) {
    n.fvalue = v;
  } else if (dtype == DType::Bool) {
    n.ivalue = v != 0.0;
  } else {
    n.ivalue = static_cast<int64_t>(v);
  }
  return intern(std::move(n));
}

Value int_constant(int64_t v, DType dtype) {
  if (graph::is_floating(dtype)) return constant(static_cast<double>(v), dtype);
  ScalarNode n = make_node(Op::Constant, dtype, {});
  n.ivalue = dtype == DType::Bool ? (v != 0) : v;
  return intern(std::move(n));
}

Value index_expr(const sym::Expr& e, DType dtype) {
  if (auto v = e.as_int()) return int_constant(*v, dtype);
  ScalarNode n = make_node(Op::IndexExpr, dtype, {});
  n.index = e;
  return intern(std::move(n));
}

Value load(const std::string& buffer, DType dtype, const sym::Expr& index, Value mask) {
  ScalarNode n = make_node(Op::Load, dtype, {});
  if (mask) {
    if (mask.dtype() != DType::Bool) throw std::logic_error("load: mask must be bool");
    n.args.push_back(mask);
  }
  n.buffer = buffer;
  n.index = index;
  return intern(std::move(n));
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

// Rebuilds the DAG bottom-up, letting `leaf` rewrite Load/IndexExpr nodes.
Value rebuild(Value root, const std::function<Value(Value, const std::vector<Value>&)>& leaf) {
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
    if (v.op() == Op::Load || v.op() == Op::IndexExpr) {
      out = leaf(v, args);
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

Value substitute_indices(Value root, const sym::ExprMap& repl) {
  return rebuild(root, [&](Value v, const std::vector<Value>& args) {
    ScalarNode n = *v;
    n.args = args;
    n.index = sym::substitute(v->index, repl);
    return intern(std::move(n));
  });
}

Value replace_loads(Value root, const std::string& buffer,
                    const std::function<Value(Value, Value)>& fn) {
  return rebuild(root, [&](Value v, const std::vector<Value>& args) {
    if (v.op() == Op::Load && v->buffer == buffer) return fn(v, args.empty() ? Value() : args[0]);
    if (args == v->args) return v;
    ScalarNode n = *v;
    n.args = args;
    return intern(std::move(n));
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
    if (v.op() != Op::Constant && v.op() != Op::IndexExpr && v.op() != Op::Load) ++n;
  }
  return n;
}

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
        out << "index(" << v->index.str() << ")";
        break;
      case Op::Load:
        out << "load(" << v->buffer << ", " << v->index.str();
        if (!v->args.empty()) out << ", mask=" << names.at(v->args[0].get());
        out << ")";
        break;
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
