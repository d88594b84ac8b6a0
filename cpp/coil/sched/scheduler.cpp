// The scheduler: dead-buffer removal, one kernel per computed buffer, fusion, loop order, memory
// plan — and the text forms of its decisions.
#include <algorithm>
#include <sstream>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

std::string sizes_text(const std::vector<Expr>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].str();
  return s + "]";
}

// Reads of every member, as affine coefficients over the kernel's x then r variables.
std::vector<sym::Affine> read_coefficients(const ir::Program& prog, const Kernel& k) {
  std::vector<Expr> vars;
  for (size_t i = 0; i < k.xsizes.size(); ++i) vars.push_back(xvar(static_cast<int>(i)));
  for (size_t j = 0; j < k.rsizes.size(); ++j) vars.push_back(rvar(static_cast<int>(j)));
  std::vector<sym::Affine> out;
  for (const Member& m : k.members) {
    for (const Access& a : buffer_reads(prog.buffers[m.buffer])) {
      auto aff = sym::as_affine(sym::substitute(a.index, m.var_map), vars);
      if (aff) out.push_back(*aff);
    }
  }
  return out;
}

// For every read of kernel k, how far it moves along loop variable ix and along iy (x dims first,
// then r dims); reads whose steps are not numbers are left out.
std::vector<std::pair<int64_t, int64_t>> read_steps(const ir::Program& prog, const Kernel& k,
                                                    size_t ix, size_t iy) {
  std::vector<Expr> vars;
  for (size_t i = 0; i < k.xsizes.size(); ++i) vars.push_back(xvar(static_cast<int>(i)));
  for (size_t j = 0; j < k.rsizes.size(); ++j) vars.push_back(rvar(static_cast<int>(j)));
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Member& m : k.members) {
    for (const Access& a : buffer_reads(prog.buffers[m.buffer])) {
      auto st = index_steps(sym::substitute(a.index, m.var_map), vars, ix, iy);
      if (st) out.push_back(*st);
    }
  }
  return out;
}

bool at_least(const Expr& e, int64_t n) {
  return e.as_int() && *e.as_int() >= n;
}

// Column reductions (sum over dim 0 of a row-major matrix) read memory with a large stride along
// r. Running a block of neighbouring x points together, innermost, makes every read contiguous
// and vectorizable. Transposed pointwise reads are handled by tiling the two innermost dims so
// both the strided and the contiguous side stay in cache.
//
// The block is as wide as keeps two blocks for two threads, up to kMaxColumnBlock: each thread
// then reads long contiguous runs of every row. `x.sum(0)` of 4096x4096 float32 on 2 cores
// (2026-12-01, kernels timed interleaved): blocks of 64 / 256 / 512 / 1024 / 2048 columns took
// 5.3 / 6.9 / 5.2 / 3.8 / 3.6 ms, where the block divides the row (a constant trip count for
// the lane loop; 4.5-5.1 ms at 2048 without); eager 4.6-5.4 ms.
//
// A kernel whose only x dim is a row of at most kMaxWholeRow points and whose reductions are all
// sums takes the whole row as its one block instead: the codegen then splits the rows across
// threads (each thread sums its own rows into accumulators of its own, added at the end), so
// every thread streams one contiguous range of memory. Blocks of 1024 columns of a 4096-column
// row read 4 KB runs 16 KB apart: each run a new page, which the hardware prefetchers do not
// cross (`x.sum(0)` of 4096x4096 float32 at 17.8 GB/s, a row sum of the same bytes at 43).
constexpr int64_t kMinColumnBlock = 64;
constexpr int64_t kMaxColumnBlock = 1024;
constexpr int64_t kMaxWholeRow = 16384;

// Whether kernel k's rows can be split across threads as whole-row blocks (see above): one x dim
// of more than 1 point (the others 1), at most kMaxWholeRow of them, sums only, no scatter.
bool whole_row_block(const ir::Program& prog, const Kernel& k) {
  size_t nx = k.xsizes.size();
  for (size_t i = 0; i + 1 < nx; ++i) {
    if (k.xsizes[i] != Expr(1)) return false;
  }
  auto n = k.xsizes[nx - 1].as_int();
  if (!n || *n > kMaxWholeRow) return false;
  for (const Member& m : k.members) {
    const ir::Buffer& b = prog.buffers[m.buffer];
    if (b.is_scatter()) return false;
    if (b.is_reduction() && *b.reduction != ir::ReductionType::Sum) return false;
  }
  return true;
}

// Columns per block for a last x dim of n (a hint for a symbolic one).
int64_t column_block(const Expr& n) {
  int64_t size = std::max<int64_t>(sym::size_hint(n, sym::RangeEnv{}), 1);
  if (size >= 2 * kMaxColumnBlock) return kMaxColumnBlock;
  int64_t half = (size / 2 + 15) / 16 * 16;  // two blocks, whole vectors of 16 floats
  return std::max(kMinColumnBlock, half);
}
// Tiles of 512 x[n-2] points by 64 x[n-1] points: the transposed side is read in runs of 2 KiB
// per row (64 rows a tile), the vector loop runs over rows of 64 points. `x.t() + y` at
// 4096x4096 float32 on 2 cores, a standalone kernel with streaming stores (2026-12-03): 9.7 ms
// with 128x128 tiles, 8.6 with 512x64 (copy of the same bytes 6.2); 16 / 32 / 64 / 128 square
// tiles took 21.3 / 18.9 / 13.5 / 11.9 ms in the quick set of 2026-12-01.
constexpr int64_t kTransposeTileRows = 512;
constexpr int64_t kTransposeTileColumns = 64;

void choose_cpu_strategy(const ir::Program& prog, Kernel& k) {
  size_t nx = k.xsizes.size();
  if (nx == 0) return;
  std::vector<sym::Affine> reads = read_coefficients(prog, k);
  if (k.has_reduction()) {
    // A column reduction reads runs of its innermost x loop: x loops that every index sees as
    // one (amax over dim 0 of a contiguous [32, 64, 64, 33] tensor) are merged first, so that
    // its blocks are whole rather than 33 columns and a tail (perf fuzzer seed 5001: 1.42x
    // Inductor's time).
    auto last = sym::try_size_hint(k.xsizes[nx - 1]);
    if (nx >= 2 && last && *last < 2 * kMaxColumnBlock) {
      if (auto before = merge_contiguous_x_loops(prog, k)) {
        k.decisions.push_back("x loops " + sizes_text(*before) + " merged into " +
                              sizes_text(k.xsizes) + " (every index sees them as one loop)");
        nx = k.xsizes.size();
        reads = read_coefficients(prog, k);
      }
    }
    if (!at_least(k.xsizes[nx - 1], 16)) return;
    size_t r_last = nx + k.rsizes.size() - 1;
    // The matrix reads decide: those that vary along both x[n-1] and r. A per-row vector
    // (LayerNorm's mean and rstd in its backward, read at [r]) or a per-column parameter is small
    // beside them, and cached. The weight gradients of a norm's backward sum its [rows, C]
    // operands over the rows while reading the rows' statistics: judged by every read, the
    // statistics made it a row kernel whose each program read one column 768 elements apart
    // (ViT-B/16's backward: 0.23 ms a kernel, 8x a coalesced one's time, H200 2026-12-02).
    // (Steps rather than coefficients: a read of a view with a modulo, q, k and v's joined
    // gradient at `768*r0 + x0 % 768`, moves by 1 along x all the same.)
    std::vector<std::pair<int64_t, int64_t>> steps = read_steps(prog, k, nx - 1, r_last);
    bool x_contiguous = false, r_contiguous = false, matrix = false;
    for (int pass = 0; pass < 2 && !matrix; ++pass) {
      for (const auto& [sx, sr] : steps) {
        if (pass == 0 && (sx == 0 || sr == 0)) continue;
        matrix = true;
        x_contiguous |= sx == 1;
        r_contiguous |= sr == 1;
      }
    }
    if (!x_contiguous || r_contiguous) return;
    if (whole_row_block(prog, k)) {
      k.column_block = *k.xsizes[nx - 1].as_int();
      k.decisions.push_back("reduction strategy: column (reads are contiguous along x" +
                            std::to_string(nx - 1) + ", strided along r): the whole row of " +
                            std::to_string(k.column_block) +
                            " x points at a time, innermost; rows split across threads");
      return;
    }
    k.column_block = column_block(k.xsizes[nx - 1]);
    k.decisions.push_back(
        "reduction strategy: column (reads are contiguous along x" + std::to_string(nx - 1) +
        ", strided along r): " + std::to_string(k.column_block) + " x points at a time, innermost");
    return;
  }
  if (nx < 2 || !at_least(k.xsizes[nx - 1], 16) || !at_least(k.xsizes[nx - 2], 16)) return;
  for (const sym::Affine& a : reads) {
    // (A read the same along x[n-1], such as a per-channel parameter, is no transpose.)
    if (a.coeffs[nx - 2] == Expr(1) && a.coeffs[nx - 1] != Expr(1) && a.coeffs[nx - 1] != Expr(0)) {
      k.tile = kTransposeTileColumns;
      k.tile_rows = kTransposeTileRows;
      k.decisions.push_back("tiling " + std::to_string(kTransposeTileRows) + "x" +
                            std::to_string(kTransposeTileColumns) + " over x" +
                            std::to_string(nx - 2) + ", x" + std::to_string(nx - 1) +
                            ": a read is contiguous along x" + std::to_string(nx - 2) +
                            " (transposed)");
      return;
    }
  }
}

}  // namespace

void remove_dead_buffers(ir::Program& prog, Schedule& s) {
  std::set<std::string> live;
  for (const ir::GraphOutput& o : prog.outputs) {
    if (o.is_tensor()) live.insert(o.ref.buffer);
  }
  // Extern calls are kept (and with them their inputs): they are few, and a fallback op may be
  // one whose effects coil cannot see.
  for (const ir::ExternCall& e : prog.externs) {
    for (const ir::TensorRef& t : e.tensors) live.insert(t.buffer);
    for (const std::string& o : e.outputs) live.insert(o);
  }
  for (size_t i = prog.buffers.size(); i-- > 0;) {
    const ir::Buffer& b = prog.buffers[i];
    if (!live.count(b.name)) continue;
    for (const Access& a : buffer_reads(b)) live.insert(a.buffer);
  }
  std::vector<ir::Buffer> kept;
  for (ir::Buffer& b : prog.buffers) {
    if (live.count(b.name) || !b.is_generated()) {
      kept.push_back(std::move(b));
    } else {
      s.removed.push_back(b.name);
    }
  }
  prog.buffers = std::move(kept);
  prog.rebuild_index();
}

void choose_loop_order(const ir::Program& prog, Schedule& s) {
  // Pointwise kernels: the dimension with the smallest stride in the stores goes innermost, so
  // the inner loop walks memory contiguously (vectorizable, one cache line after another).
  for (Kernel& k : s.kernels) {
    // A scatter's updates run in the order of their index tensor, as eager's do (it decides which
    // duplicate wins a store, and the rounding of reduced-precision sums).
    if (is_scatter_kernel(prog, k) || k.scan) continue;
    order_loops(prog, k);
    choose_cpu_strategy(prog, k);
  }
}

void order_loops(const ir::Program& prog, Kernel& k) {
  {
    if (k.has_reduction() || k.xsizes.size() < 2) return;
    std::vector<Expr> xs;
    for (size_t i = 0; i < k.xsizes.size(); ++i) xs.push_back(xvar(static_cast<int>(i)));
    std::vector<int64_t> score(xs.size(), 0);  // sum of |stride| over stores; larger = outer
    bool known = false;
    for (const Member& m : k.members) {
      const ir::Buffer& b = prog.buffers[m.buffer];
      auto aff = sym::as_affine(sym::substitute(b.write_index(), m.var_map), xs);
      if (!aff) continue;
      for (size_t i = 0; i < xs.size(); ++i) {
        auto c = aff->coeffs[i].as_int();
        if (c) score[i] += *c < 0 ? -*c : *c;
      }
      known = true;
      break;  // the first store decides; fused members share its iteration order
    }
    if (!known) return;
    std::vector<size_t> order(xs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    // A read that is contiguous along some other variable (a transpose) gets that variable next
    // to the innermost one, so that a 2-D tile over the last two loops serves both sides.
    std::string transposed;
    for (const Member& m : k.members) {
      for (const Access& a : buffer_reads(prog.buffers[m.buffer])) {
        auto aff = sym::as_affine(sym::substitute(a.index, m.var_map), xs);
        // Transposed: varies along the innermost loop, but not contiguously. (A read the same
        // along it, such as a per-channel parameter, is loaded once per row: no transpose.)
        if (!aff || aff->coeffs[order.back()] == Expr(1) || aff->coeffs[order.back()] == Expr(0)) {
          continue;
        }
        auto it = std::find_if(order.begin(), order.end() - 1,
                               [&](size_t i) { return aff->coeffs[i] == Expr(1); });
        if (it == order.end() - 1) continue;
        size_t j = *it;
        order.erase(it);
        order.insert(order.end() - 1, j);
        transposed = "; x" + std::to_string(j) + " next to it: " + a.buffer +
                     " is read contiguously along it";
        break;
      }
      if (!transposed.empty()) break;
    }
    bool identity = true;
    for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == i;
    if (identity) return;
    sym::ExprMap rename;
    std::vector<Expr> sizes;
    for (size_t pos = 0; pos < order.size(); ++pos) {
      rename[xs[order[pos]]] = xvar(static_cast<int>(pos));
      sizes.push_back(k.xsizes[order[pos]]);
    }
    for (Member& m : k.members) {
      for (auto& [key, v] : m.var_map) v = sym::substitute(v, rename);
    }
    k.xsizes = sizes;
    std::string perm;
    for (size_t i : order) perm += (perm.empty() ? "" : ", ") + std::to_string(i);
    k.decisions.push_back("loop order (" + perm + "): smallest store stride innermost" +
                          transposed);
  }
}

Kernel scan_kernel(const ir::Program& prog, int index) {
  const ir::Buffer& b = prog.buffers[index];
  Kernel k;
  k.scan = true;
  k.decisions = b.notes;
  Member m;
  m.buffer = index;
  m.inner = true;
  for (size_t d = 0; d < b.ranges.size(); ++d) {
    Expr var = ir::index_var(static_cast<int>(d));
    if (static_cast<int>(d) == b.scan_dim) {
      m.var_map[var] = rvar(0);
      k.rsizes.push_back(b.ranges[d]);
      continue;
    }
    m.var_map[var] = xvar(static_cast<int>(k.xsizes.size()));
    k.xsizes.push_back(b.ranges[d]);
  }
  k.members.push_back(m);
  // Column form where one step along the scan moves more than one element of the output and
  // the last x dim is contiguous (see Kernel::scan_column).
  std::vector<Expr> vars;
  for (size_t i = 0; i < k.xsizes.size(); ++i) vars.push_back(xvar(static_cast<int>(i)));
  vars.push_back(rvar(0));
  auto aff = sym::as_affine(sym::substitute(b.write_index(), m.var_map), vars);
  bool r_contiguous = aff && aff->coeffs.back() == Expr(1);
  bool x_contiguous = aff && vars.size() >= 2 && aff->coeffs[vars.size() - 2] == Expr(1);
  k.scan_column = !r_contiguous && x_contiguous;
  k.decisions.push_back(std::string("scan ") + ir::reduction_name(*b.scan) + " along r0 (dim " +
                        std::to_string(b.scan_dim) + "): " +
                        (k.scan_column ? "column form (the x points after the scan dim are "
                                         "contiguous: they go side by side)"
                                       : "row form (each x point's row scanned along r0)"));
  return k;
}

bool persistent_on_gpu(const Kernel& k) {
  if (k.scan && k.scan_column) return false;
  bool inner = k.has_reduction();
  for (const Stage& st : k.stages) inner |= st.inner;
  if (!inner) return false;
  Expr r = 1, x = 1;
  for (const Expr& e : k.rsizes) r = r * e;
  for (const Expr& e : k.xsizes) x = x * e;
  auto rnumel = r.as_int();
  if (!rnumel) return false;  // RBLOCK must cover the row
  auto pow2 = [](int64_t n) {
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
  };
  bool column = k.column_block > 0;
  int64_t xhint = std::max<int64_t>(sym::try_size_hint(x).value_or(1), 1);
  if (*rnumel <= kPersistentMaxRnumel &&
      (!column || pow2(std::max<int64_t>(*rnumel, 1)) * std::min(kMinColumnXBlock, pow2(xhint)) <=
                      kPersistentMaxBlockElements))
    return true;
  return *rnumel <= kPersistentLongRnumel && !column;
}

Schedule schedule_program(ir::Program& prog, const ScheduleOptions& opts) {
  Schedule s;
  remove_dead_buffers(prog, s);
  grant_in_place_writes(prog);
  if (opts.gpu) split_reductions(prog);
  for (size_t i = 0; i < prog.buffers.size(); ++i) {
    const ir::Buffer& b = prog.buffers[i];
    if (!b.is_generated()) continue;
    if (b.is_scan()) {
      s.kernels.push_back(scan_kernel(prog, static_cast<int>(i)));
      continue;
    }
    Kernel k;
    k.xsizes = b.ranges;
    k.rsizes = b.reduction_ranges;
    k.decisions = b.notes;
    Member m;
    m.buffer = static_cast<int>(i);
    m.inner = b.is_reduction();
    for (size_t d = 0; d < b.ranges.size(); ++d)
      m.var_map[ir::index_var(static_cast<int>(d))] = xvar(static_cast<int>(d));
    for (size_t d = 0; d < b.reduction_ranges.size(); ++d) {
      m.var_map[ir::reduction_var(static_cast<int>(d))] = rvar(static_cast<int>(d));
    }
    k.members.push_back(m);
    s.kernels.push_back(std::move(k));
  }
  fuse(prog, s);
  choose_loop_order(prog, s);
  if (!opts.gpu) {
    for (Kernel& k : s.kernels) plan_short_loops(prog, k);
  }
  if (opts.gpu) {
    for (Kernel& k : s.kernels) k.rows_in_registers = persistent_on_gpu(k);
  }
  plan_memory(prog, s, opts.inputs_freed);
  return s;
}

std::string Schedule::fusion_text(const ir::Program& prog) const {
  (void)prog;
  std::ostringstream out;
  out << "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n";
  for (const FusionVerdict& v : verdicts) {
    out << "round " << v.round << ": {" << v.first << "} + {" << v.second
        << "}: " << (v.fused ? "fused: " : "not fused: ") << v.reason << "\n";
  }
  if (!removed.empty()) {
    out << "# removed before fusion (no readers):";
    for (const auto& r : removed) out << " " << r;
    out << "\n";
  }
  return out.str();
}

std::string Schedule::schedule_text(const ir::Program& prog) const {
  std::ostringstream out;
  if (!prog.layout_decision.empty()) out << "layout: " << prog.layout_decision << "\n";
  if (!order_note.empty()) out << order_note << "\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (st.kind == Step::Kind::Extern) {
      const ir::ExternCall& e = prog.externs[st.index];
      out << "step " << i << ": " << (e.is_fallback ? "fallback " : "extern ") << e.op << " -> ";
      for (const auto& o : e.outputs) out << o << " ";
      if (!e.scalar_output.empty()) out << e.scalar_output << " (a number) ";
      out << "(node " << e.origin << ")";
      if (e.has_effects) out << ", side effects: after the previous such call";
      if (!e.decision.empty()) out << ", " << e.decision;
      out << "\n";
      continue;
    }
    const Kernel& k = kernels[st.index];
    out << "step " << i << ": kernel " << k.id << " over x" << sizes_text(k.xsizes);
    if (k.has_reduction()) out << " r" << sizes_text(k.rsizes);
    out << "\n";
    if (k.has_reduction() && k.column_block == 0) {
      out << "  reduction strategy: looped (each x point accumulates over r in registers)\n";
    }
    for (size_t si = 0; si < k.stages.size(); ++si) {
      const Stage& stage = k.stages[si];
      out << "  stage " << si << (stage.inner ? " (loop over r):" : " (per x point):");
      for (int mi : stage.members) {
        const ir::Buffer& b = prog.buffers[k.members[mi].buffer];
        const BufferPlan& plan = buffers.at(b.name);
        out << " " << b.name
            << (b.is_reduction() ? "[" + std::string(ir::reduction_name(*b.reduction)) + "]" : "")
            << (plan.stored ? "" : "(local)");
      }
      out << "\n";
    }
    for (const std::string& d : k.decisions) out << "  " << d << "\n";
  }
  out << "memory:\n";
  for (const auto& [name, plan] : buffers) {
    if (!plan.stored) continue;
    out << "  " << name << ": allocated at step " << plan.alloc_step;
    if (!plan.reuses.empty()) out << (plan.in_place ? " in place of " : " reusing ") << plan.reuses;
    out << (plan.free_step >= 0 ? ", freed after step " + std::to_string(plan.free_step)
                                : ", kept (output)")
        << "\n";
  }
  return out.str();
}

std::string Schedule::post_fusion_text(const ir::Program& prog) const {
  std::ostringstream out;
  for (const Kernel& k : kernels) {
    out << "kernel " << k.id << ": x" << sizes_text(k.xsizes);
    if (k.has_reduction()) out << " r" << sizes_text(k.rsizes);
    out << "\n";
    for (const Member& m : k.members) {
      const ir::Buffer& b = prog.buffers[m.buffer];
      out << "  " << b.name << (m.inner ? " (inner)" : " (outer)") << " vars:";
      std::vector<std::pair<std::string, Expr>> vars;
      for (const auto& [key, v] : m.var_map) vars.push_back({key.str(), v});
      std::sort(vars.begin(), vars.end());
      for (const auto& [key, v] : vars) out << " " << key << "=" << v.str();
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace coil::sched
