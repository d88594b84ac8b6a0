// Lowerings of tensor factories: full/zeros/ones/empty (and their _like forms), scalar_tensor,
// arange/iota. Sizes and dtypes come from the node's metadata, which already applied torch's rules.
#include <stdexcept>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;

namespace {

TensorBox filled(const Lowering& L, const Node& n, Value v) {
  const graph::TensorMeta& m = L.meta(n);
  return TensorBox{m.dtype, m.device, m.sizes, ir::cast(v, m.dtype), {}};
}

// A number argument as a constant of the output dtype (computed in float for float outputs).
Value number(const Lowering& L, const Node& n, const Arg& a) {
  DType d = L.meta(n).dtype;
  if (a.kind == Arg::Kind::Float && !graph::is_floating(d)) {
    return ir::cast(ir::constant(a.f, DType::Float64), d);
  }
  return L.scalar(a, graph::is_floating(d) ? DType::Float64 : d);
}

// start + step * v0, computed in double for floats (as torch does) and int64 for integers.
std::vector<TensorBox> arange(const Lowering& L, const Node& n, const Arg* start,
                              const Arg* end_unused, const Arg* step) {
  (void)end_unused;
  const graph::TensorMeta& m = L.meta(n);
  DType d = graph::is_floating(m.dtype) ? DType::Float64 : DType::Int64;
  Value s = start ? L.scalar(*start, d) : ir::int_constant(0, d);
  Value st = step ? L.scalar(*step, d) : ir::int_constant(1, d);
  Value i = ir::cast(ir::index_expr(ir::index_var(0), DType::Int64), d);
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(ir::add(s, ir::mul(st, i)), m.dtype), {}}};
}

}  // namespace

void register_creation(Registry& r) {
  r["aten.full.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    return {filled(L, n, number(L, n, n.args.at(1)))};
  };
  r["aten.full_like.default"] = r["aten.full.default"];
  r["aten.scalar_tensor.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    return {filled(L, n, number(L, n, n.args.at(0)))};
  };
  auto constant = [](double v) {
    return [v](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      return {filled(L, n, ir::constant(v, DType::Float64))};
    };
  };
  for (const char* name :
       {"aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default",
        "aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default",
        "aten.empty_strided.default", "aten.new_empty_strided.default",
        "aten.empty_permuted.default"}) {
    // Uninitialized memory may hold anything; zeros is a valid choice and keeps runs reproducible.
    r[name] = constant(0.0);
  }
  for (const char* name :
       {"aten.ones.default", "aten.ones_like.default", "aten.new_ones.default"}) {
    r[name] = constant(1.0);
  }
  r["aten.arange.start_step"] = [](Lowering& L, const Node& n) {
    return arange(L, n, &n.args.at(0), &n.args.at(1), n.args.size() > 2 ? &n.args[2] : nullptr);
  };
  r["aten.arange.start"] = [](Lowering& L, const Node& n) {
    return arange(L, n, &n.args.at(0), &n.args.at(1), nullptr);
  };
  r["aten.arange.default"] = [](Lowering& L, const Node& n) {
    return arange(L, n, nullptr, &n.args.at(0), nullptr);
  };
  r["prims.iota.default"] = [](Lowering& L, const Node& n) {
    return arange(L, n, L.arg(n, 1, "start"), nullptr, L.arg(n, 2, "step"));
  };
}

}  // namespace coil::lower
