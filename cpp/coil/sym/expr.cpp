// Nodes, interning and the structural order of sym::Expr: the Expr handle, kind_name, and the
// integer helpers with Python semantics. Canonicalizing construction lives in expr_sum.cpp (sums,
// products, exact_div) and expr_div.cpp (FloorDiv, Mod, Min, Max, comparisons, with_operands),
// which build nodes through make_node (expr_build.h).
//
// Tests: tests/cpp/sym/expr_test.cpp.
#include "coil/sym/expr.h"

#include <iterator>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "coil/sym/expr_build.h"

namespace coil::sym {

struct Node {
  Kind kind = Kind::Int;
  int64_t int_value = 0;
  std::string name;
  std::vector<Expr> operands;
  size_t hash = 0;
};

Expr intern(Node&& n);

namespace {

// ---------------------------------------------------------------------------------------------
// Interning.

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// Structural (operands contribute their hashes, not addresses) so that hash order, and anything
// that leaks it, is the same in every run.
size_t structural_hash(const Node& n) {
  size_t h = std::hash<int>()(static_cast<int>(n.kind));
  h = hash_combine(h, std::hash<int64_t>()(n.int_value));
  if (!n.name.empty()) h = hash_combine(h, std::hash<std::string>()(n.name));
  for (const Expr& op : n.operands) h = hash_combine(h, op.hash());
  return h;
}

struct NodePtrHash {
  size_t operator()(const Node* n) const { return n->hash; }
};

// Operands are already interned, so comparing them is comparing pointers.
struct NodePtrEq {
  bool operator()(const Node* a, const Node* b) const {
    return a->kind == b->kind && a->int_value == b->int_value && a->name == b->name &&
           a->operands == b->operands;
  }
};

struct InternTable {
  std::mutex mu;
  std::unordered_set<const Node*, NodePtrHash, NodePtrEq> nodes;
};

// Never destroyed: nodes live for the process, and Exprs held in other static objects must stay
// valid during exit.
InternTable& intern_table() {
  static InternTable* table = new InternTable;
  return *table;
}

constexpr int64_t kSmallIntLo = -128;
constexpr int64_t kSmallIntHi = 1024;

// Small integers are built on every arithmetic step; caching them skips the table lock.
const std::vector<const Node*>& small_ints() {
  static const std::vector<const Node*> cache = [] {
    std::vector<const Node*> v;
    for (int64_t i = kSmallIntLo; i <= kSmallIntHi; ++i) {
      v.push_back(intern(Node{Kind::Int, i, {}, {}, 0}).node());
    }
    return v;
  }();
  return cache;
}

int compare_exprs(const Expr& a, const Expr& b) {
  if (a == b) return 0;
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  if (a.int_value() != b.int_value()) return a.int_value() < b.int_value() ? -1 : 1;
  if (int c = a.name().compare(b.name()); c != 0) return c < 0 ? -1 : 1;
  const std::vector<Expr>& x = a.operands();
  const std::vector<Expr>& y = b.operands();
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (int c = compare_exprs(x[i], y[i]); c != 0) return c;
  }
  if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
  return 0;
}

}  // namespace

Expr make_node(Kind kind, int64_t value, std::vector<Expr> operands) {
  return intern(Node{kind, value, {}, std::move(operands), 0});
}

// ---------------------------------------------------------------------------------------------
// Interning and the Expr handle.

Expr intern(Node&& n) {
  n.hash = structural_hash(n);
  InternTable& table = intern_table();
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = table.nodes.find(&n);
  if (it != table.nodes.end()) return Expr(*it);
  const Node* stored = new Node(std::move(n));
  table.nodes.insert(stored);
  return Expr(stored);
}

const char* kind_name(Kind k) {
  static constexpr const char* kNames[] = {"Int", "Symbol", "Add", "Mul", "FloorDiv", "Mod",
                                           "Min", "Max",    "Lt",  "Le",  "Eq",       "Ne"};
  auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "?";
}

Expr::Expr() : Expr(int64_t{0}) {}

Expr::Expr(int64_t value) {
  if (value >= kSmallIntLo && value <= kSmallIntHi) {
    node_ = small_ints()[static_cast<size_t>(value - kSmallIntLo)];
    return;
  }
  node_ = intern(Node{Kind::Int, value, {}, {}, 0}).node_;
}

Expr Expr::symbol(const std::string& name) {
  if (name.empty()) throw std::invalid_argument("coil::sym::Expr::symbol: empty symbol name");
  return intern(Node{Kind::Symbol, 0, name, {}, 0});
}

Kind Expr::kind() const {
  return node_->kind;
}
int64_t Expr::int_value() const {
  return node_->int_value;
}
std::optional<int64_t> Expr::as_int() const {
  if (is_int()) return node_->int_value;
  return std::nullopt;
}
const std::string& Expr::name() const {
  return node_->name;
}
const std::vector<Expr>& Expr::operands() const {
  return node_->operands;
}
size_t Expr::hash() const {
  return node_->hash;
}
bool Expr::operator<(const Expr& o) const {
  return compare_exprs(*this, o) < 0;
}

// ---------------------------------------------------------------------------------------------
// Integer helpers.

int64_t floordiv_int(int64_t a, int64_t b) {
  if (b == 0)
    throw std::domain_error("coil::sym: division by zero: " + std::to_string(a) + " // 0");
  if (a == INT64_MIN && b == -1)
    throw std::overflow_error("coil::sym: int64 overflow in MIN // -1");
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t mod_int(int64_t a, int64_t b) {
  if (b == 0) throw std::domain_error("coil::sym: modulo by zero: " + std::to_string(a) + " % 0");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace coil::sym
