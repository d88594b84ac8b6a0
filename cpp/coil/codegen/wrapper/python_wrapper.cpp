#include "coil/codegen/wrapper/python_wrapper.h"

#include "coil/codegen/kernel_args.h"
#include "coil/codegen/triton/triton_launch.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

namespace coil::codegen {

namespace {

std::string tuple_text(const std::vector<sym::Expr>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + sym::to_python(v[i]);
  if (v.size() == 1) s += ",";
  return s + ")";
}

std::string dtype_text(graph::DType d) {
  return std::string("torch.") + graph::dtype_name(d);
}

std::string float_text(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  std::ostringstream s;
  s << std::setprecision(17) << v;
  std::string t = s.str();
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "'";
}

std::string benchmark_text(const ir::Program& prog, bool triton);

// How a buffer is named in the wrapper: inputs keep their graph names.
std::string view_text(const ir::Program& prog, const ir::TensorRef& ref) {
  const ir::Buffer& b = prog.buffer(ref.buffer);
  if (ref.sizes == b.layout.sizes && ref.strides == b.layout.strides &&
      ref.offset == b.layout.offset)
    return ref.buffer;
  // reinterpret_tensor's offset is an increment over the tensor's own storage offset (unlike
  // as_strided's): relative to the buffer's layout offset, as kernels index their pointers.
  return "reinterpret_tensor(" + ref.buffer + ", " + tuple_text(ref.sizes) + ", " +
         tuple_text(ref.strides) + ", " + sym::to_python(ref.offset - b.layout.offset) + ")";
}

// The module of an extern call that is a Python function of numbers ("operator.ge",
// "math.floor", "torch.sym_ite"); "" for an op (called through torch.ops).
std::string python_function_module(const std::string& target) {
  for (const char* module : {"operator", "math", "torch"}) {
    std::string prefix = std::string(module) + ".";
    if (target.rfind(prefix, 0) == 0) return module;
  }
  return "";
}

// An ATen op's name in the wrapper: a module-level binding (extern_op_bindings).
std::string op_text(const std::string& target) {
  if (!python_function_module(target).empty()) return target;
  std::string name = "op_" + target;
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

// Each ATen op the extern calls use, bound once when the module loads (coil.runtime.extern_op:
// the op's Python binding where it is the same op, which parses its arguments in generated C++;
// torch.ops' overloads box them through the schema, 10 us more per convolution).
std::string extern_op_bindings(const ir::Program& prog) {
  std::set<std::string> ops;
  for (const ir::ExternCall& e : prog.externs)
    if (python_function_module(e.op).empty()) ops.insert(e.op);
  if (ops.empty()) return "";
  std::string out = "from coil.runtime import extern_op\n\n";
  for (const std::string& op : ops) out += op_text(op) + " = extern_op(" + quote(op) + ")\n";
  return out + "\n";
}

// `import math` / `import operator` when an extern call needs them.
std::string function_imports(const ir::Program& prog) {
  std::set<std::string> modules;
  for (const ir::ExternCall& e : prog.externs) {
    std::string m = python_function_module(e.op);
    if (!m.empty() && m != "torch") modules.insert(m);
  }
  std::string out;
  for (const std::string& m : modules) out += "import " + m + "\n";
  return out.empty() ? "" : out + "\n";
}

// Kernels with the same code as an earlier one (kernel_dedup.h) launch that one.
std::string same_code_aliases(const std::vector<KernelSource>& kernels) {
  std::string out;
  for (const KernelSource& k : kernels) {
    if (k.same_code_as.empty()) continue;
    if (out.empty()) out = "\n# Kernels with the same code as an earlier one: compiled once.\n";
    out += k.name + " = " + k.same_code_as + "\n";
  }
  return out;
}

// Imports, the Triton kernels and one launcher per kernel with its candidate configs.
std::string triton_header(const ir::Program& prog, const std::vector<KernelSource>& kernels,
                          const std::string& source) {
  std::ostringstream out;
  out << "import torch\nimport triton\nimport triton.language as tl\n\nfrom coil import "
         "triton_launcher\nfrom coil.runtime import empty_strided_cpu, empty_strided_cpu_large, "
         "empty_strided_cuda, reinterpret_tensor, require_strides\n\n";
  out << "# triton.language.extra.libdevice; under TRITON_INTERPRET=1, a NumPy stand-in.\n";
  out << "libdevice = triton_launcher.libdevice()\n\n\n";
  if (kernels.empty()) return out.str();
  out << source << "\n\n";
  out << "# Launchers: configs are ([YBLOCK,] XBLOCK, [RBLOCK,] num_warps) candidates, tuned on "
         "the "
         "first call.\n";
  for (const KernelSource& k : kernels) {
    if (!k.same_code_as.empty()) continue;
    out << k.name << " = triton_launcher.Launcher(" << k.name << ", " << quote(k.launch.kind)
        << ", [";
    for (size_t i = 0; i < k.launch.configs.size(); ++i) {
      const LaunchConfig& c = k.launch.configs[i];
      out << (i ? ", " : "") << "{";
      if (c.yblock) out << "'YBLOCK': " << c.yblock << ", ";
      out << "'XBLOCK': " << c.xblock;
      if (c.rblock) out << ", 'RBLOCK': " << c.rblock;
      out << ", 'num_warps': " << c.num_warps << "}";
    }
    out << "], written=[";
    bool first = true;
    for (size_t i = 0; i < k.args.size(); ++i) {
      if (!k.args[i].written) continue;
      out << (first ? "" : ", ") << i;
      first = false;
    }
    out << "],\n    dtypes=[";
    for (size_t i = 0; i < k.args.size(); ++i) {
      const std::string& buf = k.args[i].buffer;
      graph::DType d = buf == kIndexErrorArg ? graph::DType::Int64 : prog.buffer(buf).layout.dtype;
      out << (i ? ", " : "") << dtype_text(d);
    }
    // Sizes to compile the candidates for before the first call: the hints of symbolic ones.
    auto hint = [](const sym::Expr& e) { return std::to_string(size_hint_of(e)); };
    out << "], sizes={";
    if (k.launch.kind == "tiled") out << "'ynumel': " << hint(k.launch.ynumel) << ", ";
    out << "'xnumel': " << hint(k.launch.xnumel);
    if (k.launch.kind != "pointwise" && k.launch.kind != "tiled")
      out << ", 'rnumel': " << hint(k.launch.rnumel);
    out << "}";
    if (!k.size_args.empty()) {
      out << ", size_hints=[";
      for (size_t i = 0; i < k.size_args.size(); ++i)
        out << (i ? ", " : "") << hint(sym::Expr::symbol(k.size_args[i]));
      out << "]";
    }
    out << ")\n";
  }
  out << same_code_aliases(kernels);
  out << "\n# Every candidate config of every kernel, compiled in parallel before the first "
         "call.\n";
  out << "triton_launcher.precompile([";
  bool first_kernel = true;
  for (const KernelSource& k : kernels) {
    if (!k.same_code_as.empty()) continue;
    out << (first_kernel ? "" : ", ") << k.name;
    first_kernel = false;
  }
  out << "])\n\n";
  return out.str();
}

}  // namespace

// A CPU buffer this large is allocated by empty_strided_cpu_large, which asks for its fresh
// memory in 2 MiB pages (runtime/memory.h: a 64 MiB output faulted in 4 KiB pages cost more than
// writing it). Symbolic sizes decide by their hints; either allocation is correct at any size.
constexpr int64_t kLargeCpuBufferBytes = int64_t{4} << 20;

bool large_cpu_buffer(const ir::Layout& layout) {
  std::optional<int64_t> numel = sym::try_size_hint(layout.numel());
  // (A size without a hint: the plain allocation.)
  return numel && *numel >= kLargeCpuBufferBytes / graph::dtype_itemsize(layout.dtype);
}

std::map<int, std::vector<std::string>> releases_by_step(const sched::Schedule& s) {
  std::map<int, std::vector<std::string>> frees;
  std::set<std::string> reused;
  for (const auto& [name, plan] : s.buffers) {
    if (!plan.reuses.empty()) reused.insert(plan.reuses);
  }
  for (const auto& [name, plan] : s.buffers) {
    if (plan.stored && plan.free_step >= 0 && !reused.count(name))
      frees[plan.free_step].push_back(name);
  }
  // Inputs go too after their last reader (the wrapper dropped its arguments: this may be the
  // last reference).
  for (const auto& [name, step] : s.input_last_use) {
    if (!reused.count(name)) frees[step].push_back(name);  // (a donated input taken over)
  }
  return frees;
}

std::string bind_size_symbols(const ir::Program& prog) {
  std::string out;
  for (const graph::SizeSymbol& s : prog.size_symbols) {
    sym::Expr e = sym::Expr::symbol(s.name);
    std::string source;
    // A SymInt input that is the symbol itself; else a tensor input's size or stride.
    for (size_t i = 0; i < prog.inputs.size() && source.empty(); ++i) {
      if (prog.input_symints[i] && *prog.input_symints[i] == e)
        source = "_scalar" + std::to_string(i);
    }
    for (const char* what : {"size", "stride"}) {
      for (size_t i = 0; i < prog.inputs.size() && source.empty(); ++i) {
        if (prog.inputs[i].empty()) continue;
        const ir::Layout& l = prog.buffer(prog.inputs[i]).layout;
        const std::vector<sym::Expr>& v = std::string(what) == "size" ? l.sizes : l.strides;
        for (size_t d = 0; d < v.size() && source.empty(); ++d) {
          if (v[d] == e) source = prog.inputs[i] + "." + what + "(" + std::to_string(d) + ")";
        }
      }
    }
    if (source.empty()) {
      throw std::runtime_error("size symbol " + s.name +
                               " is neither a SymInt input nor a size or stride of a tensor input: "
                               "the wrapper cannot bind it");
    }
    out += "    " + s.name + " = " + source + "\n";
  }
  return out;
}

std::string python_arg(const graph::Arg& a, const std::vector<std::string>& tensor_text,
                       const std::vector<std::string>& scalar_text) {
  using K = graph::Arg::Kind;
  switch (a.kind) {
    case K::None:
      return "None";
    case K::Bool:
      return a.b ? "True" : "False";
    case K::Int:
      return std::to_string(a.i);
    case K::Float:
      return float_text(a.f);
    case K::Str:
      return quote(a.s);
    case K::DType:
      return dtype_text(a.dtype);
    case K::Enum:
      if (a.s.rfind("device:", 0) == 0) return "torch.device(" + quote(a.s.substr(7)) + ")";
      return a.s;  // "torch.strided", "torch.contiguous_format", ...
    case K::Sym:
      return sym::to_python(a.sym);
    case K::Node:
      if (a.node < 0) return scalar_text.at(static_cast<size_t>(-1 - a.node));
      return tensor_text.at(a.node);
    case K::List: {
      std::string s = "[";
      for (size_t i = 0; i < a.list.size(); ++i)
        s += (i ? ", " : "") + python_arg(a.list[i], tensor_text, scalar_text);
      return s + "]";
    }
  }
  return "None";
}

std::string render_python_wrapper(const ir::Program& prog, const sched::Schedule& s,
                                  const std::vector<KernelSource>& kernels,
                                  const std::string& kernel_file_source, const std::string& title,
                                  const std::string& backend) {
  bool triton = backend == "triton";
  // Kernels that use indirect indices report a bad one in index_error. CPU kernels have finished
  // when they return, so it is checked right after each; on a GPU, once at the end without
  // waiting for the device (like eager's device-side assert).
  std::string error_device;
  for (const KernelSource& k : kernels) {
    for (const KernelArg& a : k.args) {
      if (a.buffer != kIndexErrorArg || !error_device.empty()) continue;
      for (const KernelArg& other : k.args) {
        if (other.buffer != kIndexErrorArg) error_device = prog.buffer(other.buffer).layout.device;
      }
      if (error_device.empty()) error_device = "cpu";
    }
  }
  bool check_each = error_device == "cpu";
  std::ostringstream out;
  out << "# " << title << "\n";
  out << "# Generated by coil: the kernels of one graph and the program that runs them.\n";
  out << "# Run this file to time call() on random inputs.\n";
  if (triton) {
    out << triton_header(prog, kernels, kernel_file_source);
  } else {
    out << "import torch\n\nfrom coil import runtime as coil_runtime\nfrom coil.runtime import "
           "empty_strided_cpu, empty_strided_cpu_large, empty_strided_cuda, reinterpret_tensor, "
           "require_strides\n\n";
  }
  out << function_imports(prog);
  out << extern_op_bindings(prog);
  if (!kernels.empty() && !triton) {
    out << "CPP_SOURCE = r'''\n" << kernel_file_source << "'''\n\n";
    bool aten_math = false, vectorized = false;
    for (const KernelSource& k : kernels) {
      aten_math |= k.aten_math;
      vectorized |= k.vectorized || k.vec_math;
    }
    // Kernels calling ATen's scalar special functions build against torch's headers.
    out << "_lib = coil_runtime.load_cpp(CPP_SOURCE" << (aten_math ? ", aten_headers=True" : "")
        << (vectorized ? ", vec=True" : "") << ")\n";
    for (const KernelSource& k : kernels) {
      if (!k.same_code_as.empty()) continue;
      out << k.name << " = _lib.kernel(" << quote(k.name) << ", " << k.args.size() << ", "
          << k.size_args.size() << ")\n";
    }
    out << same_code_aliases(kernels) << "\n";
  }

  if (triton && !error_device.empty()) out << "from coil import runtime as coil_runtime\n\n";
  // The graph's GPU: calls run under a device guard for it, so that allocations and launches
  // go to that device whatever the caller's current device is.
  std::string gpu;
  for (const ir::Buffer& b : prog.buffers) {
    if (gpu.empty() && b.layout.device.rfind("cuda", 0) == 0) gpu = b.layout.device;
  }
  std::string gpu_index = gpu.size() > 5 ? gpu.substr(5) : "";
  if (!gpu_index.empty()) {
    out << "\ndef call(args):\n";
    out << "    with torch.cuda._DeviceGuard(" << gpu_index << "):\n";
    out << "        return _call(args)\n\n";
    out << "\ndef _call(args):\n";
  } else {
    out << "\ndef call(args):\n";
  }
  std::string names;
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    names += (prog.inputs[i].empty() ? "_scalar" + std::to_string(i) : prog.inputs[i]) + ", ";
  }
  if (!prog.inputs.empty()) out << "    " << names << "= args\n";
  out << "    args.clear()\n";
  out << bind_size_symbols(prog);
  if (triton) {
    // A GPU graph may take CPU scalars (0-d tensors) as inputs; kernels can only read device
    // memory, so those are copied over first.
    std::string device;
    for (const ir::Buffer& b : prog.buffers) {
      if (device.empty() && b.layout.device != "cpu") device = b.layout.device;
    }
    std::set<std::string> kernel_inputs;
    for (const KernelSource& k : kernels) {
      for (const KernelArg& a : k.args) kernel_inputs.insert(a.buffer);
    }
    for (const std::string& name : prog.inputs) {
      if (name.empty() || device.empty() || !kernel_inputs.count(name)) continue;
      if (prog.buffer(name).layout.device != "cpu") continue;
      out << "    " << name << " = " << name << ".to(" << quote(device)
          << ")  # CPU input read by a GPU kernel\n";
    }
  }

  if (error_device == "cpu") {
    out << "    " << kIndexErrorArg
        << " = torch.zeros(4, dtype=torch.int64)  # flag, index, size of a bad indirect index\n";
  } else if (!error_device.empty()) {
    // (Kernels write it only for a bad index, which ends the CUDA context: one buffer per device,
    // never cleared, and no allocation or fill per call.)
    out << "    " << kIndexErrorArg << " = coil_runtime.index_error_buffer(" << quote(error_device)
        << ")  # flag, index, size of a bad indirect index; ok\n";
  }

  std::map<int, std::vector<std::string>> frees = releases_by_step(s);
  auto allocate = [&](const ir::Buffer& b) {
    const sched::BufferPlan& plan = s.buffers.at(b.name);
    if (!plan.reuses.empty()) {
      // Another buffer's storage: as it is when taken in place in its own shape, else seen in
      // this buffer's (a pooled buffer of the same bytes, a softmax over a product's scores).
      const ir::Layout& was = prog.buffer(plan.reuses).layout;
      bool as_is = plan.in_place && was.sizes == b.layout.sizes && was.strides == b.layout.strides;
      out << "    " << b.name << " = "
          << (as_is ? plan.reuses
                    : "reinterpret_tensor(" + plan.reuses + ", " + tuple_text(b.layout.sizes) +
                          ", " + tuple_text(b.layout.strides) + ", 0)")
          << (plan.in_place ? "; del " + plan.reuses + "  # reuse in place\n"
                            : "\n    del " + plan.reuses + "  # reuse\n");
      return;
    }
    std::string shape = tuple_text(b.layout.sizes) + ", " + tuple_text(b.layout.strides) + ", ";
    if (b.layout.device == "cpu") {
      out << "    " << b.name << " = empty_strided_cpu"
          << (large_cpu_buffer(b.layout) ? "_large(" : "(") << shape << dtype_text(b.layout.dtype)
          << ")\n";
    } else if (b.layout.device == gpu) {  // the guarded (current) device
      out << "    " << b.name << " = empty_strided_cuda(" << shape << dtype_text(b.layout.dtype)
          << ")\n";
    } else {
      out << "    " << b.name << " = torch.empty_strided(" << shape
          << "dtype=" << dtype_text(b.layout.dtype) << ", device=" << quote(b.layout.device)
          << ")\n";
    }
  };

  for (size_t step = 0; step < s.steps.size(); ++step) {
    const sched::Step& st = s.steps[step];
    if (st.kind == sched::Step::Kind::Kernel) {
      const KernelSource& k = kernels.at(st.index);
      out << "    # " << k.name << ": ";
      for (size_t i = 0; i < k.origins.size(); ++i) out << (i ? ", " : "") << k.origins[i];
      out << "\n";
      bool checks = false;
      for (const KernelArg& a : k.args) {
        checks |= a.buffer == kIndexErrorArg;
        if (a.written && a.buffer != kIndexErrorArg) allocate(prog.buffer(a.buffer));
      }
      out << "    " << k.name << (triton ? ".run(" : "(");
      for (size_t i = 0; i < k.args.size(); ++i) out << (i ? ", " : "") << k.args[i].buffer;
      if (!triton) {
        for (const std::string& s : k.size_args) out << ", " << s;
      } else if (!k.size_args.empty()) {
        out << ", size_args=(";
        for (const std::string& s : k.size_args) out << s << ", ";
        out << ")";
      }
      if (triton) {
        if (k.launch.kind == "tiled") out << ", ynumel=" << sym::to_python(k.launch.ynumel);
        out << ", xnumel=" << sym::to_python(k.launch.xnumel);
        if (k.launch.kind != "pointwise" && k.launch.kind != "tiled")
          out << ", rnumel=" << sym::to_python(k.launch.rnumel);
      }
      out << ")\n";
      if (checks && check_each) out << "    coil_runtime.check_indices(" << kIndexErrorArg << ")\n";
    } else {
      const ir::ExternCall& e = prog.externs.at(st.index);
      std::vector<std::string> tensors;
      for (const ir::TensorRef& t : e.tensors) tensors.push_back(view_text(prog, t));
      std::string call = op_text(e.op) + "(";
      bool first = true;
      for (const graph::Arg& a : e.args) {
        call += (first ? "" : ", ") + python_arg(a, tensors, e.host_scalars);
        first = false;
      }
      for (const auto& [key, a] : e.kwargs) {
        call += (first ? "" : ", ") + key + "=" + python_arg(a, tensors, e.host_scalars);
        first = false;
      }
      call += ")";
      out << "    # " << (e.is_fallback ? "fallback" : "extern") << ": " << e.origin
          << (e.has_effects ? " (side effects: runs in graph order)" : "")
          << (e.decision.empty() ? "" : " (" + e.decision + ")") << "\n";
      if (!e.scalar_output.empty()) {
        out << "    " << e.scalar_output << " = " << call << "\n";
      } else {
        // What the op returned, bound to each output buffer: checked against the buffer's
        // layout where the op may choose another (ExternCall::check_output_strides).
        auto bind = [&](const std::string& name, const std::string& value) {
          const ir::Layout& l = prog.buffer(name).layout;
          if (!e.check_output_strides) {
            out << "    " << name << " = " << value << "\n";
          } else {
            out << "    " << name << " = require_strides(" << value << ", " << tuple_text(l.strides)
                << ")\n";
          }
        };
        if (!e.returns_tuple) {
          bind(e.outputs.at(0), call);
        } else {
          out << "    _result = " << call << "\n";
          for (size_t i = 0; i < e.outputs.size(); ++i)
            bind(e.outputs[i], "_result[" + std::to_string(i) + "]");
          out << "    del _result\n";
        }
      }
    }
    for (const std::string& name : frees[static_cast<int>(step)]) out << "    del " << name << "\n";
  }

  if (!error_device.empty() && !check_each)
    out << "    coil_runtime.check_indices(" << kIndexErrorArg << ")\n";
  out << "    return (";
  for (size_t i = 0; i < prog.outputs.size(); ++i) {
    const ir::GraphOutput& o = prog.outputs[i];
    out << (o.is_none ? "None" : !o.scalar.empty() ? o.scalar : view_text(prog, o.ref)) << ", ";
  }
  out << ")\n\n";
  out << benchmark_text(prog, triton);
  return out.str();
}

std::string render_python_bridge(const ir::Program& prog, const std::vector<KernelSource>& kernels,
                                 const std::string& kernel_file_source, const std::string& title) {
  std::ostringstream out;
  out << "# " << title << "\n";
  out << "# Generated by coil: the kernels of one graph and the C++ program that runs them\n";
  out << "# (coil_graph_run in CPP_SOURCE: one call runs the graph). Run this file to time it.\n";
  out << "import torch\n\nfrom coil import runtime as coil_runtime\n\n";
  out << "CPP_SOURCE = r'''\n" << kernel_file_source << "'''\n\n";
  bool aten_math = false, vectorized = false;
  for (const KernelSource& k : kernels) {
    aten_math |= k.aten_math;
    vectorized |= k.vectorized || k.vec_math;
  }
  out << "_lib = coil_runtime.load_cpp(CPP_SOURCE" << (aten_math ? ", aten_headers=True" : "")
      << (vectorized ? ", vec=True" : "") << ")\n";
  std::string tensors, scalars;
  for (size_t i = 0; i < prog.inputs.size(); ++i)
    (prog.inputs[i].empty() ? scalars : tensors) += std::to_string(i) + ", ";
  out << "call = coil_runtime.GraphEntry(_lib, tensors=[" << tensors << "], scalars=[" << scalars
      << "], outputs=" << prog.outputs.size() << ")\n\n";
  out << benchmark_text(prog, false);
  return out.str();
}

namespace {

std::string benchmark_text(const ir::Program& prog, bool triton) {
  std::ostringstream out;
  // A runnable benchmark with random inputs of the graph's shapes.
  out << "\ndef make_inputs():\n";
  for (const graph::SizeSymbol& s : prog.size_symbols)
    out << "    " << s.name << " = " << s.hint << "  # the size it was traced with\n";
  out << "    inputs = []\n";
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    const std::string& name = prog.inputs[i];
    if (name.empty()) {
      const auto& v = prog.input_symints[i];
      out << "    inputs.append(" << (v ? sym::to_python(*v) : "1") << ")\n";
      continue;
    }
    const ir::Layout& l = prog.buffer(name).layout;
    std::string alloc = "torch.empty_strided(" + tuple_text(l.sizes) + ", " +
                        tuple_text(l.strides) + ", dtype=" + dtype_text(l.dtype) +
                        ", device=" + quote(l.device) + ")";
    if (graph::is_floating(l.dtype)) {
      out << "    inputs.append(" << alloc << ".normal_())\n";
    } else if (l.dtype == graph::DType::Bool) {
      out << "    inputs.append(" << alloc << ".random_(0, 2))\n";
    } else {
      out << "    inputs.append(" << alloc << ".random_(0, 8))\n";
    }
  }
  out << "    return inputs\n\n";
  out << "\nif __name__ == '__main__':\n";
  out << "    import time\n";
  out << "    inputs = make_inputs()\n";
  out << "    call(list(inputs))\n";
  if (triton)
    out << "    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)\n";
  out << "    times = []\n";
  out << "    for _ in range(20):\n";
  out << "        start = time.perf_counter()\n";
  out << "        call(list(inputs))\n";
  if (triton) out << "        sync()\n";
  out << "        times.append(time.perf_counter() - start)\n";
  out << "    times.sort()\n";
  out << "    print(f'median {times[len(times) // 2] * 1e3:.3f} ms over {len(times)} calls')\n";
  return out.str();
}

}  // namespace

}  // namespace coil::codegen
