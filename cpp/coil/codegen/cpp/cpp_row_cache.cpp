// Row caches (cpp_emitter.h): a value that the inner loops of one x point compute in one stage
// and again in a later one is computed once, and kept where the later stage's output element goes
// until that stage writes it. Softmax's kernel loops over its row three times (max, sum of
// exp(x - max), exp(x - max) * (1 / sum)) and computed the exponential twice per element; now the
// second loop stores each exponential in the output and the third scales it there, as eager's CPU
// kernel does. What pays is as much the early store as the saved work: the output's row is
// brought into L1 while an earlier loop computes, so the last loop's stores do not wait on memory;
// even a plain load shared by two loops (RMSNorm's x) is worth keeping there. Measured on 2
// cores, float32 (2026-12-01), computing again / kept in the output: softmax 4096x4096 6.3-6.7 /
// 4.8-5.3 ms; log_softmax (sharing x - max) 8.1-8.8 / 6.4-7.5; RMSNorm 16384x1024 (sharing x)
// 5.5-7.9 / 4.8-6.6. A per-thread array on the stack as the cache was slower than computing again
// (softmax 7.2-7.6 ms): it only adds to what L1 must hold.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

namespace {

// A value that can be kept: anything loaded or computed along the row (constants and index
// values cost nothing to make again).
bool keepable(Value v) {
  if (!graph::is_floating(v.dtype())) return false;
  switch (v.op()) {
    case Op::Constant:
    case Op::IndexExpr:
    case Op::Guard:
      return false;
    default:
      return true;
  }
}

}  // namespace

void Emitter::plan_row_caches() {
  row_caches_.clear();
  if (k_.stages.size() < 2 || k_.rsizes.empty() || scatter()) return;
  Expr domain = 1;  // x points times row elements
  for (const Expr& e : k_.xsizes) domain = domain * e;
  for (const Expr& e : k_.rsizes) domain = domain * e;
  std::vector<Expr> rvars;
  for (size_t j = 0; j < k_.rsizes.size(); ++j)
    rvars.push_back(Expr::symbol("r" + std::to_string(j)));
  auto mentions_every_r = [&](const Expr& e) {
    std::vector<Expr> free = sym::free_symbols(e);
    for (const Expr& rv : rvars) {
      if (std::find(free.begin(), free.end(), rv) == free.end()) return false;
    }
    return true;
  };
  // Whether a value varies along the row (reads or names an r variable).
  std::unordered_map<const ir::ScalarNode*, bool> along_row;
  std::function<bool(Value)> varies_along_row = [&](Value v) {
    auto it = along_row.find(v.get());
    if (it != along_row.end()) return it->second;
    bool r = false;
    if (v.op() == Op::Load || v.op() == Op::IndexExpr || v.op() == Op::Guard) {
      for (const Expr& s : sym::free_symbols(v->index)) {
        for (const Expr& rv : rvars) r |= s == rv;
      }
    }
    for (const Value& a : v->args) r = varies_along_row(a) || r;
    along_row[v.get()] = r;
    return r;
  };
  // Where each candidate is computed: the stages, and the members of each whose value reads it.
  struct Uses {
    std::vector<int> stages;
    std::vector<int> members;
  };
  std::unordered_map<const ir::ScalarNode*, Uses> uses;
  std::vector<Value> order;  // candidates, operands before their users
  for (size_t si = 0; si < k_.stages.size(); ++si) {
    const sched::Stage& stage = k_.stages[si];
    if (!stage.inner) continue;
    for (int mi : stage.members) {
      for (const Value& v : ir::topo_order({kernel_body(k_.members[mi])})) {
        if (!keepable(v) || !varies_along_row(v)) {
          continue;
        }
        Uses& u = uses[v.get()];
        if (u.stages.empty()) order.push_back(v);
        if (u.stages.empty() || u.stages.back() != static_cast<int>(si))
          u.stages.push_back(static_cast<int>(si));
        u.members.push_back(mi);
      }
    }
  }
  // Users before their operands: a home keeps the last value its stages share (softmax's
  // exponential, not the difference it is the exponential of).
  std::reverse(order.begin(), order.end());
  std::set<int> homes;
  for (const Value& v : order) {
    const Uses& u = uses.at(v.get());
    // Computed in two stages or more: the first keeps it, the later ones read it, and the home
    // is overwritten by the last (a 16-bit softmax's scaled input, read by its max, sum and
    // output loops).
    if (u.stages.size() < 2) continue;
    for (int mi : u.members) {
      const sched::Member& m = k_.members[mi];
      const ir::Buffer& b = prog_.buffers[m.buffer];
      if (m.stage != u.stages.back() || b.is_reduction() || homes.count(mi)) continue;
      // An output element of v's type per element of the loops, written by this member alone,
      // in memory no buffer the kernel reads shares.
      auto plan = s_.buffers.find(b.name);
      if (!stored(b.name) || b.layout.dtype != v.dtype() || b.is_scatter()) continue;
      Expr numel = 1;
      for (const Expr& e : b.layout.sizes) numel = numel * e;
      if (!(sym::simplify(numel - domain, env_) == Expr(0))) continue;
      // Contiguous along the vector loop (a vector store and load): the innermost r loop, or in
      // column form the innermost x loop.
      Expr idx = sym::substitute(b.write_index(), m.var_map);
      Expr along = column() ? Expr::symbol(last_x()) : rvars.back();
      Expr step = sym::simplify(sym::substitute(idx, {{along, along + 1}}) - idx, env_);
      if (!mentions_every_r(idx) || !(step == Expr(1))) continue;
      row_caches_[v.get()] = RowCache{u.stages[0], mi};
      // An output written over an operand it replaces (in place): from the store of v on, that
      // operand's element holds v, so nothing may read the operand there any more.
      if (plan != s_.buffers.end() && plan->second.in_place &&
          operand_read_after_fill(plan->second.reuses, v, u.stages[0])) {
        row_caches_.erase(v.get());
        continue;
      }
      homes.insert(mi);
      break;
    }
  }
}

std::vector<std::string> Emitter::row_cache_decisions() const {
  std::vector<std::string> out;
  for (const auto& [node, c] : row_caches_) {
    const std::string& home = prog_.buffers[k_.members[c.home].buffer].name;
    out.push_back("row cache: each element's " + std::string(ir::op_name(Value(node).op())) +
                  " from stage " + std::to_string(c.first_stage) + " kept in " + home +
                  " until a later stage writes it there");
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Emitter::operand_read_after_fill(const std::string& operand, Value v, int first) const {
  std::vector<Value> own = ir::topo_order({v});
  for (size_t si = static_cast<size_t>(first); si < k_.stages.size(); ++si) {
    const sched::Stage& stage = k_.stages[si];
    if (!stage.inner) continue;
    // What this stage computes: later stages read the cached values instead of computing them.
    std::unordered_set<const ir::ScalarNode*> seen;
    std::vector<Value> todo;
    for (int mi : stage.members) todo.push_back(kernel_body(k_.members[mi]));
    while (!todo.empty()) {
      Value x = todo.back();
      todo.pop_back();
      if (!seen.insert(x.get()).second) continue;
      auto c = row_caches_.find(x.get());
      if (c != row_caches_.end() && static_cast<int>(si) > c->second.first_stage) continue;
      if (x.op() == Op::Load && x->buffer == operand) {
        // In the stage that fills the cache, only as an operand of v (read before the store).
        bool before =
            static_cast<int>(si) == first && std::find(own.begin(), own.end(), x) != own.end();
        if (!before) return true;
      }
      for (const Value& a : x->args) todo.push_back(a);
    }
  }
  return false;
}

const RowCache* Emitter::cached_in_stage(Value v) const {
  auto it = row_caches_.find(v.get());
  if (it == row_caches_.end() || stage_ <= it->second.first_stage) return nullptr;
  return &it->second;
}

void Emitter::fill_row_cache(Value v, const std::string& text) {
  auto it = row_caches_.find(v.get());
  if (it == row_caches_.end() || it->second.first_stage != stage_) return;
  const sched::Member& m = k_.members[it->second.home];
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Expr idx = sym::substitute(b.write_index(), m.var_map);
  if (vec_) {
    vector_store(b, idx, text);
  } else {
    line(ptr_.at(b.name) + "[" + index_text(b.name, idx) + "] = " + text + ";");
  }
}

void Emitter::read_row_cache(Value v, const RowCache& c) {
  const sched::Member& m = k_.members[c.home];
  const ir::Buffer& b = prog_.buffers[m.buffer];
  Expr idx = sym::substitute(b.write_index(), m.var_map);
  std::string name = "tmp" + std::to_string(next_tmp_++);
  if (vec_) {
    lane_type(v.dtype());
    line("auto " + name + " = " + lanes_read(b.name, idx, v.dtype()) + ";");
    vec_names_.insert(name);
  } else {
    line(ctype(v.dtype()) + " " + name + " = " + ptr_.at(b.name) + "[" + index_text(b.name, idx) +
         "];");
  }
  memo_.back()[v.get()] = name;
}

std::vector<Value> Emitter::render_order(Value root) const {
  if (row_caches_.empty()) return ir::topo_order({root});
  // Operands before their users, leaving out what is already computed here and what a value read
  // from a row cache would have needed.
  std::vector<Value> order;
  std::unordered_set<const ir::ScalarNode*> seen;
  std::function<void(Value)> visit = [&](Value v) {
    if (!seen.insert(v.get()).second || lookup(v)) return;
    if (!cached_in_stage(v)) {
      for (const Value& a : v->args) visit(a);
    }
    order.push_back(v);
  };
  visit(root);
  return order;
}

}  // namespace coil::codegen::cpp
