// The Triton kernel renderer's state and steps, shared by its files: triton_kernel.cpp (setup,
// arguments, index expressions, the signature's prologue and header comment), triton_values.cpp
// (each scalar value as a line of Triton, loads, indirect indices) and triton_stages.cpp (stores,
// scatters, reductions, stages). Internal to codegen/triton; the interface is triton_kernel.h.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coil/codegen/kernel_args.h"
#include "coil/codegen/triton/triton_index_printer.h"
#include "coil/codegen/triton/triton_kernel.h"
#include "coil/codegen/triton/triton_launch.h"

namespace coil::codegen::triton {

using graph::DType;
using ir::Op;
using ir::Value;
using sym::Expr;

// Index arithmetic is int32 when every index, plus a block's overrun, stays below this.
constexpr int64_t kInt32Limit = int64_t{1} << 31;
// Masked lanes of an argmax/argmin carry this index so that a real element always wins a tie.
constexpr const char* kNoIndex = "2147483647";

// A value spans block axis 0 (rows: x of a reduction, y of a tiled kernel), axis 1 (columns: r
// of a reduction, x of a tiled kernel), both or none.
enum Dims : int { kNone = 0, kRows = 1, kCols = 2 };

// ---- the renderer ----

// One axis of a kernel's block: its variables (named prefix0, prefix1, ...), their sizes, and the
// flat index over them (prefix + "index").
struct Axis {
  std::string prefix;
  std::vector<Expr> vars;
  std::vector<Expr> sizes;
  Expr flat;
};

// Renders one scheduled kernel (render_triton_kernel).
class Emitter {
 public:
  Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k, bool gpu_form);

  KernelSource render(const std::string& name);

 private:
  struct Available {
    std::string var;
    int dims = kNone;
    Expr index;          // where the producer wrote it (kernel variables)
    bool check = false;  // a reader must load at exactly that index to use the register value
  };

  // Defined in triton_kernel.cpp, except where a section names another file.

  // ---- arguments (as in the C++ renderer: in_ptrN read, out_ptrN written, in-place shares) ----
  bool stored(const std::string& buf) const;
  const sched::Member* member_of(const std::string& buf) const;
  void collect_args();

  // ---- index arithmetic ----
  std::vector<Expr> all_indices() const;
  bool is_size_symbol(const Expr& v) const;
  bool needs_int64();
  Expr merge_contiguous(const Expr& e, const std::vector<Expr>& vars,
                        const std::vector<Expr>& sizes, const Expr& flat) const;
  int dims_of(const Expr& e) const;
  std::string index_text(const Expr& e, int* dims = nullptr);
  std::string var_definition(size_t i, const std::vector<Expr>& sizes, const Expr& flat);
  std::string block(const Axis& a) const;
  std::string shape(int dims) const;
  bool masked(const Axis& a) const;
  std::string block_mask(int dims) const;

  // ---- the signature's prologue and the header comment ----
  std::string prologue();
  std::string header_comment(const std::string& name) const;

  // ---- values (triton_values.cpp) ----
  void line(const std::string& text) { *out_ << std::string(indent_ * 4, ' ') << text << "\n"; }

  Value kernel_body(const sched::Member& m) const {
    return ir::substitute_indices(prog_.buffers[m.buffer].body, m.var_map);
  }

  const std::string* lookup(Value v) const;
  int dims(Value v) const;
  std::string operand(Value v, bool literal_ok) const;
  static bool literal_friendly(Op op, DType d);

  // ---- indirect indices (see ir/scalar.h) ----
  Expr checked_index(Value v);
  std::string load_text(Value v, int* out_dims);
  std::string value(Value root);
  void mark_exact_divisions(const std::vector<Value>& order);

  // ---- members and stages (triton_stages.cpp) ----
  void scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& var,
                     int value_dims);
  void store(const ir::Buffer& b, const sched::Member& m, const std::string& var, int value_dims);
  void finish_member(const ir::Buffer& b, const sched::Member& m, const std::string& val,
                     DType val_dtype, int d, bool check);
  void emit_pointwise(const sched::Member& m);

  static bool is_arg(ir::ReductionType t) {
    return t == ir::ReductionType::ArgMax || t == ir::ReductionType::ArgMin;
  }

  std::string full_block(const std::string& v, Value value);
  std::string arg_position(const sched::Member& m);

  std::string index_dtype() const { return int64_ ? "tl.int64" : "tl.int32"; }
  void emit_reduction_step(const sched::Member& m);
  // A scan member (ir::Buffer::scan) inside its loop over r: the block row scanned, plus the
  // carry of the earlier blocks (looped) or the whole row at once (persistent).
  void emit_scan_step(const sched::Member& m);

  struct PendingResult {
    const sched::Member* member;
    std::string text;  // the [XBLOCK, 1] result
    DType dtype;
  };

  void render_stage(const sched::Stage& stage, int index);
  void emit_stage_text(const sched::Stage& stage, int index, const std::string& text, int indent);

  const ir::Program& prog_;
  const sched::Schedule& s_;
  sched::Kernel k_;  // a copy: tiled kernels rename their variables
  sym::RangeEnv env_;
  triton::IndexPrinter printer_;
  LaunchPlan plan_;
  bool reduction_ = false;
  bool int64_ = false;
  // CPU tensors (and no gpu_form): the kernel runs under Triton's interpreter, which needs its
  // own forms of bfloat16 rounding, 16-bit constants and a constexpr rnumel.
  bool interpreted_ = false;
  // Block axis 0 (rows) and 1 (columns): x and r for reductions, y and x for tiled kernels; a
  // flat pointwise kernel has only rows (x).
  Axis rows_, cols_;
  bool two_d_ = false;
  std::ostringstream* out_ = nullptr;
  int indent_ = 1;
  int next_tmp_ = 0;
  bool stage_needs_barrier_ = false;
  std::vector<KernelArg> args_;
  std::map<std::string, std::string> ptr_;
  std::map<std::string, Available> available_;
  std::set<std::string> used_;  // x/r variables (and xindex/rindex) that printed indices mention
  std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo_;
  std::unordered_map<const ir::ScalarNode*, int> dims_;
  std::unordered_set<const ir::ScalarNode*> exact_divs_;  // see mark_exact_divisions
  std::map<std::string, int> checked_dims_;  // checked indirect index temporary -> its dims
  std::vector<std::string> size_args_;       // size symbols the kernel takes (dynamic shapes)
  std::vector<PendingResult> pending_results_;
};

}  // namespace coil::codegen::triton
