// Tests for sched/in_place_calls.cpp: which operands a call listed as "_coil_may_write" writes in
// place (a buffer coil computed for that call alone) and which it still gets copies of.
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

const char* kOp = "opaque.auto_functionalized_v2_test";

Arg may_write(std::vector<int64_t> positions) {
  std::vector<Arg> items;
  for (int64_t p : positions) items.push_back(Arg::integer(p));
  return Arg::list_of(items);
}

// The call's "_coil_write_in_place" positions after scheduling, and the buffers it mutates.
std::pair<std::vector<int64_t>, std::vector<std::string>> granted(const graph::Graph& g) {
  ir::Program prog = lower::lower_graph(g);
  schedule_program(prog);
  for (const ir::ExternCall& e : prog.externs) {
    if (e.op != kOp) continue;
    for (const auto& [key, arg] : e.kwargs) {
      EXPECT_NE(key, "_coil_may_write");
      if (key != "_coil_write_in_place") continue;
      std::vector<int64_t> out;
      for (const Arg& a : arg.list) out.push_back(a.i);
      return {out, e.mutates};
    }
  }
  ADD_FAILURE() << "no call of " << kOp;
  return {};
}

TEST(InPlaceCalls, ABufferComputedForTheCallAloneIsWrittenInPlace) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 4}));
  Arg y = b.call("add", "aten.add.Tensor", {x, x}, contiguous({4, 4}));
  Arg c = b.call("af", kOp, {y}, contiguous({4, 4}), {{"_coil_may_write", may_write({0})}});
  Arg r = b.call("relu", "aten.relu.default", {c}, contiguous({4, 4}));
  auto [positions, mutates] = granted(b.finish({r}));
  EXPECT_EQ(positions, std::vector<int64_t>{0});
  EXPECT_EQ(mutates.size(), 1u);
}

TEST(InPlaceCalls, AGraphInputIsCopied) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 4}));
  Arg c = b.call("af", kOp, {x}, contiguous({4, 4}), {{"_coil_may_write", may_write({0})}});
  Arg r = b.call("relu", "aten.relu.default", {c}, contiguous({4, 4}));
  auto [positions, mutates] = granted(b.finish({r}));
  EXPECT_TRUE(positions.empty());
  EXPECT_TRUE(mutates.empty());
}

TEST(InPlaceCalls, AValueReadAgainOrReturnedIsCopied) {
  for (bool returned : {false, true}) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({4, 4}));
    Arg y = b.call("exp", "aten.exp.default", {x}, contiguous({4, 4}));
    Arg c = b.call("af", kOp, {y}, contiguous({4, 4}), {{"_coil_may_write", may_write({0})}});
    Arg sum = b.call("sum", "aten.sum.dim_IntList", {y, test::ints({0})}, contiguous({4}));
    Arg r = b.call("mul", "aten.mul.Tensor", {c, sum}, contiguous({4, 4}));
    auto [positions, mutates] = granted(returned ? b.finish({r, y}) : b.finish({r}));
    EXPECT_TRUE(positions.empty()) << "returned=" << returned;
    EXPECT_TRUE(mutates.empty());
  }
}

}  // namespace
}  // namespace coil::sched
