// Scan kernels in C++ (sched::Kernel::scan: cumsum, cumprod): each x point's running combine
// along r0, stored at every step.
//
// Row form (the scan dim innermost in memory): one accumulator per x point, the x loops
// parallel, r0 innermost. Column form (x dims after the scan dim contiguous): the loops over
// those dims go innermost, so one step of the scan is a contiguous row of independent lanes that
// combines the row stored at the step before (read back from L1: each parallel chunk of the first
// inner dim covers about kScanChunkElements points), and the loop over r0 runs around them.
#include <algorithm>
#include <functional>
#include <map>
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
    case ir::ReductionType::LogSumExp:
      return "coil_logaddexp<" + ctype(d) + ">(" + a + ", " + b + ")";
    default:
      throw std::runtime_error(std::string("cpp codegen: no scan form for ") +
                               ir::reduction_name(t));
  }
}

}  // namespace

void Emitter::render_scan() {
  indent_ = 1;
  // Members in program order; a later one may read an earlier one's value at the element it
  // writes (sched::fuse_scans), which it then takes from the variable that holds it. Members
  // that are not scans (sched::fuse_scan_epilogue) are computed at each point after the scans.
  struct Scan {
    const ir::Buffer* b;
    DType t;  // the running value's
    Value body;
    Expr idx;
    std::string out, acc;
    bool scan() const { return b->is_scan(); }
  };
  std::vector<Scan> scans;
  for (const sched::Member& m : k_.members) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    auto ptr = ptr_.find(b.name);  // none: every reader is in this kernel (registers)
    scans.push_back({&b, b.body.dtype(), kernel_body(m),
                     sym::substitute(b.write_index(), member_map(m)),
                     ptr == ptr_.end() ? std::string() : ptr->second, "acc_" + b.name});
  }
  size_t nx = k_.xsizes.size();
  Expr work = k_.rsizes.at(0);
  for (const Expr& e : k_.xsizes) work = work * e;
  auto w = work.as_int();
  bool parallel = nx > 0 && (!w || *w >= kParallelMinElements);
  std::string len = sym::to_cpp(k_.rsizes[0], env_);
  auto size = [&](size_t i) { return sym::to_cpp(k_.xsizes[i], env_); };
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
  // One point of every scan: each term combined into `prev(scan)` and stored; the combined value
  // is available to the members after it.
  auto point = [&](const std::function<std::string(const Scan&)>& prev,
                   const std::function<void(const Scan&, const std::string&)>& keep) {
    memo_.emplace_back();
    std::map<std::string, std::string> saved = available_;
    for (const Scan& sc : scans) {
      std::string v = value(sc.body);
      std::string combined = sc.scan() ? combine_text(*sc.b->scan, sc.t, prev(sc), v) : v;
      std::string var = "v_" + sc.b->name;
      line("const " + ctype(sc.t) + " " + var + " = " + combined + ";");
      if (sc.scan()) keep(sc, var);
      std::string stored = sc.t == sc.b->layout.dtype
                               ? var
                               : "static_cast<" + ctype(sc.b->layout.dtype) + ">(" + var + ")";
      if (!sc.out.empty())
        line(sc.out + "[" + index_text(sc.b->name, sc.idx) + "] = " + stored + ";");
      if (sc.t == sc.b->layout.dtype) {
        available_[sc.b->name] = var;
      } else {  // its readers see the stored (rounded) value, as eager's
        std::string narrow = "n_" + sc.b->name;
        line("const " + ctype(sc.b->layout.dtype) + " " + narrow + " = " + stored + ";");
        available_[sc.b->name] = narrow;
      }
    }
    available_ = saved;
    memo_.pop_back();
  };
  if (!k_.scan_column) {
    if (parallel) {
      line("#pragma omp parallel for" +
           (nx > 1 ? " collapse(" + std::to_string(nx) + ")" : std::string()));
    }
    for (size_t i = 0; i < nx; ++i) open(loop_header("x" + std::to_string(i), "0", size(i)));
    for (const Scan& sc : scans) {
      if (sc.scan())
        line(ctype(sc.t) + " " + sc.acc + " = " + reduction_identity(*sc.b->scan, sc.t) + ";");
    }
    open(loop_header("r0", "0", len));
    point([](const Scan& sc) { return sc.acc; },
          [&](const Scan& sc, const std::string& var) { line(sc.acc + " = " + var + ";"); });
    close_all();
    memo_.pop_back();
    return;
  }
  // Column form: x0..x{p-1} lie before the scan dim, x{p}.. after it (contiguous). Each step
  // reads the one before back from the buffer: it must hold the running value's dtype.
  size_t p = static_cast<size_t>(scans[0].b->scan_dim);
  for (const Scan& sc : scans) {
    if (sc.scan() && (sc.b->layout.dtype != sc.t || static_cast<size_t>(sc.b->scan_dim) != p)) {
      throw std::logic_error("cpp codegen: column-form scan " + sc.b->name +
                             " stored narrower than its running value, or along another dim");
    }
  }
  int64_t rest = 1;
  for (size_t i = p + 1; i < nx; ++i)
    rest *= std::max<int64_t>(sym::try_size_hint(k_.xsizes[i]).value_or(1), 1);
  int64_t chunk = std::max<int64_t>(1, kScanChunkElements / rest);
  std::string xp = "x" + std::to_string(p);
  if (parallel) line("#pragma omp parallel for collapse(" + std::to_string(p + 1) + ")");
  for (size_t i = 0; i < p; ++i) open(loop_header("x" + std::to_string(i), "0", size(i)));
  open(loop_header("xc", "0", size(p), std::to_string(chunk)));
  // One step: every inner point combines its terms into the row the step before stored (or the
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
    point(
        [&](const Scan& sc) {
          if (first) return reduction_identity(*sc.b->scan, sc.t);
          Expr before = sym::substitute(sc.idx, {{sched::rvar(0), sched::rvar(0) - Expr(1)}});
          return sc.out + "[" + index_text(sc.b->name, before) + "]";
        },
        [](const Scan&, const std::string&) {});
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
