// Launch order (plan_memory's first step): the kernels and extern calls in a topological order of
// their dependencies, chosen for the lowest peak of live memory.
//
// Two candidates are simulated. Program order takes, among the units that can run, the one whose
// first buffer comes first in the program (the graph's own order). Least peak first is a greedy
// list schedule: among the units that can run, the one that raises the peak so far the least,
// then the one that adds the least memory net of what it frees (the buffers it is the last
// reader of), then program order. A backward graph's weight gradients are where the two differ
// most: each is a product of the incoming gradient and a saved activation that the program runs
// as soon as its operands exist, and a graph output, kept to the end. Run late, none of them sits
// beside the activations the backward has not freed yet (MobileNetV3-Large's training step on the
// CPU, 2026-12-03: its classifier's two weight gradients, 9.6 MB, held from the backward's start,
// peaked 82.6 MB where Inductor's step, which reorders for peak memory too, peaks at 75.4).
//
// The simulation: a unit allocates its stored buffers (those another unit reads, and graph
// outputs) when it runs; a buffer is freed after the last unit that reads it; graph outputs are
// never freed. Graph inputs count when the caller releases them as the wrapper drops them (a
// backward graph's saved activations and incoming gradients, not the forward's inputs it takes,
// primals_<i>, which the caller holds: ScheduleOptions::inputs_freed): live from the start, freed
// after their last reader. Sizes are bytes at the size hints. In-place stores and the reuse pool
// are left out (they change which memory a buffer takes, not how much is live). Least peak first
// is taken only where its estimate is at least 1% below program order's: otherwise the graph's
// order stays, and with it the kernel order every other measurement was made with. Then
// adjacent pairs swap where that lowers the pair's own high-water mark (swap_pairs): the
// estimate's peak can lie elsewhere (aliased inputs, views of one saved tensor, count once each)
// while a pair's order still decides the real one.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

int64_t bytes_hint(const ir::Layout& l) {
  Expr extent = 1;
  for (size_t i = 0; i < l.sizes.size(); ++i) {
    if (l.sizes[i] == Expr(0)) return 0;
    extent = extent + (l.sizes[i] - 1) * l.strides[i];
  }
  try {
    return std::max<int64_t>(
        0, sym::size_hint(extent, sym::RangeEnv{}) * graph::dtype_itemsize(l.dtype));
  } catch (const std::exception&) {
    return 0;  // a size without a hint (data-dependent): not counted
  }
}

// What the simulation needs of each buffer and unit.
struct Model {
  std::vector<int64_t> bytes;           // per buffer: bytes it holds while live (0: not counted)
  std::vector<int> readers;             // per buffer: units that read it (other than its maker)
  std::vector<bool> kept;               // per buffer: a graph output (never freed)
  std::vector<std::vector<int>> made;   // per unit: the counted buffers it allocates
  std::vector<std::vector<int>> reads;  // per unit: the counted buffers it reads
  int64_t start = 0;                    // live at the start (freed inputs)
};

Model build_model(const ir::Program& prog, const UnitGraph& g, bool inputs_freed) {
  Model m;
  size_t nb = prog.buffers.size();
  m.bytes.assign(nb, 0);
  m.readers.assign(nb, 0);
  m.kept.assign(nb, false);
  m.made.assign(g.nunits, {});
  m.reads.assign(g.nunits, {});
  for (const ir::GraphOutput& o : prog.outputs) {
    if (!o.is_tensor()) continue;
    int bi = prog.buffer_index(o.ref.buffer);
    if (bi >= 0) m.kept[bi] = true;
  }
  for (size_t u = 0; u < g.nunits; ++u) {
    for (int bi : g.reads[u]) {
      if (g.unit_of[bi] != static_cast<int>(u)) ++m.readers[bi];
    }
  }
  for (size_t bi = 0; bi < nb; ++bi) {
    const ir::Buffer& b = prog.buffers[bi];
    int u = g.unit_of[bi];
    if (b.kind == ir::Buffer::Kind::Input) {
      // AOTAutograd names the forward's own inputs a backward graph takes primals_<i>
      // (parameters, the user's inputs): the caller holds those, whatever the wrapper drops.
      bool held = b.name.rfind("primals", 0) == 0;
      if (!inputs_freed || held || m.kept[bi] || m.readers[bi] == 0) continue;
      m.bytes[bi] = bytes_hint(b.layout);
      m.start += m.bytes[bi];
      continue;
    }
    if (u < 0) continue;
    // A buffer only its own kernel reads stays in registers (or is that kernel's business).
    bool stored = m.kept[bi] || m.readers[bi] > 0 || b.kind == ir::Buffer::Kind::Extern;
    if (!stored) continue;
    m.bytes[bi] = bytes_hint(b.layout);
    m.made[u].push_back(static_cast<int>(bi));
  }
  for (size_t u = 0; u < g.nunits; ++u) {
    for (int bi : g.reads[u]) {
      if (m.bytes[bi] > 0 && g.unit_of[bi] != static_cast<int>(u) && !m.kept[bi])
        m.reads[u].push_back(bi);
    }
  }
  return m;
}

// The simulation's state: live bytes, the peak so far, readers still to come.
struct Sim {
  const Model& m;
  int64_t live, peak;
  std::vector<int> left;

  explicit Sim(const Model& model)
      : m(model), live(model.start), peak(model.start), left(model.readers) {}

  int64_t allocates(int u) const {
    int64_t n = 0;
    for (int bi : m.made[u]) n += m.bytes[bi];
    return n;
  }
  // Bytes freed once u has run: what it reads last, and what it makes that nothing reads.
  int64_t frees(int u) const {
    int64_t n = 0;
    for (int bi : m.reads[u]) {
      if (left[bi] == 1) n += m.bytes[bi];
    }
    for (int bi : m.made[u]) {
      if (left[bi] == 0 && !m.kept[bi]) n += m.bytes[bi];
    }
    return n;
  }
  void run(int u) {
    live += allocates(u);
    peak = std::max(peak, live);
    live -= frees(u);
    for (int bi : m.reads[u]) --left[bi];
  }
};

int64_t simulate(const Model& m, const std::vector<int>& order) {
  Sim sim(m);
  for (int u : order) sim.run(u);
  return sim.peak;
}

// Adjacent swaps that lower the higher of the two steps' high-water marks: two products of one
// gradient, one making a small result, the other a large one and freeing a saved activation
// (attention's input projection: dX, then dW, which frees the layer norm's output it reads);
// run large-and-freeing first, the small result is made after the activation is gone. Each pass
// walks the order once with the simulation's state; only the two steps' marks change (the pair
// leaves the same memory live after it), so the peak never rises. A swap must gain at least 1%
// of the pair's mark and 64 KB.
void swap_pairs(const Model& m, const UnitGraph& g, std::vector<int>& order) {
  for (int pass = 0; pass < 4; ++pass) {
    bool changed = false;
    Sim sim(m);
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      int a = order[i], b = order[i + 1];
      if (!g.succs[a].count(b)) {
        auto mark = [&](int first, int second) {
          Sim trial = sim;
          int64_t during_first = trial.live + trial.allocates(first);
          trial.run(first);
          return std::max(during_first, trial.live + trial.allocates(second));
        };
        int64_t keep = mark(a, b), swapped = mark(b, a);
        if (swapped * 100 < keep * 99 && keep - swapped >= (int64_t{64} << 10)) {
          std::swap(order[i], order[i + 1]);
          changed = true;
        }
      }
      sim.run(order[i]);
    }
    if (!changed) return;
  }
}

std::string megabytes(int64_t b) {
  char text[32];
  if (b < 1024) {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(b));
  } else if (b < (1 << 20)) {
    std::snprintf(text, sizeof(text), "%.1f KB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(text, sizeof(text), "%.2f MB", static_cast<double>(b) / (1 << 20));
  }
  return text;
}

}  // namespace

std::vector<int> program_order(const UnitGraph& g) {
  using Item = std::pair<int, int>;  // (first buffer, unit)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  std::vector<size_t> waiting(g.nunits);
  for (size_t u = 0; u < g.nunits; ++u) {
    waiting[u] = g.preds[u].size();
    if (!waiting[u]) ready.push({g.first_buffer[u], static_cast<int>(u)});
  }
  std::vector<int> order;
  while (!ready.empty()) {
    int u = ready.top().second;
    ready.pop();
    order.push_back(u);
    for (int n : g.succs[u]) {
      if (--waiting[n] == 0) ready.push({g.first_buffer[n], n});
    }
  }
  return order;
}

std::vector<int> launch_order(const ir::Program& prog, const UnitGraph& g, bool inputs_freed,
                              std::string* note) {
  std::vector<int> given = program_order(g);
  if (given.size() != g.nunits || g.nunits < 2) return given;  // (a cycle: the caller reports it)
  Model m = build_model(prog, g, inputs_freed);
  std::vector<int> rank(g.nunits);
  for (size_t i = 0; i < given.size(); ++i) rank[given[i]] = static_cast<int>(i);

  // Least peak first.
  Sim sim(m);
  std::vector<size_t> waiting(g.nunits);
  std::set<int> ready;  // by unit; the choice scans them
  for (size_t u = 0; u < g.nunits; ++u) {
    waiting[u] = g.preds[u].size();
    if (!waiting[u]) ready.insert(static_cast<int>(u));
  }
  std::vector<int> greedy;
  while (!ready.empty()) {
    int best = -1;
    int64_t best_raise = 0, best_net = 0;
    for (int u : ready) {
      int64_t alloc = sim.allocates(u);
      int64_t raise = std::max<int64_t>(0, sim.live + alloc - sim.peak);
      int64_t net = alloc - sim.frees(u);
      if (best < 0 || raise < best_raise || (raise == best_raise && net < best_net) ||
          (raise == best_raise && net == best_net && rank[u] < rank[best])) {
        best = u;
        best_raise = raise;
        best_net = net;
      }
    }
    ready.erase(best);
    greedy.push_back(best);
    sim.run(best);
    for (int n : g.succs[best]) {
      if (--waiting[n] == 0) ready.insert(n);
    }
  }
  int64_t peak_given = simulate(m, given), peak_greedy = sim.peak;
  bool take = peak_greedy * 100 < peak_given * 99;
  std::vector<int> order = take ? greedy : given;
  std::vector<int> before = order;
  swap_pairs(m, g, order);
  size_t swaps = 0;
  for (size_t i = 0; i < order.size(); ++i) swaps += order[i] != before[i];
  if (note) {
    *note = take ? "launch order: least peak first, estimated peak " + megabytes(peak_greedy) +
                       " (the program's order: " + megabytes(peak_given) + ")"
                 : "launch order: the program's, estimated peak " + megabytes(peak_given) +
                       " (least peak first: " + megabytes(peak_greedy) + ")";
    if (swaps) *note += "; " + std::to_string(swaps) + " steps moved by pair swaps";
  }
  return order;
}

}  // namespace coil::sched
