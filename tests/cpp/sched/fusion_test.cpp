// Tests for sched/fusion.cpp: which kernels fuse, how the guest's variables map into the host's
// iteration space, and the verdict recorded for every pair considered.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"
#include "coil/sched/schedule.h"

namespace coil::sched {
namespace {

using graph::Arg;
using graph::DType;
using test::barg;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;
using test::ints;
using test::strided;

struct Scheduled {
  ir::Program prog;
  Schedule s;

  std::vector<std::string> members(size_t k) const {
    std::vector<std::string> out;
    for (const Member& m : s.kernels.at(k).members) out.push_back(prog.buffers[m.buffer].name);
    return out;
  }
  const Member& member(const std::string& buffer) const {
    for (const Kernel& k : s.kernels) {
      for (const Member& m : k.members) {
        if (prog.buffers[m.buffer].name == buffer) return m;
      }
    }
    throw std::logic_error("no member " + buffer);
  }
  // "u0=r0 v0=x0": a member's variable map, sorted by variable.
  std::string vars(const std::string& buffer) const {
    std::map<std::string, std::string> sorted;
    for (const auto& [k, v] : member(buffer).var_map) sorted[k.str()] = v.str();
    std::string out;
    for (const auto& [k, v] : sorted) out += (out.empty() ? "" : " ") + k + "=" + v;
    return out;
  }
};

Scheduled schedule(const graph::Graph& g) {
  Scheduled r{lower::lower_graph(g), {}};
  r.s = schedule_program(r.prog);
  return r;
}

TEST(Fusion, SoftmaxOverTheLastDimIsOneKernelWithThreeStages) {
  Scheduled r = schedule(test::softmax());
  ASSERT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
  const Kernel& k = r.s.kernels[0];
  EXPECT_EQ(r.members(0), (std::vector<std::string>{"buf0", "buf1", "buf2"}));
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{8}));
  EXPECT_EQ(k.rsizes, (std::vector<Expr>{32}));
  // max, then the sum of exp(x - max), then the output: each loop needs the previous one done.
  ASSERT_EQ(k.stages.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(k.stages[i].inner) << i;
    EXPECT_EQ(k.stages[i].members, (std::vector<int>{static_cast<int>(i)}));
  }
  EXPECT_EQ(r.vars("buf2"), "v0=x0 v1=r0");
  EXPECT_EQ(r.s.fusion_text(r.prog),
            "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n"
            "round 1: {buf1} + {buf2}: fused: shares 1088 bytes\n"
            "round 2: {buf0} + {buf1,buf2}: fused: shares 1056 bytes\n");
}

TEST(Fusion, LayerNormIsOneKernel) {
  Scheduled r = schedule(test::layer_norm());
  ASSERT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
  EXPECT_EQ(r.members(0).size(), 6u);
  for (const FusionVerdict& v : r.s.verdicts) EXPECT_TRUE(v.fused) << v.reason;
  // mean and rstd ([8, 1] outputs) run once per row, after the loops.
  const Kernel& k = r.s.kernels[0];
  EXPECT_FALSE(k.stages.back().inner);
  EXPECT_EQ(r.vars("buf4"), "v0=x0 v1=0");
}

TEST(Fusion, VarMeanIsOneKernel) {
  Scheduled r = schedule(test::var_mean());
  EXPECT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
}

// A chain of `n` pointwise ops whose intermediate results are all stored: each one is a graph
// output as well as the next op's input.
graph::Graph stored_chain(int n) {
  GraphBuilder b;
  Arg acc = b.input("arg0_1", contiguous({8, 16}));
  std::vector<Arg> outs;
  const char* ops[] = {"exp", "neg", "abs", "sin", "cos", "tanh"};
  for (int i = 0; i < n; ++i) {
    acc = b.call(ops[i % 6] + std::string("_") + std::to_string(i),
                 std::string("aten.") + ops[i % 6] + ".default", {acc}, contiguous({8, 16}));
    outs.push_back(acc);
  }
  return b.finish(outs);
}

TEST(Fusion, FiveChainedPointwiseOpsAreOneKernel) {
  // Inlined by lowering: one buffer, one kernel, nothing to fuse.
  Scheduled chain = schedule(test::pointwise_chain());
  EXPECT_EQ(chain.s.kernels.size(), 1u);
  EXPECT_TRUE(chain.s.verdicts.empty());
  // Five stored results (each is an output): five buffers, fused into one kernel.
  Scheduled stored = schedule(stored_chain(5));
  ASSERT_EQ(stored.s.kernels.size(), 1u) << stored.s.fusion_text(stored.prog);
  EXPECT_EQ(stored.members(0).size(), 5u);
  EXPECT_EQ(stored.s.kernels[0].stages.size(), 1u);
}

TEST(Fusion, SumOverDim0AndItsConsumerFuseByMatchingCoefficients) {
  // sub reads x[v0, v1] and sum[v1]; the reduction kernel is x[8] r[16]. Row-major flattening
  // would map sub's (v0, v1) to (x0 * 16 + r0) // 8, ...; matching the coefficient of v1 in
  // the read of buf0 with x0's in its write gives v1 = x0, and then v0 = r0.
  Scheduled r = schedule(test::sum_dim0());
  ASSERT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
  EXPECT_EQ(r.vars("buf0"), "u0=r0 v0=x0");
  EXPECT_EQ(r.vars("buf1"), "v0=r0 v1=x0");
  EXPECT_TRUE(r.member("buf1").inner);
  ASSERT_EQ(r.s.kernels[0].stages.size(), 2u);
  EXPECT_EQ(r.s.post_fusion_text(r.prog),
            "kernel 0: x[8] r[16]\n"
            "  buf0 (inner) vars: u0=r0 v0=x0\n"
            "  buf1 (inner) vars: v0=r0 v1=x0\n");
}

TEST(Fusion, TwoReductionsOfTheSameInputFuseAsSiblings) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({8}));
  Arg m = b.call("amax", "aten.amax.default", {x, ints({1})}, contiguous({8}));
  Scheduled r = schedule(b.finish({s, m}));
  ASSERT_EQ(r.s.kernels.size(), 1u);
  EXPECT_EQ(r.members(0), (std::vector<std::string>{"buf0", "buf1"}));
  // Independent reductions share one loop.
  ASSERT_EQ(r.s.kernels[0].stages.size(), 1u);
  EXPECT_EQ(r.s.kernels[0].stages[0].members, (std::vector<int>{0, 1}));
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_TRUE(r.s.verdicts[0].fused);
  EXPECT_EQ(r.s.verdicts[0].reason, "shares 1024 bytes");  // both read all of x: 8 * 32 * 4
}

TEST(Fusion, APointwiseSiblingReadingWhatTheReductionLoopReadsFusesOutsideIt) {
  // amax over 7 rows (unrolled into a pointwise body by its lowering) and argmax over the same
  // rows (a reduction): the pointwise reads, at each x point, the 7 elements the reduction's
  // loop reads there; it runs after that loop, per x point, and x is read from memory once.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({7, 4, 64}));
  Arg v = b.call("amax", "aten.amax.default", {x, ints({0})}, contiguous({4, 64}));
  Arg i = b.call("argmax", "aten.argmax.default", {x, iarg(0)}, contiguous({4, 64}, DType::Int64));
  Scheduled r = schedule(b.finish({v, i}));
  ASSERT_EQ(r.s.kernels.size(), 1u);
  EXPECT_EQ(r.members(0), (std::vector<std::string>{"buf0", "buf1"}));
  EXPECT_TRUE(r.member("buf0").inner);  // (buf0: argmax's reduction; buf1: amax's body)
  EXPECT_FALSE(r.member("buf1").inner);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_TRUE(r.s.verdicts[0].fused) << r.s.verdicts[0].reason;
}

TEST(Fusion, ReductionsOverDifferentSizesDoNotFuse) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({16, 32}));
  Arg rows = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({16}));
  Arg cols = b.call("sum_2", "aten.sum.dim_IntList", {x, ints({0})}, contiguous({32}));
  Scheduled r = schedule(b.finish({rows, cols}));
  EXPECT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_EQ(r.s.verdicts[0].reason, "reductions over different sizes [16] x r[32] vs [32] x r[16]");
}

TEST(Fusion, PointwiseOverADifferentSpaceDoesNotFuse) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({8}));
  Arg row = b.call("select", "aten.select.int", {x, iarg(0), iarg(0)}, contiguous({32}));
  Arg e = b.call("exp", "aten.exp.default", {row}, contiguous({32}));
  Scheduled r = schedule(b.finish({s, e}));
  EXPECT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_EQ(r.s.verdicts[0].reason, "iteration spaces differ: [8] x r[32] vs [32]");
  EXPECT_EQ(r.s.fusion_text(r.prog),
            "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n"
            "round 1: {buf0} + {buf1}: not fused: iteration spaces differ: [8] x r[32] vs [32]\n");
}

TEST(Fusion, ConsumerReadingAReductionTransposedFusesThroughAPermutation) {
  // sum(x, 2) is a [8, 16] buffer; add reads it transposed. The mapping gx0 = x1, gx1 = x0 is a
  // permutation of the reduction kernel's x space, so the add runs after the loop, per point.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 16, 16}));
  Arg y = b.input("arg1_1", contiguous({16, 8}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({2})}, contiguous({8, 16}));
  Arg t = b.call("permute", "aten.permute.default", {s, ints({1, 0})}, strided({16, 8}, {1, 16}));
  Arg a = b.call("add", "aten.add.Tensor", {t, y}, contiguous({16, 8}));
  Scheduled r = schedule(b.finish({a}));
  ASSERT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
  EXPECT_EQ(r.vars("buf1"), "v0=x1 v1=x0");
  EXPECT_FALSE(r.member("buf1").inner);
}

TEST(Fusion, ConsumerReadingAProducerThatIsNotABijectionDoesNotFuse) {
  // p = a + b + c + d + e is stored (two users, five reads). sum(p[:, 0:1].expand(8, 16), 1)
  // reads only p's first column: mapping the reduction's (x0, r0) onto p's space by p's index
  // (16 * x0) gives p's v1 = 0 for every r0, which would compute one column of p 16 times and
  // never the others.
  GraphBuilder b;
  std::vector<Arg> in;
  for (int k = 0; k < 5; ++k)
    in.push_back(b.input("arg" + std::to_string(k) + "_1", contiguous({8, 16})));
  Arg p = in[0];
  for (int k = 1; k < 5; ++k) {
    p = b.call(k == 1 ? "add" : "add_" + std::to_string(k - 1), "aten.add.Tensor", {p, in[k]},
               contiguous({8, 16}));
  }
  Arg col = b.call("slice_1", "aten.slice.Tensor", {p, iarg(1), iarg(0), iarg(1)},
                   strided({8, 1}, {16, 1}));
  Arg e = b.call("expand", "aten.expand.default", {col, ints({8, 16})}, strided({8, 16}, {16, 0}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {e, ints({1})}, contiguous({8}));
  Scheduled r = schedule(b.finish({p, s}));
  EXPECT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_EQ(r.s.verdicts[0].reason, "mapping is not a bijection");
}

TEST(Fusion, AnExternBetweenTwoKernelsPreventsACycle) {
  // relu is stored for mm; add reads mm's result and recomputes relu from x. Fusing relu's kernel
  // with add's would put mm both before and after the fused kernel.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg w = b.input("arg1_1", contiguous({8, 8}));
  Arg relu = b.call("relu", "aten.relu.default", {x}, contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {relu, w}, contiguous({8, 8}));
  Arg add = b.call("add", "aten.add.Tensor", {mm, relu}, contiguous({8, 8}));
  Scheduled r = schedule(b.finish({add}));
  EXPECT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_NE(r.s.verdicts[0].reason.find("cycle"), std::string::npos) << r.s.verdicts[0].reason;
  ASSERT_EQ(r.s.steps.size(), 3u);
  EXPECT_EQ(r.s.steps[1].kind, Step::Kind::Extern);
}

// CrossViT's class-token exchange, reduced (timm crossvit_9_240 ran eagerly: "plan_memory:
// kernels and extern calls form a cycle"): two kernels over the same rows of one input, the first
// read by an attention call of one branch, the second reading an attention call of the other
// branch. No buffer joins the two calls, but fallbacks run in graph order among themselves, so
// the first call comes before the second: fused, the siblings' kernel would run both before the
// first call and after the second.
// Graph: x, y f32[8, 8]; relu(x) -> f1 = fallback(relu); f2 = fallback(y); add(x, f2).
TEST(Fusion, SiblingsJoinedThroughTheOrderOfTwoFallbacksDoNotFuse) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg y = b.input("arg1_1", contiguous({8, 8}));
  Arg relu = b.call("relu", "aten.relu.default", {x}, contiguous({8, 8}));
  Arg f1 = b.call("first", "test.unlowered_op.default", {relu}, contiguous({8, 8}));
  Arg f2 = b.call("second", "test.unlowered_op.default", {y}, contiguous({8, 8}));
  Arg add = b.call("add", "aten.add.Tensor", {x, f2}, contiguous({8, 8}));
  Scheduled r = schedule(b.finish({f1, add}));
  ASSERT_EQ(r.prog.externs.size(), 2u);
  ASSERT_TRUE(r.prog.externs[0].is_fallback && r.prog.externs[1].is_fallback);
  // The two calls share no buffer; the dependencies still order them.
  UnitGraph g = unit_graph(r.prog, r.s.kernels);
  size_t nk = r.s.kernels.size();
  EXPECT_EQ(g.succs.at(nk), (std::set<int>{static_cast<int>(nk + 1)}));

  EXPECT_EQ(r.s.kernels.size(), 2u) << r.s.fusion_text(r.prog);
  EXPECT_EQ(r.s.fusion_text(r.prog),
            "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n"
            "round 1: {buf0} + {buf3}: not fused: would create a cycle through extern "
            "test.unlowered_op.default (first) -> extern test.unlowered_op.default (second)\n");
  // Every unit has its step: relu, the two calls in graph order, then add.
  ASSERT_EQ(r.s.steps.size(), 4u) << r.s.schedule_text(r.prog);
  EXPECT_EQ(r.s.steps[0].kind, Step::Kind::Kernel);
  EXPECT_EQ(r.s.steps[1].kind, Step::Kind::Extern);
  EXPECT_EQ(r.s.steps[1].index, 0);
  EXPECT_EQ(r.s.steps[2].kind, Step::Kind::Extern);
  EXPECT_EQ(r.s.steps[2].index, 1);
  EXPECT_EQ(r.s.steps[3].kind, Step::Kind::Kernel);
}

// The same through a mutation: mul reads x before copy_ overwrites it, add reads copy_'s result.
// Fused, the kernel would read x after copy_ overwrote it: the call would run before the kernel
// that reads its result, and no edge would be left to say the kernel also reads the old x.
// Graph: x, y, w f32[8]; mul(x, w); c = copy_(x, y); add(c, w).
TEST(Fusion, SiblingsJoinedThroughAMutationDoNotFuse) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8}));
  Arg y = b.input("arg1_1", contiguous({8}));
  Arg w = b.input("arg2_1", contiguous({8}));
  Arg mul = b.call("mul", "aten.mul.Tensor", {x, w}, contiguous({8}));
  Arg c = b.call("copy_", "aten.copy_.default", {x, y}, contiguous({8}));
  Arg add = b.call("add", "aten.add.Tensor", {c, w}, contiguous({8}));
  Scheduled r = schedule(b.finish({mul, add}));
  ASSERT_EQ(r.prog.externs.size(), 1u);
  ASSERT_EQ(r.prog.externs[0].mutates, std::vector<std::string>{"arg0_1"});
  EXPECT_EQ(r.s.kernels.size(), 2u) << r.s.fusion_text(r.prog);
  EXPECT_EQ(r.s.fusion_text(r.prog),
            "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n"
            "round 1: {buf1} + {buf2}: not fused: would create a cycle through extern "
            "aten.copy_.default (copy_)\n");
  ASSERT_EQ(r.s.steps.size(), 3u) << r.s.schedule_text(r.prog);
  EXPECT_EQ(r.s.steps[1].kind, Step::Kind::Extern);
}

// Two results of one small input, each read by a matrix product far apart: fused, the second
// would be computed before the first product and held across it, to save re-reading 256 bytes.
TEST(Fusion, SiblingsApartInTheOrderDoNotFuseWhenTheyWouldHoldMoreThanTheyShare) {
  GraphBuilder b;
  Arg s = b.input("arg0_1", contiguous({64}));
  Arg w = b.input("arg1_1", contiguous({64, 64}));
  Arg col = b.call("unsqueeze", "aten.unsqueeze.default", {s, iarg(1)}, contiguous({64, 1}));
  Arg e1 = b.call("add", "aten.add.Tensor", {col, s}, contiguous({64, 64}));
  Arg mm = b.call("mm", "aten.mm.default", {e1, w}, contiguous({64, 64}));
  Arg e2 = b.call("mul", "aten.mul.Tensor", {col, s}, contiguous({64, 64}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {e2, mm}, contiguous({64, 64}));
  Scheduled r = schedule(b.finish({mm1}));
  EXPECT_EQ(r.s.kernels.size(), 2u) << r.s.fusion_text(r.prog);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_NE(r.s.verdicts[0].reason.find("siblings apart in the order"), std::string::npos)
      << r.s.verdicts[0].reason;
  // Side by side (nothing between them), the same siblings fuse.
  GraphBuilder b2;
  s = b2.input("arg0_1", contiguous({64}));
  col = b2.call("unsqueeze", "aten.unsqueeze.default", {s, iarg(1)}, contiguous({64, 1}));
  e1 = b2.call("add", "aten.add.Tensor", {col, s}, contiguous({64, 64}));
  e2 = b2.call("mul", "aten.mul.Tensor", {col, s}, contiguous({64, 64}));
  mm = b2.call("mm", "aten.mm.default", {e1, e2}, contiguous({64, 64}));
  Scheduled r2 = schedule(b2.finish({mm}));
  EXPECT_EQ(r2.s.kernels.size(), 1u) << r2.s.fusion_text(r2.prog);
}

TEST(Fusion, VerdictsNameTheBuffersOfBothKernels) {
  Scheduled r = schedule(stored_chain(3));
  ASSERT_FALSE(r.s.verdicts.empty());
  for (const FusionVerdict& v : r.s.verdicts) {
    EXPECT_GE(v.round, 1);
    EXPECT_FALSE(v.first.empty());
    EXPECT_FALSE(v.second.empty());
    EXPECT_EQ(v.first.find(' '), std::string::npos) << "comma-separated: " << v.first;
  }
  ASSERT_EQ(r.s.kernels.size(), 1u);
  EXPECT_EQ(r.s.kernels[0].decisions.size(), r.s.verdicts.size());
  EXPECT_EQ(r.s.kernels[0].decisions[0].rfind("fused {", 0), 0u) << r.s.kernels[0].decisions[0];
}

TEST(Fusion, SameGraphSameKernels) {
  for (const auto& named : test::snapshot_graphs()) {
    Scheduled a = schedule(named.build());
    Scheduled b = schedule(named.build());
    EXPECT_EQ(a.s.fusion_text(a.prog), b.s.fusion_text(b.prog)) << named.name;
    EXPECT_EQ(a.s.post_fusion_text(a.prog), b.s.post_fusion_text(b.prog)) << named.name;
  }
}

// ---- indirect indices ----

// y = exp(x) is stored (as_strided needs it in memory); z = gather(y, 0, idx) reads it at
// data-dependent rows.
graph::Graph gather_of_stored(const std::string& target, std::vector<Arg> extra) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({6, 4}));
  Arg idx = b.input("arg1_1", contiguous({6, 4}, DType::Int64));
  Arg y = b.call("exp", "aten.exp.default", {x}, contiguous({6, 4}));
  Arg v = b.call("as_strided", "aten.as_strided.default", {y, ints({6, 4}), ints({4, 1})},
                 contiguous({6, 4}));
  std::vector<Arg> args = {v, iarg(0), idx};
  args.insert(args.end(), extra.begin(), extra.end());
  Arg z = b.call("g", target, args, contiguous({6, 4}));
  return b.finish({z});
}

TEST(Fusion, AReadThroughAnIndirectIndexDoesNotFuseWithItsProducer) {
  Scheduled r = schedule(gather_of_stored("aten.gather.default", {}));
  ASSERT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_EQ(r.s.verdicts[0].reason,
            "reads buf0 through an indirect index (a data-dependent position)");
}

TEST(Fusion, TheIndexTensorsProducerFusesIntoTheGather) {
  // c = abs(i) is stored (an output) and read by the gather at the index it was written at.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({6, 4}));
  Arg i = b.input("arg1_1", contiguous({6, 4}, DType::Int64));
  Arg c = b.call("abs", "aten.abs.default", {i}, contiguous({6, 4}, DType::Int64));
  Arg g = b.call("gather", "aten.gather.default", {x, iarg(0), c}, contiguous({6, 4}));
  Scheduled r = schedule(b.finish({c, g}));
  EXPECT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
}

TEST(Fusion, AScatterKernelRunsAlone) {
  Scheduled r = schedule(test::index_put_accumulate());
  ASSERT_EQ(r.s.kernels.size(), 2u);
  ASSERT_EQ(r.s.verdicts.size(), 1u);
  EXPECT_FALSE(r.s.verdicts[0].fused);
  EXPECT_EQ(r.s.verdicts[0].reason,
            "a scatter kernel runs alone (it stores at data-dependent positions)");
}
}  // namespace
}  // namespace coil::sched
