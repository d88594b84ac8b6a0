// Memory plan: launch order, kernel stages, which buffers are stored, when they are allocated and
// freed, and which freed buffers' memory a new buffer reuses.
//
// The launch order follows the dependencies between kernels and extern calls (unit_graph,
// deps.cpp: buffers, the Python numbers extern calls make and read, mutations, and the graph's
// order among ops with side effects, fallbacks and random draws); among the orders that do,
// launch_order.cpp takes the graph's own or one with a lower peak of memory.
//
// A buffer stays in registers (is not stored) when it is not a graph output and every reader is in
// its own kernel at the point it is written: the same stage for inner (per x*r point) values, any
// later stage for outer (per x point) values. Freed buffers go into a pool keyed by device and
// dtype and storage bytes; an allocation of the same size takes one from the pool instead of
// allocating. A scatter always takes the memory of the copy it starts from. The pool is emptied
// before every extern call: the library allocates its results itself, so a freed buffer held
// for a later kernel would sit beside them at their peak (an attention block's layer-norm output,
// kept for the residual add, held 0.5 MB beside the projections and the attention call's
// output: 2.7 MB at the peak where Inductor's plan holds 2.2). Those buffers are freed at their
// last use instead.
#include <algorithm>
#include <map>
#include <queue>
#include <stdexcept>
#include <tuple>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

// The bytes a buffer's storage spans, as the key of the reuse pool: a number, or for dynamic
// sizes the canonical expression (two buffers share storage only when their sizes are provably
// equal, i.e. the same expression). Empty for buffers that never reuse (no elements).
std::string storage_bytes(const ir::Layout& l) {
  Expr extent = 1;
  for (size_t i = 0; i < l.sizes.size(); ++i) extent = extent + (l.sizes[i] - 1) * l.strides[i];
  for (const Expr& s : l.sizes) {
    if (s == Expr(0)) return "";
  }
  Expr bytes = sym::simplify(extent * graph::dtype_itemsize(l.dtype), sym::RangeEnv{});
  if (auto n = bytes.as_int()) return *n > 0 ? std::to_string(*n) : "";
  return bytes.str();
}

void assign_stages(const ir::Program& prog, Kernel& k) {
  k.stages.clear();
  std::map<std::string, int> member_of;  // buffer name -> member index
  for (size_t i = 0; i < k.members.size(); ++i)
    member_of[prog.buffers[k.members[i].buffer].name] = static_cast<int>(i);
  for (size_t i = 0; i < k.members.size(); ++i) {
    Member& m = k.members[i];
    bool new_stage = k.stages.empty() || k.stages.back().inner != m.inner;
    if (!new_stage && m.inner) {
      // An inner value that needs a reduction finished in the current loop starts the next loop.
      for (const Access& a : buffer_reads(prog.buffers[m.buffer])) {
        auto it = member_of.find(a.buffer);
        if (it == member_of.end()) continue;
        const Member& dep = k.members[it->second];
        if (dep.stage == static_cast<int>(k.stages.size()) - 1 &&
            prog.buffers[dep.buffer].is_reduction())
          new_stage = true;
      }
    }
    if (new_stage) k.stages.push_back({m.inner, {}});
    m.stage = static_cast<int>(k.stages.size()) - 1;
    k.stages.back().members.push_back(static_cast<int>(i));
  }
}

// Can b's storage be a's? Same dtype, device, offset and bytes: the shapes may differ (a
// product's [96, 512, 512] scores and the [8, 12, 512, 512] softmax over them), since an in-place
// store is checked element by element (can_write_in_place compares storage offsets).
bool same_storage(const ir::Layout& a, const ir::Layout& b) {
  if (a.dtype != b.dtype || a.device != b.device || !(a.offset == b.offset)) return false;
  std::string bytes = storage_bytes(a);
  return !bytes.empty() && bytes == storage_bytes(b);
}

// Whether every element of a layout has an address of its own: its storage spans exactly its
// elements (an expanded output, stride 0 along a dim of 8, spans 2 elements for 16).
bool one_address_per_element(const ir::Layout& l) {
  Expr numel = 1, extent = 1;
  for (size_t i = 0; i < l.sizes.size(); ++i) {
    numel = numel * l.sizes[i];
    extent = extent + (l.sizes[i] - 1) * l.strides[i];
  }
  return sym::simplify(numel - extent, sym::RangeEnv{}) == Expr(0);
}

// May member `writer` of k store its buffer over `victim` (which k reads for the last time)?
// Not where the writer stores one address more than once (an expanded output): a later store
// would read the victim's element after an earlier one overwrote it (fuzzer --train, seed 74173:
// the gradient of a gram product, expanded over 8 rows, added the product 8 times over).
bool can_write_in_place(const ir::Program& prog, const Kernel& k, size_t writer,
                        const std::string& victim) {
  const Member& w = k.members[writer];
  if (!one_address_per_element(prog.buffers[w.buffer].layout)) return false;
  sym::RangeEnv env = k.range_env();
  Expr write = sym::simplify(sym::substitute(prog.buffers[w.buffer].write_index(), w.var_map), env);
  for (size_t i = 0; i < k.members.size(); ++i) {
    const Member& m = k.members[i];
    for (const Access& a : buffer_reads(prog.buffers[m.buffer])) {
      if (a.buffer != victim) continue;
      // Every read of the victim must happen before the store, at the stored element: in the
      // writer's stage by a member before it, or in an earlier stage of the same x point (a
      // softmax over a product's scores reads each row in three loops and writes it in the last).
      if (i > writer || m.stage > w.stage || a.indirect) return false;
      if (sym::simplify(sym::substitute(a.index, m.var_map), env) != write) return false;
    }
  }
  return true;
}

// One cycle among the units a topological order could not place, as text ("{buf7,buf9} ->
// extern aten.mm.default (mm) -> ... -> {buf7,buf9}"): what plan_memory's error names. Every unit
// left unplaced waits for another one left unplaced, so walking predecessors finds a cycle.
std::string cycle_text(const ir::Program& prog, const Schedule& s, const UnitGraph& g,
                       const std::vector<int>& step_of_unit) {
  int u = -1;
  for (size_t v = 0; v < g.nunits && u < 0; ++v) {
    if (step_of_unit[v] < 0) u = static_cast<int>(v);
  }
  if (u < 0) return "";
  std::vector<int> path;
  std::vector<int> seen_at(g.nunits, -1);
  while (seen_at[u] < 0) {
    seen_at[u] = static_cast<int>(path.size());
    path.push_back(u);
    int next = -1;
    for (int p : g.preds[u]) {
      if (step_of_unit[p] < 0) {
        next = p;
        break;
      }
    }
    if (next < 0) return "";
    u = next;
  }
  // path[seen_at[u]..] is the cycle, each unit after the one that waits for it: print it forwards.
  std::string text = unit_name(prog, s.kernels, u);
  for (size_t i = path.size(); i-- > static_cast<size_t>(seen_at[u]);)
    text += " -> " + unit_name(prog, s.kernels, path[i]);
  return text;
}

}  // namespace

void plan_memory(const ir::Program& prog, Schedule& s, bool inputs_freed) {
  // Launch order: a topological order of kernels and extern calls (deps.cpp says what orders
  // them; fusion followed the same dependencies, so there is one).
  size_t nk = s.kernels.size();
  UnitGraph graph = unit_graph(prog, s.kernels);
  size_t nunits = graph.nunits;
  const std::vector<int>& unit_of = graph.unit_of;
  const std::vector<std::set<int>>& reads = graph.reads;
  s.steps.clear();
  std::vector<int> step_of_unit(nunits, -1);
  for (int u : launch_order(prog, graph, inputs_freed, &s.order_note)) {
    step_of_unit[u] = static_cast<int>(s.steps.size());
    s.steps.push_back(u < static_cast<int>(nk)
                          ? Step{Step::Kind::Kernel, u}
                          : Step{Step::Kind::Extern, u - static_cast<int>(nk)});
  }
  if (s.steps.size() != nunits) {
    throw std::logic_error("plan_memory: kernels and extern calls form a cycle: " +
                           cycle_text(prog, s, graph, step_of_unit));
  }

  for (size_t k = 0; k < nk; ++k) {
    s.kernels[k].id = static_cast<int>(k);
    assign_stages(prog, s.kernels[k]);
  }

  // Readers of each buffer (as steps), and whether it is a graph output.
  std::set<std::string> outputs;
  for (const ir::GraphOutput& o : prog.outputs) {
    if (o.is_tensor()) outputs.insert(o.ref.buffer);
  }
  std::vector<std::vector<int>> reader_steps(prog.buffers.size());
  for (size_t u = 0; u < nunits; ++u) {
    for (int bi : reads[u]) reader_steps[bi].push_back(step_of_unit[u]);
  }

  s.input_last_use.clear();
  for (size_t bi = 0; bi < prog.buffers.size(); ++bi) {
    const ir::Buffer& b = prog.buffers[bi];
    if (b.kind != ir::Buffer::Kind::Input || outputs.count(b.name) || reader_steps[bi].empty())
      continue;
    s.input_last_use[b.name] = *std::max_element(reader_steps[bi].begin(), reader_steps[bi].end());
  }

  s.buffers.clear();
  for (size_t bi = 0; bi < prog.buffers.size(); ++bi) {
    const ir::Buffer& b = prog.buffers[bi];
    if (b.kind == ir::Buffer::Kind::Input) continue;
    BufferPlan plan;
    int unit = unit_of[bi];
    plan.alloc_step = step_of_unit[unit];
    if (b.kind == ir::Buffer::Kind::Computed && !outputs.count(b.name)) {
      const Kernel& k = s.kernels[unit];
      const Member* self = nullptr;
      for (const Member& m : k.members) {
        if (m.buffer == static_cast<int>(bi)) self = &m;
      }
      bool local = true;
      for (int step : reader_steps[bi]) local &= step == plan.alloc_step;
      // A column-form scan reads the row it stored at the step before (C++ kernels).
      if (b.is_scan() && k.scan_column) local = false;
      if (local) {
        // Same kernel: inner values must be read in their own loop.
        for (const Member& m : k.members) {
          bool reads_it = false;
          for (const Access& a : buffer_reads(prog.buffers[m.buffer]))
            reads_it |= a.buffer == b.name;
          // Reduction results are per x point (like outer values), visible to every later stage.
          bool per_point = !self->inner || b.is_reduction();
          // (A GPU kernel whose rows stay in registers reads it there in every stage.)
          if (reads_it && !per_point && m.stage != self->stage && !k.rows_in_registers)
            local = false;
        }
      }
      plan.stored = !local;
    }
    if (plan.stored && !outputs.count(b.name)) {
      int last = plan.alloc_step;
      for (int step : reader_steps[bi]) last = std::max(last, step);
      plan.free_step = last;
    }
    s.buffers[b.name] = plan;
  }

  // Reuse: walk the steps; buffers freed after step t are available from step t + 1. A donated
  // input (a backward's saved activation nobody else holds) is freed after its last reader like
  // a buffer of the graph's own, when its storage is its elements from offset 0 (a view into a
  // larger tensor is left alone).
  std::map<std::string, int> donated_free;
  for (const auto& [name, step] : s.input_last_use) {
    const ir::Buffer& b = prog.buffer(name);
    if (b.donated && b.layout.offset == Expr(0) && one_address_per_element(b.layout) &&
        !storage_bytes(b.layout).empty())
      donated_free[name] = step;
  }
  std::map<std::tuple<std::string, int, std::string>, std::vector<std::string>> pool;
  std::map<int, std::vector<std::string>> frees_after;
  for (const auto& [name, plan] : s.buffers) {
    if (plan.stored && plan.free_step >= 0) frees_after[plan.free_step].push_back(name);
  }
  for (const auto& [name, step] : donated_free) frees_after[step].push_back(name);
  auto freed_at = [&](const std::string& name) {
    auto d = donated_free.find(name);
    if (d != donated_free.end()) return d->second;
    const BufferPlan& p = s.buffers.at(name);
    return p.stored ? p.free_step : -1;
  };
  // A fallback op may return a view of its input (diagonal, narrow, ...): its outputs and inputs
  // share memory that coil cannot see, so none of them is ever reused or written in place.
  std::set<std::string> pinned;
  for (const ir::ExternCall& e : prog.externs) {
    if (!e.is_fallback && e.mutates.empty()) continue;
    for (const std::string& o : e.outputs) pinned.insert(o);
    for (const ir::TensorRef& t : e.tensors) pinned.insert(t.buffer);
  }
  std::set<std::string> consumed = pinned;  // taken in place, or pinned: never enters the pool
  for (size_t step = 0; step < s.steps.size(); ++step) {
    if (s.steps[step].kind != Step::Kind::Kernel) pool.clear();
    if (s.steps[step].kind == Step::Kind::Kernel) {
      const Kernel& k = s.kernels[s.steps[step].index];
      for (size_t mi = 0; mi < k.members.size(); ++mi) {
        const Member& m = k.members[mi];
        const ir::Buffer& b = prog.buffers[m.buffer];
        BufferPlan& plan = s.buffers[b.name];
        if (!plan.stored) continue;
        if (b.is_scatter()) {
          // A scatter updates the copy it starts from where it lies.
          const BufferPlan& bp = s.buffers.at(b.base);
          if (!bp.stored || bp.free_step != static_cast<int>(step) || outputs.count(b.base) ||
              consumed.count(b.base)) {
            throw std::logic_error("plan_memory: scatter " + b.name + " cannot take over " +
                                   b.base + " (it must be a stored copy only the scatter reads)");
          }
          plan.reuses = b.base;
          plan.in_place = true;
          consumed.insert(b.base);
          continue;
        }
        for (int victim : reads[s.steps[step].index]) {
          const ir::Buffer& v = prog.buffers[victim];
          bool input = v.kind == ir::Buffer::Kind::Input;
          if ((input && !donated_free.count(v.name)) || outputs.count(v.name) ||
              consumed.count(v.name))
            continue;
          if (!input && unit_of[victim] == s.steps[step].index)
            continue;  // made by this kernel: still in use
          if (freed_at(v.name) != static_cast<int>(step) || !same_storage(v.layout, b.layout))
            continue;
          if (!can_write_in_place(prog, k, mi, v.name)) continue;
          plan.reuses = v.name;
          plan.in_place = true;
          consumed.insert(v.name);
          break;
        }
        if (plan.in_place) continue;
        std::string bytes = storage_bytes(b.layout);
        auto it = pool.find({b.layout.device, static_cast<int>(b.layout.dtype), bytes});
        if (bytes.empty() || it == pool.end() || it->second.empty()) continue;
        plan.reuses = it->second.back();
        it->second.pop_back();
      }
    }
    for (const std::string& name : frees_after[static_cast<int>(step)]) {
      if (consumed.count(name)) continue;
      const ir::Buffer& b = prog.buffer(name);
      pool[{b.layout.device, static_cast<int>(b.layout.dtype), storage_bytes(b.layout)}].push_back(
          name);
    }
  }
}

}  // namespace coil::sched
