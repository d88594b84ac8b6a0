// Split reductions: a reduction with few output rows and long rows runs as two.
//
// On a GPU each output row of a reduction is one program (or one lane of a block). A full sum of a
// large tensor — xnumel = 1 — would then run on one streaming multiprocessor while the other 131
// idle. This pass rewrites such a reduction B (ranges X, reduction ranges R) into
//
//   partial[X..., s]  = reduce over c < chunk of body(X, flat = s * chunk + c)     (S programs/row)
//   B[X...]           = reduce over s < S of partial[X..., s]
//
// partial accumulates in B's accumulation dtype (float32 for bfloat16 sums), so the result is the
// same function of the input (up to the reassociation every parallel reduction makes). S is the
// largest divisor of rnumel up to the split that fills the GPU: no chunk runs past the end of a
// row, so no masks are needed. Argmax/argmin keep one pass (their partials would need an index
// too). The CPU backend splits full reductions across threads inside its kernel instead.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "coil/sched/schedule.h"

namespace coil::sched {

namespace {

// Enough programs to fill the machine (132 SMs on an H100/H200, a few programs each).
constexpr int64_t kTargetPrograms = 512;
// Rows shorter than this stay one reduction: the second pass would cost more than it saves.
constexpr int64_t kMinChunk = 2048;
// Only reductions with fewer output rows than this are split.
constexpr int64_t kFewRows = 128;

std::optional<int64_t> static_product(const std::vector<Expr>& v) {
  int64_t p = 1;
  for (const Expr& e : v) {
    auto i = e.as_int();
    if (!i) return std::nullopt;
    p *= *i;
  }
  return p;
}

bool splittable(ir::ReductionType t) {
  return t != ir::ReductionType::ArgMax && t != ir::ReductionType::ArgMin;
}

// The number of partial rows per output row, or 0 for no split.
int64_t choose_split(int64_t xnumel, int64_t rnumel) {
  if (xnumel < 1 || xnumel >= kFewRows || rnumel < 2 * kMinChunk) return 0;
  int64_t most = std::min((kTargetPrograms + xnumel - 1) / xnumel, rnumel / kMinChunk);
  for (int64_t s = most; s >= 2; --s) {
    if (rnumel % s == 0) return s;
  }
  return 0;
}

// Column reductions (sums over the rows of a row-major matrix: a norm's or a bias's weight
// gradient) run XBLOCK neighbouring columns per program (triton_launch.cpp's kMinColumnXBlock and
// up), so 768 columns are 24 programs at most: ViT-B/16's LayerNorm weight gradients over 6304
// rows took 80-90 us each on the H200 (2026-12-02), Inductor's split ones 12. Such a reduction
// splits its rows into S chunks of at least kMinColumnChunk rows, S the smallest divisor of the
// row count that makes kTargetPrograms programs of kColumnsPerProgram columns; the partials are
// laid out [S, columns] so that the partial pass stays a column reduction (contiguous along x).
constexpr int64_t kColumnsPerProgram = 32;
constexpr int64_t kMinColumnChunk = 64;

int64_t choose_column_split(int64_t xnumel, int64_t rnumel) {
  int64_t programs = (xnumel + kColumnsPerProgram - 1) / kColumnsPerProgram;
  if (programs >= kTargetPrograms / 2 || rnumel < 2 * kMinColumnChunk) return 0;
  int64_t want = (kTargetPrograms + programs - 1) / programs;
  int64_t most = rnumel / kMinColumnChunk;
  for (int64_t s = want; s <= most; ++s) {
    if (rnumel % s == 0) return s;
  }
  for (int64_t s = std::min(want, most); s >= 2; --s) {  // fewer programs than wanted
    if (rnumel % s == 0) return s;
  }
  return 0;
}

// Whether b reduces over the rows of a matrix stored along its last x dim: its matrix reads (those
// that vary along both its last index and its last reduction variable) are contiguous along the
// index and none along the reduction (the scheduler's column rule, sched/scheduler.cpp).
bool column_reduction(const ir::Buffer& b) {
  size_t n = b.ranges.size(), nr = b.reduction_ranges.size();
  if (n == 0 || nr == 0) return false;
  std::vector<Expr> vars = ir::index_vars(n);
  for (size_t j = 0; j < nr; ++j) vars.push_back(ir::reduction_var(static_cast<int>(j)));
  bool x_contiguous = false, r_contiguous = false;
  for (const Access& a : buffer_reads(b)) {
    std::optional<std::pair<int64_t, int64_t>> steps =
        index_steps(a.index, vars, n - 1, n + nr - 1);
    if (!steps || steps->first == 0 || steps->second == 0) continue;
    x_contiguous |= steps->first == 1;
    r_contiguous |= steps->second == 1;
  }
  return x_contiguous && !r_contiguous;
}

}  // namespace

// How far `index` moves for one step of vars[ix] and of vars[ir]: the affine coefficients, or
// (an index with a modulo or a division: a view of q, k and v's joined gradient, `768*u0 + v0 %
// 768`) the steps from the origin, the others at 0. nullopt for other symbols (sizes).
std::optional<std::pair<int64_t, int64_t>> index_steps(const Expr& index,
                                                       const std::vector<Expr>& vars, size_t ix,
                                                       size_t ir) {
  if (auto aff = sym::as_affine(index, vars)) {
    auto cx = aff->coeffs[ix].as_int(), cr = aff->coeffs[ir].as_int();
    if (!cx || !cr) return std::nullopt;
    return std::make_pair(*cx, *cr);
  }
  std::map<std::string, int64_t> at;
  for (const Expr& v : vars) at[v.name()] = 0;
  for (const Expr& v : sym::free_symbols(index)) {
    if (!at.count(v.name())) return std::nullopt;
  }
  try {
    int64_t origin = sym::evaluate(index, at);
    at[vars[ix].name()] = 1;
    int64_t x = sym::evaluate(index, at) - origin;
    at[vars[ix].name()] = 0;
    at[vars[ir].name()] = 1;
    int64_t r = sym::evaluate(index, at) - origin;
    return std::make_pair(x, r);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void split_reductions(ir::Program& prog) {
  std::vector<ir::Buffer> out;
  out.reserve(prog.buffers.size());
  for (ir::Buffer& b : prog.buffers) {
    if (b.kind != ir::Buffer::Kind::Computed || !b.is_reduction() || !splittable(*b.reduction)) {
      out.push_back(std::move(b));
      continue;
    }
    auto xnumel = static_product(b.ranges);
    auto rnumel = static_product(b.reduction_ranges);
    // Column reductions split their rows into column partials (a row split's [columns, S]
    // partials would read each column's chunk with the rows' stride).
    bool column = xnumel && rnumel && column_reduction(b);
    int64_t split = !xnumel || !rnumel ? 0
                    : column           ? choose_column_split(*xnumel, *rnumel)
                                       : choose_split(*xnumel, *rnumel);
    if (split == 0) {
      out.push_back(std::move(b));
      continue;
    }
    int64_t chunk = *rnumel / split;
    size_t n = b.ranges.size();

    // partial: one more index variable (s: v{n} after the row's, v0 before them for columns,
    // whose other index variables move up by one) and one reduction variable (u0 = c).
    ir::Buffer partial;
    partial.name = b.name + "_partial";
    partial.kind = ir::Buffer::Kind::Computed;
    partial.layout.dtype = b.body.dtype();
    partial.layout.device = b.layout.device;
    partial.layout.sizes = b.ranges;
    if (column) {
      partial.layout.sizes.insert(partial.layout.sizes.begin(), split);
    } else {
      partial.layout.sizes.push_back(split);
    }
    partial.layout.strides = ir::Layout::contiguous_strides(partial.layout.sizes);
    partial.layout.offset = 0;
    partial.ranges = partial.layout.sizes;
    partial.reduction_ranges = {chunk};
    partial.reduction = b.reduction;
    partial.origins = b.origins;
    Expr svar = ir::index_var(column ? 0 : static_cast<int>(n));
    Expr flat = svar * chunk + ir::reduction_var(0);
    sym::ExprMap repl;
    if (column) {
      for (size_t i = 0; i < n; ++i)
        repl[ir::index_var(static_cast<int>(i))] = ir::index_var(static_cast<int>(i + 1));
    }
    Expr inner = 1;
    for (size_t j = b.reduction_ranges.size(); j-- > 0;) {
      Expr u = sym::floordiv(flat, inner);
      if (j > 0) u = sym::mod(u, b.reduction_ranges[j]);
      repl[ir::reduction_var(static_cast<int>(j))] = u;
      inner = inner * b.reduction_ranges[j];
    }
    partial.body = ir::substitute_indices(b.body, repl);
    partial.notes.push_back("split reduction: " + std::to_string(split) + " partial " +
                            ir::reduction_name(*b.reduction) + "s of " + std::to_string(chunk) +
                            " elements per output row (only " + std::to_string(*xnumel) +
                            (column ? " columns, summed over " : " output rows, rows of ") +
                            std::to_string(*rnumel) +
                            (column ? " rows: too few programs of whole columns" : "") +
                            "); a second pass combines them into " + b.name);

    std::vector<Expr> at = ir::index_vars(n);
    if (column) {
      at.insert(at.begin(), ir::reduction_var(0));
    } else {
      at.push_back(ir::reduction_var(0));
    }
    b.reduction_ranges = {split};
    b.body = ir::load(partial.name, partial.layout.dtype, partial.layout.index(at));
    b.notes.push_back("split reduction, second pass: combines the " + std::to_string(split) +
                      " partial " + ir::reduction_name(*b.reduction) + "s of " + partial.name);
    out.push_back(std::move(partial));
    out.push_back(std::move(b));
  }
  prog.buffers = std::move(out);
  prog.rebuild_index();
}

}  // namespace coil::sched
