// Written-out attention -> one scaled_dot_product_attention call (attention_pattern.h).
#include "coil/lower/attention_pattern.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace coil::lower {

using graph::Arg;
using graph::Graph;
using graph::Node;
using sym::Expr;

namespace {

using Match = AttentionMatch;

// Ops whose result has its operand's values in a new shape (a clone is the copy a view of a
// strided operand needs).
bool same_values(const std::string& target) {
  return target == "aten.view.default" || target == "aten._unsafe_view.default" ||
         target == "aten.reshape.default" || target == "aten.clone.default";
}

class Matcher {
 public:
  Matcher(const Graph& g, bool dropout) : g_(g), dropout_(dropout) {}

  // The attention whose second product is node `id`, if it is one.
  std::optional<Match> at(int id) {
    const Node& b2 = g_.node(id);
    if (b2.target != "aten.bmm.default" || b2.meta.size() != 1 || b2.args.size() != 2) {
      return std::nullopt;
    }
    Match m;
    absorbed_.clear();
    absorbed_.push_back(id);
    // softmax(scores, -1) side. Under autocast the softmax runs in float32 between two casts
    // (scores up, probabilities back down to the products' dtype): what ATen's attention
    // kernels do inside, so the casts are absorbed too.
    graph::DType dtype = b2.meta[0].dtype;
    int p = strip(b2.args[0]);
    if (p < 0 || !only_for(p)) return std::nullopt;
    if (dropout_) {
      if (std::optional<std::pair<int, double>> d = dropout_of(p)) {
        p = d->first;
        m.dropout = d->second;
      }
    }
    bool cast_down = is_cast(p);
    if (cast_down) {
      absorbed_.push_back(p);
      p = g_.node(p).args[0].node;
      if (!only_for(p)) return std::nullopt;
      // Under autocast the dropout runs on the float32 probabilities, before their cast down
      // (dropout is on no autocast list: it keeps the softmax's dtype).
      if (dropout_ && m.dropout == 0.0) {
        if (std::optional<std::pair<int, double>> d = dropout_of(p)) {
          p = d->first;
          m.dropout = d->second;
        }
      }
    }
    const Node& sm = g_.node(p);
    if (sm.target != "aten._softmax.default" || sm.args.size() != 3 || sm.meta.size() != 1)
      return std::nullopt;
    size_t rank = sm.meta[0].rank();
    if (rank != 4 || sm.args[1].kind != Arg::Kind::Int) return std::nullopt;
    int64_t dim = sm.args[1].i < 0 ? sm.args[1].i + 4 : sm.args[1].i;
    if (dim != 3 || sm.args[2].kind != Arg::Kind::Bool || sm.args[2].b) return std::nullopt;
    absorbed_.push_back(p);
    // In float32 exactly when the products are 16-bit and the probabilities are cast back.
    bool upcast = sm.meta[0].dtype != dtype;
    if (upcast != cast_down) return std::nullopt;
    if (upcast && (sm.meta[0].dtype != graph::DType::Float32 ||
                   (dtype != graph::DType::BFloat16 && dtype != graph::DType::Float16)))
      return std::nullopt;
    if (!sm.args[0].is_node()) return std::nullopt;
    int t = sm.args[0].node;
    if (upcast) {
      if (!is_cast(t) || !single_user(t)) return std::nullopt;
      absorbed_.push_back(t);
      t = g_.node(t).args[0].node;
    }
    // An optional additive mask (scaled scores + mask: sdpa's attn_mask), in the scores' dtype
    // and broadcast to them; or scores where a bool mask is true set to -inf (masked_fill, or the
    // where it decomposes to): sdpa's bool attn_mask is the mask's negation.
    const Node& an = g_.node(t);
    if (an.target == "aten.add.Tensor" && an.args.size() == 2 && an.kwargs.empty() &&
        an.args[0].is_node() && an.args[1].is_node()) {
      int side = leads_to_scores(an.args[0].node) ? 0 : 1;
      int mask = an.args[1 - side].node;
      if (!leads_to_scores(an.args[side].node) || !single_user(t) ||
          !broadcasts_to(mask, an.meta.at(0), an.meta.at(0).dtype))
        return std::nullopt;
      m.mask = mask;
      absorbed_.push_back(t);
      t = an.args[side].node;
    } else if (std::optional<std::pair<int, int>> filled = minus_inf_where(t)) {
      auto [mask, scores] = *filled;
      if (!leads_to_scores(scores) || !single_user(t) ||
          !broadcasts_to(mask, an.meta.at(0), graph::DType::Bool))
        return std::nullopt;
      m.mask = mask;
      m.mask_negated = true;
      absorbed_.push_back(t);
      t = scores;
    }
    // An optional scale by a constant.
    const Node& tn = g_.node(t);
    bool div = tn.target == "aten.div.Tensor", mul = tn.target == "aten.mul.Tensor";
    int scores = t;
    if ((div || mul) && tn.args.size() == 2 && tn.kwargs.empty() && tn.args[0].is_node()) {
      std::optional<double> c = number(tn.args[1]);
      if (!c || *c == 0.0 || !single_user(t)) return std::nullopt;
      m.scale = div ? 1.0 / *c : *c;
      absorbed_.push_back(t);
      scores = tn.args[0].node;
    }
    int b1 = strip(Arg::node_ref(scores));
    if (b1 < 0 || g_.node(b1).target != "aten.bmm.default" || !single_user(b1)) return std::nullopt;
    absorbed_.push_back(b1);
    const Node& first = g_.node(b1);
    m.q = strip(first.args[0]);
    int kt = strip(first.args[1]);
    m.v = strip(b2.args[1]);
    if (m.q < 0 || kt < 0 || m.v < 0) return std::nullopt;
    m.k = untranspose(kt);
    if (m.k < 0) return std::nullopt;
    if (!operands_agree(m, sm.meta[0], dtype)) return std::nullopt;
    m.product = id;
    m.absorbed = absorbed_;
    return m;
  }

 private:
  // The nodes that read node `id` (Graph::users, asked once per node).
  const std::vector<int>& users(int id) {
    auto it = users_.find(id);
    if (it == users_.end()) it = users_.emplace(id, g_.users(id)).first;
    return it->second;
  }
  // Read by exactly one node, which is not the graph's output.
  bool single_user(int id) {
    const std::vector<int>& u = users(id);
    return u.size() == 1 && g_.node(u[0]).kind != graph::NodeKind::Output;
  }
  // The node is read once, by the pattern's next step (its user is already absorbed).
  bool only_for(int id) {
    return single_user(id) &&
           std::find(absorbed_.begin(), absorbed_.end(), users(id)[0]) != absorbed_.end();
  }

  // (input, probability) where node id is a dropout in training mode of input, read by nothing
  // else (the nodes absorbed): getitem(native_dropout(x, prob, true), 0) with the mask unread, or
  // x * (bernoulli_(empty_like(x), keep) / keep) with prob = 1 - keep, as dropout traces to on a
  // CPU (x read by the empty_like and the product alone).
  std::optional<std::pair<int, double>> dropout_of(int id) {
    const Node& n = g_.node(id);
    if (n.target == "getitem" && n.args.size() == 2 && n.args[0].is_node() &&
        n.args[1].kind == Arg::Kind::Int && n.args[1].i == 0) {
      int nd = n.args[0].node;
      const Node& d = g_.node(nd);
      if (d.target != "aten.native_dropout.default" || d.args.size() != 3 || !d.args[0].is_node())
        return std::nullopt;
      for (int u : users(nd)) {  // (the mask's getitem, where there is one, is unread)
        if (u != id && (g_.node(u).target != "getitem" || !users(u).empty())) return std::nullopt;
      }
      std::optional<double> prob = number(d.args[1]);
      bool train = d.args[2].kind == Arg::Kind::Bool && d.args[2].b;
      if (!prob || !train || *prob <= 0.0 || *prob >= 1.0 || !single_user(d.args[0].node))
        return std::nullopt;
      absorbed_.insert(absorbed_.end(), {id, nd});
      return std::make_pair(d.args[0].node, *prob);
    }
    if (n.target != "aten.mul.Tensor" || n.args.size() != 2 || !n.kwargs.empty() ||
        !n.args[0].is_node() || !n.args[1].is_node())
      return std::nullopt;
    for (int side : {0, 1}) {
      int x = n.args[side].node, scaled = n.args[1 - side].node;
      const Node& dv = g_.node(scaled);
      if (dv.target != "aten.div_.Scalar" || dv.args.size() != 2 || !dv.args[0].is_node() ||
          !single_user(scaled))
        continue;
      int bern = dv.args[0].node;
      const Node& b = g_.node(bern);
      if (b.target != "aten.bernoulli_.float" || b.args.size() != 2 || !b.args[0].is_node() ||
          !single_user(bern))
        continue;
      int empty = b.args[0].node;
      const Node& e = g_.node(empty);
      std::optional<double> keep = number(b.args[1]), divisor = number(dv.args[1]);
      if (e.target != "aten.empty_like.default" || e.args.size() != 1 || !e.args[0].is_node() ||
          e.args[0].node != x || !single_user(empty) || !keep || !divisor || *keep != *divisor ||
          *keep <= 0.0 || *keep >= 1.0)
        continue;
      const std::vector<int>& readers = users(x);
      if (readers.size() != 2 || std::count(readers.begin(), readers.end(), empty) != 1 ||
          std::count(readers.begin(), readers.end(), id) != 1)
        continue;
      absorbed_.insert(absorbed_.end(), {id, scaled, bern, empty});
      return std::make_pair(x, 1.0 - *keep);
    }
    return std::nullopt;
  }

  // Follows views and expands that broadcast nothing back to the value they show, absorbing
  // each (read only by the next step); -1 where an expand broadcasts.
  int strip(const Arg& a) {
    if (!a.is_node()) return -1;
    int id = a.node;
    while (true) {
      const Node& n = g_.node(id);
      // (A clone is the copy a view of a strided operand needs: the same values.)
      bool view = same_values(n.target);
      bool expand = n.target == "aten.expand.default";
      if (!view && !expand) return id;
      if (n.args.empty() || !n.args[0].is_node() || !single_user(id)) return id;
      if (expand && g_.node(n.args[0].node).meta.at(0).sizes != n.meta.at(0).sizes) return -1;
      absorbed_.push_back(id);
      id = n.args[0].node;
    }
  }

  // Whether node id is the scores (a product, through views) or a constant's scale of them.
  bool leads_to_scores(int id) const {
    const Node* n = &g_.node(id);
    if ((n->target == "aten.div.Tensor" || n->target == "aten.mul.Tensor") && !n->args.empty() &&
        n->args[0].is_node())
      n = &g_.node(n->args[0].node);
    while (same_values(n->target)) {
      if (n->args.empty() || !n->args[0].is_node()) return false;
      n = &g_.node(n->args[0].node);
    }
    return n->target == "aten.bmm.default";
  }

  // (mask, x) where node id is x with -inf where mask is true: masked_fill(x, mask, -inf) or
  // where(mask, scalar_tensor(-inf), x).
  std::optional<std::pair<int, int>> minus_inf_where(int id) const {
    const Node& n = g_.node(id);
    auto minus_inf = [](const Arg& a) {
      return a.kind == Arg::Kind::Float && a.f < 0 && std::isinf(a.f);
    };
    if (n.target == "aten.masked_fill.Scalar" && n.args.size() == 3 && n.kwargs.empty() &&
        n.args[0].is_node() && n.args[1].is_node() && minus_inf(n.args[2]))
      return std::make_pair(n.args[1].node, n.args[0].node);
    if (n.target == "aten.where.self" && n.args.size() == 3 && n.args[0].is_node() &&
        n.args[1].is_node() && n.args[2].is_node()) {
      const Node& fill = g_.node(n.args[1].node);
      if (fill.target == "aten.scalar_tensor.default" && !fill.args.empty() &&
          minus_inf(fill.args[0]))
        return std::make_pair(n.args[0].node, n.args[2].node);
    }
    return std::nullopt;
  }

  // A mask of the given dtype whose sizes broadcast to the scores' (each equal or 1).
  bool broadcasts_to(int mask, const graph::TensorMeta& scores, graph::DType dtype) const {
    const Node& n = g_.node(mask);
    if (n.meta.size() != 1) return false;
    const graph::TensorMeta& mm = n.meta[0];
    if (mm.dtype != dtype || mm.device != scores.device || mm.rank() > scores.rank()) return false;
    size_t lead = scores.rank() - mm.rank();
    for (size_t d = 0; d < mm.rank(); ++d) {
      if (mm.sizes[d] != Expr(1) && mm.sizes[d] != scores.sizes[lead + d]) return false;
    }
    return true;
  }

  // A change of dtype alone (_to_copy on one device, strided, no memory format).
  bool is_cast(int id) {
    const Node& n = g_.node(id);
    if (n.target != "aten._to_copy.default" || n.args.size() != 1 || !n.args[0].is_node() ||
        n.meta.size() != 1)
      return false;
    for (const auto& [key, a] : n.kwargs) {
      // (The device is checked below; autocast names it and the strided layout.)
      bool strided = key == "layout" && a.kind == Arg::Kind::Enum && a.s == "torch.strided";
      if (key != "dtype" && key != "device" && !strided) return false;
    }
    const graph::TensorMeta& in = g_.node(n.args[0].node).meta.at(0);
    return in.device == n.meta[0].device && in.sizes == n.meta[0].sizes;
  }

  // k, where kt is k with its last two dims swapped (read only by the product).
  int untranspose(int kt) {
    const Node& n = g_.node(kt);
    if (!single_user(kt) || n.args.empty() || !n.args[0].is_node()) return -1;
    bool swap = false;
    if (n.target == "aten.permute.default" && n.args.size() == 2) {
      const std::vector<Arg>& p = n.args[1].list;
      swap = p.size() == 4 && p[0].i == 0 && p[1].i == 1 && p[2].i == 3 && p[3].i == 2;
    } else if (n.target == "aten.transpose.int" && n.args.size() == 3) {
      int64_t a = n.args[1].i < 0 ? n.args[1].i + 4 : n.args[1].i;
      int64_t b = n.args[2].i < 0 ? n.args[2].i + 4 : n.args[2].i;
      swap = std::min(a, b) == 2 && std::max(a, b) == 3;
    }
    if (!swap) return -1;
    absorbed_.push_back(kt);
    return n.args[0].node;
  }

  static std::optional<double> number(const Arg& a) {
    if (a.kind == Arg::Kind::Float) return a.f;
    if (a.kind == Arg::Kind::Int) return static_cast<double>(a.i);
    return std::nullopt;
  }

  // q [B, H, S, D], k [B, H, L, D], v [B, H, L, Dv], probabilities [B, H, S, L]: one floating
  // dtype and device.
  bool operands_agree(const Match& m, const graph::TensorMeta& probs, graph::DType dtype) const {
    const Node &q = g_.node(m.q), &k = g_.node(m.k), &v = g_.node(m.v);
    if (q.meta.size() != 1 || k.meta.size() != 1 || v.meta.size() != 1) return false;
    const graph::TensorMeta &mq = q.meta[0], &mk = k.meta[0], &mv = v.meta[0];
    for (const graph::TensorMeta* t : {&mq, &mk, &mv}) {
      if (t->rank() != 4 || t->dtype != dtype || t->device != probs.device) return false;
    }
    if (!graph::is_floating(dtype)) return false;
    for (size_t d = 0; d < 2; ++d) {
      if (mq.sizes[d] != mk.sizes[d] || mq.sizes[d] != mv.sizes[d] || mq.sizes[d] != probs.sizes[d])
        return false;
    }
    return mq.sizes[3] == mk.sizes[3] && mk.sizes[2] == mv.sizes[2] &&
           probs.sizes[2] == mq.sizes[2] && probs.sizes[3] == mk.sizes[2];
  }

  const Graph& g_;
  bool dropout_;
  std::map<int, std::vector<int>> users_;
  std::vector<int> absorbed_;
};

Arg remap(const Arg& a, const std::vector<int>& ids) {
  Arg out = a;
  if (a.is_node()) out.node = ids.at(a.node);
  for (Arg& x : out.list) x = remap(x, ids);
  return out;
}

// Dense strides for `sizes` in the order of `like`'s strides (largest first; hints decide).
std::vector<Expr> dense_like(const std::vector<Expr>& sizes, const std::vector<Expr>& like) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sym::size_hint(like[a], sym::RangeEnv{}) > sym::size_hint(like[b], sym::RangeEnv{});
  });
  std::vector<Expr> strides(sizes.size());
  Expr s = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = s;
    s = s * sizes[*it];
  }
  return strides;
}

// The schema of the call the rewrite makes, as a C++ wrapper passes it (graph::Node::c_args):
// scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
// is_causal=False, *, scale=None, enable_gqa=False).
std::vector<graph::CArg> sdpa_c_args() {
  return {{"query", "Tensor", std::nullopt},          {"key", "Tensor", std::nullopt},
          {"value", "Tensor", std::nullopt},          {"attn_mask", "Tensor?", Arg::none()},
          {"dropout_p", "float", Arg::floating(0.0)}, {"is_causal", "bool", Arg::boolean(false)},
          {"scale", "float?", Arg::none()},           {"enable_gqa", "bool", Arg::boolean(false)}};
}

Arg size_arg(const Expr& e) {
  auto v = e.as_int();
  return v ? Arg::integer(*v) : Arg::symbolic(e);
}

}  // namespace

std::vector<AttentionMatch> find_attention(const graph::Graph& g, bool dropout) {
  Matcher matcher(g, dropout);
  std::vector<AttentionMatch> found;
  std::set<int> absorbed;
  for (const Node& n : g.nodes()) {
    std::optional<Match> m = matcher.at(n.id);
    if (!m) continue;
    bool clash = false;
    for (int a : m->absorbed) clash |= absorbed.count(a) > 0;
    if (clash) continue;
    absorbed.insert(m->absorbed.begin(), m->absorbed.end());
    found.push_back(*m);
  }
  return found;
}

std::optional<graph::Graph> rewrite_attention(const graph::Graph& g,
                                              std::vector<std::string>* notes) {
  std::map<int, Match> at;  // second product -> its match
  std::set<int> absorbed;
  for (const Match& m : find_attention(g)) {
    at[m.product] = m;
    absorbed.insert(m.absorbed.begin(), m.absorbed.end());
  }
  if (at.empty()) return std::nullopt;
  Graph out;
  for (const graph::SizeSymbol& s : g.symbols()) out.add_symbol(s);
  std::set<std::string> names;
  for (const Node& n : g.nodes()) names.insert(n.name);
  std::vector<int> ids(g.nodes().size(), -1);
  for (const Node& n : g.nodes()) {
    auto match = at.find(n.id);
    if (absorbed.count(n.id) && match == at.end()) continue;
    if (n.kind == graph::NodeKind::Placeholder) {
      ids[n.id] = out.add_placeholder(n.name, n.meta, n.scalar_type, n.symint_value);
    } else if (n.kind == graph::NodeKind::Output) {
      std::vector<Arg> outs;
      for (const Arg& a : n.args) outs.push_back(remap(a, ids));
      out.set_output(outs);
    } else if (match != at.end()) {
      const Match& m = match->second;
      const graph::TensorMeta& q = g.node(m.q).meta[0];
      const graph::TensorMeta& v = g.node(m.v).meta[0];
      graph::TensorMeta result = q;
      result.sizes = {q.sizes[0], q.sizes[1], q.sizes[2], v.sizes[3]};
      result.strides = dense_like(result.sizes, q.strides);
      result.offset = 0;
      std::string name = n.name + "_attention";
      while (names.count(name)) name += "_";
      names.insert(name);
      std::vector<std::pair<std::string, Arg>> kwargs;
      if (m.mask >= 0 && m.mask_negated) {
        std::string keep = n.name + "_keep";
        while (names.count(keep)) keep += "_";
        names.insert(keep);
        int negated = out.add_call(keep, "aten.logical_not.default", {Arg::node_ref(ids[m.mask])},
                                   {}, g.node(m.mask).meta, n.stack_trace);
        kwargs.emplace_back("attn_mask", Arg::node_ref(negated));
      } else if (m.mask >= 0) {
        kwargs.emplace_back("attn_mask", Arg::node_ref(ids[m.mask]));
      }
      kwargs.emplace_back("scale", Arg::floating(m.scale));
      int call =
          out.add_call(name, "aten.scaled_dot_product_attention.default",
                       {Arg::node_ref(ids[m.q]), Arg::node_ref(ids[m.k]), Arg::node_ref(ids[m.v])},
                       kwargs, {result}, n.stack_trace);
      out.set_c_args(call, sdpa_c_args());
      std::vector<Arg> shape;
      for (const Expr& e : n.meta[0].sizes) shape.push_back(size_arg(e));
      ids[n.id] =
          out.add_call(n.name, "aten.view.default", {Arg::node_ref(call), Arg::list_of(shape)}, {},
                       n.meta, n.stack_trace);
      if (notes) {
        notes->push_back("attention: " + std::to_string(m.absorbed.size()) + " nodes ending in " +
                         n.name + " replaced by one " +
                         "scaled_dot_product_attention call (scale " + std::to_string(m.scale) +
                         "): the scores are never stored");
      }
    } else {
      std::vector<Arg> args;
      for (const Arg& a : n.args) args.push_back(remap(a, ids));
      std::vector<std::pair<std::string, Arg>> kwargs;
      for (const auto& [key, a] : n.kwargs) kwargs.emplace_back(key, remap(a, ids));
      ids[n.id] =
          out.add_call(n.name, n.target, args, kwargs, n.meta, n.stack_trace, n.scalar_type);
      if (!n.c_args.empty()) out.set_c_args(ids[n.id], n.c_args);
    }
  }
  out.validate();
  return out;
}

}  // namespace coil::lower
