// Tests for sched/memory_plan.cpp: launch order, which buffers are stored, when they are freed,
// and which freed buffers later allocations reuse (from the pool, or in place).
#include <gtest/gtest.h>

#include <stdexcept>

#include "../test_graphs.h"
#include "coil/lower/lowering.h"
#include "coil/sched/schedule.h"

namespace coil::sched {
namespace {

using graph::Arg;
using graph::DType;
using graph::TensorMeta;
using test::contiguous;
using test::GraphBuilder;
using test::ints;
using test::strided;

struct Scheduled {
  ir::Program prog;
  Schedule s;
  const BufferPlan& plan(const std::string& b) const { return s.buffers.at(b); }
};

Scheduled schedule(const graph::Graph& g) {
  Scheduled r{lower::lower_graph(g), {}};
  r.s = schedule_program(r.prog);
  return r;
}

// mm -> exp(mm.T) (stored for the next mm) -> mm -> neg(mm.T): every kernel reads its input
// transposed, so nothing can be written in place and freed buffers go to the pool.
graph::Graph transposed_mm_chain() {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg t = b.call("permute", "aten.permute.default", {mm, ints({1, 0})}, strided({8, 8}, {1, 8}));
  Arg e = b.call("exp", "aten.exp.default", {t}, contiguous({8, 8}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {e, x}, contiguous({8, 8}));
  Arg t1 =
      b.call("permute_1", "aten.permute.default", {mm1, ints({1, 0})}, strided({8, 8}, {1, 8}));
  Arg n = b.call("neg", "aten.neg.default", {t1}, contiguous({8, 8}));
  return b.finish({n});
}

// mm -> relu -> mm -> relu: each relu reads the mm result at the index it writes.
graph::Graph mm_relu_chain() {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg r = b.call("relu", "aten.relu.default", {mm}, contiguous({8, 8}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {r, x}, contiguous({8, 8}));
  Arg r1 = b.call("relu_1", "aten.relu.default", {mm1}, contiguous({8, 8}));
  return b.finish({r1});
}

TEST(MemoryPlan, BuffersUsedOnlyInsideTheirKernelAreNotStored) {
  Scheduled r = schedule(test::softmax());
  // The max and the sum are per-row values kept in registers; only the output is stored.
  EXPECT_FALSE(r.plan("buf0").stored);
  EXPECT_FALSE(r.plan("buf1").stored);
  EXPECT_TRUE(r.plan("buf2").stored);
  Scheduled chain = schedule(mm_relu_chain());
  for (const auto& [name, plan] : chain.s.buffers) EXPECT_TRUE(plan.stored) << name;
}

// p = a + b + c + d + e (stored: two users, five reads); s = sum(p, 1); out = p / s, over [8, 32].
graph::Graph sum_then_divide() {
  GraphBuilder b;
  std::vector<Arg> in;
  for (int k = 0; k < 5; ++k)
    in.push_back(b.input("arg" + std::to_string(k) + "_1", contiguous({8, 32})));
  Arg p = in[0];
  for (int k = 1; k < 5; ++k) {
    p = b.call("add_" + std::to_string(k), "aten.add.Tensor", {p, in[k]}, contiguous({8, 32}));
  }
  Arg s =
      b.call("sum_1", "aten.sum.dim_IntList", {p, ints({1}), test::barg(true)}, contiguous({8, 1}));
  return b.finish({b.call("div", "aten.div.Tensor", {p, s}, contiguous({8, 32}))});
}

TEST(MemoryPlan, InnerValuesReadInALaterLoopAreStored) {
  // sum_then_divide: all three fuse into one kernel x[8] r[32]: p and s in the first r loop, out in
  // a second one (it needs s finished). p is a per-(x, r) value, so the second loop must read it
  // from memory.
  Scheduled r = schedule(sum_then_divide());
  ASSERT_EQ(r.s.kernels.size(), 1u) << r.s.fusion_text(r.prog);
  ASSERT_EQ(r.s.kernels[0].stages.size(), 2u) << r.s.schedule_text(r.prog);
  EXPECT_EQ(r.s.post_fusion_text(r.prog),
            "kernel 0: x[8] r[32]\n"
            "  buf0 (inner) vars: v0=x0 v1=r0\n"
            "  buf1 (inner) vars: u0=r0 v0=x0\n"
            "  buf2 (inner) vars: v0=x0 v1=r0\n");
  EXPECT_TRUE(r.plan("buf0").stored);
  EXPECT_EQ(r.plan("buf0").free_step, 0);  // freed after its own kernel
  EXPECT_FALSE(r.plan("buf1").stored);     // the sum is a per-row value: a register
}

TEST(MemoryPlan, GpuRowsInRegistersNeedNoBufferForInnerValues) {
  // sum_then_divide scheduled for a GPU: a row of 32 fits one block and stays in registers across
  // the stages (persistent), so p is never written to memory (T5's safe softmax stored its
  // probabilities, 64 MB per layer, only to read them back from registers).
  graph::Graph g = sum_then_divide();
  Scheduled gpu{lower::lower_graph(g), {}};
  ScheduleOptions opts;
  opts.gpu = true;
  gpu.s = schedule_program(gpu.prog, opts);
  ASSERT_EQ(gpu.s.kernels.size(), 1u) << gpu.s.fusion_text(gpu.prog);
  EXPECT_TRUE(gpu.s.kernels[0].rows_in_registers);
  EXPECT_FALSE(gpu.plan("buf0").stored) << gpu.s.post_fusion_text(gpu.prog);
  EXPECT_TRUE(schedule(g).plan("buf0").stored);  // the CPU loops over the row once per stage
}

TEST(MemoryPlan, OutputsAreStoredAndNeverFreed) {
  for (const auto& named : test::snapshot_graphs()) {
    Scheduled r = schedule(named.build());
    for (const ir::GraphOutput& o : r.prog.outputs) {
      if (o.is_none || r.prog.buffer(o.ref.buffer).kind == ir::Buffer::Kind::Input) continue;
      const BufferPlan& p = r.plan(o.ref.buffer);
      EXPECT_TRUE(p.stored) << named.name << " " << o.ref.buffer;
      EXPECT_EQ(p.free_step, -1) << named.name << " " << o.ref.buffer;
    }
  }
}

TEST(MemoryPlan, StoredIntermediatesAreFreedAfterTheirLastReader) {
  Scheduled r = schedule(transposed_mm_chain());
  ASSERT_EQ(r.s.steps.size(), 4u);
  // mm (step 0) -> buf0, read by step 1; exp -> buf1, read by mm_1 (step 2); mm_1 -> buf2, read
  // by step 3.
  EXPECT_EQ(r.plan("buf0").alloc_step, 0);
  EXPECT_EQ(r.plan("buf0").free_step, 1);
  EXPECT_EQ(r.plan("buf1").alloc_step, 1);
  EXPECT_EQ(r.plan("buf1").free_step, 2);
  EXPECT_EQ(r.plan("buf2").free_step, 3);
  EXPECT_EQ(r.plan("buf3").free_step, -1);
}

TEST(MemoryPlan, AFreedBufferOfEqualDtypeAndSizeIsReused) {
  Scheduled r = schedule(transposed_mm_chain());
  // At step 3 the pool holds buf0 (freed after step 1) and buf1 (after step 2); the most
  // recently freed is taken.
  EXPECT_EQ(r.plan("buf3").reuses, "buf1");
  EXPECT_FALSE(r.plan("buf3").in_place);
  // Nothing was free yet when buf1 was allocated.
  EXPECT_EQ(r.plan("buf1").reuses, "");
  EXPECT_EQ(r.s.schedule_text(r.prog),
            "launch order: the program's, estimated peak 512 bytes (least peak first: 512 "
            "bytes)\n"
            "step 0: extern aten.mm.default -> buf0 (node mm)\n"
            "step 1: kernel 0 over x[8, 8]\n"
            "  stage 0 (per x point): buf1\n"
            "step 2: extern aten.mm.default -> buf2 (node mm_1)\n"
            "step 3: kernel 1 over x[8, 8]\n"
            "  stage 0 (per x point): buf3\n"
            "memory:\n"
            "  buf0: allocated at step 0, freed after step 1\n"
            "  buf1: allocated at step 1, freed after step 2\n"
            "  buf2: allocated at step 2, freed after step 3\n"
            "  buf3: allocated at step 3 reusing buf1, kept (output)\n");
}

// An output that stores one address more than once (expanded: stride 0 along a dim of 8) is never
// written over an operand: the second row's store would read the operand's element after the
// first row's store overwrote it (fuzzer --train, seed 74173: a gram product's gradient came out
// as the product added 8 times over).
TEST(MemoryPlan, AnExpandedOutputIsNotWrittenInPlace) {
  GraphBuilder b;
  Arg a = b.input("arg0_1", contiguous({1, 2}));
  Arg g = b.input("arg1_1", contiguous({1, 1}));
  Arg mm = b.call("mm", "aten.mm.default", {g, a}, contiguous({1, 2}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {g, a}, contiguous({1, 2}));
  Arg add = b.call("add", "aten.add.Tensor", {mm1, mm}, contiguous({1, 2}));
  Arg e = b.call("expand", "aten.expand.default", {add, ints({8, 2})}, strided({8, 2}, {0, 1}));
  Scheduled r = schedule(b.finish({e}));
  for (const auto& [name, plan] : r.s.buffers) {
    EXPECT_FALSE(plan.in_place) << name << "\n" << r.s.schedule_text(r.prog);
  }
}

// A buffer freed before an extern call is not held for a kernel after it: the library allocates
// its result itself, and the held buffer would sit beside it at its peak. (mm -> a row sum of
// exp(mm.T) -> mm with it -> mul: buf0, mm's 8x8 result, is freed after step 1, the extern runs
// at step 2, and the 8x8 product at step 3 allocates anew instead of taking buf0.)
TEST(MemoryPlan, NoFreedBufferIsHeldAcrossAnExternCall) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg t = b.call("permute", "aten.permute.default", {mm, ints({1, 0})}, strided({8, 8}, {1, 8}));
  Arg e = b.call("exp", "aten.exp.default", {t}, contiguous({8, 8}));
  Arg sum = b.call("sum_1", "aten.sum.dim_IntList", {e, ints({1})}, contiguous({8}));
  Arg v = b.call("view", "aten.view.default", {sum, ints({8, 1})}, contiguous({8, 1}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {x, v}, contiguous({8, 1}));
  Arg m = b.call("mul", "aten.mul.Tensor", {mm1, x}, contiguous({8, 8}));
  Scheduled r = schedule(b.finish({m}));
  std::string text = r.s.schedule_text(r.prog);
  EXPECT_NE(text.find("buf0: allocated at step 0, freed after step 1\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("reusing buf0"), std::string::npos) << text;
  // An extern's own input, freed after it, is still reused by a later kernel.
  Scheduled chain = schedule(transposed_mm_chain());
  EXPECT_EQ(chain.plan("buf3").reuses, "buf1");
}

TEST(MemoryPlan, BuffersOfADifferentDtypeOrSizeAreNotReused) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg t = b.call("permute", "aten.permute.default", {mm, ints({1, 0})}, strided({8, 8}, {1, 8}));
  // Same size, other dtype.
  Arg c = b.call("_to_copy", "aten._to_copy.default", {t}, contiguous({8, 8}, DType::Float64),
                 {{"dtype", Arg::dtype_of(DType::Float64)}});
  // Same dtype, other size.
  Arg v = b.call("view", "aten.view.default", {c, ints({64})}, contiguous({64}, DType::Float64));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {c, c}, contiguous({8, 8}, DType::Float64));
  Arg sl =
      b.call("slice_1", "aten.slice.Tensor", {mm1, test::iarg(0), test::iarg(0), test::iarg(4)},
             strided({4, 8}, {8, 1}, DType::Float64));
  Arg n = b.call("neg", "aten.neg.default", {sl}, contiguous({4, 8}, DType::Float64));
  Scheduled r = schedule(b.finish({v, n}));
  for (const auto& [name, plan] : r.s.buffers) {
    if (plan.reuses.empty()) continue;
    const ir::Layout& mine = r.prog.buffer(name).layout;
    const ir::Layout& theirs = r.prog.buffer(plan.reuses).layout;
    EXPECT_EQ(mine.dtype, theirs.dtype) << name << " reuses " << plan.reuses;
    EXPECT_EQ(mine.numel(), theirs.numel()) << name << " reuses " << plan.reuses;
  }
}

TEST(MemoryPlan, AStoreAtTheIndexOfTheLastReadGoesInPlace) {
  Scheduled r = schedule(mm_relu_chain());
  EXPECT_EQ(r.plan("buf1").reuses, "buf0");
  EXPECT_TRUE(r.plan("buf1").in_place);
  EXPECT_EQ(r.plan("buf3").reuses, "buf2");
  EXPECT_TRUE(r.plan("buf3").in_place);
  EXPECT_NE(r.s.schedule_text(r.prog).find("buf3: allocated at step 3 in place of buf2, kept "
                                           "(output)\n"),
            std::string::npos)
      << r.s.schedule_text(r.prog);
}

// A backward's saved activation that AOTAutograd donates: exp(x) + 1 (one kernel) reads x at the
// index it writes, so its result takes x's memory; mm's result then reuses nothing (x is gone).
graph::Graph donated_input_graph(bool donated, TensorMeta x_meta = contiguous({8, 8})) {
  GraphBuilder b;
  Arg x = b.input("saved", x_meta);
  Arg w = b.input("w", contiguous({8, 8}));
  if (donated) b.donate(x);
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({8, 8}));
  Arg a = b.call("add", "aten.add.Tensor", {e, Arg::integer(1)}, contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {a, w}, contiguous({8, 8}));
  Arg r = b.call("relu", "aten.relu.default", {mm}, contiguous({8, 8}));
  return b.finish({r});
}

std::string reused_by(const Scheduled& r, const std::string& victim) {
  for (const auto& [name, plan] : r.s.buffers)
    if (plan.reuses == victim) return name + (plan.in_place ? " in place" : " pooled");
  return "";
}

TEST(MemoryPlan, ADonatedInputIsWrittenInPlaceAtItsLastRead) {
  Scheduled r = schedule(donated_input_graph(true));
  EXPECT_EQ(reused_by(r, "saved"), "buf0 in place") << r.s.schedule_text(r.prog);
  // The wrapper then does not drop it again after its last read.
  Scheduled plain = schedule(donated_input_graph(false));
  EXPECT_EQ(reused_by(plain, "saved"), "") << plain.s.schedule_text(plain.prog);
  EXPECT_EQ(reused_by(plain, "w"), "");
}

TEST(MemoryPlan, ADonatedInputViewIntoALargerTensorIsLeftAlone) {
  TensorMeta offset = contiguous({8, 8});
  offset.offset = 8;
  Scheduled r = schedule(donated_input_graph(true, offset));
  EXPECT_EQ(reused_by(r, "saved"), "") << r.s.schedule_text(r.prog);
  Scheduled expanded = schedule(donated_input_graph(true, strided({8, 8}, {0, 1})));
  EXPECT_EQ(reused_by(expanded, "saved"), "") << expanded.s.schedule_text(expanded.prog);
}

// Each kernel and extern call runs exactly once, after every unit whose buffers it reads.
void expect_topological(const Scheduled& r, const std::string& what) {
  std::map<std::string, int> made_at;  // buffer -> step
  std::vector<std::vector<std::string>> reads(r.s.steps.size());
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < r.s.steps.size(); ++i) {
    const Step& st = r.s.steps[i];
    EXPECT_TRUE(seen.insert({static_cast<int>(st.kind), st.index}).second) << what;
    if (st.kind == Step::Kind::Extern) {
      const ir::ExternCall& e = r.prog.externs.at(st.index);
      for (const auto& o : e.outputs) made_at[o] = static_cast<int>(i);
      for (const auto& t : e.tensors) reads[i].push_back(t.buffer);
      continue;
    }
    for (const Member& m : r.s.kernels.at(st.index).members) {
      made_at[r.prog.buffers[m.buffer].name] = static_cast<int>(i);
      for (const Access& a : buffer_reads(r.prog.buffers[m.buffer])) reads[i].push_back(a.buffer);
    }
  }
  EXPECT_EQ(seen.size(), r.s.kernels.size() + r.prog.externs.size()) << what;
  for (size_t i = 0; i < reads.size(); ++i) {
    for (const std::string& b : reads[i]) {
      auto it = made_at.find(b);
      if (it == made_at.end()) continue;  // a graph input
      EXPECT_LE(it->second, static_cast<int>(i)) << what << ": step " << i << " reads " << b;
    }
  }
}

TEST(MemoryPlan, StepsAreTopologicallyOrdered) {
  for (const auto& named : test::snapshot_graphs())
    expect_topological(schedule(named.build()), named.name);
  expect_topological(schedule(transposed_mm_chain()), "transposed_mm_chain");
  expect_topological(schedule(mm_relu_chain()), "mm_relu_chain");
}

TEST(MemoryPlan, StagesFollowMemberOrder) {
  Scheduled r = schedule(test::layer_norm());
  ASSERT_EQ(r.s.kernels.size(), 1u);
  const Kernel& k = r.s.kernels[0];
  int previous = -1;
  for (size_t i = 0; i < k.members.size(); ++i) {
    EXPECT_GE(k.members[i].stage, previous);
    previous = k.members[i].stage;
    const Stage& st = k.stages.at(k.members[i].stage);
    EXPECT_EQ(st.inner, k.members[i].inner);
    EXPECT_NE(std::find(st.members.begin(), st.members.end(), static_cast<int>(i)),
              st.members.end());
  }
}

// An op coil has no lowering for, standing for any fallback whose result may be a view of its
// input (these tests once used aten.diagonal and aten.narrow, which coil now lowers).
constexpr const char* kAliasingFallback = "test.unlowered_view.default";

// BUG: memory is reused from the output of a fallback op that returns a view of a graph input, so
// the generated program writes into the user's input tensor.
// Graph: x f32[8, 8]; d = aten.diagonal.default(x) (no lowering: fallback, f32[8] strides {9},
// storage 64 floats); exp(d) -> out0 f32[8]; mul(x.view(64), 2.0) -> out1 f32[64].
// Observed: d's buffer (buf0) is freed after exp's kernel and pooled as 256 bytes of float32;
// out1 (buf2, 256 bytes) takes it: the wrapper emits `buf2 = torch.as_strided(buf0, (64,), (1,),
// 0)`, i.e. a view of x's storage, and the kernel stores 2 * x into x itself.
// Expected: outputs of fallback extern calls (which may alias their inputs) never enter the reuse
// pool nor are written in place; buf2 gets a fresh allocation.
TEST(MemoryPlan, BUG_ReuseOfAFallbackResultThatAliasesAnInput) {
  // (fixed: was a known-bug skip)
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg d = b.call("diagonal", kAliasingFallback, {x}, strided({8}, {9}));
  Arg e = b.call("exp", "aten.exp.default", {d}, contiguous({8}));
  Arg v = b.call("view", "aten.view.default", {x, ints({64})}, contiguous({64}));
  Arg m = b.call("mul", "aten.mul.Tensor", {v, test::farg(2.0)}, contiguous({64}));
  Scheduled r = schedule(b.finish({e, m}));
  ASSERT_EQ(r.prog.externs.size(), 1u);
  ASSERT_TRUE(r.prog.externs[0].is_fallback);
  for (const auto& [name, plan] : r.s.buffers) {
    EXPECT_NE(plan.reuses, "buf0") << name << " takes the memory of diagonal(arg0_1)";
  }
}

// The same bug, in place: a fallback view with the layout of its result is overwritten.
// Graph: x f32[8, 8]; n = aten.narrow.default(x, 0, 0, 8) (fallback, f32[8, 8] strides {8, 1},
// an alias of x); relu(n) -> out. Observed: relu's buffer is stored in place of n's buffer (the
// wrapper emits `buf1 = buf0; del buf0`), so relu overwrites x. Expected: a fresh buffer.
TEST(MemoryPlan, BUG_InPlaceStoreOverAFallbackResultThatAliasesAnInput) {
  // (fixed: was a known-bug skip)
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg n = b.call("narrow", kAliasingFallback, {x, test::iarg(0), test::iarg(0), test::iarg(8)},
                 contiguous({8, 8}));
  Arg relu = b.call("relu", "aten.relu.default", {n}, contiguous({8, 8}));
  Scheduled r = schedule(b.finish({relu}));
  EXPECT_EQ(r.plan("buf1").reuses, "");
  EXPECT_FALSE(r.plan("buf1").in_place);
}

// The same root cause, the other way round: a fallback's result may be a view of its input, so
// the input's memory must live as long as the result is read.
// Graph: x, y f32[8, 8]; a = exp(x) (stored: the fallback needs it in memory, buf0);
// d = aten.diagonal.default(a) (fallback, buf1: a view of buf0); n = neg(y) -> out0 (buf2);
// c = d + 1 -> out1 (buf3). Observed: buf0's last reader is the fallback (step 1), so it is freed
// after step 1 and buf2 (neg, step 2, 256 bytes like buf0) takes its memory; step 3 then reads
// diagonal(a) from memory that now holds neg(y). Expected: buf0 stays alive (is not reused) until
// buf1's last reader has run.
TEST(MemoryPlan, BUG_InputOfAFallbackIsReusedWhileItsResultMayStillAliasIt) {
  // (fixed: was a known-bug skip)
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg y = b.input("arg1_1", contiguous({8, 8}));
  Arg a = b.call("exp", "aten.exp.default", {x}, contiguous({8, 8}));
  Arg d = b.call("diagonal", kAliasingFallback, {a}, strided({8}, {9}));
  Arg n = b.call("neg", "aten.neg.default", {y}, contiguous({8, 8}));
  Arg c = b.call("add", "aten.add.Tensor", {d, test::farg(1.0)}, contiguous({8}));
  Scheduled r = schedule(b.finish({n, c}));
  ASSERT_EQ(r.prog.externs.at(0).tensors.at(0).buffer, "buf0");
  for (const auto& [name, plan] : r.s.buffers) {
    EXPECT_NE(plan.reuses, "buf0") << name << " takes the memory diagonal(buf0) still views\n"
                                   << r.s.schedule_text(r.prog);
  }
}

// ---- indirect indices ----

TEST(MemoryPlan, AScatterUpdatesItsCopyInPlace) {
  Scheduled r = schedule(test::index_put_accumulate());
  EXPECT_TRUE(r.plan("buf0").stored);
  EXPECT_EQ(r.plan("buf1").reuses, "buf0");
  EXPECT_TRUE(r.plan("buf1").in_place);
  EXPECT_EQ(r.plan("buf0").free_step, 1);  // its memory lives on as buf1
}

TEST(MemoryPlan, AKernelReadingABufferThroughAnIndirectIndexDoesNotStoreOverIt) {
  // mm's result is read for the last time by a gather of the same layout, at data-dependent rows:
  // other points may still need an element the store would overwrite.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 4}));
  Arg idx = b.input("arg1_1", contiguous({4, 4}, DType::Int64));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({4, 4}));
  Arg g = b.call("gather", "aten.gather.default", {mm, test::iarg(0), idx}, contiguous({4, 4}));
  Arg e = b.call("exp", "aten.exp.default", {g}, contiguous({4, 4}));
  Scheduled r = schedule(b.finish({e}));
  EXPECT_FALSE(r.plan("buf1").in_place) << r.s.schedule_text(r.prog);
  EXPECT_EQ(r.plan("buf1").reuses, "");
}
// The stored output of the graph's _softmax (not its max and sum), or null.
const ir::Buffer* stored_softmax(const Scheduled& r) {
  const ir::Buffer* softmax = nullptr;
  for (const ir::Buffer& buf : r.prog.buffers) {
    if (buf.origins.count("_softmax") && !buf.is_reduction() && r.plan(buf.name).stored)
      softmax = &buf;
  }
  return softmax;
}

TEST(MemoryPlan, ASoftmaxWritesOverTheScoresItsLoopsHaveRead) {
  // mm's result is read by the softmax's three loops over each row (max, sum, output) at the
  // element the last one stores: each row is read before it is written over, so the output takes
  // the scores' memory. A read of another row (the transposed scores) would forbid it.
  for (bool transposed : {false, true}) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({16, 16}));
    Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({16, 16}));
    Arg scores = mm;
    if (transposed) {
      Arg t = b.call("t", "aten.t.default", {mm}, test::strided({16, 16}, {1, 16}));
      scores = b.call("add", "aten.add.Tensor", {t, mm}, contiguous({16, 16}));
    }
    Arg sm = b.call("_softmax", "aten._softmax.default",
                    {scores, test::iarg(-1), test::barg(false)}, contiguous({16, 16}));
    Arg out = b.call("mm_1", "aten.mm.default", {sm, x}, contiguous({16, 16}));
    Scheduled r = schedule(b.finish({out}));
    const ir::Buffer* softmax = stored_softmax(r);
    ASSERT_NE(softmax, nullptr) << r.s.schedule_text(r.prog);
    EXPECT_EQ(r.plan(softmax->name).in_place, !transposed) << r.s.schedule_text(r.prog);
  }
}

TEST(MemoryPlan, ASoftmaxOfAnotherShapeWritesOverTheProductItViews) {
  // Attention's scores come out of a bmm as [6, 16, 16] and the softmax is stored as
  // [2, 3, 16, 16] (BERT's training graph saves it): the same bytes, element for element, so
  // the softmax still takes the product's memory. A shape that covers other bytes (a slice)
  // cannot.
  for (bool sliced : {false, true}) {
    GraphBuilder b;
    Arg q = b.input("arg0_1", contiguous({6, 16, 16}));
    Arg mm = b.call("bmm", "aten.bmm.default", {q, q}, contiguous({6, 16, 16}));
    Arg v =
        b.call("view", "aten.view.default", {mm, ints({2, 3, 16, 16})}, contiguous({2, 3, 16, 16}));
    Arg scores = v;
    if (sliced) {
      scores =
          b.call("slice", "aten.slice.Tensor", {v, test::iarg(3), test::iarg(0), test::iarg(8)},
                 strided({2, 3, 16, 8}, {768, 256, 16, 1}));
    }
    std::vector<sym::Expr> out_sizes = {2, 3, 16, sliced ? 8 : 16};
    Arg sm = b.call("_softmax", "aten._softmax.default",
                    {scores, test::iarg(-1), test::barg(false)}, contiguous(out_sizes));
    Scheduled r = schedule(b.finish({sm}));
    const ir::Buffer* softmax = stored_softmax(r);
    ASSERT_NE(softmax, nullptr) << r.s.schedule_text(r.prog);
    EXPECT_EQ(r.plan(softmax->name).in_place, !sliced) << r.s.schedule_text(r.prog);
  }
}

// ---- mutations of graph inputs ----

// copy_ into a graph input (batch norm's running statistics in an inference graph): a library
// call that runs after every kernel reading the input's old contents, even one that comes later
// in the graph, and whose result (an alias of the input) is never reused.
TEST(MemoryPlan, ACopyIntoAnInputRunsAfterEveryReaderOfTheInput) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8}));
  Arg n = b.call("neg", "aten.neg.default", {x}, contiguous({8}));
  Arg c = b.call("copy_", "aten.copy_.default", {x, n}, contiguous({8}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({8}));
  Scheduled r = schedule(b.finish({e, c}));
  ASSERT_EQ(r.prog.externs.size(), 1u);
  const ir::ExternCall& call = r.prog.externs[0];
  EXPECT_FALSE(call.is_fallback);
  EXPECT_EQ(call.mutates, std::vector<std::string>{"arg0_1"});
  int copy_step = -1, exp_step = -1;
  for (size_t i = 0; i < r.s.steps.size(); ++i) {
    const Step& st = r.s.steps[i];
    if (st.kind == Step::Kind::Extern) copy_step = static_cast<int>(i);
    if (st.kind == Step::Kind::Kernel) {
      for (const Member& m : r.s.kernels[st.index].members)
        if (r.prog.buffers[m.buffer].origins.count("exp")) exp_step = static_cast<int>(i);
    }
  }
  ASSERT_GE(exp_step, 0);
  EXPECT_GT(copy_step, exp_step) << r.s.schedule_text(r.prog);
  for (const auto& [name, plan] : r.s.buffers) EXPECT_NE(plan.reuses, call.outputs.at(0)) << name;
}

TEST(MemoryPlan, ACopyIntoAnIntermediateStaysAFallback) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8}));
  Arg n = b.call("neg", "aten.neg.default", {x}, contiguous({8}));
  Arg c = b.call("copy_", "aten.copy_.default", {n, x}, contiguous({8}));
  Scheduled r = schedule(b.finish({c}));
  ASSERT_EQ(r.prog.externs.size(), 1u);
  EXPECT_TRUE(r.prog.externs[0].is_fallback);
}

// Kernels that fusion would never form (it refuses merges that a path joins): the error names the
// cycle, unit by unit, so that a graph that fails here can be read from the message alone.
// Graph: x, y f32[8, 8]; relu(x) -> fallback "first"; fallback "second"(y); add(x, second): the
// two kernels merged by hand run before "first" and after "second", which follows "first".
TEST(MemoryPlan, ACycleIsNamedUnitByUnit) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg y = b.input("arg1_1", contiguous({8, 8}));
  Arg relu = b.call("relu", "aten.relu.default", {x}, contiguous({8, 8}));
  Arg f1 = b.call("first", "test.unlowered_op.default", {relu}, contiguous({8, 8}));
  Arg f2 = b.call("second", "test.unlowered_op.default", {y}, contiguous({8, 8}));
  Arg add = b.call("add", "aten.add.Tensor", {x, f2}, contiguous({8, 8}));
  Scheduled r = schedule(b.finish({f1, add}));
  ASSERT_EQ(r.s.kernels.size(), 2u);
  Schedule merged;
  merged.kernels = {r.s.kernels[0]};
  merged.kernels[0].members.push_back(r.s.kernels[1].members.at(0));
  try {
    plan_memory(r.prog, merged);
    FAIL() << "plan_memory ordered a cycle";
  } catch (const std::logic_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan_memory: kernels and extern calls form a cycle: {buf0,buf3} -> extern "
              "test.unlowered_op.default (first) -> extern test.unlowered_op.default (second) -> "
              "{buf0,buf3}");
  }
}
}  // namespace
}  // namespace coil::sched
