// Python bindings for coil::runtime: building kernel libraries and calling their kernels.
//
// bind_runtime(m) adds to coil._C:
//   build_shared_library(source, cache_dir, compiler="g++", flags=None, inject_build_failure=False,
//                        precompiled_header="")
//       -> {"so_path", "source_path", "cache_hit", "seconds"}; raises coil._C.BuildError
//       (a RuntimeError). flags=None means BuildOptions' default flags. The GIL is released while
//       building.
//   default_kernel_flags() -> [str]: those default flags (callers extend them).
//   advise_huge_pages(address, nbytes) -> bool: runtime/memory.h (large fresh CPU buffers).
//   KernelLibrary(so_path).kernel(name, num_ptrs, num_ints) -> Kernel
//   Kernel(*args): exactly num_ptrs pointer arguments (an int address, or any object with a
//       data_ptr() method such as a torch.Tensor), then num_ints ints. Calls
//       `extern "C" void name(void* const* ptrs, const int64_t* ints)` with the GIL released.
//
// Kernel.__call__ is on the path of every kernel launch, so it is a raw tp_call slot rather than
// a nanobind-dispatched method: no overload resolution, no keyword handling, no allocation for up
// to kStackArgs arguments of each kind. A Kernel keeps its library loaded.
//
// Tests: tests/python/ (through coil's runtime); the C++ side in tests/cpp/runtime/.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coil/runtime/build.h"
#include "coil/runtime/graph_abi.h"
#include "coil/runtime/library.h"
#include "coil/runtime/memory.h"

namespace nb = nanobind;

namespace {

using coil::runtime::BuildOptions;
using coil::runtime::BuildResult;
using coil::runtime::Library;

// Arguments of each kind that fit in the call's stack arrays; more go to the heap.
constexpr Py_ssize_t kStackArgs = 64;

using KernelFn = void (*)(void* const* ptrs, const int64_t* ints);

struct Kernel {
  KernelFn fn = nullptr;
  Py_ssize_t num_ptrs = 0;
  Py_ssize_t num_ints = 0;
  std::string name;
  std::shared_ptr<Library> library;  // keeps fn's code mapped
};

struct KernelLibrary {
  std::shared_ptr<Library> library;
};

// "data_ptr", interned once so that the per-call method lookup compares pointers.
PyObject* g_data_ptr_name = nullptr;

// Reads pointer argument `index`; on failure sets a Python error and returns false.
bool read_pointer(const Kernel& kernel, PyObject* arg, Py_ssize_t index, void** out) {
  if (PyLong_Check(arg)) {
    *out = PyLong_AsVoidPtr(arg);
    return !(*out == nullptr && PyErr_Occurred());
  }
  PyObject* address = PyObject_CallMethodNoArgs(arg, g_data_ptr_name);
  if (address == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "kernel '%s': argument %zd must be a pointer, i.e. an int address or an object "
                 "with a data_ptr() method such as a torch.Tensor; got '%s'",
                 kernel.name.c_str(), index, Py_TYPE(arg)->tp_name);
    return false;
  }
  if (!PyLong_Check(address)) {
    PyErr_Format(PyExc_TypeError, "kernel '%s': argument %zd: data_ptr() returned '%s', not an int",
                 kernel.name.c_str(), index, Py_TYPE(address)->tp_name);
    Py_DECREF(address);
    return false;
  }
  *out = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  return !(*out == nullptr && PyErr_Occurred());
}

// Reads int argument `index`; on failure sets a Python error and returns false.
bool read_int(const Kernel& kernel, PyObject* arg, Py_ssize_t index, int64_t* out) {
  if (!PyLong_Check(arg) && !PyIndex_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "kernel '%s': argument %zd must be an int; got '%s'",
                 kernel.name.c_str(), index, Py_TYPE(arg)->tp_name);
    return false;
  }
  long long value = PyLong_AsLongLong(arg);  // uses __index__ for int-like objects
  if (value == -1 && PyErr_Occurred()) return false;
  *out = int64_t(value);
  return true;
}

// Kernel.__call__ as a tp_call slot: converts the arguments into the two arrays the kernel takes
// and runs it with the GIL released.
PyObject* kernel_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  const Kernel& kernel = *nb::inst_ptr<Kernel>(self);
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_Format(PyExc_TypeError, "kernel '%s' takes positional arguments only",
                 kernel.name.c_str());
    return nullptr;
  }
  const Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  if (nargs != kernel.num_ptrs + kernel.num_ints) {
    PyErr_Format(PyExc_TypeError,
                 "kernel '%s' expects %zd arguments (%zd pointers, then %zd ints); got %zd",
                 kernel.name.c_str(), kernel.num_ptrs + kernel.num_ints, kernel.num_ptrs,
                 kernel.num_ints, nargs);
    return nullptr;
  }

  void* ptr_stack[kStackArgs];
  int64_t int_stack[kStackArgs];
  std::unique_ptr<void*[]> ptr_heap;
  std::unique_ptr<int64_t[]> int_heap;
  void** ptrs = ptr_stack;
  int64_t* ints = int_stack;
  if (kernel.num_ptrs > kStackArgs) {
    ptr_heap.reset(new void*[size_t(kernel.num_ptrs)]);
    ptrs = ptr_heap.get();
  }
  if (kernel.num_ints > kStackArgs) {
    int_heap.reset(new int64_t[size_t(kernel.num_ints)]);
    ints = int_heap.get();
  }

  for (Py_ssize_t i = 0; i < kernel.num_ptrs; ++i) {
    if (!read_pointer(kernel, PyTuple_GET_ITEM(args, i), i, &ptrs[i])) return nullptr;
  }
  for (Py_ssize_t i = 0; i < kernel.num_ints; ++i) {
    Py_ssize_t index = kernel.num_ptrs + i;
    if (!read_int(kernel, PyTuple_GET_ITEM(args, index), index, &ints[i])) return nullptr;
  }

  // The caller's argument tuple keeps the tensors alive while the GIL is released.
  PyThreadState* thread_state = PyEval_SaveThread();
  kernel.fn(ptrs, ints);
  PyEval_RestoreThread(thread_state);
  Py_RETURN_NONE;
}

PyType_Slot kernel_slots[] = {
    {Py_tp_call, reinterpret_cast<void*>(kernel_call)},
    {0, nullptr},
};

nb::dict build(const std::string& source, const std::string& cache_dir, const std::string& compiler,
               const std::optional<std::vector<std::string>>& flags, bool inject_build_failure,
               const std::string& precompiled_header) {
  BuildOptions opts;
  opts.precompiled_header = precompiled_header;
  opts.cache_dir = cache_dir;
  opts.compiler = compiler;
  if (flags) opts.flags = *flags;
  opts.inject_build_failure = inject_build_failure;
  BuildResult result;
  {
    nb::gil_scoped_release release;
    result = coil::runtime::build_shared_library(source, opts);
  }
  nb::dict out;
  out["so_path"] = result.so_path;
  out["source_path"] = result.source_path;
  out["cache_hit"] = result.cache_hit;
  out["seconds"] = result.seconds;
  return out;
}

Kernel make_kernel(const KernelLibrary& self, const std::string& name, Py_ssize_t num_ptrs,
                   Py_ssize_t num_ints) {
  if (num_ptrs < 0 || num_ints < 0) {
    throw nb::value_error(("kernel '" + name + "': num_ptrs and num_ints must be >= 0; got " +
                           std::to_string(num_ptrs) + " and " + std::to_string(num_ints))
                              .c_str());
  }
  Kernel kernel;
  kernel.fn = reinterpret_cast<KernelFn>(self.library->symbol(name));
  kernel.num_ptrs = num_ptrs;
  kernel.num_ints = num_ints;
  kernel.name = name;
  kernel.library = self.library;
  return kernel;
}

// A graph's coil_graph_run (runtime/graph_abi.h) in a loaded library, bound to coil's ATen shim.
struct GraphRun {
  coil::runtime::GraphRunFn run = nullptr;
  coil::runtime::GraphTextFn error = nullptr;
  std::string signature;
  std::shared_ptr<Library> library, shim;
};

GraphRun make_graph_run(const KernelLibrary& self, const KernelLibrary& shim) {
  using ShimFn = const void* (*)();
  GraphRun g;
  g.run = reinterpret_cast<coil::runtime::GraphRunFn>(
      self.library->symbol(coil::runtime::kGraphRunSymbol));
  g.error = reinterpret_cast<coil::runtime::GraphTextFn>(
      self.library->symbol(coil::runtime::kGraphErrorSymbol));
  g.signature = reinterpret_cast<coil::runtime::GraphTextFn>(
      self.library->symbol(coil::runtime::kGraphSignatureSymbol))();
  auto bind = reinterpret_cast<coil::runtime::GraphBindFn>(
      self.library->symbol(coil::runtime::kGraphBindSymbol));
  const void* table = reinterpret_cast<ShimFn>(shim.library->symbol("coil_aten_shim"))();
  if (bind(table) != 0) {
    throw std::runtime_error("coil: the graph library '" + self.library->path() +
                             "' refused coil's ATen shim '" + shim.library->path() +
                             "' (another COIL_SHIM_ABI_VERSION: rebuild the graph)");
  }
  g.library = self.library;
  g.shim = shim.library;
  return g;
}

// (code, outputs): the output handles (capsules, as torch._C._aoti makes and takes them; None
// for a None output) when code is 0, else (code, message). Inputs are capsules of handles.
nb::tuple run_graph(const GraphRun& g, nb::list inputs, const std::vector<int64_t>& scalars,
                    size_t num_outputs) {
  std::vector<void*> in(inputs.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = PyCapsule_GetPointer(inputs[i].ptr(), nullptr);
    if (!in[i]) throw nb::python_error();
  }
  std::vector<void*> out(num_outputs, nullptr);
  int32_t code;
  std::string message;
  {
    nb::gil_scoped_release release;
    code = g.run(in.data(), scalars.data(), out.data());
    if (code != coil::runtime::kGraphOk) message = g.error();
  }
  if (code != coil::runtime::kGraphOk) return nb::make_tuple(code, message);
  nb::list handles;
  for (void* h : out) {
    if (!h) {
      handles.append(nb::none());
      continue;
    }
    handles.append(nb::steal(PyCapsule_New(h, nullptr, nullptr)));
  }
  return nb::make_tuple(code, handles);
}

// A compiled graph's call(args) when its wrapper is C++ (coil.runtime.GraphEntry): args is the
// graph's boxed input list (cleared, as generated Python wrappers clear it, so that inputs can
// be freed as the graph runs). Tensor inputs cross as AtenTensorHandles made by torch's own
// conversion (torch._C._aoti), outputs come back through it: the whole call is one C++ function.
struct GraphCall {
  GraphRun graph;
  std::vector<Py_ssize_t> tensors, scalars;  // positions in args
  size_t num_outputs = 0;
  nb::object to_handles, from_handles, index_error;
};

nb::object call_graph(const GraphCall& c, nb::list args) {
  PyObject* a = args.ptr();
  const Py_ssize_t n = PyList_GET_SIZE(a);
  std::vector<int64_t> scalars(c.scalars.size());
  for (size_t k = 0; k < c.scalars.size(); ++k) {
    if (c.scalars[k] >= n) throw nb::index_error("coil: too few inputs for the graph");
    PyObject* v = PyList_GET_ITEM(a, c.scalars[k]);
    scalars[k] = PyLong_AsLongLong(v);
    if (scalars[k] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      nb::object i = nb::steal(PyNumber_Index(v));
      if (!i.is_valid()) throw nb::python_error();
      scalars[k] = PyLong_AsLongLong(i.ptr());
      if (scalars[k] == -1 && PyErr_Occurred()) throw nb::python_error();
    }
  }
  std::vector<void*> in(c.tensors.size());
  {
    nb::list tensors = nb::steal<nb::list>(PyList_New(Py_ssize_t(c.tensors.size())));
    for (size_t k = 0; k < c.tensors.size(); ++k) {
      if (c.tensors[k] >= n) throw nb::index_error("coil: too few inputs for the graph");
      PyObject* t = PyList_GET_ITEM(a, c.tensors[k]);
      Py_INCREF(t);
      PyList_SET_ITEM(tensors.ptr(), Py_ssize_t(k), t);
    }
    if (PyList_SetSlice(a, 0, n, nullptr) != 0) throw nb::python_error();
    nb::object handles = c.to_handles(tensors);
    for (size_t k = 0; k < in.size(); ++k) {
      in[k] = PyCapsule_GetPointer(PyList_GetItem(handles.ptr(), Py_ssize_t(k)), nullptr);
      if (!in[k]) throw nb::python_error();
    }
  }  // the inputs' Python references go here: the graph holds the only ones it needs
  std::vector<void*> out(c.num_outputs, nullptr);
  int32_t code;
  std::string message;
  {
    nb::gil_scoped_release release;
    code = c.graph.run(in.data(), scalars.data(), out.data());
    if (code != coil::runtime::kGraphOk) message = c.graph.error();
  }
  if (code == coil::runtime::kGraphIndexError) {
    PyErr_SetString(c.index_error.ptr(), message.c_str());
    throw nb::python_error();
  }
  if (code != coil::runtime::kGraphOk) throw std::runtime_error("coil: " + message);
  nb::list handles;
  for (void* h : out)
    if (h) handles.append(nb::steal(PyCapsule_New(h, nullptr, nullptr)));
  nb::object made = c.from_handles(handles);
  PyObject* result = PyTuple_New(Py_ssize_t(out.size()));
  if (!result) throw nb::python_error();
  nb::object tuple = nb::steal(result);
  Py_ssize_t next = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    PyObject* item = out[k] ? PyList_GetItem(made.ptr(), next++) : Py_None;
    if (!item) throw nb::python_error();
    Py_INCREF(item);
    PyTuple_SET_ITEM(result, Py_ssize_t(k), item);
  }
  return tuple;
}

}  // namespace

void bind_runtime(nb::module_& m) {
  g_data_ptr_name = PyUnicode_InternFromString("data_ptr");

  nb::exception<coil::runtime::BuildError>(m, "BuildError", PyExc_RuntimeError);

  m.def("build_shared_library", &build, nb::arg("source"), nb::arg("cache_dir"),
        nb::arg("compiler") = "g++", nb::arg("flags") = nb::none(),
        nb::arg("inject_build_failure") = false, nb::arg("precompiled_header") = "",
        "Build C++ kernel source into a shared library through the on-disk cache.");
  m.def("default_kernel_flags", &coil::runtime::default_kernel_flags,
        "The compiler flags build_shared_library uses when flags is None.");
  m.def(
      "advise_huge_pages",
      [](std::uintptr_t address, std::size_t nbytes) {
        return coil::runtime::advise_huge_pages(address, nbytes);
      },
      nb::arg("address"), nb::arg("nbytes"),
      "Ask for transparent huge pages over the whole 2 MiB pages of a fresh buffer.");

  nb::class_<Kernel>(m, "Kernel", nb::type_slots(kernel_slots),
                     "A kernel from a KernelLibrary; call it with its pointer then int arguments.")
      .def_prop_ro("name", [](const Kernel& k) { return k.name; })
      .def_prop_ro("num_ptrs", [](const Kernel& k) { return k.num_ptrs; })
      .def_prop_ro("num_ints", [](const Kernel& k) { return k.num_ints; })
      .def("__repr__", [](const Kernel& k) {
        return "<coil Kernel '" + k.name + "' (" + std::to_string(k.num_ptrs) + " pointers, " +
               std::to_string(k.num_ints) + " ints) from " + k.library->path() + ">";
      });

  nb::class_<KernelLibrary>(m, "KernelLibrary", "A loaded kernel shared library.")
      .def(
          "__init__",
          [](KernelLibrary* self, const std::string& so_path) {
            new (self) KernelLibrary{Library::load(so_path)};
          },
          nb::arg("so_path"))
      .def_prop_ro("path", [](const KernelLibrary& lib) { return lib.library->path(); })
      .def("kernel", &make_kernel, nb::arg("name"), nb::arg("num_ptrs"), nb::arg("num_ints"),
           "The kernel `extern \"C\" void name(void* const* ptrs, const int64_t* ints)`.")
      .def("graph_run", &make_graph_run, nb::arg("shim"),
           "The library's coil_graph_run, for a graph built with a C++ wrapper, bound to the "
           "ATen shim in the library `shim` (runtime/aten_shim.h).");

  nb::class_<GraphCall>(m, "GraphCall",
                        "call(args) of a graph whose wrapper is C++ (coil.runtime.GraphEntry).")
      .def(
          "__init__",
          [](GraphCall* self, const GraphRun& graph, std::vector<Py_ssize_t> tensors,
             std::vector<Py_ssize_t> scalars, size_t num_outputs, nb::object to_handles,
             nb::object from_handles, nb::object index_error) {
            new (self) GraphCall{graph,
                                 std::move(tensors),
                                 std::move(scalars),
                                 num_outputs,
                                 std::move(to_handles),
                                 std::move(from_handles),
                                 std::move(index_error)};
          },
          nb::arg("graph"), nb::arg("tensors"), nb::arg("scalars"), nb::arg("num_outputs"),
          nb::arg("to_handles"), nb::arg("from_handles"), nb::arg("index_error"))
      .def("__call__", &call_graph, nb::arg("args"),
           "Runs the graph on its boxed inputs (the list is cleared): a tuple of its outputs. "
           "The GIL is released while it runs.");

  nb::class_<GraphRun>(m, "GraphRun", "A graph's coil_graph_run (runtime/graph_abi.h).")
      .def_prop_ro("signature", [](const GraphRun& g) { return g.signature; })
      .def("__call__", &run_graph, nb::arg("inputs"), nb::arg("scalars"), nb::arg("num_outputs"),
           "Runs the graph on tensor handles (ints; the call takes them) and int scalars: "
           "(0, output handles as ints, 0 for None) or (error code, message). The GIL is "
           "released while it runs.");
}
