// Tests for codegen/kernel_dedup.h: kernels with the same code up to names are compiled once and
// launched at every site; kernels that differ in anything else are kept apart.
#include "coil/codegen/kernel_dedup.h"

#include <gtest/gtest.h>

#include "../test_graphs.h"
#include "coil/compile.h"

namespace coil::codegen {
namespace {

using graph::Arg;
using graph::DType;
using test::contiguous;
using test::GraphBuilder;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Two "layers": mm -> op1 -> mm -> op2; the matmuls (extern calls) keep op1 and op2 in
// separate kernels.
graph::Graph two_layers(const std::string& op1, const std::string& op2, DType d2 = DType::Float32) {
  GraphBuilder b;
  Arg x = b.input("arg0_1", contiguous({16, 16}));
  Arg w = b.input("arg1_1", contiguous({16, 16}));
  Arg mm = b.call("mm", "aten.mm.default", {x, w}, contiguous({16, 16}));
  Arg h = b.call(op1, "aten." + op1 + ".default", {mm}, contiguous({16, 16}));
  Arg mm1 = b.call("mm_1", "aten.mm.default", {h, w}, contiguous({16, 16}));
  Arg in2 = mm1;
  if (d2 != DType::Float32) {
    in2 = b.call("convert", "prims.convert_element_type.default", {mm1, Arg::dtype_of(d2)},
                 contiguous({16, 16}, d2));
  }
  Arg y = b.call(op2 + "_1", "aten." + op2 + ".default", {in2}, contiguous({16, 16}, d2));
  return b.finish({y});
}

CompileResult compile(const graph::Graph& g, const std::string& backend) {
  CompileOptions opts;
  opts.cpu_backend = backend;
  return compile_graph(g, opts);
}

TEST(KernelDedup, RepeatedLayersShareOneCppKernel) {
  CompileResult r = compile(two_layers("relu", "relu"), "cpp");
  ASSERT_EQ(r.kernel_names.size(), 2u);
  const std::string& first = r.kernel_names[0];
  const std::string& second = r.kernel_names[1];
  // One function in the C++ source; the second name is an alias of the first in the wrapper.
  EXPECT_EQ(count(r.kernel_source, "extern \"C\" void "), 1u) << r.kernel_source;
  EXPECT_NE(r.output_code.find(second + " = " + first + "\n"), std::string::npos) << r.output_code;
  // Both launch sites remain, and the second kernel's artifact says why it has no code.
  EXPECT_NE(r.output_code.find("    " + second + "("), std::string::npos);
  EXPECT_NE(r.artifacts.at(second + ".cpp").find("decision: same code as " + first),
            std::string::npos);
}

TEST(KernelDedup, RepeatedLayersShareOneTritonLauncher) {
  CompileResult r = compile(two_layers("relu", "relu"), "triton");
  ASSERT_EQ(r.kernel_names.size(), 2u);
  const std::string& first = r.kernel_names[0];
  const std::string& second = r.kernel_names[1];
  EXPECT_EQ(count(r.kernel_source, "def " + first + "("), 1u);
  EXPECT_EQ(count(r.kernel_source, "def " + second + "("), 0u);
  EXPECT_EQ(count(r.output_code, " = triton_launcher.Launcher("), 1u) << r.output_code;
  EXPECT_NE(r.output_code.find(second + " = " + first + "\n"), std::string::npos);
  EXPECT_NE(r.output_code.find("triton_launcher.precompile([" + first + "])"), std::string::npos);
  EXPECT_NE(r.output_code.find("    " + second + ".run("), std::string::npos);
}

TEST(KernelDedup, DifferentMathIsKeptApart) {
  for (const char* backend : {"cpp", "triton"}) {
    CompileResult r = compile(two_layers("relu", "exp"), backend);
    ASSERT_EQ(r.kernel_names.size(), 2u);
    EXPECT_EQ(r.output_code.find("same code"), std::string::npos) << backend;
  }
}

TEST(KernelDedup, DifferentDtypesAreKeptApart) {
  // relu over bf16 and over f32: Triton's code reads the same, the pointers' types differ.
  for (const char* backend : {"cpp", "triton"}) {
    CompileResult r = compile(two_layers("relu", "relu", DType::BFloat16), backend);
    EXPECT_EQ(r.output_code.find(" = " + r.kernel_names[0] + "\n"), std::string::npos)
        << backend << "\n"
        << r.output_code;
  }
}

KernelSource kernel(const std::string& name, const std::string& body) {
  KernelSource k;
  k.name = name;
  k.code =
      "# " + name + "\n# graph nodes: whatever\n@triton.jit\ndef " + name + "(in_ptr0):\n" + body;
  return k;
}

TEST(KernelDedup, NormalizedTextDropsNamesCommentsAndBufferNumbers) {
  ir::Program prog;
  KernelSource a = kernel("triton_poi_fused_relu_3",
                          "    # stage 0: buf12\n    v_buf12 = tl.load(in_ptr0)  # buf12\n"
                          "    acc_buf13 = v_buf12 + v_buf12\n");
  KernelSource b = kernel("triton_poi_fused_relu_9",
                          "    # stage 0: buf40\n    v_buf40 = tl.load(in_ptr0)\n"
                          "    acc_buf2 = v_buf40 + v_buf40\n");
  EXPECT_EQ(normalized_kernel_text(prog, a), normalized_kernel_text(prog, b));
  // Renumbering is a renaming: a kernel that reuses one buffer where the other has two differs.
  KernelSource c = kernel("triton_poi_fused_relu_9",
                          "    v_buf40 = tl.load(in_ptr0)\n    acc_buf40 = v_buf40 + v_buf40\n");
  EXPECT_NE(normalized_kernel_text(prog, a), normalized_kernel_text(prog, c));
  // Launch configs are part of the text: a shared launcher tunes among one list.
  KernelSource d = b;
  d.launch.configs.push_back(LaunchConfig{1024, 0, 4, 0});
  EXPECT_NE(normalized_kernel_text(prog, b), normalized_kernel_text(prog, d));

  std::vector<KernelSource> ks = {a, b, c};
  EXPECT_EQ(mark_identical_kernels(prog, ks), 1);
  EXPECT_EQ(ks[1].same_code_as, "triton_poi_fused_relu_3");
  EXPECT_TRUE(ks[2].same_code_as.empty());
}

TEST(KernelDedup, CppPragmasAreCodeNotComments) {
  ir::Program prog;
  KernelSource a, b;
  a.name = "cpp_fused_a_0";
  b.name = "cpp_fused_a_1";
  a.code = "// cpp_fused_a_0\nextern \"C\" void cpp_fused_a_0() {\n  #pragma omp simd\n}\n";
  b.code = "// cpp_fused_a_1\nextern \"C\" void cpp_fused_a_1() {\n}\n";
  EXPECT_NE(normalized_kernel_text(prog, a), normalized_kernel_text(prog, b));
}

}  // namespace
}  // namespace coil::codegen
