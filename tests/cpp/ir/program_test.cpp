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
