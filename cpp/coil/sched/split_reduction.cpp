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
#include <optional>

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

}  // namespace

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
    int64_t split = xnumel && rnumel ? choose_split(*xnumel, *rnumel) : 0;
    if (split == 0) {
      out.push_back(std::move(b));
      continue;
    }
    int64_t chunk = *rnumel / split;
    size_t n = b.ranges.size();

    // partial: one more index variable (v{n} = s) and one reduction variable (u0 = c).
    ir::Buffer partial;
    partial.name = b.name + "_partial";
    partial.kind = ir::Buffer::Kind::Computed;
    partial.layout.dtype = b.body.dtype();
    partial.layout.device = b.layout.device;
    partial.layout.sizes = b.ranges;
    partial.layout.sizes.push_back(split);
    partial.layout.strides = ir::Layout::contiguous_strides(partial.layout.sizes);
    partial.layout.offset = 0;
    partial.ranges = partial.layout.sizes;
    partial.reduction_ranges = {chunk};
    partial.reduction = b.reduction;
    partial.origins = b.origins;
    Expr flat = ir::index_var(static_cast<int>(n)) * chunk + ir::reduction_var(0);
    sym::ExprMap repl;
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
                            " output rows, rows of " + std::to_string(*rnumel) +
                            "); a second pass combines them into " + b.name);

    std::vector<Expr> at = ir::index_vars(n);
    at.push_back(ir::reduction_var(0));
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
