// Error tests for graph/serialize.h: malformed graph JSON must fail with a GraphError that says
// what is wrong and where, never crash and never be accepted.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "coil/graph/serialize.h"

namespace coil::graph {
namespace {

// A valid document; each case below breaks one thing in it.
const std::string kBase = R"({"format": "coil.graph", "version": 1, "nodes": [
  {"name": "x", "kind": "placeholder",
   "meta": [{"dtype": "float32", "device": "cpu", "sizes": [{"sym": "s0"}, 8], "strides": [8, 1],
             "offset": 0}]},
  {"name": "s1", "kind": "placeholder", "scalar_type": "symint"},
  {"name": "add", "kind": "call", "target": "aten.add.Tensor",
   "args": [{"node": "x"}, {"float": 1.0}], "kwargs": {"alpha": {"int": 1}},
   "meta": [{"dtype": "float32", "sizes": [{"sym": "s0"}, 8], "strides": [8, 1]}],
   "stack_trace": "y = x + 1"},
  {"name": "output", "kind": "output", "args": [{"node": "add"}]}
]})";

// kBase with the one occurrence of `from` replaced by `to`.
std::string with(const std::string& from, const std::string& to) {
  size_t at = kBase.find(from);
  EXPECT_NE(at, std::string::npos) << "not in the base document: " << from;
  EXPECT_EQ(kBase.find(from, at + 1), std::string::npos) << "ambiguous: " << from;
  if (at == std::string::npos) return kBase;
  return kBase.substr(0, at) + to + kBase.substr(at + from.size());
}

std::string error_of(const std::string& text) {
  try {
    from_json(text);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SerializeErrors, BaseDocumentIsValid) {
  EXPECT_EQ(from_json(kBase).nodes().size(), 4u);
}

struct Case {
  std::string text;
  std::string error;  // the exact message
};

void expect_errors(const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_EQ(error_of(c.text), c.error) << "input:\n" << c.text;
}

TEST(SerializeErrors, Syntax) {
  expect_errors({
      {kBase.substr(0, 120),
       "malformed coil graph JSON at 3:32: unexpected end of input inside an object (missing '}')"},
      {"", "malformed coil graph JSON at 1:1: unexpected end of input; expected a JSON value"},
      {with("\"version\": 1,", "\"version\": 1,,"),
       "malformed coil graph JSON at 1:39: expected a string key in object, found ','"},
      {with("\"kind\": \"output\"", "\"kind\": \"output\", \"kind\": \"call\""),
       "malformed coil graph JSON at 10:40: duplicate key \"kind\" in object"},
      {with("{\"float\": 1.0}", "{\"float\": NaN}"),
       "malformed coil graph JSON at 7:38: unexpected 'N'; expected a JSON value"},
  });
}

TEST(SerializeErrors, DocumentShape) {
  expect_errors({
      {"[]", "invalid coil graph JSON: the document must be a JSON object, found array"},
      {with("\"coil.graph\"", "\"onnx\""),
       "invalid coil graph JSON: \"format\" is \"onnx\"; expected \"coil.graph\" (is this a coil "
       "graph?)"},
      {with("\"version\": 1", "\"version\": 2"),
       "invalid coil graph JSON: unsupported version 2; this coil reads version 1"},
      {with("\"version\": 1", "\"version\": \"1\""),
       "invalid coil graph JSON: \"version\" must be a JSON integer, found string"},
      {R"({"format": "coil.graph", "version": 1})",
       "invalid coil graph JSON: missing required field \"nodes\" in the document"},
      {with("\"version\": 1,", "\"version\": 1, \"extra\": 0,"),
       "invalid coil graph JSON: unknown field \"extra\" in the document; expected \"format\", "
       "\"version\", \"nodes\", \"symbols\""},
      {R"({"format": "coil.graph", "version": 1, "nodes": {}})",
       "invalid coil graph JSON: \"nodes\" must be a JSON array, found object"},
  });
}

TEST(SerializeErrors, SizeSymbols) {
  const std::string s0 = "\"version\": 1, \"symbols\": [{\"name\": \"s0\", \"lo\": 2, \"hint\": 8}";
  expect_errors({
      {with("\"version\": 1,", s0 + ", {\"name\": \"s0\", \"hint\": 3}],"),
       "invalid coil graph JSON at symbols[1]: size symbol 's0' is declared twice"},
      {with("\"version\": 1,",
            "\"version\": 1, \"symbols\": [{\"name\": \"s0\", \"lo\": 2, "
            "\"hint\": 1}],"),
       "invalid coil graph JSON at symbols[0]: size symbol 's0' has hint 1 outside its range"},
      {with("\"version\": 1,", "\"version\": 1, \"symbols\": [{\"name\": \"s0\", \"lo\": 2}],"),
       "invalid coil graph JSON at symbols[0]: missing required field \"hint\" in a size symbol"},
      {with("\"version\": 1,",
            "\"version\": 1, \"symbols\": [{\"name\": \"s0\", \"hint\": 2, "
            "\"step\": 1}],"),
       "invalid coil graph JSON at symbols[0]: unknown field \"step\" in a size symbol; expected "
       "\"name\", \"lo\", \"hi\", \"hint\""},
      {with("\"stack_trace\"", "\"value\": 3, \"stack_trace\""),
       "invalid coil graph JSON at nodes[2] ('add').value: only a \"symint\" placeholder has a "
       "\"value\""},
  });
}

TEST(SerializeErrors, Nodes) {
  expect_errors({
      {with("{\"name\": \"s1\", ", "{"),
       "invalid coil graph JSON at nodes[1]: missing required field \"name\" in a node"},
      {with("\"name\": \"s1\"", "\"name\": 7"),
       "invalid coil graph JSON at nodes[1]: \"name\" must be a JSON string, found integer"},
      {with("\"name\": \"s1\"", "\"name\": \"\""),
       "invalid coil graph JSON at nodes[1]: \"name\" is empty; every node needs a name"},
      {with("\"kind\": \"call\"", "\"kind\": \"function\""),
       "invalid coil graph JSON at nodes[2] ('add'): unknown node kind \"function\"; expected "
       "\"placeholder\", \"call\" or \"output\""},
      {with("\"stack_trace\"", "\"stack_trce\""),
       "invalid coil graph JSON at nodes[2] ('add'): unknown field \"stack_trce\" in a node; "
       "expected \"name\", \"kind\", \"target\", \"args\", \"kwargs\", \"meta\", \"scalar_type\", "
       "\"stack_trace\", \"value\", \"c_args\", \"donated\""},
      {with("\"stack_trace\"", "\"c_args\": [[\"self\"]], \"stack_trace\""),
       "invalid coil graph JSON at nodes[2] ('add').c_args: each of \"c_args\" must be [name, "
       "type] "
       "or [name, type, default]"},
      {with("\"target\": \"aten.add.Tensor\",", ""),
       "invalid coil graph JSON at nodes[2] ('add'): missing required field \"target\" in a node"},
      {with("\"target\": \"aten.add.Tensor\"", "\"target\": \"\""),
       "invalid coil graph JSON at nodes[2] ('add'): a call node needs a non-empty \"target\" (the "
       "op, e.g. \"aten.add.Tensor\")"},
      {with("\"scalar_type\": \"symint\"", "\"scalar_type\": \"symint\", \"args\": [null]"),
       "invalid coil graph JSON at nodes[1] ('s1'): a placeholder node has no \"args\" or "
       "\"kwargs\""},
      {with("\"scalar_type\": \"symint\"", "\"scalar_type\": \"complex\""),
       "invalid coil graph JSON: placeholder node 's1' (#1) has unknown scalar_type 'complex'; "
       "expected \"\", \"int\", \"float\" or \"symint\""},
      {with("\"stack_trace\": \"y = x + 1\"", "\"stack_trace\": 3"),
       "invalid coil graph JSON at nodes[2] ('add'): \"stack_trace\" must be a JSON string, found "
       "integer"},
      {with("\"kwargs\": {\"alpha\": {\"int\": 1}}", "\"kwargs\": [1]"),
       "invalid coil graph JSON at nodes[2] ('add'): \"kwargs\" must be a JSON object, found "
       "array"},
      {with("\"args\": [{\"node\": \"x\"}, {\"float\": 1.0}]", "\"args\": {}"),
       "invalid coil graph JSON at nodes[2] ('add'): \"args\" must be a JSON array, found object"},
      {with("{\"name\": \"s1\",", "7, {\"name\": \"s1\","),
       "invalid coil graph JSON at nodes[1]: a node must be a JSON object, found integer"},
  });
}

// A call that produces a Python number (.item()) says which kind in "scalar_type".
TEST(SerializeErrors, NumberProducingCalls) {
  const std::string item = R"(
  {"name": "item", "kind": "call", "target": "aten._local_scalar_dense.default",
   "args": [{"node": "x"}], "scalar_type": "float"},
  {"name": "output", "kind": "output", "args": [{"node": "item"}]}
]})";
  std::string good = kBase.substr(0, kBase.find("\n  {\"name\": \"output\"")) + item;
  EXPECT_EQ(from_json(good).nodes()[3].scalar_type, "float");
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  expect_errors({
      {replace("\"scalar_type\": \"float\"", "\"scalar_type\": \"double\""),
       "invalid coil graph JSON: call node 'item' (#3) has unknown scalar_type 'double'; expected "
       "\"\", \"int\", \"float\" or \"bool\""},
      {replace("\"scalar_type\": \"float\"", "\"scalar_type\": 1"),
       "invalid coil graph JSON at nodes[3] ('item'): \"scalar_type\" must be a JSON string, found "
       "integer"},
      {replace("\"args\": [{\"node\": \"x\"}],",
               "\"args\": [{\"node\": \"x\"}], \"meta\": [{\"dtype\": \"float32\", \"sizes\": "
               "[], \"strides\": []}],"),
       "invalid coil graph JSON: call node 'item' (#3) produces a number (float) but has tensor "
       "metadata"},
      {replace("\"target\": \"aten._local_scalar_dense.default\"", "\"target\": \"with_effects\""),
       "invalid coil graph JSON: with_effects node 'item' (#3) must have a token node and an op "
       "name as its first two arguments, and produce at least the new token"},
  });
}

TEST(SerializeErrors, GraphStructure) {
  expect_errors({
      {with("{\"name\": \"s1\"", "{\"name\": \"x\""),
       "invalid coil graph JSON at nodes[1] ('x'): duplicate node name 'x' (also node #0); node "
       "names must be unique"},
      {with("{\"node\": \"x\"}", "{\"node\": \"add\"}"),
       "invalid coil graph JSON at nodes[2] ('add').args[0]: refers to node 'add', which comes "
       "later; a node may only use earlier nodes"},
      {with("{\"node\": \"add\"}", "{\"node\": \"output\"}"),
       "invalid coil graph JSON at nodes[3] ('output').args[0]: refers to node 'output', which "
       "comes later; a node may only use earlier nodes"},
      {with("{\"node\": \"x\"}", "{\"node\": \"y\"}"),
       "invalid coil graph JSON at nodes[2] ('add').args[0]: refers to node 'y', which does not "
       "exist"},
      {with(",\n  {\"name\": \"output\", \"kind\": \"output\", \"args\": [{\"node\": \"add\"}]}",
            ""),
       "invalid coil graph JSON: the graph has no output node; the last node must have \"kind\": "
       "\"output\""},
      {with("\"args\": [{\"node\": \"add\"}]}",
            "\"args\": [{\"node\": \"add\"}]}, {\"name\": "
            "\"late\", \"kind\": \"placeholder\"}"),
       "invalid coil graph JSON at nodes[4] ('late'): cannot add placeholder 'late' after the "
       "output node"},
      {with("{\"name\": \"output\"", "{\"name\": \"result\""),
       "invalid coil graph JSON at nodes[3] ('result'): a output node must be named \"output\""},
      {with("\"target\": \"aten.add.Tensor\"", "\"target\": \"getitem\""),
       "invalid coil graph JSON: getitem node 'add' (#2) must have exactly two arguments: a node "
       "and a non-negative int index"},
  });
}

TEST(SerializeErrors, Meta) {
  expect_errors({
      {with("\"dtype\": \"float32\", \"device\"", "\"dtype\": \"float33\", \"device\""),
       "invalid coil graph JSON at nodes[0] ('x').meta[0]: unknown dtype \"float33\"; expected "
       "bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, uint16, "
       "uint32 or uint64"},
      {with("\"dtype\": \"float32\", \"device\"", "\"device\""),
       "invalid coil graph JSON at nodes[0] ('x').meta[0]: missing required field \"dtype\" in a "
       "tensor meta"},
      {with("\"strides\": [8, 1],\n", "\"strides\": [8],\n"),
       "invalid coil graph JSON at nodes[0] ('x').meta[0]: has 2 sizes but 1 strides; expected "
       "one stride per size"},
      {with("\"device\": \"cpu\"", "\"device\": \"\""),
       "invalid coil graph JSON at nodes[0] ('x').meta[0]: \"device\" is empty; expected e.g. "
       "\"cpu\" or \"cuda:0\""},
      {with("\"offset\": 0", "\"offset\": 0, \"layout\": 0"),
       "invalid coil graph JSON at nodes[0] ('x').meta[0]: unknown field \"layout\" in a tensor "
       "meta; expected \"dtype\", \"device\", \"sizes\", \"strides\", \"offset\""},
      {with("\"offset\": 0", "\"offset\": 0.5"),
       "invalid coil graph JSON at nodes[0] ('x').meta[0].offset: an expression must be an "
       "integer or an object such as {\"sym\": \"s0\"}, found number"},
      {with("\"sizes\": [{\"sym\": \"s0\"}, 8], \"strides\": [8, 1],\n",
            "\"sizes\": \"s0\", \"strides\": [8, 1],\n"),
       "invalid coil graph JSON at nodes[0] ('x').meta[0].sizes: \"sizes\" must be a JSON array, "
       "found string"},
      {with("\"meta\": [{\"dtype\": \"float32\", \"sizes\"",
            "\"meta\": [7, {\"dtype\": "
            "\"float32\", \"sizes\""),
       "invalid coil graph JSON at nodes[2] ('add').meta[0]: a tensor meta must be a JSON object, "
       "found integer"},
  });
}

TEST(SerializeErrors, Args) {
  auto arg = [](const std::string& a) { return with("{\"float\": 1.0}", a); };
  const std::string at = "invalid coil graph JSON at nodes[2] ('add').args[1]";
  expect_errors({
      {arg("3"), at + ": an argument must be null or an object with exactly one tag, such as "
                      "{\"int\": 3}; found integer"},
      {arg("{\"int\": 1, \"float\": 2.0}"),
       at + ": an argument must be null or an object with exactly one tag, such as {\"int\": 3}; "
            "found an object with 2 keys"},
      {arg("{}"), at + ": an argument must be null or an object with exactly one tag, such as "
                       "{\"int\": 3}; found an object with 0 keys"},
      {arg("{\"tensor\": 1}"),
       at + ": unknown argument tag \"tensor\"; expected int, float, bool, str, dtype, enum, sym, "
            "node or list (or null for None)"},
      {arg("{\"int\": \"3\"}"), at + ": the value of \"int\" must be a JSON integer, found string"},
      {arg("{\"int\": 1.5}"), at + ": the value of \"int\" must be a JSON integer, found number"},
      {arg("{\"float\": \"infinity\"}"),
       at + ": the value of \"float\" must be a number or one of \"inf\", \"-inf\", \"nan\"; "
            "found \"infinity\""},
      {arg("{\"float\": true}"),
       at + ": the value of \"float\" must be a number or one of \"inf\", \"-inf\", \"nan\"; "
            "found bool"},
      {arg("{\"bool\": 1}"), at + ": the value of \"bool\" must be a JSON bool, found integer"},
      {arg("{\"str\": null}"), at + ": the value of \"str\" must be a JSON string, found null"},
      {arg("{\"dtype\": \"torch.float32\"}"), at + ": unknown dtype \"torch.float32\""},
      {arg("{\"node\": 0}"), at + ": the value of \"node\" must be a JSON string, found integer"},
      {arg("{\"list\": [1]}"),
       at + ".list[0]: an argument must be null or an object with exactly one tag, such as "
            "{\"int\": 3}; found integer"},
      {arg("{\"list\": [{\"list\": [{\"node\": \"nope\"}]}]}"),
       at + ".list[0].list[0]: refers to node 'nope', which does not exist"},
      {with("{\"alpha\": {\"int\": 1}}", "{\"alpha\": {\"int\": true}}"),
       "invalid coil graph JSON at nodes[2] ('add').kwargs.alpha: the value of \"int\" must be a "
       "JSON integer, found bool"},
      {with("{\"alpha\": {\"int\": 1}}", "{\"\": {\"int\": 1}}"),
       "invalid coil graph JSON at nodes[2] ('add').kwargs.: a keyword argument has an empty "
       "name"},
  });
}

TEST(SerializeErrors, Expressions) {
  auto size = [](const std::string& e) {
    return with("\"sizes\": [{\"sym\": \"s0\"}, 8], \"strides\": [8, 1],\n",
                "\"sizes\": [" + e + ", 8], \"strides\": [8, 1],\n");
  };
  const std::string at = "invalid coil graph JSON at nodes[0] ('x').meta[0].sizes[0]";
  expect_errors({
      {size("\"s0\""), at + ": an expression must be an integer or an object such as {\"sym\": "
                            "\"s0\"}, found string"},
      {size("{\"sym\": \"\"}"), at + ": a symbol's name is empty"},
      {size("{\"sym\": 0}"), at + ": a symbol's name must be a JSON string, found integer"},
      {size("{\"sym\": \"s0\", \"const\": 1}"),
       at + ": unknown field \"const\" in a symbol expression; expected \"sym\""},
      {size("{\"pow\": [2, 3]}"),
       at + ": unknown expression \"pow\"; expected an integer or an object tagged sym, add, mul, "
            "floordiv, mod, min, max, lt, le, eq or ne"},
      {size("{}"), at + ": unknown expression an empty object; expected an integer or an object "
                        "tagged sym, add, mul, floordiv, mod, min, max, lt, le, eq or ne"},
      {size("{\"floordiv\": [{\"sym\": \"s0\"}]}"),
       at + ".floordiv: needs exactly 2 operands, found 1"},
      {size("{\"floordiv\": [{\"sym\": \"s0\"}, 0]}"), at + ".floordiv: division by zero"},
      {size("{\"mod\": [{\"sym\": \"s0\"}, {\"add\": [{\"sym\": \"s1\"}], \"const\": 0}]}"),
       "(no error)"},
      {size("{\"mod\": [{\"sym\": \"s0\"}, {\"add\": [5], \"const\": -5}]}"),
       at + ".mod: division by zero"},
      {size("{\"lt\": [1, 2, 3]}"), at + ".lt: needs exactly 2 operands, found 3"},
      {size("{\"min\": [{\"sym\": \"s0\"}]}"), at + ".min: has too few operands (1)"},
      {size("{\"add\": []}"), at + ".add: has too few operands (0)"},
      {size("{\"add\": [{\"sym\": \"s0\"}], \"coeff\": 2}"),
       at + ": unknown field \"coeff\" in an \"add\" expression; expected \"add\", \"const\""},
      {size("{\"mul\": [{\"sym\": \"s0\"}], \"coeff\": 2.0}"),
       at + ".mul: \"coeff\" must be a JSON integer, found number"},
      {size("{\"mul\": {\"sym\": \"s0\"}}"),
       at + ".mul: the operands must be a JSON array, found object"},
      {size("{\"add\": [{\"sym\": \"s0\"}, [1]]}"),
       at + ".add[1]: an expression must be an integer or an object such as {\"sym\": \"s0\"}, "
            "found array"},
  });
}

TEST(SerializeErrors, ArithmeticOverflowIsABadExpression) {
  std::string text =
      with("\"sizes\": [{\"sym\": \"s0\"}, 8], \"strides\": [8, 1],\n",
           "\"sizes\": [{\"add\": [9223372036854775807, {\"sym\": \"s0\"}], \"const\": 1}, 8], "
           "\"strides\": [8, 1],\n");
  std::string error = error_of(text);
  EXPECT_EQ(error.rfind("invalid coil graph JSON at nodes[0] ('x').meta[0].sizes[0].add: bad "
                        "expression: ",
                        0),
            0u)
      << error;
}

TEST(SerializeErrors, DeepNestingFailsCleanly) {
  std::string deep_list = "{\"list\": [";
  std::string arg;
  for (int i = 0; i < 300; ++i) arg += deep_list;
  for (int i = 0; i < 300; ++i) arg += "]}";
  std::string error = error_of(with("{\"float\": 1.0}", arg));
  EXPECT_NE(error.find("JSON nested deeper than 256 levels"), std::string::npos) << error;
}

// Every proper prefix of a valid document is malformed and must say so.
TEST(SerializeErrors, EveryTruncationFailsCleanly) {
  std::string full = to_json(from_json(kBase));
  for (size_t len = 0; len < full.size(); ++len) {
    EXPECT_THROW(from_json(full.substr(0, len)), GraphError) << "prefix length " << len;
  }
}

// Random small corruptions must either fail with a GraphError or give a graph that round-trips.
TEST(SerializeErrors, RandomCorruptionsFailCleanly) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string alphabet = "{}[]\",:-+.0123456789eEaflnrstu\\ \n\x01\xff";
  std::string base = to_json(from_json(kBase));
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = base;
    int edits = 1 + int(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      size_t at = rng() % text.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(text.begin() + long(at), c);
          break;
        default:
          text.erase(at, 1 + rng() % 8);
          break;
      }
      if (text.empty()) text = "x";
    }
    try {
      Graph g = from_json(text);
      ++accepted;
      std::string again = to_json(g);
      ASSERT_EQ(to_json(from_json(again)), again) << "input:\n" << text;
    } catch (const GraphError&) {
      // expected for most corruptions
    } catch (const std::exception& e) {
      FAIL() << "non-GraphError exception " << e.what() << " for input:\n" << text;
    }
  }
  // Some corruptions (a digit changed, whitespace) keep the document valid.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace coil::graph
