// Lowerings of pooling: max_pool2d/3d_with_indices, avg_pool2d/3d, _adaptive_avg_pool2d/3d,
// adaptive_max_pool2d/3d, and their backward ops (1-d pools arrive as 2-d ones over a size-1 dim).
// The pooled dims are the last 2 or 3; any leading dims (batch, channels) are carried along.
//
// Forward: an output element combines one window of input elements. A window of at most
// realize_policy::kUnrollPoolingWindowThreshold slots is unrolled into a pointwise body, with
// masked loads for slots in the padding or past the input, so it fuses like any pointwise op
// (relu -> max_pool2d is one kernel). A larger average window (an adaptive pool of a big map)
// becomes a sum reduction; a larger max window falls back to ATen.
//
// Max pooling repeats eager's scan exactly: slots in window order; a slot is taken when its value
// is greater than the maximum so far or is NaN (so the first of equal maxima and the last NaN
// win); the index starts at the window's first existing element, which a window of -inf keeps.
// Indices are flat positions in the input's pooled plane (h * W + w, or (d * H + h) * W + w).
//
// Backward ops gather instead of scattering: an input element sums the gradients of the few
// output windows that can contain it (their number per dim is known statically). For max pooling
// a window contributes when its saved index names the element, so no atomics are needed.
//
// Tests: tests/cpp/lower/pooling_test.cpp, tests/python/test_pooling.py, and the Triton
// interpreter cases in tests/python/test_triton_interpret.py.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "coil/ir/realize_policy.h"
#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

namespace {

// ---- arguments ----

// One pooled dim of a fixed-size pool (max_pool, avg_pool).
struct FixedDim {
  Expr in, out;
  int64_t kernel = 1, stride = 1, padding = 0, dilation = 1;
};

// An int-list argument of a pooling op with one value per pooled dim: a single value applies to
// all of them; missing or empty takes `fallback` (stride defaults to the kernel size).
std::optional<std::vector<int64_t>> per_dim(const Lowering& L, const Arg* a, size_t k,
                                            const std::vector<int64_t>& fallback) {
  std::vector<int64_t> out = fallback;
  if (a && !a->is_none() && !(a->kind == Arg::Kind::List && a->list.empty())) {
    out.clear();
    for (const Expr& e : L.int_list(*a)) {
      auto v = e.as_int();
      if (!v) return std::nullopt;
      out.push_back(*v);
    }
  }
  if (out.size() == 1) out.assign(k, out[0]);
  if (out.size() != k) return std::nullopt;
  return out;
}

bool flag(const Lowering& L, const Node& n, size_t i, const std::string& name, bool fallback) {
  const Arg* a = L.arg(n, i, name);
  if (!a || a->kind != Arg::Kind::Bool) return fallback;
  return a->b;
}

// Reads kernel_size, stride, padding and (when dilation_at is given) dilation, starting at
// argument `at`, for the last k dims of `in` pooled to the last k dims of `out`.
std::optional<std::vector<FixedDim>> fixed_dims(const Lowering& L, const Node& n, size_t at,
                                                std::optional<size_t> dilation_at, size_t k,
                                                const std::vector<Expr>& in,
                                                const std::vector<Expr>& out) {
  if (in.size() < k || out.size() != in.size()) return std::nullopt;
  auto kernel = per_dim(L, L.arg(n, at, "kernel_size"), k, {});
  if (!kernel) return std::nullopt;
  auto stride = per_dim(L, L.arg(n, at + 1, "stride"), k, *kernel);
  auto padding = per_dim(L, L.arg(n, at + 2, "padding"), k, std::vector<int64_t>(k, 0));
  auto dilation = std::optional<std::vector<int64_t>>(std::vector<int64_t>(k, 1));
  if (dilation_at) dilation = per_dim(L, L.arg(n, *dilation_at, "dilation"), k, *dilation);
  if (!stride || !padding || !dilation) return std::nullopt;
  std::vector<FixedDim> dims(k);
  size_t lead = in.size() - k;
  for (size_t d = 0; d < k; ++d) {
    dims[d] = {in[lead + d], out[lead + d], (*kernel)[d],
               (*stride)[d], (*padding)[d], (*dilation)[d]};
    if (dims[d].kernel <= 0 || dims[d].stride <= 0 || dims[d].dilation <= 0) return std::nullopt;
  }
  return dims;
}

// One pooled dim of an adaptive pool: output p reads [floor(p * in / out), ceil((p+1) * in / out)).
struct AdaptiveDim {
  int64_t in = 1, out = 1;
};

std::optional<std::vector<AdaptiveDim>> adaptive_dims(const std::vector<Expr>& in,
                                                      const std::vector<Expr>& out, size_t k) {
  if (in.size() < k || out.size() != in.size()) return std::nullopt;
  std::vector<AdaptiveDim> dims(k);
  size_t lead = in.size() - k;
  for (size_t d = 0; d < k; ++d) {
    auto i = in[lead + d].as_int(), o = out[lead + d].as_int();
    if (!i || !o || *i <= 0 || *o <= 0) return std::nullopt;
    dims[d] = {*i, *o};
  }
  return dims;
}

// The window sizes of an adaptive dim, smallest and largest (over output positions).
std::pair<int64_t, int64_t> adaptive_window_sizes(const AdaptiveDim& d) {
  int64_t lo = d.in, hi = 0;
  for (int64_t p = 0; p < d.out; ++p) {
    int64_t size = ((p + 1) * d.in + d.out - 1) / d.out - p * d.in / d.out;
    lo = std::min(lo, size);
    hi = std::max(hi, size);
  }
  return {lo, hi};
}

// ---- runs: which elements a pooled element combines ----

// Along one pooled dim, the positions first + j * step for j in [0, count), of which those in
// [lo, hi) exist, and the first `always` of them in every case. Forward, the input positions an
// output element's window reads (j is the slot); backward, the output windows that may contain an
// input element.
struct Run {
  Expr first;
  int64_t count = 1;
  int64_t step = 1;
  Expr lo, hi;
  int64_t always = 0;
};

Run fixed_window(const FixedDim& d, const Expr& p) {
  return {p * d.stride - d.padding, d.kernel, d.dilation, 0, d.in, 0};
}

Run adaptive_window(const AdaptiveDim& d, const Expr& p) {
  auto [smallest, largest] = adaptive_window_sizes(d);
  Expr start = sym::floordiv(p * d.in, d.out);
  return {start, largest, 1, start, sym::ceildiv((p + 1) * d.in, d.out), smallest};
}

// The windows q that may contain input position h: window q reads [q*s - pad, q*s - pad +
// (k-1)*dil], so ceil((h + pad - (k-1)*dil) / s) <= q <= floor((h + pad) / s). Without dilation
// every such window contains h; `exact` keeps only those. With dilation h may fall between two
// slots of a window; max pooling (the only backward with dilation) needs no exact run, as a
// window's saved index never names an element it does not contain.
Run fixed_cover(const FixedDim& d, const Expr& h, bool exact) {
  int64_t reach = (d.kernel - 1) * d.dilation;
  Expr first = sym::floordiv(h + d.padding - reach + d.stride - 1, d.stride);
  Expr hi = d.out;
  if (exact) hi = sym::min(sym::floordiv(h + d.padding, d.stride) + 1, d.out);
  return {first, reach / d.stride + 1, 1, 0, hi, 0};
}

// Window q contains h exactly when floor(h*out/in) <= q < ceil((h+1)*out/in): the windows of
// input position h of the adaptive dim "out -> in" (which has the same window sizes as the cover).
Run adaptive_cover(const AdaptiveDim& d, const Expr& h) {
  return adaptive_window({d.out, d.in}, h);
}

using RunFn = std::function<Run(size_t dim, const Expr& p)>;

// The runs along the last k dims for the element at idx.
std::vector<Run> runs_of(const std::vector<Expr>& idx, size_t k, const RunFn& run) {
  std::vector<Run> runs;
  for (size_t d = 0; d < k; ++d) runs.push_back(run(d, idx[idx.size() - k + d]));
  return runs;
}

std::vector<int64_t> counts_of(const std::vector<Run>& runs) {
  std::vector<int64_t> out;
  for (const Run& r : runs) out.push_back(r.count);
  return out;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// The range of the index variables (v: output element; u: slot, in reductions).
sym::RangeEnv index_env(const std::vector<Expr>& sizes, const std::vector<int64_t>& slots = {}) {
  sym::RangeEnv env;
  for (size_t i = 0; i < sizes.size(); ++i)
    env.add_index_var(ir::index_var(static_cast<int>(i)), sizes[i]);
  for (size_t j = 0; j < slots.size(); ++j)
    env.add_index_var(ir::reduction_var(static_cast<int>(j)), slots[j]);
  return env;
}

Value index_value(const Expr& e) {
  return ir::index_expr(e, DType::Int64);
}

// a && b, where a null Value stands for "true".
Value both(Value a, Value b) {
  if (!a) return b;
  if (!b) return a;
  return ir::binary(Op::LogicalAnd, a, b);
}

// a <= b as a Value, or null when it holds for every index in env.
Value at_most(const Expr& a, const Expr& b, const sym::RangeEnv& env) {
  if (sym::statically_known_true(sym::le(a, b), env)) return Value();
  return ir::binary(Op::Le, index_value(a), index_value(b));
}

// One point of a product of runs (one j per dim): its position along each pooled dim, and
// whether it exists (null: always).
struct Point {
  std::vector<Expr> pos;
  Value exists;
};

Point point_at(const std::vector<Run>& runs, const std::vector<Expr>& j, const sym::RangeEnv& env) {
  Point p;
  for (size_t d = 0; d < runs.size(); ++d) {
    const Run& r = runs[d];
    Expr pos = sym::simplify(r.first + j[d] * r.step, env);
    p.pos.push_back(pos);
    auto slot = j[d].as_int();
    if (slot && *slot < r.always) continue;
    p.exists = both(p.exists, both(at_most(r.lo, pos, env), at_most(pos + 1, r.hi, env)));
  }
  return p;
}

// Every j of runs with these counts, in row-major (eager's scan) order.
std::vector<std::vector<Expr>> all_points(const std::vector<int64_t>& counts) {
  std::vector<std::vector<Expr>> out = {{}};
  for (int64_t n : counts) {
    std::vector<std::vector<Expr>> next;
    for (const auto& prefix : out) {
      for (int64_t j = 0; j < n; ++j) {
        next.push_back(prefix);
        next.back().push_back(j);
      }
    }
    out = std::move(next);
  }
  return out;
}

// idx with its last pos.size() entries replaced by pos.
std::vector<Expr> with_pooled(const std::vector<Expr>& idx, const std::vector<Expr>& pos) {
  std::vector<Expr> at(idx.begin(), idx.end() - static_cast<std::ptrdiff_t>(pos.size()));
  at.insert(at.end(), pos.begin(), pos.end());
  return at;
}

// `v` where the point exists, else `missing` (v's loads are not made there).
Value where_exists(const Point& p, Value v, Value missing) {
  if (!p.exists) return v;
  return ir::where(p.exists, mask_loads(v, p.exists), missing);
}

// The flat position of `pos` in the pooled plane of sizes `in` (what max-pool indices hold).
Expr plane_index(const std::vector<Expr>& pos, const std::vector<Expr>& in) {
  Expr flat = 0;
  for (size_t d = 0; d < pos.size(); ++d) flat = flat * in[d] + pos[d];
  return flat;
}

// What a missing slot of a max window reads: below (or, for integers, at) every value.
Value lowest(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::UInt8:
      return ir::int_constant(0, d);
    case DType::Int8:
      return ir::int_constant(std::numeric_limits<int8_t>::min(), d);
    case DType::Int16:
      return ir::int_constant(std::numeric_limits<int16_t>::min(), d);
    case DType::Int32:
      return ir::int_constant(std::numeric_limits<int32_t>::min(), d);
    case DType::Int64:
      return ir::int_constant(std::numeric_limits<int64_t>::min(), d);
    default:
      return ir::constant(-HUGE_VAL, d);
  }
}

Value zero(DType d) {
  return graph::is_floating(d) ? ir::constant(0.0, d) : ir::int_constant(0, d);
}

// sum / divisor in the accumulation dtype: true division for floats, truncating for integers
// (as eager divides integer sums).
Value divide(Value sum, const Expr& divisor) {
  DType acc = sum.dtype();
  Value d = ir::cast(index_value(divisor), acc);
  return ir::binary(graph::is_floating(acc) ? Op::Div : Op::TruncDiv, sum, d);
}

// ---- forward ----

// Windows that overlap read input elements more than once (ResNet's 3x3 max pool with stride 2
// reads each about 2.25 times, in 9 unrolled slots), so a producer inlined into the window is
// recomputed at every read. Like a value with several users (realize_policy), a costly producer
// is stored first: ResNet's batch norm + ReLU reads five buffers, and inlined into its max pool
// it ran 3.7x slower on the CPU than stored. A cheap one (a ReLU, a scale) stays fused, and so
// does every producer of disjoint windows (2x2 stride 2, a global average), which read each
// element once.
TensorBox stored_if_reread(Lowering& L, const TensorBox& x, const std::vector<int64_t>& slots,
                           const std::vector<Expr>& out_sizes, size_t k) {
  if (!x.body || as_strided_view(x)) return x;
  int buffers = static_cast<int>(ir::loaded_buffers(x.body).size());
  if (!ir::realize_policy::worth_storing_for_reuse(ir::count_ops(x.body), buffers)) return x;
  int64_t reads = product(slots), elements = 1;
  for (size_t d = 0; d < k; ++d) {
    auto out = out_sizes[out_sizes.size() - k + d].as_int();
    auto in = x.sizes[x.sizes.size() - k + d].as_int();
    if (!out || !in) return x;
    reads *= *out;
    elements *= *in;
  }
  return reads > elements ? L.realize(x) : x;
}

// Max pooling: (values, indices) with the node's first two output metas; {} (fallback) when the
// window is too large to unroll. With `offsets` the second result is the winning slot's position
// in the window (kh * KW + kw: a number per slot, int8 for coil.max_pool2d_offsets) instead of
// its position in the input plane.
std::vector<TensorBox> max_pool(Lowering& L, const Node& n, size_t k, const RunFn& window,
                                bool offsets = false) {
  const graph::TensorMeta& m = L.meta(n, 0);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  std::vector<Run> w = runs_of(idx, k, window);
  std::vector<int64_t> slots = counts_of(w);
  if (product(slots) > ir::realize_policy::kUnrollPoolingWindowThreshold) return {};
  TensorBox x = stored_if_reread(L, L.box_of(n, 0), slots, m.sizes, k);
  sym::RangeEnv env = index_env(m.sizes);
  std::vector<Expr> in(x.sizes.end() - static_cast<std::ptrdiff_t>(k), x.sizes.end());
  DType acc = opmath(x.dtype);

  // Eager's starting index: the first existing slot along each dim.
  std::vector<Expr> first, first_slot;
  for (const Run& r : w) {
    Expr skip = sym::simplify(sym::ceildiv(sym::max(r.lo - r.first, 0), r.step), env);
    first.push_back(sym::simplify(r.first + skip * r.step, env));
    first_slot.push_back(skip);
  }
  const std::vector<Expr> window_sizes(slots.begin(), slots.end());
  auto where_in = [&](const std::vector<Expr>& pos, const std::vector<Expr>& slot) {
    return index_value(offsets ? plane_index(slot, window_sizes) : plane_index(pos, in));
  };
  Value best;
  Value best_index = where_in(first, first_slot);
  for (const std::vector<Expr>& j : all_points(slots)) {
    Point s = point_at(w, j, env);
    Value v = where_exists(s, ir::cast(x.load(with_pooled(idx, s.pos)), acc), lowest(acc));
    Value taken = ir::binary(Op::Gt, v, best ? best : lowest(acc));
    if (graph::is_floating(acc)) taken = ir::binary(Op::LogicalOr, taken, ir::unary(Op::IsNan, v));
    best_index = ir::where(taken, where_in(s.pos, j), best_index);
    best = best ? ir::binary(Op::Maximum, best, v) : v;
  }
  const graph::TensorMeta& mi = L.meta(n, 1);
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(best, m.dtype), x.origins},
          TensorBox{mi.dtype, mi.device, mi.sizes, ir::cast(best_index, mi.dtype), x.origins}};
}

// The sum of each output element's window (in the accumulation dtype): unrolled when small, else
// a sum reduction over the slots.
TensorBox window_sum(Lowering& L, const TensorBox& input, const std::vector<Expr>& out_sizes,
                     size_t k, const RunFn& window, DType acc) {
  std::vector<Expr> idx = ir::index_vars(out_sizes.size());
  std::vector<Run> w = runs_of(idx, k, window);
  std::vector<int64_t> slots = counts_of(w);
  TensorBox x = stored_if_reread(L, input, slots, out_sizes, k);
  auto element = [&](const Point& s) {
    return where_exists(s, ir::cast(x.load(with_pooled(idx, s.pos)), acc), zero(acc));
  };
  if (product(slots) <= ir::realize_policy::kUnrollPoolingWindowThreshold) {
    sym::RangeEnv env = index_env(out_sizes);
    Value sum;
    for (const std::vector<Expr>& j : all_points(slots)) {
      Value v = element(point_at(w, j, env));
      sum = sum ? ir::add(sum, v) : v;
    }
    return TensorBox{acc, x.device, out_sizes, sum, x.origins};
  }
  sym::RangeEnv env = index_env(out_sizes, slots);
  Value body = element(point_at(w, ir::reduction_vars(k), env));
  std::vector<Expr> ranges(slots.begin(), slots.end());
  return L.add_reduction(acc, x.device, out_sizes, ranges, ir::ReductionType::Sum, body, x.origins);
}

// What avg_pool divides a window's sum by, for output position p (all pooled dims).
struct AvgDivisor {
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;

  Expr operator()(const std::vector<FixedDim>& dims, const std::vector<Expr>& p) const {
    if (divisor_override) return *divisor_override;
    Expr count = 1;
    for (size_t d = 0; d < dims.size(); ++d) {
      const FixedDim& f = dims[d];
      Expr start = p[d] * f.stride - f.padding;
      // A window may hang past the right padding (ceil_mode); that part never counts.
      Expr end = sym::min(start + f.kernel, f.in + f.padding);
      if (!count_include_pad) {
        start = sym::max(start, 0);
        end = sym::min(end, f.in);
      }
      count = count * (end - start);
    }
    return count;
  }
};

std::optional<AvgDivisor> avg_divisor(const Lowering& L, const Node& n, size_t at) {
  AvgDivisor div;
  div.count_include_pad = flag(L, n, at, "count_include_pad", true);
  const Arg* o = L.arg(n, at + 1, "divisor_override");
  if (o && !o->is_none()) {
    auto v = L.int_arg(*o).as_int();
    if (!v || *v == 0) return std::nullopt;
    div.divisor_override = *v;
  }
  return div;
}

std::vector<TensorBox> lower_max_pool(Lowering& L, const Node& n, size_t k, bool offsets = false) {
  const TensorBox& x = L.box_of(n, 0);
  if (x.dtype == DType::Bool) return {};
  auto dims = fixed_dims(L, n, 1, 4, k, x.sizes, L.meta(n, 0).sizes);
  if (!dims) return {};
  return max_pool(
      L, n, k, [&](size_t d, const Expr& p) { return fixed_window((*dims)[d], p); }, offsets);
}

std::vector<TensorBox> lower_adaptive_max_pool(Lowering& L, const Node& n, size_t k) {
  const TensorBox& x = L.box_of(n, 0);
  if (x.dtype == DType::Bool) return {};
  auto dims = adaptive_dims(x.sizes, L.meta(n, 0).sizes, k);
  if (!dims) return {};
  return max_pool(L, n, k, [&](size_t d, const Expr& p) { return adaptive_window((*dims)[d], p); });
}

std::vector<TensorBox> lower_avg_pool(Lowering& L, const Node& n, size_t k) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  if (x.dtype == DType::Bool) return {};
  auto dims = fixed_dims(L, n, 1, std::nullopt, k, x.sizes, m.sizes);
  auto divisor = avg_divisor(L, n, 5);
  if (!dims || !divisor) return {};
  DType acc = graph::is_floating(x.dtype) ? opmath(x.dtype) : DType::Int64;
  TensorBox sum = window_sum(
      L, x, m.sizes, k, [&](size_t d, const Expr& p) { return fixed_window((*dims)[d], p); }, acc);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  std::vector<Expr> p(idx.end() - static_cast<std::ptrdiff_t>(k), idx.end());
  Value body = divide(sum.load(idx), sym::simplify((*divisor)(*dims, p), index_env(m.sizes)));
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(body, m.dtype), sum.origins}};
}

std::vector<TensorBox> lower_adaptive_avg_pool(Lowering& L, const Node& n, size_t k) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  if (!graph::is_floating(x.dtype)) return {};
  auto dims = adaptive_dims(x.sizes, m.sizes, k);
  if (!dims) return {};
  DType acc = opmath(x.dtype);
  TensorBox sum = window_sum(
      L, x, m.sizes, k, [&](size_t d, const Expr& p) { return adaptive_window((*dims)[d], p); },
      acc);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  Value body = sum.load(idx);
  sym::RangeEnv env = index_env(m.sizes);
  // Eager divides by the window's extent along each dim in turn (sum / kh / kw).
  for (size_t d = 0; d < k; ++d) {
    Run w = adaptive_window((*dims)[d], idx[m.rank() - k + d]);
    body = divide(body, sym::simplify(w.hi - w.lo, env));
  }
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(body, m.dtype), sum.origins}};
}

// ---- backward ----

// The gradient of the input (the node's output): for each input element, the sum of term(at, q)
// over the output windows that may contain it (at: the window's index in grad_output, q: its
// pooled dims only). {} (fallback) when there are too many such windows to unroll.
using GradTerm = std::function<Value(const std::vector<Expr>& at, const std::vector<Expr>& q)>;
std::vector<TensorBox> gather_grad(const Lowering& L, const Node& n, size_t k, const RunFn& cover,
                                   const GradTerm& term, std::set<std::string> origins) {
  const graph::TensorMeta& m = L.meta(n);
  if (!graph::is_floating(m.dtype)) return {};
  std::vector<Expr> idx = ir::index_vars(m.rank());
  std::vector<Run> runs = runs_of(idx, k, cover);
  std::vector<int64_t> counts = counts_of(runs);
  if (product(counts) > ir::realize_policy::kUnrollPoolingWindowThreshold) return {};
  sym::RangeEnv env = index_env(m.sizes);
  DType acc = opmath(m.dtype);
  Value sum;
  for (const std::vector<Expr>& j : all_points(counts)) {
    Point q = point_at(runs, j, env);
    Value t = where_exists(q, term(with_pooled(idx, q.pos), q.pos), zero(acc));
    sum = sum ? ir::add(sum, t) : t;
  }
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(sum, m.dtype), std::move(origins)}};
}

std::set<std::string> origins_of(std::initializer_list<const TensorBox*> boxes) {
  std::set<std::string> out;
  for (const TensorBox* b : boxes) out.insert(b->origins.begin(), b->origins.end());
  return out;
}

// Max pooling backward (grad_output, self, ..., indices): a window's gradient goes to the element
// its saved index names.
// The input's sizes are the result's (grad_input), so `self` itself is never read.
std::vector<TensorBox> max_pool_backward(const Lowering& L, const Node& n, size_t k,
                                         const TensorBox& indices, const RunFn& cover) {
  const TensorBox& grad = L.box_of(n, 0);
  const graph::TensorMeta& x = L.meta(n);
  std::vector<Expr> idx = ir::index_vars(x.rank());
  std::vector<Expr> h(idx.end() - static_cast<std::ptrdiff_t>(k), idx.end());
  std::vector<Expr> in(x.sizes.end() - static_cast<std::ptrdiff_t>(k), x.sizes.end());
  Value self = index_value(plane_index(h, in));
  DType acc = opmath(x.dtype);
  auto term = [&](const std::vector<Expr>& at, const std::vector<Expr>&) {
    Value chosen = ir::binary(Op::Eq, ir::cast(indices.load(at), DType::Int64), self);
    return ir::where(chosen, ir::cast(grad.load(at), acc), zero(acc));
  };
  return gather_grad(L, n, k, cover, term, origins_of({&grad, &indices}));
}

// aten.max_pool2d_with_indices_backward(grad, self, kernel, stride, padding, dilation, ceil_mode,
// indices), or (`without_self`) coil.max_pool2d_grad(grad, indices, input_size, input_stride,
// kernel, stride, padding, dilation, ceil_mode), the form training graphs get
// (python/coil/decompositions.py): self is read for its sizes only, and as an argument it would
// make the partitioner keep the pool's input for the backward.
std::vector<TensorBox> lower_max_pool_backward(Lowering& L, const Node& n, size_t k,
                                               bool without_self = false) {
  const TensorBox& grad = L.box_of(n, 0);
  const std::vector<Expr>& in_sizes = L.meta(n).sizes;
  const Arg* indices = without_self ? &n.args.at(1) : L.arg(n, 7, "indices");
  if (!indices || !L.is_tensor(*indices)) return {};
  auto dims = without_self ? fixed_dims(L, n, 4, 7, k, in_sizes, grad.sizes)
                           : fixed_dims(L, n, 2, 5, k, in_sizes, grad.sizes);
  if (!dims) return {};
  return max_pool_backward(L, n, k, L.box(*indices), [&](size_t d, const Expr& h) {
    return fixed_cover((*dims)[d], h, /*exact=*/false);
  });
}

std::vector<TensorBox> lower_adaptive_max_pool_backward(Lowering& L, const Node& n, size_t k) {
  const TensorBox& grad = L.box_of(n, 0);
  const TensorBox& x = L.box_of(n, 1);
  auto dims = adaptive_dims(x.sizes, grad.sizes, k);
  if (!dims) return {};
  return max_pool_backward(L, n, k, L.box_of(n, 2),
                           [&](size_t d, const Expr& h) { return adaptive_cover((*dims)[d], h); });
}

std::vector<TensorBox> lower_avg_pool_backward(Lowering& L, const Node& n, size_t k) {
  const TensorBox& grad = L.box_of(n, 0);
  const TensorBox& x = L.box_of(n, 1);
  auto dims = fixed_dims(L, n, 2, std::nullopt, k, x.sizes, grad.sizes);
  auto divisor = avg_divisor(L, n, 6);
  if (!dims || !divisor) return {};
  DType acc = opmath(x.dtype);
  auto term = [&](const std::vector<Expr>& at, const std::vector<Expr>& q) {
    return divide(ir::cast(grad.load(at), acc), (*divisor)(*dims, q));
  };
  auto cover = [&](size_t d, const Expr& h) { return fixed_cover((*dims)[d], h, true); };
  return gather_grad(L, n, k, cover, term, grad.origins);
}

std::vector<TensorBox> lower_adaptive_avg_pool_backward(Lowering& L, const Node& n, size_t k) {
  const TensorBox& grad = L.box_of(n, 0);
  const TensorBox& x = L.box_of(n, 1);
  auto dims = adaptive_dims(x.sizes, grad.sizes, k);
  if (!dims) return {};
  DType acc = opmath(x.dtype);
  auto term = [&](const std::vector<Expr>& at, const std::vector<Expr>& q) {
    Value v = ir::cast(grad.load(at), acc);
    // Eager's order of rounding: grad / kh / kw.
    for (size_t d = 0; d < k; ++d) {
      Run w = adaptive_window((*dims)[d], q[d]);
      v = divide(v, w.hi - w.lo);
    }
    return v;
  };
  auto cover = [&](size_t d, const Expr& h) { return adaptive_cover((*dims)[d], h); };
  return gather_grad(L, n, k, cover, term, grad.origins);
}

}  // namespace

void register_pooling(Registry& r) {
  for (size_t k : {2, 3}) {
    std::string nd = std::to_string(k) + "d";
    r["aten.max_pool" + nd + "_with_indices.default"] = [k](Lowering& L, const Node& n) {
      return lower_max_pool(L, n, k);
    };
    // Training graphs' max pools (python/coil/decompositions.py): values and int8 window offsets,
    // which the backward turns back into indices (the partitioner saves 1 byte per element).
    if (k == 2) {
      r["coil.max_pool2d_offsets.default"] = [](Lowering& L, const Node& n) {
        return lower_max_pool(L, n, 2, /*offsets=*/true);
      };
      r["coil.max_pool2d_grad.default"] = [](Lowering& L, const Node& n) {
        return lower_max_pool_backward(L, n, 2, /*without_self=*/true);
      };
    }
    r["aten.max_pool" + nd + "_with_indices_backward.default"] = [k](Lowering& L, const Node& n) {
      return lower_max_pool_backward(L, n, k);
    };
    r["aten.avg_pool" + nd + ".default"] = [k](Lowering& L, const Node& n) {
      return lower_avg_pool(L, n, k);
    };
    r["aten.avg_pool" + nd + "_backward.default"] = [k](Lowering& L, const Node& n) {
      return lower_avg_pool_backward(L, n, k);
    };
    r["aten._adaptive_avg_pool" + nd + ".default"] = [k](Lowering& L, const Node& n) {
      return lower_adaptive_avg_pool(L, n, k);
    };
    r["aten._adaptive_avg_pool" + nd + "_backward.default"] = [k](Lowering& L, const Node& n) {
      return lower_adaptive_avg_pool_backward(L, n, k);
    };
    r["aten.adaptive_max_pool" + nd + ".default"] = [k](Lowering& L, const Node& n) {
      return lower_adaptive_max_pool(L, n, k);
    };
    r["aten.adaptive_max_pool" + nd + "_backward.default"] = [k](Lowering& L, const Node& n) {
      return lower_adaptive_max_pool_backward(L, n, k);
    };
  }
}

}  // namespace coil::lower
