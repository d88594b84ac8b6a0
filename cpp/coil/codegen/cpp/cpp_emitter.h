// The C++ kernel renderer's state and steps, shared by its files: cpp_kernel.cpp (loops, scalar
// values, stores), cpp_unrolled_loops.cpp (short loops unrolled inside the vector loop),
// cpp_reduction_loops.cpp (each stage's r loops and accumulators),
// cpp_vec_loops.cpp (the innermost loop in vector form), cpp_vec_gather.cpp (indirect loads in
// it) and cpp_row_cache.cpp (values loops over one row share). Internal to codegen/cpp; the
// interface is cpp_kernel.h.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/ir/fold.h"

namespace coil::codegen::cpp {

using graph::DType;
using ir::Op;
using ir::Value;
using sym::Expr;

// Kernels with less work than this run on one thread: starting OpenMP workers costs microseconds.
constexpr int64_t kParallelMinElements = 32768;
// Rows a column sum reads per pass over its row block (Emitter::column_unroll).
constexpr int64_t kColumnUnroll = 4;
// Elements of a float sum's outer r loop per chunk (chunk_steps): a multiple of every vector width.
constexpr int64_t kSumChunkElements = 4096;
// Innermost loops shorter than this stay scalar: a vector of 8 or 16 lanes would be mostly tail
// (the scheduler unrolls such loops inside a longer one where it can: sched::plan_short_loops).
constexpr int64_t kMinVectorTrip = sched::kCpuMinVectorTrip;

// Row groups (Emitter::row_group): a row-mode reduction kernel whose innermost x loop has this
// many times two points or more, a multiple of it, runs its loops over kRowGroup rows at once.
constexpr int64_t kRowGroup = 4;
// Row prefetch (Emitter::plan_row_prefetch): the rows one x step (a row group, or one row) reads
// from memory in its first loop are fetched during its later loops only while they take at most
// this many bytes: the next step's rows then fit in L2 beside the current ones.
constexpr int64_t kPrefetchMaxBytes = int64_t{256} << 10;
// Tile prefetch (Emitter::emit_tile_row_prefetches): how many rows of a tile ahead.
constexpr int64_t kTilePrefetchRows = 16;

// Streaming stores (Emitter::plan_stream_stores): a pointwise kernel in vector form that writes
// at least this many bytes writes its whole, aligned vectors around the caches. Its output cannot
// stay in any last-level cache for its reader, so nothing is lost; and each cache line is no
// longer read before it is overwritten. x.t() + y at 4096^2 float32 on 2 cores (2026-12-03, a
// standalone kernel): 11.3 -> 8.6 ms (copy of the same bytes 6.2 ms).
constexpr int64_t kStreamMinBytes = int64_t{32} << 20;
// Rows of a streaming kernel that is neither tiled nor flat are at least this long: a fence
// follows each row.
constexpr int64_t kStreamMinRow = 1024;
// A flat streaming kernel's parallel loop takes chunks of this many elements, each followed by
// a fence.
constexpr int64_t kStreamChunk = 65536;

// Thrown while rendering an innermost loop in vector form when a value varying along it has no
// vector form; the loop is then rendered scalar. `why` goes into the kernel's header.
struct NoVectorForm {
  std::string why;
};

// Thrown while rendering a kernel in row groups when a loop cannot be rendered so (a loop that
// stays scalar); the kernel is then rendered again one row at a time.
struct NoRowGroup {};

// A row cache (Emitter::plan_row_caches): the stage that computes the value, and the member of a
// later stage whose output elements hold it until that member overwrites them.
struct RowCache {
  int first_stage = 0;
  int home = -1;  // index into Kernel::members
};

// Renders one scheduled kernel (render_cpp_kernel).
// A term of a scatter's target index (cpp_scatter.cpp): a loop variable or indirect symbol, its
// coefficient, and its largest value minus its smallest.
struct ScatterTerm {
  Expr symbol;
  int64_t coefficient;
  int64_t span;
};

class Emitter {
 public:
  // row_group: the rows of a row group (1: one row at a time); see plan_row_group. lane_math:
  // at::vec is available to the kernel file (cpp_vectorize is not "off"): scalar code computes
  // inexact functions on one lane of it (lane_math_text).
  Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k, bool vectorize,
          int64_t min_trip, int64_t row_group = 1, bool lane_math = false)
      : prog_(prog),
        s_(s),
        k_(k),
        env_(k.range_env()),
        vectorize_(vectorize),
        min_trip_(min_trip),
        row_group_(row_group),
        lane_math_(lane_math) {}

  KernelSource render(const std::string& name);

 private:
  bool stored(const std::string& buf) const;

  void collect_args();

  std::string header_comment(const std::string& name) const;

  void line(const std::string& text) { *out_ << std::string(indent_ * 2, ' ') << text << "\n"; }

  std::string index_text(const std::string& buf, const Expr& idx);

  // v's index with each indirect symbol replaced by a temporary holding its checked position
  // (coil_index: wrapped, bounds-checked where the access happens, 0 when out of bounds).
  Expr checked_index(Value v);
  // Before a vector loop over `var` nested in other loops: each load whose indirect indices are
  // the same at every step of it (an embedding's row, x[idx] along a trailing dim) has them read
  // and checked once, here, not at every vector step (perf fuzzer seed 6036; cpp_vec_gather.cpp).
  // checked_index returns the hoisted position until the loop ends (hoisted_checked_.clear()).
  void hoist_lane_invariant_indices(const std::string& var);
  std::unordered_map<const ir::ScalarNode*, Expr> hoisted_checked_;

  // Emits statements computing v (already in kernel variables); returns the C++ expression.
  std::string value(Value root);

  // A special-function op's call (cpp_special.h), noting when it needs ATen's header.
  std::optional<std::string> special_text(Value v);

  // Scalar code's text of a function whose bits depend on its implementation (exp, tanh, pow:
  // ir::computes_inexactly), as at::vec computes it on one lane: the vector loops' own code, so a
  // value computed in a scalar loop and in a vector loop (of this kernel or another: a forward
  // and the backward that recomputes it) has the same bits. libm's or libmvec's would differ in
  // the last place, and a recomputed sin matched no element of its saved amin (fuzzer --train,
  // seed 90231: NaN gradients). nullopt for other ops, other types, or without lane_math_.
  std::optional<std::string> lane_math_text(Value v);

  // ---- the innermost loop in vector form (cpp_vec.h) ----
  // The loop being rendered in vector form: each iteration covers `count` consecutive values of
  // `var` (one per lane), starting at var.
  struct VecLoop {
    std::string var;
    Expr sym;
    std::string count;
    std::optional<DType> elem;  // the lanes' type (float32 or float64), from the first value
  };

  std::string vec() const;

  // Values of type d may vary along the vector loop: the lanes' type, or masks. bfloat16 and
  // float16 values ride in float32 lanes (exactly: each holds a value of its type), converted in
  // registers where they are loaded, stored or rounded.
  static bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }
  void lane_type(DType d);
  // c10's type of a 16-bit float, for at::vec's conversions.
  static std::string c10_half(DType d);

  bool is_vector(const std::string& text) const { return vec_names_.count(text) > 0; }

  bool mentions_loop_var(const Expr& e) const;

  // Whether v differs between the lanes of the vector loop.
  bool varies(Value v) const;

  // An operand of a vector op: a vector variable, or a value the same in every lane, broadcast.
  std::string vec_operand(const std::string& text, DType d) const;
  std::string vec_operand(Value a) const { return vec_operand(*lookup(a), a.dtype()); }

  // The step of idx between consecutive lanes, when it is the same for every lane.
  std::optional<Expr> lane_step(const Expr& idx) const;

  // A vector of buf's elements at idx, one per lane: one load where idx is contiguous along the
  // loop, else lane by lane.
  std::string lanes_read(const std::string& buf, const Expr& idx, DType d);

  // Tiled kernels (Kernel::tile): each read contiguous along the tile's outer loop xa rather than
  // its vector loop xb is transposed, a tile at a time, into a local buffer
  // (coil_transpose_tile in prelude.h: 8x8 or 16x16 float blocks in registers), so that both the
  // read of the input and the vector loop's read of the tile are contiguous. The buffers are
  // emitted here, before the xa loop.
  void transposed_tiles(const std::string& size_a, const std::string& size_b);

  void vector_value(Value v);

  // ---- gathers in vector form (cpp_vec_gather.cpp) ----
  // Integer values that vary along the vector loop (an index tensor's elements read along it,
  // and integer arithmetic on them) have no lanes of their own: each is a lane value, computed
  // per lane, in scalar code, inside the lane loop of each vector value that uses it as an
  // indirect index (gather_lanes, check_lanes), bounds-checked there as the scalar loop checks
  // it (coil_index). Any other use of one has no vector form (NoVectorForm: lane_value_why).
  // Whether v, which varies along the vector loop, is such a value.
  bool lane_value(Value v) const;
  bool is_lane_value(Value v) const { return lane_values_.count(v.get()) > 0; }
  // What the scalar form's header says when a lane value is used other than as an index: where
  // its integers come from (an index value, an int64 load, ...), as the scalar form said before
  // lane values (noted for each as it is found: lane_value_origin).
  std::string lane_value_why(Value v) const { return lane_values_.at(v.get()); }
  std::string lane_value_origin(Value v) const;
  // A Load whose indirect operands include lane values: a vector of its elements, each lane's
  // index computed and checked, and its element read, by a lambda over the lane
  // (coil_vlanes). Returns the vector's text.
  std::string gather_lanes(Value v);
  // A cast of an integer lane value to bool or a float type: the vector (a mask for bool) built
  // lane by lane, each lane's integer computed by a lambda (coil_vlanes, coil_vmask_lanes);
  // nullopt for any other value.
  std::optional<std::string> lanes_cast(Value v);
  // Names v's vector `text` (a new temporary), remembered as v's vector form; returns the name.
  std::string bind_vector(Value v, const std::string& text);
  // A comparison of integer index values (a causal mask's q >= kv, built from aranges), at
  // least one varying along the loop: the exact integers they stand for (index_value_expr) as
  // floating lanes (at::vec's arange), compared into a mask; nullopt when an operand is not such
  // an integer or its values are not all exact in the lane type (cpp_vec_gather.cpp).
  std::optional<std::string> index_comparison(Value v);
  std::optional<Expr> index_value_expr(Value v) const;
  std::optional<Expr> index_value_expr_unchecked(Value v) const;
  std::optional<std::string> index_lanes(Value v);
  // A Guard whose indirect operands include lane values: each lane's indices checked.
  void check_lanes(Value v);
  // Emits a lambda `[&](int64_t var) { ... }` (var: the vector loop's variable, one lane's
  // value) whose body f renders in scalar form; returns the lambda's name.
  std::string lane_lambda(const std::function<void()>& f);

  void vector_store(const ir::Buffer& b, const Expr& idx, const std::string& val);

  // What rendering a loop changes, restored when its vector form is abandoned.
  struct Snapshot {
    std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo;
    std::map<std::string, std::string> available;
    std::set<std::string> vec_names;
    sym::RangeEnv env;
    int next_tmp, indent;
    bool aten_math;
    size_t decisions;  // vec_decisions_ said so far (a failed attempt's are taken back)
  };
  Snapshot snapshot() const;
  void restore(const Snapshot& s);

  // Renders a loop nest through render(vector) in vector form over the innermost loop `var`, or,
  // where some value has no vector form, scalar; the choice goes into the kernel's header.
  void with_vector_attempt(const std::string& var, bool allowed, const std::string& not_allowed,
                           const std::function<void(bool)>& render);

  // The vector loop over vec_->var in [begin, end): whole vectors, where the lane count is a
  // constant (so at::vec's masked loads, stores and blends fold to plain ones), then one masked
  // vector for the tail. The body is rendered first (its values fix the lanes' type) and emitted
  // in both.
  // chunk > 0: the whole vectors go in chunks of that many elements (the pragma's parallel loop
  // is over chunks), each followed by coil_stream_fence (streaming stores).
  void vector_loop(const std::string& begin, const std::string& end, const std::string& pragma,
                   const std::function<void()>& body, int64_t chunk = 0);

  const std::string* lookup(Value v) const;

  // (Within a piece of a split loop, folded where the piece's range decides it: ir/fold.h.)
  Value kernel_body(const sched::Member& m) const {
    Value body = ir::substitute_indices(prog_.buffers[m.buffer].body, member_map(m));
    return fold_pieces_ ? ir::fold_in_ranges(body, env_) : body;
  }
  // m's variables over the kernel's, with the point of the unrolled loops being rendered
  // substituted (unrolled_at_).
  sym::ExprMap member_map(const sched::Member& m) const;
  // Unrolled short loops (Kernel::unrolled): the pointwise body rendered once per point of the
  // trailing loops, inside the loop over x[vector_dim()]; values that do not depend on those
  // loops are shared between the copies (the memo), each copy's per-buffer variables carry the
  // suffix _u<point>.
  size_t vector_dim() const { return k_.xsizes.size() - 1 - static_cast<size_t>(k_.unrolled); }
  void each_unrolled_point(const std::function<void()>& f);
  // The unrolled loops' variables at point p (row-major over them).
  sym::ExprMap unrolled_point(int64_t p) const;
  // Vector form: the buffers whose copies' stores interleave (copy p writes element p of each run
  // of `points`, its lanes `points` apart) -> copy 0's index. Each copy stores its vector into a
  // stage, whole; after the last one the stage goes out in one contiguous run (coil_interleave),
  // as Inductor's transposed stores do: a channels-last copy with 3 channels stored lane by lane
  // took 1.45x Inductor's time (seed 5032, one thread).
  void plan_interleaved_stores(int64_t points);
  // Loop partitioning: where a pointwise kernel's innermost loop is split into pieces on each of
  // which every comparison of index values along it is constant (a concatenation's pieces, a
  // pad's border), ir::index_breakpoints's points; empty when the loop stays whole.
  std::vector<int64_t> inner_pieces() const;

  // A scatter combines its value into the element its target names.
  void scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& val);
  // The same for a vector of lanes whose targets are distinct and contiguous
  // (scatter_lanes_distinct): a vector store, or a vector read, add and store (cpp_scatter.cpp).
  void vector_scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& val);

  static DType opmath(DType d) {
    return d == DType::BFloat16 || d == DType::Float16 ? DType::Float32 : d;
  }

  const ir::Buffer* scatter() const;

  // Scatter-adds of types `omp atomic` handles run in parallel; other scatters that combine values
  // run serially (no two updates of one element may interleave).
  bool atomic_scatter() const;
  // The loop whose points partition the scatter's targets (cpp_scatter.cpp), if any: its points
  // then run on threads of their own, updating without atomics.
  std::optional<size_t> scatter_owner() const;
  std::optional<size_t> find_scatter_owner() const;
  // The scatter target's terms, sorted by coefficient, when they form a mixed-radix number.
  std::optional<std::vector<ScatterTerm>> scatter_terms() const;
  // Whether the innermost loop moves the target by 1 with a term of its own, in a scatter that
  // stores or whose updates a loop owns: a vector of its lanes updates distinct, contiguous
  // elements (scatter_store in vector form).
  bool scatter_lanes_distinct() const;
  mutable std::optional<std::optional<size_t>> owned_scatter_;

  void store(const ir::Buffer& b, const sched::Member& m, const std::string& val);

  // Column mode (Kernel::column_block): the last x dim runs innermost in blocks, so per-x-point
  // values are arrays indexed by the lane xi, and each x point's code sits in a `for (xi ...)`
  // loop.
  bool column() const { return k_.column_block > 0; }
  // A column kernel with one block of x points (and no other x loop) has nothing to run in
  // parallel across x: where its reductions are all sums, its r loops split across threads
  // instead (an OpenMP array reduction of the block's accumulators). `x.sum(0)` of a [2^20, 16]
  // tensor otherwise ran on one core.
  bool split_columns() const;
  bool column_unroll(const sched::Stage& stage) const;
  // Chunked summation: a float sum adds its elements one after another into each accumulator (a
  // lane, in vector and column form), so over n elements its error grows with n; eager's and
  // Inductor's CPU sums are cascaded instead, and coil's sums of 2^20 rows were 10-100x less
  // accurate than eager's (failing torch's default assert_close against it). The outer r loop
  // runs in chunks (kSumChunkElements elements shared by a vector accumulator's lanes, an eighth
  // of that for a scalar one); each chunk sums into accumulators of its own, added into the
  // totals at its end: error ~ chunk + n / chunk.
  // Returns the chunk length in steps of the outer r loop (0: not chunked) and the sums it
  // applies to.
  int64_t chunk_steps(const std::vector<const sched::Member*>& reductions, bool vector,
                      std::vector<const sched::Member*>& chunked) const;
  std::string last_x() const { return "x" + std::to_string(k_.xsizes.size() - 1); }
  std::string lane(const std::string& v) const { return column() ? v + "[xi]" : v; }

  void open_lanes(bool simd, const std::string& begin = "0", const std::string& end = "xn");
  // Column mode: f between open_lanes and close_lanes, in one lane loop per piece where
  // comparisons of index values along x change (inner_pieces), each piece's body folded.
  void lane_pieces(const std::function<void()>& f);
  // f(begin, end) for each piece of the innermost x loop between cuts, with env_ narrowed to the
  // piece and kernel_body folding over it; and the kernel header's line saying where it split.
  void each_piece(const std::vector<int64_t>& cuts, const std::function<void(int64_t, int64_t)>& f);
  void say_split(const std::string& what, const std::vector<int64_t>& cuts);

  void close_lanes();
  // Column mode: f inside the lanes [begin, end) of the block: a scalar loop over the slot xi
  // (open_lanes), or, while the kernel renders in vector form (lanes_vec_), a vector loop over
  // the x variable itself, each step a vector of lanes starting at slot xi.
  void lanes(bool simd, const std::string& begin, const std::string& end,
             const std::function<void()>& f);
  // Vector column mode: a vector of the lanes' elements of a per-lane array (an accumulator
  // acc_<buf>, or a per-x-point value's slot v_<buf>) of type d, from slot xi.
  std::string read_lanes(const std::string& array, DType d);
  // Vector column mode: the vector `val` into buffer b's per-lane slots (v_<buf>, from xi on),
  // which later loops over the lanes read (read_lanes) as b's value.
  void write_slot(const ir::Buffer& b, const std::string& val);

  // Computes a pointwise member; outer-level values in column mode go to their lane's slot.
  void emit_pointwise(const sched::Member& m);

  // " reduction(op:acc, ...)" clauses for a loop whose reductions all have a SIMD form (sums,
  // and max/min through the prelude's NaN-propagating declared reductions); "" when one has
  // none (products, any/all, arg-reductions, Welford): that loop stays scalar.
  std::string simd_reduction_clauses(const std::vector<const sched::Member*>& reductions) const;

  static bool is_arg_reduction(const ir::Buffer& b) {
    return *b.reduction == ir::ReductionType::ArgMax || *b.reduction == ir::ReductionType::ArgMin;
  }

  void render_stage(const sched::Stage& stage);

  // The r loops of a stage with their accumulators (vectors of them when `vector`: the innermost
  // r loop runs in vector form), and the results they leave for each x point.
  void render_reduction_loops(const sched::Stage& stage, bool vector);

  // Values of a stage's members that are the same at every step of its r loops (they read only
  // the x point's earlier results, constants and indices of x), computed once per x point
  // before the loops: a layer norm's rsqrt(var + eps) was computed at every step, and where
  // its formula branches (a NaN-propagating max) the compiler kept it in the loop.
  void hoist_row_invariants(const sched::Stage& stage);
  // The same in column form: each such value of an x point is computed once per block of
  // lanes, into a per-lane array (column_hoisted_) that the loops over r read (log_softmax over
  // dim 1 computed log(sum) at every step: a vector log per element).
  void hoist_column_invariants(const sched::Stage& stage);
  // Whether a load from memory with an index free of r may be read once before the r loops.
  bool hoistable_read(Value v) const;
  // Whether v is the same at every step of the loops over `vars` (memoized in `known`): made of
  // constants, indices free of them, reads that hoistable_read allows at indices free of them,
  // and (point_results) this x point's results of earlier loops.
  bool invariant_along(Value v, const std::vector<Expr>& vars, bool point_results,
                       std::unordered_map<const ir::ScalarNode*, bool>& known) const;
  std::vector<Expr> r_vars() const;
  // The largest values of a stage's members that are the same along its r loops and `wanted`,
  // not yet computed here: what hoist_row_invariants and hoist_column_invariants compute first.
  std::vector<Value> row_invariant_roots(const sched::Stage& stage,
                                         const std::function<bool(Value)>& wanted);

  // One step of a scalar reduction: the accumulator takes the member's value `val`.
  void accumulate(const sched::Member& m, const std::string& val);
  // Arg-reductions: the position of this step's element (arg_position), and whether the vector
  // form (coil_varg_step in prelude.h: int32 positions beside float32 lanes) applies to b.
  std::string arg_position(const sched::Member& m);
  bool vector_arg_reduction(const ir::Buffer& b) const;
  // Vector column mode: an arg-reduction's results, lane by lane (int64 positions).
  void column_arg_results(const ir::Buffer& b, const sched::Member& m);
  static bool arg_is_max(const ir::Buffer& b) { return *b.reduction == ir::ReductionType::ArgMax; }

  std::string loop_header(const std::string& var, const std::string& begin, const std::string& end,
                          const std::string& step = "1") {
    std::string inc = step == "1" ? "++" + var : var + " += " + step;
    return "for (int64_t " + var + " = " + begin + "; " + var + " < " + end + "; " + inc + ") {";
  }

  void render_loops();
  // A scan kernel's loops (sched::Kernel::scan; cpp_scan.cpp).
  void render_scan();

  // Whether this pointwise kernel streams its vector stores (kStreamMinBytes): vector form
  // allowed, no scatter, no function such as exp or erf bounding it (ir::computes_inexactly),
  // rows long enough to fence after each (tiled and flat kernels fence per tile and per chunk
  // instead). Stores that are not whole contiguous float32/float64 vectors
  // stay ordinary. cpp_vectorize="on" streams every pointwise kernel in vector form.
  bool plan_stream_stores(bool tiled) const;

  // ---- row groups ----
  // Memory-bound row reductions on CPUs read their rows faster several at a time: a thread
  // streaming one row at a time leaves the memory system idle between its page-sized runs (a
  // sum over the rows of 4096x4096 float32 on 2 cores, 2026-12-03, a standalone kernel: 2.8 ms
  // one row per pass, 1.6 ms four rows, 1.7 ms with rows of 1024). A kernel in row groups steps
  // its innermost x loop by kRowGroup points (xg); each loop over the row computes every point
  // of the group in turn at each step (a replica per point: its own x variable x<i>_g<k>, its own
  // accumulators and per-point variables named with the suffix _g<k>, its own memo and
  // available values), so kRowGroup row streams are in flight.
  // Whether this kernel runs in row groups (sets rows_).
  bool plan_row_group();
  // The name suffix of the replica being rendered ("" outside row groups).
  std::string sfx() const { return (rows_ > 1 ? "_g" + std::to_string(row_) : "") + unrolled_sfx_; }
  // Renders f once per replica, each with its own state.
  void each_row(const std::function<void()>& f);
  void set_row(int g);

  // ---- row prefetch (cpp_row_prefetch.cpp) ----
  // A row reduction reads its rows from memory in its first loop over them and from cache in the
  // later ones: while those compute, no read of the next rows is in flight, and the memory system
  // waits on the cores as the cores wait on it in the first loop. The later loops fetch the next
  // step's rows (the next row group's, or the next row's) into cache, spread across them, one
  // prefetch per vector step of each of that step's rows. LayerNorm 16384x1024 float32 on 2
  // cores (2026-12-03, a standalone kernel, copy of the same bytes 6.3 ms): 7.3 ms without, 6.8
  // all in the last loop, 6.5-6.6 half in each of the two later loops; both loops fetching every
  // row was slower (9.0: twice the prefetches).
  struct RowPrefetch {
    std::string buffer;
    Expr index;  // the read's index, the x variable moved one step ahead
    int row;     // the replica whose next row it is (0 outside row groups)
    int stage;   // the stage whose vector loop fetches it
  };
  void plan_row_prefetch();
  // The prefetches of the stage being rendered: at the top of its vector loop's body.
  void emit_row_prefetches();
  std::vector<std::string> row_prefetch_decisions() const;  // for the kernel's header
  // Tiled kernels: each row of a tile reads a short run (the tile's width) of every operand
  // that is not transposed, rows a whole row of the tensor apart; the hardware's stream
  // prefetchers do not follow them. Each row fetches the runs kTilePrefetchRows rows ahead.
  // x.t() + y at 4096^2 float32 on 2 cores (2026-12-03, a standalone kernel, interleaved with a
  // copy): 10.8-11.2 -> 9.8-10.0 ms (8, 32 and 64 rows ahead: less; a non-temporal hint: slower).
  void emit_tile_row_prefetches();
  std::string tile_prefetch_decision_;

  // ---- row caches (cpp_row_cache.cpp) ----
  // A value the inner loops of one x point compute in one stage and again in a later one
  // (softmax's exp(x - max): summed in the second loop, scaled in the third) is computed once:
  // the first stage stores it where the later stage's output goes (the same element, the same
  // type), and the later stage reads it back there before writing its own value over it.
  void plan_row_caches();
  std::vector<std::string> row_cache_decisions() const;  // for the kernel's header
  // Whether `operand` (the buffer an in-place output replaces) is read where v, kept in that
  // output from stage `first` on, is already stored over it.
  bool operand_read_after_fill(const std::string& operand, Value v, int first) const;
  // The cache `v` is read from in the stage being rendered, or null.
  const RowCache* cached_in_stage(Value v) const;
  // After computing v (its C++ expression `text`): stores it into its cache in the first stage.
  void fill_row_cache(Value v, const std::string& text);
  // Reads v from its cache (a later stage), into the memo.
  void read_row_cache(Value v, const RowCache& c);
  // The values to compute for root, operands first (value()): without those already computed here
  // or needed only by a value read from a row cache.
  std::vector<Value> render_order(Value root) const;

  const ir::Program& prog_;
  const sched::Schedule& s_;
  const sched::Kernel& k_;
  sym::RangeEnv env_;
  std::ostringstream* out_ = nullptr;
  int indent_ = 1;
  int next_tmp_ = 0;
  bool aten_math_ = false;
  std::vector<KernelArg> args_;
  std::map<std::string, std::string> ptr_;
  std::map<std::string, std::string> available_;  // buffer -> variable holding its value here
  // Values a column stage computed before its r loops (hoist_column_invariants), each in a
  // per-lane array of floats (16-bit values widened) or of its own type.
  std::unordered_map<const ir::ScalarNode*, std::string> column_hoisted_;
  std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo_;
  // Vector form (cpp_vec.h): allowed at all, the loop being rendered in it, the variables
  // holding vectors, and what was decided for each innermost loop.
  bool vectorize_;
  int64_t min_trip_;  // innermost loops shorter than this stay scalar
  std::optional<VecLoop> vec_;
  std::set<std::string> vec_names_;
  // Vectors that are another rounded to a 16-bit type (coil_vround): name -> (the unrounded
  // vector's text, the type). A store of that type narrows the unrounded vector: rounding to
  // nearest even twice gives the same bits, and the round trip through 16 bits costs as much as
  // a bf16 relu's other work.
  std::map<std::string, std::pair<std::string, DType>> rounded_;
  // Vectors that are 16-bit elements loaded and widened, nothing more: name -> (the address of
  // the first element, the type). A contiguous store of that type copies the 16-bit elements
  // (coil_vcopy_half) instead of narrowing the floats again: an embedding's bf16 rows took 1.9x
  // Inductor's time (perf fuzzer seed 6026). lanes_read leaves the address of each such load in
  // half_load_src_.
  std::map<std::string, std::pair<std::string, DType>> half_loads_;
  std::string half_load_src_;
  std::string vec_last_type_;
  std::vector<std::string> vec_decisions_;
  // Lane values of the vector loop being rendered (lane_value), and whether it gathered through
  // them or only checked them (a guard).
  std::map<const ir::ScalarNode*, std::string> lane_values_;  // -> lane_value_why
  bool vec_gathers_ = false, vec_lane_checks_ = false;
  bool vectorized_ = false;
  bool stream_ = false;  // plan_stream_stores
  // Transposed tiles of the tile being rendered: read (buffer@index) -> index into the tile, and
  // the tile's name.
  std::map<std::string, std::string> tiles_, tile_names_;
  std::unordered_map<const ir::ScalarNode*, RowCache> row_caches_;
  bool fold_pieces_ = false;  // rendering one piece of a split loop (kernel_body folds)
  bool lanes_split_said_ = false;
  // Column kernels in vector form: the lane loops are vector loops (see lanes()); slots_ holds
  // the buffers whose per-x-point values live in per-lane slots (v_<buf>[xi]), read as vectors.
  bool lanes_vec_ = false;
  std::set<std::string> slots_;
  std::vector<RowPrefetch> prefetches_;
  int stage_ = -1;  // the stage being rendered (index into k_.stages)
  // Row groups: the rows asked for, the rows of this kernel's groups (1: none), the replica
  // being rendered, the memo level of an x point's values, each replica's memo at that level and
  // available values while another is rendered, and the renaming of the x variable to the
  // replica's (applied where indices are printed).
  int64_t row_group_ = 1;
  bool lane_math_ = false;
  bool vec_math_ = false;  // lane_math_text was used (KernelSource::vec_math)
  int64_t rows_ = 1;
  int row_ = 0;
  size_t row_memo_ = 0;
  struct RowState {
    std::unordered_map<const ir::ScalarNode*, std::string> memo;
    std::map<std::string, std::string> available;
  };
  std::vector<RowState> row_states_;
  sym::ExprMap row_rename_;
  // The point of the unrolled loops being rendered (each_unrolled_point): their variables'
  // values, and the suffix of the copy's names.
  sym::ExprMap unrolled_at_;
  std::string unrolled_sfx_;
  int64_t unrolled_p_ = 0, unrolled_points_ = 1;
  std::map<std::string, Expr> interleaved_;
};

}  // namespace coil::codegen::cpp
