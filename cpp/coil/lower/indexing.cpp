// Lowerings of data-dependent indexing. Reads: aten.index.Tensor (advanced indexing: x[idx],
// x[:, i, j], broadcasting index tensors; take and embedding's decomposition arrive as it),
// index_select, gather, embedding. Writes: index_put (index_copy, index_fill and index_add arrive
// as it), scatter (src, value, reduce=add/multiply), scatter_add, scatter_reduce
// (sum/prod/amax/amin/mean, include_self either way).
//
// A read is a lazy body whose index mentions indirect symbols (ir::indirect), each bound to an
// element of an index tensor and the size of the dimension it indexes; the kernels check every
// such index. A write is a scatter buffer (ir::Buffer::Kind::Scatter): a copy of the input that
// then receives values at indirect positions.
//
// Anything these do not cover falls back to the ATen op: boolean masks (the result's shape
// depends on the data), dimensions of size 0 or unknown size, 0-d inputs to gather/scatter.
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "coil/codegen/triton/triton_ops.h"
#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

namespace {

bool is_index_dtype(DType d) {
  return d == DType::Int64 || d == DType::Int32;
}

// Sizes that indirect indices may address: positive for every value of the size symbols (a
// dynamic size is checked against at run time like a static one).
bool addressable(const Expr& size) {
  return sym::statically_known_true(sym::le(1, size), sym::RangeEnv{});
}

std::optional<int64_t> static_int(const Lowering& L, const Arg* a) {
  if (!a || a->is_none()) return std::nullopt;
  return L.int_arg(*a).as_int();
}

std::set<std::string> origins_of(std::initializer_list<const TensorBox*> boxes) {
  std::set<std::string> out;
  for (const TensorBox* b : boxes) out.insert(b->origins.begin(), b->origins.end());
  return out;
}

// Numpy broadcasting of static shapes; nullopt when they do not broadcast.
std::optional<std::vector<Expr>> broadcast_shapes(const std::vector<const TensorBox*>& boxes) {
  size_t rank = 0;
  for (const TensorBox* b : boxes) rank = std::max(rank, b->rank());
  std::vector<Expr> out(rank, Expr(1));
  for (const TensorBox* b : boxes) {
    size_t lead = rank - b->rank();
    for (size_t j = 0; j < b->rank(); ++j) {
      Expr& o = out[lead + j];
      if (b->sizes[j] == Expr(1) || b->sizes[j] == o) continue;
      if (o != Expr(1)) return std::nullopt;
      o = b->sizes[j];
    }
  }
  return out;
}

// An index tensor's element as an index expression, when it is computed from the loop indices
// alone: an arange, an arange plus an offset, their broadcasts (transformers' masks read a
// padding mask at [batch_arange, kv_arange]). nullopt for anything that depends on data.
std::optional<Expr> index_expression(Value v) {
  switch (v.op()) {
    case Op::IndexExpr:
      if (!v->args.empty() || ir::has_indirect(v->index)) return std::nullopt;
      return v->index;
    case Op::Constant:
      if (!is_index_dtype(v.dtype())) return std::nullopt;
      return Expr(v->ivalue);
    case Op::Cast:
      // (int64 arithmetic only below: an int32 sum could wrap where the expression does not.)
      if (v.dtype() != DType::Int64 || !is_index_dtype(v->args[0].dtype())) return std::nullopt;
      return index_expression(v->args[0]);
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      if (v.dtype() != DType::Int64) return std::nullopt;
      auto a = index_expression(v->args[0]);
      auto b = a ? index_expression(v->args[1]) : std::nullopt;
      if (!b) return std::nullopt;
      return v.op() == Op::Add ? *a + *b : v.op() == Op::Sub ? *a - *b : *a * *b;
    }
    default:
      return std::nullopt;
  }
}

// The position an index tensor's element `value` names in a dim of `size`, for a result whose
// index variables range over `extents`: the element's own index expression when it is one
// that stays inside [0, size) over those ranges (no check to make, and loops over it
// vectorize: a load at an affine index), else the indirect symbol, checked when it runs.
Expr index_position(Value value, const Expr& size, bool wrap, const std::vector<Expr>& extents) {
  if (auto e = index_expression(value)) {
    sym::RangeEnv env;
    for (size_t i = 0; i < extents.size(); ++i) {
      env.add_index_var(ir::index_var(static_cast<int>(i)), extents[i]);
    }
    if (sym::statically_known_true(sym::le(0, *e), env) &&
        sym::statically_known_true(sym::lt(*e, size), env))
      return *e;
  }
  return ir::indirect(value, size, wrap);
}

// Advanced indexing x[indices] (None entries take whole dims): the shape of the result and, for an
// index into it, the position in x.
struct AdvancedIndex {
  std::vector<Expr> sizes;                       // the result's shape
  std::vector<std::optional<size_t>> tensor_of;  // per dim of x: which index tensor, if any
  std::vector<const TensorBox*> tensors;
  std::vector<Expr> broadcast;  // shape the index tensors broadcast to
  size_t broadcast_at = 0;      // where those dims sit in the result
  std::vector<size_t> kept_at;  // per dim of x without an index tensor: its dim in the result

  // The position in x (one index per dim) for result index `idx`, and its indirect symbols.
  std::vector<Expr> position(const TensorBox& x, const std::vector<Expr>& idx,
                             std::vector<Expr>& syms) const {
    std::vector<Expr> bidx(
        idx.begin() + static_cast<std::ptrdiff_t>(broadcast_at),
        idx.begin() + static_cast<std::ptrdiff_t>(broadcast_at + broadcast.size()));
    std::vector<Expr> pos(x.rank());
    for (size_t d = 0; d < x.rank(); ++d) {
      if (!tensor_of[d]) {
        pos[d] = idx[kept_at[d]];
        continue;
      }
      const TensorBox& t = *tensors[*tensor_of[d]];
      pos[d] = index_position(t.load(broadcast_index(t, broadcast, bidx)), x.sizes[d],
                              /*wrap=*/true, sizes);
      if (ir::has_indirect(pos[d])) syms.push_back(pos[d]);
    }
    return pos;
  }
};

std::optional<AdvancedIndex> advanced_index(const Lowering& L, const TensorBox& x,
                                            const Arg& list) {
  if (list.kind != Arg::Kind::List || list.list.size() > x.rank()) return std::nullopt;
  AdvancedIndex a;
  a.tensor_of.assign(x.rank(), std::nullopt);
  std::vector<size_t> indexed;
  for (size_t d = 0; d < list.list.size(); ++d) {
    const Arg& item = list.list[d];
    if (item.is_none()) continue;
    if (!L.is_tensor(item)) return std::nullopt;
    const TensorBox& t = L.box(item);
    // Boolean masks select a data-dependent number of elements: left to ATen.
    if (!is_index_dtype(t.dtype) || !addressable(x.sizes[d])) return std::nullopt;
    a.tensor_of[d] = a.tensors.size();
    a.tensors.push_back(&t);
    indexed.push_back(d);
  }
  if (a.tensors.empty()) return std::nullopt;
  auto b = broadcast_shapes(a.tensors);
  if (!b) return std::nullopt;
  a.broadcast = *b;
  bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  // Adjacent indexed dims are replaced in place by the broadcast dims; otherwise those go first.
  a.broadcast_at = adjacent ? indexed.front() : 0;
  a.kept_at.assign(x.rank(), 0);
  size_t out = 0;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (out == a.broadcast_at && (adjacent ? d == indexed.front() : d == 0)) {
      a.sizes.insert(a.sizes.end(), a.broadcast.begin(), a.broadcast.end());
      out += a.broadcast.size();
    }
    if (a.tensor_of[d]) continue;
    a.kept_at[d] = out++;
    a.sizes.push_back(x.sizes[d]);
  }
  return a;
}

std::vector<TensorBox> lower_index(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const graph::TensorMeta& m = L.meta(n);
  auto a = advanced_index(L, x, n.args.at(1));
  if (!a || a->sizes != m.sizes) return {};
  std::vector<Expr> syms;
  std::vector<Expr> pos = a->position(x, ir::index_vars(m.rank()), syms);
  Value body = ir::guard_missing(ir::cast(x.load(pos), m.dtype), syms);
  std::set<std::string> origins = x.origins;
  for (const TensorBox* t : a->tensors) origins.insert(t->origins.begin(), t->origins.end());
  return {TensorBox{m.dtype, m.device, m.sizes, body, origins}};
}

// x with dim `dim` read at the indirect position `at` (the other dims at the result's indices).
TensorBox read_along(const TensorBox& x, size_t dim, const Expr& at, const graph::TensorMeta& m,
                     std::set<std::string> origins) {
  std::vector<Expr> pos = ir::index_vars(m.rank());
  pos[dim] = at;
  Value body = ir::guard_missing(ir::cast(x.load(pos), m.dtype), {at});
  return TensorBox{m.dtype, m.device, m.sizes, body, std::move(origins)};
}

std::vector<TensorBox> lower_index_select(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const TensorBox& index = L.box_of(n, 2);
  const graph::TensorMeta& m = L.meta(n);
  if (x.rank() == 0 || index.rank() > 1 || !is_index_dtype(index.dtype)) return {};
  size_t dim = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
  if (!addressable(x.sizes[dim]) || m.rank() != x.rank()) return {};
  std::vector<Expr> at;
  if (index.rank() == 1) at.push_back(ir::index_var(static_cast<int>(dim)));
  Expr sym = index_position(index.load(at), x.sizes[dim], /*wrap=*/false, m.sizes);
  return {read_along(x, dim, sym, m, origins_of({&x, &index}))};
}

std::vector<TensorBox> lower_gather(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const TensorBox& index = L.box_of(n, 2);
  const graph::TensorMeta& m = L.meta(n);
  if (x.rank() == 0 || index.rank() != x.rank() || !is_index_dtype(index.dtype)) return {};
  size_t dim = wrap_dim(static_value(L.int_arg(n.args.at(1)), "a dim"), x.rank());
  if (!addressable(x.sizes[dim])) return {};
  Expr sym = index_position(index.load(ir::index_vars(index.rank())), x.sizes[dim], false, m.sizes);
  return {read_along(x, dim, sym, m, origins_of({&x, &index}))};
}

std::vector<TensorBox> lower_embedding(Lowering& L, const Node& n) {
  const TensorBox& weight = L.box_of(n, 0);
  const TensorBox& indices = L.box_of(n, 1);
  const graph::TensorMeta& m = L.meta(n);
  if (weight.rank() != 2 || !is_index_dtype(indices.dtype) || !addressable(weight.sizes[0]))
    return {};
  std::vector<Expr> idx = ir::index_vars(m.rank());
  std::vector<Expr> row(idx.begin(), idx.end() - 1);
  Expr sym = index_position(indices.load(row), weight.sizes[0], /*wrap=*/false, m.sizes);
  Value body = ir::guard_missing(ir::cast(weight.load({sym, idx.back()}), m.dtype), {sym});
  return {TensorBox{m.dtype, m.device, m.sizes, body, origins_of({&weight, &indices})}};
}

// ---- writes ----

// Whether the target can run a scatter of this mode into a tensor like the node's output.
bool can_scatter(const Lowering& L, const Node& n, ir::ScatterMode mode) {
  const graph::TensorMeta& m = L.meta(n);
  return !L.options().triton || scatter_has_atomic(mode, m.dtype);
}

// x[mask] = v (or += v) with one boolean mask over x's leading dims and values that do not depend
// on which selected element they go to (one number, or a row over the trailing dims), so the
// write is the pointwise
// where(mask, v, x) (where(mask, x + v, x) when accumulating), whatever the count of true
// elements. nullopt for any other boolean index (values taken in mask order: left to ATen).
std::optional<TensorBox> masked_fill_form(const Lowering& L, const TensorBox& x, const Arg& list,
                                          const TensorBox& values, bool accumulate) {
  if (list.kind != Arg::Kind::List || list.list.size() != 1 || !L.is_tensor(list.list[0]))
    return std::nullopt;
  const TensorBox& mask = L.box(list.list[0]);
  if (mask.dtype != DType::Bool || mask.rank() == 0 || mask.rank() > x.rank()) return std::nullopt;
  for (size_t d = 0; d < mask.rank(); ++d) {
    if (mask.sizes[d] != x.sizes[d]) return std::nullopt;
  }
  // values broadcast to x[mask]'s shape [count, trailing dims...]: pointwise when they do not
  // vary along count, i.e. they broadcast to the trailing dims alone.
  size_t trailing = x.rank() - mask.rank();
  if (values.rank() > trailing + 1) return std::nullopt;
  std::vector<Expr> idx = ir::index_vars(x.rank());
  std::vector<Expr> at(values.rank(), Expr(0));
  for (size_t j = 0; j < values.rank(); ++j) {
    const Expr& size = values.sizes[values.rank() - 1 - j];
    if (size == Expr(1)) continue;
    if (j >= trailing || size != x.sizes[x.rank() - 1 - j]) return std::nullopt;
    at[values.rank() - 1 - j] = idx[x.rank() - 1 - j];
  }
  Value hit = mask.load(std::vector<Expr>(idx.begin(), idx.begin() + mask.rank()));
  Value v = ir::cast(values.load(at), x.dtype);
  if (accumulate && x.dtype == DType::Bool) return std::nullopt;  // (bool sums are ors)
  Value old = x.load(idx);
  // (Unselected elements keep their bits: -0.0 + 0 would be +0.0.)
  if (accumulate) {
    DType acc = opmath(x.dtype);  // (16-bit floats add in float32, rounded once)
    v = ir::cast(ir::add(ir::cast(old, acc), ir::cast(v, acc)), x.dtype);
  }
  Value body = ir::where(hit, v, old);
  return TensorBox{x.dtype, x.device, x.sizes, body, origins_of({&x, &mask, &values})};
}

std::vector<TensorBox> lower_index_put(Lowering& L, const Node& n) {
  const TensorBox& x = L.box_of(n, 0);
  const Arg* values_arg = L.arg(n, 2, "values");
  const Arg* acc = L.arg(n, 3, "accumulate");
  if (!values_arg || !L.is_tensor(*values_arg)) return {};
  const TensorBox& values = L.box(*values_arg);
  if (x.sizes == L.meta(n).sizes) {
    bool accumulate = acc && acc->kind == Arg::Kind::Bool && acc->b;
    if (auto filled = masked_fill_form(L, x, n.args.at(1), values, accumulate)) return {*filled};
  }
  auto a = advanced_index(L, x, n.args.at(1));
  if (!a || x.sizes != L.meta(n).sizes) return {};
  // values broadcast to the shape x[indices] has.
  if (values.rank() > a->sizes.size()) return {};
  for (size_t j = 0; j < values.rank(); ++j) {
    const Expr& s = values.sizes[j];
    if (s != Expr(1) && s != a->sizes[a->sizes.size() - values.rank() + j]) return {};
  }
  std::vector<Expr> idx = ir::index_vars(a->sizes.size());
  std::vector<Expr> syms;
  std::vector<Expr> pos = a->position(x, idx, syms);
  Value v = values.load(broadcast_index(values, a->sizes, idx));
  bool accumulate = acc && acc->kind == Arg::Kind::Bool && acc->b;
  if (!can_scatter(L, n, accumulate ? ir::ScatterMode::Add : ir::ScatterMode::Store)) return {};
  TensorBox out = L.add_scatter(x, a->sizes, pos, v,
                                accumulate ? ir::ScatterMode::Add : ir::ScatterMode::Store);
  out.origins = x.origins;
  return {out};
}

// The smallest and largest values of an integer dtype.
int64_t int_limit(DType d, bool largest) {
  switch (d) {
    case DType::Bool:
      return largest ? 1 : 0;
    case DType::UInt8:
      return largest ? 255 : 0;
    case DType::Int8:
      return largest ? 127 : -128;
    case DType::Int16:
      return largest ? 32767 : -32768;
    case DType::Int32:
      return largest ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
    default:
      return largest ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
}

// The identity of a scatter_reduce combine (what "not including self" starts from).
Value reduce_identity(ir::ScatterMode mode, DType d) {
  switch (mode) {
    case ir::ScatterMode::Mul:
      return ir::int_constant(1, d);
    case ir::ScatterMode::Max:
      return graph::is_floating(d) ? ir::constant(-HUGE_VAL, d)
                                   : ir::int_constant(int_limit(d, false), d);
    case ir::ScatterMode::Min:
      return graph::is_floating(d) ? ir::constant(HUGE_VAL, d)
                                   : ir::int_constant(int_limit(d, true), d);
    default:
      return ir::int_constant(0, d);
  }
}

struct ScatterArgs {
  const TensorBox* x = nullptr;
  const TensorBox* index = nullptr;
  size_t dim = 0;
};

std::optional<ScatterArgs> scatter_args(const Lowering& L, const Node& n) {
  ScatterArgs s;
  s.x = &L.box_of(n, 0);
  s.index = &L.box_of(n, 2);
  auto dim = static_int(L, &n.args.at(1));
  if (!dim || s.x->rank() == 0 || s.index->rank() != s.x->rank() ||
      !is_index_dtype(s.index->dtype) || s.x->sizes != L.meta(n).sizes)
    return std::nullopt;
  s.dim = wrap_dim(*dim, s.x->rank());
  if (!addressable(s.x->sizes[s.dim])) return std::nullopt;
  return s;
}

// Scatters `value` (over the index tensor's shape) into a copy of base along s.dim.
TensorBox scatter_along(Lowering& L, const ScatterArgs& s, const TensorBox& base, Value value,
                        ir::ScatterMode mode) {
  std::vector<Expr> idx = ir::index_vars(s.index->rank());
  std::vector<Expr> pos = idx;
  pos[s.dim] = ir::indirect(s.index->load(idx), s.x->sizes[s.dim], /*wrap=*/false);
  return L.add_scatter(base, s.index->sizes, pos, value, mode);
}

// The value a scatter writes at index point idx: src read there, or a number.
Value scatter_value(const Lowering& L, const Arg& src, DType d) {
  if (!L.is_tensor(src)) return L.scalar(src, d);
  const TensorBox& b = L.box(src);
  return ir::cast(b.load(ir::index_vars(b.rank())), d);
}

std::optional<ir::ScatterMode> mode_named(const std::string& name) {
  if (name == "sum" || name == "add") return ir::ScatterMode::Add;
  if (name == "prod" || name == "multiply") return ir::ScatterMode::Mul;
  if (name == "amax") return ir::ScatterMode::Max;
  if (name == "amin") return ir::ScatterMode::Min;
  return std::nullopt;
}

// A number scattered into a constant tensor with one index per line along s.dim (nll_loss's
// backward, one_hot): out[i] = (index[i with i[dim] = 0] == i[dim]) ? value : fill, a pointwise
// body that fuses into its readers, where the scatter would write a full-size buffer twice (the
// fill, then the numbers). The index keeps its bounds check. nullopt for any other scatter.
std::optional<TensorBox> scatter_upon_constant(const ScatterArgs& s, Value value) {
  const TensorBox& x = *s.x;
  const TensorBox& index = *s.index;
  if (!ir::is_constant(x.body) || index.sizes[s.dim] != Expr(1)) return std::nullopt;
  for (size_t j = 0; j < x.rank(); ++j) {
    if (j != s.dim && index.sizes[j] != x.sizes[j]) return std::nullopt;
  }
  std::vector<Expr> idx = ir::index_vars(x.rank());
  std::vector<Expr> line = idx;
  line[s.dim] = Expr(0);
  Value at = ir::cast(index.load(line), DType::Int64);
  Expr checked = ir::indirect(at, x.sizes[s.dim], /*wrap=*/false);
  Value hit = ir::binary(ir::Op::Eq, at, ir::index_expr(idx[s.dim], DType::Int64));
  Value body = ir::guard(ir::where(hit, value, x.body), checked);
  return TensorBox{x.dtype, x.device, x.sizes, body, origins_of({&x, &index})};
}

std::vector<TensorBox> lower_scatter(Lowering& L, const Node& n,
                                     std::optional<ir::ScatterMode> fixed_mode) {
  auto s = scatter_args(L, n);
  if (!s) return {};
  bool by_value = n.target.find(".value") != std::string::npos;
  const Arg* src = L.arg(n, 3, by_value ? "value" : "src");
  if (!src) return {};
  if (L.is_tensor(*src) && L.box(*src).rank() != s->x->rank()) return {};
  ir::ScatterMode mode = fixed_mode.value_or(ir::ScatterMode::Store);
  if (const Arg* r = n.kwarg("reduce")) {
    auto named = r->kind == Arg::Kind::Str ? mode_named(r->s) : std::nullopt;
    if (!named) return {};
    mode = *named;
  }
  DType d = L.meta(n).dtype;
  if (mode == ir::ScatterMode::Store && !L.is_tensor(*src) && s->x->dtype == d) {
    if (auto pointwise = scatter_upon_constant(*s, scatter_value(L, *src, d))) return {*pointwise};
  }
  if (!can_scatter(L, n, mode)) return {};
  TensorBox out = scatter_along(L, *s, *s->x, scatter_value(L, *src, d), mode);
  out.origins = s->x->origins;
  return {out};
}

std::vector<TensorBox> lower_scatter_reduce(Lowering& L, const Node& n) {
  auto s = scatter_args(L, n);
  if (!s || !L.is_tensor(n.args.at(3))) return {};
  const Arg* reduce = L.arg(n, 4, "reduce");
  const Arg* include = L.arg(n, 5, "include_self");
  if (!reduce || reduce->kind != Arg::Kind::Str) return {};
  bool include_self = !include || include->kind != Arg::Kind::Bool || include->b;
  bool mean = reduce->s == "mean";
  auto mode = mean ? std::optional<ir::ScatterMode>(ir::ScatterMode::Add) : mode_named(reduce->s);
  if (!mode || !can_scatter(L, n, *mode)) return {};
  const graph::TensorMeta& m = L.meta(n);
  DType d = m.dtype;
  Value src = scatter_value(L, n.args.at(3), d);
  TensorBox base = *s->x;
  // Without self, every targeted element first becomes the combine's identity.
  if (!include_self)
    base = scatter_along(L, *s, base, reduce_identity(*mode, d), ir::ScatterMode::Store);
  TensorBox out = scatter_along(L, *s, base, src, *mode);
  if (mean) {
    // mean = sum / count, where count counts the values combined (self included or not); an
    // element nothing targets keeps its value (count 0 reads as 1).
    TensorBox ones{d, m.device, m.sizes, ir::int_constant(include_self ? 1 : 0, d), {}};
    TensorBox count = scatter_along(L, *s, ones, ir::int_constant(1, d), ir::ScatterMode::Add);
    std::vector<Expr> idx = ir::index_vars(m.rank());
    DType op = opmath(d);
    Value c = ir::cast(count.load(idx), op);
    Value one = ir::int_constant(1, op);
    c = ir::where(ir::binary(ir::Op::Eq, c, ir::int_constant(0, op)), one, c);
    Value sum = ir::cast(out.load(idx), op);
    Value q = graph::is_floating(d) ? ir::div(sum, c) : ir::binary(ir::Op::FloorDiv, sum, c);
    out = TensorBox{d, m.device, m.sizes, ir::cast(q, d), {}};
  }
  out.origins = s->x->origins;
  return {out};
}

}  // namespace

bool scatter_has_atomic(ir::ScatterMode mode, DType dtype) {
  return !codegen::triton::scatter_op_text(mode, dtype).empty();
}

void register_indexing(Registry& r) {
  r["aten.index.Tensor"] = lower_index;
  r["aten.index_select.default"] = lower_index_select;
  r["aten.gather.default"] = lower_gather;
  r["aten.embedding.default"] = lower_embedding;
  r["aten.index_put.default"] = lower_index_put;
  r["aten.scatter.src"] = [](Lowering& L, const Node& n) { return lower_scatter(L, n, {}); };
  r["aten.scatter.value"] = r["aten.scatter.src"];
  r["aten.scatter.reduce"] = r["aten.scatter.src"];
  r["aten.scatter.value_reduce"] = r["aten.scatter.src"];
  r["aten.scatter_add.default"] = [](Lowering& L, const Node& n) {
    return lower_scatter(L, n, ir::ScatterMode::Add);
  };
  r["aten.scatter_reduce.two"] = lower_scatter_reduce;
}

}  // namespace coil::lower
