#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/codegen/cpp/cpp_special.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/provenance.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace coil::codegen {

using graph::DType;
using ir::Op;
using ir::Value;
using sym::Expr;

namespace {

// Kernels with less work than this run on one thread: starting OpenMP workers costs microseconds.
constexpr int64_t kParallelMinElements = 32768;
// Kernel names list at most this many op names.
constexpr size_t kMaxNameOps = 10;

std::string ctype(DType d) {
  return graph::dtype_cpp_type(d);
}

std::string float_literal(double v, DType d) {
  std::string t = d == DType::Float64 ? "double" : "float";
  if (std::isnan(v)) return "std::numeric_limits<" + t + ">::quiet_NaN()";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
  std::ostringstream s;
  s << std::setprecision(d == DType::Float64 ? 17 : 9) << v;
  std::string text = s.str();
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  if (d != DType::Float64) text += "f";
  return text;
}

std::string constant_text(Value v) {
  DType d = v.dtype();
  switch (d) {
    case DType::Bool:
      return v->ivalue ? "true" : "false";
    case DType::Float32:
    case DType::Float64:
      return float_literal(v->fvalue, d);
    case DType::BFloat16:
    case DType::Float16:
      return "static_cast<" + ctype(d) + ">(" + float_literal(v->fvalue, DType::Float32) + ")";
    case DType::Int64:
      if (v->ivalue == INT64_MIN) return "std::numeric_limits<int64_t>::min()";
      return "static_cast<int64_t>(" + std::to_string(v->ivalue) + "LL)";
    default:
      return "static_cast<" + ctype(d) + ">(" + std::to_string(v->ivalue) + ")";
  }
}

std::string unary_text(Op op, const std::string& a, DType d) {
  bool is_float = graph::is_floating(d);
  switch (op) {
    case Op::Neg:
      return "(-" + a + ")";
    case Op::Abs:
      return "std::abs(" + a + ")";
    case Op::Exp:
      return "std::exp(" + a + ")";
    case Op::Exp2:
      return "std::exp2(" + a + ")";
    case Op::Log:
      return "std::log(" + a + ")";
    case Op::Log2:
      return "std::log2(" + a + ")";
    case Op::Log1p:
      return "std::log1p(" + a + ")";
    case Op::Expm1:
      return "std::expm1(" + a + ")";
    case Op::Sqrt:
      return "std::sqrt(" + a + ")";
    case Op::Rsqrt:
      return "(" + ctype(d) + "(1) / std::sqrt(" + a + "))";
    case Op::Sin:
      return "std::sin(" + a + ")";
    case Op::Cos:
      return "std::cos(" + a + ")";
    case Op::Tan:
      return "std::tan(" + a + ")";
    case Op::Asin:
      return "std::asin(" + a + ")";
    case Op::Acos:
      return "std::acos(" + a + ")";
    case Op::Atan:
      return "std::atan(" + a + ")";
    case Op::Sinh:
      return "std::sinh(" + a + ")";
    case Op::Cosh:
      return "std::cosh(" + a + ")";
    case Op::Tanh:
      return "std::tanh(" + a + ")";
    case Op::Sigmoid:
      return "coil_sigmoid(" + a + ")";
    case Op::Erf:
      return "std::erf(" + a + ")";
    case Op::Floor:
      return is_float ? "std::floor(" + a + ")" : a;
    case Op::Ceil:
      return is_float ? "std::ceil(" + a + ")" : a;
    case Op::Round:
      return is_float ? "std::nearbyint(" + a + ")" : a;
    case Op::Trunc:
      return is_float ? "std::trunc(" + a + ")" : a;
    case Op::Reciprocal:
      return "(" + ctype(d) + "(1) / " + a + ")";
    case Op::Sign:
      return "coil_sign(" + a + ")";
    case Op::IsNan:
      return "coil_isnan(" + a + ")";
    case Op::IsInf:
      return "coil_isinf(" + a + ")";
    case Op::LogicalNot:
      return "(!" + a + ")";
    case Op::BitwiseNot:
      return "(~" + a + ")";
    default:
      throw std::logic_error(std::string("cpp codegen: not a unary op: ") + ir::op_name(op));
  }
}

std::string binary_text(Op op, const std::string& a, const std::string& b, DType operand) {
  std::string t = ctype(operand);
  switch (op) {
    case Op::Add:
      return "(" + a + " + " + b + ")";
    case Op::Sub:
      return "(" + a + " - " + b + ")";
    case Op::Mul:
      return "(" + a + " * " + b + ")";
    case Op::Div:
      return "(" + a + " / " + b + ")";
    case Op::FloorDiv:
      return "coil_floordiv_t<" + t + ">(" + a + ", " + b + ")";
    case Op::TruncDiv:
      return "coil_truncdiv<" + t + ">(" + a + ", " + b + ")";
    case Op::Remainder:
      return "coil_remainder<" + t + ">(" + a + ", " + b + ")";
    case Op::Fmod:
      return "coil_fmod<" + t + ">(" + a + ", " + b + ")";
    case Op::Pow:
      return "coil_pow<" + t + ">(" + a + ", " + b + ")";
    case Op::Atan2:
      return "std::atan2(" + a + ", " + b + ")";
    case Op::Maximum:
      return "coil_max<" + t + ">(" + a + ", " + b + ")";
    case Op::Minimum:
      return "coil_min<" + t + ">(" + a + ", " + b + ")";
    case Op::Lt:
      return "(" + a + " < " + b + ")";
    case Op::Le:
      return "(" + a + " <= " + b + ")";
    case Op::Gt:
      return "(" + a + " > " + b + ")";
    case Op::Ge:
      return "(" + a + " >= " + b + ")";
    case Op::Eq:
      return "(" + a + " == " + b + ")";
    case Op::Ne:
      return "(" + a + " != " + b + ")";
    case Op::LogicalAnd:
      return "(" + a + " && " + b + ")";
    case Op::LogicalOr:
      return "(" + a + " || " + b + ")";
    case Op::LogicalXor:
      return "(" + a + " != " + b + ")";
    case Op::BitwiseAnd:
      return "(" + a + " & " + b + ")";
    case Op::BitwiseOr:
      return "(" + a + " | " + b + ")";
    case Op::BitwiseXor:
      return "(" + a + " ^ " + b + ")";
    default:
      throw std::logic_error(std::string("cpp codegen: not a binary op: ") + ir::op_name(op));
  }
}

std::string reduction_identity(ir::ReductionType t, DType d) {
  std::string ty = ctype(d);
  bool is_float = graph::is_floating(d);
  switch (t) {
    case ir::ReductionType::Sum:
      return ty + "(0)";
    case ir::ReductionType::Prod:
      return ty + "(1)";
    case ir::ReductionType::Max:
    case ir::ReductionType::ArgMax:
      return is_float ? "-std::numeric_limits<" + ty + ">::infinity()"
                      : "std::numeric_limits<" + ty + ">::lowest()";
    case ir::ReductionType::Min:
    case ir::ReductionType::ArgMin:
      return is_float ? "std::numeric_limits<" + ty + ">::infinity()"
                      : "std::numeric_limits<" + ty + ">::max()";
    case ir::ReductionType::Any:
      return "false";
    case ir::ReductionType::All:
      return "true";
  }
  return "";
}

class Emitter {
 public:
  Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k)
      : prog_(prog), s_(s), k_(k), env_(k.range_env()) {}

  KernelSource render(const std::string& name) {
    KernelSource src;
    src.name = name;
    collect_args();
    std::ostringstream body;
    out_ = &body;
    render_loops();
    std::ostringstream code;
    code << header_comment(name);
    code << "extern \"C\" void " << name << "(void* const* ptrs, const int64_t* ints) {\n";
    src.size_args = size_args_used(prog_, body.str());
    if (src.size_args.empty()) code << "  (void)ints;\n";
    for (size_t i = 0; i < src.size_args.size(); ++i) {
      code << "  const int64_t " << src.size_args[i] << " = ints[" << i << "];  // size\n";
    }
    for (size_t i = 0; i < args_.size(); ++i) {
      if (args_[i].buffer == kIndexErrorArg) {
        code << "  int64_t* " << kIndexErrorArg << " = static_cast<int64_t*>(ptrs[" << i
             << "]);  // where a bad indirect index is reported\n";
        continue;
      }
      const ir::Buffer& b = prog_.buffer(args_[i].buffer);
      std::string t = ctype(b.layout.dtype);
      code << "  " << (args_[i].written ? "" : "const ") << t << "* __restrict__ "
           << ptr_[args_[i].buffer] << " = static_cast<" << (args_[i].written ? "" : "const ") << t
           << "*>(ptrs[" << i << "]);  // " << args_[i].buffer << "\n";
    }
    code << body.str();
    code << "}\n";
    src.code = code.str();
    src.args = args_;
    src.aten_math = aten_math_;
    std::set<std::string> origins;
    for (const sched::Member& m : k_.members)
      origins.insert(prog_.buffers[m.buffer].origins.begin(),
                     prog_.buffers[m.buffer].origins.end());
    src.origins.assign(origins.begin(), origins.end());
    return src;
  }

 private:
  bool stored(const std::string& buf) const {
    auto it = s_.buffers.find(buf);
    return it == s_.buffers.end() || it->second.stored;
  }

  void collect_args() {
    KernelArgPlan plan = plan_kernel_args(prog_, s_, k_);
    args_ = std::move(plan.args);
    ptr_ = std::move(plan.pointer);
  }

  std::string header_comment(const std::string& name) const {
    std::ostringstream c;
    c << "// " << name << "\n";
    for (const std::string& l : provenance_lines(prog_, s_, k_)) c << "// " << l << "\n";
    for (const auto& d : k_.decisions) c << "// decision: " << d << "\n";
    if (k_.has_reduction() && k_.column_block == 0) {
      c << "// decision: reduction looped over r inside each x point (CPU)\n";
    }
    if (const ir::Buffer* sc = scatter()) {
      std::string how = sc->scatter_mode == ir::ScatterMode::Store ? "plain stores (a duplicate "
                                                                     "index keeps one value)"
                        : atomic_scatter()                         ? "omp atomic updates"
                                           : "serial updates, in index order";
      c << "// decision: scatter " << ir::scatter_mode_name(sc->scatter_mode) << " into "
        << sc->name << ": " << how << "\n";
    }
    return c.str();
  }

  void line(const std::string& text) { *out_ << std::string(indent_ * 2, ' ') << text << "\n"; }

  std::string index_text(const std::string& buf, const Expr& idx) {
    const ir::Buffer& b = prog_.buffer(buf);
    // Pointers are tensor data pointers: indices are relative to the layout's storage offset.
    return sym::to_cpp(sym::simplify(idx - b.layout.offset, env_), env_);
  }

  // v's index with each indirect symbol replaced by a temporary holding its checked position
  // (coil_index: wrapped, bounds-checked where the access happens, 0 when out of bounds).
  Expr checked_index(Value v) {
    std::vector<Expr> syms = ir::indirect_symbols(v->index);
    if (syms.empty()) return v->index;
    std::vector<Value> raw = ir::indirect_operands(v);
    Value mask = ir::load_mask(v);
    sym::ExprMap repl;
    for (size_t i = 0; i < syms.size(); ++i) {
      const ir::Indirect* b = ir::indirect_of(syms[i]);
      std::string name = "tmp" + std::to_string(next_tmp_++);
      line("const int64_t " + name + " = coil_index(" + *lookup(raw[i]) + ", " +
           sym::to_cpp(b->size, env_) + ", " + (b->wrap ? "true" : "false") + ", " +
           (mask ? *lookup(mask) : "true") + ", " + kIndexErrorArg + ");");
      Expr t = Expr::symbol(name);
      env_.add_index_var(t, b->size);
      repl[syms[i]] = t;
    }
    return sym::substitute(v->index, repl);
  }

  // Emits statements computing v (already in kernel variables); returns the C++ expression.
  std::string value(Value root) {
    for (const Value& v : ir::topo_order({root})) {
      if (lookup(v)) continue;
      std::string text;
      switch (v.op()) {
        case Op::Constant:
          memo_.back()[v.get()] = constant_text(v);
          continue;
        case Op::IndexExpr:
          text = "static_cast<" + ctype(v.dtype()) + ">(" +
                 sym::to_cpp(sym::simplify(checked_index(v), env_), env_) + ")";
          break;
        case Op::Guard:
          checked_index(v);
          memo_.back()[v.get()] = *lookup(v->args[0]);
          continue;
        case Op::Load: {
          auto avail = available_.find(v->buffer);
          if (avail != available_.end() && !ir::has_indirect(v->index)) {
            memo_.back()[v.get()] = avail->second;
            continue;
          }
          std::string load =
              ptr_.at(v->buffer) + "[" + index_text(v->buffer, checked_index(v)) + "]";
          text = !v->masked ? load
                            : "(" + *lookup(v->args[0]) + " ? " + load + " : static_cast<" +
                                  ctype(v.dtype()) + ">(0))";
          break;
        }
        case Op::Cast:
          text = "static_cast<" + ctype(v.dtype()) + ">(" + *lookup(v->args[0]) + ")";
          break;
        case Op::Where:
          text = "(" + *lookup(v->args[0]) + " ? " + *lookup(v->args[1]) + " : " +
                 *lookup(v->args[2]) + ")";
          break;
        default:
          if (auto special = special_text(v)) {
            text = *special;
          } else if (v->args.size() == 1) {
            text = unary_text(v.op(), *lookup(v->args[0]), v.dtype());
          } else {
            text =
                binary_text(v.op(), *lookup(v->args[0]), *lookup(v->args[1]), v->args[0].dtype());
          }
      }
      std::string name = "tmp" + std::to_string(next_tmp_++);
      line(ctype(v.dtype()) + " " + name + " = " + text + ";");
      memo_.back()[v.get()] = name;
    }
    return *lookup(root);
  }

  // A special-function op's call (cpp_special.h), noting when it needs ATen's header.
  std::optional<std::string> special_text(Value v) {
    std::vector<std::string> operands;
    for (const Value& a : v->args) operands.push_back(*lookup(a));
    auto special = special_op_text(v.op(), operands, v->args.at(0).dtype());
    if (!special) return std::nullopt;
    aten_math_ |= special->aten_math;
    return special->text;
  }

  const std::string* lookup(Value v) const {
    for (auto it = memo_.rbegin(); it != memo_.rend(); ++it) {
      auto f = it->find(v.get());
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  Value kernel_body(const sched::Member& m) const {
    return ir::substitute_indices(prog_.buffers[m.buffer].body, m.var_map);
  }

  // A scatter combines its value into the element its target names.
  void scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& val) {
    std::string pos = value(ir::substitute_indices(b.target, m.var_map));
    std::string off = b.layout.offset == Expr(0) ? "" : " - " + sym::to_cpp(b.layout.offset, env_);
    std::string at = ptr_.at(b.name) + "[" + pos + off + "]";
    DType d = b.layout.dtype;
    std::string t = ctype(d), op = ctype(opmath(d));
    auto in_opmath = [&](const std::string& x) {
      return op == t ? x : "static_cast<" + op + ">(" + x + ")";
    };
    auto back = [&](const std::string& x) {
      return op == t ? x : "static_cast<" + t + ">(" + x + ")";
    };
    switch (b.scatter_mode) {
      case ir::ScatterMode::Store:
        line(at + " = " + val + ";");
        return;
      case ir::ScatterMode::Add:
        if (atomic_scatter()) {
          line("#pragma omp atomic");
          line(at + " += " + val + ";");
          return;
        }
        line(at + " = " + back(in_opmath(at) + " + " + in_opmath(val)) + ";");
        return;
      case ir::ScatterMode::Mul:
        line(at + " = " + back(in_opmath(at) + " * " + in_opmath(val)) + ";");
        return;
      case ir::ScatterMode::Max:
      case ir::ScatterMode::Min: {
        std::string fn = b.scatter_mode == ir::ScatterMode::Max ? "coil_max" : "coil_min";
        line(at + " = " + back(fn + "<" + op + ">(" + in_opmath(at) + ", " + in_opmath(val) + ")") +
             ";");
        return;
      }
    }
  }

  static DType opmath(DType d) {
    return d == DType::BFloat16 || d == DType::Float16 ? DType::Float32 : d;
  }

  const ir::Buffer* scatter() const {
    for (const sched::Member& m : k_.members) {
      if (prog_.buffers[m.buffer].is_scatter()) return &prog_.buffers[m.buffer];
    }
    return nullptr;
  }

  // Scatter-adds of types `omp atomic` handles run in parallel; other scatters that combine values
  // run serially (no two updates of one element may interleave).
  bool atomic_scatter() const {
    const ir::Buffer* b = scatter();
    if (!b || b->scatter_mode != ir::ScatterMode::Add) return false;
    DType d = b->layout.dtype;
    return d != DType::BFloat16 && d != DType::Float16 && d != DType::Bool;
  }

  void store(const ir::Buffer& b, const sched::Member& m, const std::string& val) {
    if (b.is_scatter()) {
      scatter_store(b, m, val);
      return;
    }
    if (!stored(b.name)) return;
    Expr idx = sym::substitute(b.write_index(), m.var_map);
    line(ptr_.at(b.name) + "[" + index_text(b.name, idx) + "] = " + val + ";");
  }

  // Column mode (Kernel::column_block): the last x dim runs innermost in blocks, so per-x-point
  // values are arrays indexed by the lane xi, and each x point's code sits in a `for (xi ...)`
  // loop.
  bool column() const { return k_.column_block > 0; }
  std::string last_x() const { return "x" + std::to_string(k_.xsizes.size() - 1); }
  std::string lane(const std::string& v) const { return column() ? v + "[xi]" : v; }

  void open_lanes(bool simd) {
    if (!column()) return;
    if (simd) line("#pragma omp simd");
    line("for (int64_t xi = 0; xi < xn; ++xi) {");
    ++indent_;
    line("const int64_t " + last_x() + " = xc + xi;");
    memo_.emplace_back();
  }

  void close_lanes() {
    if (!column()) return;
    memo_.pop_back();
    --indent_;
    line("}");
  }

  // Computes a pointwise member; outer-level values in column mode go to their lane's slot.
  void emit_pointwise(const sched::Member& m) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    std::string val = value(kernel_body(m));
    std::string var = "v_" + b.name;
    if (column() && !m.inner) {
      var = lane(var);
      line(var + " = " + val + ";");
    } else {
      line(ctype(b.layout.dtype) + " " + var + " = " + val + ";");
    }
    available_[b.name] = var;
    store(b, m, var);
  }

  // " reduction(op:acc, ...)" clauses for a loop whose reductions all have a SIMD form (sums,
  // and max/min through the prelude's NaN-propagating declared reductions); "" when one has
  // none (products, any/all, arg-reductions, Welford): that loop stays scalar.
  std::string simd_reduction_clauses(const std::vector<const sched::Member*>& reductions) const {
    std::map<std::string, std::string> by_op;
    for (const sched::Member* m : reductions) {
      const ir::Buffer& b = prog_.buffers[m->buffer];
      DType t = b.body.dtype();
      bool f32 = t == DType::Float32, f64 = t == DType::Float64;
      bool integer = !graph::is_floating(t) && t != DType::Bool;
      std::string op;
      switch (*b.reduction) {
        case ir::ReductionType::Sum:
          if (f32 || f64 || integer) op = "+";
          break;
        case ir::ReductionType::Max:
          op = f32 ? "coil_max_f" : f64 ? "coil_max_d" : integer ? "max" : "";
          break;
        case ir::ReductionType::Min:
          op = f32 ? "coil_min_f" : f64 ? "coil_min_d" : integer ? "min" : "";
          break;
        default:
          break;
      }
      if (op.empty()) return "";
      std::string& list = by_op[op];
      list += (list.empty() ? "" : ", ") + std::string("acc_") + b.name;
    }
    std::string out;
    for (const auto& [op, list] : by_op) out += " reduction(" + op + ":" + list + ")";
    return out;
  }

  static bool is_arg_reduction(const ir::Buffer& b) {
    return *b.reduction == ir::ReductionType::ArgMax || *b.reduction == ir::ReductionType::ArgMin;
  }

  void render_stage(const sched::Stage& stage) {
    if (!stage.inner) {
      open_lanes(true);
      for (int mi : stage.members) emit_pointwise(k_.members[mi]);
      close_lanes();
      return;
    }
    // Accumulators for the reductions of this loop (one per lane in column mode).
    std::vector<const sched::Member*> reductions;
    bool all_sums = true;
    std::string block = column() ? "[" + std::to_string(k_.column_block) + "]" : "";
    for (int mi : stage.members) {
      const sched::Member& m = k_.members[mi];
      const ir::Buffer& b = prog_.buffers[m.buffer];
      if (!b.is_reduction()) continue;
      reductions.push_back(&m);
      DType acc = b.body.dtype();
      std::string init = reduction_identity(*b.reduction, acc);
      line(ctype(acc) + " acc_" + b.name + block + (column() ? ";" : " = " + init + ";"));
      if (is_arg_reduction(b)) line("int64_t acci_" + b.name + block + (column() ? ";" : " = 0;"));
      if (column()) {
        line("for (int64_t xi = 0; xi < xn; ++xi) acc_" + b.name + "[xi] = " + init + ";");
        if (is_arg_reduction(b))
          line("for (int64_t xi = 0; xi < xn; ++xi) acci_" + b.name + "[xi] = 0;");
      }
      all_sums &= *b.reduction == ir::ReductionType::Sum && graph::is_floating(acc);
    }
    std::string sum_list;
    for (const auto* m : reductions) {
      sum_list +=
          (sum_list.empty() ? "" : ", ") + std::string("acc_") + prog_.buffers[m->buffer].name;
    }
    std::string simd_clauses = simd_reduction_clauses(reductions);
    // A kernel reducing everything to one value (no x loops) splits its sums across threads;
    // otherwise the x loops carry the parallelism.
    Expr rwork = 1;
    for (const Expr& e : k_.rsizes) rwork = rwork * e;
    bool split_sums = k_.xsizes.empty() && all_sums && !reductions.empty() &&
                      k_.stages.size() == 1 &&
                      (!rwork.as_int() || *rwork.as_int() >= kParallelMinElements);
    for (size_t j = 0; j < k_.rsizes.size(); ++j) {
      std::string r = "r" + std::to_string(j);
      bool innermost = j + 1 == k_.rsizes.size() && !column();
      if (j == 0 && split_sums) {
        line(std::string("#pragma omp parallel for") + (innermost ? " simd" : "") +
             " reduction(+:" + sum_list + ")");
      } else if (innermost && reductions.empty()) {
        line("#pragma omp simd");
      } else if (innermost && !simd_clauses.empty()) {
        // Sums may be reassociated across SIMD lanes (as eager's vectorized sums are); max and
        // min combine exactly in any order.
        line("#pragma omp simd" + simd_clauses);
      }
      line("for (int64_t " + r + " = 0; " + r + " < " + sym::to_cpp(k_.rsizes[j], env_) + "; ++" +
           r + ") {");
      ++indent_;
    }
    memo_.emplace_back();
    open_lanes(true);
    std::map<std::string, std::string> saved_available = available_;
    for (int mi : stage.members) {
      const sched::Member& m = k_.members[mi];
      const ir::Buffer& b = prog_.buffers[m.buffer];
      if (!b.is_reduction()) {
        emit_pointwise(m);
        continue;
      }
      std::string val = value(kernel_body(m));
      std::string acc = lane("acc_" + b.name);
      DType t = b.body.dtype();
      switch (*b.reduction) {
        case ir::ReductionType::Sum:
          line(acc + " = " + acc + " + " + val + ";");
          break;
        case ir::ReductionType::Prod:
          line(acc + " = " + acc + " * " + val + ";");
          break;
        case ir::ReductionType::Max:
          line(acc + " = coil_max<" + ctype(t) + ">(" + acc + ", " + val + ");");
          break;
        case ir::ReductionType::Min:
          line(acc + " = coil_min<" + ctype(t) + ">(" + acc + ", " + val + ");");
          break;
        case ir::ReductionType::Any:
          line(acc + " = " + acc + " || " + val + ";");
          break;
        case ir::ReductionType::All:
          line(acc + " = " + acc + " && " + val + ";");
          break;
        case ir::ReductionType::ArgMax:
        case ir::ReductionType::ArgMin: {
          // The row-major position within this buffer's own reduction ranges.
          Expr pos = 0;
          for (size_t j = 0; j < b.reduction_ranges.size(); ++j) {
            pos =
                pos * b.reduction_ranges[j] + m.var_map.at(ir::reduction_var(static_cast<int>(j)));
          }
          std::string cmp = *b.reduction == ir::ReductionType::ArgMax ? " > " : " < ";
          line("if ((" + val + cmp + acc + ") || (coil_isnan(" + val + ") && !coil_isnan(" + acc +
               "))) {");
          line("  " + acc + " = " + val + ";");
          line("  " + lane("acci_" + b.name) + " = " + sym::to_cpp(sym::simplify(pos, env_), env_) +
               ";");
          line("}");
          break;
        }
      }
    }
    available_ = saved_available;
    close_lanes();
    memo_.pop_back();
    for (size_t j = 0; j < k_.rsizes.size(); ++j) {
      --indent_;
      line("}");
    }
    // Results of the loop: one value per x point.
    open_lanes(false);
    for (const sched::Member* m : reductions) {
      const ir::Buffer& b = prog_.buffers[m->buffer];
      std::string src = lane(is_arg_reduction(b) ? "acci_" + b.name : "acc_" + b.name);
      std::string var = "v_" + b.name;
      std::string cast = "static_cast<" + ctype(b.layout.dtype) + ">(" + src + ")";
      if (column()) {
        var = lane(var);
        line(var + " = " + cast + ";");
      } else {
        line(ctype(b.layout.dtype) + " " + var + " = " + cast + ";");
      }
      available_[b.name] = var;
      store(b, *m, var);
    }
    close_lanes();
  }

  std::string loop_header(const std::string& var, const std::string& begin, const std::string& end,
                          const std::string& step = "1") {
    std::string inc = step == "1" ? "++" + var : var + " += " + step;
    return "for (int64_t " + var + " = " + begin + "; " + var + " < " + end + "; " + inc + ") {";
  }

  void render_loops() {
    indent_ = 1;
    Expr work = 1;
    for (const Expr& e : k_.xsizes) work = work * e;
    for (const Expr& e : k_.rsizes) work = work * e;
    auto w = work.as_int();
    bool parallel = !k_.xsizes.empty() && (!w || *w >= kParallelMinElements);
    // Scatters: no SIMD (two lanes may target one element); parallel when updates cannot race.
    const ir::Buffer* sc = scatter();
    bool simd = !sc;
    if (sc && sc->scatter_mode != ir::ScatterMode::Store && !atomic_scatter()) parallel = false;
    size_t nx = k_.xsizes.size();
    bool pointwise = !k_.has_reduction();
    bool tiled = pointwise && k_.tile > 0 && nx >= 2;
    // Loops as (header, pragma-able) pairs, outermost first; the parallel pragma covers the
    // leading loops that are perfectly nested.
    std::vector<std::string> headers;
    size_t parallel_loops = 0;
    auto size = [&](size_t i) { return sym::to_cpp(k_.xsizes[i], env_); };
    if (column()) {
      for (size_t i = 0; i + 1 < nx; ++i)
        headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
      headers.push_back(loop_header("xc", "0", size(nx - 1), std::to_string(k_.column_block)));
      parallel_loops = nx;
    } else if (tiled) {
      for (size_t i = 0; i + 2 < nx; ++i)
        headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
      std::string t = std::to_string(k_.tile);
      headers.push_back(loop_header("xt0", "0", size(nx - 2), t));
      headers.push_back(loop_header("xt1", "0", size(nx - 1), t));
      parallel_loops = nx;
      std::string a = "x" + std::to_string(nx - 2), b = "x" + std::to_string(nx - 1);
      headers.push_back(
          loop_header(a, "xt0", "std::min<int64_t>(xt0 + " + t + ", " + size(nx - 2) + ")"));
      headers.push_back(
          loop_header(b, "xt1", "std::min<int64_t>(xt1 + " + t + ", " + size(nx - 1) + ")"));
    } else {
      for (size_t i = 0; i < nx; ++i)
        headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
      parallel_loops = pointwise ? (nx > 1 ? nx - 1 : 1) : nx;
    }
    for (size_t i = 0; i < headers.size(); ++i) {
      bool innermost_pointwise = pointwise && i + 1 == headers.size() && simd;
      if (i == 0 && parallel && parallel_loops > 0) {
        std::string pragma = "#pragma omp parallel for";
        if (innermost_pointwise) pragma += " simd";
        if (parallel_loops > 1) pragma += " collapse(" + std::to_string(parallel_loops) + ")";
        line(pragma);
      } else if (innermost_pointwise) {
        line("#pragma omp simd");
      }
      line(headers[i]);
      ++indent_;
    }
    if (column()) {
      line("const int64_t xn = std::min<int64_t>(" + std::to_string(k_.column_block) + ", " +
           size(nx - 1) + " - xc);");
      // Per-lane slots for every per-x-point value of the kernel.
      for (const sched::Member& m : k_.members) {
        const ir::Buffer& b = prog_.buffers[m.buffer];
        if (m.inner && !b.is_reduction()) continue;
        line(ctype(b.layout.dtype) + " v_" + b.name + "[" + std::to_string(k_.column_block) + "];");
      }
    }
    memo_.emplace_back();
    for (const sched::Stage& stage : k_.stages) render_stage(stage);
    memo_.pop_back();
    for (size_t i = 0; i < headers.size(); ++i) {
      --indent_;
      line("}");
    }
  }

  const ir::Program& prog_;
  const sched::Schedule& s_;
  const sched::Kernel& k_;
  sym::RangeEnv env_;
  std::ostringstream* out_ = nullptr;
  int indent_ = 1;
  int next_tmp_ = 0;
  bool aten_math_ = false;
  std::vector<KernelArg> args_;
  std::map<std::string, std::string> ptr_;
  std::map<std::string, std::string> available_;  // buffer -> variable holding its value here
  std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo_;
};

}  // namespace

std::string kernel_name(const ir::Program& prog, const sched::Kernel& k, const std::string& prefix,
                        int n) {
  std::set<std::string> ops;
  for (const sched::Member& m : k.members) {
    for (const std::string& o : prog.buffers[m.buffer].origins) {
      auto t = prog.node_targets.find(o);
      if (t == prog.node_targets.end() || t->second.empty()) continue;
      // "aten._softmax.default" -> "_softmax"
      std::string target = t->second;
      size_t a = target.find('.');
      size_t b = target.rfind('.');
      std::string op = (a != std::string::npos && b > a) ? target.substr(a + 1, b - a - 1) : target;
      ops.insert(op);
    }
  }
  std::string name = prefix + "_fused";
  size_t count = 0;
  for (const std::string& op : ops) {
    if (count++ == kMaxNameOps) break;
    name += "_" + op;
  }
  return name + "_" + std::to_string(n);
}

KernelSource render_cpp_kernel(const ir::Program& prog, const sched::Schedule& s,
                               const sched::Kernel& k, const std::string& name) {
  Emitter e(prog, s, k);
  return e.render(name);
}

}  // namespace coil::codegen
