// Lowerings of variance and the normalizations: var/std/var_mean, layer norm, batch norm (training
// and inference), group norm. Statistics are two passes that fuse into one kernel: the sum, then
// the deviations from its mean (var_and_mean).
#include <stdexcept>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"
#include "coil/lower/reduce.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;
using ir::ReductionType;

namespace {

// Corrected two-pass variance (Chan, Golub and LeVeque): m = sum(x) / N, then over d = x - m both
// S1 = sum(d) and S2 = sum(d * d) in one pass; mean = m + S1 / N and var = (S2 - S1 * S1 / N) /
// max(0, N - correction). S1 is the rounding error of m: for a row of equal values c, d is the
// same small number everywhere, so m + S1 / N is c exactly and var is 0, as eager's Welford gives
// (with m alone, (x - m) * rsqrt(var + eps) of a constant row is m's rounding times 1/sqrt(eps)).
struct Moments {
  TensorBox var, mean;
  // x - mean for an element e of x at x's index idx, as (e - m) - S1 / N: the same d the second
  // pass computed (a row cache can keep it), then the correction.
  ReducePre centre;
};

Moments var_and_mean(Lowering& L, const TensorBox& x, const Arg* dim_arg, const Arg& correction,
                     bool keepdim) {
  ReduceSpec spec{reduce_dims(L, dim_arg, x.rank()), true};
  DType acc = opmath(x.dtype);
  Expr count = 1;
  for (int64_t d : spec.dims) count = count * x.sizes[d];
  Value count_v = ir::cast(ir::index_expr(count, DType::Int64), acc);
  TensorBox sum = reduce(L, x, spec, ReductionType::Sum, acc, acc);
  auto per_element = [count_v](const TensorBox& stat, const TensorBox& of,
                               const std::vector<Expr>& idx) {
    return ir::div(stat.load(broadcast_index(stat, of.sizes, idx)), count_v);
  };
  auto deviation = [sum, x, per_element](Value e, const std::vector<Expr>& idx) {
    return ir::sub(e, per_element(sum, x, idx));
  };
  TensorBox s1 = reduce(L, x, spec, ReductionType::Sum, acc, acc, deviation);
  TensorBox sq =
      reduce(L, x, spec, ReductionType::Sum, acc, acc, [&](Value e, const std::vector<Expr>& idx) {
        Value dev = deviation(e, idx);
        return ir::mul(dev, dev);
      });
  Moments out;
  out.centre = [deviation, s1, x, per_element](Value e, const std::vector<Expr>& idx) {
    return ir::sub(deviation(e, idx), per_element(s1, x, idx));
  };
  TensorBox mean = sum;
  mean.body = ir::add(ir::div(sum.body, count_v), ir::div(s1.body, count_v));
  mean.origins.insert(s1.origins.begin(), s1.origins.end());
  TensorBox var = sq;
  // The correction may be a symbolic int (Dynamo makes Python ints dynamic too): the kernel
  // reads it like a size.
  Value denom =
      ir::binary(Op::Maximum, ir::sub(count_v, L.scalar(correction, acc)), ir::constant(0.0, acc));
  Value spread = ir::sub(sq.body, ir::div(ir::mul(s1.body, s1.body), count_v));
  var.body = ir::div(ir::binary(Op::Maximum, ir::constant(0.0, acc), spread), denom);
  var.origins.insert(s1.origins.begin(), s1.origins.end());
  if (!keepdim) {
    // Drop the size-1 reduced dims again.
    auto squeeze = [&](const TensorBox& b) {
      std::vector<Expr> sizes, idx;
      size_t k = 0;
      for (size_t d = 0; d < x.rank(); ++d) {
        if (has_dim(spec.dims, d)) {
          idx.push_back(0);
        } else {
          sizes.push_back(b.sizes[d]);
          idx.push_back(ir::index_var(static_cast<int>(k++)));
        }
      }
      return TensorBox{b.dtype, b.device, sizes, b.load(idx), b.origins};
    };
    var = squeeze(var);
    mean = squeeze(mean);
  }
  out.var = var;
  out.mean = mean;
  return out;
}

Arg correction_arg(const Lowering& L, const Node& n) {
  const Arg* c = L.arg(n, 2, "correction");
  if (!c || c->is_none()) return Arg::integer(1);
  return *c;
}

// native_layer_norm: (x - mean) * rsqrt(var + eps) * weight + bias over the trailing dims, with
// mean and rstd as extra outputs (what backward needs).
std::vector<TensorBox> lower_layer_norm(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  size_t k = L.int_list(n.args.at(1)).size();
  std::vector<Arg> dims;
  for (size_t d = x.rank() - k; d < x.rank(); ++d)
    dims.push_back(Arg::integer(static_cast<int64_t>(d)));
  Arg dim_arg = Arg::list_of(dims);
  Moments mo = var_and_mean(L, x, &dim_arg, Arg::integer(0), /*keepdim=*/true);
  DType acc = opmath(x.dtype);
  const Arg* eps_arg = L.arg(n, 4, "eps");
  Value eps = eps_arg ? L.scalar(*eps_arg, acc) : ir::constant(1e-5, acc);
  TensorBox rstd = mo.var;
  rstd.body = ir::unary(Op::Rsqrt, ir::add(mo.var.body, eps));
  const graph::TensorMeta& m = L.meta(n, 0);
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Value y = ir::mul(mo.centre(ir::cast(x.load(idx), acc), idx),
                    rstd.load(broadcast_index(rstd, x.sizes, idx)));
  std::set<std::string> origins = x.origins;
  for (size_t i : {2, 3}) {
    const Arg* a = L.arg(n, i, i == 2 ? "weight" : "bias");
    if (!a || a->is_none()) continue;
    const TensorBox& p = L.box(*a);
    Value pv = ir::cast(p.load(broadcast_index(p, x.sizes, idx)), acc);
    y = i == 2 ? ir::mul(y, pv) : ir::add(y, pv);
    origins.insert(p.origins.begin(), p.origins.end());
  }
  TensorBox out{m.dtype, m.device, m.sizes, ir::cast(y, m.dtype), origins};
  return {out, with_dtype(mo.mean, L.meta(n, 1).dtype), with_dtype(rstd, L.meta(n, 2).dtype)};
}

// y = (x - mean[c]) * invstd[c] * weight[c] + bias[c], over x's index, with c = dim 1.
Value normalize_channels(const Lowering& L, const Node& n, const TensorBox& x,
                         const TensorBox& mean, const TensorBox& invstd, DType acc,
                         std::set<std::string>& origins) {
  std::vector<Expr> idx = ir::index_vars(x.rank());
  auto channel = [&](const TensorBox& p) { return ir::cast(p.load({idx[1]}), acc); };
  Value y = ir::mul(ir::sub(ir::cast(x.load(idx), acc), channel(mean)), channel(invstd));
  for (size_t i : {1, 2}) {
    const Arg* a = L.arg(n, i, i == 1 ? "weight" : "bias");
    if (!a || a->is_none()) continue;
    const TensorBox& p = L.box(*a);
    y = i == 1 ? ir::mul(y, channel(p)) : ir::add(y, channel(p));
    origins.insert(p.origins.begin(), p.origins.end());
  }
  return y;
}

// _native_batch_norm_legit_no_training (batch norm in eval mode): per channel (dim 1),
// (x - running_mean) * rsqrt(running_var + eps) * weight + bias, in opmath; the saved mean and
// invstd outputs are empty, as eager returns them.
std::vector<TensorBox> lower_batch_norm_inference(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  if (x.rank() < 2) throw std::runtime_error("batch norm of a tensor with fewer than 2 dims");
  DType acc = opmath(x.dtype);
  const Arg* eps_arg = L.arg(n, 6, "eps");
  Value eps = eps_arg ? L.scalar(*eps_arg, acc) : ir::constant(1e-5, acc);
  const TensorBox& mean = L.box(*L.arg(n, 3, "running_mean"));
  const TensorBox& var = L.box(*L.arg(n, 4, "running_var"));
  TensorBox invstd = var;
  invstd.dtype = acc;
  invstd.body = ir::unary(Op::Rsqrt, ir::add(ir::cast(var.body, acc), eps));
  std::set<std::string> origins = x.origins;
  Value y = normalize_channels(L, n, x, mean, invstd, acc, origins);
  const graph::TensorMeta& m = L.meta(n, 0);
  std::vector<TensorBox> out = {
      TensorBox{m.dtype, m.device, m.sizes, ir::cast(y, m.dtype), origins}};
  for (size_t i : {1, 2}) {
    const graph::TensorMeta& e = L.meta(n, i);
    out.push_back(TensorBox{e.dtype, e.device, e.sizes, ir::constant(0.0, e.dtype), {}});
  }
  return out;
}

// Per-channel (dim 1) statistics of batch norm in training: the mean and biased variance over
// every other dim, as [C] boxes in acc.
std::pair<TensorBox, TensorBox> channel_stats(Lowering& L, const TensorBox& x) {
  std::vector<Arg> dims;
  for (size_t d = 0; d < x.rank(); ++d)
    if (d != 1) dims.push_back(Arg::integer(static_cast<int64_t>(d)));
  Arg dim_arg = Arg::list_of(dims);
  Moments mo = var_and_mean(L, x, &dim_arg, Arg::integer(0), /*keepdim=*/false);
  return {mo.mean, mo.var};
}

// Batch norm in training mode (_native_batch_norm_legit_functional, _native_batch_norm_legit
// .no_stats, _batch_norm_with_update_functional): normalizes with the batch's statistics and
// returns (out, save_mean, save_invstd[, new running_mean, new running_var]); the running
// statistics move by momentum towards the batch mean and the unbiased batch variance. With
// training false (functional form only) it is the inference formula with the running statistics.
std::vector<TensorBox> lower_batch_norm_training(Lowering& L, const Node& n, bool has_running,
                                                 bool has_training_flag) {
  const TensorBox& x = L.box_of(n, 0);
  if (x.rank() < 2) throw std::runtime_error("batch norm of a tensor with fewer than 2 dims");
  size_t next = has_running ? 5 : 3;
  bool training = true;
  if (has_training_flag) {
    const Arg* t = L.arg(n, next, "training");
    training = t && t->kind == Arg::Kind::Bool && t->b;
    ++next;
  }
  if (!training) return {};  // inference with running statistics: left to the ATen op
  // Eager's CPU kernel for bf16/fp16 inputs saves statistics that differ from the fp32 ones by more
  // than rounding (its invstd can be a bf16 ulp off the correctly rounded value), and normalizes
  // with them; near-zero outputs then differ beyond bf16 tolerances. Matching eager on CPU means
  // running its kernel there.
  if (!L.options().triton && (x.dtype == DType::BFloat16 || x.dtype == DType::Float16)) return {};
  const Arg* mom_arg = L.arg(n, next, "momentum");
  const Arg* eps_arg = L.arg(n, next + 1, "eps");
  DType acc = opmath(x.dtype);
  Value eps = eps_arg ? L.scalar(*eps_arg, acc) : ir::constant(1e-5, acc);
  auto [mean, var] = channel_stats(L, x);
  TensorBox invstd = var;
  invstd.body = ir::unary(Op::Rsqrt, ir::add(var.body, eps));
  // Eager normalizes with the statistics as it saves them (in the saved dtype), so the output is
  // computed from the saved values too.
  TensorBox saved_mean = with_dtype(mean, L.meta(n, 1).dtype);
  TensorBox saved_invstd = with_dtype(invstd, L.meta(n, 2).dtype);
  std::set<std::string> origins = x.origins;
  Value y = normalize_channels(L, n, x, saved_mean, saved_invstd, acc, origins);
  const graph::TensorMeta& m = L.meta(n, 0);
  std::vector<TensorBox> out = {
      TensorBox{m.dtype, m.device, m.sizes, ir::cast(y, m.dtype), origins}, saved_mean,
      saved_invstd};
  if (!has_running || n.meta.size() < 5) return out;
  Expr count = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    if (d != 1) count = count * x.sizes[d];
  Value count_v = ir::cast(ir::index_expr(count, DType::Int64), acc);
  Value momentum = mom_arg ? L.scalar(*mom_arg, acc) : ir::constant(0.1, acc);
  Value keep = ir::sub(ir::constant(1.0, acc), momentum);
  Value unbias = ir::div(count_v, ir::binary(Op::Maximum, ir::sub(count_v, ir::constant(1.0, acc)),
                                             ir::constant(1.0, acc)));
  // _batch_norm_with_update_functional returns an empty `reserve` tensor before the statistics.
  size_t first_running_output = has_training_flag ? 3 : 4;
  if (!has_training_flag) {
    const graph::TensorMeta& e = L.meta(n, 3);
    out.push_back(TensorBox{e.dtype, e.device, e.sizes, ir::int_constant(0, e.dtype), {}});
  }
  std::vector<Expr> c = {ir::index_var(0)};
  for (size_t i : {3, 4}) {
    const TensorBox& running = L.box(*L.arg(n, i, i == 3 ? "running_mean" : "running_var"));
    Value batch = i == 3 ? mean.load(c) : ir::mul(var.load(c), unbias);
    Value moved = ir::add(ir::mul(ir::cast(running.load(c), acc), keep), ir::mul(batch, momentum));
    const graph::TensorMeta& rm = L.meta(n, first_running_output + i - 3);
    TensorBox b{rm.dtype, rm.device, rm.sizes, ir::cast(moved, rm.dtype), running.origins};
    b.origins.insert(mean.origins.begin(), mean.origins.end());
    out.push_back(b);
  }
  return out;
}

// native_group_norm(x, weight, bias, N, C, HxW, group, eps) -> (out, mean, rstd): statistics per
// (sample, group) over the group's channels and every spatial position; weight/bias per channel.
std::vector<TensorBox> lower_group_norm(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  int64_t N = int_of(L, n.args.at(3)), C = int_of(L, n.args.at(4));
  int64_t hw = int_of(L, n.args.at(5)), G = int_of(L, n.args.at(6));
  if (G <= 0 || C % G != 0 || x.rank() < 2) return {};
  DType acc = opmath(x.dtype);
  Value eps = L.scalar(n.args.at(7), acc);
  TensorBox grouped = reshape(x, {N, G, (C / G) * hw});
  Arg dim_arg = Arg::list_of({Arg::integer(2)});
  auto [var, mean, centre] = var_and_mean(L, grouped, &dim_arg, Arg::integer(0), false);
  (void)centre;  // x's index is not grouped's: y subtracts the corrected mean
  TensorBox rstd = var;
  rstd.body = ir::unary(Op::Rsqrt, ir::add(var.body, eps));
  std::vector<Expr> idx = ir::index_vars(x.rank());
  std::vector<Expr> ng = {idx[0], sym::floordiv(idx[1], Expr(C / G))};
  Value y = ir::mul(ir::sub(ir::cast(x.load(idx), acc), mean.load(ng)), rstd.load(ng));
  std::set<std::string> origins = x.origins;
  for (size_t i : {1, 2}) {
    const Arg& a = n.args.at(i);
    if (a.is_none()) continue;
    const TensorBox& p = L.box(a);
    Value pv = ir::cast(p.load({idx[1]}), acc);
    y = i == 1 ? ir::mul(y, pv) : ir::add(y, pv);
    origins.insert(p.origins.begin(), p.origins.end());
  }
  const graph::TensorMeta& m = L.meta(n, 0);
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(y, m.dtype), origins},
          with_dtype(mean, L.meta(n, 1).dtype), with_dtype(rstd, L.meta(n, 2).dtype)};
}

}  // namespace

void register_norms(Registry& r) {
  r["aten.native_layer_norm.default"] = lower_layer_norm;
  r["aten._native_batch_norm_legit_no_training.default"] = lower_batch_norm_inference;
  r["aten._native_batch_norm_legit_functional.default"] = [](Lowering& L, const Node& n) {
    return lower_batch_norm_training(L, n, /*has_running=*/true, /*has_training_flag=*/true);
  };
  r["aten._native_batch_norm_legit.no_stats"] = [](Lowering& L, const Node& n) {
    return lower_batch_norm_training(L, n, /*has_running=*/false, /*has_training_flag=*/true);
  };
  r["aten._batch_norm_with_update_functional.default"] = [](Lowering& L, const Node& n) {
    return lower_batch_norm_training(L, n, /*has_running=*/true, /*has_training_flag=*/false);
  };
  r["aten.native_group_norm.default"] = lower_group_norm;
  r["aten.var.correction"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    auto [var, mean, centre] =
        var_and_mean(L, x, L.arg(n, 1, "dim"), correction_arg(L, n), flag(L, n, 3, "keepdim"));
    return {with_dtype(var, L.meta(n).dtype)};
  };
  r["aten.std.correction"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    auto [var, mean, centre] =
        var_and_mean(L, x, L.arg(n, 1, "dim"), correction_arg(L, n), flag(L, n, 3, "keepdim"));
    var.body = ir::unary(Op::Sqrt, var.body);
    return {with_dtype(var, L.meta(n).dtype)};
  };
  r["aten.var_mean.correction"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    auto [var, mean, centre] =
        var_and_mean(L, x, L.arg(n, 1, "dim"), correction_arg(L, n), flag(L, n, 3, "keepdim"));
    return {with_dtype(var, L.meta(n, 0).dtype), with_dtype(mean, L.meta(n, 1).dtype)};
  };
}

}  // namespace coil::lower
