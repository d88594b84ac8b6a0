// Tests for codegen/cpp/cpp_kernel.h: kernel names, the header comment, the argument list, and
// the loops, pragmas and statements a scheduled kernel renders to.
#include "coil/codegen/cpp/cpp_kernel.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../test_graphs.h"
#include "coil/codegen/cpp/prelude.h"
#include "coil/codegen/wrapper/python_wrapper.h"
#include "coil/lower/lowering.h"

namespace coil::codegen {
namespace {

using graph::Arg;
using graph::DType;
using sym::Expr;
using test::barg;
using test::contiguous;
using test::GraphBuilder;
using test::iarg;
using test::ints;

struct Rendered {
  ir::Program prog;
  sched::Schedule s;
  std::vector<KernelSource> kernels;
};

// Scalar loops unless `vectorize` (the vector forms are tested in cpp_vec_test.cpp).
Rendered render(const graph::Graph& g, bool vectorize = false) {
  Rendered r{lower::lower_graph(g), {}, {}};
  r.s = sched::schedule_program(r.prog);
  for (const sched::Kernel& k : r.s.kernels) {
    r.kernels.push_back(render_cpp_kernel(r.prog, r.s, k, kernel_name(r.prog, k, "cpp", k.id),
                                          vectorize ? "on" : "off"));
  }
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

graph::Graph unary_graph(const std::string& op, std::vector<Expr> sizes) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous(sizes));
  Arg y = b.call(op, "aten." + op + ".default", {x}, contiguous(sizes));
  return b.finish({y});
}

// ---- names ----

TEST(KernelName, ListsTheOpsOfTheKernelsNodes) {
  Rendered r = render(test::pointwise_chain());
  const sched::Kernel& k = r.s.kernels.at(0);
  EXPECT_EQ(kernel_name(r.prog, k, "cpp", 0), "cpp_fused_add_exp_mul_relu_sub_0");
  EXPECT_EQ(kernel_name(r.prog, k, "cpp", 12), "cpp_fused_add_exp_mul_relu_sub_12");
  EXPECT_EQ(kernel_name(r.prog, k, "triton_poi", 3), "triton_poi_fused_add_exp_mul_relu_sub_3");
  EXPECT_EQ(r.kernels[0].name, "cpp_fused_add_exp_mul_relu_sub_0");
  Rendered softmax = render(test::softmax());
  EXPECT_EQ(softmax.kernels.at(0).name, "cpp_fused__softmax_0");
  Rendered ln = render(test::layer_norm());
  EXPECT_EQ(ln.kernels.at(0).name, "cpp_fused_native_layer_norm_0");
}

TEST(KernelName, ListsAtMostTenOpsInSortedOrder) {
  const char* ops[] = {"sin", "cos",  "tan",  "exp", "log",  "neg",
                       "abs", "sqrt", "tanh", "erf", "ceil", "floor"};
  GraphBuilder b;
  Arg acc = b.input("arg0_1", contiguous({8}));
  for (const char* op : ops)
    acc = b.call(op, std::string("aten.") + op + ".default", {acc}, contiguous({8}));
  Rendered r = render(b.finish({acc}));
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].name, "cpp_fused_abs_ceil_cos_erf_exp_floor_log_neg_sin_sqrt_0");
}

TEST(KernelName, ExternsMakeNoKernels) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 4}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({4, 4}));
  Rendered r = render(b.finish({mm}));
  EXPECT_TRUE(r.kernels.empty());
}

// ---- header comment and arguments ----

TEST(CppKernel, HeaderCommentListsGraphNodesBuffersAndDecisions) {
  Rendered r = render(test::sum_dim0());
  ASSERT_EQ(r.kernels.size(), 1u);
  const std::string& code = r.kernels[0].code;
  EXPECT_EQ(code.substr(0, code.find("extern \"C\"")),
            "// cpp_fused_div_sub_sum_0\n"
            "// graph nodes: div (aten.div.Tensor) sub (aten.sub.Tensor) sum_1 "
            "(aten.sum.dim_IntList)\n"
            "// buffers: buf0(local) buf1\n"
            "// decision: fused {buf0} + {buf1}: shares 544 bytes\n"
            "// decision: reduction looped over r inside each x point (CPU)\n");
  EXPECT_EQ(r.kernels[0].origins, (std::vector<std::string>{"div", "sub", "sum_1"}));
}

TEST(CppKernel, HeaderCommentGivesTheUsersSourceLine) {
  graph::Graph g;
  int x = g.add_placeholder("arg0_1", {contiguous({8})});
  int e = g.add_call("exp", "aten.exp.default", {Arg::node_ref(x)}, {}, {contiguous({8})},
                     "  File \"/home/me/model.py\", line 12, in forward\n"
                     "    y = torch.exp(x)\n"
                     "        ^^^^^^^^^^^^\n");
  g.set_output({Arg::node_ref(e)});
  Rendered r = render(g);
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_TRUE(contains(r.kernels[0].code, "// source: /home/me/model.py:12: y = torch.exp(x)\n"))
      << r.kernels[0].code;
}

TEST(CppKernel, ArgumentsAreReadsThenWrites) {
  Rendered r = render(test::layer_norm());
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelSource& k = r.kernels[0];
  std::vector<std::pair<std::string, bool>> args;
  for (const KernelArg& a : k.args) args.push_back({a.buffer, a.written});
  EXPECT_EQ(args, (std::vector<std::pair<std::string, bool>>{{"arg0_1", false},
                                                             {"arg1_1", false},
                                                             {"arg2_1", false},
                                                             {"buf3", true},
                                                             {"buf4", true},
                                                             {"buf5", true}}));
  EXPECT_TRUE(contains(k.code,
                       "  const float* __restrict__ in_ptr1 = static_cast<const float*>(ptrs[1]);  "
                       "// arg1_1\n"));
  EXPECT_TRUE(contains(
      k.code, "  float* __restrict__ out_ptr2 = static_cast<float*>(ptrs[5]);  // buf5\n"));
}

// ---- loops and statements ----

TEST(CppKernel, Bfloat16PointwiseKernel) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 8}, DType::BFloat16));
  Arg m =
      b.call("mul", "aten.mul.Tensor", {x, test::farg(2.0)}, contiguous({4, 8}, DType::BFloat16));
  Rendered r = render(b.finish({m}));
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].code,
            "// cpp_fused_mul_0\n"
            "// graph nodes: mul (aten.mul.Tensor)\n"
            "// buffers: buf0\n"
            "extern \"C\" void cpp_fused_mul_0(void* const* ptrs, const int64_t* ints) {\n"
            "  (void)ints;\n"
            "  const coil_bf16* __restrict__ in_ptr0 = static_cast<const coil_bf16*>(ptrs[0]);  "
            "// arg0_1\n"
            "  coil_bf16* __restrict__ out_ptr0 = static_cast<coil_bf16*>(ptrs[1]);  // buf0\n"
            "  for (int64_t x0 = 0; x0 < 4; ++x0) {\n"
            "    #pragma omp simd\n"
            "    for (int64_t x1 = 0; x1 < 8; ++x1) {\n"
            "      coil_bf16 tmp0 = in_ptr0[8*x0 + x1];\n"
            "      float tmp1 = static_cast<float>(tmp0);\n"
            "      float tmp2 = (tmp1 * 2.0f);\n"
            "      coil_bf16 tmp3 = static_cast<coil_bf16>(tmp2);\n"
            "      coil_bf16 v_buf0 = tmp3;\n"
            "      out_ptr0[8*x0 + x1] = v_buf0;\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(CppKernel, ParallelOnlyWhenTheWorkIsLarge) {
  Rendered small = render(unary_graph("exp", {8, 16}));
  EXPECT_FALSE(contains(small.kernels.at(0).code, "omp parallel")) << small.kernels[0].code;
  Rendered large = render(unary_graph("exp", {256, 256}));
  EXPECT_TRUE(contains(large.kernels.at(0).code, "  #pragma omp parallel for\n  for (int64_t x0"))
      << large.kernels[0].code;
  EXPECT_TRUE(contains(large.kernels[0].code, "    #pragma omp simd\n    for (int64_t x1"));
  // A 3-d pointwise kernel: the two outer loops are shared out, the inner one vectorized.
  Rendered deep = render(unary_graph("exp", {64, 32, 32}));
  EXPECT_TRUE(contains(deep.kernels.at(0).code, "#pragma omp parallel for collapse(2)\n"))
      << deep.kernels[0].code;
  // A 1-d kernel: one loop, parallel and vectorized.
  Rendered flat = render(unary_graph("exp", {65536}));
  EXPECT_TRUE(contains(flat.kernels.at(0).code, "#pragma omp parallel for simd\n"))
      << flat.kernels[0].code;
}

TEST(CppKernel, ReductionWorkCountsTheInnerLoops) {
  // 64 rows of 1024: few outer points, but 65536 elements of work.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({64, 1024}));
  Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({1})}, contiguous({64}));
  Rendered r = render(b.finish({s}));
  EXPECT_TRUE(
      contains(r.kernels.at(0).code, "  #pragma omp parallel for\n  for (int64_t x0 = 0; x0 < 64"))
      << r.kernels[0].code;
  Rendered small = render(test::softmax());
  EXPECT_FALSE(contains(small.kernels.at(0).code, "omp parallel"));
}

TEST(CppKernel, SumAndMaxLoopsVectorizeTheirReductions) {
  Rendered r = render(test::softmax());
  const std::string& code = r.kernels.at(0).code;
  // The max loop reduces through the prelude's NaN-propagating declared reduction; the sum loop
  // may reassociate; the output loop is pointwise.
  EXPECT_TRUE(contains(code,
                       "    float acc_buf0 = -std::numeric_limits<float>::infinity();\n"
                       "    #pragma omp simd reduction(coil_max_f:acc_buf0)\n"
                       "    for (int64_t r0 = 0; r0 < 32; ++r0) {\n"
                       "      float tmp0 = in_ptr0[r0 + 32*x0];\n"
                       "      acc_buf0 = coil_max<float>(acc_buf0, tmp0);\n"
                       "    }\n"
                       "    float v_buf0 = static_cast<float>(acc_buf0);\n"))
      << code;
  EXPECT_TRUE(contains(code,
                       "    float acc_buf1 = float(0);\n"
                       "    #pragma omp simd reduction(+:acc_buf1)\n"
                       "    for (int64_t r0 = 0; r0 < 32; ++r0) {\n"))
      << code;
  // Local reductions are used from registers, never stored.
  EXPECT_FALSE(contains(code, "] = v_buf0;")) << code;
  EXPECT_FALSE(contains(code, "] = v_buf1;")) << code;
  // The output multiplies by the sum's reciprocal, as eager's CPU softmax does, computed once per
  // row before the loop (hoist_row_invariants).
  EXPECT_TRUE(contains(code,
                       "    float tmp4 = (float(1) / v_buf1);\n"
                       "    #pragma omp simd\n"))
      << code;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(CppKernel, SoftmaxComputesEachExpOnceThroughARowCache) {
  // exp(x - max) is summed in the second loop and scaled in the third: the second also stores it
  // where the output element goes, and the third reads it back there and writes over it; in
  // scalar and vector form alike.
  for (bool vector : {false, true}) {
    const std::string code =
        render(test::softmax(), vector).kernels.at(0).code;  // (a copy: the render is a temporary)
    EXPECT_TRUE(contains(code,
                         "decision: row cache: each element's exp from stage 1 kept in buf2 "
                         "until a later stage writes it there"))
        << code;
    // One exp in the scalar loop; the vector form renders its loop twice (whole vectors, tail),
    // for each of the 4 rows of a row group (8 rows: two groups).
    EXPECT_EQ(count(code, vector ? "coil_exp_u20(" : "std::exp("), vector ? 8u : 1u) << code;
    EXPECT_TRUE(contains(code, vector ? "tmp6.store(out_ptr0 + (r0 + 32*x0_g0), n_r0);"
                                      : "out_ptr0[r0 + 32*x0] = tmp3;"))
        << code;
    EXPECT_TRUE(contains(code, vector
                                   ? "auto tmp22 = VecF::loadu(out_ptr0 + (r0 + 32*x0_g1), n_r0);"
                                   : "float tmp5 = out_ptr0[r0 + 32*x0];"))
        << code;
  }
}

TEST(CppKernel, RowInvariantValuesAreComputedOncePerRow) {
  // layer_norm's rsqrt(var + eps) and its mean read only the row's sums: computed once per row
  // before the output loop (and reused for the rstd output after it), not at every step; in
  // vector form the loop is rendered twice (whole vectors, tail) and still has none.
  for (bool vector : {false, true}) {
    const std::string code = render(test::layer_norm(), vector).kernels.at(0).code;
    size_t sqrts = count(code, "std::sqrt(");
    EXPECT_EQ(sqrts, vector ? 4u : 1u) << code;  // (vector: once per row of a row group)
    size_t loop = code.rfind("for (int64_t r0");
    ASSERT_NE(loop, std::string::npos);
    EXPECT_EQ(code.find("std::sqrt(", loop), std::string::npos) << code;
  }
}

TEST(CppKernel, RowCachesOnlyHoldWhatALaterStageComputesAgain) {
  // log_softmax's loops share x - max; layer_norm's variance loop and output loop x - mean.
  for (const graph::Graph& g : {test::log_softmax(), test::layer_norm()}) {
    const std::string code = render(g).kernels.at(0).code;  // (a copy: the render is a temporary)
    EXPECT_TRUE(contains(code, "decision: row cache: each element's sub from stage 1")) << code;
  }
  // A bfloat16 output cannot hold a float32 exponential until it is overwritten: computed again.
  // It keeps the row's input instead, which all three loops read.
  GraphBuilder g;
  graph::TensorMeta m = contiguous({4, 64});
  m.dtype = DType::BFloat16;
  graph::Arg x = g.input("arg0_1", m);
  graph::Arg out = g.call("_softmax", "aten._softmax.default", {x, iarg(-1), barg(false)}, m);
  const std::string code =
      render(g.finish({out})).kernels.at(0).code;  // (a copy: the render is a temporary)
  EXPECT_FALSE(contains(code, "row cache: each element's exp")) << code;
  EXPECT_TRUE(contains(code, "row cache: each element's load from stage 0")) << code;
  EXPECT_EQ(count(code, "std::exp("), 2u) << code;
}

TEST(CppKernel, LoopsWithAReductionWithoutASimdFormStayScalar) {
  // prod has no declared SIMD reduction here: its loop gets no simd pragma at all, even when
  // it also holds a sum.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  Arg p = b.call("prod", "aten.prod.dim_int", {x, test::iarg(1)}, contiguous({8}));
  Arg s = b.call("sum", "aten.sum.dim_IntList", {x, test::ints({1})}, contiguous({8}));
  Rendered r = render(b.finish({p, s}));
  ASSERT_EQ(r.kernels.size(), 1u);  // both reduce the same rows of x: one loop
  const std::string& code = r.kernels[0].code;
  ASSERT_TRUE(contains(code, "acc_buf0 * ") || contains(code, "acc_buf1 * ")) << code;
  EXPECT_FALSE(contains(code, "#pragma omp simd reduction")) << code;
}

TEST(CppKernel, ArgmaxKeepsTheFirstMaximumAndTheFirstNan) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 32}));
  Arg m = b.call("argmax", "aten.argmax.default", {x, iarg(1)}, contiguous({8}, DType::Int64));
  Rendered r = render(b.finish({m}));
  EXPECT_TRUE(
      contains(r.kernels.at(0).code,
               "    float acc_buf0 = -std::numeric_limits<float>::infinity();\n"
               "    int64_t acci_buf0 = 0;\n"
               "    for (int64_t r0 = 0; r0 < 32; ++r0) {\n"
               "      float tmp0 = in_ptr0[r0 + 32*x0];\n"
               "      if ((tmp0 > acc_buf0) || (coil_isnan(tmp0) && !coil_isnan(acc_buf0))) {\n"
               "        acc_buf0 = tmp0;\n"
               "        acci_buf0 = r0;\n"
               "      }\n"
               "    }\n"
               "    int64_t v_buf0 = static_cast<int64_t>(acci_buf0);\n"
               "    out_ptr0[x0] = v_buf0;\n"))
      << r.kernels[0].code;
}

TEST(CppKernel, MaskedLoadsReadOnlyWhereTheMaskHolds) {
  Rendered r = render(test::cat());
  const std::string& code = r.kernels.at(0).code;
  EXPECT_TRUE(
      contains(code, "      float tmp2 = (tmp1 ? in_ptr0[8*x0 + x1] : static_cast<float>(0));\n"))
      << code;
  EXPECT_TRUE(contains(
      code, "      float tmp4 = (tmp3 ? in_ptr1[8*x0 + x1 - 8] : static_cast<float>(0));\n"))
      << code;
}

TEST(CppKernel, AnInPlaceStoreReadsAndWritesThroughOnePointer) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({8, 8}));
  Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({8, 8}));
  Arg relu = b.call("relu", "aten.relu.default", {mm}, contiguous({8, 8}));
  Rendered r = render(b.finish({relu}));
  ASSERT_TRUE(r.s.buffers.at("buf1").in_place);
  const KernelSource& k = r.kernels.at(0);
  ASSERT_EQ(k.args.size(), 1u);
  EXPECT_EQ(k.args[0].buffer, "buf1");
  EXPECT_TRUE(k.args[0].written);
  EXPECT_TRUE(contains(k.code, "      float tmp0 = out_ptr0[8*x0 + x1];\n")) << k.code;
  EXPECT_TRUE(contains(k.code, "      out_ptr0[8*x0 + x1] = v_buf1;\n")) << k.code;
}

TEST(CppKernel, TransposedReadsIndexTheInputsStrides) {
  Rendered r = render(test::transpose_add());
  const std::string& code = r.kernels.at(0).code;
  EXPECT_TRUE(contains(code, "      float tmp1 = in_ptr1[x0 + 8*x1];\n")) << code;
  EXPECT_TRUE(contains(code, "      out_ptr0[16*x0 + x1] = v_buf0;\n")) << code;
}

// Every kernel of the snapshot graphs and of a few more (bf16, integers, argmax, column
// reductions, masked loads, in-place stores) in one translation unit, each renamed after its graph
// so that names do not clash, compiled with the flags kernels get plus -Wall -Wextra -Werror.
TEST(CppKernel, GeneratedKernelsCompileWithoutWarnings) {
  if (std::system("g++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no g++ on PATH";
  std::vector<test::NamedGraph> graphs = test::snapshot_graphs();
  graphs.push_back({"bf16_softmax", [] {
                      GraphBuilder b;
                      Arg x = b.input("arg0_1", contiguous({8, 32}, DType::BFloat16));
                      Arg s = b.call("_softmax", "aten._softmax.default",
                                     {x, iarg(-1), test::barg(false)},
                                     contiguous({8, 32}, DType::BFloat16));
                      return b.finish({s});
                    }});
  graphs.push_back({"int_ops", [] {
                      GraphBuilder b;
                      Arg x = b.input("arg0_1", contiguous({8, 16}, DType::Int32));
                      Arg y = b.input("arg1_1", contiguous({16}, DType::Int64));
                      Arg r = b.call("remainder", "aten.remainder.Tensor", {x, y},
                                     contiguous({8, 16}, DType::Int64));
                      Arg f = b.call("floor_divide", "aten.floor_divide.default", {r, iarg(3)},
                                     contiguous({8, 16}, DType::Int64));
                      Arg m = b.call("argmax", "aten.argmax.default", {f, iarg(1)},
                                     contiguous({8}, DType::Int64));
                      Arg c = b.call("sum_1", "aten.sum.dim_IntList", {f, ints({0})},
                                     contiguous({16}, DType::Int64));
                      return b.finish({m, c});
                    }});
  graphs.push_back(
      {"column_sum", [] {
         GraphBuilder b;
         Arg x = b.input("arg0_1", contiguous({512, 96}));
         Arg s = b.call("sum_1", "aten.sum.dim_IntList", {x, ints({0})}, contiguous({96}));
         return b.finish({s});
       }});
  graphs.push_back({"in_place", [] {
                      GraphBuilder b;
                      Arg x = b.input("arg0_1", contiguous({64, 64}));
                      Arg mm = b.call("mm", "aten.mm.default", {x, x}, contiguous({64, 64}));
                      Arg r = b.call("relu", "aten.relu.default", {mm}, contiguous({64, 64}));
                      return b.finish({r});
                    }});
  std::string source = cpp::kPrelude;
  int kernels = 0;
  for (const test::NamedGraph& named : graphs) {
    Rendered r = render(named.build());
    for (const KernelSource& k : r.kernels) {
      source += "\n" + std::regex_replace(k.code, std::regex("\\b" + k.name + "\\b"),
                                          k.name + "_" + named.name);
      ++kernels;
    }
  }
  ASSERT_GE(kernels, 14);
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("coil_cpp_kernel_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "kernels.cpp") << source;
  std::string cmd =
      "g++ -std=c++17 -fsyntax-only -fopenmp -DCOIL_USE_LIBMVEC -Wall -Wextra -Werror '" +
      (dir / "kernels.cpp").string() + "' > '" + (dir / "log.txt").string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream log(dir / "log.txt");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(rc, 0) << cmd << "\n" << text.str().substr(0, 4000);
  if (rc == 0) fs::remove_all(dir);
}

// Dynamic shapes: a size symbol a kernel uses is one of its int arguments, and the wrapper binds
// it from the SymInt input that carries it.
// Graph: s0 in [2, inf) (symint placeholder arg0_1); x f32[s0, 8] (arg1_1); exp(x) -> out.
TEST(CppKernel, SizeSymbolsAreKernelArguments) {
  Expr s0 = Expr::symbol("s0");
  graph::Graph g;
  g.add_symbol({"s0", {2, sym::Range::kPosInf}, 5});
  g.add_placeholder("arg0_1", {}, "symint", s0);
  int x = g.add_placeholder("arg1_1", {contiguous({s0, 8})});
  int e = g.add_call("exp", "aten.exp.default", {Arg::node_ref(x)}, {}, {contiguous({s0, 8})});
  g.set_output({Arg::node_ref(e)});
  Rendered r = render(g);
  ASSERT_EQ(r.kernels.size(), 1u);
  const std::string& code = r.kernels[0].code;
  EXPECT_TRUE(contains(code, "const int64_t s0 = ints[0];")) << code;
  EXPECT_EQ(r.kernels[0].size_args, std::vector<std::string>{"s0"});
  std::string wrapper = render_python_wrapper(r.prog, r.s, r.kernels, "", "t", "cpp");
  EXPECT_TRUE(contains(wrapper, "    s0 = _scalar0\n")) << wrapper;
  EXPECT_TRUE(contains(wrapper, "empty_strided_cpu((s0, 8), (8, 1), torch.float32)")) << wrapper;
  EXPECT_TRUE(contains(wrapper, ".kernel('" + r.kernels[0].name + "', 2, 1)")) << wrapper;
}

// A symbol no SymInt input carries is bound from a tensor input's size.
TEST(CppKernel, SizeSymbolsBindFromTensorSizes) {
  Expr s0 = Expr::symbol("s0");
  graph::Graph g;
  g.add_symbol({"s0", {2, sym::Range::kPosInf}, 5});
  int x = g.add_placeholder("arg0_1", {contiguous({8, s0})});
  int e = g.add_call("exp", "aten.exp.default", {Arg::node_ref(x)}, {}, {contiguous({8, s0})});
  g.set_output({Arg::node_ref(e)});
  Rendered r = render(g);
  std::string wrapper = render_python_wrapper(r.prog, r.s, r.kernels, "", "t", "cpp");
  EXPECT_TRUE(contains(wrapper, "    s0 = arg0_1.size(1)\n")) << wrapper;
}

// ---- indirect indices ----

TEST(CppKernel, AnIndirectLoadIsBoundsCheckedBeforeTheAccess) {
  Rendered r = render(test::embedding_add());
  ASSERT_EQ(r.kernels.size(), 1u);
  const std::string& code = r.kernels[0].code;
  EXPECT_TRUE(contains(code, "int64_t* index_error = static_cast<int64_t*>(ptrs[4]);")) << code;
  EXPECT_TRUE(contains(code,
                       "int64_t tmp0 = in_ptr0[3*x0 + x1];\n"
                       "        const int64_t tmp1 = coil_index(tmp0, 10, false, true, "
                       "index_error);\n"
                       "        float tmp2 = in_ptr1[16*tmp1 + x2];"))
      << code;
  EXPECT_EQ(r.kernels[0].args.back().buffer, "index_error");
  EXPECT_TRUE(r.kernels[0].args.back().written);
}

TEST(CppKernel, AScatterAddIsAtomicAndNotVectorized) {
  Rendered r = render(test::index_put_accumulate());
  ASSERT_EQ(r.kernels.size(), 2u);
  const std::string& code = r.kernels[1].code;
  EXPECT_TRUE(contains(code, "#pragma omp atomic\n      out_ptr0[tmp3] += v_buf1;")) << code;
  EXPECT_FALSE(contains(code, "simd")) << code;
  EXPECT_TRUE(contains(code, "coil_index(tmp1, 6, true, true, index_error)")) << code;
}

// A scatter along an inner dim: each point of the outermost loop owns the targets it updates
// (they share its coordinate), so its points run on threads of their own, without atomics, and
// the multiply that ran serially runs in parallel; along dim 0 the targets of two points may
// meet: atomics (add) or one thread (multiply).
TEST(CppKernel, AScatterAlongAnInnerDimIsOwnedByTheOuterLoop) {
  for (const char* mode : {"sum", "prod"}) {
    for (int64_t dim : {0, 1}) {
      GraphBuilder b;
      Arg x = b.input("arg0_1", contiguous({64, 67, 32}));
      Arg idx = b.input("arg1_1", contiguous({64, 67, 32}, DType::Int64));
      Arg r = b.call("scatter_reduce", "aten.scatter_reduce.two",
                     {x, iarg(dim), idx, x, Arg::str(mode)}, contiguous({64, 67, 32}));
      Rendered out = render(b.finish({r}));
      const std::string& code = out.kernels.back().code;
      bool owned = dim == 1;
      EXPECT_EQ(contains(code, "each point of x0 owns its targets"), owned) << code;
      if (owned) {
        EXPECT_TRUE(contains(code, "#pragma omp parallel for\n  for (int64_t x0 = 0; x0 < 64;"))
            << code;
        EXPECT_FALSE(contains(code, "omp atomic")) << code;
      } else {
        EXPECT_EQ(contains(code, "omp atomic"), std::string(mode) == "sum") << code;
      }
    }
  }
}

// x[idx] += v along dim 0: the index picks rows, the trailing dims are the source's own, so
// the loop over dim 1 owns its targets: a parallel region inside the loop over the indices.
TEST(CppKernel, AnIndexPutAlongDim0IsOwnedByItsSecondLoop) {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({256, 64, 128}));
  Arg idx = g.input("arg1_1", contiguous({33}, DType::Int64));
  Arg v = g.input("arg2_1", contiguous({33, 64, 128}));
  Arg put = g.call("index_put", "aten.index_put.default", {x, Arg::list_of({idx}), v, barg(true)},
                   contiguous({256, 64, 128}));
  Rendered r = render(g.finish({put}));
  const std::string& code = r.kernels.back().code;
  EXPECT_TRUE(contains(code, "each point of x1 owns its targets")) << code;
  EXPECT_TRUE(contains(code,
                       "for (int64_t x0 = 0; x0 < 33; ++x0) {\n    #pragma omp parallel "
                       "for\n    for (int64_t x1 = 0; x1 < 64;"))
      << code;
  EXPECT_FALSE(contains(code, "omp atomic")) << code;
}

TEST(CppKernel, AScatterThatMultipliesRunsSerially) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({256, 256}));
  Arg idx = b.input("arg1_1", contiguous({256, 256}, DType::Int64));
  Arg r = b.call("scatter_reduce", "aten.scatter_reduce.two",
                 {x, iarg(0), idx, x, Arg::str("prod")}, contiguous({256, 256}));
  Rendered out = render(b.finish({r}));
  const std::string& code = out.kernels.back().code;
  EXPECT_FALSE(contains(code, "#pragma omp")) << code;
  EXPECT_TRUE(contains(code, "out_ptr0[tmp3] = out_ptr0[tmp3] * v_buf1;")) << code;
}
std::string column_reduction_code(int64_t cols, const std::string& target = "aten.sum.dim_IntList",
                                  const std::string& name = "sum_1") {
  GraphBuilder g;
  Arg x = g.input("arg0_1", contiguous({64, cols}));
  Arg s = g.call(name, target, {x, ints({0})}, contiguous({cols}));
  return render(g.finish({s})).kernels.at(0).code;
}

TEST(CppKernel, ColumnSumsTakeWholeRowsAndSplitTheRowsAcrossThreads) {
  // Each thread streams one contiguous range of rows into accumulators of its own (blocks of
  // columns would read page-sized runs a row apart); rows longer than 16384 keep blocks.
  for (int64_t cols : {4096, 1000, 16384}) {
    std::string code = column_reduction_code(cols);
    std::string n = std::to_string(cols);
    EXPECT_TRUE(contains(code, "the whole row of " + n + " x points at a time")) << code;
    EXPECT_TRUE(contains(code, "#pragma omp parallel for reduction(+:acc_buf0[:" + n + "])"))
        << code;
  }
  std::string code = column_reduction_code(20000);
  EXPECT_TRUE(contains(code, "): 1024 x points at a time")) << code;
}

TEST(CppKernel, ColumnBlocksLeaveTwoPerThreadUpTo1024Columns) {
  // Reductions other than sums (no per-thread accumulators to add): each thread reads long
  // contiguous runs of every row; where the blocks divide the row, the lane loops have a
  // constant trip count.
  struct Case {
    int64_t cols, block;
    bool constant;
  };
  for (Case c : {Case{4096, 1024, true}, Case{768, 384, true}, Case{1000, 512, false},
                 Case{100, 64, false}}) {
    std::string code = column_reduction_code(c.cols, "aten.amax.default", "amax");
    EXPECT_TRUE(contains(code, "): " + std::to_string(c.block) + " x points at a time")) << code;
    EXPECT_EQ(contains(code, "constexpr int64_t xn = " + std::to_string(c.block) + ";"), c.constant)
        << code;
  }
}
TEST(CppKernel, ScansCarryTheirRunningValue) {
  // Row form: one accumulator per x point, r0 innermost. Column form: the contiguous x loop
  // innermost, each step adding its row to the one stored before it.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 40, 48}));
  Arg row = b.call("cumsum", "aten.cumsum.default", {x, iarg(2)}, contiguous({4, 40, 48}));
  Arg col = b.call("cumsum_1", "aten.cumsum.default", {x, iarg(1)}, contiguous({4, 40, 48}));
  Rendered r = render(b.finish({row, col}));
  ASSERT_EQ(r.kernels.size(), 2u);
  const std::string& rows = r.kernels[0].code;
  EXPECT_TRUE(contains(rows, "float acc_buf0 = float(0);")) << rows;
  EXPECT_TRUE(contains(rows, "const float v_buf0 = acc_buf0 + tmp0;")) << rows;
  EXPECT_TRUE(contains(rows, "acc_buf0 = v_buf0;")) << rows;
  EXPECT_TRUE(contains(rows, "out_ptr0[r0 + 1920*x0 + 48*x1] = v_buf0;")) << rows;
  const std::string& cols = r.kernels[1].code;
  EXPECT_TRUE(contains(cols, "for (int64_t r0 = 1; r0 < 40; ++r0) {")) << cols;
  EXPECT_TRUE(contains(cols, "const float v_buf1 = out_ptr0[48*r0 + 1920*x0 + x1 - 48] + tmp1;"))
      << cols;
  EXPECT_TRUE(contains(cols, "out_ptr0[48*r0 + 1920*x0 + x1] = v_buf1;")) << cols;
}

TEST(CppKernel, CummaxScansValuesAndPositionsInOneLoop) {
  // The positions scan reads the values scan at the element it writes: one kernel (fuse_scans),
  // the positions taking the running maximum from its variable.
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({4, 48}));
  graph::TensorMeta vm = contiguous({4, 48});
  graph::TensorMeta im = contiguous({4, 48});
  im.dtype = DType::Int64;
  std::vector<Arg> c = b.call_tuple("cummax", "aten.cummax.default", {x, iarg(1)}, {vm, im});
  Rendered r = render(b.finish({c[0], c[1]}));
  ASSERT_EQ(r.kernels.size(), 1u);
  const std::string& code = r.kernels[0].code;
  EXPECT_TRUE(contains(code, "const int64_t v_buf1 = coil_max<int64_t>(acc_buf1, ")) << code;
  EXPECT_FALSE(contains(code, "out_ptr0[r0 + 48*x0];\n")) << code;  // not read back
}

}  // namespace
}  // namespace coil::codegen
