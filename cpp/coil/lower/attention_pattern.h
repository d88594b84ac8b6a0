// Attention written out as matrix products and a softmax, recognized and replaced by one
// scaled_dot_product_attention call before lowering (compile.cpp), as Inductor's fuse_attention
// patterns do. softmax(q @ k^T * scale) @ v materializes the [..., S, L] scores and their softmax;
// ATen's attention kernels (flash on CPU and CUDA, memory-efficient on CUDA) never store them.
//
// The pattern, as AOTAutograd leaves it: bmm(view(expand(softmax(div|mul(view(bmm(view(expand(q)),
// view(expand(transpose(k))))), c), -1))), view(expand(v))) (a view of a strided operand is a
// clone and an _unsafe_view), where every step is read only by the
// next (so nothing else needs the scores: a training graph that saves them for its backward is
// left as it is), the expands broadcast nothing, an optional mask of the scores' dtype that
// broadcasts to them is added to the scaled scores (sdpa's attn_mask) or a bool one sets them to
// -inf (masked_fill; attn_mask is its negation), a softmax in float32 between
// products in a 16-bit dtype is cast up before and back after (autocast), and q, k, v are 4-D
// tensors of one floating dtype and device with the same batch dims. The second product becomes a
// view of the attention's result, laid out like q (what ATen's kernels return for such inputs; the
// wrapper checks).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coil/graph/graph.h"

namespace coil::lower {

// One written-out attention: the second product (`product`, a 3-D [B*H, S, Dv] bmm), the 4-D
// q, k, v it computes from, the scale of the scores and every node it replaces.
struct AttentionMatch {
  int product = -1;
  int q = -1, k = -1, v = -1;
  int mask = -1;              // an additive or bool mask (sdpa's attn_mask), or -1
  bool mask_negated = false;  // a bool mask of the scores set to -inf: attn_mask is its negation
  double scale = 1.0;
  double dropout = 0.0;  // dropout on the probabilities (sdpa's dropout_p; training graphs only)
  std::vector<int> absorbed;  // the second product included
};

// Every match, in graph order, none sharing a node. Training graphs are asked before
// AOTAutograd differentiates them (python/coil/attention_training.py): there the probabilities
// have no other reader yet, and the autograd of one attention call saves q, k, v and its
// output instead of the [B, H, S, L] probabilities. With `dropout`, the probabilities may pass
// through a dropout in training mode before the second product (native_dropout, or on the CPU
// the mul by bernoulli_(empty_like(p), 1 - prob) / (1 - prob) that dropout traces to): sdpa then
// draws its own mask, with the same distribution and another stream than eager's (the caller
// asks only where random numbers need not match eager's).
std::vector<AttentionMatch> find_attention(const graph::Graph& g, bool dropout = false);

// g with every match replaced, or nullopt where nothing matches (no copy of the graph); `notes`
// gets one line per replacement (schedule.txt).
std::optional<graph::Graph> rewrite_attention(const graph::Graph& g,
                                              std::vector<std::string>* notes = nullptr);

}  // namespace coil::lower
