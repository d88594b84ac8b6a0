#include "test_graphs.h"

namespace coil::test {

TensorMeta contiguous(std::vector<Expr> sizes, DType dtype) {
  TensorMeta m;
  m.dtype = dtype;
  m.strides.assign(sizes.size(), Expr(1));
  Expr running = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    m.strides[d] = running;
    if (!(sizes[d].as_int() && *sizes[d].as_int() <= 1)) running = running * sizes[d];
  }
  m.sizes = std::move(sizes);
  return m;
}

TensorMeta strided(std::vector<Expr> sizes, std::vector<Expr> strides, DType dtype) {
  TensorMeta m;
  m.dtype = dtype;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  return m;
}

Arg GraphBuilder::input(const std::string& name, TensorMeta meta) {
  return Arg::node_ref(g_.add_placeholder(name, {std::move(meta)}));
}

Arg GraphBuilder::call(const std::string& name, const std::string& target, std::vector<Arg> args,
                       TensorMeta meta, std::vector<std::pair<std::string, Arg>> kwargs) {
  return Arg::node_ref(
      g_.add_call(name, target, std::move(args), std::move(kwargs), {std::move(meta)}));
}

std::vector<Arg> GraphBuilder::call_tuple(const std::string& name, const std::string& target,
                                          std::vector<Arg> args, std::vector<TensorMeta> metas,
                                          std::vector<std::pair<std::string, Arg>> kwargs) {
  int tuple = g_.add_call(name, target, std::move(args), std::move(kwargs), metas);
  std::vector<Arg> items;
  for (size_t k = 0; k < metas.size(); ++k) {
    std::string item = getitems_ == 0 ? "getitem" : "getitem_" + std::to_string(getitems_);
    ++getitems_;
    items.push_back(Arg::node_ref(
        g_.add_call(item, "getitem", {Arg::node_ref(tuple), Arg::integer(static_cast<int64_t>(k))},
                    {}, {metas[k]})));
  }
  return items;
}

graph::Graph GraphBuilder::finish(std::vector<Arg> outputs) {
  g_.set_output(std::move(outputs));
  g_.validate();
  return g_;
}

Arg ints(std::vector<int64_t> values) {
  std::vector<Arg> items;
  for (int64_t v : values) items.push_back(Arg::integer(v));
  return Arg::list_of(std::move(items));
}
Arg iarg(int64_t v) {
  return Arg::integer(v);
}
Arg farg(double v) {
  return Arg::floating(v);
}
Arg barg(bool v) {
  return Arg::boolean(v);
}

graph::Graph pointwise_chain() {
  GraphBuilder g;
  TensorMeta m = contiguous({8, 16});
  Arg x = g.input("arg0_1", m);
  Arg add = g.call("add", "aten.add.Tensor", {x, farg(1.0)}, m);
  Arg mul = g.call("mul", "aten.mul.Tensor", {add, farg(2.0)}, m);
  Arg relu = g.call("relu", "aten.relu.default", {mul}, m);
  Arg sub = g.call("sub", "aten.sub.Tensor", {relu, x}, m);
  Arg exp = g.call("exp", "aten.exp.default", {sub}, m);
  return g.finish({exp});
}

graph::Graph broadcast_add() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 16}));
  Arg y = g.input("arg1_1", contiguous({16}));
  Arg add = g.call("add", "aten.add.Tensor", {x, y}, contiguous({8, 16}));
  return g.finish({add});
}

graph::Graph transpose_add() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 16}));
  Arg y = g.input("arg1_1", contiguous({16, 8}));
  Arg permute =
      g.call("permute", "aten.permute.default", {y, ints({1, 0})}, strided({8, 16}, {1, 8}));
  Arg add = g.call("add", "aten.add.Tensor", {x, permute}, contiguous({8, 16}));
  return g.finish({add});
}

namespace {

graph::Graph softmax_like(const std::string& name, const std::string& target) {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 32}));
  Arg out = g.call(name, target, {x, iarg(-1), barg(false)}, contiguous({8, 32}));
  return g.finish({out});
}

}  // namespace

graph::Graph softmax() {
  return softmax_like("_softmax", "aten._softmax.default");
}

graph::Graph log_softmax() {
  return softmax_like("_log_softmax", "aten._log_softmax.default");
}

graph::Graph layer_norm() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 32}));
  Arg w = g.input("arg1_1", contiguous({32}));
  Arg bias = g.input("arg2_1", contiguous({32}));
  std::vector<Arg> out = g.call_tuple(
      "native_layer_norm", "aten.native_layer_norm.default", {x, ints({32}), w, bias, farg(1e-5)},
      {contiguous({8, 32}), contiguous({8, 1}), contiguous({8, 1})});
  return g.finish({out[0], out[1], out[2]});
}

graph::Graph sum_dim0() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({16, 8}));
  Arg sum = g.call("sum_1", "aten.sum.dim_IntList", {x, ints({0}), barg(true)}, contiguous({1, 8}));
  Arg div = g.call("div", "aten.div.Tensor", {sum, farg(16.0)}, contiguous({1, 8}));
  Arg sub = g.call("sub", "aten.sub.Tensor", {x, div}, contiguous({16, 8}));
  return g.finish({sub});
}

graph::Graph var_mean() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 32}));
  std::vector<Arg> out = g.call_tuple("var_mean", "aten.var_mean.correction", {x, ints({1})},
                                      {contiguous({8, 1}), contiguous({8, 1})},
                                      {{"correction", iarg(1)}, {"keepdim", barg(true)}});
  return g.finish({out[0], out[1]});
}

graph::Graph cat() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({4, 8}));
  Arg y = g.input("arg1_1", contiguous({4, 8}));
  Arg out = g.call("cat", "aten.cat.default", {Arg::list_of({x, y}), iarg(1)}, contiguous({4, 16}));
  return g.finish({out});
}

graph::Graph mm_bias_gelu() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 16}));
  Arg w = g.input("arg1_1", contiguous({16, 32}));
  Arg bias = g.input("arg2_1", contiguous({32}));
  Arg mm = g.call("mm", "aten.mm.default", {x, w}, contiguous({8, 32}));
  g.set_c_args(mm, {{"self", "Tensor", std::nullopt}, {"mat2", "Tensor", std::nullopt}});
  Arg add = g.call("add", "aten.add.Tensor", {mm, bias}, contiguous({8, 32}));
  Arg gelu = g.call("gelu", "aten.gelu.default", {add}, contiguous({8, 32}));
  return g.finish({gelu});
}

graph::Graph embedding_add() {
  GraphBuilder g;
  Arg w = g.input("arg0_1", contiguous({10, 16}));
  Arg ids = g.input("arg1_1", contiguous({4, 3}, DType::Int64));
  Arg pos = g.input("arg2_1", contiguous({3, 16}));
  Arg emb = g.call("embedding", "aten.embedding.default", {w, ids}, contiguous({4, 3, 16}));
  Arg add = g.call("add", "aten.add.Tensor", {emb, pos}, contiguous({4, 3, 16}));
  return g.finish({add});
}

graph::Graph index_put_accumulate() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({6, 4}));
  Arg idx = g.input("arg1_1", contiguous({3}, DType::Int64));
  Arg v = g.input("arg2_1", contiguous({3, 4}));
  Arg put = g.call("index_put", "aten.index_put.default", {x, Arg::list_of({idx}), v, barg(true)},
                   contiguous({6, 4}));
  return g.finish({put});
}

graph::Graph softmax_gathered_bias() {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({8, 2, 16, 16}));
  Arg scale = g.input("arg1_1", contiguous({2, 1, 1}));
  Arg table = g.input("arg2_1", contiguous({31}));
  Arg idx = g.input("arg3_1", contiguous({16, 16}, DType::Int64));
  Arg exp = g.call("exp", "aten.exp.default", {scale}, contiguous({2, 1, 1}));
  Arg mul = g.call("mul", "aten.mul.Tensor", {x, exp}, contiguous({8, 2, 16, 16}));
  Arg bias =
      g.call("index", "aten.index.Tensor", {table, Arg::list_of({idx})}, contiguous({16, 16}));
  Arg sig = g.call("sigmoid", "aten.sigmoid.default", {bias}, contiguous({16, 16}));
  Arg add = g.call("add", "aten.add.Tensor", {mul, sig}, contiguous({8, 2, 16, 16}));
  Arg out = g.call("_softmax", "aten._softmax.default", {add, iarg(-1), barg(false)},
                   contiguous({8, 2, 16, 16}));
  return g.finish({out});
}

std::vector<NamedGraph> snapshot_graphs() {
  return {
      {"pointwise_chain", pointwise_chain},
      {"broadcast_add", broadcast_add},
      {"transpose_add", transpose_add},
      {"softmax", softmax},
      {"log_softmax", log_softmax},
      {"layer_norm", layer_norm},
      {"sum_dim0", sum_dim0},
      {"var_mean", var_mean},
      {"cat", cat},
      {"mm_bias_gelu", mm_bias_gelu},
      {"embedding_add", embedding_add},
      {"index_put_accumulate", index_put_accumulate},
      {"softmax_gathered_bias", softmax_gathered_bias},
  };
}

void PrintTo(const NamedGraph& g, std::ostream* os) {
  *os << g.name;
}

}  // namespace coil::test
