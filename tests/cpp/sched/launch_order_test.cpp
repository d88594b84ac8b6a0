// Tests for sched/launch_order.cpp: which topological order of kernels and extern calls runs,
// the program's or least peak first, and what stays in graph order whatever the memory.
#include <gtest/gtest.h>

#include <algorithm>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"
#include "coil/sched/schedule.h"

namespace coil::sched {
namespace {

using graph::Arg;
using test::contiguous;
using test::GraphBuilder;
using test::ints;
using test::strided;

struct Scheduled {
  ir::Program prog;
  Schedule s;
  // The step at which the extern call from graph node `origin` runs.
  int step_of_extern(const std::string& origin) const {
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      if (st.kind == Step::Kind::Extern && prog.externs[st.index].origin == origin)
        return static_cast<int>(i);
    }
    return -1;
  }
};

Scheduled schedule(const graph::Graph& g, bool inputs_freed) {
  Scheduled r{lower::lower_graph(g), {}};
  ScheduleOptions opts;
  opts.inputs_freed = inputs_freed;
  r.s = schedule_program(r.prog, opts);
  return r;
}

// A backward graph's shape: a weight gradient (a product of two small saved tensors, a graph
// output of 1 MB) that the program computes first, beside a large saved activation that another
// kernel reads for the last time.
graph::Graph weight_gradient_first(const std::string& activation = "relu_3") {
  GraphBuilder b;
  Arg act = b.input(activation, contiguous({512, 512}));  // a saved activation: 1 MB
  Arg x = b.input("view_2", contiguous({4, 512}));
  Arg g = b.input("tangents_1", contiguous({4, 512}));
  Arg xt =
      b.call("permute", "aten.permute.default", {x, ints({1, 0})}, strided({512, 4}, {1, 512}));
  Arg dw = b.call("mm", "aten.mm.default", {xt, g}, contiguous({512, 512}));
  Arg s = b.call("sum", "aten.sum.default", {act}, contiguous({}));
  return b.finish({dw, s});
}

TEST(LaunchOrder, AWeightGradientRunsAfterTheKernelThatFreesAnActivation) {
  // The activation is freed by the sum; with the product first, both are live at once (2 MB).
  Scheduled freed = schedule(weight_gradient_first(), /*inputs_freed=*/true);
  EXPECT_EQ(freed.s.steps.at(0).kind, Step::Kind::Kernel) << freed.s.schedule_text(freed.prog);
  EXPECT_EQ(freed.step_of_extern("mm"), 1);
  EXPECT_EQ(freed.s.order_note,
            "launch order: least peak first, estimated peak 1.02 MB (the program's order: "
            "2.02 MB)");
  // Where the caller holds the inputs (an inference or forward graph), nothing is gained: the
  // graph's order stays.
  Scheduled held = schedule(weight_gradient_first(), /*inputs_freed=*/false);
  EXPECT_EQ(held.step_of_extern("mm"), 0) << held.s.schedule_text(held.prog);
  EXPECT_EQ(held.s.order_note.rfind("launch order: the program's", 0), 0u) << held.s.order_note;
}

TEST(LaunchOrder, TheForwardsInputsInABackwardGraphAreHeldByTheCaller) {
  // The same graph with the activation named as a forward input (AOTAutograd's primals_<i>): it
  // does not free, so there is nothing to gain and the program's order stays.
  Scheduled r = schedule(weight_gradient_first("primals_3"), /*inputs_freed=*/true);
  EXPECT_EQ(r.step_of_extern("mm"), 0) << r.s.schedule_text(r.prog);
}

TEST(LaunchOrder, OfTwoProductsOfOneGradientTheOneThatFreesAnActivationRunsFirst) {
  // Attention's input projection in a backward graph: dX = d @ W (small) and dW = d^T @ act (a
  // 3 MB output that frees the saved 0.5 MB activation). The program runs dX first: 5.5 MB at
  // dW. dW first: 5.0 MB. Least peak first cannot see it (dX raises the peak less on its own);
  // a pair swap does.
  GraphBuilder b;
  Arg d = b.input("add_4", contiguous({256, 1536}));
  Arg act = b.input("view_3", contiguous({256, 512}));
  Arg w = b.input("primals_2", contiguous({1536, 512}));
  Arg dx = b.call("mm", "aten.mm.default", {d, w}, contiguous({256, 512}));
  Arg dt =
      b.call("permute", "aten.permute.default", {d, ints({1, 0})}, strided({1536, 256}, {1, 1536}));
  Arg dw = b.call("mm_1", "aten.mm.default", {dt, act}, contiguous({1536, 512}));
  Scheduled r = schedule(b.finish({dx, dw}), /*inputs_freed=*/true);
  EXPECT_EQ(r.step_of_extern("mm_1"), 0) << r.s.schedule_text(r.prog);
  EXPECT_NE(r.s.order_note.find("2 steps moved by pair swaps"), std::string::npos)
      << r.s.order_note;
}

TEST(LaunchOrder, FallbacksAndRandomDrawsKeepTheGraphsOrder) {
  // The first call makes 1 MB that stays (a graph output) from a small input; the second reads a
  // 1 MB activation for the last time and makes little. Least peak first would run the second
  // first (peak 1 MB, not 2); but fallbacks (which may draw random numbers or read state coil
  // cannot see) and random draws stay in graph order.
  for (const char* op : {"aten.my_unknown_op.default", "aten.bernoulli.p"}) {
    GraphBuilder b;
    Arg x = b.input("view_1", contiguous({4, 4}));
    Arg c = b.input("mul_2", contiguous({512, 512}));
    Arg first = b.call("first", op, {x}, contiguous({512, 512}));
    Arg second = b.call("second", op, {c}, contiguous({4, 4}));
    Scheduled r = schedule(b.finish({first, second}), /*inputs_freed=*/true);
    ASSERT_GE(r.step_of_extern("first"), 0) << r.s.schedule_text(r.prog);
    EXPECT_LT(r.step_of_extern("first"), r.step_of_extern("second")) << op;
  }
  // Plain extern calls may move: mm(x, w) makes 1 MB, the sum frees 1 MB.
  GraphBuilder b;
  Arg x = b.input("view_1", contiguous({512, 4}));
  Arg w = b.input("view_2", contiguous({4, 512}));
  Arg c = b.input("mul_2", contiguous({512, 512}));
  Arg mm = b.call("mm", "aten.mm.default", {x, w}, contiguous({512, 512}));
  Arg s = b.call("sum", "aten.sum.default", {c}, contiguous({}));
  Scheduled r = schedule(b.finish({mm, s}), /*inputs_freed=*/true);
  EXPECT_EQ(r.step_of_extern("mm"), 1) << r.s.schedule_text(r.prog);
}

}  // namespace
}  // namespace coil::sched
