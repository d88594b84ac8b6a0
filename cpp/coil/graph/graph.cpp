#include "coil/graph/graph.h"

#include <functional>
#include <unordered_map>

namespace coil::graph {

namespace {

// Calls f(id) for every node reference in the node's args and kwargs, in argument order.
// Lists are walked with an explicit worklist.
void for_each_ref(const Node& n, const std::function<void(int)>& f) {
  std::vector<const Arg*> stack;
  for (auto it = n.kwargs.rbegin(); it != n.kwargs.rend(); ++it) stack.push_back(&it->second);
  for (auto it = n.args.rbegin(); it != n.args.rend(); ++it) stack.push_back(&*it);
  while (!stack.empty()) {
    const Arg* a = stack.back();
    stack.pop_back();
    if (a->kind == Arg::Kind::Node) f(a->node);
    if (a->kind != Arg::Kind::List) continue;
    for (auto it = a->list.rbegin(); it != a->list.rend(); ++it) stack.push_back(&*it);
  }
}

std::string label(const Node& n) {
  return "node '" + n.name + "' (#" + std::to_string(n.id) + ")";
}

bool valid_scalar_type(const std::string& t) {
  return t.empty() || t == "int" || t == "float" || t == "symint";
}

// The number a call may produce: unbacked SymInt/SymFloat/SymBool values (data-dependent).
bool valid_call_scalar_type(const std::string& t) {
  return t.empty() || t == "int" || t == "float" || t == "bool";
}

void check_meta(const Node& n) {
  for (size_t k = 0; k < n.meta.size(); ++k) {
    const TensorMeta& m = n.meta[k];
    std::string where = label(n) + " output " + std::to_string(k);
    if (m.strides.size() != m.sizes.size()) {
      throw GraphError(where + " has " + std::to_string(m.sizes.size()) + " sizes but " +
                       std::to_string(m.strides.size()) + " strides; expected one stride per size");
    }
    if (m.device.empty()) throw GraphError(where + " has an empty device");
  }
}

void check_placeholder(const Node& n, bool after_call) {
  if (after_call) {
    throw GraphError("placeholder " + label(n) + " comes after a call node; placeholders must " +
                     "come first");
  }
  if (!n.target.empty()) throw GraphError("placeholder " + label(n) + " has a target");
  if (!n.args.empty() || !n.kwargs.empty()) {
    throw GraphError("placeholder " + label(n) + " has arguments");
  }
  if (!valid_scalar_type(n.scalar_type)) {
    throw GraphError("placeholder " + label(n) + " has unknown scalar_type '" + n.scalar_type +
                     "'; expected \"\", \"int\", \"float\" or \"symint\"");
  }
  if (!n.scalar_type.empty() && !n.meta.empty()) {
    throw GraphError("placeholder " + label(n) + " is a scalar (" + n.scalar_type +
                     ") but has tensor metadata");
  }
}

void check_call(const Node& n) {
  if (n.target.empty()) throw GraphError("call " + label(n) + " has an empty target");
  if (!valid_call_scalar_type(n.scalar_type)) {
    throw GraphError("call " + label(n) + " has unknown scalar_type '" + n.scalar_type +
                     "'; expected \"\", \"int\", \"float\" or \"bool\"");
  }
  if (!n.scalar_type.empty() && !n.meta.empty()) {
    throw GraphError("call " + label(n) + " produces a number (" + n.scalar_type +
                     ") but has tensor metadata");
  }
  if (n.target == "with_effects") {
    bool ok = n.args.size() >= 2 && n.args[0].is_node() && n.args[1].kind == Arg::Kind::Str &&
              !n.args[1].s.empty() && !n.meta.empty();
    if (!ok) {
      throw GraphError("with_effects " + label(n) +
                       " must have a token node and an op name as its first two arguments, and "
                       "produce at least the new token");
    }
    return;
  }
  if (n.target != "getitem") return;
  bool ok = n.args.size() == 2 && n.kwargs.empty() && n.args[0].is_node() &&
            n.args[1].kind == Arg::Kind::Int && n.args[1].i >= 0;
  if (!ok) {
    throw GraphError("getitem " + label(n) +
                     " must have exactly two arguments: a node and a non-negative int index");
  }
}

void check_output(const Node& n, size_t num_nodes) {
  if (size_t(n.id) + 1 != num_nodes) {
    throw GraphError("output " + label(n) + " is not the last node; the output node must be last");
  }
  if (!n.target.empty() || !n.kwargs.empty() || !n.meta.empty() || !n.scalar_type.empty()) {
    throw GraphError("output " + label(n) + " may only have args (the returned values)");
  }
}

void check_refs(const Node& n, const std::vector<Node>& nodes) {
  for_each_ref(n, [&](int r) {
    if (r >= 0 && r < n.id) return;
    std::string what = "node #" + std::to_string(r);
    if (r >= 0 && size_t(r) < nodes.size()) what = label(nodes[size_t(r)]);
    throw GraphError(label(n) + " refers to " + what +
                     ", which is not an earlier node; nodes may only use nodes before them");
  });
}

}  // namespace

int Graph::add_placeholder(std::string name, std::vector<TensorMeta> meta, std::string scalar_type,
                           std::optional<sym::Expr> symint_value) {
  if (output()) {
    throw GraphError("cannot add placeholder '" + name + "' after the output node");
  }
  Node n;
  n.id = int(nodes_.size());
  n.name = std::move(name);
  n.kind = NodeKind::Placeholder;
  n.meta = std::move(meta);
  n.scalar_type = std::move(scalar_type);
  n.symint_value = std::move(symint_value);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

void Graph::add_symbol(SizeSymbol s) {
  if (s.name.empty()) throw GraphError("a size symbol has an empty name");
  if (symbol(s.name)) throw GraphError("size symbol '" + s.name + "' is declared twice");
  if (s.range.lo > s.range.hi) {
    throw GraphError("size symbol '" + s.name + "' has an empty range [" +
                     std::to_string(s.range.lo) + ", " + std::to_string(s.range.hi) + "]");
  }
  if (s.hint < s.range.lo || s.hint > s.range.hi) {
    throw GraphError("size symbol '" + s.name + "' has hint " + std::to_string(s.hint) +
                     " outside its range");
  }
  symbols_.push_back(std::move(s));
}

const SizeSymbol* Graph::symbol(const std::string& name) const {
  for (const SizeSymbol& s : symbols_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

sym::RangeEnv Graph::symbol_env() const {
  sym::RangeEnv env;
  for (const SizeSymbol& s : symbols_) {
    sym::Expr e = sym::Expr::symbol(s.name);
    env.set_range(e, s.range);
    env.set_hint(e, s.hint);
  }
  return env;
}

void Graph::set_c_args(int id, std::vector<CArg> c_args) {
  if (id < 0 || id >= int(nodes_.size()) || nodes_[id].kind != NodeKind::Call)
    throw GraphError("set_c_args: node #" + std::to_string(id) + " is not a call");
  nodes_[id].c_args = std::move(c_args);
}

void Graph::set_donated(int id) {
  if (id < 0 || id >= int(nodes_.size()) || nodes_[id].kind != NodeKind::Placeholder ||
      nodes_[id].meta.empty())
    throw GraphError("set_donated: node #" + std::to_string(id) + " is not a tensor placeholder");
  nodes_[id].donated = true;
}

int Graph::add_call(std::string name, std::string target, std::vector<Arg> args,
                    std::vector<std::pair<std::string, Arg>> kwargs, std::vector<TensorMeta> meta,
                    std::string stack_trace, std::string scalar_type) {
  if (output()) throw GraphError("cannot add node '" + name + "' after the output node");
  Node n;
  n.id = int(nodes_.size());
  n.name = std::move(name);
  n.kind = NodeKind::Call;
  n.target = std::move(target);
  n.args = std::move(args);
  n.kwargs = std::move(kwargs);
  n.meta = std::move(meta);
  n.stack_trace = std::move(stack_trace);
  n.scalar_type = std::move(scalar_type);
  check_refs(n, nodes_);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

int Graph::set_output(std::vector<Arg> outputs) {
  if (output()) throw GraphError("the graph already has an output node");
  Node n;
  n.id = int(nodes_.size());
  n.name = "output";
  n.kind = NodeKind::Output;
  n.args = std::move(outputs);
  check_refs(n, nodes_);
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

const Node& Graph::node(int id) const {
  if (id < 0 || size_t(id) >= nodes_.size()) {
    throw GraphError("node id " + std::to_string(id) + " is out of range; the graph has " +
                     std::to_string(nodes_.size()) + " nodes");
  }
  return nodes_[size_t(id)];
}

std::vector<int> Graph::placeholders() const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    if (n.kind == NodeKind::Placeholder) ids.push_back(n.id);
  }
  return ids;
}

const Node* Graph::output() const {
  if (nodes_.empty() || nodes_.back().kind != NodeKind::Output) return nullptr;
  return &nodes_.back();
}

std::vector<int> Graph::users(int id) const {
  std::vector<int> ids;
  for (const Node& n : nodes_) {
    bool uses = false;
    for_each_ref(n, [&](int r) { uses = uses || r == id; });
    if (uses) ids.push_back(n.id);
  }
  return ids;
}

void Graph::validate() const {
  if (nodes_.empty()) throw GraphError("the graph is empty; it needs at least an output node");
  std::unordered_map<std::string, int> names;
  bool after_call = false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.id != int(i)) {
      throw GraphError(label(n) + " is at position " + std::to_string(i) +
                       "; a node's id must be its position");
    }
    if (n.name.empty()) throw GraphError("node #" + std::to_string(i) + " has an empty name");
    auto [it, fresh] = names.emplace(n.name, n.id);
    if (!fresh) {
      throw GraphError("duplicate node name '" + n.name + "': used by nodes #" +
                       std::to_string(it->second) + " and #" + std::to_string(i));
    }
    switch (n.kind) {
      case NodeKind::Placeholder:
        check_placeholder(n, after_call);
        break;
      case NodeKind::Call:
        after_call = true;
        check_call(n);
        break;
      case NodeKind::Output:
        check_output(n, nodes_.size());
        break;
    }
    if (n.kind != NodeKind::Call && !n.stack_trace.empty()) {
      throw GraphError(label(n) + " has a stack trace; only call nodes carry one");
    }
    check_refs(n, nodes_);
    check_meta(n);
  }
  if (!output()) {
    throw GraphError("the graph has no output node; the last node ('" + nodes_.back().name +
                     "') must be the output");
  }
}

}  // namespace coil::graph
