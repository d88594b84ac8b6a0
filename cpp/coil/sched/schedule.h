// sched::Schedule — what runs, in which kernel, in which order, and where buffers live.
//
// The scheduler takes an ir::Program and produces kernels (groups of computed buffers that run in
// one loop nest), the order of kernel launches and extern calls, and a memory plan. Every
// decision carries its reason so that fusion.txt and schedule.txt can say why each kernel looks
// the way it does.
//
// A kernel iterates over x0..x{n-1} (parallel, "outer") and, for reductions, r0..r{m-1}
// ("inner"). Each member buffer maps its own index variables (v/u) to expressions over the
// kernel's; members run in topological order, grouped into stages: an inner stage is one loop
// over the r variables, an outer stage runs once per x point.
//
// Passes (one file each): deps.cpp (reads/writes, the dependencies between units), fusion.cpp
// (greedy fusion with verdicts), loop_order.cpp (loop order of pointwise kernels),
// split_reduction.cpp (GPU: few-row reductions in two passes), short_loops.cpp (CPU: short
// innermost loops merged or unrolled), memory_plan.cpp (stages, stored vs
// local buffers, frees, reuse). Entry point: schedule_program (scheduler.cpp).
//
// Tests: tests/cpp/sched/.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coil/ir/program.h"

namespace coil::sched {

using sym::Expr;

Expr xvar(int i);  // x{i}
Expr rvar(int j);  // r{j}

// A read or write of a buffer at an element index (MemoryDep), or of the whole buffer (StarDep:
// extern calls, the copy a scatter starts from), in the index variables of whoever does the
// access. An indirect access's index depends on data (it mentions indirect symbols): it never
// counts as reading one particular element, so it blocks fusion with the buffer's producer and
// writing in place over the buffer.
struct Access {
  std::string buffer;
  Expr index;
  bool whole = false;
  bool indirect = false;
};

struct Member {
  int buffer = -1;       // index into Program::buffers
  sym::ExprMap var_map;  // v_i / u_j -> expressions over the kernel's x/r variables
  bool inner = false;    // runs inside the r loop (reductions, and pointwise over x*r)
  int stage = -1;        // filled by the memory plan
};

struct Stage {
  bool inner = false;
  std::vector<int> members;  // indices into Kernel::members
};

struct Kernel {
  int id = -1;
  std::vector<Expr> xsizes;
  std::vector<Expr> rsizes;
  std::vector<Member> members;  // topological (program) order
  std::vector<Stage> stages;
  std::vector<std::string> decisions;  // why the kernel looks the way it does
  // Loop strategies (choose_loop_order), for the CPU renderer:
  int64_t column_block =
      0;  // > 0: reductions run with the last x dim innermost, this many at a time
  // > 0: pointwise: the two innermost x dims are tiled, tile_rows points of x[n-2] (the
  // direction a transposed read is contiguous in) by tile points of x[n-1] (the vector loop).
  int64_t tile = 0;
  int64_t tile_rows = 0;
  // > 0: pointwise: this many trailing x dims, each shorter than a vector, are unrolled: the body
  // is rendered once per point of them inside the loop over x[n-1-unrolled], the vector loop
  // (plan_short_loops).
  int unrolled = 0;
  // A scan kernel (its one member an ir::Buffer scan): x over the buffer's other dims, r0 along
  // the scan, each step storing the running combine. scan_column: the scan dim is not the
  // innermost of the output's layout, whose x dims after it are contiguous: the renderers put
  // those x points side by side (C++: the inner x loops innermost, each step of r0 combining the
  // row stored before; Triton: [XBLOCK, RBLOCK] blocks with configs for a strided r, never
  // persistent).
  bool scan = false;
  bool scan_column = false;
  // GPU (Triton) kernels whose reduction rows fit a block (persistent_on_gpu): each row stays in
  // registers across the kernel's stages, so an inner value a later stage reads needs no buffer.
  bool rows_in_registers = false;

  bool has_reduction() const { return !rsizes.empty(); }
  sym::RangeEnv range_env() const;
};

// One step of the program: a kernel launch or an extern call.
struct Step {
  enum class Kind { Kernel, Extern };
  Kind kind;
  int index;  // Schedule::kernels or Program::externs
};

struct FusionVerdict {
  int round = 0;
  std::string first, second;  // buffer lists of the two kernels
  bool fused = false;
  std::string reason;
};

struct BufferPlan {
  bool stored = true;     // false: lives only in registers inside its kernel
  int alloc_step = -1;    // the step before which it is allocated (-1: input)
  int free_step = -1;     // the step after which it is freed (-1: never: input or output)
  std::string reuses;     // the freed buffer whose memory it takes, if any
  bool in_place = false;  // reuses a buffer its own kernel reads last, at the same index
};

struct Schedule {
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  std::string order_note;  // which launch order was taken and why (launch_order.cpp)
  std::vector<FusionVerdict> verdicts;
  std::map<std::string, BufferPlan> buffers;  // every non-input buffer that is kept
  // Graph inputs that are not outputs -> the step after which the wrapper drops its reference
  // (a backward graph's saved activations then free as soon as they are read for the last time,
  // where nothing else holds them).
  std::map<std::string, int> input_last_use;
  std::vector<std::string> removed;  // dead buffers dropped before fusion

  std::string fusion_text(const ir::Program& prog) const;       // fusion.txt
  std::string schedule_text(const ir::Program& prog) const;     // schedule.txt
  std::string post_fusion_text(const ir::Program& prog) const;  // ir_post_fusion.txt
};

// ---- passes ----
std::vector<Access> buffer_reads(const ir::Buffer& b);  // in the buffer's v/u variables
bool is_scatter_kernel(const ir::Program& prog, const Kernel& k);
// The kernel of scan buffer `b` (Program::buffers[index]): see Kernel::scan.
Kernel scan_kernel(const ir::Program& prog, int index);
// How far `index` moves for one step of vars[ix] and one of vars[ir] (split_reduction.cpp): its
// affine coefficients, or, where a modulo or division makes it piecewise, the steps from the
// origin. nullopt where another symbol (a size) or a symbolic coefficient is involved.
std::optional<std::pair<int64_t, int64_t>> index_steps(const Expr& index,
                                                       const std::vector<Expr>& vars, size_t ix,
                                                       size_t ir);

// The dependencies between units (kernels 0..K-1, then extern calls K..): a unit runs after the
// units whose buffers it reads; a call that mutates a buffer after the buffer's other readers;
// calls after those that make the Python numbers they read; calls with side effects, ATen
// fallbacks and random draws in the graph's order among themselves. Fusion refuses a merge that
// a path through other units of this graph joins (it would be a cycle), and plan_memory orders
// it, so the two agree on what depends on what (deps.cpp).
struct UnitGraph {
  size_t nunits = 0;
  std::vector<std::set<int>> preds, succs;
  std::vector<std::set<int>> reads;  // buffers (Program::buffers indices) each unit reads
  std::vector<int> unit_of;          // per buffer: the unit that makes it (-1: a graph input)
  std::vector<int> first_buffer;     // per unit: its first buffer in program order (-1: none)
};
UnitGraph unit_graph(const ir::Program& prog, const std::vector<Kernel>& kernels);
// A unit as fusion.txt and errors name it: "{buf3,buf4}" (a kernel's members) or
// "extern aten.mm.default (mm_2)" (the op and its graph node).
std::string unit_name(const ir::Program& prog, const std::vector<Kernel>& kernels, int unit);

void remove_dead_buffers(ir::Program& prog, Schedule& s);
// Extern calls listed as able to write an operand in place ("_coil_may_write") do so where
// nothing else reads it (in_place_calls.cpp).
void grant_in_place_writes(ir::Program& prog);
void fuse(const ir::Program& prog, Schedule& s);
void choose_loop_order(const ir::Program& prog, Schedule& s);  // also picks CPU loop strategies
void order_loops(const ir::Program& prog, Kernel& k);
// CPU loops shorter than this stay scalar: a vector of 8 or 16 lanes would be mostly tail.
inline constexpr int64_t kCpuMinVectorTrip = 8;
// CPU pointwise kernels whose innermost loop is shorter than kCpuMinVectorTrip: loops that every
// index sees as one are merged, and short trailing loops are unrolled inside a longer vector loop
// (short_loops.cpp).
void plan_short_loops(const ir::Program& prog, Kernel& k);
// Merges adjacent x loops of k that every index of it sees as one loop (the outer coefficient is
// the inner one times the inner size in every load, store and index value); returns the sizes
// before, or nullopt when nothing merged (short_loops.cpp).
std::optional<std::vector<Expr>> merge_contiguous_x_loops(const ir::Program& prog, Kernel& k);
// inputs_freed: the caller releases graph inputs as the wrapper drops them (ScheduleOptions).
void plan_memory(const ir::Program& prog, Schedule& s, bool inputs_freed = false);

// Topological orders of the units (launch_order.cpp): the program's own (earliest first buffer
// first), and the one plan_memory takes, the program's or least peak first, whichever is
// estimated to hold less memory at its peak; `note` says which and why.
std::vector<int> program_order(const UnitGraph& g);
std::vector<int> launch_order(const ir::Program& prog, const UnitGraph& g, bool inputs_freed,
                              std::string* note);

// Rewrites reductions with few, long rows into a partial and a final pass (split_reduction.cpp);
// for GPU targets, where one row per program would leave most of the machine idle.
void split_reductions(ir::Program& prog);

// Triton reductions whose whole row fits one block run "persistent": the row is loaded once and
// every stage reuses it from registers. Rows up to kPersistentMaxRnumel run several per block;
// longer ones, up to kPersistentLongRnumel, one per block. Column reductions (strided along r)
// only while a block of kMinColumnXBlock columns stays within kPersistentMaxBlockElements.
// (codegen/triton/triton_launch.cpp picks the configs; this decides.)
inline constexpr int64_t kPersistentMaxRnumel = 1024;
inline constexpr int64_t kPersistentLongRnumel = 32768;
inline constexpr int64_t kPersistentMaxBlockElements = 4096;
inline constexpr int64_t kMinColumnXBlock = 32;
// Whether kernel k runs persistent on a GPU: a reduction (or inner stages) over a static rnumel
// within the limits above.
bool persistent_on_gpu(const Kernel& k);

struct ScheduleOptions {
  bool gpu = false;  // kernels are rendered for a GPU (Triton): split few-row reductions
  // The caller releases graph inputs as the wrapper drops them after their last reader (a
  // backward graph's saved activations): the launch order counts their memory as freed then.
  bool inputs_freed = false;
};

Schedule schedule_program(ir::Program& prog, const ScheduleOptions& opts = {});

}  // namespace coil::sched
