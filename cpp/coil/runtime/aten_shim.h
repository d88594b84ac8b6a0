/* coil's ATen shim: the C interface between a graph's C++ wrapper and ATen.
 *
 * A C++ wrapper (codegen/wrapper/cpp_wrapper.h) includes this header and nothing of torch's, so
 * it compiles in a fraction of a second and its library does not depend on torch's C++ ABI. Every
 * tensor operation it needs goes through one table of C functions, CoilAtenShim, which the
 * process that loads the library hands it once (coil_graph_bind, runtime/graph_abi.h):
 *   - Python: coil.runtime builds cpp/shim/aten_shim.cpp into the build cache, once per torch;
 *   - C++: coil::Package (cpp/coil/package.h) has it compiled in.
 * torch's own C shim (torch/csrc/inductor/aoti_torch/c/shim.h) would serve the same purpose but
 * cannot pass a Scalar argument to a library call (addmm's beta); this one passes every argument
 * kind a dispatcher schema has that coil's wrappers use (CoilValue), boxed.
 *
 * Tensors are CoilTensor: an owned `at::Tensor*` behind an opaque pointer, the representation of
 * torch's AtenTensorHandle. A function that returns one returns a new reference the caller
 * releases. A failing function returns NULL (or a nonzero code) and leaves its message for
 * last_error(); none throws.
 *
 * This file is C and C++: the shim's implementation and coil::Package compile it as written, and
 * coil embeds its text in every wrapper it generates (the build embeds it as a string). */
#ifndef COIL_ATEN_SHIM_H
#define COIL_ATEN_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever CoilAtenShim or CoilValue changes: wrappers refuse a shim of another one. */
#define COIL_SHIM_ABI_VERSION 1

typedef void* CoilTensor;

/* c10::ScalarType's values (the shim's implementation checks each against ATen's). */
enum {
  COIL_DTYPE_UINT8 = 0,
  COIL_DTYPE_INT8 = 1,
  COIL_DTYPE_INT16 = 2,
  COIL_DTYPE_INT32 = 3,
  COIL_DTYPE_INT64 = 4,
  COIL_DTYPE_FLOAT16 = 5,
  COIL_DTYPE_FLOAT32 = 6,
  COIL_DTYPE_FLOAT64 = 7,
  COIL_DTYPE_COMPLEX64 = 9,
  COIL_DTYPE_COMPLEX128 = 10,
  COIL_DTYPE_BOOL = 11,
  COIL_DTYPE_BFLOAT16 = 15,
  COIL_DTYPE_UINT16 = 27,
  COIL_DTYPE_UINT32 = 28,
  COIL_DTYPE_UINT64 = 29
};

/* c10::Layout's and c10::MemoryFormat's values. */
enum { COIL_LAYOUT_STRIDED = 0 };
enum {
  COIL_MEMORY_FORMAT_CONTIGUOUS = 0,
  COIL_MEMORY_FORMAT_PRESERVE = 1,
  COIL_MEMORY_FORMAT_CHANNELS_LAST = 2,
  COIL_MEMORY_FORMAT_CHANNELS_LAST_3D = 3
};

/* One argument of a boxed library call: the schema types graph::Node::c_args names. */
typedef enum {
  COIL_VALUE_NONE = 0,            /* None for an optional argument */
  COIL_VALUE_UNDEFINED_TENSOR,    /* None for a Tensor argument: an undefined tensor */
  COIL_VALUE_TENSOR,              /* tensor */
  COIL_VALUE_INT,                 /* i (int, SymInt, or an int Scalar) */
  COIL_VALUE_FLOAT,               /* f (float, or a float Scalar) */
  COIL_VALUE_BOOL,                /* i != 0 (bool, or a bool Scalar) */
  COIL_VALUE_DTYPE,               /* i: COIL_DTYPE_* */
  COIL_VALUE_LAYOUT,              /* i: COIL_LAYOUT_* */
  COIL_VALUE_MEMORY_FORMAT,       /* i: COIL_MEMORY_FORMAT_* */
  COIL_VALUE_DEVICE,              /* text: "cpu", "cuda:0" */
  COIL_VALUE_STR,                 /* text */
  COIL_VALUE_INT_LIST,            /* ints[0..count) */
  COIL_VALUE_FLOAT_LIST,          /* floats[0..count) */
  COIL_VALUE_TENSOR_LIST,         /* tensors[0..count) */
  COIL_VALUE_OPTIONAL_TENSOR_LIST /* tensors[0..count), NULL for None */
} CoilValueKind;

typedef struct CoilValue {
  int32_t kind; /* CoilValueKind */
  int32_t count;
  int64_t i;
  double f;
  CoilTensor tensor;
  const char* text;
  const int64_t* ints;
  const double* floats;
  const CoilTensor* tensors;
} CoilValue;

typedef struct CoilAtenShim {
  int32_t abi_version; /* COIL_SHIM_ABI_VERSION */
  /* A new CPU tensor of `ndim` sizes and strides. huge_pages: advise the kernel to back its
     whole 2 MiB pages with huge pages (a buffer of many megabytes; runtime/memory.h). */
  CoilTensor (*empty)(const int64_t* sizes, const int64_t* strides, int32_t ndim, int32_t dtype,
                      int32_t huge_pages);
  /* A view of t's storage, `offset` elements after t's own first element. */
  CoilTensor (*view)(CoilTensor t, const int64_t* sizes, const int64_t* strides, int32_t ndim,
                     int64_t offset);
  /* A new reference to t. */
  CoilTensor (*share)(CoilTensor t);
  /* t when it has `strides` (dims of size 1 aside), else a copy laid out so; a new reference. */
  CoilTensor (*require_strides)(CoilTensor t, const int64_t* strides, int32_t ndim);
  void (*release)(CoilTensor t);
  void* (*data_ptr)(CoilTensor t);
  int32_t (*dim)(CoilTensor t);
  int64_t (*size)(CoilTensor t, int32_t d);
  int64_t (*stride)(CoilTensor t, int32_t d);
  int32_t (*dtype)(CoilTensor t);
  int32_t (*is_cpu)(CoilTensor t);
  /* The name of a COIL_DTYPE_* as a tensor's dtype().name() says it ("float", "double"). */
  const char* (*dtype_name)(int32_t dtype);
  /* The dispatcher's operator "aten::addmm" with overload "" (default) or "out"; NULL when
     there is none. */
  void* (*find_op)(const char* name, const char* overload);
  /* Calls op with args boxed; its first `num_results` returns (tensors; NULL for an undefined
     one) are written to results as new references. 0, or 1 with last_error() set. */
  int32_t (*call)(void* op, const CoilValue* args, int32_t num_args, CoilTensor* results,
                  int32_t num_results);
  /* The calling thread's last failure's message. */
  const char* (*last_error)(void);
} CoilAtenShim;

/* The shim's one entry point (the library cpp/shim/aten_shim.cpp builds into). */
const CoilAtenShim* coil_aten_shim(void);

#ifdef __cplusplus
}
#endif

#endif /* COIL_ATEN_SHIM_H */
