// Tests for graph/serialize.h: exact round trips through JSON and graph files.
#include "coil/graph/serialize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include <unistd.h>

#include "coil/graph/json.h"

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

// Every field of every node, so a round trip is checked beyond what to_text prints.
void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    SCOPED_TRACE("node " + x.name);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.target, y.target);
    EXPECT_TRUE(x.args == y.args);
    EXPECT_TRUE(x.kwargs == y.kwargs);
    EXPECT_TRUE(x.meta == y.meta);
    EXPECT_EQ(x.scalar_type, y.scalar_type);
    EXPECT_EQ(x.stack_trace, y.stack_trace);
  }
}

// Checks the round-trip guarantees of serialize.h and returns the reloaded graph.
Graph round_trip(const Graph& g) {
  std::string json = to_json(g);
  Graph back = from_json(json);
  EXPECT_EQ(back.to_text(), g.to_text());
  EXPECT_EQ(to_json(back), json);
  expect_same_graph(g, back);
  return back;
}

// Symbolic expressions of every kind sym has.
std::vector<Expr> all_expr_kinds() {
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
  return {
      Expr(0),
      Expr(-7),
      Expr(std::numeric_limits<int64_t>::max()),
      Expr(std::numeric_limits<int64_t>::min()),
      s0,
      s0 + 3,
      s0 * 2 + s1 * 5 - 1,
      -s0,
      s0 * s1,
      s0 * s1 * 3 + s0,
      sym::floordiv(s0, 8),
      sym::floordiv(s0 * s1 + 4, s1 + 1),
      sym::mod(s0 + 1, 3),
      sym::min(s0, s1),
      sym::max(s0, 8),
      sym::max(sym::min(s0, s1 + 2), 1),
      sym::lt(s0, s1),
      sym::le(s0, 4),
      sym::eq(s0, s1 * 2),
      sym::ne(s1, 0),
      sym::ceildiv(s0, 16),
      // A monomial times a product of sums: rebuilt factor by factor from the left, sym would
      // distribute s1 over the first sum (regression: random seed 3869228816).
      s1 * ((s1 * 2 + s0) * (sym::eq(3, s0) + sym::ne(1, s0))),
      (s0 + 1) * (s1 + 2) * 3,
  };
}

// One node per Arg kind, tuple outputs read through getitem, symbolic sizes and offsets,
// non-finite floats, unicode stack traces, and a scalar placeholder.
Graph kitchen_sink() {
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
  Graph g;
  g.add_symbol({"s0", {2, sym::Range::kPosInf}, 8});
  g.add_symbol({"s1", {0, 64}, 3});
  int x = g.add_placeholder("arg0_1", {meta(DType::Float32, {s0, s1}, {s1, 1})});
  g.set_donated(x);
  int y = g.add_placeholder("arg1_1", {meta(DType::BFloat16, {4, 8}, {1, 4}, 0, "cuda:0")});
  int n = g.add_placeholder("arg2_1", {}, "symint", s0 * 2);
  int f = g.add_placeholder("arg3_1", {}, "float");

  std::vector<Arg> exprs;
  for (const Expr& e : all_expr_kinds()) exprs.push_back(Arg::symbolic(e));
  int every = g.add_call(
      "every_arg", "aten.coil_test.default",
      {Arg::none(),
       Arg::boolean(true),
       Arg::boolean(false),
       Arg::integer(0),
       Arg::integer(std::numeric_limits<int64_t>::min()),
       Arg::floating(1.0),
       Arg::floating(-0.0),
       Arg::floating(0.1),
       Arg::floating(1e300),
       Arg::floating(5e-324),
       Arg::floating(std::numeric_limits<double>::infinity()),
       Arg::floating(-std::numeric_limits<double>::infinity()),
       Arg::floating(std::numeric_limits<double>::quiet_NaN()),
       Arg::str("tanh"),
       Arg::str("quote\" backslash\\ newline\n tab\t nul-free \x01 é ∑ 😀"),
       Arg::dtype_of(DType::Float16),
       Arg::enum_text("torch.contiguous_format"),
       Arg::node_ref(x),
       Arg::list_of(exprs),
       Arg::list_of({Arg::list_of({Arg::node_ref(y), Arg::none()}), Arg::list_of({})})},
      {{"dtype", Arg::dtype_of(DType::UInt8)},
       {"device", Arg::enum_text("cuda:0")},
       {"n", Arg::node_ref(n)},
       {"f", Arg::node_ref(f)},
       {"approximate", Arg::str("")}},
      {meta(DType::Float32, {s0 * 2 + 1}, {1}, sym::floordiv(s0, 4))},
      "  File \"model.py\", line 12, in forward\n    y = torch.tanh(x) * 2  # ünïcødé ✓\n");
  int vm =
      g.add_call("var_mean", "aten.var_mean.correction",
                 {Arg::node_ref(every), Arg::list_of({Arg::integer(1)})},
                 {{"correction", Arg::integer(0)}, {"keepdim", Arg::boolean(true)}},
                 {meta(DType::Float32, {s0, 1}, {1, 1}), meta(DType::Float32, {s0, 1}, {1, 1})});
  int var = g.add_call("getitem", "getitem", {Arg::node_ref(vm), Arg::integer(0)}, {},
                       {meta(DType::Float32, {s0, 1}, {1, 1})});
  int mean = g.add_call("getitem_1", "getitem", {Arg::node_ref(vm), Arg::integer(1)}, {},
                        {meta(DType::Float32, {s0, 1}, {1, 1})});
  g.set_output({Arg::node_ref(var), Arg::node_ref(mean), Arg::none(), Arg::node_ref(n)});
  g.validate();
  return g;
}

TEST(Serialize, KitchenSinkRoundTrip) {
  Graph g = kitchen_sink();
  Graph back = round_trip(g);
  // Node references point at the same nodes after reading.
  EXPECT_EQ(back.users(back.nodes()[0].id), g.users(g.nodes()[0].id));
  const Node& every = back.nodes()[4];
  EXPECT_TRUE(std::isnan(every.args[12].f));
  EXPECT_TRUE(std::signbit(every.args[6].f));
  EXPECT_EQ(every.args[10].f, std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.symbols(), g.symbols());
  EXPECT_EQ(back.nodes()[2].symint_value, std::optional<Expr>(Expr::symbol("s0") * 2));
  EXPECT_TRUE(back.nodes()[0].donated);
  EXPECT_FALSE(back.nodes()[1].donated);
  // The second round trip is byte-identical too.
  EXPECT_EQ(to_json(from_json(to_json(back))), to_json(g));
}

TEST(Serialize, EveryExprKindRoundTrips) {
  for (const Expr& e : all_expr_kinds()) {
    SCOPED_TRACE(e.str());
    Graph g;
    g.add_placeholder("x", {meta(DType::Int32, {e}, {1}, e)});
    g.set_output({Arg::symbolic(e)});
    Graph back = round_trip(g);
    EXPECT_EQ(back.nodes()[0].meta[0].sizes[0], e);
    EXPECT_EQ(back.nodes()[1].args[0].sym, e);
  }
}

TEST(Serialize, ExactJsonOfASmallGraph) {
  Graph g;
  TensorMeta m = meta(DType::Float32, {Expr::symbol("s0"), 8}, {8, 1});
  int x = g.add_placeholder("arg0_1", {m});
  int add = g.add_call("add", "aten.add.Tensor", {Arg::node_ref(x), Arg::floating(1.0)},
                       {{"alpha", Arg::integer(2)}}, {m}, "y = x + 1");
  g.set_output({Arg::node_ref(add)});
  const char* expected = R"({
  "format": "coil.graph",
  "version": 1,
  "nodes": [
    {
      "name": "arg0_1",
      "kind": "placeholder",
      "meta": [
        {
          "dtype": "float32",
          "device": "cpu",
          "sizes": [{"sym": "s0"}, 8],
          "strides": [8, 1],
          "offset": 0
        }
      ],
      "scalar_type": ""
    },
    {
      "name": "add",
      "kind": "call",
      "target": "aten.add.Tensor",
      "args": [{"node": "arg0_1"}, {"float": 1.0}],
      "kwargs": {"alpha": {"int": 2}},
      "meta": [
        {
          "dtype": "float32",
          "device": "cpu",
          "sizes": [{"sym": "s0"}, 8],
          "strides": [8, 1],
          "offset": 0
        }
      ],
      "stack_trace": "y = x + 1"
    },
    {"name": "output", "kind": "output", "args": [{"node": "add"}]}
  ]
})";
  EXPECT_EQ(to_json(g), expected);
  round_trip(g);
}

// What AOTAutograd graphs hold besides tensor ops: an effect token threaded through with_effects,
// a Python number read with .item() and a function of it, a uint64 tensor. The number-producing
// calls write their scalar_type; other calls do not (their JSON is unchanged).
TEST(Serialize, NumbersEffectsAndUnsignedRoundTrip) {
  Graph g;
  int token = g.add_placeholder("arg0_1", {meta(DType::Float32, {0}, {1})});
  int x = g.add_placeholder("arg1_1", {meta(DType::Int64, {}, {})});
  int item = g.add_call("_local_scalar_dense", "aten._local_scalar_dense.default",
                        {Arg::node_ref(x)}, {}, {}, "", "int");
  int ite = g.add_call("sym_ite", "torch.sym_ite",
                       {Arg::node_ref(item), Arg::integer(1), Arg::integer(0)}, {}, {}, "", "int");
  int half = g.add_call("truediv", "operator.truediv", {Arg::node_ref(ite), Arg::integer(2)}, {},
                        {}, "", "float");
  int hash = g.add_call("hash_tensor", "aten.hash_tensor.default", {Arg::node_ref(x)}, {},
                        {meta(DType::UInt64, {}, {})});
  int effects =
      g.add_call("with_effects", "with_effects",
                 {Arg::node_ref(token), Arg::str("aten._print.default"), Arg::str("hello")}, {},
                 {meta(DType::Float32, {0}, {1})});
  int new_token = g.add_call("getitem", "getitem", {Arg::node_ref(effects), Arg::integer(0)}, {},
                             {meta(DType::Float32, {0}, {1})});
  g.set_output({Arg::node_ref(new_token), Arg::node_ref(half), Arg::node_ref(hash)});
  g.validate();
  Graph back = round_trip(g);
  EXPECT_EQ(back.node(half).scalar_type, "float");
  EXPECT_EQ(back.node(hash).meta[0].dtype, DType::UInt64);
  Json doc = parse_json(to_json(g));
  const auto& nodes = doc.find("nodes")->items();
  EXPECT_EQ(dump_json(*nodes[2].find("scalar_type")), R"("int")");
  EXPECT_EQ(nodes[5].find("scalar_type"), nullptr);  // a tensor op: no scalar_type written
  EXPECT_EQ(dump_json(*nodes[5].find("meta")->items()[0].find("dtype")), R"("uint64")");
  EXPECT_EQ(back.to_text(),
            "%arg0_1 : f32[0]{1} = placeholder\n"
            "%arg1_1 : i64[]{} = placeholder\n"
            "%_local_scalar_dense : int = aten._local_scalar_dense.default(%arg1_1)\n"
            "%sym_ite : int = torch.sym_ite(%_local_scalar_dense, 1, 0)\n"
            "%truediv : float = operator.truediv(%sym_ite, 2)\n"
            "%hash_tensor : u64[]{} = aten.hash_tensor.default(%arg1_1)\n"
            "%with_effects : f32[0]{1} = with_effects(%arg0_1, 'aten._print.default', 'hello')\n"
            "%getitem : f32[0]{1} = getitem(%with_effects, 0)\n"
            "return (%getitem, %truediv, %hash_tensor)\n");
}

TEST(Serialize, ExprJsonForm) {
  Expr s0 = Expr::symbol("s0");
  Graph g;
  g.set_output({Arg::symbolic(s0 * 3 + 2), Arg::symbolic(sym::floordiv(s0, 4))});
  Json doc = parse_json(to_json(g));
  const Json& args = *doc.find("nodes")->items()[0].find("args");
  EXPECT_EQ(dump_json(args), R"([{"sym":{"add":[{"mul":[{"sym":"s0"}],"coeff":3}],"const":2}},)"
                             R"({"sym":{"floordiv":[{"sym":"s0"},4]}}])");
}

TEST(Serialize, ReadsMinimalHandWrittenJson) {
  // Optional fields default: device "cpu", offset 0, no args/kwargs/meta/stack trace. Empty
  // values for fields a kind does not use are accepted.
  Graph g = from_json(R"({"format": "coil.graph", "version": 1, "nodes": [
    {"name": "x", "kind": "placeholder", "meta": [{"dtype": "int64", "sizes": [3], "strides": [1]}],
     "target": "", "args": [], "stack_trace": ""},
    {"name": "neg", "kind": "call", "target": "aten.neg.default", "args": [{"node": "x"}],
     "scalar_type": ""},
    {"name": "output", "kind": "output", "args": [{"node": "neg"}, null], "meta": [], "kwargs": {}}
  ]})");
  EXPECT_EQ(g.to_text(),
            "%x : i64[3]{1} = placeholder\n"
            "%neg = aten.neg.default(%x)\n"
            "return (%neg, None)\n");
  EXPECT_EQ(g.nodes()[0].meta[0].device, "cpu");
  EXPECT_EQ(g.nodes()[0].meta[0].offset, Expr(0));
}

TEST(Serialize, ExpressionsAreCanonicalizedOnRead) {
  // Written by hand in a non-canonical shape; read through sym's constructors.
  Graph g = from_json(R"({"format": "coil.graph", "version": 1, "nodes": [
    {"name": "output", "kind": "output", "args": [
      {"sym": {"add": [{"sym": "s0"}, {"sym": "s0"}, 3], "const": -3}},
      {"sym": {"mul": [2, {"sym": "s1"}], "coeff": 2}},
      {"float": 3}
    ]}]})");
  Expr s0 = Expr::symbol("s0");
  Expr s1 = Expr::symbol("s1");
  const Node& out = *g.output();
  EXPECT_EQ(out.args[0].sym, s0 * 2);
  EXPECT_EQ(out.args[1].sym, s1 * 4);
  EXPECT_EQ(out.args[2], Arg::floating(3.0));
}

TEST(Serialize, FileRoundTrip) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("coil_graph_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "graph.json").string();
  Graph g = kitchen_sink();
  save_graph_file(g, path);
  Graph back = load_graph_file(path);
  EXPECT_EQ(back.to_text(), g.to_text());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), to_json(g) + "\n");
  std::filesystem::remove_all(dir);
}

TEST(Serialize, FileErrorsNameTheFile) {
  std::string missing = "/nonexistent/coil/graph.json";
  try {
    load_graph_file(missing);
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open graph file '/nonexistent/coil/graph.json': No such file or directory");
  }
  EXPECT_THROW(save_graph_file(kitchen_sink(), missing), GraphError);

  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("coil_graph_test_bad_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "bad.json").string();
  std::ofstream(path) << "{\"format\": \"coil.graph\",\n \"version\": 1,\n \"nodes\": [}\n";
  try {
    load_graph_file(path);
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": malformed coil graph JSON at 3:12: unexpected '}'; expected a JSON value");
  }
  std::filesystem::remove_all(dir);
}

// A random expression over s0..s2 built through sym's constructors; nullopt when construction
// throws (overflow, division by zero).
std::optional<Expr> random_expr(std::mt19937_64& rng, int depth) {
  const int64_t consts[] = {-3, -2, -1, 0, 1, 2, 3, 4, 8, 16, 1 << 20, int64_t(1) << 40};
  auto leaf = [&]() -> Expr {
    if (rng() % 2) return Expr(consts[rng() % std::size(consts)]);
    return Expr::symbol("s" + std::to_string(rng() % 3));
  };
  if (depth == 0 || rng() % 4 == 0) return leaf();
  std::optional<Expr> a = random_expr(rng, depth - 1);
  std::optional<Expr> b = random_expr(rng, depth - 1);
  if (!a || !b) return std::nullopt;
  try {
    switch (rng() % 11) {
      case 0:
        return *a + *b;
      case 1:
        return *a - *b;
      case 2:
        return *a * *b;
      case 3:
        return sym::floordiv(*a, *b);
      case 4:
        return sym::mod(*a, *b);
      case 5:
        return sym::min(*a, *b);
      case 6:
        return sym::max(*a, *b);
      case 7:
        return sym::lt(*a, *b);
      case 8:
        return sym::le(*a, *b);
      case 9:
        return sym::eq(*a, *b);
      default:
        return sym::ne(*a, *b);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

TEST(Serialize, RandomExpressionsRoundTrip) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<Arg> args;
  for (int i = 0; i < 2000; ++i) {
    std::optional<Expr> e = random_expr(rng, 4);
    if (e) args.push_back(Arg::symbolic(*e));
  }
  Graph g;
  g.set_output(args);
  Graph back = round_trip(g);
  for (size_t i = 0; i < args.size(); ++i) {
    ASSERT_EQ(back.output()->args[i].sym, args[i].sym) << args[i].sym.str();
  }
}

}  // namespace
}  // namespace coil::graph
