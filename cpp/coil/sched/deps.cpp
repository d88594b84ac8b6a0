// Dependency extraction: which buffers a computed body reads, at which index.
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

bool is_scatter_kernel(const ir::Program& prog, const Kernel& k) {
  for (const Member& m : k.members) {
    if (prog.buffers[m.buffer].is_scatter()) return true;
  }
  return false;
}

}  // namespace coil::sched
