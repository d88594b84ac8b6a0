#include "coil/graph/serialize.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "coil/graph/json.h"

namespace coil::graph {

namespace {

constexpr const char* kFormat = "coil.graph";
constexpr int64_t kVersion = 1;

const char* node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Placeholder:
      return "placeholder";
    case NodeKind::Call:
      return "call";
    case NodeKind::Output:
      return "output";
  }
  return "?";
}

// Tags of the binary-or-more expression kinds, shared by writer and reader.
const char* expr_tag(sym::Kind k) {
  switch (k) {
    case sym::Kind::Add:
      return "add";
    case sym::Kind::Mul:
      return "mul";
    case sym::Kind::FloorDiv:
      return "floordiv";
    case sym::Kind::Mod:
      return "mod";
    case sym::Kind::Min:
      return "min";
    case sym::Kind::Max:
      return "max";
    case sym::Kind::Lt:
      return "lt";
    case sym::Kind::Le:
      return "le";
    case sym::Kind::Eq:
      return "eq";
    case sym::Kind::Ne:
      return "ne";
    case sym::Kind::Int:
    case sym::Kind::Symbol:
      break;
  }
  return nullptr;
}

constexpr sym::Kind kCompoundKinds[] = {
    sym::Kind::Add, sym::Kind::Mul, sym::Kind::FloorDiv, sym::Kind::Mod, sym::Kind::Min,
    sym::Kind::Max, sym::Kind::Lt,  sym::Kind::Le,       sym::Kind::Eq,  sym::Kind::Ne,
};

// ---------------------------------------------------------------------------------------------
// Writer. Recursion follows expression and list nesting, bounded by kMaxJsonDepth (deeper values
// could not be read back).

void check_write_depth(int depth) {
  if (depth > kMaxJsonDepth) {
    throw GraphError("cannot write the graph as JSON: an argument or expression is nested " +
                     std::string("deeper than ") + std::to_string(kMaxJsonDepth) + " levels");
  }
}

Json expr_to_json(const sym::Expr& e, int depth) {
  check_write_depth(depth);
  if (e.kind() == sym::Kind::Int) return Json(e.int_value());
  Json obj = Json::object();
  if (e.kind() == sym::Kind::Symbol) {
    obj.set("sym", e.name());
    return obj;
  }
  Json ops = Json::array();
  for (const sym::Expr& op : e.operands()) ops.push_back(expr_to_json(op, depth + 1));
  obj.set(expr_tag(e.kind()), std::move(ops));
  if (e.kind() == sym::Kind::Add && e.int_value() != 0) obj.set("const", e.int_value());
  if (e.kind() == sym::Kind::Mul && e.int_value() != 1) obj.set("coeff", e.int_value());
  return obj;
}

Json exprs_to_json(const std::vector<sym::Expr>& es) {
  Json arr = Json::array();
  for (const sym::Expr& e : es) arr.push_back(expr_to_json(e, 1));
  return arr;
}

Json tagged(const char* tag, Json v) {
  Json obj = Json::object();
  obj.set(tag, std::move(v));
  return obj;
}

Json arg_to_json(const Arg& a, const Graph& g, int depth) {
  check_write_depth(depth);
  switch (a.kind) {
    case Arg::Kind::None:
      return Json();
    case Arg::Kind::Bool:
      return tagged("bool", a.b);
    case Arg::Kind::Int:
      return tagged("int", a.i);
    case Arg::Kind::Float:
      if (std::isfinite(a.f)) return tagged("float", a.f);
      return tagged("float", format_double(a.f));
    case Arg::Kind::Str:
      return tagged("str", a.s);
    case Arg::Kind::DType:
      return tagged("dtype", dtype_name(a.dtype));
    case Arg::Kind::Enum:
      return tagged("enum", a.s);
    case Arg::Kind::Sym:
      return tagged("sym", expr_to_json(a.sym, depth + 1));
    case Arg::Kind::Node:
      return tagged("node", g.node(a.node).name);
    case Arg::Kind::List: {
      Json items = Json::array();
      for (const Arg& item : a.list) items.push_back(arg_to_json(item, g, depth + 1));
      return tagged("list", std::move(items));
    }
  }
  throw GraphError("cannot write an argument of unknown kind " + std::to_string(int(a.kind)));
}

Json args_to_json(const std::vector<Arg>& args, const Graph& g) {
  Json arr = Json::array();
  for (const Arg& a : args) arr.push_back(arg_to_json(a, g, 1));
  return arr;
}

Json meta_to_json(const TensorMeta& m) {
  Json obj = Json::object();
  obj.set("dtype", dtype_name(m.dtype));
  obj.set("device", m.device);
  obj.set("sizes", exprs_to_json(m.sizes));
  obj.set("strides", exprs_to_json(m.strides));
  obj.set("offset", expr_to_json(m.offset, 1));
  return obj;
}

Json metas_to_json(const std::vector<TensorMeta>& metas) {
  Json arr = Json::array();
  for (const TensorMeta& m : metas) arr.push_back(meta_to_json(m));
  return arr;
}

Json node_to_json(const Node& n, const Graph& g) {
  Json obj = Json::object();
  obj.set("name", n.name);
  obj.set("kind", node_kind_name(n.kind));
  switch (n.kind) {
    case NodeKind::Placeholder:
      obj.set("meta", metas_to_json(n.meta));
      obj.set("scalar_type", n.scalar_type);
      if (n.symint_value) obj.set("value", expr_to_json(*n.symint_value, 1));
      if (n.donated) obj.set("donated", true);
      break;
    case NodeKind::Call: {
      obj.set("target", n.target);
      obj.set("args", args_to_json(n.args, g));
      Json kwargs = Json::object();
      for (const auto& [key, a] : n.kwargs) kwargs.set(key, arg_to_json(a, g, 1));
      obj.set("kwargs", std::move(kwargs));
      obj.set("meta", metas_to_json(n.meta));
      // Written only for calls that produce a number, so other graphs' JSON stays as it was.
      if (!n.scalar_type.empty()) obj.set("scalar_type", n.scalar_type);
      obj.set("stack_trace", n.stack_trace);
      if (!n.c_args.empty()) {  // [name, type] or [name, type, default]
        Json arr = Json::array();
        for (const CArg& c : n.c_args) {
          Json item = Json::array({Json(c.name), Json(c.type)});
          if (c.default_value) item.push_back(arg_to_json(*c.default_value, g, 1));
          arr.push_back(std::move(item));
        }
        obj.set("c_args", std::move(arr));
      }
      break;
    }
    case NodeKind::Output:
      obj.set("args", args_to_json(n.args, g));
      break;
  }
  return obj;
}

// ---------------------------------------------------------------------------------------------
// Reader. Every check fails through Reader::fail, which names the position in the document.

class Reader {
 public:
  Graph read(const Json& doc);

 private:
  // A path segment that lives as long as the reader is inside it.
  class Scope {
   public:
    Scope(Reader& r, std::string segment) : r_(r) { r_.path_.push_back(std::move(segment)); }
    ~Scope() { r_.path_.pop_back(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Reader& r_;
  };

  [[noreturn]] void fail(const std::string& msg) const;

  const Json& require(const Json& obj, const char* key, const char* what);
  void check_keys(const Json& obj, std::initializer_list<const char*> allowed, const char* what);
  void expect_type(const Json& v, Json::Type t, const std::string& what);
  std::string read_string(const Json& obj, const char* key, const char* what, bool required);

  void read_node(const Json& j, Graph& g);
  sym::Expr read_expr(const Json& j);
  sym::Expr read_compound_expr(const Json& j, sym::Kind kind, const std::vector<sym::Expr>& ops);
  std::vector<sym::Expr> read_exprs(const Json& j, const char* what);
  TensorMeta read_meta(const Json& j);
  std::vector<TensorMeta> read_metas(const Json* j);
  Arg read_arg(const Json& j);
  std::vector<CArg> read_c_args(const Json& j);
  Arg read_tagged_arg(const std::string& tag, const Json& v);
  Arg read_float(const Json& v);
  Arg read_node_ref(const Json& v);
  std::vector<Arg> read_args(const Json* j);
  std::vector<std::pair<std::string, Arg>> read_kwargs(const Json* j);

  std::vector<std::string> path_;
  std::unordered_map<std::string, int> ids_;   // nodes read so far
  std::unordered_set<std::string> all_names_;  // every node name in the document
};

void Reader::fail(const std::string& msg) const {
  std::string where;
  for (const std::string& seg : path_) {
    bool dot = !where.empty() && seg[0] != '[';
    where += (dot ? "." : "") + seg;
  }
  if (where.empty()) throw GraphError("invalid coil graph JSON: " + msg);
  throw GraphError("invalid coil graph JSON at " + where + ": " + msg);
}

const Json& Reader::require(const Json& obj, const char* key, const char* what) {
  const Json* v = obj.find(key);
  if (!v) fail(std::string("missing required field \"") + key + "\" in " + what);
  return *v;
}

void Reader::check_keys(const Json& obj, std::initializer_list<const char*> allowed,
                        const char* what) {
  for (const std::string& key : obj.keys()) {
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (known) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
    fail("unknown field \"" + key + "\" in " + what + "; expected " + list);
  }
}

void Reader::expect_type(const Json& v, Json::Type t, const std::string& what) {
  if (v.type() == t) return;
  fail(what + " must be a JSON " + json_type_name(t) + ", found " + json_type_name(v.type()));
}

std::string Reader::read_string(const Json& obj, const char* key, const char* what, bool required) {
  const Json* v = obj.find(key);
  if (!v && required) fail(std::string("missing required field \"") + key + "\" in " + what);
  if (!v) return "";
  expect_type(*v, Json::Type::String, std::string("\"") + key + "\"");
  return v->as_string();
}

Graph Reader::read(const Json& doc) {
  expect_type(doc, Json::Type::Object, "the document");
  check_keys(doc, {"format", "version", "nodes", "symbols"}, "the document");
  std::string format = read_string(doc, "format", "the document", true);
  if (format != kFormat) {
    fail("\"format\" is \"" + format + "\"; expected \"" + kFormat + "\" (is this a coil graph?)");
  }
  const Json& version = require(doc, "version", "the document");
  expect_type(version, Json::Type::Int, "\"version\"");
  if (version.as_int() != kVersion) {
    fail("unsupported version " + std::to_string(version.as_int()) + "; this coil reads version " +
         std::to_string(kVersion));
  }
  const Json& nodes = require(doc, "nodes", "the document");
  expect_type(nodes, Json::Type::Array, "\"nodes\"");
  for (const Json& n : nodes.items()) {
    const Json* name = n.is_object() ? n.find("name") : nullptr;
    if (name && name->is_string()) all_names_.insert(name->as_string());
  }

  Graph g;
  if (const Json* symbols = doc.find("symbols")) {
    expect_type(*symbols, Json::Type::Array, "\"symbols\"");
    for (size_t i = 0; i < symbols->size(); ++i) {
      Scope scope(*this, "symbols[" + std::to_string(i) + "]");
      const Json& row = symbols->items()[i];
      expect_type(row, Json::Type::Object, "a size symbol");
      check_keys(row, {"name", "lo", "hi", "hint"}, "a size symbol");
      SizeSymbol s;
      s.name = read_string(row, "name", "a size symbol", true);
      auto bound = [&](const char* key, int64_t unbounded) {
        const Json* v = row.find(key);
        if (!v) return unbounded;
        expect_type(*v, Json::Type::Int, std::string("\"") + key + "\"");
        return v->as_int();
      };
      s.range = {bound("lo", sym::Range::kNegInf), bound("hi", sym::Range::kPosInf)};
      const Json& hint = require(row, "hint", "a size symbol");
      expect_type(hint, Json::Type::Int, "\"hint\"");
      s.hint = hint.as_int();
      try {
        g.add_symbol(std::move(s));
      } catch (const GraphError& e) {
        fail(e.what());
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    Scope scope(*this, "nodes[" + std::to_string(i) + "]");
    read_node(nodes.items()[i], g);
  }
  if (!g.output()) {
    fail("the graph has no output node; the last node must have \"kind\": \"output\"");
  }
  try {
    g.validate();
  } catch (const GraphError& e) {
    fail(e.what());
  }
  return g;
}

void Reader::read_node(const Json& j, Graph& g) {
  expect_type(j, Json::Type::Object, "a node");
  std::string name = read_string(j, "name", "a node", true);
  if (name.empty()) fail("\"name\" is empty; every node needs a name");
  path_.back() += " ('" + name + "')";
  check_keys(j,
             {"name", "kind", "target", "args", "kwargs", "meta", "scalar_type", "stack_trace",
              "value", "c_args", "donated"},
             "a node");
  if (ids_.count(name)) {
    fail("duplicate node name '" + name + "' (also node #" + std::to_string(ids_.at(name)) +
         "); node names must be unique");
  }
  std::string kind = read_string(j, "kind", "a node", true);
  std::string target = read_string(j, "target", "a node", kind == "call");
  std::vector<Arg> args = read_args(j.find("args"));
  std::vector<std::pair<std::string, Arg>> kwargs = read_kwargs(j.find("kwargs"));
  std::vector<TensorMeta> meta = read_metas(j.find("meta"));
  std::string scalar_type = read_string(j, "scalar_type", "a node", false);
  std::string stack_trace = read_string(j, "stack_trace", "a node", false);
  std::optional<sym::Expr> symint_value;
  if (const Json* v = j.find("value")) {
    Scope scope(*this, "value");
    if (kind != "placeholder" || scalar_type != "symint") {
      fail("only a \"symint\" placeholder has a \"value\"");
    }
    symint_value = read_expr(*v);
  }

  std::vector<CArg> c_args;
  if (const Json* c = j.find("c_args")) c_args = read_c_args(*c);
  bool donated = false;
  if (const Json* d = j.find("donated")) {
    Scope scope(*this, "donated");
    if (!d->is_bool()) fail("\"donated\" is true or false");
    if (kind != "placeholder") fail("only a placeholder is \"donated\"");
    donated = d->as_bool();
  }
  auto only = [&](bool ok, const char* msg) {
    if (!ok) fail("a " + kind + " node " + msg);
  };
  if (kind == "placeholder") {
    only(target.empty(), "has no \"target\"");
    only(args.empty() && kwargs.empty(), "has no \"args\" or \"kwargs\"");
    only(stack_trace.empty(), "has no \"stack_trace\"");
  } else if (kind == "call") {
    only(!target.empty(), "needs a non-empty \"target\" (the op, e.g. \"aten.add.Tensor\")");
  } else if (kind == "output") {
    only(name == "output", "must be named \"output\"");
    only(target.empty() && kwargs.empty() && meta.empty() && scalar_type.empty() &&
             stack_trace.empty(),
         "has only \"args\" (the returned values)");
  } else {
    fail("unknown node kind \"" + kind + "\"; expected \"placeholder\", \"call\" or \"output\"");
  }

  int id = -1;
  try {
    if (kind == "placeholder") {
      id = g.add_placeholder(name, std::move(meta), std::move(scalar_type), symint_value);
      if (donated) g.set_donated(id);
    } else if (kind == "call") {
      id = g.add_call(name, std::move(target), std::move(args), std::move(kwargs), std::move(meta),
                      std::move(stack_trace), std::move(scalar_type));
      if (!c_args.empty()) g.set_c_args(id, std::move(c_args));
    } else {
      id = g.set_output(std::move(args));
    }
  } catch (const GraphError& e) {
    fail(e.what());
  }
  ids_.emplace(name, id);
}

sym::Expr Reader::read_expr(const Json& j) {
  if (j.is_int()) return sym::Expr(j.as_int());
  if (!j.is_object()) {
    fail(std::string("an expression must be an integer or an object such as {\"sym\": \"s0\"}, ") +
         "found " + json_type_name(j.type()));
  }
  if (const Json* name = j.find("sym")) {
    check_keys(j, {"sym"}, "a symbol expression");
    expect_type(*name, Json::Type::String, "a symbol's name");
    if (name->as_string().empty()) fail("a symbol's name is empty");
    return sym::Expr::symbol(name->as_string());
  }
  for (sym::Kind kind : kCompoundKinds) {
    const char* tag = expr_tag(kind);
    const Json* ops_json = j.find(tag);
    if (!ops_json) continue;
    if (kind == sym::Kind::Add) {
      check_keys(j, {"add", "const"}, "an \"add\" expression");
    } else if (kind == sym::Kind::Mul) {
      check_keys(j, {"mul", "coeff"}, "a \"mul\" expression");
    } else {
      check_keys(j, {tag}, "an expression");
    }
    Scope scope(*this, tag);
    return read_compound_expr(j, kind, read_exprs(*ops_json, "the operands"));
  }
  std::string found = j.size() > 0 ? "\"" + j.keys()[0] + "\"" : "an empty object";
  fail("unknown expression " + found + "; expected an integer or an object tagged sym, add, " +
       "mul, floordiv, mod, min, max, lt, le, eq or ne");
}

sym::Expr Reader::read_compound_expr(const Json& j, sym::Kind kind,
                                     const std::vector<sym::Expr>& ops) {
  bool binary = kind != sym::Kind::Add && kind != sym::Kind::Mul && kind != sym::Kind::Min &&
                kind != sym::Kind::Max;
  if (binary && ops.size() != 2) {
    fail("needs exactly 2 operands, found " + std::to_string(ops.size()));
  }
  if (!binary && ops.size() < (kind == sym::Kind::Min || kind == sym::Kind::Max ? 2u : 1u)) {
    fail("has too few operands (" + std::to_string(ops.size()) + ")");
  }
  bool divides = kind == sym::Kind::FloorDiv || kind == sym::Kind::Mod;
  if (divides && ops[1] == sym::Expr(0)) fail("division by zero");

  auto constant = [&](const char* key, int64_t dflt) -> int64_t {
    const Json* c = j.find(key);
    if (!c) return dflt;
    expect_type(*c, Json::Type::Int, std::string("\"") + key + "\"");
    return c->as_int();
  };
  try {
    switch (kind) {
      case sym::Kind::Add: {
        sym::Expr sum = constant("const", 0);
        for (const sym::Expr& op : ops) sum = sum + op;
        return sum;
      }
      case sym::Kind::Mul: {
        // sym distributes a monomial times a sum but keeps a product of sums, so a canonical
        // s0*(s1 + 1)*(s2 + 1) only comes back when the sums are multiplied together first.
        // The coefficient goes last for the same reason.
        std::optional<sym::Expr> product;
        for (bool sums : {true, false}) {
          for (const sym::Expr& op : ops) {
            if ((op.kind() == sym::Kind::Add) != sums) continue;
            product = product ? *product * op : op;
          }
        }
        return *product * sym::Expr(constant("coeff", 1));
      }
      case sym::Kind::Min:
      case sym::Kind::Max: {
        sym::Expr acc = ops[0];
        for (size_t k = 1; k < ops.size(); ++k) {
          acc = kind == sym::Kind::Min ? sym::min(acc, ops[k]) : sym::max(acc, ops[k]);
        }
        return acc;
      }
      case sym::Kind::FloorDiv:
        return sym::floordiv(ops[0], ops[1]);
      case sym::Kind::Mod:
        return sym::mod(ops[0], ops[1]);
      case sym::Kind::Lt:
        return sym::lt(ops[0], ops[1]);
      case sym::Kind::Le:
        return sym::le(ops[0], ops[1]);
      case sym::Kind::Eq:
        return sym::eq(ops[0], ops[1]);
      case sym::Kind::Ne:
        return sym::ne(ops[0], ops[1]);
      case sym::Kind::Int:
      case sym::Kind::Symbol:
        break;
    }
  } catch (const GraphError&) {
    throw;
  } catch (const std::exception& e) {
    fail(std::string("bad expression: ") + e.what());
  }
  fail("internal error: unhandled expression kind");
}

std::vector<sym::Expr> Reader::read_exprs(const Json& j, const char* what) {
  expect_type(j, Json::Type::Array, what);
  std::vector<sym::Expr> out;
  for (size_t i = 0; i < j.size(); ++i) {
    Scope scope(*this, "[" + std::to_string(i) + "]");
    out.push_back(read_expr(j.items()[i]));
  }
  return out;
}

TensorMeta Reader::read_meta(const Json& j) {
  expect_type(j, Json::Type::Object, "a tensor meta");
  check_keys(j, {"dtype", "device", "sizes", "strides", "offset"}, "a tensor meta");
  TensorMeta m;
  std::string dtype = read_string(j, "dtype", "a tensor meta", true);
  std::optional<DType> d = dtype_from_name(dtype);
  if (!d) {
    fail("unknown dtype \"" + dtype + "\"; expected bool, uint8, int8, int16, int32, int64, " +
         "float16, bfloat16, float32, float64, uint16, uint32 or uint64");
  }
  m.dtype = *d;
  if (j.find("device")) m.device = read_string(j, "device", "a tensor meta", true);
  if (m.device.empty()) fail("\"device\" is empty; expected e.g. \"cpu\" or \"cuda:0\"");
  {
    Scope scope(*this, "sizes");
    m.sizes = read_exprs(require(j, "sizes", "a tensor meta"), "\"sizes\"");
  }
  {
    Scope scope(*this, "strides");
    m.strides = read_exprs(require(j, "strides", "a tensor meta"), "\"strides\"");
  }
  if (m.strides.size() != m.sizes.size()) {
    fail("has " + std::to_string(m.sizes.size()) + " sizes but " +
         std::to_string(m.strides.size()) + " strides; expected one stride per size");
  }
  if (const Json* off = j.find("offset")) {
    Scope scope(*this, "offset");
    m.offset = read_expr(*off);
  }
  return m;
}

std::vector<TensorMeta> Reader::read_metas(const Json* j) {
  std::vector<TensorMeta> out;
  if (!j) return out;
  expect_type(*j, Json::Type::Array, "\"meta\"");
  for (size_t i = 0; i < j->size(); ++i) {
    Scope scope(*this, "meta[" + std::to_string(i) + "]");
    out.push_back(read_meta(j->items()[i]));
  }
  return out;
}

std::vector<CArg> Reader::read_c_args(const Json& j) {
  Scope scope(*this, "c_args");
  if (!j.is_array()) fail("\"c_args\" must be an array of [name, type] or [name, type, default]");
  std::vector<CArg> out;
  for (const Json& item : j.items()) {
    if (!item.is_array() || item.size() < 2 || item.size() > 3 || !item.items()[0].is_string() ||
        !item.items()[1].is_string()) {
      fail("each of \"c_args\" must be [name, type] or [name, type, default]");
    }
    CArg c{item.items()[0].as_string(), item.items()[1].as_string(), std::nullopt};
    if (item.size() == 3) c.default_value = read_arg(item.items()[2]);
    out.push_back(std::move(c));
  }
  return out;
}

Arg Reader::read_arg(const Json& j) {
  if (j.is_null()) return Arg::none();
  if (!j.is_object() || j.size() != 1) {
    fail(std::string("an argument must be null or an object with exactly one tag, such as ") +
         "{\"int\": 3}; found " +
         (j.is_object() ? "an object with " + std::to_string(j.size()) + " keys"
                        : std::string(json_type_name(j.type()))));
  }
  return read_tagged_arg(j.keys()[0], j.items()[0]);
}

Arg Reader::read_tagged_arg(const std::string& tag, const Json& v) {
  auto want = [&](Json::Type t) { expect_type(v, t, "the value of \"" + tag + "\""); };
  if (tag == "int") {
    want(Json::Type::Int);
    return Arg::integer(v.as_int());
  }
  if (tag == "float") return read_float(v);
  if (tag == "bool") {
    want(Json::Type::Bool);
    return Arg::boolean(v.as_bool());
  }
  if (tag == "str" || tag == "enum") {
    want(Json::Type::String);
    return tag == "str" ? Arg::str(v.as_string()) : Arg::enum_text(v.as_string());
  }
  if (tag == "dtype") {
    want(Json::Type::String);
    std::optional<DType> d = dtype_from_name(v.as_string());
    if (!d) fail("unknown dtype \"" + v.as_string() + "\"");
    return Arg::dtype_of(*d);
  }
  if (tag == "sym") {
    Scope scope(*this, "sym");
    return Arg::symbolic(read_expr(v));
  }
  if (tag == "node") return read_node_ref(v);
  if (tag == "list") {
    want(Json::Type::Array);
    std::vector<Arg> items;
    for (size_t i = 0; i < v.size(); ++i) {
      Scope scope(*this, "list[" + std::to_string(i) + "]");
      items.push_back(read_arg(v.items()[i]));
    }
    return Arg::list_of(std::move(items));
  }
  fail("unknown argument tag \"" + tag +
       "\"; expected int, float, bool, str, dtype, enum, sym, node or list (or null for None)");
}

Arg Reader::read_float(const Json& v) {
  if (v.is_number()) return Arg::floating(v.as_double());
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s == "inf") return Arg::floating(std::numeric_limits<double>::infinity());
    if (s == "-inf") return Arg::floating(-std::numeric_limits<double>::infinity());
    if (s == "nan") return Arg::floating(std::numeric_limits<double>::quiet_NaN());
  }
  fail(std::string("the value of \"float\" must be a number or one of \"inf\", \"-inf\", ") +
       "\"nan\"; found " +
       (v.is_string() ? "\"" + v.as_string() + "\"" : json_type_name(v.type())));
}

Arg Reader::read_node_ref(const Json& v) {
  expect_type(v, Json::Type::String, "the value of \"node\"");
  const std::string& name = v.as_string();
  auto it = ids_.find(name);
  if (it != ids_.end()) return Arg::node_ref(it->second);
  if (all_names_.count(name)) {
    fail("refers to node '" + name + "', which comes later; a node may only use earlier nodes");
  }
  fail("refers to node '" + name + "', which does not exist");
}

std::vector<Arg> Reader::read_args(const Json* j) {
  std::vector<Arg> out;
  if (!j) return out;
  expect_type(*j, Json::Type::Array, "\"args\"");
  for (size_t i = 0; i < j->size(); ++i) {
    Scope scope(*this, "args[" + std::to_string(i) + "]");
    out.push_back(read_arg(j->items()[i]));
  }
  return out;
}

std::vector<std::pair<std::string, Arg>> Reader::read_kwargs(const Json* j) {
  std::vector<std::pair<std::string, Arg>> out;
  if (!j) return out;
  expect_type(*j, Json::Type::Object, "\"kwargs\"");
  for (size_t i = 0; i < j->size(); ++i) {
    const std::string& key = j->keys()[i];
    Scope scope(*this, "kwargs." + key);
    if (key.empty()) fail("a keyword argument has an empty name");
    out.emplace_back(key, read_arg(j->items()[i]));
  }
  return out;
}

}  // namespace

std::string to_json(const Graph& g) {
  Json nodes = Json::array();
  for (const Node& n : g.nodes()) nodes.push_back(node_to_json(n, g));
  Json doc = Json::object();
  doc.set("format", kFormat);
  doc.set("version", kVersion);
  doc.set("nodes", std::move(nodes));
  if (!g.symbols().empty()) {
    Json symbols = Json::array();
    for (const SizeSymbol& s : g.symbols()) {
      Json row = Json::object();
      row.set("name", s.name);
      if (s.range.lo != sym::Range::kNegInf) row.set("lo", s.range.lo);
      if (s.range.hi != sym::Range::kPosInf) row.set("hi", s.range.hi);
      row.set("hint", s.hint);
      symbols.push_back(std::move(row));
    }
    doc.set("symbols", std::move(symbols));
  }
  try {
    return dump_json(doc, 2);
  } catch (const JsonError& e) {
    throw GraphError(std::string("cannot write the graph as JSON: ") + e.what());
  }
}

Graph from_json(const std::string& text) {
  Json doc;
  try {
    doc = parse_json(text);
  } catch (const JsonError& e) {
    throw GraphError(std::string("malformed coil graph JSON at ") + e.what());
  }
  return Reader().read(doc);
}

Graph load_graph_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw GraphError("cannot open graph file '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw GraphError("cannot read graph file '" + path + "'");
  try {
    return from_json(text.str());
  } catch (const GraphError& e) {
    throw GraphError(path + ": " + e.what());
  }
}

void save_graph_file(const Graph& g, const std::string& path) {
  std::string text = to_json(g) + "\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw GraphError("cannot open graph file '" + path + "' for writing: " + std::strerror(errno));
  }
  out << text;
  out.flush();
  if (!out) throw GraphError("cannot write graph file '" + path + "'");
}

}  // namespace coil::graph
