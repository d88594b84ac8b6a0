// What every C++ wrapper is written in (cpp_wrapper.cpp): coil's ATen shim (runtime/aten_shim.h,
// whose text comes first in the wrapper's translation unit), the kernels' size arithmetic
// (cpp::kSizeArithmetic, after this text) and a few helpers over the shim. No header
// of torch's is included, so a wrapper compiles in a fraction of a second. Buffers are
// coil_wrapper::T values, released when reset() or out of scope; ATen ops are boxed calls through
// the shim, every schema argument a CoilValue (graph::Node::c_args); a failure throws
// coil_wrapper::Failure with its runtime/graph_abi.h code, caught at the entry point.
#pragma once

namespace coil::codegen {

inline constexpr const char* kCppWrapperRuntime = R"CPP(
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

  namespace coil_wrapper {

  // The shim coil_graph_bind was given.
  static const CoilAtenShim* shim = nullptr;

  static thread_local std::string last_error;

  struct Failure {
    int32_t code;
  };

  [[noreturn]] inline void fail(int32_t code, std::string message) {
    last_error = std::move(message);
    throw Failure{code};
  }

  // A tensor the wrapper owns (a CoilTensor), released by reset() or when it goes out of scope.
  class T {
   public:
    T() = default;
    explicit T(CoilTensor h) : h_(h) {}
    T(T&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
    T& operator=(T&& o) noexcept {
      if (this != &o) {
        reset();
        h_ = o.h_;
        o.h_ = nullptr;
      }
      return *this;
    }
    T(const T&) = delete;
    T& operator=(const T&) = delete;
    ~T() { reset(); }

    void reset() {
      if (h_) shim->release(h_);
      h_ = nullptr;
    }
    CoilTensor get() const { return h_; }
    CoilTensor release() {
      CoilTensor h = h_;
      h_ = nullptr;
      return h;
    }
    void* data() const { return shim->data_ptr(h_); }
    int64_t dim() const { return shim->dim(h_); }
    int64_t size(int32_t d) const { return shim->size(h_, d); }
    int64_t stride(int32_t d) const { return shim->stride(h_, d); }
    int32_t dtype() const { return shim->dtype(h_); }
    bool is_cpu() const { return shim->is_cpu(h_) != 0; }

   private:
    CoilTensor h_ = nullptr;
  };

  // A tensor a shim function made, or the failure it reported.
  inline T made(CoilTensor h, const char* what) {
    if (!h) fail(1, std::string(what) + ": " + shim->last_error());
    return T(h);
  }

  using Ints = std::initializer_list<int64_t>;

  inline T empty(Ints sizes, Ints strides, int32_t dtype) {
    return made(shim->empty(sizes.begin(), strides.begin(), int32_t(sizes.size()), dtype, 0),
                "allocating a buffer");
  }

  // empty() for a buffer of many megabytes: its whole 2 MiB pages asked for as huge pages.
  inline T empty_large(Ints sizes, Ints strides, int32_t dtype) {
    return made(shim->empty(sizes.begin(), strides.begin(), int32_t(sizes.size()), dtype, 1),
                "allocating a buffer");
  }

  // A view of t's storage starting `offset` elements after t's own start (reinterpret_tensor).
  inline T view(const T& t, Ints sizes, Ints strides, int64_t offset) {
    return made(shim->view(t.get(), sizes.begin(), strides.begin(), int32_t(sizes.size()), offset),
                "a view");
  }

  // A new reference to t (an output handed out while t lives on).
  inline T share(const T& t) {
    return made(shim->share(t.get()), "an output");
  }

  // t itself when it has `strides` (dims of size 1 aside), else a copy laid out that way: the
  // check on a library call whose result layout the compiler assumed.
  inline T require_strides(const T& t, Ints strides) {
    return made(shim->require_strides(t.get(), strides.begin(), int32_t(strides.size())),
                "a library call's result laid out as compiled");
  }

  inline void* find_op(const char* name, const char* overload) {
    void* op = shim->find_op(name, overload);
    if (!op) fail(1, shim->last_error());
    return op;
  }

  inline void call(void* op, const CoilValue* args, int32_t num_args, CoilTensor* results,
                   int32_t num_results, const char* node) {
    if (shim->call(op, args, num_args, results, num_results))
      fail(1, std::string("graph node ") + node + ": " + shim->last_error());
  }

  // One boxed argument (runtime/aten_shim.h's CoilValue).
  inline CoilValue value(int32_t kind) {
    CoilValue v{};
    v.kind = kind;
    return v;
  }
  inline CoilValue none() {
    return value(COIL_VALUE_NONE);
  }
  inline CoilValue undefined() {
    return value(COIL_VALUE_UNDEFINED_TENSOR);
  }
  inline CoilValue tensor(const T& t) {
    CoilValue v = value(COIL_VALUE_TENSOR);
    v.tensor = t.get();
    return v;
  }
  inline CoilValue integer(int64_t i, int32_t kind = COIL_VALUE_INT) {
    CoilValue v = value(kind);
    v.i = i;
    return v;
  }
  inline CoilValue real(double f) {
    CoilValue v = value(COIL_VALUE_FLOAT);
    v.f = f;
    return v;
  }
  inline CoilValue text(const char* s, int32_t kind = COIL_VALUE_STR) {
    CoilValue v = value(kind);
    v.text = s;
    return v;
  }
  inline CoilValue int_list(const int64_t* p, int32_t n) {
    CoilValue v = value(COIL_VALUE_INT_LIST);
    v.ints = p;
    v.count = n;
    return v;
  }
  inline CoilValue float_list(const double* p, int32_t n) {
    CoilValue v = value(COIL_VALUE_FLOAT_LIST);
    v.floats = p;
    v.count = n;
    return v;
  }
  inline CoilValue tensor_list(const CoilTensor* p, int32_t n,
                               int32_t kind = COIL_VALUE_TENSOR_LIST) {
    CoilValue v = value(kind);
    v.tensors = p;
    v.count = n;
    return v;
  }

  // A bad indirect index a kernel reported (flag, index, size).
  inline void check_indices(const int64_t* e) {
    if (e[0]) {
      fail(2, "index " + std::to_string(e[1]) + " is out of bounds for dimension with size " +
                  std::to_string(e[2]));
    }
  }

  }  // namespace coil_wrapper
)CPP";

}  // namespace coil::codegen
