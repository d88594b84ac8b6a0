#include "coil/codegen/wrapper/cpp_wrapper.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "coil/codegen/cpp/prelude.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/wrapper/cpp_wrapper_runtime.h"
#include "coil/codegen/wrapper/python_wrapper.h"
#include "coil/runtime/aten_shim_text.h"
#include "coil/runtime/build.h"

namespace coil::codegen {

namespace {

using graph::Arg;

// Wrapper variables: every buffer and input is v_<name> (graph names may be C++ keywords).
std::string var(const std::string& name) {
  return "v_" + name;
}

std::string ints(const std::vector<sym::Expr>& v) {
  sym::RangeEnv env;
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + sym::to_cpp(v[i], env);
  return s + "}";
}

std::string expr(const sym::Expr& e) {
  return sym::to_cpp(e, sym::RangeEnv());
}

// The shim's constant for a dtype (runtime/aten_shim.h: c10::ScalarType's values).
std::string scalar_type(graph::DType d) {
  using D = graph::DType;
  static const std::map<D, const char*> names = {
      {D::Bool, "BOOL"},       {D::UInt8, "UINT8"},         {D::Int8, "INT8"},
      {D::Int16, "INT16"},     {D::Int32, "INT32"},         {D::Int64, "INT64"},
      {D::Float16, "FLOAT16"}, {D::BFloat16, "BFLOAT16"},   {D::Float32, "FLOAT32"},
      {D::Float64, "FLOAT64"}, {D::Complex64, "COMPLEX64"}, {D::Complex128, "COMPLEX128"},
      {D::UInt16, "UINT16"},   {D::UInt32, "UINT32"},       {D::UInt64, "UINT64"}};
  return std::string("COIL_DTYPE_") + names.at(d);
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string double_text(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v))
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "-std::numeric_limits<double>::infinity()";
  std::ostringstream s;
  s << std::setprecision(17) << v;
  std::string t = s.str();
  if (t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}

// The CoilValue of an Enum arg ("torch.strided", "torch.channels_last", "device:cpu"), or "".
std::string enum_value(const std::string& text) {
  static const std::map<std::string, std::string> values = {
      {"torch.strided", "integer(COIL_LAYOUT_STRIDED, COIL_VALUE_LAYOUT)"},
      {"torch.contiguous_format",
       "integer(COIL_MEMORY_FORMAT_CONTIGUOUS, COIL_VALUE_MEMORY_FORMAT)"},
      {"torch.channels_last",
       "integer(COIL_MEMORY_FORMAT_CHANNELS_LAST, COIL_VALUE_MEMORY_FORMAT)"},
      {"torch.channels_last_3d",
       "integer(COIL_MEMORY_FORMAT_CHANNELS_LAST_3D, COIL_VALUE_MEMORY_FORMAT)"},
      {"torch.preserve_format", "integer(COIL_MEMORY_FORMAT_PRESERVE, COIL_VALUE_MEMORY_FORMAT)"}};
  if (text.rfind("device:", 0) == 0)
    return "text(" + quote(text.substr(7)) + ", COIL_VALUE_DEVICE)";
  auto it = values.find(text);
  return it == values.end() ? "" : it->second;
}

// "" when a C++ wrapper can pass `a` as schema type `type`; else why not.
std::string arg_blocker(const Arg& a, const std::string& type) {
  using K = Arg::Kind;
  bool optional = !type.empty() && type.back() == '?';
  std::string base = optional ? type.substr(0, type.size() - 1) : type;
  if (a.kind == K::None) return optional ? "" : "None for a " + type;
  if (a.kind == K::Node && a.node < 0) return "a number computed by the wrapper";
  if (base == "Tensor") return a.kind == K::Node ? "" : "a non-tensor for a Tensor";
  if (base == "int") return a.kind == K::Int || a.kind == K::Sym ? "" : "a non-int for an int";
  if (base == "float" || base == "Scalar")
    return a.kind == K::Float || a.kind == K::Int || (base == "Scalar" && a.kind == K::Bool)
               ? ""
               : "a non-number for a " + base;
  if (base == "bool") return a.kind == K::Bool ? "" : "a non-bool for a bool";
  if (base == "ScalarType") return a.kind == K::DType ? "" : "a non-dtype for a ScalarType";
  if (base == "str") return a.kind == K::Str ? "" : "a non-string for a str";
  if (base == "Device" || base == "Layout" || base == "MemoryFormat")
    return a.kind == K::Enum && !enum_value(a.s).empty() ? "" : "an unknown " + base;
  if (base == "int[]" || base == "float[]" || base == "Tensor[]" || base == "Tensor?[]") {
    if (a.kind != K::List) return "a non-list for a " + base;
    std::string item_type = base.substr(0, base.size() - 2);
    for (const Arg& item : a.list) {
      std::string why = arg_blocker(item, item_type);
      if (!why.empty()) return why;
    }
    return "";
  }
  return "an argument of schema type " + type;
}

// The CoilValue expression of one library call argument; what it points to (a list's items) is
// declared into `locals` as `<prefix><k>`.
std::string encode(const Arg& a, const std::string& type, const std::vector<std::string>& tensors,
                   const std::string& prefix, std::string* locals) {
  using K = Arg::Kind;
  bool optional = type.back() == '?';
  std::string base = optional ? type.substr(0, type.size() - 1) : type;
  if (a.kind == K::None) return base == "Tensor" && !optional ? "undefined()" : "none()";
  auto number = [&](const Arg& x) {
    if (x.kind == K::Float) return "real(" + double_text(x.f) + ")";
    if (x.kind == K::Bool)
      return std::string(x.b ? "integer(1, " : "integer(0, ") + "COIL_VALUE_BOOL)";
    if (x.kind == K::Sym) return "integer(int64_t(" + expr(x.sym) + "))";
    return "integer(int64_t(" + std::to_string(x.i) + "))";
  };
  auto real_of = [](const Arg& x) {
    return x.kind == K::Float ? double_text(x.f) : double_text(double(x.i));
  };
  if (base == "Tensor") return "tensor(" + tensors.at(size_t(a.node)) + ")";
  if (base == "int" || base == "Scalar") return number(a);
  if (base == "float") return "real(" + real_of(a) + ")";
  if (base == "bool") return a.b ? "integer(1, COIL_VALUE_BOOL)" : "integer(0, COIL_VALUE_BOOL)";
  if (base == "ScalarType") return "integer(" + scalar_type(a.dtype) + ", COIL_VALUE_DTYPE)";
  if (base == "str") return "text(" + quote(a.s) + ")";
  if (base == "Device" || base == "Layout" || base == "MemoryFormat") return enum_value(a.s);
  std::string items;
  for (size_t i = 0; i < a.list.size(); ++i) {
    const Arg& x = a.list[i];
    items += i ? ", " : "";
    if (base == "int[]")
      items += x.kind == K::Sym
                   ? "int64_t(" + expr(x.sym) + ")"
                   : "int64_t(" + std::to_string(x.kind == K::Bool ? int64_t(x.b) : x.i) + ")";
    if (base == "float[]") items += real_of(x);
    if (base == "Tensor[]") items += tensors.at(size_t(x.node)) + ".get()";
    if (base == "Tensor?[]")
      items += x.kind == K::None ? std::string("nullptr") : tensors.at(size_t(x.node)) + ".get()";
  }
  std::string n = std::to_string(a.list.size());
  std::string item_type = base == "int[]" ? "int64_t" : base == "float[]" ? "double" : "CoilTensor";
  std::string list = a.list.empty() ? "nullptr" : prefix;
  if (!a.list.empty())
    *locals += "      const " + item_type + " " + prefix + "[] = {" + items + "};\n";
  if (base == "int[]") return "int_list(" + list + ", " + n + ")";
  if (base == "float[]") return "float_list(" + list + ", " + n + ")";
  if (base == "Tensor[]") return "tensor_list(" + list + ", " + n + ")";
  return "tensor_list(" + list + ", " + n + ", COIL_VALUE_OPTIONAL_TENSOR_LIST)";
}

// A tensor argument's C++ value: the buffer, or a view of it.
std::string tensor_arg(const ir::Program& prog, const ir::TensorRef& ref) {
  const ir::Buffer& b = prog.buffer(ref.buffer);
  if (ref.sizes == b.layout.sizes && ref.strides == b.layout.strides &&
      ref.offset == b.layout.offset)
    return var(ref.buffer);
  return "view(" + var(ref.buffer) + ", " + ints(ref.sizes) + ", " + ints(ref.strides) + ", " +
         expr(ref.offset - b.layout.offset) + ")";
}

// The Arg a C++ wrapper passes for schema argument i of `e` (positional, keyword or default).
const Arg* call_arg(const ir::ExternCall& e, size_t i) {
  const graph::CArg& c = e.c_args[i];
  if (i < e.args.size()) return &e.args[i];
  for (const auto& [key, a] : e.kwargs)
    if (key == c.name) return &a;
  return c.default_value ? &*c.default_value : nullptr;
}

std::string extern_blocker(const ir::ExternCall& e) {
  std::string what = "extern call " + e.op + " (node " + e.origin + ")";
  if (e.op.rfind("aten.", 0) != 0 && e.op.rfind("prims.", 0) != 0) return what + ": not an ATen op";
  if (!e.scalar_output.empty() || !e.host_scalars.empty()) return what + ": numbers on the host";
  if (e.c_args.empty())
    return what +
           ": arguments or results the C++ wrapper cannot pass (its graph node has no c_args)";
  if (e.args.size() > e.c_args.size()) return what + ": more arguments than its schema";
  for (const auto& [key, a] : e.kwargs) {
    bool known = false;
    for (const graph::CArg& c : e.c_args) known |= c.name == key;
    if (!known) return what + ": keyword " + key + " not in its schema";
  }
  for (size_t i = 0; i < e.c_args.size(); ++i) {
    const Arg* a = call_arg(e, i);
    if (!a) return what + ": no value for " + e.c_args[i].name;
    std::string why = arg_blocker(*a, e.c_args[i].type);
    if (!why.empty()) return what + ": " + e.c_args[i].name + " is " + why;
  }
  return "";
}

// Where each size symbol's value comes from: a scalar input, or a tensor input's size or stride.
std::string bind_symbols(const ir::Program& prog) {
  std::string out;
  std::vector<int> scalar_index(prog.inputs.size(), -1);
  int scalars = 0;
  for (size_t i = 0; i < prog.inputs.size(); ++i)
    if (prog.inputs[i].empty()) scalar_index[i] = scalars++;
  for (const graph::SizeSymbol& s : prog.size_symbols) {
    sym::Expr e = sym::Expr::symbol(s.name);
    std::string source;
    for (size_t i = 0; i < prog.inputs.size() && source.empty(); ++i) {
      if (prog.input_symints[i] && *prog.input_symints[i] == e)
        source = "coil_scalars[" + std::to_string(scalar_index[i]) + "]";
    }
    for (const char* what : {"size", "stride"}) {
      for (size_t i = 0; i < prog.inputs.size() && source.empty(); ++i) {
        if (prog.inputs[i].empty()) continue;
        const ir::Layout& l = prog.buffer(prog.inputs[i]).layout;
        const std::vector<sym::Expr>& v = std::string(what) == "size" ? l.sizes : l.strides;
        for (size_t d = 0; d < v.size() && source.empty(); ++d) {
          if (v[d] == e) source = var(prog.inputs[i]) + "." + what + "(" + std::to_string(d) + ")";
        }
      }
    }
    if (source.empty())
      throw std::runtime_error("size symbol " + s.name + " has no source among the inputs");
    out += "    const int64_t " + s.name + " = " + source + ";\n";
  }
  return out;
}

// Input checks (AOT packages): size symbols' ranges, then each input's device, dtype, rank,
// sizes and strides.
std::string input_checks(const ir::Program& prog) {
  std::ostringstream out;
  for (const graph::SizeSymbol& s : prog.size_symbols) {
    std::string range =
        "[" + (s.range.lo == sym::Range::kNegInf ? "-inf" : std::to_string(s.range.lo)) + ", " +
        (s.range.hi == sym::Range::kPosInf ? "inf" : std::to_string(s.range.hi)) + "]";
    std::string cond;
    if (s.range.lo != sym::Range::kNegInf)
      cond += s.name + " >= " + std::to_string(s.range.lo) + "LL";
    if (s.range.hi != sym::Range::kPosInf)
      cond += (cond.empty() ? "" : " && ") + s.name + " <= " + std::to_string(s.range.hi) + "LL";
    if (cond.empty()) continue;
    out << "    if (!(" << cond << ")) fail(3, \"size " << s.name << " = \" + std::to_string("
        << s.name << ") + \" is outside the range " << range << " the graph was compiled for\");\n";
  }
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    const std::string& name = prog.inputs[i];
    if (name.empty()) continue;
    const ir::Layout& l = prog.buffer(name).layout;
    std::string who = "input " + std::to_string(i) + " (" + name + ")";
    std::string v = var(name);
    out << "    if (!" << v << ".is_cpu()) fail(3, " << quote(who + ": expected a CPU tensor")
        << ");\n";
    out << "    if (!(" << v << ".dtype() == " << scalar_type(l.dtype) << ")) fail(3, "
        << quote(who + ": expected " + graph::dtype_name(l.dtype) + ", got ")
        << " + std::string(shim->dtype_name(" << v << ".dtype())));\n";
    out << "    if (!(" << v << ".dim() == " << l.sizes.size() << ")) fail(3, "
        << quote(who + ": expected rank " + std::to_string(l.sizes.size()) + ", got ")
        << " + std::to_string(" << v << ".dim()));\n";
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      std::string at = who + " dim " + std::to_string(d);
      std::string size = v + ".size(" + std::to_string(d) + ")";
      std::string stride = v + ".stride(" + std::to_string(d) + ")";
      out << "    if (!(" << size << " == " << expr(l.sizes[d]) << ")) fail(3, "
          << quote(at + ": size ") << " + std::to_string(" << size
          << ") + \", expected \" + std::to_string(" << expr(l.sizes[d]) << "));\n";
      out << "    if (!(" << size << " <= 1 || " << stride << " == " << expr(l.strides[d])
          << ")) fail(3, " << quote(at + ": stride ") << " + std::to_string(" << stride
          << ") + \", expected \" + std::to_string(" << expr(l.strides[d]) << "));\n";
    }
  }
  return out.str();
}

// "aten.mm.default" -> {"aten::mm", ""}.
std::pair<std::string, std::string> op_and_overload(const std::string& op) {
  size_t last = op.rfind('.');
  std::string overload = op.substr(last + 1), name = op.substr(0, last);
  size_t first = name.find('.');
  name = name.substr(0, first) + "::" + name.substr(first + 1);
  return {name, overload == "default" ? "" : overload};
}

}  // namespace

std::string cpp_wrapper_blocker(const ir::Program& prog, const std::string& backend) {
  if (backend != "cpp") return "Triton kernels (the C++ wrapper runs C++ kernels only, for now)";
  for (const ir::Buffer& b : prog.buffers) {
    if (b.layout.device != "cpu") return "a tensor on " + b.layout.device;
  }
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    if (prog.inputs[i].empty() && !prog.input_symints[i])
      return "input " + std::to_string(i) + " is a number that is not a size";
  }
  for (const ir::GraphOutput& o : prog.outputs) {
    if (!o.scalar.empty()) return "an output that is a number";
  }
  for (const ir::ExternCall& e : prog.externs) {
    std::string why = extern_blocker(e);
    if (!why.empty()) return why;
  }
  return "";
}

std::string cpp_wrapper_signature(const ir::Program& prog, bool checks) {
  size_t tensors = 0, scalars = 0;
  for (const std::string& name : prog.inputs) (name.empty() ? scalars : tensors)++;
  return "{\"tensor_inputs\": " + std::to_string(tensors) +
         ", \"scalar_inputs\": " + std::to_string(scalars) +
         ", \"outputs\": " + std::to_string(prog.outputs.size()) +
         ", \"checks_inputs\": " + (checks ? "true" : "false") + "}";
}

std::string render_cpp_wrapper(const ir::Program& prog, const sched::Schedule& s,
                               const std::vector<KernelSource>& kernels, bool checks) {
  std::ostringstream out;
  out << runtime::kWrapperBoundary;
  // No graph title here: the library's source is its build-cache key, and the same graph
  // compiled again (another graph id) must find it.
  out << "// The program that runs the graph (C++ wrapper: runtime/graph_abi.h).\n";
  out << runtime::kAtenShimHeader << kCppWrapperRuntime << "\n" << cpp::kSizeArithmetic << "\n";
  std::set<std::string> declared;
  for (const KernelSource& k : kernels) {
    std::string fn = k.same_code_as.empty() ? k.name : k.same_code_as;
    if (declared.insert(fn).second)
      out << "extern \"C\" void " << fn << "(void* const*, const int64_t*);\n";
  }
  out << "\nextern \"C\" const char* coil_graph_signature() { return "
      << quote(cpp_wrapper_signature(prog, checks)) << "; }\n";
  out << "extern \"C\" const char* coil_graph_error() { return "
         "coil_wrapper::last_error.c_str(); }\n";
  out << "extern \"C\" int32_t coil_graph_bind(const void* api) {\n"
         "  const CoilAtenShim* s = static_cast<const CoilAtenShim*>(api);\n"
         "  if (!s || s->abi_version != COIL_SHIM_ABI_VERSION) return 1;\n"
         "  coil_wrapper::shim = s;\n"
         "  return 0;\n"
         "}\n\n";
  out << "extern \"C\" int32_t coil_graph_run(void* const* coil_inputs, const int64_t* "
         "coil_scalars, void** coil_outputs) {\n";
  out << "  using namespace coil_wrapper;\n";
  out << "  last_error.clear();\n";
  out << "  if (!shim) {\n    last_error = \"coil_graph_bind was not called\";\n    return 1;\n"
         "  }\n";
  // Every input is taken first: a failure anywhere below releases them all.
  int tensor_index = 0;
  for (const std::string& name : prog.inputs) {
    if (name.empty()) continue;
    out << "  T " << var(name) << "(coil_inputs[" << tensor_index++ << "]);\n";
  }
  out << "  (void)coil_scalars;\n";
  out << "  try {\n";
  out << bind_symbols(prog);
  if (checks) out << input_checks(prog);

  bool index_errors = false;
  for (const KernelSource& k : kernels)
    for (const KernelArg& a : k.args) index_errors |= a.buffer == kIndexErrorArg;
  if (index_errors) out << "    int64_t " << var(kIndexErrorArg) << "[3] = {0, 0, 0};\n";

  std::map<int, std::vector<std::string>> frees = releases_by_step(s);

  auto allocate = [&](const ir::Buffer& b) {
    const sched::BufferPlan& plan = s.buffers.at(b.name);
    if (!plan.reuses.empty()) {
      const ir::Layout& was = prog.buffer(plan.reuses).layout;
      bool as_is = plan.in_place && was.sizes == b.layout.sizes && was.strides == b.layout.strides;
      if (as_is) {
        out << "    T " << var(b.name) << " = std::move(" << var(plan.reuses)
            << ");  // reuse in place\n";
      } else {
        out << "    T " << var(b.name) << " = view(" << var(plan.reuses) << ", "
            << ints(b.layout.sizes) << ", " << ints(b.layout.strides) << ", 0);\n";
        out << "    " << var(plan.reuses) << ".reset();  // reuse\n";
      }
      return;
    }
    out << "    T " << var(b.name) << " = empty" << (large_cpu_buffer(b.layout) ? "_large(" : "(")
        << ints(b.layout.sizes) << ", " << ints(b.layout.strides) << ", "
        << scalar_type(b.layout.dtype) << ");\n";
  };

  for (size_t step = 0; step < s.steps.size(); ++step) {
    const sched::Step& st = s.steps[step];
    if (st.kind == sched::Step::Kind::Kernel) {
      const KernelSource& k = kernels.at(st.index);
      out << "    // " << k.name << ": ";
      for (size_t i = 0; i < k.origins.size(); ++i) out << (i ? ", " : "") << k.origins[i];
      out << "\n";
      bool checks_indices = false;
      for (const KernelArg& a : k.args) {
        checks_indices |= a.buffer == kIndexErrorArg;
        if (a.written && a.buffer != kIndexErrorArg) allocate(prog.buffer(a.buffer));
      }
      out << "    {\n      void* p[] = {";
      for (size_t i = 0; i < k.args.size(); ++i) {
        const std::string& b = k.args[i].buffer;
        out << (i ? ", " : "") << var(b) << (b == kIndexErrorArg ? "" : ".data()");
      }
      if (k.args.empty()) out << "nullptr";
      out << "};\n";
      if (!k.size_args.empty()) {
        out << "      int64_t n[] = {";
        for (size_t i = 0; i < k.size_args.size(); ++i) out << (i ? ", " : "") << k.size_args[i];
        out << "};\n";
      }
      std::string fn = k.same_code_as.empty() ? k.name : k.same_code_as;
      out << "      " << fn << "(p, " << (k.size_args.empty() ? "nullptr" : "n") << ");\n";
      out << "    }\n";
      if (checks_indices) out << "    check_indices(" << var(kIndexErrorArg) << ");\n";
    } else {
      const ir::ExternCall& e = prog.externs.at(st.index);
      out << "    // " << (e.is_fallback ? "fallback" : "extern") << ": " << e.origin
          << (e.decision.empty() ? "" : " (" + e.decision + ")") << "\n";
      for (const std::string& name : e.outputs) out << "    T " << var(name) << ";\n";
      auto [name, overload] = op_and_overload(e.op);
      out << "    {\n      static void* const o = find_op(" << quote(name) << ", "
          << quote(overload) << ");\n";
      // Tensor arguments that are views of a buffer live until the call returns.
      std::vector<std::string> tensors;
      for (size_t i = 0; i < e.tensors.size(); ++i) {
        std::string t = tensor_arg(prog, e.tensors[i]);
        if (t.rfind("view(", 0) == 0) {
          out << "      T t" << i << " = " << t << ";\n";
          t = "t" + std::to_string(i);
        }
        tensors.push_back(t);
      }
      std::string locals, args;
      for (size_t i = 0; i < e.c_args.size(); ++i) {
        args +=
            "        " +
            encode(*call_arg(e, i), e.c_args[i].type, tensors, "l" + std::to_string(i), &locals) +
            ",  // " + e.c_args[i].name + "\n";
      }
      out << locals;
      if (e.c_args.empty())
        out << "      const CoilValue* a = nullptr;\n";
      else
        out << "      const CoilValue a[] = {\n" << args << "      };\n";
      size_t results = e.outputs.size();
      out << "      CoilTensor r[" << std::max<size_t>(results, 1) << "] = {};\n";
      out << "      call(o, a, " << e.c_args.size() << ", r, " << results << ", " << quote(e.origin)
          << ");\n";
      for (size_t i = 0; i < results; ++i)
        out << "      " << var(e.outputs[i]) << " = T(r[" << i << "]);\n";
      if (e.check_output_strides) {
        for (size_t i = 0; i < results; ++i) {
          const ir::Layout& l = prog.buffer(e.outputs[i]).layout;
          out << "      " << var(e.outputs[i]) << " = require_strides(" << var(e.outputs[i]) << ", "
              << ints(l.strides) << ");\n";
        }
      }
      out << "    }\n";
    }
    for (const std::string& name : frees[static_cast<int>(step)])
      out << "    " << var(name) << ".reset();\n";
  }

  // The outputs: new references, handed over only once all exist.
  for (size_t i = 0; i < prog.outputs.size(); ++i) {
    const ir::GraphOutput& o = prog.outputs[i];
    if (o.is_none) continue;
    std::string t = tensor_arg(prog, o.ref);
    out << "    T result" << i << " = " << (t.rfind("view(", 0) == 0 ? t : "share(" + t + ")")
        << ";\n";
  }
  for (size_t i = 0; i < prog.outputs.size(); ++i) {
    out << "    coil_outputs[" << i << "] = "
        << (prog.outputs[i].is_none ? "nullptr" : "result" + std::to_string(i) + ".release()")
        << ";\n";
  }
  out << "    return 0;\n";
  out << "  } catch (const Failure& f) {\n    return f.code;\n  } catch (const std::exception& e) "
         "{\n    last_error = e.what();\n    return 1;\n  }\n}\n";
  return out.str();
}

}  // namespace coil::codegen
