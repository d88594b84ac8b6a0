// Row prefetch (cpp_emitter.h): the later loops of a row reduction fetch the rows its next x step
// reads from memory in its first loop, so that memory works while the cores compute.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

void Emitter::plan_row_prefetch() {
  prefetches_.clear();
  if (!vectorize_ || column() || k_.tile > 0 || scatter() || k_.xsizes.empty() || k_.rsizes.empty())
    return;
  std::vector<int> inner;  // the stages with loops over the row
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (k_.stages[i].inner) inner.push_back(static_cast<int>(i));
  }
  if (inner.size() < 2) return;
  // Enough work for memory to matter (as row groups; any under cpp_vectorize="on").
  Expr work = 1;
  for (const Expr& e : k_.xsizes) work = work * e;
  for (const Expr& e : k_.rsizes) work = work * e;
  auto w = work.as_int();
  if (!w || (*w < kParallelMinElements && min_trip_ > 1)) return;
  int64_t row_elems = 1;
  for (const Expr& e : k_.rsizes) {
    auto n = e.as_int();
    if (!n) return;
    row_elems *= *n;
  }
  std::set<std::string> computed_here;
  for (const sched::Member& m : k_.members) computed_here.insert(prog_.buffers[m.buffer].name);
  Expr x = Expr::symbol(last_x());
  Expr r = Expr::symbol("r" + std::to_string(k_.rsizes.size() - 1));
  // The first loop's reads from memory: along the row one element per step (each vector step
  // reads a whole vector of it), a row per x point.
  struct Read {
    std::string buffer;
    Expr index;
  };
  std::vector<Read> reads;
  std::set<std::string> seen;
  int64_t bytes = 0;
  for (int mi : k_.stages[inner[0]].members) {
    for (const Value& v : ir::topo_order({kernel_body(k_.members[mi])})) {
      if (v.op() != Op::Load || v->masked || ir::has_indirect(v->index)) continue;
      if (computed_here.count(v->buffer) || (!vec_type(v.dtype()) && !is_half(v.dtype()))) continue;
      Expr along_r = sym::simplify(sym::substitute(v->index, {{r, r + 1}}) - v->index, env_);
      Expr along_x = sym::simplify(sym::substitute(v->index, {{x, x + 1}}) - v->index, env_);
      if (along_r.as_int() != 1 || along_x.as_int() == 0) continue;
      std::string key = v->buffer + "@" + sym::to_cpp(sym::simplify(v->index, env_), env_);
      if (!seen.insert(key).second) continue;
      reads.push_back({v->buffer, v->index});
      bytes += row_elems * rows_ * graph::dtype_itemsize(v.dtype());
    }
  }
  if (reads.empty() || bytes > kPrefetchMaxBytes) return;
  // The next step's rows, spread over the later loops (replica g's in loop g * later / rows_).
  std::vector<int> later(inner.begin() + 1, inner.end());
  for (int64_t g = 0; g < rows_; ++g) {
    int stage = later[static_cast<size_t>(g * static_cast<int64_t>(later.size()) / rows_)];
    Expr ahead = rows_ > 1 ? Expr::symbol(last_x() + "_g" + std::to_string(g)) + rows_ : x + 1;
    for (const Read& rd : reads) {
      prefetches_.push_back(
          {rd.buffer, sym::substitute(rd.index, {{x, ahead}}), static_cast<int>(g), stage});
    }
  }
}

void Emitter::emit_row_prefetches() {
  for (const RowPrefetch& p : prefetches_) {
    if (p.stage != stage_) continue;
    const ir::Buffer& b = prog_.buffer(p.buffer);
    line("coil_prefetch(" + ptr_.at(p.buffer) + ", " +
         sym::to_cpp(sym::simplify(p.index - b.layout.offset, env_), env_) + ");");
  }
}

void Emitter::emit_tile_row_prefetches() {
  tile_prefetch_decision_.clear();
  size_t nx = k_.xsizes.size();
  if (k_.tile <= 0 || nx < 2 || scatter()) return;
  Expr xa = Expr::symbol("x" + std::to_string(nx - 2));
  Expr xb = Expr::symbol("x" + std::to_string(nx - 1));
  std::set<std::string> computed_here, seen, names;
  for (const sched::Member& m : k_.members) computed_here.insert(prog_.buffers[m.buffer].name);
  for (const sched::Member& m : k_.members) {
    for (const Value& v : ir::topo_order({kernel_body(m)})) {
      if (v.op() != Op::Load || v->masked || ir::has_indirect(v->index)) continue;
      if (computed_here.count(v->buffer) || (!vec_type(v.dtype()) && !is_half(v.dtype()))) continue;
      std::string key = v->buffer + "@" + sym::to_cpp(sym::simplify(v->index, env_), env_);
      if (tiles_.count(key) || !seen.insert(key).second) continue;  // (transposed: in the tile)
      Expr along_b = sym::simplify(sym::substitute(v->index, {{xb, xb + 1}}) - v->index, env_);
      Expr along_a = sym::simplify(sym::substitute(v->index, {{xa, xa + 1}}) - v->index, env_);
      if (along_b.as_int() != 1 || along_a.as_int() == 0) continue;
      // One prefetch per cache line of the run, kTilePrefetchRows rows ahead.
      int64_t per_line = std::max<int64_t>(1, 64 / graph::dtype_itemsize(v.dtype()));
      const ir::Buffer& b = prog_.buffer(v->buffer);
      for (int64_t at = 0; at < k_.tile; at += per_line) {
        Expr ahead = sym::substitute(
            v->index, {{xa, xa + kTilePrefetchRows}, {xb, Expr::symbol("xt1") + at}});
        line("coil_prefetch(" + ptr_.at(v->buffer) + ", " +
             sym::to_cpp(sym::simplify(ahead - b.layout.offset, env_), env_) + ");");
      }
      names.insert(v->buffer);
    }
  }
  for (const std::string& n : names)
    tile_prefetch_decision_ += (tile_prefetch_decision_.empty() ? "" : ", ") + n;
}

std::vector<std::string> Emitter::row_prefetch_decisions() const {
  if (!tile_prefetch_decision_.empty()) {
    return {"tile prefetch: each row of a tile fetches the runs of " + tile_prefetch_decision_ +
            " " + std::to_string(kTilePrefetchRows) + " rows ahead"};
  }
  if (prefetches_.empty()) return {};
  // Loops are numbered among the kernel's loops over the row, from 1.
  std::vector<int> inner;
  for (size_t i = 0; i < k_.stages.size(); ++i) {
    if (k_.stages[i].inner) inner.push_back(static_cast<int>(i));
  }
  std::set<std::string> names;
  std::set<int> stages;
  for (const RowPrefetch& p : prefetches_) {
    names.insert(p.buffer);
    stages.insert(static_cast<int>(std::find(inner.begin(), inner.end(), p.stage) - inner.begin()) +
                  1);
  }
  std::string what, where;
  for (const std::string& n : names) what += (what.empty() ? "" : ", ") + n;
  for (int s : stages) where += (where.empty() ? "" : ", ") + std::to_string(s);
  std::string next = rows_ > 1 ? "the next row group's rows" : "the next row";
  std::string loops =
      stages.size() > 1 ? "loops " + where + " fetch " : "loop " + where + " fetches ";
  return {"row prefetch: " + loops + next + " of " + what + " (read from memory by loop 1)"};
}

}  // namespace coil::codegen::cpp
