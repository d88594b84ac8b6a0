// Tests for ir/program.h: index variables, Layout, buffer lookup and the text form of a Program.
#include "coil/ir/program.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace coil::ir {
namespace {

using graph::DType;

TEST(Program, IndexVariables) {
  EXPECT_EQ(index_var(0), Expr::symbol("v0"));
  EXPECT_EQ(reduction_var(2), Expr::symbol("u2"));
  EXPECT_EQ(index_vars(3), (std::vector<Expr>{index_var(0), index_var(1), index_var(2)}));
  EXPECT_TRUE(reduction_vars(0).empty());
}

TEST(Program, ContiguousStridesSkipSizeOneDims) {
  EXPECT_EQ(Layout::contiguous_strides({4, 8}), (std::vector<Expr>{8, 1}));
  EXPECT_EQ(Layout::contiguous_strides({8, 1}), (std::vector<Expr>{1, 1}));
  EXPECT_EQ(Layout::contiguous_strides({2, 1, 3}), (std::vector<Expr>{3, 3, 1}));
  EXPECT_TRUE(Layout::contiguous_strides({}).empty());
  Expr s0 = Expr::symbol("s0");
  EXPECT_EQ(Layout::contiguous_strides({4, s0}), (std::vector<Expr>{s0, 1}));
}

// A new buffer laid out like eager's tensor: its strides when dense (channels-last, permuted),
// else dense in their order (a slice's or an expand's), contiguous where that order is unknown.
TEST(Program, DenseStridesLike) {
  using V = std::vector<Expr>;
  V nchw = {2, 8, 5, 6};
  EXPECT_EQ(Layout::dense_strides_like(nchw, {240, 1, 48, 8}), (V{240, 1, 48, 8}));
  EXPECT_EQ(Layout::dense_strides_like(nchw, {240, 30, 6, 1}), (V{240, 30, 6, 1}));
  // A transposed view: dense, kept as it is.
  EXPECT_EQ(Layout::dense_strides_like({4, 8}, {1, 4}), (V{1, 4}));
  // Sliced ([:, 1:] of [4, 9]) and expanded: dense in the same order.
  EXPECT_EQ(Layout::dense_strides_like({4, 8}, {9, 1}), (V{8, 1}));
  EXPECT_EQ(Layout::dense_strides_like({4, 8}, {0, 1}), (V{8, 1}));
  EXPECT_EQ(Layout::dense_strides_like({4, 8}, {1, 5}), (V{1, 4}));
  // Size-1 dims keep eager's stride values (they decide memory-format checks in ATen).
  EXPECT_EQ(Layout::dense_strides_like({2, 8, 1, 1}, {8, 1, 8, 8}), (V{8, 1, 8, 8}));
  // Symbolic: dense strides are recognized exactly; others become contiguous.
  Expr s0 = Expr::symbol("s0");
  EXPECT_EQ(Layout::dense_strides_like({s0, 8}, {1, s0}), (V{1, s0}));
  EXPECT_EQ(Layout::dense_strides_like({s0, 8}, {16, 2}), (V{8, 1}));
  // Empty tensors: contiguous.
  EXPECT_EQ(Layout::dense_strides_like({0, 8}, {1, 0}), (V{8, 1}));
}

// Rows padded to aligned starts: 16-byte multiples, 128 from 1024 elements on.
TEST(Program, PaddedStrides) {
  using V = std::vector<Expr>;
  // bf16 [4096, 50257]: 50257 -> 50304 (128 bytes = 64 elements).
  EXPECT_EQ(Layout::padded_strides({4096, 50257}, {50257, 1}, 8, 64, 1024), (V{50304, 1}));
  // A short odd row: 16 bytes (8 elements).
  EXPECT_EQ(Layout::padded_strides({6, 5}, {5, 1}, 8, 64, 1024), (V{8, 1}));
  // Aligned already, or one row: unchanged.
  EXPECT_EQ(Layout::padded_strides({6, 16}, {16, 1}, 8, 64, 1024), (V{16, 1}));
  EXPECT_EQ(Layout::padded_strides({1, 5}, {5, 1}, 8, 64, 1024), (V{5, 1}));
  // Column-major and batched: the leading dimension of each matrix, in stride order.
  EXPECT_EQ(Layout::padded_strides({5, 6}, {1, 5}, 8, 64, 1024), (V{1, 8}));
  EXPECT_EQ(Layout::padded_strides({3, 6, 5}, {30, 5, 1}, 8, 64, 1024), (V{48, 8, 1}));
  // Symbolic sizes: unchanged.
  Expr s0 = Expr::symbol("s0");
  EXPECT_EQ(Layout::padded_strides({4, s0}, {s0, 1}, 8, 64, 1024), (V{s0, 1}));
}

TEST(Program, LayoutIndexAndNumel) {
  Layout l;
  l.sizes = {4, 8};
  l.strides = {1, 4};
  l.offset = 3;
  EXPECT_EQ(l.index(index_vars(2)), index_var(0) + index_var(1) * 4 + 3);
  EXPECT_EQ(l.numel(), Expr(32));
  EXPECT_THROW(l.index(index_vars(1)), std::logic_error);
}

TEST(Program, BufferLookup) {
  Program p;
  Buffer a;
  a.name = "a";
  a.kind = Buffer::Kind::Input;
  Buffer b;
  b.name = "buf0";
  p.buffers = {a, b};
  p.rebuild_index();
  EXPECT_EQ(p.buffer_index("buf0"), 1);
  EXPECT_EQ(p.buffer("a").kind, Buffer::Kind::Input);
  EXPECT_EQ(p.buffer_index("nope"), -1);
  EXPECT_THROW(p.buffer("nope"), std::logic_error);
  // The index is a cache: lookups stay right after buffers are reordered without a rebuild.
  std::swap(p.buffers[0], p.buffers[1]);
  EXPECT_EQ(p.buffer_index("a"), 1);
  EXPECT_EQ(p.buffer("buf0").name, "buf0");
}

TEST(Program, ToText) {
  Program p;
  Buffer in;
  in.name = "arg0_1";
  in.kind = Buffer::Kind::Input;
  in.layout = {DType::Float32, "cpu", {4, 8}, {8, 1}, 0, true};
  Buffer red;
  red.name = "buf0";
  red.layout = {DType::Float32, "cpu", {4}, {1}, 0, false};
  red.ranges = {4};
  red.reduction_ranges = {8};
  red.reduction = ReductionType::Max;
  red.body = load("arg0_1", DType::Float32, index_var(0) * 8 + reduction_var(0));
  red.origins = {"amax"};
  p.buffers = {in, red};
  p.inputs = {"arg0_1"};
  GraphOutput out;
  out.ref = {"buf0", DType::Float32, {4}, {1}, 0};
  p.outputs = {out, GraphOutput{true, {}}};
  p.rebuild_index();
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "buf0: float32[4] strides=[1] flexible  origins: amax\n"
            "  reduction max ranges=[4] reduction_ranges=[8]\n"
            "    tmp0 = load(arg0_1, u0 + 8*v0) : f32\n"
            "    store buf0[v0]\n"
            "outputs: buf0[4] None\n");
}

TEST(Program, ReductionNames) {
  EXPECT_STREQ(reduction_name(ReductionType::Sum), "sum");
  EXPECT_STREQ(reduction_name(ReductionType::ArgMin), "argmin");
  EXPECT_STREQ(reduction_name(ReductionType::All), "all");
}

}  // namespace
}  // namespace coil::ir
