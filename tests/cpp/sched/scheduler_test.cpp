// Tests for sched/scheduler.cpp: dead-buffer removal, one kernel per computed buffer before
// fusion, loop order of pointwise kernels, and the text forms (fusion.txt, schedule.txt,
// ir_post_fusion.txt).
#include <gtest/gtest.h>

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

TEST(Scheduler, DeadBuffersAreRemovedBeforeFusion) {
  // sum(x) is lowered eagerly into a reduction buffer, but nothing reads it.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({8}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({8, 32}));
  ir::Program prog = lower::lower_graph(b.finish({e}));
  ASSERT_EQ(prog.buffer_index("buf0"), 1);
  Schedule s = schedule_program(prog);
  EXPECT_EQ(s.removed, (std::vector<std::string>{"buf0"}));
  EXPECT_EQ(prog.buffer_index("buf0"), -1);
  EXPECT_EQ(prog.buffer_index("buf1"), 1);  // the index is rebuilt
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.fusion_text(prog),
            "# Every pair of kernels the fusion pass considered, in order, with its verdict.\n"
            "# removed before fusion (no readers): buf0\n");
}

TEST(Scheduler, ExternCallsAndTheirInputsAreKept) {
  // A fallback's result is unused, but the call may have effects coil cannot see.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({8}));
  b.call("my_unknown_op", "aten.my_unknown_op.default", {e}, contiguous({8}));
  Arg n = b.call("neg", "aten.neg.default", {x}, contiguous({8}));
  ir::Program prog = lower::lower_graph(b.finish({n}));
  Schedule s = schedule_program(prog);
  EXPECT_TRUE(s.removed.empty());
  EXPECT_GE(prog.buffer_index("buf0"), 0);  // exp, the fallback's input
  int externs = 0;
  for (const Step& st : s.steps) externs += st.kind == Step::Kind::Extern;
  EXPECT_EQ(externs, 1);
}

TEST(Scheduler, OneKernelPerComputedBufferWithIdentityVariables) {
  // Two unrelated outputs: nothing to fuse, so each buffer keeps its own kernel. (Rows of 16: a
  // shorter innermost loop would be merged with its outer one, short_loops.cpp.)
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 16}));
  Arg y = b.input("arg1_1", contiguous({3}));
  Arg e = b.call("exp", "aten.exp.default", {x}, contiguous({8, 16}));
  Arg n = b.call("neg", "aten.neg.default", {y}, contiguous({3}));
  ir::Program prog = lower::lower_graph(b.finish({e, n}));
  Schedule s = schedule_program(prog);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_TRUE(s.verdicts.empty());
  EXPECT_EQ(s.post_fusion_text(prog),
            "kernel 0: x[8, 16]\n"
            "  buf0 (outer) vars: v0=x0 v1=x1\n"
            "kernel 1: x[3]\n"
            "  buf1 (outer) vars: v0=x0\n");
  EXPECT_EQ(s.kernels[0].id, 0);
  EXPECT_EQ(s.kernels[1].id, 1);
}

TEST(Scheduler, SmallestStoreStrideGoesInnermost) {
  // exp of a transposed input keeps eager's strides {1, 8}: the store walks memory along v0, so
  // v0's loop goes inside.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}));
  Arg t = b.call("permute", "aten.permute.default", {x, ints({1, 0})}, strided({8, 4}, {1, 8}));
  Arg e = b.call("exp", "aten.exp.default", {t}, strided({8, 4}, {1, 8}));
  ir::Program prog = lower::lower_graph(b.finish({e}));
  Schedule s = schedule_program(prog);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].xsizes, (std::vector<Expr>{4, 8}));
  EXPECT_EQ(s.kernels[0].decisions,
            (std::vector<std::string>{"loop order (1, 0): smallest store stride innermost"}));
  EXPECT_EQ(s.post_fusion_text(prog),
            "kernel 0: x[4, 8]\n"
            "  buf0 (outer) vars: v0=x1 v1=x0\n");
}

TEST(Scheduler, ContiguousStoresKeepTheirLoopOrder) {
  ir::Program prog = lower::lower_graph(test::transpose_add());
  Schedule s = schedule_program(prog);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_TRUE(s.kernels[0].decisions.empty());
  EXPECT_EQ(s.kernels[0].xsizes, (std::vector<Expr>{8, 16}));
}

TEST(Scheduler, ScheduleTextOfAnExternAndAFusedKernel) {
  ir::Program prog = lower::lower_graph(test::mm_bias_gelu());
  Schedule s = schedule_program(prog);
  EXPECT_EQ(s.schedule_text(prog),
            "launch order: the program's, estimated peak 2.0 KB (least peak first: 2.0 KB)\n"
            "step 0: extern aten.mm.default -> buf0 (node mm)\n"
            "step 1: kernel 0 over x[8, 32]\n"
            "  stage 0 (per x point): buf1\n"
            "memory:\n"
            "  buf0: allocated at step 0, freed after step 1\n"
            "  buf1: allocated at step 1 in place of buf0, kept (output)\n");
}

TEST(Scheduler, ScheduleTextOfAReductionKernel) {
  ir::Program prog = lower::lower_graph(test::softmax());
  Schedule s = schedule_program(prog);
  EXPECT_EQ(s.schedule_text(prog),
            "step 0: kernel 0 over x[8] r[32]\n"
            "  reduction strategy: looped (each x point accumulates over r in registers)\n"
            "  stage 0 (loop over r): buf0[max](local)\n"
            "  stage 1 (loop over r): buf1[sum](local)\n"
            "  stage 2 (loop over r): buf2\n"
            "  fused {buf0} + {buf1,buf2}: shares 1056 bytes\n"
            "memory:\n"
            "  buf2: allocated at step 0, kept (output)\n");
}

TEST(Scheduler, ScansRunAloneWithTheScanDimAsR) {
  // cumsum over dim 1 of [4, 40, 48] (longer than the prefix reductions take): x over dims 0 and
  // 2, r0 along the scan; the x points after it are contiguous, so column form. The reader (* 2)
  // reads it where it is written: it joins the scan as an epilogue (sched::fuse_scan_epilogue),
  // computed at each step; the scan's buffer is still stored (the column form reads it back).
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 40, 48}));
  Arg c = b.call("cumsum", "aten.cumsum.default", {x, test::iarg(1)}, contiguous({4, 40, 48}));
  Arg m = b.call("mul", "aten.mul.Tensor", {c, test::farg(2.0)}, contiguous({4, 40, 48}));
  ir::Program prog = lower::lower_graph(b.finish({m}));
  Schedule s = schedule_program(prog);
  ASSERT_EQ(s.kernels.size(), 1u);
  const Kernel& k = s.kernels[0];
  EXPECT_TRUE(k.scan && k.scan_column);
  EXPECT_EQ(k.members.size(), 2u);
  EXPECT_EQ(k.xsizes, (std::vector<Expr>{Expr(4), Expr(48)}));
  EXPECT_EQ(k.rsizes, (std::vector<Expr>{Expr(40)}));
  EXPECT_TRUE(s.verdicts.at(0).fused);

  // A reader at other positions (the scan flipped along its dim) stays apart.
  GraphBuilder bf;
  Arg xf = bf.input("arg0_1", contiguous({4, 40, 48}));
  Arg cf = bf.call("cumsum", "aten.cumsum.default", {xf, test::iarg(1)}, contiguous({4, 40, 48}));
  Arg ff = bf.call("flip", "aten.flip.default", {cf, test::ints({1})}, contiguous({4, 40, 48}));
  ir::Program progf = lower::lower_graph(bf.finish({ff}));
  Schedule sf = schedule_program(progf);
  ASSERT_EQ(sf.kernels.size(), 2u);
  EXPECT_NE(sf.verdicts.at(0).reason.find("at other positions than it is written"),
            std::string::npos)
      << sf.verdicts.at(0).reason;

  // Over the last dim: row form.
  GraphBuilder b2;
  Arg y = b2.input("arg0_1", contiguous({4, 40}));
  Arg c2 = b2.call("cumsum", "aten.cumsum.default", {y, test::iarg(-1)}, contiguous({4, 40}));
  ir::Program prog2 = lower::lower_graph(b2.finish({c2}));
  Schedule s2 = schedule_program(prog2);
  ASSERT_EQ(s2.kernels.size(), 1u);
  EXPECT_TRUE(s2.kernels[0].scan);
  EXPECT_FALSE(s2.kernels[0].scan_column);
}

}  // namespace
}  // namespace coil::sched
