// Small ATen graphs shared by the C++ tests of lower/, sched/ and codegen/ (and the snapshots).
//
// Every graph is built the way coil receives it from torch.compile: placeholders with contiguous
// TensorMeta, ATen call nodes ("aten.add.Tensor", "aten._softmax.default", ...) whose metadata is
// what eager would produce, getitem nodes for tuple outputs, and one output node. Sizes are small
// and static so that expected IR and generated code stay short enough to read in a test.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "coil/graph/graph.h"
#include "coil/sym/expr.h"

namespace coil::test {

using graph::Arg;
using graph::DType;
using graph::TensorMeta;
using sym::Expr;

// Metadata of a contiguous tensor (torch's strides: size-1 dims do not advance the stride).
TensorMeta contiguous(std::vector<Expr> sizes, DType dtype = DType::Float32);
// Metadata with explicit strides (views: permute, expand, ...).
TensorMeta strided(std::vector<Expr> sizes, std::vector<Expr> strides,
                   DType dtype = DType::Float32);

// A terse front end over graph::Graph: each method adds one node and returns an Arg naming it.
class GraphBuilder {
 public:
  Arg input(const std::string& name, TensorMeta meta);
  Arg call(const std::string& name, const std::string& target, std::vector<Arg> args,
           TensorMeta meta, std::vector<std::pair<std::string, Arg>> kwargs = {});
  // A tuple-returning op followed by one getitem per element, named as FX names them ("getitem",
  // "getitem_1", ... numbered across the whole graph). Returns the getitems.
  std::vector<Arg> call_tuple(const std::string& name, const std::string& target,
                              std::vector<Arg> args, std::vector<TensorMeta> metas,
                              std::vector<std::pair<std::string, Arg>> kwargs = {});
  graph::Graph finish(std::vector<Arg> outputs);

  const graph::Graph& graph() const { return g_; }
  // The schema a C++ wrapper passes for call `a` (graph::Node::c_args).
  void set_c_args(const Arg& a, std::vector<graph::CArg> c_args) {
    g_.set_c_args(a.node, std::move(c_args));
  }
  // Marks input `a` donated (graph::Node::donated).
  void donate(const Arg& a) { g_.set_donated(a.node); }

 private:
  graph::Graph g_;
  int getitems_ = 0;
};

Arg ints(std::vector<int64_t> values);  // an int list argument: [0, 1]
Arg iarg(int64_t v);                    // Arg::integer
Arg farg(double v);                     // Arg::floating
Arg barg(bool v);                       // Arg::boolean

// ---- the fixed set of graphs (also the snapshot set) ----
// x f32[8, 16]: exp(relu((x + 1.0) * 2.0) - x): five chained pointwise ops.
graph::Graph pointwise_chain();
// x f32[8, 16] + y f32[16].
graph::Graph broadcast_add();
// x f32[8, 16] + permute(y f32[16, 8], [1, 0]).
graph::Graph transpose_add();
// _softmax(x f32[8, 32], -1).
graph::Graph softmax();
// _log_softmax(x f32[8, 32], -1).
graph::Graph log_softmax();
// native_layer_norm(x f32[8, 32], [32], w f32[32], b f32[32], 1e-5), returning (out, mean, rstd).
graph::Graph layer_norm();
// x f32[16, 8] - sum(x, [0], keepdim=True) / 16: a reduction over dim 0 and its consumer.
graph::Graph sum_dim0();
// var_mean(x f32[8, 32], [1], correction=1, keepdim=True), returning (var, mean).
graph::Graph var_mean();
// cat([x f32[4, 8], y f32[4, 8]], 1).
graph::Graph cat();
// gelu(mm(x f32[8, 16], w f32[16, 32]) + b f32[32]).
graph::Graph mm_bias_gelu();
// embedding(w f32[10, 16], ids i64[4, 3]) + pos f32[3, 16]: a gather and its consumer.
graph::Graph embedding_add();
// index_put(x f32[6, 4], [idx i64[3]], v f32[3, 4], accumulate=True).
graph::Graph index_put_accumulate();
// _softmax(x f32[8, 2, 16, 16] * exp(scale f32[2, 1, 1]) + sigmoid(table f32[31][idx i64[16,
// 16]]), -1): Swin V2's attention softmax, a bias gathered along the row (vector gathers) and a
// per-row scale (computed before the row's loops).
graph::Graph softmax_gathered_bias();

struct NamedGraph {
  std::string name;
  std::function<graph::Graph()> build;
};
// The graphs above with their names, in a fixed order.
std::vector<NamedGraph> snapshot_graphs();
// GoogleTest prints a NamedGraph parameter by its name.
void PrintTo(const NamedGraph& g, std::ostream* os);

}  // namespace coil::test
