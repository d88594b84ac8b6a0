// Dependency extraction: which buffers a computed body reads, at which index; and the
// dependencies between kernels and extern calls (unit_graph), the one graph that fusion keeps
// acyclic and the memory plan orders.
#include <algorithm>
#include <climits>
#include <map>
#include <stdexcept>

#include "coil/sched/schedule.h"

namespace coil::sched {

Expr xvar(int i) {
  return Expr::symbol("x" + std::to_string(i));
}
Expr rvar(int j) {
  return Expr::symbol("r" + std::to_string(j));
}

sym::RangeEnv Kernel::range_env() const {
  sym::RangeEnv env;
  for (size_t i = 0; i < xsizes.size(); ++i)
    env.add_index_var(xvar(static_cast<int>(i)), xsizes[i]);
  for (size_t j = 0; j < rsizes.size(); ++j)
    env.add_index_var(rvar(static_cast<int>(j)), rsizes[j]);
  return env;
}

std::vector<Access> buffer_reads(const ir::Buffer& b) {
  std::vector<Access> out;
  if (!b.is_generated() || !b.body) return out;
  if (b.is_scatter()) out.push_back({b.base, Expr(0), true, false});
  std::vector<ir::Value> roots = {b.body};
  if (b.is_scatter()) roots.push_back(b.target);
  for (const ir::Value& v : ir::topo_order(roots)) {
    if (v.op() == ir::Op::Load)
      out.push_back({v->buffer, v->index, false, ir::has_indirect(v->index)});
  }
  return out;
}

namespace {

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

}  // namespace

UnitGraph unit_graph(const ir::Program& prog, const std::vector<Kernel>& kernels) {
  size_t nk = kernels.size();
  UnitGraph g;
  g.nunits = nk + prog.externs.size();
  g.preds.assign(g.nunits, {});
  g.succs.assign(g.nunits, {});
  g.reads.assign(g.nunits, {});
  g.unit_of.assign(prog.buffers.size(), -1);
  g.first_buffer.assign(g.nunits, INT_MAX);
  for (size_t k = 0; k < nk; ++k) {
    for (const Member& m : kernels[k].members) {
      g.unit_of[m.buffer] = static_cast<int>(k);
      g.first_buffer[k] = std::min(g.first_buffer[k], m.buffer);
    }
  }
  for (size_t i = 0; i < prog.buffers.size(); ++i) {
    const ir::Buffer& b = prog.buffers[i];
    if (b.kind != ir::Buffer::Kind::Extern) continue;
    int u = static_cast<int>(nk) + b.extern_id;
    g.unit_of[i] = u;
    g.first_buffer[u] = std::min(g.first_buffer[u], static_cast<int>(i));
  }
  // Calls that make no buffer (a Python number, an assertion, an effect such as a print) run as
  // soon as they can: an assertion then fails before the work that relies on it.
  for (size_t u = nk; u < g.nunits; ++u) {
    if (g.first_buffer[u] == INT_MAX) g.first_buffer[u] = -1;
  }
  auto add_edge = [&](int before, int after) {
    g.preds[after].insert(before);
    g.succs[before].insert(after);
  };
  auto add_read = [&](int unit, const std::string& name) {
    int bi = prog.buffer_index(name);
    if (bi < 0) return;
    g.reads[unit].insert(bi);
    int p = g.unit_of[bi];
    if (p >= 0 && p != unit) add_edge(p, unit);
  };
  for (size_t k = 0; k < nk; ++k) {
    for (const Member& m : kernels[k].members) {
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
      for (int u = 0; bi >= 0 && u < static_cast<int>(g.nunits); ++u) {
        if (u == writer || !g.reads[u].count(bi) || g.succs[writer].count(u)) continue;
        add_edge(u, writer);
      }
    }
  }
  // Extern calls also wait for the calls that compute the Python numbers they read, and an op
  // with side effects for the previous one (externs are in graph order). So do ATen fallbacks
  // and calls that draw random numbers, among themselves: a random op draws from torch's
  // generator (fallback_random: eager's stream, in eager's order; coil's own random nodes draw
  // their seeds), and a fallback may read state coil cannot see; launch_order.cpp may otherwise
  // move any call whose operands are ready. These edges join calls that share no buffer (two
  // attention calls of different branches): fusion must see them too, or it merges a kernel
  // before the first call with one after the second.
  std::map<std::string, int> number_maker;
  int last_effect = -1;
  for (size_t e = 0; e < prog.externs.size(); ++e) {
    const ir::ExternCall& call = prog.externs[e];
    int unit = static_cast<int>(nk + e);
    for (const std::string& v : call.host_scalars) {
      auto it = number_maker.find(v);
      if (it == number_maker.end())
        throw std::logic_error("unit_graph: " + call.op + " reads number " + v +
                               " made by no call");
      add_edge(it->second, unit);
    }
    if (call.has_effects || call.is_fallback || draws_random(call.op)) {
      if (last_effect >= 0) add_edge(last_effect, unit);
      last_effect = unit;
    }
    if (!call.scalar_output.empty()) number_maker[call.scalar_output] = unit;
  }
  return g;
}

std::string unit_name(const ir::Program& prog, const std::vector<Kernel>& kernels, int unit) {
  if (unit >= static_cast<int>(kernels.size())) {
    const ir::ExternCall& e = prog.externs[unit - kernels.size()];
    return "extern " + e.op + " (" + e.origin + ")";
  }
  std::string members;
  for (const Member& m : kernels[unit].members)
    members += (members.empty() ? "" : ",") + prog.buffers[m.buffer].name;
  return "{" + members + "}";
}

bool is_scatter_kernel(const ir::Program& prog, const Kernel& k) {
  for (const Member& m : k.members) {
    if (prog.buffers[m.buffer].is_scatter()) return true;
  }
  return false;
}

}  // namespace coil::sched
