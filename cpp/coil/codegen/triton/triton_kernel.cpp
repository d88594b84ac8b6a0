#include "coil/codegen/triton/triton_kernel.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/provenance.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "coil/codegen/triton/triton_index_printer.h"
#include "coil/codegen/triton/triton_launch.h"
#include "coil/codegen/triton/triton_ops.h"

namespace coil::codegen {

using graph::DType;
using ir::Op;
using ir::Value;
using sym::Expr;

namespace {

// Index arithmetic is int32 when every index, plus a block's overrun, stays below this.
constexpr int64_t kInt32Limit = int64_t{1} << 31;
// Masked lanes of an argmax/argmin carry this index so that a real element always wins a tie.
constexpr const char* kNoIndex = "2147483647";

// A value spans block axis 0 (rows: x of a reduction, y of a tiled kernel), axis 1 (columns: r
// of a reduction, x of a tiled kernel), both or none.
enum Dims : int { kNone = 0, kRows = 1, kCols = 2 };

// ---- the renderer ----

// One axis of a kernel's block: its variables (named prefix0, prefix1, ...), their sizes, and the
// flat index over them (prefix + "index").
struct Axis {
  std::string prefix;
  std::vector<Expr> vars;
  std::vector<Expr> sizes;
  Expr flat;
};

class Emitter {
 public:
  Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k)
      : prog_(prog), s_(s), k_(k), printer_(env_), plan_(plan_launch(k)) {
    reduction_ = is_reduction_kernel(k);
    if (plan_.tiled) {
      // Rows: the loops before the last, renamed y0..; columns: the last loop, renamed x0.
      size_t n = k.xsizes.size();
      sym::ExprMap rename;
      for (size_t i = 0; i + 1 < n; ++i) {
        Expr y = Expr::symbol("y" + std::to_string(i));
        rename[sched::xvar(static_cast<int>(i))] = y;
        rows_.vars.push_back(y);
        rows_.sizes.push_back(k.xsizes[i]);
      }
      rename[sched::xvar(static_cast<int>(n - 1))] = sched::xvar(0);
      cols_.vars.push_back(sched::xvar(0));
      cols_.sizes.push_back(k.xsizes.back());
      for (sched::Member& m : k_.members) {
        for (auto& [var, e] : m.var_map) e = sym::substitute(e, rename);
      }
      rows_.prefix = "y";
      cols_.prefix = "x";
      env_.add_index_var(Expr::symbol("yindex"), plan_.launch.ynumel);
      for (size_t i = 0; i + 1 < n; ++i) env_.add_index_var(rows_.vars[i], rows_.sizes[i]);
      env_.add_index_var(cols_.vars[0], cols_.sizes[0]);
      env_.add_index_var(Expr::symbol("xindex"), plan_.launch.xnumel);
    } else {
      env_ = k.range_env();
      rows_.prefix = "x";
      cols_.prefix = "r";
      for (size_t i = 0; i < k.xsizes.size(); ++i)
        rows_.vars.push_back(sched::xvar(static_cast<int>(i)));
      for (size_t j = 0; j < k.rsizes.size(); ++j)
        cols_.vars.push_back(sched::rvar(static_cast<int>(j)));
      rows_.sizes = k.xsizes;
      cols_.sizes = k.rsizes;
      env_.add_index_var(Expr::symbol("xindex"), plan_.launch.xnumel);
      env_.add_index_var(Expr::symbol("rindex"), plan_.launch.rnumel);
    }
    rows_.flat = Expr::symbol(rows_.prefix + "index");
    cols_.flat = Expr::symbol(cols_.prefix + "index");
    two_d_ = reduction_ || plan_.tiled;
    int64_ = needs_int64();
    for (const sched::Member& m : k.members)
      interpreted_ |= prog.buffers[m.buffer].layout.device == "cpu";
  }

  KernelSource render(const std::string& name) {
    collect_args();
    std::ostringstream body;
    out_ = &body;
    indent_ = 1;
    memo_.emplace_back();
    for (size_t i = 0; i < k_.stages.size(); ++i) render_stage(k_.stages[i], static_cast<int>(i));
    memo_.pop_back();

    std::ostringstream code;
    code << header_comment(name);
    code << "@triton.jit\n";
    code << "def " << name << "(";
    for (const KernelArg& a : args_) code << ptr_.at(a.buffer) << ", ";
    // Size symbols the body reads (dynamic shapes), after the pointers.
    std::string pro = prologue();
    size_args_ = size_args_used(prog_, body.str() + pro);
    for (const std::string& s : size_args_) code << s << ", ";
    if (plan_.tiled) {
      code << "ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):\n";
    } else {
      code << "xnumel, ";
      // A static rnumel is a compile-time constant: the r loop's bounds are known to the
      // compiler. A symbolic one is an argument like xnumel, so one build serves every length
      // (under the interpreter, which builds nothing, it stays constexpr: its range() needs a
      // Python int).
      bool constant_r = plan_.launch.rnumel.is_int() || interpreted_;
      if (reduction_) code << (constant_r ? "rnumel: tl.constexpr, " : "rnumel, ");
      code << "XBLOCK: tl.constexpr" << (reduction_ ? ", RBLOCK: tl.constexpr" : "") << "):\n";
    }
    code << pro;
    code << body.str();

    KernelSource src;
    src.name = name;
    src.code = code.str();
    src.args = args_;
    src.size_args = size_args_;
    src.launch = plan_.launch;
    std::set<std::string> origins;
    for (const sched::Member& m : k_.members) {
      origins.insert(prog_.buffers[m.buffer].origins.begin(),
                     prog_.buffers[m.buffer].origins.end());
    }
    src.origins.assign(origins.begin(), origins.end());
    return src;
  }

 private:
  struct Available {
    std::string var;
    int dims = kNone;
    Expr index;          // where the producer wrote it (kernel variables)
    bool check = false;  // a reader must load at exactly that index to use the register value
  };

  // ---- arguments (as in the C++ renderer: in_ptrN read, out_ptrN written, in-place shares) ----

  bool stored(const std::string& buf) const {
    auto it = s_.buffers.find(buf);
    return it == s_.buffers.end() || it->second.stored;
  }

  const sched::Member* member_of(const std::string& buf) const {
    for (const sched::Member& m : k_.members) {
      if (prog_.buffers[m.buffer].name == buf) return &m;
    }
    return nullptr;
  }

  void collect_args() {
    KernelArgPlan plan = plan_kernel_args(prog_, s_, k_);
    args_ = std::move(plan.args);
    ptr_ = std::move(plan.pointer);
  }

  // ---- index arithmetic ----

  // Every index the kernel computes, in kernel variables.
  std::vector<Expr> all_indices() const {
    std::vector<Expr> out;
    for (const sched::Member& m : k_.members) {
      const ir::Buffer& b = prog_.buffers[m.buffer];
      out.push_back(sym::substitute(b.write_index(), m.var_map));
      std::vector<Value> roots = {kernel_body(m)};
      if (b.is_scatter()) roots.push_back(ir::substitute_indices(b.target, m.var_map));
      for (const Value& v : ir::topo_order(roots)) {
        if (v.op() == Op::Load || v.op() == Op::IndexExpr) out.push_back(v->index);
      }
    }
    return out;
  }

  bool is_size_symbol(const Expr& v) const {
    for (const graph::SizeSymbol& s : prog_.size_symbols) {
      if (s.name == v.name()) return true;
    }
    return false;
  }

  bool needs_int64() {
    int64_t xmax = 0, rmax = 0;
    for (const LaunchConfig& c : plan_.launch.configs) {
      xmax = std::max(xmax, c.xblock);
      rmax = std::max({rmax, c.rblock, c.yblock});
    }
    // Symbolic sizes: their upper bounds (unbounded symbols give int64 arithmetic, correct for
    // every size the symbols may take).
    auto reaches = [&](const Expr& n, int64_t block) {
      sym::Range r = sym::bounds(n, env_);
      return r.hi == sym::Range::kPosInf || r.hi + block >= kInt32Limit;
    };
    if (reaches(plan_.launch.xnumel, xmax)) return true;
    if (reaches(plan_.launch.rnumel, rmax)) return true;
    if (reaches(plan_.launch.ynumel, rmax)) return true;
    for (const Expr& e : all_indices()) {
      // An indirect index lies in [0, size) where it is used (coil_index checks it).
      for (const Expr& s : ir::indirect_symbols(e)) env_.add_index_var(s, ir::indirect_of(s)->size);
      sym::Range r = sym::bounds(sym::simplify(e, env_), env_);
      if (r.lo <= -kInt32Limit || r.hi >= kInt32Limit - xmax - rmax) return true;
    }
    return false;
  }

  // Trailing variables whose coefficients are those of a contiguous walk (c, c*s[n-1], ...) merge
  // into one term over the flat index: 16*x0 + x1 over sizes [8, 16] is xindex.
  Expr merge_contiguous(const Expr& e, const std::vector<Expr>& vars,
                        const std::vector<Expr>& sizes, const Expr& flat) const {
    size_t n = vars.size();
    if (n < 2) return e;
    auto aff = sym::as_affine(e, vars);
    if (!aff) return e;
    Expr c = aff->coeffs[n - 1];
    if (c == Expr(0)) return e;
    Expr stride = c;
    size_t k = n;
    for (size_t i = n; i-- > 0;) {
      if (sizes[i] == Expr(1)) {
        k = i;
        continue;
      }
      if (aff->coeffs[i] != stride) break;
      k = i;
      stride = stride * sizes[i];
    }
    if (n - k < 2) return e;
    Expr z = k == 0 ? flat : sym::mod(flat, product(sizes, k));
    Expr out = aff->constant + c * z;
    for (size_t i = 0; i < k; ++i) out = out + aff->coeffs[i] * vars[i];
    return out;
  }

  int dims_of(const Expr& e) const {
    int d = kNone;
    for (const Expr& s : sym::free_symbols(e)) {
      const std::string& n = s.name();
      auto checked = checked_dims_.find(n);
      if (checked != checked_dims_.end()) {
        d |= checked->second;
        continue;
      }
      if (n[0] == rows_.prefix[0]) d |= kRows;
      if (n[0] == cols_.prefix[0]) d |= kCols;
    }
    return d;
  }

  // An index in kernel variables, printed in Triton syntax; notes which x/r variables it uses.
  std::string index_text(const Expr& e, int* dims = nullptr) {
    Expr s = sym::simplify(e, env_);
    s = merge_contiguous(s, rows_.vars, rows_.sizes, rows_.flat);
    s = merge_contiguous(s, cols_.vars, cols_.sizes, cols_.flat);
    for (const Expr& v : sym::free_symbols(s)) {
      if (checked_dims_.count(v.name())) continue;
      if (is_size_symbol(v)) continue;  // a kernel argument (size_args_)
      if (v.name()[0] != rows_.prefix[0] && v.name()[0] != cols_.prefix[0]) {
        throw std::runtime_error("triton codegen: symbolic size " + v.name() +
                                 " is not supported yet");
      }
      used_.insert(v.name());
    }
    if (dims) *dims = dims_of(s);
    return printer_.print(s);
  }

  // x{i} (or r{i}) recovered from the flat index.
  std::string var_definition(size_t i, const std::vector<Expr>& sizes, const Expr& flat) {
    Expr inner = product(sizes, i + 1);
    Expr e = sym::floordiv(flat, inner);
    if (i > 0) e = sym::mod(e, sizes[i]);
    return printer_.print(e);
  }

  std::string block(const Axis& a) const {
    std::string b = a.prefix;
    for (char& c : b) c = static_cast<char>(std::toupper(c));
    return b + "BLOCK";
  }

  std::string shape(int dims) const {
    if (!two_d_) return "[XBLOCK]";
    if (dims == (kRows | kCols)) return "[" + block(rows_) + ", " + block(cols_) + "]";
    if (dims == kCols) return "[1, " + block(cols_) + "]";
    return "[" + block(rows_) + ", 1]";
  }

  bool masked(const Axis& a) const {
    if (a.prefix == "y") return plan_.ymask;
    if (a.prefix == "r") return plan_.rmask;
    return plan_.xmask;
  }

  // The block masks that apply to something spanning `dims`.
  std::string block_mask(int dims) const {
    std::string m;
    if ((dims & kRows) && masked(rows_)) m = rows_.prefix + "mask";
    if ((dims & kCols) && two_d_ && masked(cols_))
      m += (m.empty() ? "" : " & ") + cols_.prefix + "mask";
    return m;
  }

  // ---- values ----

  void line(const std::string& text) { *out_ << std::string(indent_ * 4, ' ') << text << "\n"; }

  Value kernel_body(const sched::Member& m) const {
    return ir::substitute_indices(prog_.buffers[m.buffer].body, m.var_map);
  }

  const std::string* lookup(Value v) const {
    for (auto it = memo_.rbegin(); it != memo_.rend(); ++it) {
      auto f = it->find(v.get());
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  int dims(Value v) const {
    auto it = dims_.find(v.get());
    return it == dims_.end() ? kNone : it->second;
  }

  // An operand's text. A constant is a bare literal where it meets a tensor in an infix operator
  // or tl.where/tl.maximum (Triton gives it that tensor's type); elsewhere a typed tensor.
  std::string operand(Value v, bool literal_ok) const {
    if (v.op() == Op::Constant)
      return literal_ok ? triton::literal_text(v) : triton::constant_tensor_text(v);
    return *lookup(v);
  }

  static bool literal_friendly(Op op, DType d) {
    switch (op) {
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Lt:
      case Op::Le:
      case Op::Gt:
      case Op::Ge:
      case Op::Eq:
      case Op::Ne:
      case Op::Maximum:
      case Op::Minimum:
      case Op::BitwiseAnd:
      case Op::BitwiseOr:
      case Op::BitwiseXor:
      case Op::LogicalAnd:
      case Op::LogicalOr:
      case Op::LogicalXor:
      case Op::Fmod:
        return true;
      case Op::TruncDiv:
        return !graph::is_floating(d);
      default:
        return false;
    }
  }

  // ---- indirect indices (see ir/scalar.h) ----

  // v's index with each indirect symbol replaced by a temporary holding its checked position
  // (coil_index: wrapped, reported where out of bounds and the access happens, 0 there).
  Expr checked_index(Value v) {
    std::vector<Expr> syms = ir::indirect_symbols(v->index);
    if (syms.empty()) return v->index;
    std::vector<Value> raw = ir::indirect_operands(v);
    sym::ExprMap repl;
    for (size_t i = 0; i < syms.size(); ++i) {
      const ir::Indirect* b = ir::indirect_of(syms[i]);
      int d = dims(raw[i]);
      int mdims = v->masked ? dims(v->args[0]) : kNone;
      std::string active = block_mask(d | mdims);
      if (v->masked) active = operand(v->args[0], false) + (active.empty() ? "" : " & " + active);
      std::string name = "tmp" + std::to_string(next_tmp_++);
      line(name + " = coil_index(" + operand(raw[i], false) + ", " + printer_.print(b->size) +
           ", " + (b->wrap ? "True" : "False") + ", " + (active.empty() ? "True" : active) + ", " +
           kIndexErrorArg + ")");
      Expr t = Expr::symbol(name);
      env_.add_index_var(t, b->size);
      checked_dims_[name] = d;
      repl[syms[i]] = t;
    }
    return sym::substitute(v->index, repl);
  }

  // A scatter combines its value into the element its target names; updates of one element from
  // different lanes combine atomically.
  void scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& var,
                     int value_dims) {
    Value target = ir::substitute_indices(b.target, m.var_map);
    std::string pos = value(target);
    int d = ir::is_constant(target) ? kNone : dims(target);
    if (d == kNone) value_dims |= kRows;
    std::string ptr = ptr_.at(b.name) + " + (" + pos + ")";
    if (b.layout.offset != Expr(0)) ptr += " - " + printer_.print(b.layout.offset);
    if ((value_dims & ~d) != 0) {
      d |= value_dims;
      ptr = "tl.broadcast_to(" + ptr + ", " + shape(d) + ")";
    }
    // Atomics take one value per pointer, in a tensor of its own (Triton's interpreter misreads
    // a broadcast view there).
    std::string value =
        var + " + tl.zeros(" + shape(d) + ", " + triton::dtype_text(b.layout.dtype) + ")";
    std::string mask = block_mask(d);
    // Relaxed: the updates need no ordering with any other memory access of the kernel.
    std::string tail = (mask.empty() ? "" : ", mask=" + mask) + ", sem=\"relaxed\")";
    std::string op = triton::scatter_op_text(b.scatter_mode, b.layout.dtype);
    if (op.empty()) {
      throw std::runtime_error(std::string("triton codegen: scatter ") +
                               ir::scatter_mode_name(b.scatter_mode) + " of " +
                               graph::dtype_name(b.layout.dtype) + " has no atomic form");
    }
    if (b.scatter_mode == ir::ScatterMode::Store) {
      line("tl.store(" + ptr + ", " + var + (mask.empty() ? ")" : ", " + mask + ")"));
      return;
    }
    line(op + "(" + ptr + ", " + value + tail);
  }

  std::string load_text(Value v, int* out_dims) {
    int idims = kNone;
    std::string idx = index_text(checked_index(v) - prog_.buffer(v->buffer).layout.offset, &idims);
    std::string ptr = ptr_.at(v->buffer) + " + (" + idx + ")";
    int mdims = v->masked ? dims(v->args[0]) : kNone;
    int all = idims | mdims;
    std::string mask = block_mask(all);
    if (v->masked) mask = operand(v->args[0], false) + (mask.empty() ? "" : " & " + mask);
    // A mask spanning more than the index: the pointers are broadcast to the mask's shape.
    if ((mdims & ~idims) != 0) ptr = "tl.broadcast_to(" + ptr + ", " + shape(all) + ")";
    *out_dims = all;
    if (mask.empty()) return "tl.load(" + ptr + ")";
    std::string other = graph::is_floating(v.dtype()) ? "0.0" : "0";
    return "tl.load(" + ptr + ", " + mask + ", other=" + other + ")";
  }

  // Emits the lines computing root; returns its text (a tmp name, or a typed constant).
  std::string value(Value root) {
    std::vector<Value> order = ir::topo_order({root});
    mark_exact_divisions(order);
    for (const Value& v : order) {
      if (v.op() == Op::Constant || lookup(v)) continue;
      std::string text;
      int d = kNone;
      switch (v.op()) {
        case Op::Guard:
          checked_index(v);
          memo_.back()[v.get()] = operand(v->args[0], false);
          dims_[v.get()] = dims(v->args[0]);
          continue;
        case Op::IndexExpr: {
          std::string e = index_text(checked_index(v), &d);
          if (d == kNone && sym::free_symbols(sym::simplify(v->index, env_)).empty()) {
            text = "tl.full([1], " + e + ", " + triton::dtype_text(v.dtype()) + ")";
          } else {
            text = "(" + e + ").to(" + triton::dtype_text(v.dtype()) + ")";
          }
          break;
        }
        case Op::Load: {
          auto avail = available_.find(v->buffer);
          if (avail != available_.end() && !ir::has_indirect(v->index) &&
              (!avail->second.check || sym::simplify(v->index, env_) == avail->second.index)) {
            memo_.back()[v.get()] = avail->second.var;
            dims_[v.get()] = avail->second.dims;
            continue;
          }
          // A value this kernel stored in an earlier stage: other threads of the block wrote it.
          if (member_of(v->buffer)) stage_needs_barrier_ = true;
          text = load_text(v, &d);
          break;
        }
        case Op::Cast:
          text = triton::cast_text(operand(v->args[0], false), v->args[0].dtype(), v.dtype(),
                                   interpreted_);
          d = dims(v->args[0]);
          break;
        case Op::Where: {
          bool a_const = ir::is_constant(v->args[1]), b_const = ir::is_constant(v->args[2]);
          text = "tl.where(" + operand(v->args[0], false) + ", " + operand(v->args[1], !b_const) +
                 ", " + operand(v->args[2], !a_const) + ")";
          d = dims(v->args[0]) | dims(v->args[1]) | dims(v->args[2]);
          break;
        }
        default:
          if (v->args.size() == 1) {
            text = triton::unary_text(v.op(), operand(v->args[0], false), v->args[0].dtype());
            d = dims(v->args[0]);
          } else if (v.op() == Op::Div && exact_divs_.count(v.get())) {
            text = "tl.math.div_rn(" + operand(v->args[0], false) + ", " +
                   operand(v->args[1], false) + ")";
            d = dims(v->args[0]) | dims(v->args[1]);
          } else {
            Value a = v->args[0], b = v->args[1];
            bool ok = literal_friendly(v.op(), a.dtype());
            text = triton::binary_text(v.op(), operand(a, ok && !ir::is_constant(b)),
                                       operand(b, ok && !ir::is_constant(a)), a.dtype());
            d = dims(a) | dims(b);
          }
      }
      std::string name = "tmp" + std::to_string(next_tmp_++);
      line(name + " = " + text);
      memo_.back()[v.get()] = name;
      dims_[v.get()] = d;
    }
    if (root.op() == Op::Constant) return triton::constant_tensor_text(root);
    return *lookup(root);
  }

  // Triton's float32 `/` is approximate (div.full.f32, up to 2 ulp): 4.6875 / 0.9375 can come
  // out just below 5. Where a rounding op reads a quotient (through casts), one ulp changes
  // the result by a whole unit, so those divisions are rendered IEEE-exact, as eager computes
  // them; every other division keeps the fast form.
  void mark_exact_divisions(const std::vector<Value>& order) {
    for (const Value& v : order) {
      switch (v.op()) {
        case Op::Floor:
        case Op::Ceil:
        case Op::Trunc:
        case Op::Round: {
          Value q = v->args[0];
          while (q.op() == Op::Cast) q = q->args[0];
          if (q.op() == Op::Div && q.dtype() == DType::Float32) exact_divs_.insert(q.get());
          break;
        }
        default:
          break;
      }
    }
  }

  // ---- members and stages ----

  void store(const ir::Buffer& b, const sched::Member& m, const std::string& var, int value_dims) {
    if (b.is_scatter()) {
      scatter_store(b, m, var, value_dims);
      return;
    }
    if (!stored(b.name)) return;
    int d = kNone;
    Expr idx = sym::substitute(b.write_index(), m.var_map);
    std::string ptr = ptr_.at(b.name) + " + (" + index_text(idx - b.layout.offset, &d) + ")";
    // One element (a 0-d output): the value may still be a one-lane block.
    if (d == kNone) value_dims |= kRows;
    // A value spanning more than its index (a full reduction's result, one row per block lane):
    // the pointers are broadcast to the value's shape; masked lanes stay unwritten.
    if ((value_dims & ~d) != 0) {
      d |= value_dims;
      ptr = "tl.broadcast_to(" + ptr + ", " + shape(d) + ")";
    }
    std::string mask = block_mask(d);
    line("tl.store(" + ptr + ", " + var + (mask.empty() ? "" : ", " + mask) + ")");
  }

  // Binds buffer b's value to v_<name> (cast to the buffer's dtype), makes it available, stores it.
  void finish_member(const ir::Buffer& b, const sched::Member& m, const std::string& val,
                     DType val_dtype, int d, bool check) {
    std::string var = "v_" + b.name;
    std::string text = val_dtype == b.layout.dtype
                           ? val
                           : triton::cast_text(val, val_dtype, b.layout.dtype, interpreted_);
    line(var + " = " + text);
    Expr written = sym::simplify(sym::substitute(b.write_index(), m.var_map), env_);
    available_[b.name] = {var, d, written, check};
    store(b, m, var, d);
  }

  void emit_pointwise(const sched::Member& m) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    Value body = kernel_body(m);
    std::string val = value(body);
    finish_member(b, m, val, body.dtype(), ir::is_constant(body) ? kNone : dims(body), false);
  }

  static bool is_arg(ir::ReductionType t) {
    return t == ir::ReductionType::ArgMax || t == ir::ReductionType::ArgMin;
  }

  std::string full_block(const std::string& v, Value value) {
    if (dims(value) == (kRows | kCols) && value.op() != Op::Constant) return v;
    std::string name = "tmp" + std::to_string(next_tmp_++);
    line(name + " = tl.broadcast_to(" + v + ", [XBLOCK, RBLOCK])");
    return name;
  }

  // The row-major position of member m's reduction element within its own reduction ranges.
  std::string arg_position(const sched::Member& m) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    Expr pos = 0;
    for (size_t j = 0; j < b.reduction_ranges.size(); ++j) {
      pos = pos * b.reduction_ranges[j] + m.var_map.at(ir::reduction_var(static_cast<int>(j)));
    }
    int d = kNone;
    std::string text = index_text(pos, &d);
    std::string name = "tmp" + std::to_string(next_tmp_++);
    if (d == kNone) {
      line(name + " = tl.full([XBLOCK, RBLOCK], " + text + ", " + index_dtype() + ")");
    } else {
      line(name + " = tl.broadcast_to(" + text + ", [XBLOCK, RBLOCK])");
    }
    return name;
  }

  std::string index_dtype() const { return int64_ ? "tl.int64" : "tl.int32"; }

  // One reduction member inside its stage: the per-element combine (looped) or the whole-row
  // reduction (persistent).
  void emit_reduction_step(const sched::Member& m) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    Value body = kernel_body(m);
    DType t = body.dtype();
    ir::ReductionType rt = *b.reduction;
    std::string v = full_block(value(body), body);
    std::string acc = "acc_" + b.name, acci = "acci_" + b.name;
    std::string mask = plan_.rmask ? "rmask" : "";
    std::string combine =
        rt == ir::ReductionType::ArgMax ? "coil_argmax_combine" : "coil_argmin_combine";
    if (plan_.persistent) {
      std::string masked = v;
      if (!mask.empty()) {
        masked = "tmp" + std::to_string(next_tmp_++);
        line(masked + " = tl.where(" + mask + ", " + v + ", " + triton::reduction_identity(rt, t) +
             ")");
      }
      if (!is_arg(rt)) {
        pending_results_.push_back({&m, triton::reduction_final(rt, t, masked), t});
        return;
      }
      std::string pos = arg_position(m);
      if (!mask.empty()) {
        std::string p = "tmp" + std::to_string(next_tmp_++);
        line(p + " = tl.where(" + mask + ", " + pos + ", " + kNoIndex + ")");
        pos = p;
      }
      line("_, " + acci + " = tl.reduce((" + masked + ", " + pos + "), 1, " + combine + ")");
      pending_results_.push_back({&m, acci + "[:, None]", int64_ ? DType::Int64 : DType::Int32});
      return;
    }
    if (!is_arg(rt)) {
      std::string next = triton::reduction_combine(rt, t, acc, v);
      line(acc + " = " +
           (mask.empty() ? next : "tl.where(" + mask + ", " + next + ", " + acc + ")"));
      return;
    }
    std::string pos = arg_position(m);
    if (mask.empty()) {
      line(acc + ", " + acci + " = " + combine + "(" + acc + ", " + acci + ", " + v + ", " + pos +
           ")");
      return;
    }
    line(acc + "_next, " + acci + "_next = " + combine + "(" + acc + ", " + acci + ", " + v + ", " +
         pos + ")");
    line(acc + " = tl.where(" + mask + ", " + acc + "_next, " + acc + ")");
    line(acci + " = tl.where(" + mask + ", " + acci + "_next, " + acci + ")");
  }

  struct PendingResult {
    const sched::Member* member;
    std::string text;  // the [XBLOCK, 1] result
    DType dtype;
  };

  void render_stage(const sched::Stage& stage, int index) {
    stage_needs_barrier_ = false;
    if (!stage.inner) {
      std::ostringstream text;
      std::ostringstream* saved = out_;
      out_ = &text;
      for (int mi : stage.members) emit_pointwise(k_.members[mi]);
      out_ = saved;
      emit_stage_text(stage, index, text.str(), indent_);
      return;
    }
    std::vector<const sched::Member*> reductions;
    for (int mi : stage.members) {
      const sched::Member& m = k_.members[mi];
      if (prog_.buffers[m.buffer].is_reduction()) reductions.push_back(&m);
    }
    std::ostringstream text;
    std::ostringstream* saved = out_;
    out_ = &text;
    int outer_indent = indent_;
    std::set<std::string> outer_used = used_;
    if (!plan_.persistent) {
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        DType t = b.body.dtype();
        line("acc_" + b.name + " = tl.full([XBLOCK, RBLOCK], " +
             triton::reduction_identity(*b.reduction, t) + ", " + triton::dtype_text(t) + ")");
        if (is_arg(*b.reduction)) {
          line("acci_" + b.name + " = tl.full([XBLOCK, RBLOCK], " + kNoIndex + ", " +
               index_dtype() + ")");
        }
      }
      line("for roffset in range(0, rnumel, RBLOCK):");
      ++indent_;
      used_.clear();
      line("rindex = roffset + rbase");
      if (plan_.rmask) line("rmask = rindex < rnumel");
      memo_.emplace_back();
    }
    std::map<std::string, Available> saved_available = available_;
    size_t body_start = text.str().size();
    for (int mi : stage.members) {
      const sched::Member& m = k_.members[mi];
      if (prog_.buffers[m.buffer].is_reduction()) {
        emit_reduction_step(m);
      } else {
        emit_pointwise(m);
      }
    }
    std::string stage_text = text.str();
    if (!plan_.persistent) {
      memo_.pop_back();
      // r variables go right after rindex, inside the loop.
      std::string defs;
      for (size_t j = 0; j < cols_.vars.size(); ++j) {
        if (!used_.count(cols_.vars[j].name())) continue;
        defs += std::string(indent_ * 4, ' ') + cols_.vars[j].name() + " = " +
                var_definition(j, cols_.sizes, cols_.flat) + "\n";
      }
      for (const std::string& u : used_) outer_used.insert(u);
      used_ = outer_used;
      stage_text.insert(body_start, defs);
      --indent_;
      available_ = saved_available;
      // Results of the loop: one value per x point.
      out_ = &text;
      text.str("");
      for (const sched::Member* m : reductions) {
        const ir::Buffer& b = prog_.buffers[m->buffer];
        DType t = b.body.dtype();
        if (is_arg(*b.reduction)) {
          line("_, " + std::string("acci_") + b.name + " = tl.reduce((acc_" + b.name + ", acci_" +
               b.name + "), 1, " +
               (*b.reduction == ir::ReductionType::ArgMax ? "coil_argmax_combine"
                                                          : "coil_argmin_combine") +
               ")");
          pending_results_.push_back(
              {m, "acci_" + b.name + "[:, None]", int64_ ? DType::Int64 : DType::Int32});
        } else {
          pending_results_.push_back(
              {m, triton::reduction_final(*b.reduction, t, "acc_" + b.name), t});
        }
      }
      stage_text += text.str();
    } else {
      // Persistent: values of the whole row stay in registers for later stages, as long as a reader
      // loads them at the index they were written.
      for (auto& [name, a] : available_) {
        if (!saved_available.count(name)) a.check = true;
      }
    }
    text.str("");
    out_ = &text;
    for (const PendingResult& r : pending_results_) {
      const ir::Buffer& b = prog_.buffers[r.member->buffer];
      finish_member(b, *r.member, r.text, r.dtype, kRows, false);
    }
    pending_results_.clear();
    stage_text += text.str();
    out_ = saved;
    emit_stage_text(stage, index, stage_text, outer_indent);
  }

  void emit_stage_text(const sched::Stage& stage, int index, const std::string& text, int indent) {
    std::string members;
    for (int mi : stage.members) {
      const ir::Buffer& b = prog_.buffers[k_.members[mi].buffer];
      members +=
          " " + b.name +
          (b.is_reduction() ? std::string("[") + ir::reduction_name(*b.reduction) + "]" : "");
    }
    std::string pad(indent * 4, ' ');
    if (reduction_) {
      *out_ << pad << "# stage " << index << " ("
            << (stage.inner ? (plan_.persistent ? "whole row" : "loop over r") : "per x point")
            << "):" << members << "\n";
    }
    if (stage_needs_barrier_)
      *out_ << pad << "tl.debug_barrier()  # reads values stored by an earlier stage\n";
    *out_ << text;
  }

  std::string prologue() {
    std::ostringstream p;
    std::string pid = int64_ ? "tl.program_id(0).to(tl.int64)" : "tl.program_id(0)";
    if (plan_.tiled) {
      // One program per tile, row-major over the tiles (neighbouring programs share rows).
      p << "    pid = " << pid << "\n";
      p << "    xtiles = tl.cdiv(xnumel, XBLOCK)\n";
      p << "    yoffset = (pid // xtiles) * YBLOCK\n";
      p << "    xoffset = (pid % xtiles) * XBLOCK\n";
      p << "    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]\n";
      p << "    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]\n";
      if (plan_.ymask) p << "    ymask = yindex < ynumel\n";
      if (plan_.xmask) p << "    xmask = xindex < xnumel\n";
    } else {
      p << "    xoffset = " << pid << " * XBLOCK\n";
      p << "    xindex = xoffset + tl.arange(0, XBLOCK)" << (reduction_ ? "[:, None]" : "") << "\n";
      if (plan_.xmask) p << "    xmask = xindex < xnumel\n";
      std::string arange =
          std::string("tl.arange(0, RBLOCK)[None, :]") + (int64_ ? ".to(tl.int64)" : "");
      if (reduction_ && plan_.persistent) {
        p << "    rindex = " << arange << "\n";
        if (plan_.rmask) p << "    rmask = rindex < rnumel\n";
      } else if (reduction_) {
        p << "    rbase = " << arange << "\n";
      }
    }
    for (size_t i = 0; i < rows_.vars.size(); ++i) {
      if (used_.count(rows_.vars[i].name()))
        p << "    " << rows_.vars[i].name() << " = " << var_definition(i, rows_.sizes, rows_.flat)
          << "\n";
    }
    if (plan_.persistent || plan_.tiled) {
      for (size_t j = 0; j < cols_.vars.size(); ++j) {
        if (used_.count(cols_.vars[j].name()))
          p << "    " << cols_.vars[j].name() << " = " << var_definition(j, cols_.sizes, cols_.flat)
            << "\n";
      }
    }
    return p.str();
  }

  std::string header_comment(const std::string& name) const {
    std::ostringstream c;
    c << "# " << name << "\n";
    for (const std::string& l : provenance_lines(prog_, s_, k_)) c << "# " << l << "\n";
    // The scheduler's CPU loop strategies (column blocks, 2-D tiles) do not apply here.
    for (const auto& d : k_.decisions) {
      if (d.rfind("reduction strategy", 0) == 0 || d.rfind("tiling", 0) == 0) continue;
      c << "# decision: " << d << "\n";
    }
    for (const auto& d : plan_.decisions) c << "# decision: " << d << "\n";
    c << "# decision: " << (int64_ ? "int64" : "int32") << " index arithmetic"
      << (int64_ ? " (some index may reach 2^31)" : " (every index < 2^31)") << "\n";
    return c.str();
  }

  const ir::Program& prog_;
  const sched::Schedule& s_;
  sched::Kernel k_;  // a copy: tiled kernels rename their variables
  sym::RangeEnv env_;
  triton::IndexPrinter printer_;
  LaunchPlan plan_;
  bool reduction_ = false;
  bool int64_ = false;
  bool interpreted_ = false;  // CPU tensors: the kernel runs under Triton's interpreter
  // Block axis 0 (rows) and 1 (columns): x and r for reductions, y and x for tiled kernels; a
  // flat pointwise kernel has only rows (x).
  Axis rows_, cols_;
  bool two_d_ = false;
  std::ostringstream* out_ = nullptr;
  int indent_ = 1;
  int next_tmp_ = 0;
  bool stage_needs_barrier_ = false;
  std::vector<KernelArg> args_;
  std::map<std::string, std::string> ptr_;
  std::map<std::string, Available> available_;
  std::set<std::string> used_;  // x/r variables (and xindex/rindex) that printed indices mention
  std::vector<std::unordered_map<const ir::ScalarNode*, std::string>> memo_;
  std::unordered_map<const ir::ScalarNode*, int> dims_;
  std::unordered_set<const ir::ScalarNode*> exact_divs_;  // see mark_exact_divisions
  std::map<std::string, int> checked_dims_;  // checked indirect index temporary -> its dims
  std::vector<std::string> size_args_;       // size symbols the kernel takes (dynamic shapes)
  std::vector<PendingResult> pending_results_;
};

}  // namespace

std::string triton_kernel_prefix(const sched::Kernel& k) {
  if (!is_reduction_kernel(k)) return "triton_poi";
  return plan_launch(k).persistent ? "triton_per" : "triton_red";
}

KernelSource render_triton_kernel(const ir::Program& prog, const sched::Schedule& s,
                                  const sched::Kernel& k, const std::string& name) {
  Emitter e(prog, s, k);
  return e.render(name);
}

}  // namespace coil::codegen
