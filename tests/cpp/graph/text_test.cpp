// Tests for the FX-like text form (Graph::to_text, meta_to_text, arg_to_text).
#include <gtest/gtest.h>

#include <limits>

#include "coil/graph/graph.h"

namespace coil::graph {
namespace {

using sym::Expr;

TensorMeta meta(DType dtype, std::vector<Expr> sizes, std::vector<Expr> strides, Expr offset = 0,
                std::string device = "cpu") {
  TensorMeta m;
  m.dtype = dtype;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.offset = offset;
  m.device = std::move(device);
  return m;
}

TEST(Text, SmallGraph) {
  Graph g;
  TensorMeta m48 = meta(DType::Float32, {4, 8}, {8, 1});
  TensorMeta m41 = meta(DType::Float32, {4, 1}, {1, 1});
  int x = g.add_placeholder("arg0_1", {m48});
  int add = g.add_call("add", "aten.add.Tensor", {Arg::node_ref(x), Arg::floating(1.0)}, {}, {m48});
  int vm = g.add_call(
      "var_mean", "aten.var_mean.correction", {Arg::node_ref(add), Arg::list_of({Arg::integer(1)})},
      {{"correction", Arg::integer(0)}, {"keepdim", Arg::boolean(true)}}, {m41, m41});
  int var = g.add_call("getitem", "getitem", {Arg::node_ref(vm), Arg::integer(0)}, {}, {m41});
  int mean = g.add_call("getitem_1", "getitem", {Arg::node_ref(vm), Arg::integer(1)}, {}, {m41});
  g.set_output({Arg::node_ref(add), Arg::node_ref(var), Arg::node_ref(mean)});
  EXPECT_EQ(g.to_text(),
            "%arg0_1 : f32[4, 8]{8, 1} = placeholder\n"
            "%add : f32[4, 8]{8, 1} = aten.add.Tensor(%arg0_1, 1.0)\n"
            "%var_mean : (f32[4, 1]{1, 1}, f32[4, 1]{1, 1}) = "
            "aten.var_mean.correction(%add, [1], correction=0, keepdim=True)\n"
            "%getitem : f32[4, 1]{1, 1} = getitem(%var_mean, 0)\n"
            "%getitem_1 : f32[4, 1]{1, 1} = getitem(%var_mean, 1)\n"
            "return (%add, %getitem, %getitem_1)\n");
}

TEST(Text, EveryArgKindAndMetaForm) {
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
  Graph g;
  int x = g.add_placeholder("x", {meta(DType::BFloat16, {s0, s1}, {s1, 1})});
  int n = g.add_placeholder("sym_n", {}, "symint");
  int v = g.add_call(
      "view", "aten.as_strided.default",
      {Arg::node_ref(x), Arg::list_of({Arg::symbolic(s0)}), Arg::list_of({Arg::integer(1)})},
      {{"storage_offset", Arg::integer(3)}}, {meta(DType::BFloat16, {s0}, {1}, 3, "cuda:0")});
  int full = g.add_call("full", "aten.full.default",
                        {Arg::list_of({}), Arg::floating(-std::numeric_limits<double>::infinity())},
                        {{"dtype", Arg::dtype_of(DType::Int64)},
                         {"layout", Arg::enum_text("torch.strided")},
                         {"device", Arg::enum_text("cpu")},
                         {"pin_memory", Arg::boolean(false)},
                         {"fill", Arg::floating(std::numeric_limits<double>::quiet_NaN())},
                         {"tiny", Arg::floating(1e-20)},
                         {"note", Arg::str("it's a\ttab\\")},
                         {"missing", Arg::none()}},
                        {meta(DType::Int64, {}, {})});
  g.set_output({Arg::node_ref(v), Arg::node_ref(full), Arg::node_ref(n)});
  EXPECT_EQ(g.to_text(),
            "%x : bf16[s0, s1]{s1, 1} = placeholder\n"
            "%sym_n : symint = placeholder\n"
            "%view : bf16[s0]{1}+3@cuda:0 = aten.as_strided.default(%x, [s0], [1], "
            "storage_offset=3)\n"
            "%full : i64[]{} = aten.full.default([], -inf, dtype=torch.int64, "
            "layout=torch.strided, device=cpu, pin_memory=False, fill=nan, tiny=1e-20, "
            "note='it\\'s a\\ttab\\\\', missing=None)\n"
            "return (%view, %full, %sym_n)\n");
}

TEST(Text, OneOutputIsATupleAndNoMetaOmitsTheType) {
  Graph g;
  int x = g.add_placeholder("x", {meta(DType::Bool, {2}, {1})});
  int sz = g.add_call("sym_size", "aten.sym_size.int", {Arg::node_ref(x), Arg::integer(0)}, {}, {});
  g.set_output({Arg::node_ref(sz)});
  EXPECT_EQ(g.to_text(),
            "%x : b8[2]{1} = placeholder\n"
            "%sym_size = aten.sym_size.int(%x, 0)\n"
            "return (%sym_size,)\n");
  Graph empty;
  empty.set_output({});
  EXPECT_EQ(empty.to_text(), "return ()\n");
}

TEST(Text, DTypeTags) {
  const std::pair<DType, const char*> tags[] = {
      {DType::Bool, "b8"},     {DType::UInt8, "u8"},      {DType::Int8, "i8"},
      {DType::Int16, "i16"},   {DType::Int32, "i32"},     {DType::Int64, "i64"},
      {DType::Float16, "f16"}, {DType::BFloat16, "bf16"}, {DType::Float32, "f32"},
      {DType::Float64, "f64"},
  };
  for (const auto& [d, tag] : tags) {
    EXPECT_EQ(meta_to_text(meta(d, {3}, {1})), std::string(tag) + "[3]{1}");
  }
}

TEST(Text, SymbolicMetaUsesExprStr) {
  Expr s0 = Expr::symbol("s0");
  Expr size = s0 * 2 + 1;
  Expr off = sym::floordiv(s0, 4);
  TensorMeta m = meta(DType::Float32, {size, 3}, {3, 1}, off);
  EXPECT_EQ(meta_to_text(m), "f32[" + size.str() + ", 3]{3, 1}+" + off.str());
}

TEST(Text, ArgToTextHandlesBadNodeIds) {
  Graph g;
  g.add_placeholder("x", {});
  EXPECT_EQ(arg_to_text(Arg::node_ref(0), g), "%x");
  EXPECT_EQ(arg_to_text(Arg::node_ref(4), g), "%<invalid node #4>");
  EXPECT_EQ(arg_to_text(Arg::list_of({Arg::integer(-2), Arg::floating(0.5)}), g), "[-2, 0.5]");
}

}  // namespace
}  // namespace coil::graph
