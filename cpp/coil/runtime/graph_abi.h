// The entry points of a graph compiled with a C++ wrapper (codegen/wrapper/cpp_wrapper.h).
//
// A graph's kernel library then also holds the program that runs the graph: it allocates buffers,
// calls its kernels directly, calls ATen ops boxed through the dispatcher and returns the outputs.
// It does all its tensor work through coil's ATen shim (runtime/aten_shim.h), a table of C
// functions its loader hands it, so the library includes none of torch's headers and links none
// of its libraries. Tensors cross the boundary as AtenTensorHandle (an owned `at::Tensor*` behind
// an opaque pointer); the caller may be Python (coil.runtime, through
// torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors) or C++ (coil::Package, package.h).
//
//   int32_t coil_graph_bind(const void* shim)
//     hands the library the shim (a const CoilAtenShim*), once, before any run. Returns 0, or 1
//     when it is missing or of another COIL_SHIM_ABI_VERSION.
//   int32_t coil_graph_run(void* const* inputs, const int64_t* scalars, void** outputs)
//     inputs:  one AtenTensorHandle per tensor input, in the graph's input order (int inputs
//              skipped). The call takes ownership: each handle is deleted after its last use, so
//              an input can be freed before the call returns; all are deleted on failure too.
//     scalars: one int64 per int (SymInt) input, in the graph's input order.
//     outputs: filled with one new AtenTensorHandle per graph output (nullptr for a None output);
//              the caller owns them. Untouched on failure.
//     returns: kGraphOk, or an error code below, with coil_graph_error() saying what went wrong.
//   const char* coil_graph_error()
//     the message of the calling thread's last failure ("" when none).
//   const char* coil_graph_signature()
//     JSON: {"tensor_inputs": N, "scalar_inputs": M, "outputs": K, "checks_inputs": bool}.
//
// With input checks compiled in (CompileOptions::cpp_wrapper_checks, always on in AOT packages),
// coil_graph_run first checks every tensor input's dtype, device, rank and static sizes, binds
// each size symbol from the inputs and checks its range and that every size it names agrees, and
// returns kGraphBadInput naming the input and dim at the first mismatch.
#pragma once

#include <cstdint>

namespace coil::runtime {

inline constexpr const char* kGraphBindSymbol = "coil_graph_bind";
inline constexpr const char* kGraphRunSymbol = "coil_graph_run";
inline constexpr const char* kGraphErrorSymbol = "coil_graph_error";
inline constexpr const char* kGraphSignatureSymbol = "coil_graph_signature";

inline constexpr int32_t kGraphOk = 0;
inline constexpr int32_t kGraphFailed = 1;      // an ATen call or allocation failed
inline constexpr int32_t kGraphIndexError = 2;  // an indirect index out of bounds
inline constexpr int32_t kGraphBadInput = 3;    // inputs do not match the compiled graph

using GraphRunFn = int32_t (*)(void* const* inputs, const int64_t* scalars, void** outputs);
using GraphTextFn = const char* (*)();
using GraphBindFn = int32_t (*)(const void* shim);

}  // namespace coil::runtime
