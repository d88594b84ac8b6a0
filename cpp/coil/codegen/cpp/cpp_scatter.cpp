// Scatters whose targets the outermost loop partitions (cpp_emitter.h: scatter_owned_by_x0).
//
// A scatter that combines values (add, multiply, max, min) may not update one element from two
// threads at once: coil made float adds `omp atomic` (a compare-and-swap loop per element) and ran
// the other modes on one thread. But a scatter along dim d writes, for a source element at
// (i0, ..., id, ...), the target (i0, ..., index, ...): every dim but d is the source's own. When
// the outermost loop runs over such a dim, the targets of two of its points never meet, so each
// thread may own its points and update without atomics, in the order one thread would: eager's
// CPU scatter kernels split the work the same way. scatter_add over dim 1 of a [64, 128, 256]
// float32 source (perf fuzzer seed 6046): 1.7x Inductor's time with atomics.
//
// The test, on the target index T (an affine expression of the loop variables and of indirect
// symbols, each in [0, size)): T = c * x0 + rest, with c a positive constant, rest free of x0,
// and the bounds of rest spanning fewer than c positions; then the targets of x0 = i lie in
// [lo + c i, lo + c i + c), disjoint for distinct i.
#include <optional>
#include <string>

#include "coil/codegen/cpp/cpp_emitter.h"

namespace coil::codegen::cpp {

namespace {

// Fewer points than this in x0 leave a thread idle: keep the atomics.
constexpr int64_t kMinOwnedPoints = 8;

}  // namespace

bool Emitter::scatter_owned_by_x0() const {
  if (!owned_scatter_) owned_scatter_ = find_scatter_owned_by_x0();
  return *owned_scatter_;
}

bool Emitter::find_scatter_owned_by_x0() const {
  const ir::Buffer* b = scatter();
  if (!b || b->scatter_mode == ir::ScatterMode::Store || k_.xsizes.empty()) return false;
  if (k_.column_block > 0 || k_.tile > 0 || k_.has_reduction()) return false;
  auto n0 = k_.xsizes[0].as_int();
  if (!n0 || *n0 < kMinOwnedPoints) return false;
  const sched::Member* member = nullptr;
  for (const sched::Member& m : k_.members) {
    if (&prog_.buffers[m.buffer] == b) member = &m;
  }
  if (!member || b->target.op() != Op::IndexExpr) return false;
  Expr target = sym::substitute(b->target->index, member_map(*member));
  // Every indirect symbol ranges over its dimension's positions; the loop variables over theirs.
  sym::RangeEnv env = env_;
  for (size_t i = 0; i < k_.xsizes.size(); ++i)
    env.add_index_var(Expr::symbol("x" + std::to_string(i)), k_.xsizes[i]);
  for (const Expr& s : ir::indirect_symbols(target)) {
    const ir::Indirect* ind = ir::indirect_of(s);
    auto size = ind ? ind->size.as_int() : std::nullopt;
    if (!size || *size < 1) return false;
    env.set_range(s, sym::Range{0, *size - 1});
  }
  Expr x0 = Expr::symbol("x0");
  Expr c = sym::simplify(sym::substitute(target, {{x0, x0 + 1}}) - target, env);
  auto step = c.as_int();
  if (!step || *step <= 0) return false;
  Expr rest = sym::simplify(target - c * x0, env);
  for (const Expr& s : sym::free_symbols(rest)) {
    if (s == x0) return false;
  }
  sym::Range r = sym::bounds(rest, env);
  if (r.lo == sym::Range::kNegInf || r.hi == sym::Range::kPosInf) return false;
  return r.hi - r.lo < *step;
}

}  // namespace coil::codegen::cpp
