// When a lazy computation is stored to memory (realized) rather than recomputed in every consumer.
//
// Unrealized pointwise computations are inlined into their consumers. That saves a round trip
// through memory but recomputes the body once per consumer, and makes consumer bodies larger.
// These thresholds decide when storing is the better trade. They start from TorchInductor's
// defaults (torch/_inductor/config.py), which were tuned on real models; each says why it exists.
#pragma once

#include <string>

namespace coil::ir::realize_policy {

// A computation read by several consumers is stored when its body reads more than this many
// distinct buffers: recomputing it would multiply those reads by the number of consumers.
inline constexpr int kReuseReadsThreshold = 4;

// ... or when its body has more than this many ops: recomputation cost outgrows the saved store.
inline constexpr int kReuseOpsThreshold = 30;

// The test both thresholds make, for a body that would be computed more than once (several
// consumers, or overlapping pooling windows that read each element several times).
inline bool worth_storing_for_reuse(int ops, int buffers_read) {
  return buffers_read > kReuseReadsThreshold || ops > kReuseOpsThreshold;
}

// A pointwise body that has accumulated more than this many distinct buffer reads through
// inlining is stored even with one consumer: kernels with many input streams lose cache and
// register locality, and further inlining would only grow the read set.
inline constexpr int kAccumulatedReadsThreshold = 8;

// Any body beyond this many ops is stored, whatever its users: it bounds the size of every body
// (and so the work of each later pass) no matter how long a chain of pointwise ops is.
inline constexpr int kMaxOpsThreshold = 100;

// Reductions over fewer elements than this are unrolled into a pointwise body (a sum of a few
// loads) so they can fuse like any pointwise op.
inline constexpr int kUnrollReductionThreshold = 8;

// A pooling window (max/avg pool: the product of the kernel sizes) of at most this many slots is
// unrolled into a pointwise body; so is the gather of a pooling backward over the windows that
// may contain an input element. Inductor stops at 25 (5x5); 27 also takes the 3x3x3 window of
// 3-D pooling. Beyond it unrolled bodies grow large (max pooling costs about seven ops a slot).
inline constexpr int kUnrollPoolingWindowThreshold = 27;

// Scans (cumsum, cumprod) along a dim of at most this many elements are lowered as a reduction of
// each element's prefix (element i reduces x[0..i] under a mask): n^2 / 2 combines per row, but
// fused with the scan's producers and readers. Longer ones are scan buffers (ir::Buffer::scan), a
// kernel of their own that carries the running value along the dim. On 2 cores the prefix
// reduction's n / 2 combines per element cost more than a pass over memory past a few dozen
// elements (cumsum over the last dim of 64x128x256 float32 at 256: 31 ms, ATen's scan 1.0).
inline constexpr int kMaxPrefixReductionScan = 32;
// On a GPU every output element of a prefix reduction re-reads its prefix: at 33 elements
// (cumprod over dim 1 of 1021x33x1024 float32, H100 2026-12-05) it took 19x Inductor's time,
// at 128 and 256 31x and 52x. Past a handful the scan kernel wins.
inline constexpr int kMaxPrefixReductionScanGpu = 8;

// The longest scan lowered as a prefix reduction on `device`.
inline int max_prefix_reduction_scan(const std::string& device) {
  return device.rfind("cuda", 0) == 0 ? kMaxPrefixReductionScanGpu : kMaxPrefixReductionScan;
}

}  // namespace coil::ir::realize_policy
