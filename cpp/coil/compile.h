// The coil pipeline for one graph, in one function: lower -> schedule -> codegen, with the IR
// dumped after each pass when asked. Building and running the generated code is the runtime's job
// (the wrapper loads the kernel source through the build cache).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coil/graph/graph.h"

namespace coil {

// Every knob of a compile. Part of every cache key: anything that changes generated code is here.
struct CompileOptions {
  std::string debug_dir;  // when set, the graph's debug folder: every artifact is written there
  std::string title = "graph";
  // Kernels for graphs on the CPU: "cpp" (C++ + OpenMP) or "triton" (Triton, run on the CPU by
  // Triton's interpreter, TRITON_INTERPRET=1: slow, for testing the Triton path without a GPU).
  // Graphs with a tensor on a CUDA device always get Triton kernels.
  std::string cpu_backend = "cpp";
  // lower::LowerOptions::channels_last: "auto", "on" (every conv graph), "off".
  std::string channels_last = "auto";
  bool inference = true;  // lower::LowerOptions::inference: false for training graphs
  // sched::ScheduleOptions::inputs_freed: true for backward graphs, whose saved activations
  // free as the wrapper drops them.
  bool inputs_freed = false;
  // lower::LowerOptions::gemm_padding: "auto" (CUDA only), "on" (every device), "off".
  std::string gemm_padding = "auto";
  // lower::LowerOptions::fallback_random: random ops run in ATen, drawing eager's streams.
  bool fallback_random = false;
  // C++ kernels' innermost loops in vector form (at::vec): "auto", "on", "off" (cpp_kernel.h).
  std::string cpp_vectorize = "auto";
  // Written-out attention replaced by one scaled_dot_product_attention call
  // (lower/attention_pattern.h).
  bool attention_rewrite = true;
  // Also render every Triton kernel as a GPU gets it, into CompileResult::triton_gpu_source (the
  // GPU-target compile check, python/coil/triton_check.py; kernels of CPU tensors are otherwise
  // rendered for Triton's interpreter).
  bool triton_gpu_source = false;
  // The wrapper as C++ in the kernel library (codegen/wrapper/cpp_wrapper.h) where the graph
  // allows it (CompileResult::cpp_wrapper_blocker says why not); cpp_wrapper_checks: its entry
  // checks its inputs first (AOT packages).
  bool cpp_wrapper = false;
  bool cpp_wrapper_checks = false;
};

struct CompileResult {
  std::string output_code;    // output_code.py
  std::string backend;        // "cpp" or "triton": which renderer made the kernels
  std::string kernel_source;  // every kernel: a C++ file, or Triton functions (Python)
  // With CompileOptions::triton_gpu_source, for a Triton graph: the prelude and every kernel (each
  // under its own name, identical ones included) as a GPU gets them.
  std::string triton_gpu_source;
  // "cpp" when the graph runs through a C++ wrapper (in kernel_source), else "python".
  std::string wrapper = "python";
  std::string cpp_wrapper_blocker;  // with CompileOptions::cpp_wrapper: why the wrapper is Python
  // What the C++ kernel file needs to build: torch's headers (ATen's scalar math), at::vec.
  bool needs_aten_headers = false;
  bool vectorized = false;
  std::vector<std::string> kernel_names;
  std::vector<std::string> fallback_ops;
  std::vector<std::string> extern_ops;
  // Artifacts by file name (graph.txt, ir_pre_fusion.txt, fusion.txt, schedule.txt, ...).
  std::map<std::string, std::string> artifacts;
  std::map<std::string, double> seconds;  // per phase: lower, schedule, codegen
};

CompileResult compile_graph(const graph::Graph& g, const CompileOptions& opts);

}  // namespace coil
