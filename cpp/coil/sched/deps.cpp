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
  if (b.kind != ir::Buffer::Kind::Computed || !b.body) return out;
  for (const ir::Value& v : ir::topo_order({b.body})) {
    if (v.op() == ir::Op::Load) out.push_back({v->buffer, v->index, false});
  }
  return out;
}

}  // namespace coil::sched
