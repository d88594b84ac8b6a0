// Lowering: ATen graph -> loop-level IR (ir::Program).
//
// Each graph node is lowered, in order, by a function registered for its ATen op (one file per op
// family: pointwise.cpp, special.cpp, reduction.cpp, views.cpp, movement.cpp, creation.cpp,
// indexing.cpp, pooling.cpp, random.cpp, extern.cpp; extern calls themselves: extern_call.cpp).
// A lowering receives TensorBoxes for its tensor inputs and returns TensorBoxes for its outputs
// (none: the node becomes a fallback, as for an op with no lowering). A TensorBox is lazy: a body
// describing one element as a function of index variables v0..v{rank-1}. Reading a box at some
// index substitutes that index into its body, so chains of pointwise ops and views compose into
// one body without touching memory. A box is realized (stored to a buffer) when a reduction or
// extern call needs its input in memory, when it is a graph output, or when the thresholds in
// ir/realize_policy.h say storing beats recomputing.
//
// Ops without a lowering become fallback extern calls that run the ATen op from the wrapper.
// Nodes that produce a Python number (graph scalar_type: .item()'s aten._local_scalar_dense, and
// the functions of numbers computed from it) are extern calls too: a number lives in a variable of
// the wrapper, never in a kernel. A node reading such a number runs as an extern (a fallback when
// it produces tensors). "with_effects" runs its op as a fallback, after the previous effectful op.
//
// Tests: tests/cpp/lower/ (IR text of small graphs), tests/python (numerics against eager).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coil/graph/graph.h"
#include "coil/ir/program.h"
#include "coil/ir/scalar.h"

namespace coil::lower {

using graph::DType;
using ir::Value;
using sym::Expr;

// Thrown by a lowering whose plan needs a size, index or argument to be a known integer when the
// graph has it symbolic (a dynamic size): the node then runs as its ATen op (a counted fallback)
// rather than the whole graph running eagerly.
class NeedsStaticValue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// e's integer value; NeedsStaticValue naming `what` when e is symbolic.
int64_t static_value(const sym::Expr& e, const char* what);
// A number argument (float, int, bool, or a symbolic int with a static value) as a double;
// NeedsStaticValue for a symbolic one. Lowerings read numbers through this (or Lowering::scalar,
// which keeps a symbolic int symbolic), never through Arg::i or Arg::f directly: a SymInt
// argument has neither.
double static_number(const graph::Arg& a, const char* what);

struct TensorBox {
  DType dtype = DType::Float32;
  std::string device = "cpu";
  std::vector<Expr> sizes;
  Value body;                     // over v0..v{rank-1}
  std::set<std::string> origins;  // graph nodes inlined into this body

  size_t rank() const { return sizes.size(); }
  Expr numel() const;
  // The element at idx (one Expr per dim).
  Value load(const std::vector<Expr>& idx) const;
};

// If box reads a realized buffer through a strided (affine) index — a view — returns that view.
std::optional<ir::TensorRef> as_strided_view(const TensorBox& box);

// Type promotion for a set of operands, following torch.result_type: dimensioned tensors decide
// first, then 0-d tensors, then Python scalars, each only raising the category (bool < int <
// float).
struct Operand {
  enum class Kind { Tensor, ZeroDimTensor, Scalar };
  Kind kind;
  DType dtype;  // for Python scalars: Bool, Int64 or Float64 (the category)
};
DType promote(const std::vector<Operand>& operands);
// The dtype arithmetic happens in for a given dtype: float32 for bfloat16/float16.
DType opmath(DType d);

// What the target can do that changes which ops are lowered.
struct LowerOptions {
  // The kernels are Triton: duplicate scatter updates combine only through hardware atomics, so a
  // scatter without an atomic form (see scatter_has_atomic) falls back to the ATen op.
  bool triton = false;
  // Which graphs keep their 4-D tensors channels-last (NHWC), the layout cuDNN's fast
  // convolutions take and return (decided in the Lowering constructor, recorded in
  // Program::layout_decision). Auto: CUDA inference graphs with 16-bit 2-D convolutions. On: every
  // graph with a 2-D convolution (any device: how the CPU tests check the mechanism). Off: never.
  enum class Layout { Auto, ChannelsLast, Contiguous };
  Layout channels_last = Layout::Auto;
  // The graph is an inference graph (no autograd): its layout is free of a backward's needs.
  bool inference = true;
  // Matrix products (mm, addmm, bmm, baddbmm) get operands and results whose leading dimension
  // is a multiple of 16 bytes (128 where it is 1024 elements or more), as cuBLAS's vectorized
  // kernels need: coil stores the operands it computes that way and has the library write its
  // result into a padded buffer (the op's out= form). Auto: on CUDA devices only.
  enum class Padding { Auto, On, Off };
  Padding gemm_padding = Padding::Auto;
  // Random ops run as ATen fallbacks, drawing from torch's generator exactly as eager does
  // (Inductor's fallback_random), instead of coil's counter-based generator (random.cpp).
  bool fallback_random = false;
};

// Whether Triton combines scatter updates of this mode and dtype with an atomic (the Triton op
// table's scatter_op_text; the renderer rejects the others).
bool scatter_has_atomic(ir::ScatterMode mode, DType dtype);

class Lowering;
// Whether strides a and b of a tensor of `sizes` agree where it matters (dims of at most one
// element excepted, size symbols in [0, 1] among them).
bool same_strides(const std::vector<Expr>& sizes, const std::vector<Expr>& a,
                  const std::vector<Expr>& b);
// Strides of a 4-D [N, C, H, W] tensor stored channels-last (N, H, W, C).
std::vector<Expr> channels_last_strides(const std::vector<Expr>& sizes);
using LowerFn = std::function<std::vector<TensorBox>(Lowering&, const graph::Node&)>;
using Registry = std::map<std::string, LowerFn>;

// Per-family registration (each in its own file).
void register_pointwise(Registry& r);
void register_reductions(Registry& r);
void register_norms(Registry& r);
void register_views(Registry& r);
void register_movement(Registry& r);  // after register_views: reuses its lowerings
void register_creation(Registry& r);
void register_indexing(Registry& r);
void register_externs(Registry& r);
void register_pooling(Registry& r);
void register_special(Registry& r);
void register_random(Registry& r);

// All lowerings, keyed by target ("aten.add.Tensor").
const Registry& registry();
// Op names (without overload: "aten.add") that coil lowers itself, for the decomposition table.
std::vector<std::string> lowered_ops();
// Whether AOTAutograd should hand op `name` ("aten.add", "aten.bernoulli.p": as torch names a
// decomposition's key) to coil whole rather than decomposed: coil lowers it; it is attention
// (kept whole, see lowering.cpp); or it is random (`random`: torch tags it nondeterministic_seeded)
// and fallback_random asks for eager's random streams, which only the ATen op itself draws.
// detach is the exception: lowered, yet decomposed (to alias) for the partitioner's sake.
bool keeps_op_whole(const std::string& name, bool random, bool fallback_random);
// Ops outside core ATen's decomposition table that AOTAutograd should decompose for coil (with
// torch's own decompositions), by name without overload. Training-mode batch norm: whole, its
// normalized output is one of the op's results, which the min-cut partitioner can only save (it
// recomputes pointwise ops, not a multi-output op); decomposed into statistics and pointwise
// ops, the backward recomputes the normalization (and the activation after it) from the
// convolution's output it saves anyway, as under Inductor. resnet18_train saved 384.6 MB
// against Inductor's 341.7 (H200, 2026-12-02). max_pool2d_with_indices: into
// coil.max_pool2d_offsets (values, int8 window slots) and pointwise ops computing the indices from
// the slots (python/coil/decompositions.py), so the partitioner saves 1 byte an element, not 8;
// its backward into coil.max_pool2d_grad, which takes the input's sizes instead of the input.
std::vector<std::string> extra_decompositions();
// Whether a graph decomposes op `name` (one of extra_decompositions, without overload) for an
// input on `device` ("cpu", "cuda"), `low_precision` when it is bf16/f16: batch norm stays whole
// for 16-bit inputs on the CPU, where coil runs eager's kernel to match its numerics
// (lower_batch_norm_training).
bool decomposes_here(const std::string& name, const std::string& device, bool low_precision);
// Whether a node of `target` ("aten.mul.Tensor") is computed inside coil's own kernels (it has a
// lowering that is not a library call), so recomputing it in a backward graph costs no memory
// traffic of its own once fused: what the training-graph partitioner is told
// (python/coil/partition.py). Ops that run in ATen (fallbacks) or a library (mm, convolution) are
// cheaper saved than recomputed.
bool recomputes_in_kernels(const std::string& target);

// The state of lowering one graph.
class Lowering {
 public:
  Lowering(const graph::Graph& g, ir::Program& prog, LowerOptions options = {});
  const LowerOptions& options() const { return options_; }

  // Lowers every node and the outputs into the program.
  void run();

  // ---- argument access ----
  const graph::Graph& graph() const { return g_; }
  bool is_tensor(const graph::Arg& a) const;
  const TensorBox& box(const graph::Arg& a) const;
  const TensorBox& box_of(const graph::Node& n, size_t arg) const { return box(n.args.at(arg)); }
  // Positional arg i, else the kwarg named `name`, else nullptr.
  const graph::Arg* arg(const graph::Node& n, size_t i, const std::string& name) const;
  Operand operand(const graph::Arg& a) const;
  // A Python number argument as a constant of dtype d.
  Value scalar(const graph::Arg& a, DType d) const;
  Expr int_arg(const graph::Arg& a) const;
  std::vector<Expr> int_list(const graph::Arg& a) const;
  const graph::TensorMeta& meta(const graph::Node& n, size_t i = 0) const;

  // ---- building ----
  // Stores the box in a new buffer (strides: default_strides unless given) and returns a box
  // reading it.
  TensorBox realize(const TensorBox& box, const std::vector<Expr>* strides = nullptr,
                    bool fixed = false);
  // realize() for an extern call's argument: the same body stored with the same layout is
  // stored once, so a value several calls take (one attention mask for every layer's attention)
  // is computed and held once. Only for arguments: their buffers are never written again (only
  // graph inputs are mutated), where two graph outputs must not share storage. `created`, when
  // given, says whether a new buffer was made (false: an equal one already held the values).
  TensorBox realize_shared(const TensorBox& box, const std::vector<Expr>* strides = nullptr,
                           bool fixed = false, bool* created = nullptr);
  // The strides a stored box gets when none are asked for: channels-last for 4-D tensors of a
  // channels-last graph, contiguous otherwise.
  std::vector<Expr> default_strides(const std::vector<Expr>& sizes) const;
  // Adds a computed reduction buffer (contiguous over `ranges`) and returns a box reading it.
  TensorBox add_reduction(DType out_dtype, const std::string& device, std::vector<Expr> ranges,
                          std::vector<Expr> reduction_ranges, ir::ReductionType type, Value body,
                          std::set<std::string> origins);
  // Adds a scan buffer (contiguous over `ranges`): element i along ranges[dim] combines `body`
  // (over the v-vars, in the accumulation dtype) at positions 0..i of that dim, stored as
  // out_dtype. Returns a box reading it.
  TensorBox add_scan(DType out_dtype, const std::string& device, std::vector<Expr> ranges, int dim,
                     ir::ReductionType type, Value body, std::set<std::string> origins);
  // Adds a scatter: a copy of `base` (contiguous) that, for each point of `ranges` (v-vars),
  // combines `value` into the element at `position` (one index per dim of base, mentioning
  // indirect symbols). Returns a box reading the result.
  TensorBox add_scatter(const TensorBox& base, std::vector<Expr> ranges,
                        const std::vector<Expr>& position, Value value, ir::ScatterMode mode);
  // Adds an extern call; returns one box per output meta. `out_strides`, when given, is the
  // layout the library returns for a single output (else the graph's meta).
  // `arg_boxes` passes other tensors for some positional arguments (padded GEMM operands); the
  // outputs then follow n's meta as given.
  std::vector<TensorBox> add_extern(const graph::Node& n, bool is_fallback,
                                    const std::vector<Expr>* out_strides = nullptr,
                                    const std::map<size_t, TensorBox>* arg_boxes = nullptr);
  // Records why the last extern call was changed (ExternCall::decision).
  void note_extern_decision(const std::string& why) { prog_.externs.back().decision = why; }
  // copy_(dst, src) where dst is a graph input: an extern call (Tensor.copy_) that writes src into
  // the input after every other reader of the input has run. Returns {} when dst is not an input.
  std::vector<TensorBox> add_input_mutation(const graph::Node& n);
  // Whether the node makes or reads a tensor of an opaque dtype (graph::is_opaque): it runs in
  // ATen.
  bool touches_opaque_dtype(const graph::Node& n) const;
  // Whether the node makes or reads a tensor whose sizes depend on data (symbols that are not the
  // graph's backed size symbols): it runs in ATen.
  bool touches_unbacked_size(const graph::Node& n) const;
  // The wrapper variable holding the Python number node `id` produced (nullptr: not a number).
  const std::string* host_scalar(int id) const;
  // Replaces the value of a graph node (the same tensor, another layout) for later readers.
  void replace_value(const graph::Arg& a, TensorBox box);
  // For an argument that is a transpose, permute or reshape of a value coil computes (a
  // backward's t(grad) before grad itself reaches a product; a layer norm's [1, S, D] output
  // viewed [S, D] for the next product, whose residual add reads it too): stores that value,
  // laid out so that the view has `strides` (a reshape: as eager laid the value out, where the
  // view of that memory has them), makes the stored value and the view the nodes' values, and
  // returns the view. One buffer serves the view and the value's other readers, which no longer
  // compute it again from its inputs (keeping those alive). nullopt for other arguments
  // (extern_call.cpp).
  std::optional<TensorBox> store_under_view(const graph::Arg& a, const std::vector<Expr>& strides);
  // GPU graphs with reduced-precision 2-D convolutions keep 4-D tensors channels-last (NHWC):
  // cuDNN's fast convolutions take and return that layout (decided in run()).
  bool channels_last() const { return channels_last_; }
  // A box reading a buffer through a layout.
  TensorBox read_buffer(const std::string& name, const ir::Layout& layout) const;
  // The node being lowered (for origins).
  const graph::Node& current() const { return *current_; }

  // Realizes inputs of boxes that have grown too large (realize_policy), given the users count.
  void apply_realize_policy(TensorBox& box, int num_users);

 private:
  std::string new_buffer_name();
  void lower_node(const graph::Node& n);
  void lower_with_effects(const graph::Node& n);
  void lower_outputs(const graph::Node& out);
  // A node the graph returns is stored as eager lays it out as soon as it is lowered, and the
  // stored value becomes its value: readers load it instead of computing it again (outputs.cpp).
  void store_output_value(const graph::Node& n);
  // Whether the node reads a Python number another node produced.
  bool reads_host_scalar(const graph::Node& n) const;

  const graph::Graph& g_;
  ir::Program& prog_;
  LowerOptions options_;
  std::vector<std::vector<TensorBox>> values_;  // per graph node: one box per tensor output
  std::map<int, std::string> host_scalars_;     // graph node -> the wrapper variable of its number
  std::vector<int> user_count_;                 // per graph node: distinct nodes reading it
  // Per node of several results: each result's readers (the readers of its getitems); empty
  // where a node reads the results other than through getitem.
  std::map<int, std::vector<int>> result_users_;
  int users_of_result(const graph::Node& n, size_t i, size_t results) const;
  std::map<std::vector<const void*>, std::string> reductions_;  // reduction identity -> buffer
  std::map<std::vector<const void*>, std::string> realized_;    // stored box identity -> buffer
  const graph::Node* current_ = nullptr;
  bool channels_last_ = false;
  int next_buffer_ = 0;
};

// Lowers a graph into a program (the pipeline's "lower" step).
ir::Program lower_graph(const graph::Graph& g, const LowerOptions& options = {});

}  // namespace coil::lower
