// Graph outputs (Lowering::lower_outputs): each output as a view of what computes it where that
// has eager's strides, a view of a graph input where eager's is one, else a buffer stored with
// eager's strides.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

#include "coil/lower/lowering.h"

namespace coil::lower {

namespace {

// Whether eager's result of node n is a view of its input (so returning the input's memory is
// what eager does too).
bool aliases_its_input(const graph::Graph& g, const graph::Node& n) {
  static const std::set<std::string> kViewOps = {
      "aten.view.default",      "aten._unsafe_view.default",
      "aten.alias.default",     "aten.permute.default",
      "aten.transpose.int",     "aten.t.default",
      "aten.expand.default",    "aten.squeeze.dim",
      "aten.squeeze.dims",      "aten.squeeze.default",
      "aten.unsqueeze.default", "aten.slice.Tensor",
      "aten.select.int",        "aten.as_strided.default",
      "aten.split.Tensor",      "aten.split_with_sizes.default",
      "aten.unbind.int",        "aten.diagonal.default",
      "aten.narrow.default",    "aten.unflatten.int"};
  if (n.kind == graph::NodeKind::Placeholder) return true;
  if (n.target == "getitem" && !n.args.empty() && n.args[0].kind == graph::Arg::Kind::Node) {
    return aliases_its_input(g, g.node(n.args[0].node));
  }
  // Its first output, the new effect token, is the old one (its op's results are extern buffers,
  // never inputs, so the answer matters only for the token).
  if (n.target == "with_effects") return aliases_its_input(g, g.node(n.args.at(0).node));
  if (!kViewOps.count(n.target)) return false;
  // A view of a view of an input is still a view of it.
  for (const graph::Arg& a : n.args) {
    if (a.kind == graph::Arg::Kind::Node) return aliases_its_input(g, g.node(a.node));
  }
  return false;
}

}  // namespace

// A value the graph returns and also reads is computed once. Readers lowered after it used to
// inline its body and compute it again, in another kernel, where another implementation of a
// function could give other bits (libmvec's exp in one kernel's vectorized loop, libm's in
// another's scalar one): a training forward returned exp(x) and the amax of a recomputed exp,
// so the amax equalled no element of the returned exp, and amax's backward (the gradient split
// between the elements equal to the max) divided by a count of zero: NaN gradients (fuzzer
// --train, seeds 73274, 74708). Returned values are stored with eager's strides right after
// their node is lowered; readers load them; lower_outputs then finds them stored.
void Lowering::store_output_value(const graph::Node& n) {
  if (static_cast<size_t>(n.id) >= values_.size() || values_[n.id].size() != 1 ||
      n.meta.size() != 1 || host_scalar(n.id))
    return;
  const TensorBox& b = values_[n.id][0];
  const graph::TensorMeta& m = n.meta[0];
  if (b.rank() != m.sizes.size() || as_strided_view(b)) return;  // already memory
  if (aliases_its_input(g_, n)) return;  // must stay a view of the input (lower_outputs)
  if (std::any_of(m.sizes.begin(), m.sizes.end(), [](const Expr& e) { return e == 0; })) return;
  TensorBox stored = realize(b, &m.strides, /*fixed=*/true);
  if (as_strided_view(stored)) replace_value(graph::Arg::node_ref(n.id), stored);
}

void Lowering::lower_outputs(const graph::Node& out) {
  current_ = nullptr;  // the output node is not an origin of anything
  const std::vector<graph::Arg>* items = &out.args;
  if (out.args.size() == 1 && out.args[0].kind == graph::Arg::Kind::List) items = &out.args[0].list;
  for (const graph::Arg& a : *items) {
    ir::GraphOutput o;
    if (a.kind == graph::Arg::Kind::Sym || a.kind == graph::Arg::Kind::Int) {
      // A size (forward graphs hand their backward the dynamic sizes): computed by the wrapper.
      o.scalar = a.kind == graph::Arg::Kind::Int ? std::to_string(a.i) : sym::to_python(a.sym);
      prog_.outputs.push_back(o);
      continue;
    }
    if (a.kind != graph::Arg::Kind::Node) {
      o.is_none = true;
      prog_.outputs.push_back(o);
      continue;
    }
    if (const std::string* var = host_scalar(a.node)) {
      o.scalar = *var;
      prog_.outputs.push_back(o);
      continue;
    }
    const graph::Node& src = g_.node(a.node);
    TensorBox b = box(a);
    const graph::TensorMeta& m = meta(src);
    auto ref = as_strided_view(b);
    // An output that reads a graph input's memory may only stay a view when eager's result is a
    // view too; clone(x) or x.to(x.dtype) must not hand back x's memory.
    bool of_input = ref && prog_.buffer(ref->buffer).kind == ir::Buffer::Kind::Input;
    bool may_alias = !of_input || aliases_its_input(g_, src);
    bool exact = ref && may_alias && same_strides(ref->sizes, ref->strides, m.strides);
    // Where eager's result is a view of a graph input, it must be one here too: AOTAutograd
    // rebuilds such an output from the input with the returned tensor's sizes, strides and
    // storage offset, so a copy (offset 0) would name the input's first elements (fuzzer seed
    // 32095: x.narrow(0, s, l) with a symbolic l in [0, 1] came back as x[0]; same_strides now
    // ignores dims of at most one element). An output with no elements names no memory.
    bool empty = std::any_of(m.sizes.begin(), m.sizes.end(), [](const Expr& e) { return e == 0; });
    bool must_alias =
        !empty && (src.kind == graph::NodeKind::Placeholder || aliases_its_input(g_, src));
    if (!exact && must_alias) {
      throw std::runtime_error("output " + std::to_string(prog_.outputs.size()) + " (" + src.name +
                               ") is a view of a graph input in eager, and coil cannot express "
                               "it as a strided view of that input");
    }
    if (!exact) {
      // Outputs get the strides eager would give them, so callers see the same memory format.
      b = realize(b, &m.strides, /*fixed=*/true);
      ref = as_strided_view(b);
    }
    o.ref = *ref;
    o.ref.strides = m.strides;  // equal where it matters; eager's values for size-1 dims
    prog_.outputs.push_back(o);
  }
}

}  // namespace coil::lower
