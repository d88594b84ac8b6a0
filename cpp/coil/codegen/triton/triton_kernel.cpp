// The Triton renderer's frame (triton_emitter.h): the Emitter's setup (block axes, int32 or int64
// index arithmetic), the kernel's arguments, its index expressions (trailing contiguous variables
// merged into the flat index, block shapes and masks), the signature, prologue and header comment;
// and the entry points of triton_kernel.h. Values: triton_values.cpp; stages: triton_stages.cpp.
#include "coil/codegen/triton/triton_kernel.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/provenance.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <stdexcept>

#include "coil/codegen/triton/triton_emitter.h"
#include "coil/codegen/triton/triton_launch.h"

namespace coil::codegen {
namespace triton {

Emitter::Emitter(const ir::Program& prog, const sched::Schedule& s, const sched::Kernel& k,
                 bool gpu_form)
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
    interpreted_ |= !gpu_form && prog.buffers[m.buffer].layout.device == "cpu";
}

KernelSource Emitter::render(const std::string& name) {
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
    origins.insert(prog_.buffers[m.buffer].origins.begin(), prog_.buffers[m.buffer].origins.end());
  }
  src.origins.assign(origins.begin(), origins.end());
  return src;
}

// ---- arguments (as in the C++ renderer: in_ptrN read, out_ptrN written, in-place shares) ----

bool Emitter::stored(const std::string& buf) const {
  auto it = s_.buffers.find(buf);
  return it == s_.buffers.end() || it->second.stored;
}

const sched::Member* Emitter::member_of(const std::string& buf) const {
  for (const sched::Member& m : k_.members) {
    if (prog_.buffers[m.buffer].name == buf) return &m;
  }
  return nullptr;
}

void Emitter::collect_args() {
  KernelArgPlan plan = plan_kernel_args(prog_, s_, k_);
  args_ = std::move(plan.args);
  ptr_ = std::move(plan.pointer);
}

// ---- index arithmetic ----

// Every index the kernel computes, in kernel variables.
std::vector<Expr> Emitter::all_indices() const {
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

bool Emitter::is_size_symbol(const Expr& v) const {
  for (const graph::SizeSymbol& s : prog_.size_symbols) {
    if (s.name == v.name()) return true;
  }
  return false;
}

bool Emitter::needs_int64() {
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
Expr Emitter::merge_contiguous(const Expr& e, const std::vector<Expr>& vars,
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
  Expr inner = product(sizes, k);
  if (inner == Expr(0)) return e;  // (a dim of size 0: no lane runs; see var_definition)
  Expr z = k == 0 ? flat : sym::mod(flat, inner);
  Expr out = aff->constant + c * z;
  for (size_t i = 0; i < k; ++i) out = out + aff->coeffs[i] * vars[i];
  return out;
}

int Emitter::dims_of(const Expr& e) const {
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
std::string Emitter::index_text(const Expr& e, int* dims) {
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
// A kernel with a dim of size 0 runs no lane (its numel is 0, every lane masked off): its
// variables are never used, and a divisor of 0 is taken as 1 (fuzzer seed 730022: every
// zero-element graph failed to compile on the Triton backend).
std::string Emitter::var_definition(size_t i, const std::vector<Expr>& sizes, const Expr& flat) {
  auto nonzero = [](const Expr& e) { return e == Expr(0) ? Expr(1) : e; };
  Expr inner = nonzero(product(sizes, i + 1));
  Expr e = sym::floordiv(flat, inner);
  if (i > 0) e = sym::mod(e, nonzero(sizes[i]));
  e = sym::simplify(e, env_);
  // A variable the same in every lane (a dim of size 1 or 0) is still a block, as indices and
  // the pointers made from them must be (fuzzer seed 750074: `x1 = 0` made a scalar pointer
  // for a block value).
  if (e.is_int()) return printer_.print(flat) + " * 0 + " + printer_.print(e);
  return printer_.print(e);
}

std::string Emitter::block(const Axis& a) const {
  std::string b = a.prefix;
  for (char& c : b) c = static_cast<char>(std::toupper(c));
  return b + "BLOCK";
}

std::string Emitter::shape(int dims) const {
  if (!two_d_) return "[XBLOCK]";
  if (dims == (kRows | kCols)) return "[" + block(rows_) + ", " + block(cols_) + "]";
  if (dims == kCols) return "[1, " + block(cols_) + "]";
  return "[" + block(rows_) + ", 1]";
}

bool Emitter::masked(const Axis& a) const {
  if (a.prefix == "y") return plan_.ymask;
  if (a.prefix == "r") return plan_.rmask;
  return plan_.xmask;
}

// The block masks that apply to something spanning `dims`.
std::string Emitter::block_mask(int dims) const {
  std::string m;
  if ((dims & kRows) && masked(rows_)) m = rows_.prefix + "mask";
  if ((dims & kCols) && two_d_ && masked(cols_))
    m += (m.empty() ? "" : " & ") + cols_.prefix + "mask";
  return m;
}

// ---- the signature's prologue and the header comment ----

std::string Emitter::prologue() {
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

std::string Emitter::header_comment(const std::string& name) const {
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

}  // namespace triton

std::string triton_kernel_prefix(const sched::Kernel& k) {
  if (!is_reduction_kernel(k)) return "triton_poi";
  return plan_launch(k).persistent ? "triton_per" : "triton_red";
}

KernelSource render_triton_kernel(const ir::Program& prog, const sched::Schedule& s,
                                  const sched::Kernel& k, const std::string& name, bool gpu_form) {
  triton::Emitter e(prog, s, k, gpu_form);
  return e.render(name);
}

}  // namespace coil::codegen
