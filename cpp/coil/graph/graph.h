// graph::Graph — the ATen graph as coil receives it.
//
// Nodes are in topological order (placeholders first, one output node last). A call node names
// its ATen op as "aten.<name>.<overload>" (e.g. "aten.add.Tensor"), or one of:
//   "getitem"       takes one element of a tuple-returning op: (node, index);
//   "with_effects"  runs an op with side effects, in order (torch's effect tokens): (token, "op",
//                   op args...), op kwargs; it returns (new token, op results...);
//   "operator.<f>", "math.<f>", "torch.sym_<f>"  a Python function of numbers (operator.ge,
//                   torch.sym_ite, ...), as in graphs that compute with the value of .item().
// Each node carries one TensorMeta per tensor it produces (a tuple-returning op has several; a
// getitem has one). Sizes, strides and offsets are sym::Expr. A call that produces a Python number
// instead (aten._local_scalar_dense, the functions of numbers above) has no meta and says which
// kind of number in scalar_type.
//
// The graph prints in an FX-like readable form (to_text) and round-trips through JSON
// (to_json / from_json, in graph/serialize.h), so a graph a user hit can be saved and recompiled
// without PyTorch.
//
// Tests: tests/cpp/graph/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coil/sym/expr.h"

namespace coil::graph {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  // Only ever the dtype of tensors that ATen ops (fallbacks) make and read: coil computes nothing
  // in them (fft's complex intermediates; torch's "barebones" unsigned types, such as
  // hash_tensor's uint64 result). See graph::is_opaque and Lowering::touches_opaque_dtype.
  Complex64,
  Complex128,
  UInt16,
  UInt32,
  UInt64,
};

// "float32", "bfloat16", "int64", "bool", ... (torch's names without the "torch." prefix).
const char* dtype_name(DType d);
// The short tag used in text forms: "f32", "bf16", "i64", "b8", ...
const char* dtype_tag(DType d);
std::optional<DType> dtype_from_name(const std::string& name);
int dtype_itemsize(DType d);
bool is_floating(DType d);
bool is_integral(DType d);       // integers, not bool
bool is_wide_unsigned(DType d);  // uint16, uint32, uint64
// Complex and wide unsigned: dtypes only ATen ops (fallbacks) compute in.
bool is_opaque(DType d);
// The C++ type a kernel uses to store this dtype ("float", "int64_t", "bool", "coil_bf16", ...).
const char* dtype_cpp_type(DType d);

struct TensorMeta {
  DType dtype = DType::Float32;
  std::string device = "cpu";  // "cpu", "cuda:0", ...
  std::vector<sym::Expr> sizes;
  std::vector<sym::Expr> strides;
  sym::Expr offset;  // storage offset, in elements

  size_t rank() const { return sizes.size(); }
  sym::Expr numel() const;
  bool operator==(const TensorMeta& o) const;
};

// A node argument: a constant, a reference to another node's value, or a list of arguments.
struct Arg {
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,    // a Python int
    Float,  // a Python float
    Str,    // a string argument (e.g. approximate="tanh", reduce="sum")
    DType,  // torch.float32 ...
    Enum,   // other torch enums kept as their text: device "cpu", layout "torch.strided",
            // memory_format "torch.contiguous_format"
    Sym,    // a symbolic integer (sym::Expr)
    Node,   // the value of node `node`
    List,   // a list or tuple of arguments
  };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;  // Str, Enum
  graph::DType dtype = graph::DType::Float32;
  sym::Expr sym;
  int node = -1;
  std::vector<Arg> list;

  static Arg none() { return Arg{}; }
  static Arg boolean(bool v);
  static Arg integer(int64_t v);
  static Arg floating(double v);
  static Arg str(std::string v);
  static Arg enum_text(std::string v);
  static Arg dtype_of(graph::DType d);
  static Arg symbolic(sym::Expr e);
  static Arg node_ref(int id);
  static Arg list_of(std::vector<Arg> items);

  bool is_none() const { return kind == Kind::None; }
  bool is_node() const { return kind == Kind::Node; }
  bool operator==(const Arg& o) const;
};

enum class NodeKind : uint8_t { Placeholder, Call, Output };

// A backed size symbol (Dynamo's dynamic shapes: s0, s1, ...): its value range and a size hint
// (the example value it was traced with). Symbols a graph mentions that are not in its table are
// unbacked (data-dependent sizes, u0, ...): only ATen ops touch the tensors they size.
struct SizeSymbol {
  std::string name;
  sym::Range range;  // inclusive; unbounded ends are kNegInf/kPosInf
  int64_t hint = 0;
  bool operator==(const SizeSymbol& o) const {
    return name == o.name && range.lo == o.range.lo && range.hi == o.range.hi && hint == o.hint;
  }
};

// One argument of an op's schema as a C++ wrapper passes it (Node::c_args).
struct CArg {
  std::string name;  // the schema's name: the node's kwarg of that name, when not positional
  // "Tensor", "int", "float", "bool", "Scalar", "ScalarType", "str", "Device", "Layout",
  // "MemoryFormat", "int[]", "float[]", "Tensor[]", "Tensor?[]"; "?" appended when optional
  // ("Tensor?", "int[]?").
  std::string type;
  std::optional<Arg> default_value;  // when the node gives neither a positional nor a kwarg
  bool operator==(const CArg& o) const {
    return name == o.name && type == o.type &&
           default_value.has_value() == o.default_value.has_value();
  }
};

struct Node {
  int id = -1;       // index in Graph::nodes()
  std::string name;  // FX node name: "arg0_1", "add", "amax_1"
  NodeKind kind = NodeKind::Call;
  std::string target;  // "aten.add.Tensor", "getitem"; empty for placeholder/output
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  std::vector<TensorMeta> meta;  // one per tensor output (empty for non-tensor values)
  // Placeholders that are scalars (SymInt/int/float inputs) and calls that produce a Python number
  // have no meta; their kind is here.
  std::string scalar_type;  // "", "int", "float", "symint" (placeholders), "bool" (calls)
  // "symint" placeholders: the size expression the input carries (usually one symbol, s0), when
  // known. The wrapper binds a symbol from the input that carries it.
  std::optional<sym::Expr> symint_value;
  // Tensor placeholders: memory the graph may take over once it has read the input for the last
  // time (a backward graph's saved activations that AOTAutograd donates: nothing else holds them).
  bool donated = false;
  std::string stack_trace;  // the user's source line(s) that produced this node, if known
  // ATen calls a C++ wrapper can make (boxed, through the dispatcher): every argument of the
  // op's schema in order, with its type and, where the node leaves it out, its default. Empty
  // when the op has an argument or result it cannot pass (python/coil/fx_import.py decides from
  // the schema).
  std::vector<CArg> c_args;

  const Arg* kwarg(const std::string& key) const;
};

// Thrown for malformed graphs or graph files; the message says what was wrong and where.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Graph {
 public:
  int add_placeholder(std::string name, std::vector<TensorMeta> meta, std::string scalar_type = "",
                      std::optional<sym::Expr> symint_value = std::nullopt);
  int add_call(std::string name, std::string target, std::vector<Arg> args,
               std::vector<std::pair<std::string, Arg>> kwargs, std::vector<TensorMeta> meta,
               std::string stack_trace = "", std::string scalar_type = "");
  // Node::c_args of call `id`.
  void set_c_args(int id, std::vector<CArg> c_args);
  // Node::donated of tensor placeholder `id`.
  void set_donated(int id);
  // The graph's outputs: a list of Arg (nodes, or None / constants).
  int set_output(std::vector<Arg> outputs);
  // Registers a backed size symbol (names are unique; GraphError otherwise).
  void add_symbol(SizeSymbol s);
  const std::vector<SizeSymbol>& symbols() const { return symbols_; }
  const SizeSymbol* symbol(const std::string& name) const;  // nullptr when not backed
  // The range environment of the backed symbols (ranges and hints).
  sym::RangeEnv symbol_env() const;

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const;
  std::vector<int> placeholders() const;
  const Node* output() const;  // nullptr until set_output
  // The ids of nodes that read node `id` (in node order).
  std::vector<int> users(int id) const;
  // Checks references point backwards, names are unique, exactly one output node last.
  // Throws GraphError with the offending node's name.
  void validate() const;

  // FX-like readable text:
  //   %arg0_1 : f32[4, 8]{8, 1} = placeholder
  //   %add : f32[4, 8]{8, 1} = aten.add.Tensor(%arg0_1, 1.0)
  //   return (%add,)
  std::string to_text() const;

 private:
  std::vector<Node> nodes_;
  std::vector<SizeSymbol> symbols_;
};

std::string meta_to_text(const TensorMeta& m);
std::string arg_to_text(const Arg& a, const Graph& g);

}  // namespace coil::graph
