// Lowerings of data movement beyond plain views: flip, repeat, unfold, diagonal, the *_scatter ops
// that write one tensor into a region of another (slice, select, diagonal), copy, and the *_copy
// forms of views. Like views, each is an index remapping composed into the body; a scatter is a
// `where` between the base and the source, with the source's loads masked to the region.
#include <stdexcept>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

namespace {

Value index_value(const Expr& e) {
  return ir::index_expr(e, DType::Int64);
}

Value both(Value a, Value b) {
  return ir::binary(Op::LogicalAnd, a, b);
}

// Integer argument i (or keyword `name`), or `fallback` when absent or None.
int64_t int_or(const Lowering& L, const Node& n, size_t i, const std::string& name,
               int64_t fallback) {
  const Arg* a = L.arg(n, i, name);
  return a && !a->is_none() ? int_of(L, *a) : fallback;
}

// out = base where `inside`, else src at src_idx; src's loads are masked to `inside` so indices
// outside the region are never read. Both are cast to the output dtype.
TensorBox overwrite_region(const Lowering& L, const Node& n, const TensorBox& base,
                           const TensorBox& src, const std::vector<Expr>& src_idx, Value inside) {
  const graph::TensorMeta& m = L.meta(n);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  sym::RangeEnv env = ranges_for(m.sizes);
  std::vector<Expr> simplified;
  for (const Expr& e : src_idx) simplified.push_back(sym::simplify(e, env));
  Value from_src = mask_loads(ir::cast(src.load(simplified), m.dtype), inside);
  Value from_base =
      mask_loads(ir::cast(base.load(idx), m.dtype), ir::unary(Op::LogicalNot, inside));
  TensorBox out{m.dtype, m.device, m.sizes, ir::where(inside, from_src, from_base), base.origins};
  out.origins.insert(src.origins.begin(), src.origins.end());
  return out;
}

std::vector<TensorBox> lower_flip(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  std::vector<Expr> idx = ir::index_vars(x.rank());
  for (const Expr& d : L.int_list(n.args.at(1))) {
    size_t dim = wrap_dim(static_value(d, "a dim"), x.rank());
    idx[dim] = x.sizes[dim] - 1 - idx[dim];
  }
  return {remap(x, x.sizes, idx)};
}

// repeat(x, repeats): the output has len(repeats) dims; x is aligned to the trailing ones and read
// at each index modulo its size.
std::vector<TensorBox> lower_repeat(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  size_t lead = m.rank() - x.rank();
  std::vector<Expr> idx(x.rank());
  for (size_t j = 0; j < x.rank(); ++j) {
    Expr v = ir::index_var(static_cast<int>(lead + j));
    idx[j] = x.sizes[j] == m.sizes[lead + j] ? v : sym::mod(v, x.sizes[j]);
  }
  return {remap(x, m.sizes, idx)};
}

// unfold(x, dim, size, step): dim becomes the window number; a new last dim walks the window.
std::vector<TensorBox> lower_unfold(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  size_t dim = wrap_dim(int_of(L, n.args.at(1)), x.rank());
  int64_t step = int_of(L, n.args.at(3));
  std::vector<Expr> idx = ir::index_vars(x.rank());
  if (x.rank() == 0) return {remap(x, m.sizes, {})};
  idx[dim] = idx[dim] * step + ir::index_var(static_cast<int>(m.rank() - 1));
  return {remap(x, m.sizes, idx)};
}

struct Diagonal {
  int64_t offset;
  size_t dim1, dim2;
};

Diagonal diagonal_args(const Lowering& L, const Node& n, size_t first, size_t rank) {
  Diagonal d;
  d.offset = int_or(L, n, first, "offset", 0);
  d.dim1 = wrap_dim(int_or(L, n, first + 1, "dim1", 0), rank);
  d.dim2 = wrap_dim(int_or(L, n, first + 2, "dim2", 1), rank);
  if (d.dim1 == d.dim2) throw std::logic_error("diagonal: dim1 and dim2 are the same");
  return d;
}

// The index into x (rank r) of element `out_idx` of its diagonal view: the other dims in order,
// then the position k along the diagonal.
std::vector<Expr> diagonal_source_index(const Diagonal& d, size_t rank,
                                        const std::vector<Expr>& out_idx) {
  std::vector<Expr> idx(rank);
  size_t k = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (i != d.dim1 && i != d.dim2) idx[i] = out_idx[k++];
  }
  Expr pos = out_idx[k];
  idx[d.dim1] = d.offset >= 0 ? pos : pos - d.offset;
  idx[d.dim2] = d.offset >= 0 ? pos + d.offset : pos;
  return idx;
}

std::vector<TensorBox> lower_diagonal(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  Diagonal d = diagonal_args(L, n, 1, x.rank());
  return {remap(x, m.sizes, diagonal_source_index(d, x.rank(), ir::index_vars(m.rank())))};
}

// diagonal_scatter(x, src, offset, dim1, dim2): x with its diagonal replaced by src.
std::vector<TensorBox> lower_diagonal_scatter(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const TensorBox& src = L.box_of(n, 1);
  Diagonal d = diagonal_args(L, n, 2, x.rank());
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Value on_diagonal = ir::binary(Op::Eq, index_value(idx[d.dim2] - idx[d.dim1]),
                                 ir::int_constant(d.offset, DType::Int64));
  std::vector<Expr> src_idx;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (i != d.dim1 && i != d.dim2) src_idx.push_back(idx[i]);
  }
  src_idx.push_back(d.offset >= 0 ? idx[d.dim1] : idx[d.dim2]);
  return {overwrite_region(L, n, x, src, src_idx, on_diagonal)};
}

// slice_scatter(x, src, dim, start, end, step): x with x[start:end:step] (along dim) replaced.
std::vector<TensorBox> lower_slice_scatter(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const TensorBox& src = L.box_of(n, 1);
  size_t dim = wrap_dim(int_or(L, n, 2, "dim", 0), x.rank());
  const Arg* s = L.arg(n, 3, "start");
  Expr start = s && !s->is_none() ? slice_start(L.int_arg(*s), x.sizes[dim]) : Expr(0);
  int64_t step = int_or(L, n, 5, "step", 1);
  Expr count = src.sizes[dim];
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Expr rel = idx[dim] - start;
  Value inside = both(ir::binary(Op::Ge, index_value(rel), ir::int_constant(0, DType::Int64)),
                      ir::binary(Op::Lt, index_value(rel), index_value(count * step)));
  if (step != 1) {
    inside = both(inside, ir::binary(Op::Eq, index_value(sym::mod(rel, step)),
                                     ir::int_constant(0, DType::Int64)));
  }
  std::vector<Expr> src_idx = idx;
  src_idx[dim] = step == 1 ? rel : sym::floordiv(rel, step);
  return {overwrite_region(L, n, x, src, src_idx, inside)};
}

// select_scatter(x, src, dim, index): x with x.select(dim, index) replaced by src.
std::vector<TensorBox> lower_select_scatter(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const TensorBox& src = L.box_of(n, 1);
  size_t dim = wrap_dim(int_of(L, n.args.at(2)), x.rank());
  Expr index = wrap_index(L.int_arg(n.args.at(3)), x.sizes[dim]);
  std::vector<Expr> idx = ir::index_vars(x.rank());
  Value inside = ir::binary(Op::Eq, index_value(idx[dim]), index_value(index));
  std::vector<Expr> src_idx;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (i != dim) src_idx.push_back(idx[i]);
  }
  return {overwrite_region(L, n, x, src, src_idx, inside)};
}

// copy(self, src): src broadcast to self's shape, in self's dtype.
std::vector<TensorBox> lower_copy(Lowering& L, const Node& n) {
  const graph::TensorMeta& m = L.meta(n);
  const TensorBox& src = L.box_of(n, 1);
  std::vector<Expr> idx = broadcast_index(src, m.sizes, ir::index_vars(m.rank()));
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(src.load(idx), m.dtype), src.origins}};
}

// narrow(x, dim, start, length) = x[start:start+length] along dim.
std::vector<TensorBox> lower_narrow(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  size_t dim = wrap_dim(int_of(L, n.args.at(1)), x.rank());
  Expr start = wrap_index(L.int_arg(n.args.at(2)), x.sizes[dim]);
  return {slice(x, dim, start, 1, L.meta(n).sizes)};
}

}  // namespace

void register_movement(Registry& r) {
  r["aten.flip.default"] = lower_flip;
  r["aten.repeat.default"] = lower_repeat;
  r["aten.unfold.default"] = lower_unfold;
  r["aten.diagonal.default"] = lower_diagonal;
  r["aten.diagonal_scatter.default"] = lower_diagonal_scatter;
  r["aten.slice_scatter.default"] = lower_slice_scatter;
  r["aten.select_scatter.default"] = lower_select_scatter;
  r["aten.copy.default"] = lower_copy;
  r["aten.copy_.default"] = [](Lowering& L, const Node& n) { return L.add_input_mutation(n); };
  r["aten.narrow.default"] = lower_narrow;
  r["aten.narrow_copy.default"] = lower_narrow;
  // The *_copy forms of views compute the same values as the views (a copy is what a view
  // becomes anyway when its result is stored).
  const std::pair<const char*, const char*> copies[] = {
      {"aten.permute_copy.default", "aten.permute.default"},
      {"aten.transpose_copy.int", "aten.transpose.int"},
      {"aten.t_copy.default", "aten.t.default"},
      {"aten.expand_copy.default", "aten.expand.default"},
      {"aten.slice_copy.Tensor", "aten.slice.Tensor"},
      {"aten.select_copy.int", "aten.select.int"},
      {"aten.as_strided_copy.default", "aten.as_strided.default"},
      {"aten.unbind_copy.int", "aten.unbind.int"},
      {"aten.split_copy.Tensor", "aten.split.Tensor"},
      {"aten.split_with_sizes_copy.default", "aten.split_with_sizes.default"},
      {"aten.squeeze_copy.dim", "aten.squeeze.dim"},
      {"aten.squeeze_copy.dims", "aten.squeeze.dims"},
      {"aten.squeeze_copy.default", "aten.squeeze.default"},
      {"aten.unsqueeze_copy.default", "aten.unsqueeze.default"},
      {"aten.alias_copy.default", "aten.alias.default"},
      {"aten.detach_copy.default", "aten.detach.default"},
      {"aten.diagonal_copy.default", "aten.diagonal.default"},
      {"aten.unfold_copy.default", "aten.unfold.default"},
  };
  for (const auto& [copy, view] : copies) {
    auto it = r.find(view);
    if (it == r.end())
      throw std::logic_error(std::string("register_movement: no lowering of ") + view);
    r[copy] = it->second;
  }
}

}  // namespace coil::lower
