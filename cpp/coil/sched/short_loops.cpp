// Short innermost loops of CPU pointwise kernels (plan_short_loops in schedule.h).
//
// A CPU kernel's vector loop is its innermost one. Where that loop has fewer points than a vector
// has lanes (the channels of a channels-last image, a softmax over 3 classes unrolled into a
// pointwise body), it stayed scalar, and every element paid the loop's overhead and its scalar
// conversions and functions: a channels-last copy of a bf16 512x3x786x3 image took 9x Inductor's
// time, a log_softmax over a last dim of 3 5x (perf fuzzer seeds 5032, 5017; 2-core CPU). This
// pass gives such kernels a long vector loop instead:
//
//   1. Adjacent loops that every index of the kernel sees as one (the outer one's coefficient is
//      the inner one's times the inner size, in every load, store and index value) are merged
//      into one loop: [512, 786, 3, 3] with h and w contiguous in both the input and the output
//      becomes [512, 2358, 3]. A short innermost loop may merge away entirely this way.
//   2. Trailing loops still shorter than a vector, up to kMaxUnrolledPoints points together, are
//      unrolled (Kernel::unrolled): the codegen renders the body once per point inside the loop
//      before them, which becomes the vector loop. Values that do not depend on the unrolled
//      loops (a softmax's max and sum over the 3 elements of its row) are computed once per
//      vector of rows rather than once per element.
//
// Short loops further out with a smaller store stride than the vector loop's join the unrolled
// ones (order_loops puts a transposed read's contiguous loop next to the innermost, outside such
// loops), so that the copies write whole runs of the output. Reductions, scatters and tiled
// kernels are left alone. CPU only: Triton kernels have no vector loop of their own.
//
// Tests: tests/cpp/sched/short_loops_test.cpp; tests/python/test_cpu_short_loops.py.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

// At most this many points of unrolled loops (copies of the body in the vector loop).
constexpr int64_t kMaxUnrolledPoints = 16;

bool short_loop(const Expr& size) {
  auto n = size.as_int();
  return n && *n < kCpuMinVectorTrip;
}

// Every index expression of kernel k over its x variables: loads, index values and guards of each
// member's body, and each member's store.
std::vector<Expr> kernel_indices(const ir::Program& prog, const Kernel& k) {
  std::vector<Expr> out;
  for (const Member& m : k.members) {
    const ir::Buffer& b = prog.buffers[m.buffer];
    for (const ir::Value& v : ir::topo_order({ir::substitute_indices(b.body, m.var_map)})) {
      if (v.op() == ir::Op::Load || v.op() == ir::Op::IndexExpr || v.op() == ir::Op::Guard) {
        out.push_back(v->index);
      }
    }
    out.push_back(sym::substitute(b.write_index(), m.var_map));
  }
  return out;
}

// Whether loops i and i + 1 of k are one loop to every index: each is affine in them with the
// outer coefficient equal to the inner one times the inner size.
bool mergeable(const Kernel& k, const std::vector<Expr>& indices, size_t i) {
  if (k.xsizes[i] == Expr(1) || k.xsizes[i + 1] == Expr(1)) return true;
  std::vector<Expr> vars{xvar(static_cast<int>(i)), xvar(static_cast<int>(i + 1))};
  for (const Expr& idx : indices) {
    auto aff = sym::as_affine(idx, vars);
    if (!aff || aff->coeffs[0] != k.xsizes[i + 1] * aff->coeffs[1]) return false;
  }
  return true;
}

// Merges loops i and i + 1 of k into loop i; later loops move down by one.
void merge(Kernel& k, size_t i) {
  Expr outer = xvar(static_cast<int>(i)), inner = xvar(static_cast<int>(i + 1));
  Expr n = k.xsizes[i + 1];
  sym::ExprMap rename;
  if (n == Expr(1)) {
    rename = {{inner, 0}};
  } else if (k.xsizes[i] == Expr(1)) {
    rename = {{outer, 0}, {inner, outer}};
  } else {
    rename = {{outer, sym::floordiv(outer, n)}, {inner, sym::mod(outer, n)}};
  }
  for (size_t j = i + 2; j < k.xsizes.size(); ++j)
    rename[xvar(static_cast<int>(j))] = xvar(static_cast<int>(j - 1));
  for (Member& m : k.members) {
    for (auto& [key, v] : m.var_map) v = sym::substitute(v, rename);
  }
  k.xsizes[i] = k.xsizes[i] * n;
  k.xsizes.erase(k.xsizes.begin() + static_cast<std::ptrdiff_t>(i) + 1);
}

// |coefficient| of each x variable in the first member's store (the one order_loops sorted by);
// -1 where it is not a number.
std::vector<int64_t> store_strides(const ir::Program& prog, const Kernel& k) {
  std::vector<Expr> xs;
  for (size_t i = 0; i < k.xsizes.size(); ++i) xs.push_back(xvar(static_cast<int>(i)));
  std::vector<int64_t> out(xs.size(), -1);
  const Member& m = k.members.front();
  auto aff = sym::as_affine(sym::substitute(prog.buffers[m.buffer].write_index(), m.var_map), xs);
  if (!aff) return out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (auto c = aff->coeffs[i].as_int()) out[i] = *c < 0 ? -*c : *c;
  }
  return out;
}

// Renames k's loops so that loop order[p] becomes loop p.
void reorder(Kernel& k, const std::vector<size_t>& order) {
  sym::ExprMap rename;
  std::vector<Expr> sizes;
  for (size_t p = 0; p < order.size(); ++p) {
    rename[xvar(static_cast<int>(order[p]))] = xvar(static_cast<int>(p));
    sizes.push_back(k.xsizes[order[p]]);
  }
  for (Member& m : k.members) {
    for (auto& [key, v] : m.var_map) v = sym::substitute(v, rename);
  }
  k.xsizes = sizes;
}

std::string sizes_text(const std::vector<Expr>& v) {
  std::string s;
  for (const Expr& e : v) s += (s.empty() ? "" : ", ") + e.str();
  return "[" + s + "]";
}

}  // namespace

std::optional<std::vector<Expr>> merge_contiguous_x_loops(const ir::Program& prog, Kernel& k) {
  for (const Expr& e : k.xsizes) {
    if (e == Expr(0)) return std::nullopt;  // (no elements: no size to divide by)
  }
  std::vector<Expr> before = k.xsizes;
  for (size_t i = k.xsizes.size(); i-- > 1;) {
    // (An index changes with each merge only in its variables' names: the test holds after it.)
    if (mergeable(k, kernel_indices(prog, k), i - 1)) merge(k, i - 1);
  }
  if (k.xsizes == before) return std::nullopt;
  return before;
}

void plan_short_loops(const ir::Program& prog, Kernel& k) {
  if (k.has_reduction() || k.tile > 0 || k.xsizes.size() < 2 || is_scatter_kernel(prog, k)) return;
  if (!short_loop(k.xsizes.back())) return;
  // (A kernel over no elements runs no loop: nothing to gain, and no size to divide by.)
  for (const Expr& e : k.xsizes) {
    if (e == Expr(0)) return;
  }
  if (auto before = merge_contiguous_x_loops(prog, k)) {
    k.decisions.push_back("short loops: " + sizes_text(*before) + " merged into " +
                          sizes_text(k.xsizes) + " (every index sees the merged loops as one)");
  }
  size_t nx = k.xsizes.size();
  int64_t points = 1;
  int unrolled = 0;
  while (static_cast<size_t>(unrolled) + 1 < nx) {
    const Expr& size = k.xsizes[nx - 1 - unrolled];
    if (!short_loop(size) || points * *size.as_int() > kMaxUnrolledPoints) break;
    points *= *size.as_int();
    ++unrolled;
  }
  if (unrolled == 0) return;
  // The loop before them becomes the vector loop: only worth it where it is long enough.
  size_t vd = nx - 1 - static_cast<size_t>(unrolled);
  auto hint = sym::try_size_hint(k.xsizes[vd]);
  if (!hint || *hint < kCpuMinVectorTrip) return;
  // Short loops further out whose store stride is smaller than the vector loop's join the
  // unrolled ones (order_loops put a transposed read's loop inside them: [3, 40, 2] stored as
  // [40, 3, 2]): the copies then store whole runs of the output together (interleaved stores).
  std::vector<int64_t> stride = store_strides(prog, k);
  std::vector<size_t> outer, inner;
  for (size_t j = 0; j < vd; ++j) {
    auto n = k.xsizes[j].as_int();
    bool join = short_loop(k.xsizes[j]) && stride[j] >= 0 && stride[vd] >= 0 &&
                stride[j] < stride[vd] && points * *n <= kMaxUnrolledPoints;
    if (join) {
      points *= *n;
      inner.push_back(j);
    } else {
      outer.push_back(j);
    }
  }
  if (!inner.empty()) {
    for (size_t j = vd + 1; j < nx; ++j) inner.push_back(j);
    // (Smallest store stride innermost, as order_loops orders them.)
    std::stable_sort(inner.begin(), inner.end(),
                     [&](size_t a, size_t b) { return stride[a] > stride[b]; });
    std::vector<size_t> order = outer;
    order.push_back(vd);
    order.insert(order.end(), inner.begin(), inner.end());
    reorder(k, order);
    std::string perm;
    for (size_t i : order) perm += (perm.empty() ? "" : ", ") + std::to_string(i);
    k.decisions.push_back("short loops: loop order (" + perm +
                          "): short loops of smaller store strides inside the vector loop");
    unrolled = static_cast<int>(inner.size());
    vd = nx - 1 - static_cast<size_t>(unrolled);
  }
  k.unrolled = unrolled;
  std::string loops;
  for (size_t j = vd + 1; j < nx; ++j) loops += (loops.empty() ? "x" : ", x") + std::to_string(j);
  k.decisions.push_back("short loops: " + loops + " (" + std::to_string(points) +
                        " points) unrolled inside the loop over x" + std::to_string(vd) +
                        ", the vector loop");
}

}  // namespace coil::sched
