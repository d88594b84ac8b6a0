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
};

struct CompileResult {
  std::string output_code;    // output_code.py
  std::string kernel_source;  // the C++ file with every kernel
  std::vector<std::string> kernel_names;
  std::vector<std::string> fallback_ops;
  std::vector<std::string> extern_ops;
  // Artifacts by file name (graph.txt, ir_pre_fusion.txt, fusion.txt, schedule.txt, ...).
  std::map<std::string, std::string> artifacts;
  std::map<std::string, double> seconds;  // per phase: lower, schedule, codegen
};

CompileResult compile_graph(const graph::Graph& g, const CompileOptions& opts);

}  // namespace coil
