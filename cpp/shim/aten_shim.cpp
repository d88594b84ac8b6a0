// coil's ATen shim (coil/runtime/aten_shim.h): the table of C functions a graph's C++ wrapper
// calls for every tensor operation, implemented with ATen.
//
// Built two ways: into the build cache by coil.runtime (this text is embedded in coil._C as
// ATEN_SHIM_SOURCE, after the header's text), and into coil::Package by CMake. Every function
// catches what ATen throws and reports it through last_error(): nothing crosses the C boundary
// as an exception.
#ifndef COIL_ATEN_SHIM_H
#include "coil/runtime/aten_shim.h"
#endif

#include <ATen/EmptyTensor.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <sys/mman.h>

#include <cstdint>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

using at::Tensor;
using c10::IValue;

static_assert(int(c10::ScalarType::Byte) == COIL_DTYPE_UINT8);
static_assert(int(c10::ScalarType::Char) == COIL_DTYPE_INT8);
static_assert(int(c10::ScalarType::Short) == COIL_DTYPE_INT16);
static_assert(int(c10::ScalarType::Int) == COIL_DTYPE_INT32);
static_assert(int(c10::ScalarType::Long) == COIL_DTYPE_INT64);
static_assert(int(c10::ScalarType::Half) == COIL_DTYPE_FLOAT16);
static_assert(int(c10::ScalarType::Float) == COIL_DTYPE_FLOAT32);
static_assert(int(c10::ScalarType::Double) == COIL_DTYPE_FLOAT64);
static_assert(int(c10::ScalarType::ComplexFloat) == COIL_DTYPE_COMPLEX64);
static_assert(int(c10::ScalarType::ComplexDouble) == COIL_DTYPE_COMPLEX128);
static_assert(int(c10::ScalarType::Bool) == COIL_DTYPE_BOOL);
static_assert(int(c10::ScalarType::BFloat16) == COIL_DTYPE_BFLOAT16);
static_assert(int(c10::ScalarType::UInt16) == COIL_DTYPE_UINT16);
static_assert(int(c10::ScalarType::UInt32) == COIL_DTYPE_UINT32);
static_assert(int(c10::ScalarType::UInt64) == COIL_DTYPE_UINT64);
static_assert(int(c10::Layout::Strided) == COIL_LAYOUT_STRIDED);
static_assert(int(c10::MemoryFormat::Contiguous) == COIL_MEMORY_FORMAT_CONTIGUOUS);
static_assert(int(c10::MemoryFormat::Preserve) == COIL_MEMORY_FORMAT_PRESERVE);
static_assert(int(c10::MemoryFormat::ChannelsLast) == COIL_MEMORY_FORMAT_CHANNELS_LAST);
static_assert(int(c10::MemoryFormat::ChannelsLast3d) == COIL_MEMORY_FORMAT_CHANNELS_LAST_3D);

thread_local std::string last_error_text;

Tensor& tensor(CoilTensor t) {
  return *static_cast<Tensor*>(t);
}

CoilTensor handle(Tensor t) {
  return new Tensor(std::move(t));
}

// Runs f, turning an exception into last_error_text and `failed`.
template <typename F, typename R>
R guarded(F f, R failed) {
  try {
    return f();
  } catch (const c10::Error& e) {
    last_error_text = e.what_without_backtrace();
  } catch (const std::exception& e) {
    last_error_text = e.what();
  } catch (...) {
    last_error_text = "unknown exception";
  }
  return failed;
}

// Whether the kernel serves transparent huge pages where madvise asks for them ("[madvise]").
bool huge_pages_on_advice() {
  static const bool on = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(f, mode);
    return mode.find("[madvise]") != std::string::npos;
  }();
  return on;
}

CoilTensor shim_empty(const int64_t* sizes, const int64_t* strides, int32_t ndim, int32_t dtype,
                      int32_t huge_pages) {
  return guarded(
      [&]() -> CoilTensor {
        Tensor t = at::detail::empty_strided_cpu(c10::IntArrayRef(sizes, size_t(ndim)),
                                                 c10::IntArrayRef(strides, size_t(ndim)),
                                                 c10::ScalarType(dtype));
        if (huge_pages && huge_pages_on_advice()) {
          // Its first writer then faults its whole 2 MiB pages in 512 times less often.
          const std::uintptr_t mask = (std::uintptr_t{1} << 21) - 1;
          std::uintptr_t address = reinterpret_cast<std::uintptr_t>(t.data_ptr());
          std::uintptr_t first = (address + mask) & ~mask;
          std::uintptr_t end = (address + t.storage().nbytes()) & ~mask;
          if (end > first) madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
        }
        return handle(std::move(t));
      },
      CoilTensor(nullptr));
}

CoilTensor shim_view(CoilTensor t, const int64_t* sizes, const int64_t* strides, int32_t ndim,
                     int64_t offset) {
  return guarded(
      [&]() -> CoilTensor {
        const Tensor& base = tensor(t);
        return handle(base.as_strided(c10::IntArrayRef(sizes, size_t(ndim)),
                                      c10::IntArrayRef(strides, size_t(ndim)),
                                      base.storage_offset() + offset));
      },
      CoilTensor(nullptr));
}

CoilTensor shim_share(CoilTensor t) {
  return guarded([&]() -> CoilTensor { return handle(tensor(t)); }, CoilTensor(nullptr));
}

CoilTensor shim_require_strides(CoilTensor t, const int64_t* strides, int32_t ndim) {
  return guarded(
      [&]() -> CoilTensor {
        const Tensor& x = tensor(t);
        bool same = ndim == x.dim();
        for (int64_t d = 0; same && d < x.dim(); ++d)
          same = x.stride(d) == strides[d] || x.size(d) == 1;
        if (same) return handle(x);
        Tensor out = at::detail::empty_strided_cpu(
            x.sizes(), c10::IntArrayRef(strides, size_t(ndim)), x.scalar_type());
        out.copy_(x);
        return handle(std::move(out));
      },
      CoilTensor(nullptr));
}

void shim_release(CoilTensor t) {
  delete static_cast<Tensor*>(t);
}

void* shim_data_ptr(CoilTensor t) {
  return tensor(t).data_ptr();
}

int32_t shim_dim(CoilTensor t) {
  return int32_t(tensor(t).dim());
}

int64_t shim_size(CoilTensor t, int32_t d) {
  return tensor(t).size(d);
}

int64_t shim_stride(CoilTensor t, int32_t d) {
  return tensor(t).stride(d);
}

int32_t shim_dtype(CoilTensor t) {
  return int32_t(tensor(t).scalar_type());
}

int32_t shim_is_cpu(CoilTensor t) {
  return tensor(t).device().is_cpu() ? 1 : 0;
}

const char* shim_dtype_name(int32_t dtype) {
  // TypeMeta's names ("float", "double", "c10::BFloat16"), as a tensor's dtype().name() says.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int k = 0; k < int(c10::ScalarType::NumOptions); ++k) {
      try {
        auto name = c10::scalarTypeToTypeMeta(c10::ScalarType(k)).name();
        out.emplace_back(name.data(), name.size());
      } catch (...) {
        out.emplace_back(c10::toString(c10::ScalarType(k)));
      }
    }
    return out;
  }();
  return dtype >= 0 && size_t(dtype) < names.size() ? names[size_t(dtype)].c_str()
                                                    : "an unknown dtype";
}

void* shim_find_op(const char* name, const char* overload) {
  return guarded(
      [&]() -> void* {
        auto op = c10::Dispatcher::singleton().findSchema({name, overload});
        if (!op) {
          last_error_text = std::string("no operator ") + name + (*overload ? "." : "") + overload;
          return nullptr;
        }
        return new c10::OperatorHandle(*op);  // kept for the process's life, as the op is
      },
      static_cast<void*>(nullptr));
}

IValue boxed(const CoilValue& v) {
  switch (v.kind) {
    case COIL_VALUE_NONE:
      return IValue();
    case COIL_VALUE_UNDEFINED_TENSOR:
      return IValue(Tensor());
    case COIL_VALUE_TENSOR:
      return IValue(tensor(v.tensor));
    case COIL_VALUE_INT:
      return IValue(v.i);
    case COIL_VALUE_FLOAT:
      return IValue(v.f);
    case COIL_VALUE_BOOL:
      return IValue(v.i != 0);
    case COIL_VALUE_DTYPE:
      return IValue(c10::ScalarType(v.i));
    case COIL_VALUE_LAYOUT:
      return IValue(c10::Layout(v.i));
    case COIL_VALUE_MEMORY_FORMAT:
      return IValue(c10::MemoryFormat(v.i));
    case COIL_VALUE_DEVICE:
      return IValue(c10::Device(std::string(v.text)));
    case COIL_VALUE_STR:
      return IValue(std::string(v.text));
    case COIL_VALUE_INT_LIST:
      return IValue(std::vector<int64_t>(v.ints, v.ints + v.count));
    case COIL_VALUE_FLOAT_LIST:
      return IValue(std::vector<double>(v.floats, v.floats + v.count));
    case COIL_VALUE_TENSOR_LIST: {
      std::vector<Tensor> list;
      list.reserve(size_t(v.count));
      for (int32_t k = 0; k < v.count; ++k) list.push_back(tensor(v.tensors[k]));
      return IValue(std::move(list));
    }
    case COIL_VALUE_OPTIONAL_TENSOR_LIST: {
      c10::List<std::optional<Tensor>> list;
      list.reserve(size_t(v.count));
      for (int32_t k = 0; k < v.count; ++k) {
        if (v.tensors[k])
          list.push_back(tensor(v.tensors[k]));
        else
          list.push_back(std::nullopt);
      }
      return IValue(std::move(list));
    }
    default:
      throw std::runtime_error("coil shim: unknown argument kind " + std::to_string(v.kind));
  }
}

int32_t shim_call(void* op, const CoilValue* args, int32_t num_args, CoilTensor* results,
                  int32_t num_results) {
  return guarded(
      [&]() -> int32_t {
        const c10::OperatorHandle& o = *static_cast<const c10::OperatorHandle*>(op);
        torch::jit::Stack stack;
        stack.reserve(size_t(num_args));
        for (int32_t k = 0; k < num_args; ++k) stack.push_back(boxed(args[k]));
        o.callBoxed(stack);
        if (int64_t(stack.size()) < num_results)
          throw std::runtime_error(o.schema().name() + " returned " + std::to_string(stack.size()) +
                                   " values, expected " + std::to_string(num_results));
        for (int32_t k = 0; k < num_results; ++k) {
          const IValue& r = stack[size_t(k)];
          if (!r.isNone() && !r.isTensor())
            throw std::runtime_error(o.schema().name() + "'s result " + std::to_string(k) +
                                     " is a " + r.tagKind() + ", not a tensor");
        }
        for (int32_t k = 0; k < num_results; ++k) {
          const IValue& r = stack[size_t(k)];
          results[k] = r.isTensor() && r.toTensor().defined() ? handle(r.toTensor()) : nullptr;
        }
        return 0;
      },
      int32_t(1));
}

const char* shim_last_error() {
  return last_error_text.c_str();
}

const CoilAtenShim kShim = {COIL_SHIM_ABI_VERSION,
                            shim_empty,
                            shim_view,
                            shim_share,
                            shim_require_strides,
                            shim_release,
                            shim_data_ptr,
                            shim_dim,
                            shim_size,
                            shim_stride,
                            shim_dtype,
                            shim_is_cpu,
                            shim_dtype_name,
                            shim_find_op,
                            shim_call,
                            shim_last_error};

}  // namespace

extern "C" __attribute__((visibility("default"))) const CoilAtenShim* coil_aten_shim(void) {
  return &kShim;
}
