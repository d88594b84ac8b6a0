#include "coil/codegen/cpp/cpp_kernel.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_special.h"
#include "coil/codegen/cpp/cpp_vec.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/provenance.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace coil::codegen {

using graph::DType;
using ir::Op;
using ir::Value;
using sym::Expr;
using namespace cpp;  // NOLINT: the op texts (cpp_ops.h)

namespace {

// Kernels with less work than this run on one thread: starting OpenMP workers costs microseconds.
constexpr int64_t kParallelMinElements = 32768;
// Kernel names list at most this many op names.
constexpr size_t kMaxNameOps = 10;
// Innermost loops shorter than this stay scalar: a vector of 8 or 16 lanes would be mostly tail.
constexpr int64_t kMinVectorTrip = 8;

// Thrown while rendering an innermost loop in vector form when a value varying along it has no
// vector form; the loop is then rendered scalar. `why` goes into the kernel's header.
struct NoVectorForm {
  std::string why;
};

class Emitter {
 public:
  Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k, bool vectorize,
          int64_t min_trip)
      : prog_(prog),
        s_(s),
        k_(k),
        env_(k.range_env()),
        vectorize_(vectorize),
        min_trip_(min_trip) {}

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
    src.vectorized = vectorized_;
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
    for (const std::string& d : vec_decisions_) c << "// decision: " << d << "\n";
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
      if (vec_ && varies(v)) {
        vector_value(v);
        continue;
      }
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

  // ---- the innermost loop in vector form (cpp_vec.h) ----
  // The loop being rendered in vector form: each iteration covers `count` consecutive values of
  // `var` (one per lane), starting at var.
  struct VecLoop {
    std::string var;
    Expr sym;
    std::string count;
    std::optional<DType> elem;  // the lanes' type (float32 or float64), from the first value
  };

  std::string vec() const {
    if (!vec_->elem) throw NoVectorForm{"no floating-point value varies along the loop"};
    return *vec_type(*vec_->elem);
  }

  // Values of type d may vary along the vector loop: the lanes' type, or masks. bfloat16 and
  // float16 values ride in float32 lanes (exactly: each holds a value of its type), converted in
  // registers where they are loaded, stored or rounded.
  static bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }
  void lane_type(DType d) {
    if (d == DType::Bool) return;
    DType lanes = is_half(d) ? DType::Float32 : d;
    if (!vec_type(lanes)) throw NoVectorForm{std::string(graph::dtype_name(d)) + " values vary"};
    if (!vec_->elem) vec_->elem = lanes;
    if (*vec_->elem != lanes) throw NoVectorForm{"float32 and float64 values vary in one loop"};
  }
  // c10's type of a 16-bit float, for at::vec's conversions.
  static std::string c10_half(DType d) {
    return d == DType::BFloat16 ? "c10::BFloat16" : "c10::Half";
  }

  bool is_vector(const std::string& text) const { return vec_names_.count(text) > 0; }

  bool mentions_loop_var(const Expr& e) const {
    for (const Expr& x : sym::free_symbols(e)) {
      if (x == vec_->sym) return true;
    }
    return false;
  }

  // Whether v differs between the lanes of the vector loop.
  bool varies(Value v) const {
    switch (v.op()) {
      case Op::Constant:
        return false;
      case Op::Load:
        if (available_.count(v->buffer) && !ir::has_indirect(v->index)) return false;
        if (mentions_loop_var(v->index)) return true;
        break;
      case Op::IndexExpr:
      case Op::Guard:
        if (mentions_loop_var(v->index)) return true;
        break;
      default:
        break;
    }
    for (const Value& a : v->args) {
      if (is_vector(*lookup(a))) return true;
    }
    return false;
  }

  // An operand of a vector op: a vector variable, or a value the same in every lane, broadcast.
  std::string vec_operand(const std::string& text, DType d) const {
    if (is_vector(text)) return text;
    if (d == DType::Bool) return "coil_vmask<" + vec() + ">(" + text + ")";
    return vec() + "(" + text + ")";
  }
  std::string vec_operand(Value a) const { return vec_operand(*lookup(a), a.dtype()); }

  // The step of idx between consecutive lanes, when it is the same for every lane.
  std::optional<Expr> lane_step(const Expr& idx) const {
    sym::ExprMap next{{vec_->sym, vec_->sym + 1}};
    Expr step = sym::simplify(sym::substitute(idx, next) - idx, env_);
    if (mentions_loop_var(step)) return std::nullopt;
    return step;
  }

  // A vector of buf's elements at idx, one per lane: one load where idx is contiguous along the
  // loop, else lane by lane.
  std::string lanes_read(const std::string& buf, const Expr& idx, DType d) {
    auto tile = tiles_.find(buf + "@" + sym::to_cpp(sym::simplify(idx, env_), env_));
    if (tile != tiles_.end()) {
      return vec() + "::loadu(" + tile_names_.at(tile->first) + " + (" + tile->second + "), " +
             vec_->count + ")";
    }
    std::string at = index_text(buf, idx);
    auto step = lane_step(idx);
    if (step && step->as_int() == 1 && is_half(d)) {
      return "coil_vload_half<" + c10_half(d) + ">(" + ptr_.at(buf) + " + (" + at + "), " +
             vec_->count + ")";
    }
    if (step && step->as_int() == 1) {
      return vec() + "::loadu(" + ptr_.at(buf) + " + (" + at + "), " + vec_->count + ")";
    }
    return "coil_vlanes<" + vec() + ">([&](int64_t " + vec_->var + ") { return " + ptr_.at(buf) +
           "[" + at + "]; }, " + vec_->var + ", " + vec_->count + ")";
  }

  // Tiled kernels (Kernel::tile): each read contiguous along the tile's outer loop xa rather than
  // its vector loop xb is transposed, a tile at a time, into a local buffer (at::vec's
  // transpose_mxn: 16x16 blocks in registers), so that both the read of the input and the vector
  // loop's read of the tile are contiguous. The buffers are emitted here, before the xa loop.
  void transposed_tiles(const std::string& size_a, const std::string& size_b) {
    size_t nx = k_.xsizes.size();
    Expr xa = Expr::symbol("x" + std::to_string(nx - 2));
    Expr xb = Expr::symbol("x" + std::to_string(nx - 1));
    std::string t = std::to_string(k_.tile);
    for (const sched::Member& m : k_.members) {
      for (const Value& v : ir::topo_order({kernel_body(m)})) {
        if (v.op() != Op::Load || v->masked || ir::has_indirect(v->index)) continue;
        if (!vec_type(v.dtype()) || available_.count(v->buffer)) continue;  // f32/f64 tiles
        std::string key = v->buffer + "@" + sym::to_cpp(sym::simplify(v->index, env_), env_);
        if (tiles_.count(key)) continue;
        auto step = [&](const Expr& x) {
          Expr d = sym::simplify(sym::substitute(v->index, {{x, x + 1}}) - v->index, env_);
          for (const Expr& s : sym::free_symbols(d)) {
            if (s == xa || s == xb) return std::optional<Expr>();
          }
          return std::optional<Expr>(d);
        };
        auto sa = step(xa), sb = step(xb);
        // Contiguous along xa, varying along xb but not contiguously.
        if (!sa || !sb || sa->as_int() != 1 || sb->as_int() == 1 || sb->as_int() == 0) continue;
        std::string name = "tile" + std::to_string(tiles_.size());
        Expr origin =
            sym::substitute(v->index, {{xa, Expr::symbol("xt0")}, {xb, Expr::symbol("xt1")}});
        std::string ty = ctype(v.dtype());
        line("alignas(64) " + ty + " " + name + "[" + t + " * " + t + "];  // " + v->buffer +
             "'s tile, transposed");
        line("at::vec::transpose_mxn<" + ty + ">(" + ptr_.at(v->buffer) + " + (" +
             index_text(v->buffer, origin) + "), " + sym::to_cpp(*sb, env_) + ", " + name + ", " +
             t + ", std::min<int64_t>(" + t + ", " + size_b + " - xt1), std::min<int64_t>(" + t +
             ", " + size_a + " - xt0));");
        tiles_[key] =
            t + "*(x" + std::to_string(nx - 2) + " - xt0) + x" + std::to_string(nx - 1) + " - xt1";
        tile_names_[key] = name;
      }
    }
  }

  void vector_value(Value v) {
    DType d = v.dtype();
    std::string text;
    switch (v.op()) {
      case Op::Load: {
        // An indirect index the same in every lane (an embedding row) is checked once, scalar.
        for (const Value& a : ir::indirect_operands(v)) {
          if (is_vector(*lookup(a))) throw NoVectorForm{"an indirect index varies"};
        }
        lane_type(d);
        if (d == DType::Bool) throw NoVectorForm{"a bool load varies"};
        text = lanes_read(v->buffer, checked_index(v), d);
        if (v->masked) {
          const std::string& mask = *lookup(ir::load_mask(v));
          if (is_vector(mask)) throw NoVectorForm{"a masked load's mask varies"};
          text = "(" + mask + " ? " + text + " : " + vec() + "(0))";
        }
        break;
      }
      case Op::IndexExpr:
        throw NoVectorForm{"an index value varies"};
      case Op::Guard:
        for (const Value& a : ir::indirect_operands(v)) {
          if (is_vector(*lookup(a))) throw NoVectorForm{"an indirect index varies"};
        }
        checked_index(v);
        memo_.back()[v.get()] = *lookup(v->args[0]);
        return;
      case Op::Cast: {
        DType from = v->args[0].dtype();
        lane_type(from);
        lane_type(d);
        if (from == d) {
          memo_.back()[v.get()] = *lookup(v->args[0]);
          return;
        }
        if (from == DType::Bool) {
          text = "(" + vec_operand(v->args[0]) + " & " + vec() + "(1))";  // true lanes -> 1
        } else if (d == DType::Bool) {
          text = "(" + vec_operand(v->args[0]) + " != " + vec() + "(0))";
        } else if (is_half(d)) {  // float32 (or the other 16-bit type) rounded to d
          text = "coil_vround<" + c10_half(d) + ">(" + vec_operand(v->args[0]) + ")";
        } else if (is_half(from) && d == DType::Float32) {  // exact: the lanes hold floats
          memo_.back()[v.get()] = *lookup(v->args[0]);
          return;
        } else {
          throw NoVectorForm{"a cast between float types varies"};
        }
        break;
      }
      case Op::Where: {
        lane_type(d);
        std::string t = vec_operand(v->args[1]), f = vec_operand(v->args[2]);
        const std::string& c = *lookup(v->args[0]);
        text = is_vector(c) ? vec() + "::blendv(" + f + ", " + t + ", " + c + ")"
                            : "(" + c + " ? " + t + " : " + f + ")";
        break;
      }
      default: {
        bool logical =
            v.op() == Op::LogicalAnd || v.op() == Op::LogicalOr || v.op() == Op::LogicalXor;
        for (const Value& a : v->args) {
          lane_type(a.dtype());
          if ((a.dtype() == DType::Bool) != logical) {
            throw NoVectorForm{std::string(ir::op_name(v.op())) + " of bool values varies"};
          }
        }
        lane_type(d);
        std::optional<std::string> t;
        if (v->args.size() == 1) t = vec_unary_text(v.op(), vec_operand(v->args[0]), vec());
        if (v->args.size() == 2) {
          t = vec_binary_text(v.op(), vec_operand(v->args[0]), vec_operand(v->args[1]), vec());
        }
        if (!t) throw NoVectorForm{std::string(ir::op_name(v.op())) + " has no vector form"};
        text = *t;
        // An op computed in a 16-bit type: its float result rounded, as the scalar form's is.
        if (is_half(d)) text = "coil_vround<" + c10_half(d) + ">(" + text + ")";
      }
    }
    std::string name = "tmp" + std::to_string(next_tmp_++);
    line("auto " + name + " = " + text + ";");
    memo_.back()[v.get()] = name;
    vec_names_.insert(name);
  }

  void vector_store(const ir::Buffer& b, const Expr& idx, const std::string& val) {
    DType d = b.layout.dtype;
    lane_type(d);
    if (d == DType::Bool) throw NoVectorForm{"a bool store varies"};
    if (!mentions_loop_var(idx)) throw NoVectorForm{"a store's index is the same in every lane"};
    std::string v = vec_operand(val, d);
    std::string at = index_text(b.name, idx);
    auto step = lane_step(idx);
    if (step && step->as_int() == 1) {
      if (is_half(d)) {
        line("coil_vstore_half<" + c10_half(d) + ">(" + v + ", " + ptr_.at(b.name) + " + (" + at +
             "), " + vec_->count + ");");
      } else {
        line(v + ".store(" + ptr_.at(b.name) + " + (" + at + "), " + vec_->count + ");");
      }
      return;
    }
    std::string lane_t = *vec_->elem == DType::Float64 ? "double" : "float";
    line("coil_vstore_lanes(" + v + ", [&](int64_t " + vec_->var + ", " + lane_t + " e) { " +
         ptr_.at(b.name) + "[" + at + "] = static_cast<" + ctype(d) + ">(e); }, " + vec_->var +
         ", " + vec_->count + ");");
  }

  // What rendering a loop changes, restored when its vector form is abandoned.
  struct Snapshot {
    std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo;
    std::map<std::string, std::string> available;
    std::set<std::string> vec_names;
    sym::RangeEnv env;
    int next_tmp, indent;
    bool aten_math;
  };
  Snapshot snapshot() const {
    return {memo_, available_, vec_names_, env_, next_tmp_, indent_, aten_math_};
  }
  void restore(const Snapshot& s) {
    memo_ = s.memo;
    available_ = s.available;
    vec_names_ = s.vec_names;
    env_ = s.env;
    next_tmp_ = s.next_tmp;
    indent_ = s.indent;
    aten_math_ = s.aten_math;
    tiles_.clear();
    tile_names_.clear();
  }

  // Renders a loop nest through render(vector) in vector form over the innermost loop `var`, or,
  // where some value has no vector form, scalar; the choice goes into the kernel's header.
  void with_vector_attempt(const std::string& var, bool allowed, const std::string& not_allowed,
                           const std::function<void(bool)>& render) {
    if (allowed) {
      Snapshot saved = snapshot();
      std::ostringstream* out = out_;
      std::ostringstream attempt;
      out_ = &attempt;
      vec_ = VecLoop{var, Expr::symbol(var), "n_" + var, std::nullopt};
      try {
        render(true);
        out_ = out;
        *out_ << attempt.str();
        vectorized_ = true;
        vec_decisions_.push_back("loop " + var + " vectorized (at::vec " + vec_last_type_ +
                                 ", a masked tail)");
        vec_.reset();
        return;
      } catch (const NoVectorForm& e) {
        out_ = out;
        vec_.reset();
        restore(saved);
        vec_decisions_.push_back("loop " + var + " scalar (omp simd): " + e.why);
      }
    } else if (!not_allowed.empty()) {
      vec_decisions_.push_back("loop " + var + " scalar (omp simd): " + not_allowed);
    }
    render(false);
  }

  // The vector loop over vec_->var in [begin, end): whole vectors, where the lane count is a
  // constant (so at::vec's masked loads, stores and blends fold to plain ones), then one masked
  // vector for the tail. The body is rendered first (its values fix the lanes' type) and emitted
  // in both.
  void vector_loop(const std::string& begin, const std::string& end, const std::string& pragma,
                   const std::function<void()>& body) {
    std::ostringstream* out = out_;
    std::ostringstream inner;
    out_ = &inner;
    indent_ += 2;
    body();
    indent_ -= 2;
    out_ = out;
    vec_last_type_ = vec();
    const std::string& var = vec_->var;
    // (An OpenMP loop's increment must be a variable or constant, not VecF::size().)
    std::string lanes = vec() + "_lanes";
    std::string whole = var + "_whole";  // where the whole vectors end
    line("{");
    ++indent_;
    line("const int64_t " + whole + " = " + begin + " + (" + end + " - " + begin + ") / " + lanes +
         " * " + lanes + ";");
    if (!pragma.empty()) line(pragma);
    line("for (int64_t " + var + " = " + begin + "; " + var + " < " + whole + "; " + var +
         " += " + lanes + ") {");
    line("  constexpr int64_t " + vec_->count + " = " + lanes + ";");
    *out_ << inner.str();
    line("}");
    line("if (" + whole + " < " + end + ") {  // the tail");
    line("  const int64_t " + var + " = " + whole + ";");
    line("  const int64_t " + vec_->count + " = " + end + " - " + whole + ";");
    *out_ << inner.str();
    line("}");
    --indent_;
    line("}");
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
    if (vec_) {
      vector_store(b, idx, val);
      return;
    }
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
    } else if (vec_ && is_vector(val)) {
      line("auto " + var + " = " + val + ";");
      vec_names_.insert(var);
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
    // Column mode keeps its lane loops scalar (omp simd over a block of x points).
    if (k_.rsizes.empty()) {  // a reduction over no dims (of a 0-d tensor)
      render_reduction_loops(stage, false);
      return;
    }
    std::string r = "r" + std::to_string(k_.rsizes.size() - 1);
    auto trip = k_.rsizes.back().as_int();
    bool allowed = vectorize_ && !column() && (!trip || *trip >= min_trip_);
    // (Nothing is noted where vectorization is off or column mode keeps its own lane loops.)
    std::string why = column() || !vectorize_ ? "" : "too few iterations";
    with_vector_attempt(r, allowed, why,
                        [&](bool vector) { render_reduction_loops(stage, vector); });
  }

  // The r loops of a stage with their accumulators (vectors of them when `vector`: the innermost
  // r loop runs in vector form), and the results they leave for each x point.
  void render_reduction_loops(const sched::Stage& stage, bool vector) {
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
      all_sums &= *b.reduction == ir::ReductionType::Sum && graph::is_floating(acc);
      if (vector) {
        lane_type(acc);
        if (acc == DType::Bool || !vec_combine_text(*b.reduction, "a", "b")) {
          throw NoVectorForm{std::string(ir::reduction_name(*b.reduction)) + " reduction"};
        }
        line(vec() + " vacc_" + b.name + "(" + init + ");");
        continue;
      }
      line(ctype(acc) + " acc_" + b.name + block + (column() ? ";" : " = " + init + ";"));
      if (is_arg_reduction(b)) line("int64_t acci_" + b.name + block + (column() ? ";" : " = 0;"));
      if (column()) {
        line("for (int64_t xi = 0; xi < xn; ++xi) acc_" + b.name + "[xi] = " + init + ";");
        if (is_arg_reduction(b))
          line("for (int64_t xi = 0; xi < xn; ++xi) acci_" + b.name + "[xi] = 0;");
      }
    }
    std::string sum_list;
    for (const auto* m : reductions) {
      sum_list += (sum_list.empty() ? "" : ", ") + std::string(vector ? "vacc_" : "acc_") +
                  prog_.buffers[m->buffer].name;
    }
    std::string simd_clauses = simd_reduction_clauses(reductions);
    // A kernel reducing everything to one value (no x loops) splits its sums across threads;
    // otherwise the x loops carry the parallelism.
    Expr rwork = 1;
    for (const Expr& e : k_.rsizes) rwork = rwork * e;
    bool split_sums = k_.xsizes.empty() && all_sums && !reductions.empty() &&
                      k_.stages.size() == 1 &&
                      (!rwork.as_int() || *rwork.as_int() >= kParallelMinElements);
    size_t nr = k_.rsizes.size();
    for (size_t j = 0; j + (vector ? 1 : 0) < nr; ++j) {
      std::string r = "r" + std::to_string(j);
      bool innermost = j + 1 == nr && !column();
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
    auto body = [&] {
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
        if (vector) {
          std::string acc = "vacc_" + b.name;
          std::string combined =
              *vec_combine_text(*b.reduction, acc, vec_operand(val, b.body.dtype()));
          // Lanes past the end of the row keep the accumulator.
          line(acc + " = " + vec() + "::set(" + acc + ", " + combined + ", " + vec_->count + ");");
          continue;
        }
        accumulate(m, val);
      }
      available_ = saved_available;
      close_lanes();
      memo_.pop_back();
    };
    if (vector) {
      std::string pragma =
          nr == 1 && split_sums ? "#pragma omp parallel for reduction(+:" + sum_list + ")" : "";
      vector_loop("0", sym::to_cpp(k_.rsizes.back(), env_), pragma, body);
      for (size_t j = 0; j + 1 < nr; ++j) {
        --indent_;
        line("}");
      }
      // Each accumulator's lanes, combined.
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        std::string t = ctype(b.body.dtype());
        line(t + " acc_" + b.name + " = at::vec::vec_reduce_all<" + t + ">([](const " + vec() +
             "& a, const " + vec() + "& b) { return " + *vec_combine_text(*b.reduction, "a", "b") +
             "; }, vacc_" + b.name + ");");
      }
      vec_.reset();
    } else {
      body();
      for (size_t j = 0; j < nr; ++j) {
        --indent_;
        line("}");
      }
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

  // One step of a scalar reduction: the accumulator takes the member's value `val`.
  void accumulate(const sched::Member& m, const std::string& val) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
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
          pos = pos * b.reduction_ranges[j] + m.var_map.at(ir::reduction_var(static_cast<int>(j)));
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
    std::string inner_begin = "0", inner_end = nx ? sym::to_cpp(k_.xsizes.back(), env_) : "";
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
      inner_begin = "xt1";
      inner_end = "std::min<int64_t>(xt1 + " + t + ", " + size(nx - 1) + ")";
      headers.push_back(loop_header(b, inner_begin, inner_end));
    } else {
      for (size_t i = 0; i < nx; ++i)
        headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
      parallel_loops = pointwise ? (nx > 1 ? nx - 1 : 1) : nx;
    }
    auto open_loop = [&](size_t i) {
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
    };
    // A pointwise kernel's innermost loop is rendered with its body, in vector form if it can be.
    bool vector_inner = pointwise && simd && nx > 0;
    // Tiled kernels: the attempt covers both loops of a tile (its transposed reads are copied
    // into registers-transposed tiles before them).
    size_t inner_loops = vector_inner ? (tiled ? 2 : 1) : 0;
    size_t outer = headers.size() - inner_loops;
    for (size_t i = 0; i < outer; ++i) open_loop(i);
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
    auto body = [&] {
      memo_.emplace_back();
      for (const sched::Stage& stage : k_.stages) render_stage(stage);
      memo_.pop_back();
    };
    if (vector_inner) {
      size_t i = headers.size() - 1;
      std::optional<int64_t> trip =
          tiled ? std::optional<int64_t>(k_.tile) : k_.xsizes.back().as_int();
      bool allowed = vectorize_ && (!trip || *trip >= min_trip_);
      std::string why = !vectorize_ ? "" : "too few iterations";
      with_vector_attempt("x" + std::to_string(nx - 1), allowed, why, [&](bool vector) {
        if (tiled && vector) {
          transposed_tiles(size(nx - 2), size(nx - 1));
          open_loop(i - 1);
        } else if (tiled) {
          open_loop(i - 1);
        }
        if (vector) {
          std::string pragma = i == 0 && parallel ? "#pragma omp parallel for" : "";
          vector_loop(inner_begin, inner_end, pragma, body);
        } else {
          open_loop(i);
          body();
          --indent_;
          line("}");
        }
        if (tiled) {
          --indent_;
          line("}");
        }
        tiles_.clear();
        tile_names_.clear();
      });
    } else {
      body();
    }
    for (size_t i = 0; i < outer; ++i) {
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
  // Vector form (cpp_vec.h): allowed at all, the loop being rendered in it, the variables
  // holding vectors, and what was decided for each innermost loop.
  bool vectorize_;
  int64_t min_trip_;  // innermost loops shorter than this stay scalar
  std::optional<VecLoop> vec_;
  std::set<std::string> vec_names_;
  std::string vec_last_type_;
  std::vector<std::string> vec_decisions_;
  bool vectorized_ = false;
  // Transposed tiles of the tile being rendered: read (buffer@index) -> index into the tile, and
  // the tile's name.
  std::map<std::string, std::string> tiles_, tile_names_;
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
                               const sched::Kernel& k, const std::string& name,
                               const std::string& vectorize) {
  if (vectorize != "on" && vectorize != "off" && vectorize != "auto") {
    throw std::invalid_argument(
        "cpp codegen: vectorize must be \"on\", \"off\" or \"auto\", not \"" + vectorize + "\"");
  }
  bool vector = vectorize == "on";
  if (vectorize == "auto") {
    Expr work = 1;
    for (const Expr& e : k.xsizes) work = work * e;
    for (const Expr& e : k.rsizes) work = work * e;
    vector = !work.as_int() || *work.as_int() >= kVectorMinWork;
  }
  // "on" vectorizes short loops too (all tail): how tests and the fuzzer reach the vector forms
  // with small tensors.
  Emitter e(prog, s, k, vector, vectorize == "on" ? 1 : kMinVectorTrip);
  return e.render(name);
}

}  // namespace coil::codegen
