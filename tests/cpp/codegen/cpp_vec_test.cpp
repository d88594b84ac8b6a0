// Tests for the vector form of C++ kernels (codegen/cpp/cpp_vec.h and the vector loops of
// cpp_kernel.cpp): which innermost loops vectorize, what they render to, and why the others stay
// scalar. That the vector kernels build and compute eager's values is tested from Python
// (tests/python/test_cpu_vec.py), where torch's headers are at hand.
#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/codegen/cpp/cpp_vec.h"
#include "coil/lower/lowering.h"

namespace coil::codegen {
namespace {

using graph::Arg;
using graph::DType;
using sym::Expr;
using test::contiguous;
using test::GraphBuilder;

std::vector<KernelSource> render(const graph::Graph& g, const std::string& mode = "on") {
  ir::Program prog = lower::lower_graph(g);
  sched::Schedule s = sched::schedule_program(prog);
  std::vector<KernelSource> out;
  for (const sched::Kernel& k : s.kernels) {
    out.push_back(render_cpp_kernel(prog, s, k, kernel_name(prog, k, "cpp", k.id), mode));
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(CppVec, PointwiseChainIsOneVectorLoopWithAMaskedTail) {
  std::vector<KernelSource> k = render(test::pointwise_chain());
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(k[0].vectorized);
  EXPECT_TRUE(contains(c, "// decision: loop x1 vectorized (at::vec VecF, a masked tail)")) << c;
  // Whole vectors with a constant lane count, then one masked tail.
  EXPECT_TRUE(contains(c, "x1 < x1_whole; x1 += VecF_lanes) {")) << c;
  EXPECT_TRUE(contains(c, "constexpr int64_t n_x1 = VecF_lanes;")) << c;
  EXPECT_TRUE(contains(c, "if (x1_whole < 16) {  // the tail")) << c;
  EXPECT_TRUE(contains(c, "VecF::loadu(in_ptr0 + (")) << c;
  EXPECT_TRUE(contains(c, "coil_exp_u20(")) << c;
  // (cpp_vectorize="on" streams every pointwise kernel's stores: plan_stream_stores.)
  EXPECT_TRUE(contains(c, "coil_vstream(v_buf0, out_ptr0 + (")) << c;
  EXPECT_TRUE(contains(c, "  coil_stream_fence();\n  }\n}")) << c;  // after each row
  EXPECT_FALSE(contains(c, "#pragma omp simd")) << c;
}

TEST(CppVec, SoftmaxRowsAccumulateInVectorsAndReduceTheLanes) {
  // (8 rows: two row groups of 4; each row of a group has its own accumulators and values.)
  std::vector<KernelSource> k = render(test::softmax());
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c, "VecF vacc_buf0_g2(-std::numeric_limits<float>::infinity());")) << c;
  // Lanes past the row's end keep the accumulator; the max combines NaN-propagating.
  EXPECT_TRUE(contains(c, "vacc_buf0_g1 = VecF::set(vacc_buf0_g1, at::vec::maximum(vacc_buf0_g1, "))
      << c;
  EXPECT_TRUE(contains(c, "float acc_buf0_g3 = at::vec::vec_reduce_all<float>(")) << c;
  EXPECT_TRUE(contains(c, "VecF(v_buf0_g0)")) << c;  // the row's max, broadcast
}

TEST(CppVec, RowGroupsComputeFourRowsPerPassOverTheRow) {
  std::vector<KernelSource> k = render(test::layer_norm());
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c, "// decision: row groups of 4 x points")) << c;
  EXPECT_TRUE(contains(c, "for (int64_t xg = 0; xg < 8; xg += 4) {")) << c;
  EXPECT_TRUE(contains(c, "const int64_t x0_g3 = xg + 3;")) << c;
  // Every loop over the row reads each row of the group: the mean's, the variance's, the output's.
  EXPECT_EQ(count(c, "VecF::loadu(in_ptr0 + (r0 + 32*x0_g2), n_r0)"), 4u) << c;
  // Per-row results are stored at the row's own x.
  EXPECT_TRUE(contains(c, "[x0_g1] = ")) << c;
  // A loop is noted once, not once per row.
  EXPECT_EQ(count(c, "// decision: loop r0 vectorized"), 1u) << c;
}

TEST(CppVec, LaterLoopsOverTheRowPrefetchTheNextGroupsRows) {
  // LayerNorm: three loops over the row, the first reading x from memory. The two later loops
  // fetch the next group's rows (xg + 4 .. xg + 7), two rows each, one prefetch per vector step.
  std::vector<KernelSource> k = render(test::layer_norm());
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c,
                       "// decision: row prefetch: loops 2, 3 fetch the next row group's rows "
                       "of arg0_1 (read from memory by loop 1)"))
      << c;
  for (int g = 0; g < 4; ++g) {
    // Once in the whole vectors' loop, once in its tail; the weight and bias (the same for every
    // row) are not fetched.
    EXPECT_EQ(count(c, "coil_prefetch(in_ptr0, r0 + 32*x0_g" + std::to_string(g) + " + 128);"), 2u)
        << c;
  }
  EXPECT_FALSE(contains(c, "coil_prefetch(in_ptr1")) << c;
  // The first loop fetches nothing: it is the one reading from memory.
  size_t first_loop = c.find("for (int64_t r0 = 0;");
  size_t second_loop = c.find("for (int64_t r0 = 0;", first_loop + 1);
  EXPECT_EQ(c.substr(first_loop, second_loop - first_loop).find("coil_prefetch"), std::string::npos)
      << c;
}

TEST(CppVec, RowPrefetchOnlyWhereALaterLoopReadsFromCache) {
  // One loop over the row (a row max): nothing to overlap. Rows that do not fill groups (6):
  // the next row, x0 + 1, in the later loops.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  Arg y = b.call("amax", "aten.amax.default", {x, test::ints({-1})}, contiguous({8}));
  std::vector<KernelSource> one = render(b.finish({y}));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FALSE(contains(one[0].code, "coil_prefetch(")) << one[0].code;
  GraphBuilder s;
  Arg x6 = s.input("arg0_1", contiguous({6, 32}));
  Arg p = s.call("_softmax", "aten._softmax.default", {x6, test::iarg(-1), test::barg(false)},
                 contiguous({6, 32}));
  std::vector<KernelSource> six = render(s.finish({p}));
  ASSERT_EQ(six.size(), 1u);
  EXPECT_TRUE(contains(six[0].code, "coil_prefetch(in_ptr0, r0 + 32*x0 + 32);")) << six[0].code;
  EXPECT_TRUE(contains(six[0].code, "loop 2 fetches the next row of arg0_1")) << six[0].code;
}

TEST(CppVec, RowsThatDoNotFillGroupsOrLoopsWithoutAVectorFormGoOneRowAtATime) {
  for (int64_t rows : {6, 8}) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous({rows, 32}, rows == 6 ? DType::Float32 : DType::Int64));
    // argmax of int64 values has no vector form: with 8 rows too, the kernel renders one row at
    // a time.
    Arg y = rows == 6
                ? b.call("amax", "aten.amax.default", {x, test::ints({-1})}, contiguous({rows}))
                : b.call("argmax", "aten.argmax.default", {x, test::iarg(-1)},
                         contiguous({rows}, DType::Int64));
    std::vector<KernelSource> k = render(b.finish({y}));
    ASSERT_EQ(k.size(), 1u);
    EXPECT_FALSE(contains(k[0].code, "row groups")) << k[0].code;
    EXPECT_FALSE(contains(k[0].code, "_g0")) << k[0].code;
  }
}

TEST(CppVec, TransposedReadsGoLaneByLane) {
  std::vector<KernelSource> k = render(test::transpose_add());
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code, "coil_vlanes<VecF>([&](int64_t x1) { return in_ptr"))
      << k[0].code;
}

// A transposed read in a tiled kernel is copied a tile at a time into a transposed buffer; a
// 16-bit one is widened into a float tile as it goes (perf fuzzer seed 6052: read lane by lane,
// a bf16 transpose took 2.4x Inductor's time), and its rows are prefetched like a float's.
TEST(CppVec, TransposedTilesOf16BitValuesAreWidenedToFloat) {
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({256, 256}, d));
    Arg y = g.input("arg1_1", contiguous({256, 256}, d));
    graph::TensorMeta t = test::strided({256, 256}, {1, 256});
    t.dtype = d;
    Arg permute = g.call("permute", "aten.permute.default", {y, test::ints({1, 0})}, t);
    Arg add = g.call("add", "aten.add.Tensor", {x, permute}, contiguous({256, 256}, d));
    std::vector<KernelSource> k = render(g.finish({add}));
    ASSERT_EQ(k.size(), 1u);
    const std::string& c = k[0].code;
    EXPECT_TRUE(contains(c, "tiling 512x64")) << c;
    EXPECT_FALSE(contains(c, "coil_vlanes")) << c;
    EXPECT_TRUE(contains(c, "tile prefetch")) << c;
    if (d == DType::Float32) {
      EXPECT_TRUE(contains(c, "coil_transpose_tile<float>(in_ptr1")) << c;
    } else {
      std::string t16 = d == DType::BFloat16 ? "c10::BFloat16" : "c10::Half";
      EXPECT_TRUE(contains(c, "float tile0[512 * 64];  // arg1_1's tile, transposed and widened"))
          << c;
      EXPECT_TRUE(contains(c, "coil_transpose_tile_widen<" + t16 + ">(in_ptr1")) << c;
      EXPECT_TRUE(contains(c, "VecF::loadu(tile0 + (")) << c;
    }
  }
}

// Column form (a reduction over a dim that is not innermost): what an x point's later loops
// compute from its earlier results alone is computed once per block of columns, into an array,
// not at every step over r (log_softmax over dim 0 took a vector log per element: 2.2x
// Inductor's time); and a value that later loops compute again is kept in the output, as rows
// keep it (softmax's exponential).
TEST(CppVec, ColumnLoopsHoistPerColumnValuesAndKeepRowCaches) {
  for (const char* op : {"_log_softmax", "_softmax"}) {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({64, 256}));
    Arg y = g.call(op, std::string("aten.") + op + ".default",
                   {x, test::iarg(0), test::barg(false)}, contiguous({64, 256}));
    std::vector<KernelSource> k = render(g.finish({y}));
    ASSERT_EQ(k.size(), 1u);
    const std::string& c = k[0].code;
    EXPECT_TRUE(contains(c, "reduction strategy: column")) << c;
    size_t last_loop = c.rfind("for (int64_t r0");
    ASSERT_NE(last_loop, std::string::npos);
    if (std::string(op) == "_log_softmax") {
      // log(sum) once per column, before the output loop; the loop reads the array.
      EXPECT_TRUE(contains(c, ".log()")) << c;
      EXPECT_EQ(c.find(".log()", last_loop), std::string::npos) << c;
      EXPECT_TRUE(contains(c, "row cache: each element's sub from stage 1")) << c;
    } else {
      EXPECT_TRUE(contains(c, "row cache: each element's exp from stage 1")) << c;
      EXPECT_EQ(c.find("coil_exp_u20(", last_loop), std::string::npos) << c;
    }
  }
}

// A sum of everything splits its loop across threads even when a cast of the sum follows it
// in the kernel (a bf16 sum: perf fuzzer seed 6088 ran on one thread, 2.4x Inductor's time).
TEST(CppVec, FullSumsWithAnEpilogueStillSplitAcrossThreads) {
  for (DType d : {DType::Float32, DType::BFloat16}) {
    GraphBuilder g;
    Arg x = g.input("arg0_1", contiguous({256, 4096}, d));
    Arg s = g.call("sum", "aten.sum.default", {x}, contiguous({}, d));
    std::vector<KernelSource> k = render(g.finish({s}));
    ASSERT_EQ(k.size(), 1u);
    EXPECT_TRUE(contains(k[0].code, "#pragma omp parallel for reduction(+:vacc_buf0)"))
        << k[0].code;
  }
}

// An embedding of bf16 rows: each row's index is read and checked once, before the vector loop
// over the row, and the row's 16-bit elements are copied as they are, not widened and narrowed
// again (perf fuzzer seed 6026: 1.9x Inductor's time).
TEST(CppVec, GatheredRowsCheckTheirIndexOnceAndCopy16BitElements) {
  GraphBuilder g;
  Arg w = g.input("arg0_1", contiguous({1000, 96}, DType::BFloat16));
  Arg i = g.input("arg1_1", contiguous({64}, DType::Int64));
  Arg e =
      g.call("embedding", "aten.embedding.default", {w, i}, contiguous({64, 96}, DType::BFloat16));
  std::vector<KernelSource> k = render(g.finish({e}));
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  size_t check = c.find("coil_index(");
  size_t loop = c.find("for (int64_t x1");
  ASSERT_NE(check, std::string::npos);
  ASSERT_NE(loop, std::string::npos);
  EXPECT_LT(check, loop) << c;
  EXPECT_EQ(count(c, "coil_index("), 1u) << c;
  EXPECT_TRUE(contains(c, "coil_vcopy_half(out_ptr0 + (")) << c;
  EXPECT_FALSE(contains(c, "coil_vstore_half")) << c;
}

// A scatter whose innermost loop moves the target by one element with a term of its own (rows
// stored by an index_put) runs that loop in vector form: its lanes update distinct elements.
TEST(CppVec, ScattersOfWholeRowsAreVectorStores) {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({256, 64, 128}));
  Arg idx = g.input("arg1_1", contiguous({33}, DType::Int64));
  Arg v = g.input("arg2_1", contiguous({33, 64, 128}));
  Arg put = g.call("index_put", "aten.index_put.default",
                   {x, Arg::list_of({idx}), v, test::barg(false)}, contiguous({256, 64, 128}));
  std::vector<KernelSource> k = render(g.finish({put}));
  const std::string& c = k.back().code;
  EXPECT_TRUE(contains(c, "decision: scatter store")) << c;
  EXPECT_TRUE(contains(c, "loop x2 vectorized")) << c;
  EXPECT_TRUE(contains(c, ".store(out_ptr0 + (8192*tmp")) << c;
}

// Float floor division has a vector form (coil_vfloordiv: the scalar formula on every lane).
TEST(CppVec, FloorDivisionOfFloatsIsAVectorLoop) {
  GraphBuilder g;
  Arg a = g.input("arg0_1", contiguous({8, 64}));
  Arg b = g.input("arg1_1", contiguous({8, 64}));
  Arg q = g.call("floor_divide", "aten.floor_divide.default", {a, b}, contiguous({8, 64}));
  std::vector<KernelSource> k = render(g.finish({q}));
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code, "coil_vfloordiv(")) << k[0].code;
}

// A pad that only crops reads its input with no mask.
TEST(CppVec, APadThatOnlyCropsIsAPlainCopy) {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({16, 66}));
  Arg p = g.call("constant_pad_nd", "aten.constant_pad_nd.default",
                 {x, test::ints({-1, -1}), test::farg(-1.5)}, contiguous({16, 64}));
  std::vector<KernelSource> k = render(g.finish({p}));
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code, "VecF::loadu(in_ptr0 + (")) << k[0].code;
  EXPECT_FALSE(contains(k[0].code, " ? ")) << k[0].code;
  EXPECT_FALSE(contains(k[0].code, "-1.5")) << k[0].code;
}

TEST(CppVec, Float64KernelsUseDoubleVectors) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 64}, DType::Float64));
  Arg y = b.call("exp", "aten.exp.default", {x}, contiguous({4, 64}, DType::Float64));
  std::vector<KernelSource> k = render(b.finish({y}));
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code, "VecD::loadu(")) << k[0].code;
}

TEST(CppVec, Bfloat16RidesInFloatLanesConvertedInRegisters) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 64}, DType::BFloat16));
  Arg y =
      b.call("mul", "aten.mul.Tensor", {x, test::farg(2.0)}, contiguous({4, 64}, DType::BFloat16));
  std::vector<KernelSource> k = render(b.finish({y}));
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c, "coil_vload_half<c10::BFloat16>(in_ptr0 + (")) << c;
  EXPECT_TRUE(contains(c, "coil_vround<c10::BFloat16>(")) << c;  // the float product, rounded
  EXPECT_TRUE(contains(c, "coil_vstore_half<c10::BFloat16>(")) << c;
}

TEST(CppVec, LoopsWithoutAVectorFormStayScalarAndSayWhy) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 64}, DType::Int64));
  Arg y = b.call("neg", "aten.neg.default", {x}, contiguous({4, 64}, DType::Int64));
  std::vector<KernelSource> k = render(b.finish({y}));
  ASSERT_EQ(k.size(), 1u);
  EXPECT_FALSE(k[0].vectorized);
  EXPECT_TRUE(contains(k[0].code, "// decision: loop x1 scalar (omp simd): int64 values vary"))
      << k[0].code;
  EXPECT_TRUE(contains(k[0].code, "#pragma omp simd")) << k[0].code;
  EXPECT_FALSE(contains(k[0].code, "auto tmp")) << k[0].code;  // nothing left of the attempt
}

TEST(CppVec, AutoKeepsShortLoopsAndSmallKernelsScalar) {
  auto exp_of = [](std::vector<Expr> sizes) {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous(sizes));
    return b.finish({b.call("exp", "aten.exp.default", {x}, contiguous(sizes))});
  };
  // [200, 5, 7] from a [200, 7, 5] input: no two loops merge, and with 7 points unrolled the
  // loop before them (5) is still short (short_loops.cpp).
  GraphBuilder tb;
  Arg tx = tb.input("arg0_1", contiguous({200, 7, 5}));
  Arg tp = tb.call("permute", "aten.permute.default", {tx, test::ints({0, 2, 1})},
                   test::strided({200, 5, 7}, {35, 1, 5}));
  std::vector<KernelSource> k = render(
      tb.finish({tb.call("exp", "aten.exp.default", {tp}, contiguous({200, 5, 7}))}), "auto");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code, "scalar (omp simd): too few iterations")) << k[0].code;
  k = render(exp_of({4, 64}), "auto");  // 256 elements: no attempt at all
  EXPECT_FALSE(k[0].vectorized);
  EXPECT_FALSE(contains(k[0].code, "vectorized")) << k[0].code;
  k = render(exp_of({64, 128}), "auto");
  EXPECT_TRUE(k[0].vectorized) << k[0].code;
  k = render(exp_of({4096, 3}), "on");  // "on": short loops too, all tail
  EXPECT_TRUE(k[0].vectorized) << k[0].code;
}

TEST(CppVec, AutoStreamsTheStoresOfKernelsWritingThirtyTwoMebibytes) {
  auto op_of = [](std::vector<Expr> sizes, const std::string& op = "neg") {
    GraphBuilder b;
    Arg x = b.input("arg0_1", contiguous(sizes));
    return b.finish({b.call(op, "aten." + op + ".default", {x}, contiguous(sizes))});
  };
  // 8M float32 elements in rows of 4096: streamed, a fence after each row.
  std::vector<KernelSource> k = render(op_of({2048, 4096}), "auto");
  ASSERT_EQ(k.size(), 1u);
  EXPECT_TRUE(contains(k[0].code,
                       "// decision: streaming stores: whole aligned vectors written "
                       "around the caches (at least 32 MiB written), a fence after "
                       "each row"))
      << k[0].code;
  EXPECT_EQ(count(k[0].code, "coil_vstream(v_buf0, out_ptr0 + ("), 2u) << k[0].code;  // + tail
  // Flat: chunks of 65536 elements in the parallel loop, a fence after each.
  k = render(op_of({Expr(int64_t{1} << 23)}), "auto");
  EXPECT_TRUE(contains(k[0].code,
                       "#pragma omp parallel for\n    for (int64_t x0c = 0; x0c < "
                       "x0_whole; x0c += 65536) {"))
      << k[0].code;
  EXPECT_TRUE(contains(k[0].code, "a fence after each chunk")) << k[0].code;
  // exp bounds its kernel (plan_stream_stores); one element short of 32 MiB, or rows too short
  // to fence after each: ordinary stores.
  k = render(op_of({2048, 4096}, "exp"), "auto");
  EXPECT_FALSE(contains(k[0].code, "coil_vstream")) << k[0].code;
  for (auto sizes : {std::vector<Expr>{8388607}, std::vector<Expr>{1 << 20, 8}}) {
    k = render(op_of(sizes), "auto");
    EXPECT_TRUE(k[0].vectorized) << k[0].code;
    EXPECT_FALSE(contains(k[0].code, "coil_vstream")) << k[0].code;
    EXPECT_TRUE(contains(k[0].code, "v_buf0.store(out_ptr0 + (")) << k[0].code;
  }
}

TEST(CppVec, UnrolledShortLoopsShareValuesAndInterleaveTheirStores) {
  // log_softmax over 3 classes (a pointwise body: the reduction is unrolled by its lowering) of
  // bfloat16 rows: the 3 classes are unrolled inside the vector loop over the 64 rows
  // (sched/short_loops.cpp). The max, the sum of exponentials and its log are computed once for
  // the 3 copies; each copy's result goes to a stage, narrowed from the unrounded float lanes,
  // and the stage to memory in one run of 3 x lanes.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({64, 3}, DType::BFloat16));
  Arg y = b.call("_log_softmax", "aten._log_softmax.default",
                 {x, test::iarg(-1), test::barg(false)}, contiguous({64, 3}, DType::BFloat16));
  std::vector<KernelSource> k = render(b.finish({y}));
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c,
                       "// decision: short loops: x1 (3 points) unrolled inside the loop over "
                       "x0, the vector loop\n"))
      << c;
  EXPECT_TRUE(contains(c, "// decision: loop x0 vectorized (at::vec VecF, a masked tail)")) << c;
  EXPECT_EQ(count(c, "coil_exp_u20("), 6u) << c;  // 3 per copy of the loop's body (whole, tail)
  EXPECT_EQ(count(c, ".log()"), 2u) << c;
  EXPECT_TRUE(contains(c, "alignas(64) coil_bf16 stage_buf0[3 * VecF_lanes];")) << c;
  EXPECT_TRUE(contains(c, "coil_vstore_half<c10::BFloat16>(tmp")) << c;  // unrounded
  EXPECT_TRUE(contains(c, ", stage_buf0 + 2 * VecF_lanes, n_x0);")) << c;
  EXPECT_TRUE(contains(c, "coil_interleave<3>(stage_buf0, VecF_lanes, out_ptr0 + (3*x0), n_x0);"))
      << c;
  EXPECT_FALSE(contains(c, "v_buf0_u0.store")) << c;
}

TEST(CppVec, ColumnArgReductionsStepVectorsOfLanes) {
  // argmax over dim 0 of [7, 4, 64]: a column kernel (its x loops [4, 64] merged into one of 256
  // points) whose lanes (neighbouring x points) keep their best values and int32 positions in
  // per-lane arrays (coil_vcol_arg_step); the int64 positions are stored lane by lane.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({7, 4, 64}));
  Arg m = b.call("argmax", "aten.argmax.default", {x, test::iarg(0)},
                 contiguous({4, 64}, DType::Int64));
  std::vector<KernelSource> k = render(b.finish({m}));
  ASSERT_EQ(k.size(), 1u);
  const std::string& c = k[0].code;
  EXPECT_TRUE(contains(c, "// decision: x loops [4, 64] merged into [256]")) << c;
  EXPECT_TRUE(contains(c, "// decision: loop x0 vectorized")) << c;
  EXPECT_TRUE(contains(c, "int32_t acci_buf0[128];")) << c;
  EXPECT_TRUE(
      contains(c, "coil_vcol_arg_step<true>(acc_buf0 + xi, acci_buf0 + xi, tmp0, r0, n_x0);"))
      << c;
  EXPECT_TRUE(contains(c, "for (int64_t xl = 0; xl < n_x0; ++xl) {\n")) << c;
  EXPECT_TRUE(contains(c, "out_ptr0[x0 + xl] = v_buf0[xi + xl];")) << c;
}

TEST(CppVec, OpTextsUseAtVec) {
  EXPECT_EQ(cpp::vec_type(DType::Float32), "VecF");
  EXPECT_EQ(cpp::vec_type(DType::Int32), std::nullopt);
  EXPECT_EQ(cpp::vec_unary_text(ir::Op::Tanh, "a", "VecF"), "a.tanh()");
  EXPECT_EQ(cpp::vec_unary_text(ir::Op::Sigmoid, "a", "VecF"),
            "(VecF(1) / (VecF(1) + coil_exp_u20(a.neg())))");
  EXPECT_EQ(cpp::vec_unary_text(ir::Op::Sigmoid, "a", "VecD"),
            "(VecD(1) / (VecD(1) + a.neg().exp()))");
  EXPECT_EQ(cpp::vec_unary_text(ir::Op::Erf, "a", "VecF"), "coil_erf(a)");
  EXPECT_EQ(cpp::vec_unary_text(ir::Op::Erf, "a", "VecD"), "a.erf()");
  EXPECT_EQ(cpp::vec_binary_text(ir::Op::Maximum, "a", "b", "VecF"), "at::vec::maximum(a, b)");
  EXPECT_EQ(cpp::vec_binary_text(ir::Op::FloorDiv, "a", "b", "VecF"), "coil_vfloordiv(a, b)");
  EXPECT_EQ(cpp::vec_binary_text(ir::Op::Remainder, "a", "b", "VecF"), std::nullopt);
  EXPECT_EQ(cpp::vec_combine_text(ir::ReductionType::ArgMax, "a", "b"), std::nullopt);
}

}  // namespace
}  // namespace coil::codegen
