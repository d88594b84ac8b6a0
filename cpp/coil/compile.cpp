#include "coil/compile.h"

#include <chrono>
#include <stdexcept>

#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/codegen/cpp/prelude.h"
#include "coil/codegen/kernel_dedup.h"
#include "coil/codegen/triton/triton_kernel.h"
#include "coil/codegen/triton/triton_prelude.h"
#include "coil/codegen/wrapper/cpp_wrapper.h"
#include "coil/codegen/wrapper/python_wrapper.h"
#include "coil/debug/debug_dir.h"
#include "coil/graph/serialize.h"
#include "coil/lower/attention_pattern.h"
#include "coil/lower/lowering.h"
#include "coil/runtime/build.h"
#include "coil/sched/schedule.h"

namespace coil {

namespace {

class PhaseTimer {
 public:
  explicit PhaseTimer(double& slot) : slot_(slot), start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    slot_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& slot_;
  std::chrono::steady_clock::time_point start_;
};

// CUDA graphs get Triton kernels; CPU graphs get the backend the options name.
std::string choose_backend(const ir::Program& prog, const CompileOptions& opts) {
  for (const ir::Buffer& b : prog.buffers) {
    if (b.layout.device.rfind("cuda", 0) == 0) return "triton";
  }
  if (opts.cpu_backend != "cpp" && opts.cpu_backend != "triton") {
    throw std::invalid_argument("coil: unknown cpu_backend '" + opts.cpu_backend +
                                "' (expected 'cpp' or 'triton')");
  }
  return opts.cpu_backend;
}

// The same choice, before lowering (which needs to know what the kernels can do).
bool targets_triton(const graph::Graph& g, const CompileOptions& opts) {
  for (const graph::Node& n : g.nodes()) {
    for (const graph::TensorMeta& m : n.meta) {
      if (m.device.rfind("cuda", 0) == 0) return true;
    }
  }
  return opts.cpu_backend == "triton";
}

// An "auto" / "on" / "off" option as its enum value; anything else is the user's error.
template <class E>
E choose(const std::string& name, const std::string& value, E automatic, E on, E off) {
  if (value == "auto") return automatic;
  if (value == "on") return on;
  if (value == "off") return off;
  throw std::invalid_argument(name + " must be auto, on or off, not '" + value + "'");
}

}  // namespace

CompileResult compile_graph(const graph::Graph& g, const CompileOptions& opts) {
  CompileResult r;
  // Every range question about a size symbol (s0 >= 2, its hint) is answered from the graph's
  // symbol table while this graph compiles.
  sym::RangeEnv size_symbols = g.symbol_env();
  sym::SizeSymbolScope symbol_scope(size_symbols);
  r.artifacts["graph.txt"] = g.to_text();
  r.artifacts["graph.json"] = graph::to_json(g);

  ir::Program prog;
  std::vector<std::string> rewrites;
  {
    PhaseTimer t(r.seconds["lower"]);
    std::optional<graph::Graph> rewritten;
    if (opts.attention_rewrite) rewritten = lower::rewrite_attention(g, &rewrites);
    const graph::Graph& lowered = rewritten ? *rewritten : g;
    if (rewritten) r.artifacts["graph_rewritten.txt"] = rewritten->to_text();
    lower::LowerOptions lopts;
    lopts.triton = targets_triton(g, opts);
    using Lay = lower::LowerOptions::Layout;
    using Pad = lower::LowerOptions::Padding;
    lopts.channels_last =
        choose("channels_last", opts.channels_last, Lay::Auto, Lay::ChannelsLast, Lay::Contiguous);
    lopts.gemm_padding = choose("gemm_padding", opts.gemm_padding, Pad::Auto, Pad::On, Pad::Off);
    lopts.inference = opts.inference;
    lopts.fallback_random = opts.fallback_random;
    prog = lower::lower_graph(lowered, lopts);
  }
  r.artifacts["ir_pre_fusion.txt"] = prog.to_text();

  sched::Schedule schedule;
  {
    PhaseTimer t(r.seconds["schedule"]);
    r.backend = choose_backend(prog, opts);
    sched::ScheduleOptions sopts;
    sopts.gpu = r.backend == "triton";
    sopts.inputs_freed = opts.inputs_freed;
    schedule = sched::schedule_program(prog, sopts);
  }
  r.artifacts["ir_post_fusion.txt"] = schedule.post_fusion_text(prog);
  r.artifacts["fusion.txt"] = schedule.fusion_text(prog);
  r.artifacts["schedule.txt"] = schedule.schedule_text(prog);
  for (auto it = rewrites.rbegin(); it != rewrites.rend(); ++it)
    r.artifacts["schedule.txt"] = *it + "\n" + r.artifacts["schedule.txt"];

  {
    PhaseTimer t(r.seconds["codegen"]);
    bool triton = r.backend == "triton";
    std::string ext = triton ? ".py" : ".cpp";
    std::vector<codegen::KernelSource> kernels;
    for (const sched::Kernel& k : schedule.kernels) {
      if (triton) {
        std::string name = codegen::kernel_name(prog, k, codegen::triton_kernel_prefix(k), k.id);
        kernels.push_back(codegen::render_triton_kernel(prog, schedule, k, name));
      } else {
        std::string name = codegen::kernel_name(prog, k, "cpp", k.id);
        kernels.push_back(codegen::render_cpp_kernel(prog, schedule, k, name, opts.cpp_vectorize));
      }
    }
    codegen::mark_identical_kernels(prog, kernels);
    for (const codegen::KernelSource& k : kernels) {
      r.needs_aten_headers |= k.aten_math;
      r.vectorized |= k.vectorized || k.vec_math;
    }
    std::string source = triton ? codegen::triton::kPrelude : codegen::cpp::kPrelude;
    for (const codegen::KernelSource& k : kernels) {
      if (!k.aten_math) continue;
      source += codegen::cpp::kAtenMathPrelude;
      break;
    }
    for (const codegen::KernelSource& k : kernels) {
      if (!k.vectorized && !k.vec_math) continue;
      source += codegen::cpp::kVecPrelude;
      break;
    }
    for (const codegen::KernelSource& k : kernels) {
      // (C++: each kernel after the line where the build may cut the source into translation
      // units compiled at once: runtime/build.h, split_source.)
      if (k.same_code_as.empty())
        source += triton ? "\n\n" + k.code : "\n" + std::string(runtime::kKernelBoundary) + k.code;
      r.kernel_names.push_back(k.name);
      r.artifacts[k.name + ext] = k.code;
    }
    r.kernel_source = kernels.empty() ? "" : source;
    if (triton && opts.triton_gpu_source && !kernels.empty()) {
      r.triton_gpu_source = codegen::triton::kPrelude;
      for (size_t i = 0; i < schedule.kernels.size(); ++i) {
        r.triton_gpu_source +=
            "\n\n" + codegen::render_triton_kernel(prog, schedule, schedule.kernels[i],
                                                   kernels[i].name, true)
                         .code;
      }
      r.artifacts["kernels_gpu_form.py"] = r.triton_gpu_source;
    }
    if (opts.cpp_wrapper) r.cpp_wrapper_blocker = codegen::cpp_wrapper_blocker(prog, r.backend);
    if (opts.cpp_wrapper && r.cpp_wrapper_blocker.empty()) {
      std::string wrapper =
          codegen::render_cpp_wrapper(prog, schedule, kernels, opts.cpp_wrapper_checks);
      r.artifacts["wrapper.cpp"] = wrapper;
      r.kernel_source += wrapper;  // (self-contained: a graph without kernels is the wrapper)
      r.wrapper = "cpp";
      r.output_code = codegen::render_python_bridge(prog, kernels, r.kernel_source, opts.title);
      // The same graph driven kernel by kernel from Python, for tools that time each kernel
      // (coil.explain): it loads the same library.
      if (!opts.debug_dir.empty()) {
        r.artifacts["output_code_python.py"] = codegen::render_python_wrapper(
            prog, schedule, kernels, r.kernel_source, opts.title, r.backend);
      }
    } else {
      r.output_code = codegen::render_python_wrapper(prog, schedule, kernels, r.kernel_source,
                                                     opts.title, r.backend);
    }
    r.artifacts["output_code.py"] = r.output_code;
    if (!kernels.empty()) r.artifacts["kernels" + ext] = r.kernel_source;
    r.artifacts["provenance.json"] = debug::provenance_json(prog, kernels);
  }
  r.fallback_ops = prog.fallback_ops;
  for (const ir::ExternCall& e : prog.externs) {
    if (!e.is_fallback) r.extern_ops.push_back(e.op);
  }
  if (!opts.debug_dir.empty()) debug::write_debug_dir(opts.debug_dir, r.artifacts);
  return r;
}

}  // namespace coil
