// Lowerings of views and data movement: view/reshape/squeeze/unsqueeze (one reshape rule),
// permute/transpose, expand, slice, select, as_strided, split/unbind, cat, constant_pad_nd.
// A view is an index remapping composed into the body; nothing is copied.
#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;

sym::RangeEnv ranges_for(const std::vector<Expr>& sizes) {
  sym::RangeEnv env;
  for (size_t i = 0; i < sizes.size(); ++i)
    env.add_index_var(ir::index_var(static_cast<int>(i)), sizes[i]);
  return env;
}

TensorBox remap(const TensorBox& x, std::vector<Expr> sizes, const std::vector<Expr>& old_idx) {
  sym::RangeEnv env = ranges_for(sizes);
  std::vector<Expr> simplified;
  for (const Expr& e : old_idx) simplified.push_back(sym::simplify(e, env));
  return TensorBox{x.dtype, x.device, std::move(sizes), x.load(simplified), x.origins};
}

namespace {

// The strides a view of memory laid out with `strides` gets for new sizes, where it needs no copy
// (ATen's computeStride): each run of old dims that new dims merge or split must be contiguous
// within itself. Sizes are symbolic, so every test is an equality that holds for all values;
// where one cannot be shown (a run that may not be contiguous, a size that may be 1), the
// answer is nullopt and the caller remaps indices instead.
std::optional<std::vector<Expr>> view_strides(const std::vector<Expr>& old_sizes,
                                              const std::vector<Expr>& old_strides,
                                              const std::vector<Expr>& sizes) {
  std::vector<Expr> out(sizes.size(), Expr(1));
  if (old_sizes.empty()) return out;  // a 0-d tensor: every new dim has size 1
  int view_d = static_cast<int>(sizes.size()) - 1;
  Expr base = old_strides.back();
  Expr old_numel = 1, view_numel = 1;
  for (int d = static_cast<int>(old_sizes.size()) - 1; d >= 0; --d) {
    old_numel = old_numel * old_sizes[d];
    bool run_ends =
        d == 0 || (old_sizes[d - 1] != Expr(1) && old_strides[d - 1] != old_numel * base);
    if (!run_ends) continue;
    while (view_d >= 0 && (view_numel != old_numel || sizes[view_d] == Expr(1))) {
      out[view_d] = view_numel * base;
      view_numel = view_numel * sizes[view_d];
      --view_d;
    }
    if (view_numel != old_numel) return std::nullopt;
    if (d > 0) {
      base = old_strides[d - 1];
      old_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

// Row-major reinterpretation of x with new sizes (same numel).
TensorBox reshape(const TensorBox& x, const std::vector<Expr>& sizes) {
  if (sizes == x.sizes) return x;
  // A view of memory whose merged dims are contiguous: new strides, no floor division or modulo
  // (with symbolic sizes the simplifier cannot always fold (i // s) * s + i % s back into i).
  // (Static sizes simplify well enough, and their fusion decisions were tuned on that form:
  // there the remapping stays.)
  bool symbolic =
      std::any_of(x.sizes.begin(), x.sizes.end(), [](const Expr& e) { return !e.as_int(); });
  if (auto ref = symbolic ? as_strided_view(x) : std::nullopt) {
    if (auto strides = view_strides(x.sizes, ref->strides, sizes)) {
      Expr index = ref->offset;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (sizes[i] == Expr(1)) continue;  // its index is always 0
        index = index + (*strides)[i] * ir::index_var(static_cast<int>(i));
      }
      return TensorBox{x.dtype, x.device, sizes, ir::load(ref->buffer, x.dtype, index), x.origins};
    }
  }
  Expr flat = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    flat = flat * sizes[i] + ir::index_var(static_cast<int>(i));
  std::vector<Expr> old_idx(x.rank());
  for (size_t d = x.rank(); d-- > 0;) {
    old_idx[d] = d == 0 ? flat : sym::mod(flat, x.sizes[d]);
    flat = sym::floordiv(flat, x.sizes[d]);
  }
  // A size-1 dim's index is always 0; saying so keeps indices free of FloorDiv/Mod noise.
  for (size_t d = 0; d < x.rank(); ++d) {
    if (x.sizes[d] == Expr(1)) old_idx[d] = 0;
  }
  return remap(x, sizes, old_idx);
}

std::vector<TensorBox> lower_reshape(Lowering& L, const Node& n) {
  return {reshape(L.box_of(n, 0), L.meta(n).sizes)};
}

std::vector<TensorBox> lower_permute(Lowering& L, const Node& n, std::vector<int64_t> perm) {
  const TensorBox& x = L.box_of(n, 0);
  std::vector<Expr> sizes(x.rank()), old_idx(x.rank());
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t d = wrap_dim(perm[i], x.rank());
    sizes[i] = x.sizes[d];
    old_idx[d] = ir::index_var(static_cast<int>(i));
  }
  return {remap(x, sizes, old_idx)};
}

int64_t int_of(const Lowering& L, const Arg& a) {
  return static_value(L.int_arg(a), "an integer argument");
}

namespace {

// Whether v < 0 for every value of its symbols (true), for none (false); NeedsStaticValue when
// that depends on the symbols' values.
bool is_negative(const Expr& v) {
  sym::RangeEnv env;  // the graph's size symbols (SizeSymbolScope)
  if (sym::statically_known_true(sym::lt(v, 0), env)) return true;
  if (sym::statically_known_true(sym::le(0, v), env)) return false;
  throw NeedsStaticValue("the sign of index " + v.str() + " depends on the sizes");
}

Expr simplified(const Expr& e) {
  return sym::simplify(e, sym::RangeEnv{});
}

}  // namespace

Expr wrap_index(const Expr& v, const Expr& size) {
  return is_negative(v) ? simplified(v + size) : v;
}

Expr slice_start(const Expr& v, const Expr& size) {
  if (is_negative(v)) return simplified(sym::max(v + size, 0));
  return simplified(sym::min(v, size));
}

TensorBox slice(const TensorBox& x, size_t dim, Expr start, Expr step,
                const std::vector<Expr>& out_sizes) {
  std::vector<Expr> old_idx = ir::index_vars(x.rank());
  old_idx[dim] = start + step * ir::index_var(static_cast<int>(dim));
  return remap(x, out_sizes, old_idx);
}

std::vector<TensorBox> lower_slice(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const Arg* d = L.arg(n, 1, "dim");
  size_t dim = wrap_dim(d ? int_of(L, *d) : 0, x.rank());
  const Arg* s = L.arg(n, 2, "start");
  const Arg* st = L.arg(n, 4, "step");
  Expr start = s && !s->is_none() ? slice_start(L.int_arg(*s), x.sizes[dim]) : Expr(0);
  Expr step = st && !st->is_none() ? L.int_arg(*st) : Expr(1);
  return {slice(x, dim, start, step, L.meta(n).sizes)};
}

TensorBox select(const TensorBox& x, size_t dim, Expr index) {
  std::vector<Expr> sizes, old_idx;
  int k = 0;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d == dim) {
      old_idx.push_back(index);
      continue;
    }
    sizes.push_back(x.sizes[d]);
    old_idx.push_back(ir::index_var(k++));
  }
  return remap(x, sizes, old_idx);
}

std::vector<TensorBox> lower_select(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  size_t dim = wrap_dim(int_of(L, n.args.at(1)), x.rank());
  return {select(x, dim, wrap_index(L.int_arg(n.args.at(2)), x.sizes[dim]))};
}

std::vector<TensorBox> lower_expand(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  std::vector<Expr> idx = broadcast_index(x, m.sizes, ir::index_vars(m.rank()));
  return {TensorBox{x.dtype, x.device, m.sizes, x.load(idx), x.origins}};
}

std::vector<TensorBox> lower_as_strided(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  // as_strided addresses x's storage, so x must be in memory with the layout eager gave it.
  const graph::TensorMeta& xm = L.meta(L.graph().node(n.args.at(0).node));
  auto ref = as_strided_view(x);
  if (!ref || ref->strides != xm.strides) {
    TensorBox stored = L.realize(x, &xm.strides);
    ref = as_strided_view(stored);
  }
  Expr offset = m.offset;
  Expr index = offset;
  for (size_t i = 0; i < m.rank(); ++i)
    index = index + m.strides[i] * ir::index_var(static_cast<int>(i));
  // The realized copy starts at storage offset 0 where eager's tensor started at xm.offset.
  if (ref->buffer != L.graph().node(n.args.at(0).node).name)
    index = index - xm.offset + ref->offset;
  return {TensorBox{x.dtype, x.device, m.sizes, ir::load(ref->buffer, x.dtype, index), x.origins}};
}

void register_views(Registry& r) {
  for (const char* name :
       {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
        "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.unsqueeze.default",
        "aten.flatten.using_ints", "aten.unflatten.int", "aten.view_copy.default"}) {
    r[name] = lower_reshape;
  }
  r["aten.permute.default"] = [](Lowering& L, const Node& n) {
    std::vector<int64_t> perm;
    for (const Expr& e : L.int_list(n.args.at(1))) perm.push_back(static_value(e, "a permutation"));
    return lower_permute(L, n, perm);
  };
  r["aten.transpose.int"] = [](Lowering& L, const Node& n) {
    size_t rank = L.box_of(n, 0).rank();
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(i);
    if (rank > 0)
      std::swap(perm[wrap_dim(int_of(L, n.args.at(1)), rank)],
                perm[wrap_dim(int_of(L, n.args.at(2)), rank)]);
    return lower_permute(L, n, perm);
  };
  r["aten.t.default"] = [](Lowering& L, const Node& n) {
    size_t rank = L.box_of(n, 0).rank();
    return lower_permute(L, n,
                         rank == 2 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>(rank, 0));
  };
  r["aten.expand.default"] = lower_expand;
  r["aten.slice.Tensor"] = lower_slice;
  r["aten.select.int"] = lower_select;
  r["aten.as_strided.default"] = lower_as_strided;
  r["aten.split.Tensor"] = [](Lowering& L, const Node& n) {
    const TensorBox& x = L.box_of(n, 0);
    const Arg* d = L.arg(n, 2, "dim");
    size_t dim = wrap_dim(d ? int_of(L, *d) : 0, x.rank());
    std::vector<TensorBox> out;
    Expr start = 0;
    for (const graph::TensorMeta& m : n.meta) {
      out.push_back(slice(x, dim, start, 1, m.sizes));
      start = start + m.sizes[dim];
    }
    return out;
  };
  r["aten.split_with_sizes.default"] = r["aten.split.Tensor"];
  r["aten.unbind.int"] = [](Lowering& L, const Node& n) {
    const TensorBox& x = L.box_of(n, 0);
    const Arg* d = L.arg(n, 1, "dim");
    size_t dim = wrap_dim(d ? int_of(L, *d) : 0, x.rank());
    std::vector<TensorBox> out;
    for (size_t i = 0; i < n.meta.size(); ++i)
      out.push_back(select(x, dim, static_cast<int64_t>(i)));
    return out;
  };
  r["aten.cat.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const graph::TensorMeta& m = L.meta(n);
    const Arg* d = L.arg(n, 1, "dim");
    size_t dim = wrap_dim(d ? int_of(L, *d) : 0, m.rank());
    std::vector<Expr> idx = ir::index_vars(m.rank());
    Expr v = idx[dim];
    Value body;
    Expr offset = 0;
    std::set<std::string> origins;
    // Build from the last input backwards: where(v < end_k, input_k, rest).
    std::vector<std::pair<const TensorBox*, Expr>> parts;
    for (const Arg& a : n.args.at(0).list) {
      const TensorBox& b = L.box(a);
      // Legacy empty 1-D tensors are skipped by torch.cat whatever the dim.
      if (b.rank() == 1 && b.sizes[0] == Expr(0) && m.rank() != 1) continue;
      parts.push_back({&b, offset});
      offset = offset + b.sizes[dim];
      origins.insert(b.origins.begin(), b.origins.end());
    }
    for (size_t k = parts.size(); k-- > 0;) {
      const TensorBox& b = *parts[k].first;
      Expr start = parts[k].second;
      std::vector<Expr> bi = idx;
      bi[dim] = v - start;
      Value val = ir::cast(b.load(bi), m.dtype);
      if (!body) {
        body = val;
        continue;
      }
      Value end = ir::index_expr(start + b.sizes[dim], DType::Int64);
      Value in_part = ir::binary(ir::Op::Lt, ir::index_expr(v, DType::Int64), end);
      body = ir::where(in_part, mask_loads(val, in_part),
                       mask_loads(body, ir::unary(ir::Op::LogicalNot, in_part)));
    }
    if (!body) body = ir::int_constant(0, m.dtype);
    return {TensorBox{m.dtype, m.device, m.sizes, body, origins}};
  };
  r["aten.constant_pad_nd.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    const graph::TensorMeta& m = L.meta(n);
    std::vector<Expr> pad = L.int_list(n.args.at(1));
    const Arg* value = L.arg(n, 2, "value");
    std::vector<Expr> idx = ir::index_vars(m.rank()), xi = idx;
    Value inside = ir::int_constant(1, DType::Bool);
    bool masked = false;
    // pad lists (left, right) pairs starting from the last dim. A side padded by a number <= 0
    // (a negative pad crops) never reads outside the input: no condition for it, and a pad that
    // only crops is a strided copy (perf fuzzer seed 6064: 4.3x eager's time, each element read
    // under a mask that was always true).
    auto crops = [](const Expr& e) {
      auto v = e.as_int();
      return v && *v <= 0;
    };
    for (size_t p = 0; p + 1 < pad.size() && p / 2 < m.rank(); p += 2) {
      size_t dim = m.rank() - 1 - p / 2;
      xi[dim] = idx[dim] - pad[p];
      Value pos = ir::index_expr(xi[dim], DType::Int64);
      if (!crops(pad[p])) {
        Value ge = ir::binary(ir::Op::Ge, pos, ir::int_constant(0, DType::Int64));
        inside = ir::binary(ir::Op::LogicalAnd, inside, ge);
        masked = true;
      }
      if (!crops(pad[p + 1])) {
        Value lt = ir::binary(ir::Op::Lt, pos, ir::index_expr(x.sizes[dim], DType::Int64));
        inside = ir::binary(ir::Op::LogicalAnd, inside, lt);
        masked = true;
      }
    }
    if (!masked) return {TensorBox{m.dtype, m.device, m.sizes, x.load(xi), x.origins}};
    Value fill = value && !value->is_none() ? L.scalar(*value, opmath(m.dtype))
                                            : ir::int_constant(0, opmath(m.dtype));
    Value val = ir::cast(mask_loads(x.load(xi), inside), opmath(m.dtype));
    Value body = ir::cast(ir::where(inside, val, fill), m.dtype);
    return {TensorBox{m.dtype, m.device, m.sizes, body, x.origins}};
  };
}

}  // namespace coil::lower
