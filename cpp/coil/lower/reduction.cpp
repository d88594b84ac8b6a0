// Lowerings of reductions: sum, mean, prod, amax/amin, argmax/argmin, max/min.dim, any/all,
// softmax and log_softmax, vector norms, scans; the shared reduce() (reduce.h). Variance and the
// normalizations are in norm.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "coil/ir/realize_policy.h"
#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"
#include "coil/lower/reduce.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;
using ir::ReductionType;

// Reads the `dim` argument: an int, a list of ints, or None / [] (all dims).
std::vector<int64_t> reduce_dims(const Lowering& L, const Arg* a, size_t rank) {
  std::vector<int64_t> dims;
  if (!a || a->is_none() || (a->kind == Arg::Kind::List && a->list.empty())) {
    for (size_t i = 0; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
    return dims;
  }
  for (const Expr& e : L.int_list(*a)) {
    auto v = e.as_int();
    if (!v) throw std::logic_error("reduction dims must be integers");
    dims.push_back(wrap_dim(*v, rank));
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  // A 0-d tensor reduces over "dim 0", which does not exist as a loop.
  if (rank == 0) dims.clear();
  return dims;
}

bool flag(const Lowering& L, const Node& n, size_t i, const std::string& name) {
  const Arg* a = L.arg(n, i, name);
  return a && a->kind == Arg::Kind::Bool && a->b;
}

bool has_dim(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

namespace {

Value identity(ReductionType t, DType d) {
  switch (t) {
    case ReductionType::Sum:
      return ir::int_constant(0, d);
    case ReductionType::Prod:
      return ir::int_constant(1, d);
    case ReductionType::Any:
      return ir::int_constant(0, DType::Bool);
    case ReductionType::All:
      return ir::int_constant(1, DType::Bool);
    default:
      throw std::logic_error("no identity for this reduction");
  }
}

Value combine(ReductionType t, Value a, Value b) {
  switch (t) {
    case ReductionType::Sum:
      return ir::add(a, b);
    case ReductionType::Prod:
      return ir::mul(a, b);
    case ReductionType::Max:
      return ir::binary(Op::Maximum, a, b);
    case ReductionType::Min:
      return ir::binary(Op::Minimum, a, b);
    case ReductionType::Any:
      return ir::binary(Op::LogicalOr, a, b);
    case ReductionType::All:
      return ir::binary(Op::LogicalAnd, a, b);
    default:
      throw std::logic_error("combine: not an elementwise reduction");
  }
}

}  // namespace

// Unrolled into a pointwise combination up to kUnrollReductionThreshold elements. `pre` maps the
// loaded element to the reduced value; the reduction buffer holds `out` when store_acc is false,
// else `acc`.
TensorBox reduce(Lowering& L, const TensorBox& x, const ReduceSpec& spec, ReductionType type,
                 DType acc, DType out, const ReducePre& pre) {
  std::vector<Expr> kept_sizes, red_sizes;
  for (size_t d = 0; d < x.rank(); ++d)
    (has_dim(spec.dims, d) ? red_sizes : kept_sizes).push_back(x.sizes[d]);
  // Element index of x in terms of the reduction buffer's v (kept) and u (reduced) variables.
  std::vector<Expr> idx(x.rank());
  size_t k = 0, j = 0;
  for (size_t d = 0; d < x.rank(); ++d) {
    idx[d] = has_dim(spec.dims, d) ? ir::reduction_var(static_cast<int>(j++))
                                   : ir::index_var(static_cast<int>(k++));
  }
  Value elem = ir::cast(x.load(idx), acc);
  if (pre) elem = pre(elem, idx);

  Expr red_numel = 1;
  for (const Expr& s : red_sizes) red_numel = red_numel * s;
  auto small = red_numel.as_int();
  bool unrollable = type != ReductionType::ArgMax && type != ReductionType::ArgMin;
  TensorBox result;
  if (small && *small <= ir::realize_policy::kUnrollReductionThreshold && *small > 0 &&
      unrollable) {
    // Few elements: a pointwise body combining them, which fuses like any pointwise op.
    Value v;
    for (int64_t flat = 0; flat < *small; ++flat) {
      sym::ExprMap repl;
      int64_t rem = flat;
      for (size_t r = red_sizes.size(); r-- > 0;) {
        int64_t sz = *red_sizes[r].as_int();
        repl[ir::reduction_var(static_cast<int>(r))] = Expr(rem % sz);
        rem /= sz;
      }
      Value e = ir::substitute_indices(elem, repl);
      v = v ? combine(type, v, e) : e;
    }
    result = TensorBox{out, x.device, kept_sizes, ir::cast(v, out), x.origins};
  } else if (small && *small == 0 && unrollable && type != ReductionType::Max &&
             type != ReductionType::Min) {
    result = TensorBox{out, x.device, kept_sizes, ir::cast(identity(type, acc), out), {}};
  } else {
    result = L.add_reduction(out, x.device, kept_sizes, red_sizes, type, elem, x.origins);
  }
  if (!spec.keepdim) return result;
  // keepdim: a view with size-1 dims where the reduced dims were.
  std::vector<Expr> sizes(x.rank()), inner_idx;
  std::vector<Expr> vars = ir::index_vars(x.rank());
  for (size_t d = 0; d < x.rank(); ++d) {
    bool reduced = has_dim(spec.dims, d);
    sizes[d] = reduced ? Expr(1) : x.sizes[d];
    if (!reduced) inner_idx.push_back(vars[d]);
  }
  TensorBox kept{out, x.device, sizes, result.load(inner_idx), result.origins};
  return kept;
}

DType acc_dtype(DType in, DType out) {
  if (graph::is_floating(out)) return opmath(out);
  if (out == DType::Bool) return DType::Bool;
  (void)in;
  return DType::Int64;
}

// Casts a box (typically an fp32 reduction result) to the node's output dtype.
TensorBox with_dtype(TensorBox b, DType d) {
  b.body = ir::cast(b.body, d);
  b.dtype = d;
  return b;
}

namespace {

std::vector<TensorBox> lower_sum(Lowering& L, const Node& n, bool mean) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  bool all_dims = n.target.find(".default") != std::string::npos;
  ReduceSpec spec{reduce_dims(L, all_dims ? nullptr : L.arg(n, 1, "dim"), x.rank()),
                  all_dims ? false : flag(L, n, 2, "keepdim")};
  DType acc = acc_dtype(x.dtype, m.dtype);
  if (!mean) return {with_dtype(reduce(L, x, spec, ReductionType::Sum, acc, acc), m.dtype)};
  TensorBox s = reduce(L, x, spec, ReductionType::Sum, acc, acc);
  Expr count = 1;
  for (int64_t d : spec.dims) count = count * x.sizes[d];
  TensorBox out = s;
  out.dtype = m.dtype;
  out.body = ir::cast(ir::div(s.body, ir::cast(ir::index_expr(count, DType::Int64), acc)), m.dtype);
  return {out};
}

// amax/amin take dims (empty = all); max.default/min.default reduce everything.
std::vector<TensorBox> lower_minmax(Lowering& L, const Node& n, ReductionType type, bool all_dims) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  ReduceSpec spec{reduce_dims(L, all_dims ? nullptr : L.arg(n, 1, "dim"), x.rank()),
                  all_dims ? false : flag(L, n, 2, "keepdim")};
  DType acc = opmath(x.dtype);
  return {with_dtype(reduce(L, x, spec, type, acc, acc), m.dtype)};
}

std::vector<TensorBox> lower_arg(Lowering& L, const Node& n, ReductionType type,
                                 size_t meta_index = 0) {
  const TensorBox& x = L.box_of(n, 0);
  const Arg* dim = L.arg(n, 1, "dim");
  bool keepdim = flag(L, n, 2, "keepdim");
  DType acc = opmath(x.dtype);
  if (!dim || dim->is_none()) {
    // Over the flattened tensor: reduce all dims; the index is the row-major flat index.
    ReduceSpec spec{reduce_dims(L, nullptr, x.rank()), keepdim};
    return {reduce(L, x, spec, type, acc, L.meta(n, meta_index).dtype)};
  }
  ReduceSpec spec{reduce_dims(L, dim, x.rank()), keepdim};
  return {reduce(L, x, spec, type, acc, L.meta(n, meta_index).dtype)};
}

std::vector<TensorBox> lower_softmax(Lowering& L, const Node& n, bool log) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  int64_t dim = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
  ReduceSpec spec{x.rank() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim}, true};
  DType acc = x.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  std::vector<Expr> idx = ir::index_vars(x.rank());
  TensorBox mx = reduce(L, x, spec, ReductionType::Max, acc, acc);
  auto shifted = [&](Value e, const std::vector<Expr>& at) {
    return ir::sub(e, mx.load(broadcast_index(mx, x.sizes, at)));
  };
  TensorBox sum = reduce(
      L, x, spec, ReductionType::Sum, acc, acc,
      [&](Value e, const std::vector<Expr>& at) { return ir::unary(Op::Exp, shifted(e, at)); });
  Value e = ir::cast(x.load(idx), acc);
  Value s = sum.load(broadcast_index(sum, x.sizes, idx));
  // Eager's CPU kernel multiplies by the sum's reciprocal (one division per row), its CUDA
  // kernels divide.
  bool cuda = m.device.rfind("cuda", 0) == 0;
  Value ex = ir::unary(Op::Exp, shifted(e, idx));
  Value body = log    ? ir::sub(shifted(e, idx), ir::unary(Op::Log, s))
               : cuda ? ir::div(ex, s)
                      : ir::mul(ex, ir::unary(Op::Reciprocal, s));
  TensorBox out{m.dtype, m.device, m.sizes, ir::cast(body, m.dtype), x.origins};
  return {out};
}

// linalg_vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None): the p-norm over dims, in the
// output's opmath dtype. ord 2 is sqrt(sum(x*x)), 1 sum(|x|), +-inf max/min(|x|), 0 the count of
// non-zeros, any other p (sum(|x|^p))^(1/p).
double ord_of(const Arg* a, double fallback) {
  if (!a || a->is_none()) return fallback;
  return static_number(*a, "a norm's order");
}

TensorBox vector_norm(Lowering& L, const TensorBox& x, double ord, const ReduceSpec& spec,
                      DType acc);

std::vector<TensorBox> lower_vector_norm(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  ReduceSpec spec{reduce_dims(L, L.arg(n, 2, "dim"), x.rank()), flag(L, n, 3, "keepdim")};
  return {with_dtype(vector_norm(L, x, ord_of(L.arg(n, 1, "ord"), 2.0), spec, opmath(m.dtype)),
                     m.dtype)};
}

// dist(a, b, p=2) = the p-norm of a - b (broadcast) over every element.
std::vector<TensorBox> lower_dist(Lowering& L, const Node& n) {
  const TensorBox& a = L.box_of(n, 0);
  const TensorBox& b = L.box_of(n, 1);
  const graph::TensorMeta& m = L.meta(n);
  DType acc = opmath(m.dtype);
  std::vector<Expr> sizes(std::max(a.rank(), b.rank()), Expr(1));
  for (const TensorBox* t : {&a, &b}) {
    size_t lead = sizes.size() - t->rank();
    for (size_t i = 0; i < t->rank(); ++i)
      if (t->sizes[i] != Expr(1)) sizes[lead + i] = t->sizes[i];
  }
  std::vector<Expr> idx = ir::index_vars(sizes.size());
  Value diff = ir::sub(ir::cast(a.load(broadcast_index(a, sizes, idx)), acc),
                       ir::cast(b.load(broadcast_index(b, sizes, idx)), acc));
  TensorBox d{acc, m.device, sizes, diff, a.origins};
  d.origins.insert(b.origins.begin(), b.origins.end());
  ReduceSpec spec{reduce_dims(L, nullptr, d.rank()), false};
  return {with_dtype(vector_norm(L, d, ord_of(L.arg(n, 2, "p"), 2.0), spec, acc), m.dtype)};
}

TensorBox vector_norm(Lowering& L, const TensorBox& x, double ord, const ReduceSpec& spec,
                      DType acc) {
  auto abs = [](Value e, const std::vector<Expr>&) { return ir::unary(Op::Abs, e); };
  TensorBox r;
  if (std::isinf(ord)) {
    r = reduce(L, x, spec, ord > 0 ? ReductionType::Max : ReductionType::Min, acc, acc, abs);
  } else if (ord == 0.0) {
    r = reduce(L, x, spec, ReductionType::Sum, acc, acc, [acc](Value e, const std::vector<Expr>&) {
      return ir::cast(ir::binary(Op::Ne, e, ir::constant(0.0, acc)), acc);
    });
  } else if (ord == 1.0) {
    r = reduce(L, x, spec, ReductionType::Sum, acc, acc, abs);
  } else if (ord == 2.0) {
    r = reduce(L, x, spec, ReductionType::Sum, acc, acc,
               [](Value e, const std::vector<Expr>&) { return ir::mul(e, e); });
    r.body = ir::unary(Op::Sqrt, r.body);
  } else {
    Value p = ir::constant(ord, acc);
    r = reduce(L, x, spec, ReductionType::Sum, acc, acc, [p](Value e, const std::vector<Expr>&) {
      return ir::binary(Op::Pow, ir::unary(Op::Abs, e), p);
    });
    r.body = ir::binary(Op::Pow, r.body, ir::constant(1.0 / ord, acc));
  }
  return r;
}

// cumsum/cumprod(x, dim, dtype=None): element i along dim combines x[0..i]. Short dims
// (realize_policy::max_prefix_reduction_scan) as a reduction over the whole dim masked to the
// prefix, which fuses with its producers and readers; longer or symbolic ones as a scan buffer
// (a kernel of its own that carries the running value along the dim). The combine runs in the
// output's accumulation dtype (int64 for integer inputs, float32 for 16-bit floats).
std::vector<TensorBox> lower_prefix_scan(Lowering& L, const Node& n, ReductionType type) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  if (x.rank() == 0) return {with_dtype(x, m.dtype)};
  size_t dim = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
  auto len = x.sizes[dim].as_int();
  DType acc = acc_dtype(x.dtype, m.dtype);
  if (!len || *len > ir::realize_policy::max_prefix_reduction_scan(x.device)) {
    // Triton kernels keep the running value in registers and store it in the output's dtype (a
    // bfloat16 cumsum is one pass); C++ column-form kernels read the previous step back from the
    // buffer, which then holds the accumulation dtype.
    DType stored = L.options().triton ? m.dtype : acc;
    std::vector<Expr> at = ir::index_vars(x.rank());
    TensorBox r = L.add_scan(stored, x.device, x.sizes, static_cast<int>(dim), type,
                             ir::cast(x.load(at), acc), x.origins);
    return {with_dtype(r, m.dtype)};
  }
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Expr u = ir::reduction_var(0);
  std::vector<Expr> at = idx;
  at[dim] = u;
  Value in_prefix =
      ir::binary(Op::Le, ir::index_expr(u, DType::Int64), ir::index_expr(idx[dim], DType::Int64));
  Value body = ir::where(in_prefix, ir::cast(x.load(at), acc), identity(type, acc));
  TensorBox r = L.add_reduction(acc, x.device, x.sizes, {x.sizes[dim]}, type, body, x.origins);
  return {with_dtype(r, m.dtype)};
}

// The scan dim of a cumulative op, or nullopt when the scan is too long for a prefix reduction.
std::optional<size_t> short_scan_dim(const Lowering& L, const Node& n, const TensorBox& x) {
  size_t dim = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
  auto len = x.sizes[dim].as_int();
  if (!len || *len > ir::realize_policy::max_prefix_reduction_scan(x.device)) return std::nullopt;
  return dim;
}

Value index_of(const Expr& e) {
  return ir::index_expr(e, DType::Int64);
}

// The most extreme value an accumulator of dtype d can hold (the identity of max or min).
Value extreme(DType d, bool lowest) {
  if (graph::is_floating(d)) {
    return ir::constant(
        lowest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(),
        d);
  }
  return ir::int_constant(
      lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(), d);
}

// cummax/cummin(x, dim) -> (values, indices): the values are a masked prefix max (min); the index
// is eager's, the *last* position holding it (eager replaces on >=), and the last NaN once one has
// appeared. An arg-reduction keeps the first position, so it walks the prefix backwards: u = 0 is
// element i itself, u = i the first element, and the answer is i - u.
//
// Longer (or symbolic) dims scan: the values a running max (min), then the indices a running max
// of the positions that hold their prefix's extreme (x_j == m_j, or a NaN), -1 elsewhere: the
// last such position is eager's index (at j the extreme was reached or tied, which eager's >=
// replaces; a NaN replaces any value and each later NaN the one before).
std::vector<TensorBox> scanned_extreme(Lowering& L, const Node& n, const TensorBox& x, size_t dim,
                                       bool is_max) {
  DType acc = graph::is_floating(x.dtype) ? opmath(x.dtype) : DType::Int64;
  ReductionType type = is_max ? ReductionType::Max : ReductionType::Min;
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Value xj = ir::cast(x.load(idx), acc);
  TensorBox values = L.add_scan(acc, x.device, x.sizes, static_cast<int>(dim), type, xj, x.origins);
  Value mj = ir::cast(values.load(idx), acc);
  Value holds = ir::binary(Op::Eq, xj, mj);
  if (graph::is_floating(acc)) holds = ir::binary(Op::LogicalOr, holds, ir::unary(Op::IsNan, xj));
  Value position = ir::where(holds, index_of(idx[dim]), ir::int_constant(-1, DType::Int64));
  TensorBox indices = L.add_scan(DType::Int64, x.device, x.sizes, static_cast<int>(dim),
                                 ReductionType::Max, position, x.origins);
  return {with_dtype(values, L.meta(n, 0).dtype), with_dtype(indices, L.meta(n, 1).dtype)};
}

std::vector<TensorBox> lower_cumulative_extreme(Lowering& L, const Node& n, bool is_max) {
  const TensorBox& x = L.box_of(n, 0);
  if (x.rank() == 0) return {};
  auto dim = short_scan_dim(L, n, x);
  if (!dim) {
    size_t d = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
    return scanned_extreme(L, n, x, d, is_max);
  }
  DType acc = graph::is_floating(x.dtype) ? opmath(x.dtype) : DType::Int64;
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Expr u = ir::reduction_var(0);
  Value in_prefix = ir::binary(Op::Le, index_of(u), index_of(idx[*dim]));
  std::vector<Expr> forward = idx, backward = idx;
  forward[*dim] = u;
  backward[*dim] = idx[*dim] - u;
  Value fill = extreme(acc, is_max);
  Value ahead = ir::where(in_prefix, ir::cast(x.load(forward), acc), fill);
  Value behind = ir::where(in_prefix, mask_loads(ir::cast(x.load(backward), acc), in_prefix), fill);
  std::vector<Expr> range = {x.sizes[*dim]};
  TensorBox values =
      L.add_reduction(acc, x.device, x.sizes, range,
                      is_max ? ReductionType::Max : ReductionType::Min, ahead, x.origins);
  TensorBox steps_back =
      L.add_reduction(DType::Int64, x.device, x.sizes, range,
                      is_max ? ReductionType::ArgMax : ReductionType::ArgMin, behind, x.origins);
  const graph::TensorMeta& im = L.meta(n, 1);
  Value position = ir::sub(index_of(idx[*dim]), steps_back.load(idx));
  TensorBox indices{im.dtype, im.device, im.sizes, ir::cast(position, im.dtype),
                    steps_back.origins};
  return {with_dtype(values, L.meta(n, 0).dtype), indices};
}

// logcumsumexp(x, dim): log(sum_{j<=i} exp(x_j)), shifted by the prefix max m_i for range (by 0
// where m_i is infinite, so that all -inf gives -inf and any +inf gives +inf).
std::vector<TensorBox> lower_logcumsumexp(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  if (x.rank() == 0 || !graph::is_floating(m.dtype)) return {};
  auto dim = short_scan_dim(L, n, x);
  DType acc = opmath(m.dtype);
  if (!dim) {
    // A scan whose combine is log-add-exp (prelude: coil_logaddexp), stored as the cumulative
    // sums are (lower_prefix_scan).
    size_t d = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
    std::vector<Expr> at = ir::index_vars(x.rank());
    TensorBox r =
        L.add_scan(L.options().triton ? m.dtype : acc, x.device, x.sizes, static_cast<int>(d),
                   ReductionType::LogSumExp, ir::cast(x.load(at), acc), x.origins);
    return {with_dtype(r, m.dtype)};
  }
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Expr u = ir::reduction_var(0);
  Value in_prefix = ir::binary(Op::Le, index_of(u), index_of(idx[*dim]));
  std::vector<Expr> at = idx;
  at[*dim] = u;
  Value xj = ir::cast(x.load(at), acc);
  std::vector<Expr> range = {x.sizes[*dim]};
  TensorBox mx = L.add_reduction(acc, x.device, x.sizes, range, ReductionType::Max,
                                 ir::where(in_prefix, xj, extreme(acc, true)), x.origins);
  Value mi = mx.load(idx);
  Value shift = ir::where(ir::unary(Op::IsInf, mi), ir::constant(0.0, acc), mi);
  Value term = ir::unary(Op::Exp, ir::sub(xj, shift));
  TensorBox sum = L.add_reduction(acc, x.device, x.sizes, range, ReductionType::Sum,
                                  ir::where(in_prefix, term, ir::constant(0.0, acc)), x.origins);
  Value out = ir::add(ir::unary(Op::Log, sum.load(idx)), shift);
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(out, m.dtype), x.origins}};
}

// addmv(self, mat, vec, beta=1, alpha=1) = beta * self + alpha * (mat @ vec), the product as a
// reduction over mat's columns.
std::vector<TensorBox> lower_addmv(Lowering& L, const Node& n) {
  const TensorBox& self = L.box_of(n, 0);
  const TensorBox& mat = L.box_of(n, 1);
  const TensorBox& vec = L.box_of(n, 2);
  const graph::TensorMeta& m = L.meta(n);
  if (mat.rank() != 2 || vec.rank() != 1) return {};
  DType acc = opmath(m.dtype);
  TensorBox product{acc, mat.device, mat.sizes, Value(), mat.origins};
  std::vector<Expr> ij = ir::index_vars(2);
  product.body = ir::mul(ir::cast(mat.load(ij), acc), ir::cast(vec.load({ij[1]}), acc));
  product.origins.insert(vec.origins.begin(), vec.origins.end());
  TensorBox mv = reduce(L, product, {{1}, false}, ReductionType::Sum, acc, acc);
  std::vector<Expr> i = ir::index_vars(1);
  Value alpha = L.arg(n, 4, "alpha") ? L.scalar(*L.arg(n, 4, "alpha"), acc) : Value();
  Value beta = L.arg(n, 3, "beta") ? L.scalar(*L.arg(n, 3, "beta"), acc) : Value();
  Value prod = alpha ? ir::mul(mv.load(i), alpha) : mv.load(i);
  bool beta_zero = beta && ir::is_float_constant(beta, 0.0);
  Value body = prod;
  if (!beta_zero) {
    Value s = ir::cast(self.load(broadcast_index(self, m.sizes, i)), acc);
    body = ir::add(beta ? ir::mul(s, beta) : s, prod);
  }
  TensorBox out{m.dtype, m.device, m.sizes, ir::cast(body, m.dtype), mv.origins};
  out.origins.insert(self.origins.begin(), self.origins.end());
  return {out};
}

}  // namespace

void register_reductions(Registry& r) {
  r["aten.linalg_vector_norm.default"] = lower_vector_norm;
  r["aten.addmv.default"] = lower_addmv;
  r["aten.cumsum.default"] = [](Lowering& L, const Node& n) {
    return lower_prefix_scan(L, n, ReductionType::Sum);
  };
  r["aten.cumprod.default"] = [](Lowering& L, const Node& n) {
    return lower_prefix_scan(L, n, ReductionType::Prod);
  };
  r["aten.cummax.default"] = [](Lowering& L, const Node& n) {
    return lower_cumulative_extreme(L, n, true);
  };
  r["aten.cummin.default"] = [](Lowering& L, const Node& n) {
    return lower_cumulative_extreme(L, n, false);
  };
  r["aten.logcumsumexp.default"] = lower_logcumsumexp;
  r["aten.dist.default"] = lower_dist;
  for (const char* name : {"aten.sum.dim_IntList", "aten.sum.default"}) {
    r[name] = [](Lowering& L, const Node& n) { return lower_sum(L, n, false); };
  }
  for (const char* name : {"aten.mean.dim", "aten.mean.default"}) {
    r[name] = [](Lowering& L, const Node& n) { return lower_sum(L, n, true); };
  }
  r["aten.prod.dim_int"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    const graph::TensorMeta& m = L.meta(n);
    ReduceSpec spec{reduce_dims(L, L.arg(n, 1, "dim"), x.rank()), flag(L, n, 2, "keepdim")};
    DType acc = acc_dtype(x.dtype, m.dtype);
    return {with_dtype(reduce(L, x, spec, ReductionType::Prod, acc, acc), m.dtype)};
  };
  r["aten.prod.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    const graph::TensorMeta& m = L.meta(n);
    DType acc = acc_dtype(x.dtype, m.dtype);
    return {with_dtype(
        reduce(L, x, {reduce_dims(L, nullptr, x.rank()), false}, ReductionType::Prod, acc, acc),
        m.dtype)};
  };
  r["aten.amax.default"] = [](Lowering& L, const Node& n) {
    return lower_minmax(L, n, ReductionType::Max, false);
  };
  r["aten.amin.default"] = [](Lowering& L, const Node& n) {
    return lower_minmax(L, n, ReductionType::Min, false);
  };
  r["aten.max.default"] = [](Lowering& L, const Node& n) {
    return lower_minmax(L, n, ReductionType::Max, true);
  };
  r["aten.min.default"] = [](Lowering& L, const Node& n) {
    return lower_minmax(L, n, ReductionType::Min, true);
  };
  r["aten.argmax.default"] = [](Lowering& L, const Node& n) {
    return lower_arg(L, n, ReductionType::ArgMax);
  };
  r["aten.argmin.default"] = [](Lowering& L, const Node& n) {
    return lower_arg(L, n, ReductionType::ArgMin);
  };
  for (auto [name, val, arg] :
       {std::tuple{"aten.max.dim", ReductionType::Max, ReductionType::ArgMax},
        std::tuple{"aten.min.dim", ReductionType::Min, ReductionType::ArgMin}}) {
    r[name] = [val, arg](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      const TensorBox& x = L.box_of(n, 0);
      ReduceSpec spec{reduce_dims(L, L.arg(n, 1, "dim"), x.rank()), flag(L, n, 2, "keepdim")};
      DType acc = opmath(x.dtype);
      TensorBox values = with_dtype(reduce(L, x, spec, val, acc, acc), L.meta(n, 0).dtype);
      TensorBox indices = reduce(L, x, spec, arg, acc, L.meta(n, 1).dtype);
      return {values, indices};
    };
  }
  for (auto [name, type] :
       {std::pair{"aten.any", ReductionType::Any}, std::pair{"aten.all", ReductionType::All}}) {
    auto fn = [type](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      const TensorBox& x = L.box_of(n, 0);
      bool all_dims = n.target.find(".default") != std::string::npos;
      ReduceSpec spec{reduce_dims(L, all_dims ? nullptr : L.arg(n, 1, "dim"), x.rank()),
                      all_dims ? false : flag(L, n, 2, "keepdim")};
      return {with_dtype(reduce(L, x, spec, type, DType::Bool, DType::Bool), L.meta(n).dtype)};
    };
    for (const char* overload : {".default", ".dim", ".dims"}) r[std::string(name) + overload] = fn;
  }
  r["aten._softmax.default"] = [](Lowering& L, const Node& n) {
    return lower_softmax(L, n, false);
  };
  r["aten._log_softmax.default"] = [](Lowering& L, const Node& n) {
    return lower_softmax(L, n, true);
  };
}

}  // namespace coil::lower
