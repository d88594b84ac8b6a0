// coil::Package — runs a graph that coil.aot_compile packaged, from C++, without Python.
//
// A package is a runtime/package.h container holding:
//   metadata.json  what the loader needs (schema below);
//   the library    the graph's shared library, with the entry points of runtime/graph_abi.h;
//   the weights    one entry per weight: its bytes, contiguous, in the host's byte order.
//
// metadata.json:
//   {"format": 1, "coil_version": "0.1.0", "torch_version": "2.13.0", "device": "cpu" | "cuda",
//    "library": "graph.so",
//    "graph_inputs": [   // coil_graph_run's tensor inputs, in order
//      {"kind": "weight", "entry": "weights/0", "name": "linear.weight", "dtype": "float32",
//       "sizes": [8, 4]},
//      {"kind": "user", "index": 0}],
//    "user_inputs": [{"name": "x", "dtype": "float32", "sizes": ["s0", 4]}],
//    "num_outputs": 1, "symbols": {"s0": {"min": 2, "max": 1024}}, "report": "..."}
// dtypes are torch's names (float32, float16, bfloat16, float64, int64, int32, int16, int8,
// uint8, bool). "user_inputs" serves messages and the input count, "symbols" and "report" are
// not read: the library checks its inputs itself (graph_abi.h).
//
// The constructor verifies the container (any damage throws PackageError), then that the package
// was made by this coil version and this torch version (major.minor.patch, any "+local" suffix
// ignored) for a device this process has, then loads the library (from a private temporary
// folder, removed with the Package), checks its signature against metadata.json and makes the
// weights on the package's device. Every failure throws PackageError naming the package and what
// differs ("package made by torch 2.11.0, this is torch 2.13.0").
//
// run() is const and may be called from several threads at once. Outputs are ordinary tensors
// owned by the caller, which may outlive the Package (graph_abi.h's libraries allocate them
// through torch, never in memory of their own).
//
// Built by CMake's COIL_BUILD_PACKAGE option as the shared library coil_package (links libtorch).
// Example: examples/run_package/. Tests: tests/python/test_package_cpp.py.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "coil/runtime/package.h"

namespace coil {

using runtime::PackageError;

// A failed run: code() is graph_abi.h's kGraphFailed, kGraphIndexError or kGraphBadInput.
class RunError : public std::runtime_error {
 public:
  RunError(int32_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int32_t code() const { return code_; }

 private:
  int32_t code_;
};

class Package {
 public:
  explicit Package(const std::string& path);
  ~Package();
  Package(Package&&) noexcept;
  Package& operator=(Package&&) noexcept;

  // Runs the graph on the user inputs (metadata.json's "user_inputs", in order) and returns its
  // outputs; an undefined tensor for an output the graph gives as None. Throws RunError.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& user_inputs) const;

  const std::string& metadata_json() const;
  size_t num_user_inputs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace coil
