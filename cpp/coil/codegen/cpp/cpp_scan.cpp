// Scan kernels in C++ (sched::Kernel::scan: cumsum, cumprod): each x point's running combine
// along r0, stored at every step.
//
// Row form (the scan dim innermost in memory): one accumulator per x point, the x loops
// parallel, r0 innermost. Column form (x dims after the scan dim contiguous): the loops over
// those dims go innermost, so one step of the scan is a contiguous row of independent lanes that
// combines the row stored at the step before (read back from L1: each parallel chunk of the first
// inner dim covers about kScanChunkElements points), and the loop over r0 runs around them.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"

namespace coil::codegen::cpp {

namespace {

// Points of the inner x dims one column-form step combines: 16 KiB of float32, so the row the
// step before stored is still in L1 when it is read back.
constexpr int64_t kScanChunkElements = 4096;

std::string combine_text(ir::ReductionType t, DType d, const std::string& a, const std::string& b) {
  switch (t) {
    case ir::ReductionType::Sum:
      return a + " + " + b;
    case ir::ReductionType::Prod:
      return a + " * " + b;
    case ir::ReductionType::Max:
      return "coil_max<" + ctype(d) + ">(" + a + ", " + b + ")";
    case ir::ReductionType::Min:
      return "coil_min<" + ctype(d) + ">(" + a + ", " + b + ")";
    default:
      throw std::runtime_error(std::string("cpp codegen: no scan form for ") +
                               ir::reduction_name(t));
  }
}

}  // namespace

void Emitter::render_scan() {
  indent_ = 1;
  const sched::Member& m = k_.members.at(0);
  const ir::Buffer& b = prog_.buffers[m.buffer];
  DType t = b.body.dtype();  // the running value's
  ir::ReductionType rt = *b.scan;
  size_t nx = k_.xsizes.size();
  Expr work = k_.rsizes.at(0);
  for (const Expr& e : k_.xsizes) work = work * e;
  auto w = work.as_int();
  bool parallel = nx > 0 && (!w || *w >= kParallelMinElements);
  std::string len = sym::to_cpp(k_.rsizes[0], env_);
  auto size = [&](size_t i) { return sym::to_cpp(k_.xsizes[i], env_); };
  Value body = kernel_body(m);
  Expr idx = sym::substitute(b.write_index(), member_map(m));
  std::string out = ptr_.at(b.name);
  memo_.emplace_back();
  int opened = 0;
  auto open = [&](const std::string& header) {
    line(header);
    ++indent_;
    ++opened;
  };
  auto close_all = [&] {
    for (; opened > 0; --opened) {
      --indent_;
      line("}");
    }
  };
  auto term = [&] {  // the scanned term at the current point, in a scope of its own
    memo_.emplace_back();
    std::string v = value(body);
    memo_.pop_back();
    return v;
  };
  if (!k_.scan_column) {
    if (parallel) {
      line("#pragma omp parallel for" +
           (nx > 1 ? " collapse(" + std::to_string(nx) + ")" : std::string()));
    }
    for (size_t i = 0; i < nx; ++i) open(loop_header("x" + std::to_string(i), "0", size(i)));
    line(ctype(t) + " acc = " + reduction_identity(rt, t) + ";");
    open(loop_header("r0", "0", len));
    std::string v = term();
    line("acc = " + combine_text(rt, t, "acc", v) + ";");
    std::string stored = t == b.layout.dtype ? std::string("acc")
                                             : "static_cast<" + ctype(b.layout.dtype) + ">(acc)";
    line(out + "[" + index_text(b.name, idx) + "] = " + stored + ";");
    close_all();
    memo_.pop_back();
    return;
  }
  // Column form: x0..x{p-1} lie before the scan dim, x{p}.. after it (contiguous). Each step
  // reads the one before back from the buffer: it must hold the running value's dtype.
  if (b.layout.dtype != t) {
    throw std::logic_error("cpp codegen: column-form scan " + b.name +
                           " stored narrower than its running value");
  }
  size_t p = static_cast<size_t>(b.scan_dim);
  int64_t rest = 1;
  for (size_t i = p + 1; i < nx; ++i)
    rest *= std::max<int64_t>(sym::try_size_hint(k_.xsizes[i]).value_or(1), 1);
  int64_t chunk = std::max<int64_t>(1, kScanChunkElements / rest);
  std::string xp = "x" + std::to_string(p);
  if (parallel) line("#pragma omp parallel for collapse(" + std::to_string(p + 1) + ")");
  for (size_t i = 0; i < p; ++i) open(loop_header("x" + std::to_string(i), "0", size(i)));
  open(loop_header("xc", "0", size(p), std::to_string(chunk)));
  Expr before = sym::substitute(idx, {{sched::rvar(0), sched::rvar(0) - Expr(1)}});
  // One step: every inner point combines its term into the row the step before stored (or the
  // identity, at r0 == 0).
  auto step = [&](bool first) {
    int inner = 0;
    auto open_inner = [&](const std::string& header) {
      line(header);
      ++indent_;
      ++inner;
    };
    if (p + 1 == nx) line("#pragma omp simd");
    open_inner(loop_header(
        xp, "xc", "std::min<int64_t>(xc + " + std::to_string(chunk) + ", " + size(p) + ")"));
    for (size_t i = p + 1; i < nx; ++i) {
      if (i + 1 == nx) line("#pragma omp simd");
      open_inner(loop_header("x" + std::to_string(i), "0", size(i)));
    }
    std::string v = term();
    std::string prev =
        first ? reduction_identity(rt, t) : out + "[" + index_text(b.name, before) + "]";
    line(out + "[" + index_text(b.name, idx) + "] = " + combine_text(rt, t, prev, v) + ";");
    for (; inner > 0; --inner) {
      --indent_;
      line("}");
    }
  };
  line("{");
  ++indent_;
  line("const int64_t r0 = 0;");
  step(true);
  --indent_;
  line("}");
  open(loop_header("r0", "1", len));
  step(false);
  close_all();
  memo_.pop_back();
}

}  // namespace coil::codegen::cpp
