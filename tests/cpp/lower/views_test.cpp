// Tests for lower/views.cpp: views are index remappings composed into the reading body. They make
// no buffers; what changes is the index every load uses.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"

namespace coil::lower {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;
using test::ints;
using test::strided;

// exp(view(x)) for one view node; the exp makes the view's index visible in a body.
struct ViewCase {
  graph::TensorMeta input;
  std::string target;
  std::vector<Arg> args;  // after the input
  graph::TensorMeta view;
};

ir::Program lower_exp_of_view(const ViewCase& c) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", c.input);
  std::vector<Arg> args = {x};
  args.insert(args.end(), c.args.begin(), c.args.end());
  Arg v = b.call("view", c.target, args, c.view);
  Arg e = b.call("exp", "aten.exp.default", {v}, contiguous(c.view.sizes));
  return lower_graph(b.finish({e}));
}

// The index of the one load in the only computed buffer; fails if there is more than one buffer.
std::string load_index(const ir::Program& p) {
  int computed = 0;
  std::string index;
  for (const ir::Buffer& b : p.buffers) {
    if (b.kind != ir::Buffer::Kind::Computed) continue;
    ++computed;
    for (const Value& v : ir::topo_order({b.body})) {
      if (v.op() == ir::Op::Load) index = v->buffer + "[" + v->index.str() + "]";
    }
  }
  EXPECT_EQ(computed, 1) << "views must not make buffers:\n" << p.to_text();
  return index;
}

TEST(Views, Permute) {
  ir::Program p = lower_exp_of_view(
      {contiguous({4, 8}), "aten.permute.default", {ints({1, 0})}, strided({8, 4}, {1, 8})});
  EXPECT_EQ(load_index(p), "arg0_1[v0 + 8*v1]");
}

TEST(Views, Permute3d) {
  ir::Program p = lower_exp_of_view({contiguous({2, 3, 4}),
                                     "aten.permute.default",
                                     {ints({2, 0, 1})},
                                     strided({4, 2, 3}, {1, 12, 4})});
  EXPECT_EQ(load_index(p), "arg0_1[v0 + 12*v1 + 4*v2]");
}

TEST(Views, SliceWithStartAndStep) {
  // x[:, 2:10:2]
  ir::Program p = lower_exp_of_view({contiguous({8, 16}),
                                     "aten.slice.Tensor",
                                     {iarg(1), iarg(2), iarg(10), iarg(2)},
                                     strided({8, 4}, {16, 2})});
  EXPECT_EQ(load_index(p), "arg0_1[16*v0 + 2*v1 + 2]");
}

TEST(Views, SliceWithNegativeStart) {
  // x[-3:]
  ir::Program p = lower_exp_of_view({contiguous({8, 4}),
                                     "aten.slice.Tensor",
                                     {iarg(0), iarg(-3), iarg(INT64_MAX)},
                                     strided({3, 4}, {4, 1})});
  EXPECT_EQ(load_index(p), "arg0_1[4*v0 + v1 + 20]");
}

TEST(Views, Expand) {
  ir::Program p = lower_exp_of_view(
      {contiguous({1, 8}), "aten.expand.default", {ints({4, 8})}, strided({4, 8}, {0, 1})});
  EXPECT_EQ(load_index(p), "arg0_1[v1]");
}

TEST(Views, ExpandAddsLeadingDims) {
  ir::Program p = lower_exp_of_view(
      {contiguous({8}), "aten.expand.default", {ints({2, 3, 8})}, strided({2, 3, 8}, {0, 0, 1})});
  EXPECT_EQ(load_index(p), "arg0_1[v2]");
}

TEST(Views, ViewFlattens) {
  ir::Program p =
      lower_exp_of_view({contiguous({4, 8}), "aten.view.default", {ints({32})}, contiguous({32})});
  EXPECT_EQ(load_index(p), "arg0_1[v0]");
}

TEST(Views, ViewSplitsADim) {
  ir::Program p = lower_exp_of_view(
      {contiguous({4, 8}), "aten.view.default", {ints({4, 2, 4})}, contiguous({4, 2, 4})});
  EXPECT_EQ(load_index(p), "arg0_1[8*v0 + 4*v1 + v2]");
}

TEST(Views, UnsqueezeAndSqueeze) {
  ir::Program p = lower_exp_of_view(
      {contiguous({4, 8}), "aten.unsqueeze.default", {iarg(1)}, contiguous({4, 1, 8})});
  EXPECT_EQ(load_index(p), "arg0_1[8*v0 + v2]");
  p = lower_exp_of_view({contiguous({4, 1, 8}), "aten.squeeze.dim", {iarg(1)}, contiguous({4, 8})});
  EXPECT_EQ(load_index(p), "arg0_1[8*v0 + v1]");
}

TEST(Views, Select) {
  ir::Program p = lower_exp_of_view(
      {contiguous({4, 8}), "aten.select.int", {iarg(0), iarg(-2)}, contiguous({8})});
  EXPECT_EQ(load_index(p), "arg0_1[v0 + 16]");
}

TEST(Views, ChainOfViewsComposesIntoOneIndex) {
  // x.permute(1, 0)[1:5].unsqueeze(0).expand(3, 4, 4)
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg t = b.call("permute", "aten.permute.default", {x, ints({1, 0})}, strided({8, 4}, {1, 8}));
  Arg s = b.call("slice_1", "aten.slice.Tensor", {t, iarg(0), iarg(1), iarg(5)},
                 strided({4, 4}, {1, 8}, DType::Float32));
  Arg u =
      b.call("unsqueeze", "aten.unsqueeze.default", {s, iarg(0)}, strided({1, 4, 4}, {32, 1, 8}));
  Arg e =
      b.call("expand", "aten.expand.default", {u, ints({3, 4, 4})}, strided({3, 4, 4}, {0, 1, 8}));
  Arg n = b.call("neg", "aten.neg.default", {e}, contiguous({3, 4, 4}));
  ir::Program p = lower_graph(b.finish({n}));
  EXPECT_EQ(load_index(p), "arg0_1[v1 + 8*v2 + 1]");
  EXPECT_EQ(p.buffers.back().origins,
            (std::set<std::string>{"expand", "neg", "permute", "slice_1", "unsqueeze"}));
}

TEST(Views, ViewOfAComputedBodyStaysLazy) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({4, 8}));
  Arg t = b.call("permute", "aten.permute.default", {e, ints({1, 0})}, strided({8, 4}, {1, 8}));
  Arg c = b.call("clone", "aten.clone.default", {t}, contiguous({8, 4}),
                 {{"memory_format", Arg::enum_text("torch.contiguous_format")}});
  ir::Program p = lower_graph(b.finish({c}));
  EXPECT_EQ(p.to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "buf0: float32[8, 4] strides=[4, 1] fixed  origins: clone, exp, permute\n"
            "  pointwise ranges=[8, 4]\n"
            "    tmp0 = load(arg0_1, v0 + 8*v1) : f32\n"
            "    tmp1 = exp(tmp0) : f32\n"
            "    store buf0[4*v0 + v1]\n"
            "outputs: buf0[8, 4]\n");
}

TEST(Views, CatSelectsItsInputByMaskedLoads) {
  graph::Graph g = test::cat();
  ASSERT_EQ(g.to_text(),
            "%arg0_1 : f32[4, 8]{8, 1} = placeholder\n"
            "%arg1_1 : f32[4, 8]{8, 1} = placeholder\n"
            "%cat : f32[4, 16]{16, 1} = aten.cat.default([%arg0_1, %arg1_1], 1)\n"
            "return (%cat,)\n");
  EXPECT_EQ(lower_graph(g).to_text(),
            "arg0_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "arg1_1: float32[4, 8] strides=[8, 1] fixed  (input)\n"
            "buf0: float32[4, 16] strides=[16, 1] fixed  origins: cat\n"
            "  pointwise ranges=[4, 16]\n"
            "    tmp0 = index(v1) : i64\n"
            "    tmp1 = constant(8) : i64\n"
            "    tmp2 = lt(tmp0, tmp1) : b8\n"
            "    tmp3 = load(arg0_1, 8*v0 + v1, mask=tmp2) : f32\n"
            "    tmp4 = logical_not(tmp2) : b8\n"
            "    tmp5 = load(arg1_1, 8*v0 + v1 - 8, mask=tmp4) : f32\n"
            "    tmp6 = where(tmp2, tmp3, tmp5) : f32\n"
            "    store buf0[16*v0 + v1]\n"
            "outputs: buf0[4, 16]\n");
}

TEST(Views, CatOfThreeAlongDim0) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({2, 4}));
  Arg y = b.input("arg1_1", contiguous({3, 4}));
  Arg z = b.input("arg2_1", contiguous({1, 4}));
  Arg c = b.call("cat", "aten.cat.default", {Arg::list_of({x, y, z})}, contiguous({6, 4}));
  ir::Program p = lower_graph(b.finish({c}));
  const ir::Buffer& out = p.buffer(p.outputs[0].ref.buffer);
  EXPECT_EQ(ir::loaded_buffers(out.body), (std::vector<std::string>{"arg0_1", "arg1_1", "arg2_1"}));
  std::string text = ir::body_to_text({out.body});
  EXPECT_NE(text.find("load(arg1_1, 4*v0 + v1 - 8, mask="), std::string::npos) << text;
  EXPECT_NE(text.find("load(arg2_1, 4*v0 + v1 - 20, mask="), std::string::npos) << text;
}

}  // namespace
}  // namespace coil::lower
