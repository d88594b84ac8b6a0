// Tests for graph/graph.h: dtype tables, TensorMeta, Arg, building and validating a Graph.
#include "coil/graph/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace coil::graph {
namespace {

using sym::Expr;

TensorMeta contiguous(std::vector<Expr> sizes, DType dtype = DType::Float32) {
  TensorMeta m;
  m.dtype = dtype;
  m.sizes = sizes;
  m.strides.assign(sizes.size(), Expr(1));
  for (size_t i = sizes.size(); i > 1; --i) m.strides[i - 2] = m.strides[i - 1] * sizes[i - 1];
  return m;
}

// The message of the GraphError that f throws ("" when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

TEST(DType, Tables) {
  const DType all[] = {DType::Bool,    DType::UInt8,     DType::Int8,      DType::Int16,
                       DType::Int32,   DType::Int64,     DType::Float16,   DType::BFloat16,
                       DType::Float32, DType::Float64,   DType::UInt16,    DType::UInt32,
                       DType::UInt64,  DType::Complex64, DType::Complex128};
  const char* names[] = {"bool",   "uint8",   "int8",     "int16",     "int32",
                         "int64",  "float16", "bfloat16", "float32",   "float64",
                         "uint16", "uint32",  "uint64",   "complex64", "complex128"};
  const char* tags[] = {"b8",  "u8",  "i8",  "i16", "i32", "i64", "f16", "bf16",
                        "f32", "f64", "u16", "u32", "u64", "c64", "c128"};
  const int sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 2, 4, 8, 8, 16};
  const char* cpp[] = {"bool",     "uint8_t",   "int8_t",    "int16_t", "int32_t",
                       "int64_t",  "coil_half", "coil_bf16", "float",   "double",
                       "uint16_t", "uint32_t",  "uint64_t",  "void",    "void"};
  for (size_t i = 0; i < std::size(all); ++i) {
    EXPECT_STREQ(dtype_name(all[i]), names[i]);
    EXPECT_STREQ(dtype_tag(all[i]), tags[i]);
    EXPECT_EQ(dtype_from_name(names[i]), all[i]);
    EXPECT_EQ(dtype_itemsize(all[i]), sizes[i]);
    EXPECT_STREQ(dtype_cpp_type(all[i]), cpp[i]);
    bool floating = i >= 6 && i <= 9;
    bool wide_unsigned = i >= 10 && i <= 12;
    bool complex = i >= 13;
    bool integral = (i >= 1 && i <= 5) || wide_unsigned;
    EXPECT_EQ(is_floating(all[i]), floating) << names[i];
    EXPECT_EQ(is_integral(all[i]), integral) << names[i];
    EXPECT_EQ(is_wide_unsigned(all[i]), wide_unsigned) << names[i];
    EXPECT_EQ(is_opaque(all[i]), wide_unsigned || complex) << names[i];
  }
  EXPECT_EQ(dtype_from_name("float"), std::nullopt);
  EXPECT_EQ(dtype_from_name("torch.float32"), std::nullopt);
  EXPECT_EQ(dtype_from_name(""), std::nullopt);
}

TEST(TensorMeta, NumelAndEquality) {
  Expr s0 = Expr::symbol("s0");
  TensorMeta m = contiguous({4, s0, 2});
  EXPECT_EQ(m.rank(), 3u);
  EXPECT_EQ(m.numel(), Expr(8) * s0);
  EXPECT_EQ(m.strides, (std::vector<Expr>{s0 * 2, 2, 1}));
  EXPECT_EQ(contiguous({}).numel(), Expr(1));
  EXPECT_EQ(contiguous({3, 5}).numel(), Expr(15));

  TensorMeta other = m;
  EXPECT_EQ(m, other);
  other.offset = 4;
  EXPECT_FALSE(m == other);
  other = m;
  other.device = "cuda:0";
  EXPECT_FALSE(m == other);
  other = m;
  other.dtype = DType::Float16;
  EXPECT_FALSE(m == other);
}

TEST(Arg, FactoriesAndEquality) {
  EXPECT_TRUE(Arg::none().is_none());
  EXPECT_EQ(Arg::boolean(true).kind, Arg::Kind::Bool);
  EXPECT_TRUE(Arg::boolean(true).b);
  EXPECT_EQ(Arg::integer(-3).i, -3);
  EXPECT_EQ(Arg::floating(2.5).f, 2.5);
  EXPECT_EQ(Arg::str("tanh").s, "tanh");
  EXPECT_EQ(Arg::enum_text("torch.strided").kind, Arg::Kind::Enum);
  EXPECT_EQ(Arg::dtype_of(DType::Int64).dtype, DType::Int64);
  EXPECT_EQ(Arg::symbolic(Expr::symbol("s0")).sym, Expr::symbol("s0"));
  EXPECT_TRUE(Arg::node_ref(2).is_node());
  EXPECT_EQ(Arg::node_ref(2).node, 2);
  EXPECT_EQ(Arg::list_of({Arg::integer(1), Arg::none()}).list.size(), 2u);

  EXPECT_EQ(Arg::integer(1), Arg::integer(1));
  EXPECT_FALSE(Arg::integer(1) == Arg::integer(2));
  EXPECT_FALSE(Arg::integer(1) == Arg::floating(1.0));  // kinds differ
  EXPECT_FALSE(Arg::str("a") == Arg::enum_text("a"));
  EXPECT_EQ(Arg::floating(std::nan("")), Arg::floating(std::nan("")));
  EXPECT_FALSE(Arg::floating(0.0) == Arg::floating(-0.0));
  EXPECT_EQ(Arg::list_of({Arg::node_ref(0), Arg::list_of({Arg::boolean(false)})}),
            Arg::list_of({Arg::node_ref(0), Arg::list_of({Arg::boolean(false)})}));
  EXPECT_FALSE(Arg::list_of({Arg::node_ref(0)}) == Arg::list_of({Arg::node_ref(1)}));
  EXPECT_FALSE(Arg::list_of({}) == Arg::list_of({Arg::none()}));
}

TEST(Graph, BuildAndQuery) {
  Graph g;
  int x = g.add_placeholder("arg0_1", {contiguous({4, 8})});
  int n = g.add_placeholder("s0", {}, "symint");
  int add = g.add_call("add", "aten.add.Tensor", {Arg::node_ref(x), Arg::floating(1.0)}, {},
                       {contiguous({4, 8})}, "y = x + 1");
  int cat = g.add_call("cat", "aten.cat.default",
                       {Arg::list_of({Arg::node_ref(add), Arg::node_ref(x), Arg::node_ref(add)})},
                       {{"dim", Arg::integer(0)}}, {contiguous({12, 8})});
  int mul = g.add_call("mul", "aten.mul.Tensor", {Arg::node_ref(add)},
                       {{"other", Arg::node_ref(cat)}}, {contiguous({12, 8})});
  int out = g.set_output({Arg::node_ref(mul), Arg::none()});
  EXPECT_EQ(x, 0);
  EXPECT_EQ(out, 5);
  EXPECT_NO_THROW(g.validate());

  EXPECT_EQ(g.placeholders(), (std::vector<int>{x, n}));
  ASSERT_NE(g.output(), nullptr);
  EXPECT_EQ(g.output()->id, out);
  EXPECT_EQ(g.output()->name, "output");
  EXPECT_EQ(g.node(add).stack_trace, "y = x + 1");
  EXPECT_EQ(g.node(cat).kwarg("dim")->i, 0);
  EXPECT_EQ(g.node(cat).kwarg("axis"), nullptr);
  // Each user once, in node order; refs inside lists and kwargs count.
  EXPECT_EQ(g.users(x), (std::vector<int>{add, cat}));
  EXPECT_EQ(g.users(add), (std::vector<int>{cat, mul}));
  EXPECT_EQ(g.users(cat), (std::vector<int>{mul}));
  EXPECT_EQ(g.users(mul), (std::vector<int>{out}));
  EXPECT_TRUE(g.users(n).empty());
  EXPECT_EQ(error_of([&] { g.node(6); }), "node id 6 is out of range; the graph has 6 nodes");
  EXPECT_NE(error_of([&] { g.node(-1); }), "");
}

TEST(Graph, OutputIsNullUntilSet) {
  Graph g;
  EXPECT_EQ(g.output(), nullptr);
  g.add_placeholder("x", {contiguous({2})});
  EXPECT_EQ(g.output(), nullptr);
  g.set_output({});
  EXPECT_NE(g.output(), nullptr);
}

TEST(GraphErrors, BuildingChecksReferencesAndOrder) {
  Graph g;
  int x = g.add_placeholder("x", {contiguous({2})});
  EXPECT_EQ(
      error_of([&] { g.add_call("bad", "aten.neg.default", {Arg::node_ref(x + 5)}, {}, {}); }),
      "node 'bad' (#1) refers to node #5, which is not an earlier node; nodes may only use "
      "nodes before them");
  EXPECT_NE(error_of([&] {
              g.add_call("bad", "aten.neg.default", {Arg::list_of({Arg::node_ref(-1)})}, {}, {});
            }),
            "");
  EXPECT_NE(error_of([&] { g.set_output({Arg::node_ref(7)}); }), "");
  g.set_output({Arg::node_ref(x)});
  EXPECT_EQ(error_of([&] { g.add_placeholder("y", {}); }),
            "cannot add placeholder 'y' after the output node");
  EXPECT_EQ(error_of([&] { g.add_call("z", "aten.neg.default", {}, {}, {}); }),
            "cannot add node 'z' after the output node");
  EXPECT_EQ(error_of([&] { g.set_output({}); }), "the graph already has an output node");
}

// .item() and what is computed from it: calls that produce a Python number carry its kind in
// scalar_type and have no tensor metadata.
TEST(Graph, CallsMayProduceNumbers) {
  Graph g;
  int x = g.add_placeholder("x", {contiguous({}, DType::Int64)});
  int item = g.add_call("_local_scalar_dense", "aten._local_scalar_dense.default",
                        {Arg::node_ref(x)}, {}, {}, "", "int");
  int ge =
      g.add_call("ge", "operator.ge", {Arg::node_ref(item), Arg::integer(0)}, {}, {}, "", "bool");
  g.add_call("_assert_scalar", "aten._assert_scalar.default",
             {Arg::node_ref(ge), Arg::str("u0 >= 0")}, {}, {});
  g.set_output({Arg::node_ref(item)});
  g.validate();
  EXPECT_EQ(g.node(item).scalar_type, "int");
  EXPECT_EQ(g.to_text(),
            "%x : i64[]{} = placeholder\n"
            "%_local_scalar_dense : int = aten._local_scalar_dense.default(%x)\n"
            "%ge : bool = operator.ge(%_local_scalar_dense, 0)\n"
            "%_assert_scalar = aten._assert_scalar.default(%ge, 'u0 >= 0')\n"
            "return (%_local_scalar_dense,)\n");
}

TEST(GraphErrors, NumbersAndEffects) {
  auto graph_with = [](const std::string& target, std::vector<Arg> args,
                       std::vector<TensorMeta> meta, const std::string& scalar_type) {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    g.add_call("c", target, std::move(args), {}, std::move(meta), "", scalar_type);
    g.set_output({});
    return error_of([&] { g.validate(); });
  };
  Arg x = Arg::node_ref(0);
  EXPECT_EQ(graph_with("aten._local_scalar_dense.default", {x}, {}, "complex"),
            "call node 'c' (#1) has unknown scalar_type 'complex'; expected \"\", \"int\", "
            "\"float\" or \"bool\"");
  EXPECT_EQ(graph_with("aten._local_scalar_dense.default", {x}, {}, "symint"),
            "call node 'c' (#1) has unknown scalar_type 'symint'; expected \"\", \"int\", "
            "\"float\" or \"bool\"");
  EXPECT_EQ(graph_with("aten._local_scalar_dense.default", {x}, {contiguous({})}, "float"),
            "call node 'c' (#1) produces a number (float) but has tensor metadata");
  const std::string bad_effects =
      "with_effects node 'c' (#1) must have a token node and an op name as its first two "
      "arguments, and produce at least the new token";
  EXPECT_EQ(graph_with("with_effects", {x, Arg::str("aten._print.default")}, {}, ""), bad_effects);
  EXPECT_EQ(graph_with("with_effects", {x}, {contiguous({0})}, ""), bad_effects);
  EXPECT_EQ(graph_with("with_effects", {Arg::integer(0), Arg::str("aten._print.default")},
                       {contiguous({0})}, ""),
            bad_effects);
  EXPECT_EQ(graph_with("with_effects", {x, Arg::str("")}, {contiguous({0})}, ""), bad_effects);
  EXPECT_EQ(graph_with("with_effects", {x, Arg::str("aten._print.default"), Arg::str("hi")},
                       {contiguous({0})}, ""),
            "");
}

TEST(GraphErrors, ValidateNamesTheNode) {
  {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    g.add_call("x", "aten.neg.default", {Arg::node_ref(0)}, {}, {contiguous({2})});
    g.set_output({Arg::node_ref(1)});
    EXPECT_EQ(error_of([&] { g.validate(); }), "duplicate node name 'x': used by nodes #0 and #1");
  }
  {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    EXPECT_EQ(error_of([&] { g.validate(); }),
              "the graph has no output node; the last node ('x') must be the output");
  }
  EXPECT_EQ(error_of([] { Graph().validate(); }),
            "the graph is empty; it needs at least an output node");
  {
    Graph g;
    g.add_call("c", "aten.zeros.default", {Arg::list_of({Arg::integer(2)})}, {}, {});
    g.add_placeholder("x", {contiguous({2})});
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }),
              "placeholder node 'x' (#1) comes after a call node; placeholders must come first");
  }
  {
    Graph g;
    TensorMeta m = contiguous({2, 3});
    m.strides.pop_back();
    g.add_placeholder("x", {m});
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }),
              "node 'x' (#0) output 0 has 2 sizes but 1 strides; expected one stride per size");
  }
  {
    Graph g;
    g.add_placeholder("n", {}, "complex");
    g.set_output({});
    EXPECT_NE(error_of([&] { g.validate(); }).find("unknown scalar_type 'complex'"),
              std::string::npos);
  }
  {
    Graph g;
    g.add_placeholder("n", {contiguous({2})}, "int");
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }),
              "placeholder node 'n' (#0) is a scalar (int) but has tensor metadata");
  }
  {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    g.add_call("", "aten.neg.default", {Arg::node_ref(0)}, {}, {});
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }), "node #1 has an empty name");
  }
  {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    g.add_call("neg", "", {Arg::node_ref(0)}, {}, {});
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }), "call node 'neg' (#1) has an empty target");
  }
  {
    Graph g;
    g.add_placeholder("x", {contiguous({2})});
    g.add_call("getitem", "getitem", {Arg::node_ref(0), Arg::integer(-1)}, {}, {});
    g.set_output({});
    EXPECT_EQ(error_of([&] { g.validate(); }),
              "getitem node 'getitem' (#1) must have exactly two arguments: a node and a "
              "non-negative int index");
  }
}

}  // namespace
}  // namespace coil::graph
