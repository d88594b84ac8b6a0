// Unrolled short loops of a C++ pointwise kernel (cpp_emitter.h, sched::plan_short_loops): the
// body rendered once per point of the trailing loops inside the vector loop before them, each
// copy with the point substituted into the members' variables, and the copies' interleaving
// stores gathered into one contiguous run.
#include <functional>
#include <map>
#include <string>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

sym::ExprMap Emitter::member_map(const sched::Member& m) const {
  if (unrolled_at_.empty()) return m.var_map;
  sym::ExprMap out = m.var_map;
  for (auto& [key, v] : out) v = sym::substitute(v, unrolled_at_);
  return out;
}

sym::ExprMap Emitter::unrolled_point(int64_t p) const {
  sym::ExprMap at;
  for (size_t j = k_.xsizes.size(); j-- > vector_dim() + 1;) {
    int64_t n = *k_.xsizes[j].as_int();
    at[Expr::symbol("x" + std::to_string(j))] = Expr(p % n);
    p /= n;
  }
  return at;
}

void Emitter::each_unrolled_point(const std::function<void()>& f) {
  if (k_.unrolled == 0) {
    f();
    return;
  }
  int64_t points = 1;
  for (size_t j = vector_dim() + 1; j < k_.xsizes.size(); ++j) points *= *k_.xsizes[j].as_int();
  unrolled_points_ = points;
  plan_interleaved_stores(points);
  // (Each copy computes its own buffers' values: what one copy left in available_ is another
  // point's element.)
  std::map<std::string, std::string> available = available_;
  for (int64_t p = 0; p < points; ++p) {
    unrolled_at_ = unrolled_point(p);
    unrolled_sfx_ = "_u" + std::to_string(p);
    unrolled_p_ = p;
    available_ = available;
    f();
  }
  for (const auto& [buf, idx] : interleaved_) {
    line("coil_interleave<" + std::to_string(points) + ">(stage_" + buf + ", " + vec() +
         "_lanes, " + ptr_.at(buf) + " + (" + index_text(buf, idx) + "), " + vec_->count + ");");
  }
  interleaved_.clear();
  available_ = available;
  unrolled_at_.clear();
  unrolled_sfx_.clear();
  unrolled_p_ = 0;
}

void Emitter::plan_interleaved_stores(int64_t points) {
  interleaved_.clear();
  if (!vec_) return;
  for (const sched::Member& m : k_.members) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    if (!stored(b.name) || !graph::is_floating(b.layout.dtype)) continue;
    auto index_at = [&](int64_t p) {
      sym::ExprMap map = m.var_map;
      sym::ExprMap at = unrolled_point(p);
      for (auto& [key, v] : map) v = sym::substitute(v, at);
      return sym::simplify(sym::substitute(b.write_index(), map), env_);
    };
    Expr first = index_at(0);
    auto step = lane_step(first);
    if (!step || step->as_int() != points) continue;
    bool runs = true;
    for (int64_t p = 1; p < points && runs; ++p) {
      runs = sym::simplify(index_at(p) - first, env_).as_int() == p;
    }
    if (runs) interleaved_[b.name] = first;
  }
}

}  // namespace coil::codegen::cpp
