// What every C++ wrapper is written in (cpp_wrapper.cpp): ATen's tensor and dispatcher headers
// (kCppWrapperHeaders, precompiled once into the build cache like at::vec's) and a few helpers.
// Buffers are at::Tensor values released by reset() after their last use; ATen ops are boxed
// calls through the dispatcher, every schema argument on the stack (graph::Node::c_args); a
// failure throws coil_wrapper::Failure with its runtime/graph_abi.h code, caught at the entry.
#pragma once

namespace coil::codegen {

// The headers a C++ wrapper needs: the build precompiles them (runtime/build.h).
inline constexpr const char* kCppWrapperHeaders = R"CPP(
#include <ATen/EmptyTensor.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
)CPP";

inline constexpr const char* kCppWrapperRuntime = R"CPP(
#include <ATen/EmptyTensor.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

  // Size arithmetic (sym::to_cpp): Python's floor division and modulo, as the kernels' prelude has.
  inline int64_t coil_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  inline int64_t coil_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }

  namespace coil_wrapper {

  using at::Tensor;
  using c10::IValue;

  thread_local std::string last_error;

  struct Failure {
    int32_t code;
  };

  [[noreturn]] inline void fail(int32_t code, std::string message) {
    last_error = std::move(message);
    throw Failure{code};
  }

  inline void expect(bool ok, const std::string& what) {
    if (!ok) fail(3, what);
  }

  // An input handle (an owned at::Tensor*, runtime/graph_abi.h) taken over; an output handed out.
  inline Tensor take(void* handle) {
    Tensor* t = static_cast<Tensor*>(handle);
    Tensor out = std::move(*t);
    delete t;
    return out;
  }
  inline void* give(Tensor t) {
    return t.defined() ? new Tensor(std::move(t)) : nullptr;
  }

  inline Tensor empty(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
    return at::detail::empty_strided_cpu(sizes, strides, dtype);
  }

  // Whether the kernel serves transparent huge pages where madvise asks for them ("[madvise]").
  inline bool huge_pages_on_advice() {
    static const bool on = [] {
      std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
      std::string mode;
      std::getline(f, mode);
      return mode.find("[madvise]") != std::string::npos;
    }();
    return on;
  }

  // empty() for a buffer of many megabytes: its whole 2 MiB pages asked for as huge pages, which
  // its first writer then faults in 512 times less often (coil's runtime/memory.h says why).
  inline Tensor empty_large(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
    Tensor t = empty(sizes, strides, dtype);
    if (huge_pages_on_advice()) {
      const std::uintptr_t mask = (std::uintptr_t{1} << 21) - 1;
      std::uintptr_t address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
      std::uintptr_t first = (address + mask) & ~mask;
      std::uintptr_t end = (address + t.storage().nbytes()) & ~mask;
      if (end > first) madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
    }
    return t;
  }

  // A view of t's storage starting `offset` elements after t's own start (reinterpret_tensor).
  inline Tensor view(const Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                     int64_t offset) {
    return t.as_strided(sizes, strides, t.storage_offset() + offset);
  }

  // t itself when it has `strides` (dims of size 1 aside), else a copy laid out that way: the
  // check on a library call whose result layout the compiler assumed.
  inline Tensor require_strides(Tensor t, c10::IntArrayRef strides) {
    bool same = int64_t(strides.size()) == t.dim();
    for (int64_t d = 0; same && d < t.dim(); ++d)
      same = t.stride(d) == strides[size_t(d)] || t.size(d) == 1;
    if (same) return t;
    Tensor out = at::detail::empty_strided_cpu(t.sizes(), strides, t.scalar_type());
    out.copy_(t);
    return out;
  }

  inline c10::OperatorHandle op(const char* name, const char* overload) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  }

  inline void call(const c10::OperatorHandle& op, torch::jit::Stack& stack, const char* node) {
    try {
      op.callBoxed(stack);
    } catch (const c10::Error& e) {
      fail(1, op.schema().name() + " (graph node " + node + "): " + e.what_without_backtrace());
    }
  }

  inline c10::List<std::optional<Tensor>> optional_tensors(std::vector<std::optional<Tensor>> v) {
    c10::List<std::optional<Tensor>> out;
    for (auto& t : v) out.push_back(std::move(t));
    return out;
  }

  // A bad indirect index a kernel reported (flag, index, size).
  inline void check_indices(const Tensor& error) {
    const int64_t* e = static_cast<const int64_t*>(error.data_ptr());
    if (e[0]) {
      fail(2, "index " + std::to_string(e[1]) + " is out of bounds for dimension with size " +
                  std::to_string(e[2]));
    }
  }

  }  // namespace coil_wrapper
)CPP";

}  // namespace coil::codegen
