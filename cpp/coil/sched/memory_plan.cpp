// Memory plan: launch order, kernel stages, which buffers are stored, when they are allocated and
// freed, and which freed buffers' memory a new buffer reuses.
//
// The launch order follows the data: buffers, the Python numbers extern calls make and read, and
// the order of ops with side effects among themselves (ExternCall::has_effects); among the
// orders that do, launch_order.cpp takes the graph's own or one with a lower peak of memory.
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

// Whether an ATen op draws from torch's random number generator (its name says so).
bool draws_random(const std::string& op) {
  static const char* kWords[] = {"rand",        "bernoulli",   "dropout", "normal",
                                 "uniform",     "exponential", "cauchy",  "geometric",
                                 "multinomial", "poisson",     "random"};
  for (const char* w : kWords) {
    if (op.find(w) != std::string::npos) return true;
  }
  return false;
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

}  // namespace

void plan_memory(const ir::Program& prog, Schedule& s, bool inputs_freed) {
  // Launch order: a topological order of kernels and extern calls, earliest buffer first.
  size_t nk = s.kernels.size();
  std::vector<int> unit_of(prog.buffers.size(), -1);
  std::vector<int> first_buffer(nk + prog.externs.size(), INT32_MAX);
  for (size_t k = 0; k < nk; ++k) {
    for (const Member& m : s.kernels[k].members) {
      unit_of[m.buffer] = static_cast<int>(k);
      first_buffer[k] = std::min(first_buffer[k], m.buffer);
    }
  }
  for (size_t i = 0; i < prog.buffers.size(); ++i) {
    const ir::Buffer& b = prog.buffers[i];
    if (b.kind != ir::Buffer::Kind::Extern) continue;
    int u = static_cast<int>(nk) + b.extern_id;
    unit_of[i] = u;
    first_buffer[u] = std::min(first_buffer[u], static_cast<int>(i));
  }
  size_t nunits = nk + prog.externs.size();
  // Calls that make no buffer (a Python number, an assertion, an effect such as a print) run as
  // soon as they can: an assertion then fails before the work that relies on it.
  for (size_t u = nk; u < nunits; ++u) {
    if (first_buffer[u] == INT32_MAX) first_buffer[u] = -1;
  }
  std::vector<std::set<int>> preds(nunits), succs(nunits), reads(nunits);
  auto add_read = [&](int unit, const std::string& name) {
    int bi = prog.buffer_index(name);
    if (bi < 0) return;
    reads[unit].insert(bi);
    int p = unit_of[bi];
    if (p >= 0 && p != unit) {
      preds[unit].insert(p);
      succs[p].insert(unit);
    }
  };
  for (size_t k = 0; k < nk; ++k) {
    for (const Member& m : s.kernels[k].members) {
      for (const Access& a : buffer_reads(prog.buffers[m.buffer]))
        add_read(static_cast<int>(k), a.buffer);
    }
  }
  for (size_t e = 0; e < prog.externs.size(); ++e) {
    for (const ir::TensorRef& t : prog.externs[e].tensors)
      add_read(static_cast<int>(nk + e), t.buffer);
  }
  // A call that writes into a buffer runs after every other unit that reads the buffer's old
  // contents (units that read the call's own results come after it anyway).
  for (size_t e = 0; e < prog.externs.size(); ++e) {
    int writer = static_cast<int>(nk + e);
    for (const std::string& name : prog.externs[e].mutates) {
      int bi = prog.buffer_index(name);
      for (int u = 0; bi >= 0 && u < static_cast<int>(nunits); ++u) {
        if (u == writer || !reads[u].count(bi) || succs[writer].count(u)) continue;
        preds[writer].insert(u);
        succs[u].insert(writer);
      }
    }
  }
  // Extern calls also wait for the calls that compute the Python numbers they read, and an op
  // with side effects for the previous one (externs are in graph order). So do ATen fallbacks
  // and calls that draw random numbers, among themselves: a random op draws from torch's
  // generator (fallback_random: eager's stream, in eager's order; coil's own random nodes draw
  // their seeds), and a fallback may read state coil cannot see; launch_order.cpp may otherwise
  // move any call whose operands are ready.
  std::map<std::string, int> number_maker;
  int last_effect = -1;
  auto add_order = [&](int before, int after) {
    preds[after].insert(before);
    succs[before].insert(after);
  };
  for (size_t e = 0; e < prog.externs.size(); ++e) {
    const ir::ExternCall& call = prog.externs[e];
    int unit = static_cast<int>(nk + e);
    for (const std::string& v : call.host_scalars) {
      auto it = number_maker.find(v);
      if (it == number_maker.end())
        throw std::logic_error("plan_memory: " + call.op + " reads number " + v +
                               " made by no call");
      add_order(it->second, unit);
    }
    if (call.has_effects || call.is_fallback || draws_random(call.op)) {
      if (last_effect >= 0) add_order(last_effect, unit);
      last_effect = unit;
    }
    if (!call.scalar_output.empty()) number_maker[call.scalar_output] = unit;
  }
  UnitGraph graph{nunits, preds, succs, reads, unit_of, first_buffer};
  s.steps.clear();
  std::vector<int> step_of_unit(nunits, -1);
  for (int u : launch_order(prog, graph, inputs_freed, &s.order_note)) {
    step_of_unit[u] = static_cast<int>(s.steps.size());
    s.steps.push_back(u < static_cast<int>(nk)
                          ? Step{Step::Kind::Kernel, u}
                          : Step{Step::Kind::Extern, u - static_cast<int>(nk)});
  }
  if (s.steps.size() != nunits)
    throw std::logic_error("plan_memory: kernels and extern calls form a cycle");

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

  // Reuse: walk the steps; buffers freed after step t are available from step t + 1.
  std::map<std::tuple<std::string, int, std::string>, std::vector<std::string>> pool;
  std::map<int, std::vector<std::string>> frees_after;
  for (const auto& [name, plan] : s.buffers) {
    if (plan.stored && plan.free_step >= 0) frees_after[plan.free_step].push_back(name);
  }
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
          if (v.kind == ir::Buffer::Kind::Input || outputs.count(v.name) || consumed.count(v.name))
            continue;
          if (unit_of[victim] == s.steps[step].index)
            continue;  // made by this kernel: still in use
          const BufferPlan& vp = s.buffers[v.name];
          if (!vp.stored || vp.free_step != static_cast<int>(step) ||
              !same_storage(v.layout, b.layout))
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
