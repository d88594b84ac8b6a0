// Extern calls in the IR: how a graph node that runs in a library or in ATen (mm, convolution, a
// fallback op, copy_ into an input) becomes an ir::ExternCall with buffers for its results, and
// which layouts its tensor arguments and results have (Lowering::add_extern and what it needs).
// The rules, and why: docs/decisions.md, "Extern calls get their inputs in eager's layout".
//
// Tests: tests/cpp/lower/lowering_test.cpp (extern and fallback cases),
// tests/python/test_layouts.py.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

namespace {

// Whether strides lay sizes out without overlap and without broadcast dims: a layout a buffer can
// be allocated with as is (padded rows included). Symbolic strides are ordered by their hints and
// each must provably clear the dims inside it, for every value of the size symbols.
bool allocatable(const std::vector<Expr>& sizes, const std::vector<Expr>& strides) {
  sym::RangeEnv env;  // the graph's size symbols (SizeSymbolScope)
  struct Dim {
    Expr stride, size;
    int64_t hint;
  };
  std::vector<Dim> dims;  // dims of size > 1
  // e >= 1, looking inside products and Max (interval bounds of a product of unbounded factors
  // are too loose to tell).
  std::function<bool(const Expr&)> positive = [&](const Expr& e) {
    if (sym::statically_known_true(sym::le(1, e), env)) return true;
    const auto& ops = e.operands();
    if (e.kind() == sym::Kind::Mul)
      return e.int_value() >= 1 && std::all_of(ops.begin(), ops.end(), positive);
    if (e.kind() == sym::Kind::Max) return std::any_of(ops.begin(), ops.end(), positive);
    return false;
  };
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == Expr(1)) continue;
    if (!positive(sizes[i])) return false;  // may be empty
    if (!positive(strides[i])) return false;
    try {
      dims.push_back({strides[i], sizes[i], sym::size_hint(strides[i], env)});
    } catch (const std::exception&) {
      return false;  // a symbol without a hint (data-dependent)
    }
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.hint < b.hint; });
  // extent <= stride, looking inside Max(1, padded) strides (eager's meta clamps them so).
  std::function<bool(const Expr&, const Expr&)> at_most = [&](const Expr& a, const Expr& b) {
    if (sym::statically_known_true(sym::le(a, b), env)) return true;
    if (b.kind() != sym::Kind::Max) return false;
    return std::any_of(b.operands().begin(), b.operands().end(),
                       [&](const Expr& o) { return at_most(a, o); });
  };
  Expr extent = 1;  // elements the inner dims span
  for (const Dim& d : dims) {
    if (!at_most(extent, d.stride)) return false;
    extent = d.stride * d.size;
  }
  return true;
}

// Ops that read their operands' exact strides, padding included: the attention kernels take an
// additive mask (attn_bias) whose rows must start 16-byte aligned, and eager's graph pads the
// mask's rows for it (an odd sequence length: rows of 49 elements stored 52 apart). A mask that
// coil computes must be stored the same way, not densely.
bool wants_exact_strides(const std::string& op) {
  return op.find("scaled_dot_product") != std::string::npos;
}

// The box stored with exactly the meta's strides: dims the meta broadcasts (stride 0, eager's
// expand of a mask over heads) are stored once and read through a stride-0 view; the other dims
// keep eager's strides, padded rows included. nullopt when those strides cannot be allocated.
std::optional<ir::TensorRef> exact_layout(Lowering& L, const TensorBox& box,
                                          const graph::TensorMeta& m) {
  std::vector<Expr> sizes = box.sizes;
  std::vector<Expr> idx = ir::index_vars(box.rank());
  bool broadcast = false;
  for (size_t d = 0; d < box.rank(); ++d) {
    if (m.strides[d] == Expr(0) && sizes[d] != Expr(1)) {
      sizes[d] = 1;
      idx[d] = 0;  // equal along a dim eager broadcasts: one slice holds every value
      broadcast = true;
    }
  }
  if (!allocatable(sizes, m.strides)) return std::nullopt;
  TensorBox base = broadcast ? remap(box, sizes, idx) : box;
  std::optional<ir::TensorRef> ref =
      as_strided_view(L.realize_shared(base, &m.strides, /*fixed=*/true));
  if (!ref) return std::nullopt;
  ref->sizes = box.sizes;
  ref->strides = m.strides;
  return ref;
}

// Replaces tensor arguments by indices into `tensors`, realizing them as needed, and Python
// numbers computed at run time by negative indices into `host_scalars`. A tensor that must be
// stored for the call is stored the way eager laid it out (the graph's meta, made dense), since a
// library op's result layout can follow its inputs' (convolution returns channels-last for a
// channels-last input): the result then has the layout the graph's meta gives it. A fallback op
// gets each tensor with eager's strides even when it is already a view of another layout: some
// ATen kernels (the attention backward ops, for one) assume the layouts their forward produced.
// `given`, when set, is the tensor to pass in place of the argument's own (a padded operand).
// `exact` (attention ops): eager's strides exactly, padding and broadcast dims included.
graph::Arg to_extern_arg(Lowering& L, const graph::Arg& a, std::vector<ir::TensorRef>& tensors,
                         std::vector<std::string>& host_scalars, bool eager_strides,
                         const TensorBox* given = nullptr, bool exact = false) {
  if (a.kind == graph::Arg::Kind::List) {
    std::vector<graph::Arg> items;
    for (const auto& item : a.list)
      items.push_back(to_extern_arg(L, item, tensors, host_scalars, eager_strides, nullptr, exact));
    return graph::Arg::list_of(std::move(items));
  }
  if (a.kind != graph::Arg::Kind::Node) return a;
  if (const std::string* var = L.host_scalar(a.node)) {
    host_scalars.push_back(*var);
    return graph::Arg::node_ref(-static_cast<int>(host_scalars.size()));
  }
  const TensorBox& box = given ? *given : L.box(a);
  const graph::Node& src = L.graph().node(a.node);
  const graph::TensorMeta* m =
      !given && src.meta.size() == 1 && src.meta[0].strides.size() == box.rank() ? &src.meta[0]
                                                                                 : nullptr;
  std::optional<ir::TensorRef> ref = as_strided_view(box);
  std::optional<ir::TensorRef> exact_ref;
  // A size-1 dim's stride moves no address: a view's is whatever its index simplified to (often
  // 0), eager's is the meta's. Such a difference is no reason to copy, and the call gets eager's
  // value (some kernels check every stride's alignment).
  if (ref && m) {
    for (size_t d = 0; d < ref->sizes.size() && d < m->strides.size(); ++d) {
      if (ref->sizes[d] == Expr(1)) ref->strides[d] = m->strides[d];
    }
  }
  if (m && exact && (!ref || ref->strides != m->strides)) exact_ref = exact_layout(L, box, *m);
  // A value coil computes is stored for the call and becomes the node's value: later readers
  // load it instead of computing it again, and views of it (a transpose for the next product)
  // are passed as views rather than stored once more. Not where an equal value of another node
  // was stored already: two graph outputs must not share storage.
  bool computed = !given && !ref;
  if (computed && m && !exact) {
    std::vector<Expr> strides = ir::Layout::dense_strides_like(box.sizes, m->strides);
    if (std::optional<TensorBox> view = L.store_under_view(a, strides)) {
      tensors.push_back(*as_strided_view(*view));
      return graph::Arg::node_ref(static_cast<int>(tensors.size() - 1));
    }
  }
  auto store = [&](const std::vector<Expr>* strides) {
    bool created = false;
    TensorBox stored = L.realize_shared(box, strides, /*fixed=*/false, &created);
    ref = as_strided_view(stored);
    if (computed && created && ref) L.replace_value(a, stored);
  };
  if (exact_ref) {
    ref = exact_ref;
  } else if (m &&
             (!ref || (eager_strides && !same_strides(ref->sizes, ref->strides, m->strides)))) {
    std::vector<Expr> strides = ir::Layout::dense_strides_like(box.sizes, m->strides);
    store(&strides);
  }
  if (!ref) store(nullptr);
  tensors.push_back(*ref);
  return graph::Arg::node_ref(static_cast<int>(tensors.size() - 1));
}

// Ops whose results are contiguous whatever their inputs' layouts: the wrapper need not check.
bool result_always_contiguous(const std::string& op) {
  static const std::set<std::string> kOps = {"aten.mm.default", "aten.addmm.default",
                                             "aten.bmm.default", "aten.baddbmm.default",
                                             "coil.mm_row_groups.default"};
  return kOps.count(op) > 0;
}

// Whether the wrapper can compute every stride of the results: numbers, or expressions of the
// graph's backed size symbols (bound at call time). Data-dependent sizes are not checked.
bool strides_known_at_call(const graph::Graph& g, const std::vector<graph::TensorMeta>& metas) {
  for (const graph::TensorMeta& m : metas) {
    for (const Expr& s : m.strides) {
      for (const Expr& v : sym::free_symbols(s)) {
        if (!g.symbol(v.name())) return false;
      }
    }
  }
  return true;
}

// The dims of node n's input that its dims are, for a view that only permutes dims (t, permute,
// transpose); nullopt for other nodes.
std::optional<std::vector<size_t>> permutation_of(const Lowering& L, const graph::Node& n) {
  if (n.meta.size() != 1 || n.args.empty()) return std::nullopt;
  size_t rank = n.meta[0].sizes.size();
  auto dim = [&](const Expr& e) -> std::optional<size_t> {
    auto v = e.as_int();
    if (!v || rank == 0) return std::nullopt;
    int64_t d = *v < 0 ? *v + static_cast<int64_t>(rank) : *v;
    if (d < 0 || d >= static_cast<int64_t>(rank)) return std::nullopt;
    return static_cast<size_t>(d);
  };
  std::vector<size_t> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = i;
  if (n.target == "aten.t.default") {
    if (rank == 2) std::swap(perm[0], perm[1]);
    return perm;
  }
  if (n.target == "aten.transpose.int" && n.args.size() == 3) {
    auto d0 = dim(L.int_arg(n.args[1])), d1 = dim(L.int_arg(n.args[2]));
    if (!d0 || !d1) return std::nullopt;
    std::swap(perm[*d0], perm[*d1]);
    return perm;
  }
  if (n.target == "aten.permute.default" && n.args.size() == 2) {
    std::vector<Expr> dims = L.int_list(n.args[1]);
    if (dims.size() != rank) return std::nullopt;
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      auto d = dim(dims[i]);
      if (!d || seen[*d]) return std::nullopt;
      seen[*d] = true;
      perm[i] = *d;
    }
    return perm;
  }
  return std::nullopt;
}

// Whether node n only reinterprets its input's elements in row-major order under new sizes (the
// views that lower to reshape: view, _unsafe_view, reshape, squeeze, unsqueeze, flatten, ...).
bool is_reshape(const graph::Node& n) {
  static const std::set<std::string> kOps = {
      "aten.view.default",      "aten._unsafe_view.default", "aten.reshape.default",
      "aten.squeeze.dim",       "aten.squeeze.dims",         "aten.squeeze.default",
      "aten.unsqueeze.default", "aten.flatten.using_ints",   "aten.unflatten.int"};
  return n.meta.size() == 1 && !n.args.empty() && kOps.count(n.target) > 0;
}

}  // namespace

std::optional<TensorBox> Lowering::store_under_view(const graph::Arg& a,
                                                    const std::vector<Expr>& strides) {
  if (a.kind != graph::Arg::Kind::Node) return std::nullopt;
  const graph::Node& view = g_.node(a.node);
  std::optional<std::vector<size_t>> perm = permutation_of(*this, view);
  bool reshaped = is_reshape(view);
  if (!perm && !reshaped) return std::nullopt;
  const graph::Arg& base_arg = view.args.at(0);
  if (base_arg.kind != graph::Arg::Kind::Node || host_scalar(base_arg.node)) return std::nullopt;
  const auto& base_values = values_.at(base_arg.node);
  if (base_values.size() != 1 || as_strided_view(base_values[0])) return std::nullopt;
  TensorBox base = base_values[0];
  const TensorBox& vbox = box(a);
  if (reshaped) {
    // The value stored as eager laid it out; the reshape of that memory must be a view with the
    // strides the call wants (a merge of dims that are not contiguous is not: nullopt).
    const graph::Node& src = g_.node(base_arg.node);
    if (src.meta.size() != 1 || src.meta[0].strides.size() != base.rank()) return std::nullopt;
    std::vector<Expr> base_strides =
        ir::Layout::dense_strides_like(base.sizes, src.meta[0].strides);
    bool created = false;
    TensorBox stored = realize_shared(base, &base_strides, /*fixed=*/false, &created);
    TensorBox out = reshape(stored, vbox.sizes);
    out.origins.insert(vbox.origins.begin(), vbox.origins.end());
    std::optional<ir::TensorRef> ref = as_strided_view(out);
    if (!ref || !same_strides(ref->sizes, ref->strides, strides)) return std::nullopt;
    if (created) {
      replace_value(base_arg, stored);
      replace_value(a, out);
    }
    return out;
  }
  size_t rank = perm->size();
  if (base.rank() != rank || vbox.rank() != rank || strides.size() != rank) return std::nullopt;
  std::vector<Expr> base_strides(rank);
  for (size_t i = 0; i < rank; ++i) base_strides[(*perm)[i]] = strides[i];
  bool created = false;
  TensorBox stored = realize_shared(base, &base_strides, /*fixed=*/false, &created);
  std::vector<Expr> idx(rank);
  for (size_t i = 0; i < rank; ++i) idx[(*perm)[i]] = ir::index_var(static_cast<int>(i));
  TensorBox out = remap(stored, vbox.sizes, idx);
  out.origins.insert(vbox.origins.begin(), vbox.origins.end());
  if (!as_strided_view(out)) return std::nullopt;
  if (created) {
    replace_value(base_arg, stored);
    replace_value(a, out);
  }
  return out;
}

void Lowering::replace_value(const graph::Arg& a, TensorBox box) {
  values_.at(a.node).at(0) = std::move(box);
}

std::vector<TensorBox> Lowering::add_extern(const graph::Node& n, bool is_fallback,
                                            const std::vector<Expr>* out_strides,
                                            const std::map<size_t, TensorBox>* arg_boxes) {
  ir::ExternCall call;
  call.op = n.target;
  call.is_fallback = is_fallback;
  call.origin = n.name;
  call.c_args = n.c_args;
  bool exact = wants_exact_strides(n.target);
  for (size_t i = 0; i < n.args.size(); ++i) {
    const TensorBox* given = nullptr;
    if (arg_boxes && arg_boxes->count(i)) given = &arg_boxes->at(i);
    call.args.push_back(to_extern_arg(*this, n.args[i], call.tensors, call.host_scalars,
                                      is_fallback, given, exact));
  }
  for (const auto& [k, a] : n.kwargs) {
    call.kwargs.push_back(
        {k, to_extern_arg(*this, a, call.tensors, call.host_scalars, is_fallback, nullptr, exact)});
  }
  if (!n.scalar_type.empty()) {
    call.scalar_output = n.name;  // FX names are Python identifiers, unique in the graph
    host_scalars_[n.id] = n.name;
  }
  call.returns_tuple = n.meta.size() != 1;
  // The check needs the strides as values in the wrapper: numbers, or expressions of the size
  // symbols it binds. (Sizes that depend on data have no variable in the wrapper; their results
  // keep the op's own layout unchecked.)
  call.check_output_strides =
      !result_always_contiguous(n.target) && strides_known_at_call(g_, n.meta);
  int extern_id = static_cast<int>(prog_.externs.size());
  std::vector<TensorBox> out;
  for (const graph::TensorMeta& m : n.meta) {
    ir::Buffer buf;
    buf.name = new_buffer_name();
    buf.kind = ir::Buffer::Kind::Extern;
    buf.layout = {m.dtype, m.device, m.sizes, m.strides, m.offset, true};
    if (out_strides && n.meta.size() == 1) {
      buf.layout.strides = *out_strides;
      buf.layout.offset = 0;
    }
    buf.extern_id = extern_id;
    buf.origins.insert(n.name);
    call.outputs.push_back(buf.name);
    prog_.buffers.push_back(buf);
    out.push_back(read_buffer(buf.name, buf.layout));
  }
  prog_.externs.push_back(std::move(call));
  if (is_fallback) prog_.fallback_ops.push_back(n.target);
  return out;
}

std::vector<TensorBox> Lowering::add_input_mutation(const graph::Node& n) {
  const graph::Arg& dst = n.args.at(0);
  if (dst.kind != graph::Arg::Kind::Node ||
      g_.node(dst.node).kind != graph::NodeKind::Placeholder || n.meta.size() != 1)
    return {};
  std::vector<TensorBox> out = add_extern(n, /*is_fallback=*/false);
  prog_.externs.back().mutates.push_back(g_.node(dst.node).name);
  return out;
}

}  // namespace coil::lower
