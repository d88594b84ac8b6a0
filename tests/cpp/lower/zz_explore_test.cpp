#include <gtest/gtest.h>
#include <iostream>
#include "../test_graphs.h"
#include "coil/compile.h"
#include "coil/lower/lowering.h"
#include "coil/sched/schedule.h"
namespace coil::test {
void dump(const std::string& name, const graph::Graph& g) {
    std::cout << "===== " << name << "\n" << g.to_text() << "\n";
    ir::Program p = lower::lower_graph(g);
    std::cout << p.to_text();
    sched::Schedule s = sched::schedule_program(p);
    std::cout << s.post_fusion_text(p) << s.fusion_text(p) << s.schedule_text(p);
    auto r = compile_graph(g, {});
    std::string oc = r.output_code;
    std::cout << oc.substr(oc.find("def call"), oc.find("def make_inputs") - oc.find("def call"));
}
TEST(ZZExplore, Dump) {
  {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({8, 8}));
    Arg d = g.call("diagonal", "aten.diagonal.default", {x}, strided({8}, {9}));
    Arg e = g.call("exp", "aten.exp.default", {d}, contiguous({8}));
    Arg v = g.call("view", "aten.view.default", {x, ints({64})}, contiguous({64}));
    Arg m = g.call("mul", "aten.mul.Tensor", {v, farg(2.0)}, contiguous({64}));
    dump("alias", g.finish({e, m}));
  }
  {
    GraphBuilder g;
    std::vector<Arg> in;
    for (int k = 0; k < 5; ++k) in.push_back(g.input("arg" + std::to_string(k) + "_1", contiguous({8, 16})));
    Arg p = g.call("add", "aten.add.Tensor", {in[0], in[1]}, contiguous({8, 16}));
    p = g.call("add_1", "aten.add.Tensor", {p, in[2]}, contiguous({8, 16}));
    p = g.call("add_2", "aten.add.Tensor", {p, in[3]}, contiguous({8, 16}));
    p = g.call("add_3", "aten.add.Tensor", {p, in[4]}, contiguous({8, 16}));
    Arg sl = g.call("slice_1", "aten.slice.Tensor", {p, iarg(1), iarg(0), iarg(1)}, strided({8, 1}, {16, 1}));
    Arg ex = g.call("expand", "aten.expand.default", {sl, ints({8, 16})}, strided({8, 16}, {16, 0}));
    Arg s = g.call("sum_1", "aten.sum.dim_IntList", {ex, ints({1})}, contiguous({8}));
    dump("bcast_reduction", g.finish({p, s}));
  }
  {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({8, 16, 4}));
    Arg y = g.input("arg1_1", contiguous({16, 8}));
    Arg s = g.call("sum_1", "aten.sum.dim_IntList", {x, ints({2})}, contiguous({8, 16}));
    Arg p = g.call("permute", "aten.permute.default", {s, ints({1, 0})}, strided({16, 8}, {1, 16}));
    Arg a = g.call("add", "aten.add.Tensor", {p, y}, contiguous({16, 8}));
    dump("transposed_red", g.finish({a}));
  }
  {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({4, 8}));
    Arg p = g.call("permute", "aten.permute.default", {x, ints({1, 0})}, strided({8, 4}, {1, 8}));
    Arg sl = g.call("slice_1", "aten.slice.Tensor", {p, iarg(0), iarg(2), iarg(6)}, strided({4, 4}, {1, 8}, DType::Float32));
    Arg v = g.call("view", "aten.view.default", {x, ints({32})}, contiguous({32}));
  }
}
}
