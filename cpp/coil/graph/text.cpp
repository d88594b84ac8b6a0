// The FX-like text form of graph.h: Graph::to_text, meta_to_text, arg_to_text.
#include "coil/graph/graph.h"

#include "coil/graph/json.h"

namespace coil::graph {

namespace {

std::string join_exprs(const std::vector<sym::Expr>& es) {
  std::string out;
  for (size_t i = 0; i < es.size(); ++i) {
    if (i > 0) out += ", ";
    out += es[i].str();
  }
  return out;
}

// A Python-style single-quoted string literal.
std::string quote(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char c : s) {
    switch (c) {
      case '\'':
        out += "\\'";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      continue;
    }
    out += char(c);
  }
  return out + "'";
}

std::string type_text(const Node& n) {
  if (n.meta.size() == 1) return meta_to_text(n.meta[0]);
  if (n.meta.empty()) {
    if (n.symint_value) return n.scalar_type + "(" + n.symint_value->str() + ")";
    return n.scalar_type;
  }
  std::string out = "(";
  for (size_t i = 0; i < n.meta.size(); ++i) {
    if (i > 0) out += ", ";
    out += meta_to_text(n.meta[i]);
  }
  return out + ")";
}

std::string call_text(const Node& n, const Graph& g) {
  std::string out = n.target + "(";
  bool first = true;
  for (const Arg& a : n.args) {
    if (!first) out += ", ";
    first = false;
    out += arg_to_text(a, g);
  }
  for (const auto& [key, a] : n.kwargs) {
    if (!first) out += ", ";
    first = false;
    out += key + "=" + arg_to_text(a, g);
  }
  return out + ")";
}

std::string return_text(const Node& n, const Graph& g) {
  std::string out = "return (";
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (i > 0) out += ", ";
    out += arg_to_text(n.args[i], g);
  }
  if (n.args.size() == 1) out += ",";
  return out + ")";
}

}  // namespace

std::string meta_to_text(const TensorMeta& m) {
  std::string out = dtype_tag(m.dtype);
  out += "[" + join_exprs(m.sizes) + "]{" + join_exprs(m.strides) + "}";
  if (m.offset != sym::Expr(0)) out += "+" + m.offset.str();
  if (m.device != "cpu") out += "@" + m.device;
  return out;
}

// Lists nest only as deep as the op's schema (list of lists at most), so recursion is shallow.
std::string arg_to_text(const Arg& a, const Graph& g) {
  switch (a.kind) {
    case Arg::Kind::None:
      return "None";
    case Arg::Kind::Bool:
      return a.b ? "True" : "False";
    case Arg::Kind::Int:
      return std::to_string(a.i);
    case Arg::Kind::Float:
      return format_double(a.f);
    case Arg::Kind::Str:
      return quote(a.s);
    case Arg::Kind::DType:
      return std::string("torch.") + dtype_name(a.dtype);
    case Arg::Kind::Enum:
      return a.s;
    case Arg::Kind::Sym:
      return a.sym.str();
    case Arg::Kind::Node:
      if (a.node < 0 || size_t(a.node) >= g.nodes().size()) {
        return "%<invalid node #" + std::to_string(a.node) + ">";
      }
      return "%" + g.node(a.node).name;
    case Arg::Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < a.list.size(); ++i) {
        if (i > 0) out += ", ";
        out += arg_to_text(a.list[i], g);
      }
      return out + "]";
    }
  }
  return "?";
}

static std::string range_text(const sym::Range& r) {
  auto end = [](int64_t v) {
    if (v == sym::Range::kNegInf) return std::string("-inf");
    if (v == sym::Range::kPosInf) return std::string("inf");
    return std::to_string(v);
  };
  return "[" + end(r.lo) + ", " + end(r.hi) + "]";
}

std::string Graph::to_text() const {
  std::string out;
  for (const SizeSymbol& s : symbols_) {
    out += "# size symbol " + s.name + " in " + range_text(s.range) + ", hint " +
           std::to_string(s.hint) + "\n";
  }
  for (const Node& n : nodes_) {
    if (n.kind == NodeKind::Output) {
      out += return_text(n, *this) + "\n";
      continue;
    }
    out += "%" + n.name;
    std::string type = type_text(n);
    if (!type.empty()) out += " : " + type;
    out += " = ";
    out += n.kind == NodeKind::Placeholder ? "placeholder" : call_text(n, *this);
    out += "\n";
  }
  return out;
}

}  // namespace coil::graph
