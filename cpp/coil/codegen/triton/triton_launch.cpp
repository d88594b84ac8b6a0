#include "coil/codegen/triton/triton_launch.h"

#include <algorithm>
#include <stdexcept>

namespace coil::codegen {

using sched::kMinColumnXBlock;
using sched::kPersistentLongRnumel;
using sched::kPersistentMaxBlockElements;
using sched::kPersistentMaxRnumel;
using sym::Expr;

namespace {

// A reduction whose whole row fits in one block runs "persistent": the row is loaded once, kept in
// registers, and every stage reuses it (softmax reads its input once instead of three times).
// Rows up to kPersistentMaxRnumel run several rows per block; longer rows, up to
// kPersistentLongRnumel, run one row per block with up to 32 warps, so that each thread holds at
// most kPersistentElementsPerThread elements of each live value (Inductor loops over such rows
// instead, reading them once per stage). Column reductions (strided along r) run persistent only
// while a block of kMinColumnXBlock columns fits (neighbouring columns are neighbouring addresses,
// so the block's loads coalesce); longer ones loop: a block of one column would read one element
// per cache line (MobileNetV3's squeeze-excite means over 28x28 NHWC maps took 0.34 ms so).
constexpr int64_t kPersistentElementsPerThread = 32;
// Kernels over at most this many elements (x times r) keep their first candidate only: 1 MB of
// float32 moves in well under a microsecond on a current GPU, below a launch's own overhead, so
// no config can win back what compiling and benchmarking the others costs (each candidate is a
// Triton compile and a timed run on the first call).
constexpr int64_t kTuneMinElements = int64_t{1} << 18;
}  // namespace

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int64_t static_size(const Expr& e, const char* what) {
  auto v = e.as_int();
  if (!v) {
    throw std::runtime_error(std::string("triton codegen: symbolic ") + what + " (" + e.str() +
                             ") is not supported yet; dynamic shapes need the C++ backend");
  }
  return *v;
}

bool is_reduction_kernel(const sched::Kernel& k) {
  if (k.has_reduction()) return true;
  for (const sched::Stage& st : k.stages) {
    if (st.inner) return true;
  }
  return false;
}

Expr product(const std::vector<Expr>& v, size_t from) {
  Expr p = 1;
  for (size_t i = from; i < v.size(); ++i) p = p * v[i];
  return p;
}

namespace {

std::string configs_text(const std::vector<LaunchConfig>& configs) {
  std::string s;
  for (const LaunchConfig& c : configs) {
    s += (s.empty() ? "" : ", ") + std::string("(");
    if (c.yblock) s += std::to_string(c.yblock) + "x";
    s += std::to_string(c.xblock);
    if (c.rblock) s += "x" + std::to_string(c.rblock);
    s += ", " + std::to_string(c.num_warps) + " warps)";
  }
  return s;
}

void add_config(std::vector<LaunchConfig>& out, LaunchConfig c) {
  for (const LaunchConfig& o : out) {
    if (o.xblock == c.xblock && o.rblock == c.rblock && o.num_warps == c.num_warps &&
        o.yblock == c.yblock)
      return;
  }
  out.push_back(c);
}

int warps_for(int64_t elements, int lo, int hi) {
  // About 256 elements per warp (8 per thread), as a power of two in [lo, hi].
  int w = 1;
  while (w < hi && int64_t{w} * 256 < elements) w *= 2;
  return std::max(lo, w);
}

// See kTuneMinElements. The decision is recorded where it drops candidates.
void keep_first_if_small(LaunchPlan& p, int64_t elements) {
  auto& cs = p.launch.configs;
  if (cs.size() <= 1 || elements > kTuneMinElements) return;
  cs.resize(1);
  p.decisions.push_back("one config, not tuned: " + std::to_string(elements) +
                        " elements <= " + std::to_string(kTuneMinElements) +
                        ", too small for a config to win back its compile and benchmark");
}

// A pointwise kernel the scheduler tiled (a transposed read, sched::Kernel::tile): its last loop
// is the tile's columns, the loops before it (flattened) its rows.
bool wants_tiles(const sched::Kernel& k) {
  return !is_reduction_kernel(k) && k.tile > 0 && k.xsizes.size() >= 2;
}

}  // namespace

int64_t size_hint_of(const Expr& e) {
  if (auto v = e.as_int()) return *v;
  // The graph's size symbols carry hints (SizeSymbolScope): the sizes the graph was traced with.
  return std::max<int64_t>(sym::size_hint(e, sym::RangeEnv{}), 0);
}

LaunchPlan plan_launch(const sched::Kernel& k) {
  LaunchPlan p;
  // Dynamic sizes: every choice below is made for the hint (the traced size), and each stays
  // correct for every other value: masks are on wherever a size is symbolic, and a persistent
  // reduction (RBLOCK must cover the row) needs a static rnumel.
  Expr xnumel_e = product(k.xsizes), rnumel_e = product(k.rsizes);
  bool xdyn = !xnumel_e.is_int(), rdyn = !rnumel_e.is_int();
  int64_t xnumel = size_hint_of(xnumel_e);
  int64_t rnumel = size_hint_of(rnumel_e);
  p.launch.xnumel = xnumel_e;
  p.launch.rnumel = rnumel_e;
  p.dynamic = xdyn || rdyn;
  if (p.dynamic) {
    p.decisions.push_back("dynamic sizes: xnumel=" + xnumel_e.str() + ", rnumel=" + rnumel_e.str() +
                          "; configs chosen for the hint (" + std::to_string(xnumel) + ", " +
                          std::to_string(rnumel) + "), masks on for the symbolic ones");
  }
  int64_t xcap = next_pow2(std::max<int64_t>(xnumel, 1));
  auto& cs = p.launch.configs;
  if (wants_tiles(k)) {
    // Rows and columns of the tile are each contiguous for some access: Triton gives every load
    // and store its own coalesced layout and moves values between them through shared memory.
    p.launch.kind = "tiled";
    p.tiled = true;
    Expr cols_e = k.xsizes.back();
    Expr rows_e = product(std::vector<Expr>(k.xsizes.begin(), k.xsizes.end() - 1));
    int64_t cols = size_hint_of(cols_e);
    int64_t rows = size_hint_of(rows_e);
    p.launch.xnumel = cols_e;
    p.launch.ynumel = rows_e;
    int64_t ccap = next_pow2(std::max<int64_t>(cols, 1)),
            rcap = next_pow2(std::max<int64_t>(rows, 1));
    const LaunchConfig candidates[] = {{64, 0, 4, 64}, {128, 0, 4, 32}, {32, 0, 4, 128}};
    for (LaunchConfig c : candidates) {
      c.xblock = std::min(c.xblock, ccap);
      c.yblock = std::min(c.yblock, rcap);
      add_config(cs, c);
    }
    keep_first_if_small(p, xnumel);
    for (const LaunchConfig& c : cs) {
      p.xmask |= !cols_e.is_int() || cols % c.xblock != 0;
      p.ymask |= !rows_e.is_int() || rows % c.yblock != 0;
    }
    p.decisions.push_back(
        "pointwise in 2-D tiles [YBLOCK, XBLOCK]: rows are the loops before the "
        "last (ynumel=" +
        std::to_string(rows) + "), columns the last (xnumel=" + std::to_string(cols) +
        "), so both the transposed read and the store "
        "are coalesced; configs " +
        configs_text(cs));
    return p;
  }
  bool column = k.column_block > 0;  // reads contiguous along x, strided along r
  if (!is_reduction_kernel(k)) {
    // Bandwidth-bound elementwise work: large blocks (several 16-byte accesses per thread in
    // flight), a few sizes to choose from.
    p.launch.kind = "pointwise";
    const LaunchConfig candidates[] = {{1024, 0, 4}, {2048, 0, 8}, {4096, 0, 8}};
    for (LaunchConfig c : candidates) {
      c.xblock = std::min(c.xblock, xcap);
      c.num_warps = std::min(c.num_warps, warps_for(c.xblock, 1, 8));
      add_config(cs, c);
    }
    p.decisions.push_back("pointwise: x sizes flattened into one xindex (xnumel=" +
                          std::to_string(xnumel) + "), configs " + configs_text(cs));
  } else if (k.scan && k.scan_column) {
    // A scan along a strided dim (the x points after it contiguous): blocks of XBLOCK
    // neighbouring x points (coalesced) by RBLOCK steps of the scan, each block row scanned and
    // carried into the next. Few x points want tall blocks (32768x8 over dim 0 took 37x
    // Inductor's time one step per iteration, H200 2026-12-05); many want wide ones, several
    // steps per iteration keeping loads in flight (a running value that waits on one load per
    // step is bound by its latency). The candidates span both; tuning picks.
    p.launch.kind = "reduction";
    int64_t rcap = next_pow2(std::max<int64_t>(rnumel, 1));
    for (LaunchConfig c :
         {LaunchConfig{64, 16, 4}, LaunchConfig{128, 8, 4}, LaunchConfig{32, 64, 4},
          LaunchConfig{8, 256, 4}, LaunchConfig{4, 1024, 8}, LaunchConfig{256, 4, 8}}) {
      c.xblock = std::min(c.xblock, xcap);
      c.rblock = std::min(c.rblock, rcap);
      add_config(cs, c);
    }
    // Few x points: the first candidate is the tallest block (untuned kernels keep it).
    if (xnumel < 1024)
      std::stable_sort(cs.begin(), cs.end(),
                       [](const auto& a, const auto& b) { return a.rblock > b.rblock; });
    p.decisions.push_back(
        "scan strategy: column (the x points after the scan dim are "
        "contiguous): [XBLOCK, RBLOCK] blocks scanned along r, each carrying "
        "into the next; configs " +
        configs_text(cs));
  } else if (sched::persistent_on_gpu(k) && rnumel <= sched::kPersistentMaxRnumel) {
    p.launch.kind = "persistent_reduction";
    p.persistent = true;
    int64_t rb = next_pow2(std::max<int64_t>(rnumel, 1));
    // Largest XBLOCK first: the default when nothing is tuned (fewest programs). Columns keep
    // blocks of at least kMinColumnXBlock columns.
    for (int64_t xb : {64, 32, 8, 1}) {
      int64_t x = std::min(xb, xcap);
      if (x * rb > kPersistentMaxBlockElements && x > 1) continue;
      if (column ? x < std::min(kMinColumnXBlock, xcap) : xb == kMinColumnXBlock) continue;
      add_config(cs, {x, rb, warps_for(x * rb, 2, 8)});
    }
    p.decisions.push_back("reduction strategy: persistent (rnumel=" + std::to_string(rnumel) +
                          " <= " + std::to_string(kPersistentMaxRnumel) +
                          "): each row lives in one block, RBLOCK=" + std::to_string(rb) +
                          "; stages reuse the row in registers; configs " + configs_text(cs));
  } else if (sched::persistent_on_gpu(k)) {
    p.launch.kind = "persistent_reduction";
    p.persistent = true;
    int64_t rb = next_pow2(rnumel);
    int w = static_cast<int>(std::clamp<int64_t>(rb / (32 * kPersistentElementsPerThread), 4, 32));
    add_config(cs, {1, rb, w});
    if (w < 32) add_config(cs, {1, rb, w * 2});
    if (w > 4) add_config(cs, {1, rb, w / 2});
    p.decisions.push_back("reduction strategy: persistent, one row per block (rnumel=" +
                          std::to_string(rnumel) + " <= " + std::to_string(kPersistentLongRnumel) +
                          ", rows contiguous): RBLOCK=" + std::to_string(rb) +
                          ", the row is read once and stays in registers for every stage; "
                          "configs " +
                          configs_text(cs));
  } else {
    p.launch.kind = "reduction";
    // Rows (contiguous r) want a wide RBLOCK; columns (strided r) want a wide XBLOCK so that
    // neighbouring x points read neighbouring addresses, but not so wide that too few programs
    // remain to fill the GPU.
    std::vector<LaunchConfig> candidates;
    int64_t rcap = next_pow2(std::max<int64_t>(rnumel, 16));
    if (rdyn && !column && rnumel <= kPersistentMaxRnumel) {
      // Short rows of a symbolic length (attention over a varying sequence): blocks as wide as
      // the hint's row, several rows per program.
      candidates = {{std::max<int64_t>(1, kPersistentMaxBlockElements / 4 / rcap), rcap, 4},
                    {1, rcap, 4},
                    {std::max<int64_t>(1, kPersistentMaxBlockElements / rcap), rcap, 8}};
    } else if (column) {
      candidates = {{32, 128, 8}, {64, 64, 8}, {16, 256, 8}, {128, 32, 8}};
    } else {
      candidates = {{1, 2048, 8}, {1, 4096, 16}, {2, 1024, 8}};
    }
    for (LaunchConfig c : candidates) {
      c.xblock = std::min(c.xblock, xcap);
      add_config(cs, c);
    }
    p.decisions.push_back(
        "reduction strategy: looped (rnumel=" + rnumel_e.str() +
        (rdyn ? " is symbolic: a loop serves every row length" : "") + ", " +
        (column ? "columns: reads contiguous along x" : "rows") +
        "): block accumulators [XBLOCK, RBLOCK], one loop over r per stage; configs " +
        configs_text(cs));
  }
  keep_first_if_small(p, xnumel * std::max<int64_t>(rnumel, 1));
  for (const LaunchConfig& c : cs) {
    p.xmask |= xdyn || xnumel % c.xblock != 0;
    if (c.rblock) p.rmask |= rdyn || rnumel % c.rblock != 0;
  }
  // An empty row: every lane is masked (a symbolic row may be empty too).
  p.rmask |= p.launch.kind != "pointwise" && (rnumel == 0 || rdyn);
  return p;
}

}  // namespace coil::codegen
