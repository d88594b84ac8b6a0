// Scatters whose targets a loop partitions (cpp_emitter.h: scatter_owner).
//
// A scatter that combines values (add, multiply, max, min) may not update one element from two
// threads at once: coil made float adds `omp atomic` (a compare-and-swap loop per element) and ran
// the other modes on one thread. But a scatter along dim d writes, for a source element at
// (i0, ..., id, ...), the target (i0, ..., index, ...): every dim but d is the source's own, and
// an index_put along dim 0 keeps the trailing dims. When a loop runs over such a dim, the targets
// of two of its points never meet, so each thread may own its points and update without
// atomics, in the order one thread would (eager's CPU scatter kernels split the work the same
// way). The owning loop is the outermost such loop; nested in others, it opens a parallel region
// per point of the loops outside it. Perf fuzzer, 2 threads: scatter_add over dim 1 of a
// [64, 128, 256] float32 source (seed 6046) 1.7x Inductor's time with atomics; a bf16
// index_put(accumulate) along dim 0 (seed 6056), serial, 2.0x.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"

namespace coil::codegen::cpp {

namespace {

// Fewer points than this in the owning loop leave a thread idle: keep the atomics.
constexpr int64_t kMinOwnedPoints = 8;
// A loop nested in others opens a parallel region per point of the loops outside it: each must
// cover this many updates.
constexpr int64_t kMinOwnedRegionWork = 4096;

}  // namespace

std::optional<size_t> Emitter::scatter_owner() const {
  if (!owned_scatter_) owned_scatter_ = find_scatter_owner();
  return *owned_scatter_;
}

// The target T = offset + sum of c_k * s_k over loop variables and indirect symbols, each with
// its range. Sorted by coefficient, if every term's coefficient exceeds everything the terms
// below it can add, T determines each term's value (a mixed-radix number): two points of a loop
// with a term of its own never share a target. The terms in that order, or nullopt.
std::optional<std::vector<ScatterTerm>> Emitter::scatter_terms() const {
  const ir::Buffer* b = scatter();
  if (!b || k_.xsizes.empty() || k_.column_block > 0 || k_.tile > 0 || k_.has_reduction())
    return std::nullopt;
  const sched::Member* member = nullptr;
  for (const sched::Member& m : k_.members) {
    if (&prog_.buffers[m.buffer] == b) member = &m;
  }
  if (!member || b->target.op() != Op::IndexExpr) return std::nullopt;
  Expr target = sym::substitute(b->target->index, member_map(*member));
  sym::RangeEnv env = env_;
  std::vector<ScatterTerm> terms;
  for (size_t i = 0; i < k_.xsizes.size(); ++i) {
    auto n = k_.xsizes[i].as_int();
    if (!n || *n < 1) return std::nullopt;
    Expr x = Expr::symbol("x" + std::to_string(i));
    env.add_index_var(x, k_.xsizes[i]);
    terms.push_back({x, 0, *n - 1});
  }
  for (const Expr& s : ir::indirect_symbols(target)) {
    const ir::Indirect* ind = ir::indirect_of(s);
    auto size = ind ? ind->size.as_int() : std::nullopt;
    if (!size || *size < 1) return std::nullopt;
    env.set_range(s, sym::Range{0, *size - 1});
    terms.push_back({s, 0, *size - 1});
  }
  // Each symbol's coefficient, and T rebuilt from them: T must be exactly that affine form.
  sym::ExprMap zero;
  for (const ScatterTerm& t : terms) zero[t.symbol] = Expr(0);
  Expr rebuilt = sym::simplify(sym::substitute(target, zero), env);
  for (ScatterTerm& t : terms) {
    Expr c = sym::simplify(sym::substitute(target, {{t.symbol, t.symbol + 1}}) - target, env);
    auto ci = c.as_int();
    if (!ci || *ci < 0) return std::nullopt;
    t.coefficient = *ci;
    rebuilt = rebuilt + c * t.symbol;
  }
  if (!(sym::simplify(target - rebuilt, env) == Expr(0))) return std::nullopt;
  std::vector<ScatterTerm> sorted;
  for (const ScatterTerm& t : terms) {
    if (t.coefficient > 0 && t.span > 0) sorted.push_back(t);
  }
  std::sort(sorted.begin(), sorted.end(), [](const ScatterTerm& a, const ScatterTerm& b) {
    return a.coefficient < b.coefficient;
  });
  int64_t below = 0;  // the most the terms below can add
  for (const ScatterTerm& t : sorted) {
    if (t.coefficient <= below) return std::nullopt;
    below += t.coefficient * t.span;
  }
  return sorted;
}

bool Emitter::scatter_lanes_distinct() const {
  const ir::Buffer* b = scatter();
  if (!b || (b->scatter_mode != ir::ScatterMode::Store && !scatter_owner())) return false;
  auto terms = scatter_terms();
  if (!terms) return false;
  Expr inner = Expr::symbol("x" + std::to_string(k_.xsizes.size() - 1));
  for (const ScatterTerm& t : *terms) {
    if (t.symbol == inner) return t.coefficient == 1;
  }
  return false;
}

std::optional<size_t> Emitter::find_scatter_owner() const {
  const ir::Buffer* b = scatter();
  if (!b || b->scatter_mode == ir::ScatterMode::Store) return std::nullopt;
  auto found = scatter_terms();
  if (!found) return std::nullopt;
  const std::vector<ScatterTerm>& sorted = *found;
  std::vector<int64_t> sizes;
  for (const Expr& e : k_.xsizes) sizes.push_back(*e.as_int());
  // The outermost loop with a term of its own, enough points, and enough work per region.
  int64_t outside = 1, inside = 1;
  for (int64_t n : sizes) inside *= n;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Expr x = Expr::symbol("x" + std::to_string(i));
    bool own = false;
    for (const ScatterTerm& t : sorted) own = own || (t.symbol == x && t.coefficient > 0);
    if (own && sizes[i] >= kMinOwnedPoints && (i == 0 || inside >= kMinOwnedRegionWork)) return i;
    outside *= sizes[i];
    inside /= sizes[i];
    if (outside > inside) break;  // (more regions than work in each)
  }
  return std::nullopt;
}

void Emitter::vector_scatter_store(const ir::Buffer& b, const sched::Member& m,
                                   const std::string& val) {
  if (b.scatter_mode != ir::ScatterMode::Store && b.scatter_mode != ir::ScatterMode::Add) {
    throw NoVectorForm{std::string("a scatter ") + ir::scatter_mode_name(b.scatter_mode)};
  }
  Value target = ir::substitute_indices(b.target, m.var_map);
  if (target.op() != Op::IndexExpr) throw NoVectorForm{"a scatter's target is not an index"};
  for (const Value& a : ir::indirect_operands(target)) {
    if (is_vector(value(a))) throw NoVectorForm{"a scatter's index varies"};
  }
  // The first lane's target (each indirect index checked once, the same for every lane).
  Expr pos = checked_index(target);
  auto step = lane_step(pos);
  if (!step || step->as_int() != 1) throw NoVectorForm{"a scatter's lanes are not contiguous"};
  if (b.scatter_mode == ir::ScatterMode::Store) {
    vector_store(b, pos, val);
    return;
  }
  // An owned add: this thread alone updates these elements (in opmath, rounded once on store).
  DType d = b.layout.dtype;
  lane_type(d);
  std::string sum = "(" + lanes_read(b.name, pos, d) + " + " + vec_operand(val, d) + ")";
  std::string name = "tmp" + std::to_string(next_tmp_++);
  line("auto " + name + " = " + sum + ";");
  vec_names_.insert(name);
  vector_store(b, pos, name);
}

}  // namespace coil::codegen::cpp
