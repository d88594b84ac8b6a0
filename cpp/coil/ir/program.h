// ir::Program — the loop-level IR of one graph: buffers in topological order.
//
// A Buffer is a realized tensor: a graph input, a computation coil generates code for (Pointwise
// over `ranges`, or Reduction over `ranges` x `reduction_ranges`, described by a scalar body), a
// scatter (a copy of another buffer that then receives values at data-dependent positions:
// index_put, scatter, scatter_add, scatter_reduce), or the output of an extern call (a library or
// fallback ATen op run from the wrapper).
//
// Index variables: a computed body is a function of v0..v{n-1} (one per entry of `ranges`) and,
// for reductions, u0..u{m-1} (one per entry of `reduction_ranges`). Every Load in a body names a
// buffer and an element index into that buffer's storage, offset included.
//
// Tests: tests/cpp/ir/.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coil/graph/graph.h"
#include "coil/ir/scalar.h"
#include "coil/sym/expr.h"

namespace coil::ir {

using sym::Expr;

// The canonical index variables of buffer bodies.
Expr index_var(int i);      // v{i}
Expr reduction_var(int j);  // u{j}
std::vector<Expr> index_vars(size_t n);
std::vector<Expr> reduction_vars(size_t n);

struct Layout {
  DType dtype = DType::Float32;
  std::string device = "cpu";
  std::vector<Expr> sizes;
  std::vector<Expr> strides;
  Expr offset;
  // Flexible layouts may still be re-strided by the scheduler; fixed ones (inputs, outputs,
  // extern results) may not.
  bool fixed = false;

  // offset + sum(stride[i] * idx[i])
  Expr index(const std::vector<Expr>& idx) const;
  Expr numel() const;
  static std::vector<Expr> contiguous_strides(const std::vector<Expr>& sizes);
  // Strides for a new buffer that should look like a tensor eager laid out with `like`: `like`
  // itself when it is dense and non-overlapping (a permutation of contiguous strides, whatever
  // its size-1 dims say), else dense strides in `like`'s stride order (static strides; symbolic
  // ones that are not dense give contiguous strides). Extern calls whose results depend on their
  // inputs' layouts (convolution's memory format) then return what eager's did.
  static std::vector<Expr> dense_strides_like(const std::vector<Expr>& sizes,
                                              const std::vector<Expr>& like);
  // Dense strides in the order of `strides` (dense themselves), each one but the innermost
  // rounded up to a multiple of `align` elements, or of `wide_align` where it is at least
  // `wide_from` elements: rows that start on aligned addresses (cuBLAS's vectorized GEMMs need
  // 16-byte leading dimensions). Symbolic sizes or strides: `strides` unchanged.
  static std::vector<Expr> padded_strides(const std::vector<Expr>& sizes,
                                          const std::vector<Expr>& strides, int64_t align,
                                          int64_t wide_align, int64_t wide_from);
};

// LogSumExp combines as log(exp(a) + exp(b)); only scans use it (logcumsumexp).
enum class ReductionType : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin, Any, All, LogSumExp };
const char* reduction_name(ReductionType t);

// How a scatter combines a value into the element it targets. Store: duplicate targets leave one
// of the values (as eager does); the others combine every value, in any order.
enum class ScatterMode : uint8_t { Store, Add, Mul, Max, Min };
const char* scatter_mode_name(ScatterMode m);

// A view of a realized buffer, as passed to extern calls and returned as graph outputs.
struct TensorRef {
  std::string buffer;
  DType dtype = DType::Float32;
  std::vector<Expr> sizes;
  std::vector<Expr> strides;
  Expr offset;
};

// A call the wrapper makes into torch: an ATen op (mm, convolution, any op coil cannot lower).
// Arguments keep the graph's form; an Arg of kind Node refers to tensors[arg.node].
struct ExternCall {
  std::string op;  // "aten.mm.default"; or a Python function of numbers: "operator.ge", ...
  std::vector<graph::Arg> args;
  std::vector<std::pair<std::string, graph::Arg>> kwargs;
  std::vector<TensorRef> tensors;
  // Python numbers the call reads (wrapper variables): an Arg of kind Node with a negative index
  // k refers to host_scalars[-1 - k].
  std::vector<std::string> host_scalars;
  std::vector<std::string> outputs;  // one buffer per tensor the op returns (tuple order)
  // A call that produces a Python number (aten._local_scalar_dense, operator.ge, ...): the
  // wrapper variable it is stored in; such a call has no tensor outputs.
  std::string scalar_output;
  bool returns_tuple = false;
  bool is_fallback = false;  // true: coil has no lowering; false: a deliberate library call
  // An op with side effects (graph "with_effects"): it runs after every earlier such op.
  bool has_effects = false;
  // The op may return another layout than its output buffers say (the graph's meta, or one coil
  // chose: channels-last convolutions): ATen picks a result's layout from its inputs' at run time,
  // and its kernels and meta functions do not always agree. The wrapper checks each result's
  // strides and re-lays it out where they differ. Off only for ops whose results are always
  // contiguous (mm and its family).
  bool check_output_strides = false;
  // Why the call looks as it does where coil changed it (padded GEMM sizes): wrapper comment and
  // schedule.txt.
  std::string decision;
  // Buffers the call writes into (copy_ into a graph input: the mutations AOTAutograd leaves in an
  // inference graph). The call runs after every other reader of them, and neither they nor the
  // call's result (an alias of them) is ever reused.
  std::vector<std::string> mutates;
  std::string origin;  // the graph node
  // The op's schema as a C++ wrapper passes it (graph::Node::c_args); empty: only the Python
  // wrapper can make this call.
  std::vector<graph::CArg> c_args;
};

struct Buffer {
  enum class Kind : uint8_t { Input, Computed, Scatter, Extern };
  std::string name;
  Kind kind = Kind::Computed;
  Layout layout;

  // Computed:
  std::vector<Expr> ranges;
  std::vector<Expr> reduction_ranges;
  std::optional<ReductionType> reduction;
  Value body;  // over v-vars (and u-vars for reductions); for Sum etc. already in the acc dtype

  // Scatter: the buffer starts as the contents of `base` (a computed buffer only this one reads;
  // the scatter takes its memory), then for each point of `ranges` (v-vars) combines `body` (in
  // the buffer's dtype) into the element at `target`, an int64 IndexExpr over the v-vars whose
  // index mentions indirect symbols. A scatter kernel runs alone: its stores go to data-dependent
  // places, so nothing can read them in the same kernel.
  std::string base;
  Value target;
  ScatterMode scatter_mode = ScatterMode::Store;

  // Computed, a scan (cumsum, cumprod): element i along ranges[scan_dim] combines `body` (the
  // term at each point, over the v-vars, in the accumulation dtype, which the running value
  // keeps) at positions 0..i of that dim, stored in the buffer's dtype.
  // A scan kernel runs alone (sched::Kernel::scan): x over the other dims, r0 along the scan.
  std::optional<ReductionType> scan;
  int scan_dim = -1;

  int extern_id = -1;  // Extern: index into Program::externs

  // Input: the graph may take its memory once it has read it for the last time (graph::Node::
  // donated).
  bool donated = false;

  std::set<std::string> origins;   // graph nodes whose computation this buffer holds
  std::vector<std::string> notes;  // program rewrites that shaped it (kernel decisions)

  bool is_reduction() const { return reduction.has_value(); }
  bool is_scatter() const { return kind == Kind::Scatter; }
  bool is_scan() const { return scan.has_value(); }
  // Computed or Scatter: coil generates the code that writes it.
  bool is_generated() const { return kind == Kind::Computed || kind == Kind::Scatter; }
  // The index this buffer's computation writes: layout.index(v0..v{n-1}) (Scatter: the target).
  Expr write_index() const;
};

struct GraphOutput {
  bool is_none = false;
  std::string scalar;  // a Python number: the wrapper variable holding it (then ref is unused)
  TensorRef ref;
  bool is_tensor() const { return !is_none && scalar.empty(); }
};

struct Program {
  std::vector<Buffer> buffers;  // topological order
  std::vector<ExternCall> externs;
  // One per graph placeholder: the input buffer's name (tensor inputs) or "" (scalar inputs).
  std::vector<std::string> inputs;
  // One per graph placeholder: the size expression a SymInt input carries (nullopt otherwise).
  std::vector<std::optional<Expr>> input_symints;
  // The graph's backed size symbols (s0, ...: ranges and hints). Kernels take the ones they use
  // as arguments; the wrapper binds each from the inputs at call time.
  std::vector<graph::SizeSymbol> size_symbols;
  std::vector<GraphOutput> outputs;
  // Graph node name -> its user's source line(s), for provenance comments.
  std::map<std::string, std::string> stack_traces;
  // Graph node name -> ATen op it came from.
  std::map<std::string, std::string> node_targets;
  std::vector<std::string> fallback_ops;  // ATen ops run through fallback, one per occurrence
  // Nodes a lowering handed to ATen because a size it needed was symbolic, and why.
  std::vector<std::string> fallback_reasons;
  // The graph-wide layout choice and why ("channels-last: ..."), for schedule.txt and kernels.
  std::string layout_decision;

  const Buffer& buffer(const std::string& name) const;
  Buffer& buffer(const std::string& name);
  int buffer_index(const std::string& name) const;  // -1 when absent
  void rebuild_index();

  std::string to_text() const;  // ir_pre_fusion.txt

 private:
  std::map<std::string, int> index_;
};

}  // namespace coil::ir
