// coil._C: the nanobind module. Thin: converts arguments and results, no compiler logic.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "coil/codegen/cpp/prelude.h"
#include "coil/compile.h"
#include "coil/graph/serialize.h"
#include "coil/lower/attention_pattern.h"
#include "coil/lower/lowering.h"
#include "coil/runtime/aten_shim_text.h"

namespace nb = nanobind;

void bind_runtime(nb::module_& m);  // runtime_bindings.cpp
void bind_package(nb::module_& m);  // package_bindings.cpp

NB_MODULE(_C, m) {
  // Kernel libraries referenced by generated modules live until interpreter exit by design.
  nb::set_leak_warnings(false);
  m.doc() = "coil's C++ core: graph import, lowering, scheduling, code generation, kernel runtime";
  static nb::exception<coil::graph::GraphError> graph_error(m, "GraphError", PyExc_ValueError);

  m.def(
      "compile_graph",
      [](const std::string& graph_json, const std::string& debug_dir, const std::string& title,
         const std::string& cpu_backend, const std::string& channels_last,
         const std::string& gemm_padding, bool inference, bool fallback_random,
         const std::string& cpp_vectorize, bool attention_rewrite, bool inputs_freed,
         bool triton_gpu_source, bool cpp_wrapper, bool cpp_wrapper_checks) {
        coil::graph::Graph g = coil::graph::from_json(graph_json);
        coil::CompileOptions opts;
        opts.debug_dir = debug_dir;
        opts.title = title;
        opts.cpu_backend = cpu_backend;
        opts.channels_last = channels_last;
        opts.gemm_padding = gemm_padding;
        opts.inference = inference;
        opts.fallback_random = fallback_random;
        opts.cpp_vectorize = cpp_vectorize;
        opts.attention_rewrite = attention_rewrite;
        opts.inputs_freed = inputs_freed;
        opts.triton_gpu_source = triton_gpu_source;
        opts.cpp_wrapper = cpp_wrapper;
        opts.cpp_wrapper_checks = cpp_wrapper_checks;
        coil::CompileResult r;
        {
          nb::gil_scoped_release release;
          r = coil::compile_graph(g, opts);
        }
        nb::dict out;
        out["output_code"] = r.output_code;
        out["backend"] = r.backend;
        out["wrapper"] = r.wrapper;
        out["cpp_wrapper_blocker"] = r.cpp_wrapper_blocker;
        out["needs_aten_headers"] = r.needs_aten_headers;
        out["vectorized"] = r.vectorized;
        out["kernel_source"] = r.kernel_source;
        out["triton_gpu_source"] = r.triton_gpu_source;
        out["kernel_names"] = r.kernel_names;
        out["fallback_ops"] = r.fallback_ops;
        out["extern_ops"] = r.extern_ops;
        out["artifacts"] = r.artifacts;
        out["seconds"] = r.seconds;
        return out;
      },
      nb::arg("graph_json"), nb::arg("debug_dir") = "", nb::arg("title") = "graph",
      nb::arg("cpu_backend") = "cpp", nb::arg("channels_last") = "auto",
      nb::arg("gemm_padding") = "auto", nb::arg("inference") = true,
      nb::arg("fallback_random") = false, nb::arg("cpp_vectorize") = "auto",
      nb::arg("attention_rewrite") = true, nb::arg("inputs_freed") = false,
      nb::arg("triton_gpu_source") = false, nb::arg("cpp_wrapper") = false,
      nb::arg("cpp_wrapper_checks") = false,
      "Compiles a graph (coil.graph JSON) and returns the wrapper module source and artifacts.");
  m.def(
      "graph_text",
      [](const std::string& graph_json) { return coil::graph::from_json(graph_json).to_text(); },
      "Parses and validates a coil.graph JSON document; returns the FX-like text form.");
  m.def("lowered_ops", &coil::lower::lowered_ops,
        "ATen op names (without overload) that coil lowers itself.");
  m.def(
      "keeps_op_whole", &coil::lower::keeps_op_whole, nb::arg("name"), nb::arg("random"),
      nb::arg("fallback_random"),
      "Whether AOTAutograd should hand the op to coil undecomposed (coil::lower::keeps_op_whole).");
  m.def("extra_decompositions", &coil::lower::extra_decompositions,
        "Ops outside core ATen's decompositions that AOTAutograd decomposes for coil "
        "(coil::lower::extra_decompositions).");
  m.def("decomposes_here", &coil::lower::decomposes_here, nb::arg("name"), nb::arg("device"),
        nb::arg("low_precision"),
        "Whether an extra decomposition applies to this input (coil::lower::decomposes_here).");
  m.def("recomputes_in_kernels", &coil::lower::recomputes_in_kernels, nb::arg("target"),
        "Whether coil computes the op in its own kernels (coil::lower::recomputes_in_kernels).");
  m.def(
      "attention_matches",
      [](const std::string& graph_json, bool dropout) {
        coil::graph::Graph g = coil::graph::from_json(graph_json);
        nb::list out;
        for (const coil::lower::AttentionMatch& a : coil::lower::find_attention(g, dropout)) {
          nb::dict d;
          d["product"] = g.node(a.product).name;
          d["q"] = g.node(a.q).name;
          d["k"] = g.node(a.k).name;
          d["v"] = g.node(a.v).name;
          d["scale"] = a.scale;
          d["dropout"] = a.dropout;
          d["mask_negated"] = a.mask_negated;
          if (a.mask >= 0) {
            d["mask"] = g.node(a.mask).name;
          } else {
            d["mask"] = nb::none();
          }
          out.append(d);
        }
        return out;
      },
      nb::arg("graph_json"), nb::arg("dropout") = false,
      "Written-out attentions in a graph: for each, the names of its second product and of q, k, "
      "v, of the additive mask (None without), the scale and the dropout probability (0 without; "
      "matched only with dropout=True) (coil::lower::find_attention).");
  m.attr("VEC_HEADERS") = coil::codegen::cpp::kVecHeaders;
  m.attr("CPP_PRELUDE") = coil::codegen::cpp::kPrelude;
  m.attr("VEC_PRELUDE") = coil::codegen::cpp::kVecPrelude;
  m.attr("ATEN_SHIM_SOURCE") =
      std::string(coil::runtime::kAtenShimHeader) + coil::runtime::kAtenShimSource;
  bind_runtime(m);
  bind_package(m);
}
