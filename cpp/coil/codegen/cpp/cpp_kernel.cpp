#include "coil/codegen/cpp/cpp_kernel.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_special.h"
#include "coil/codegen/cpp/cpp_vec.h"
#include "coil/codegen/kernel_args.h"
#include "coil/codegen/provenance.h"

namespace coil::codegen {
namespace cpp {

KernelSource Emitter::render(const std::string& name) {
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
  src.vec_math = vec_math_;
  std::set<std::string> origins;
  for (const sched::Member& m : k_.members)
    origins.insert(prog_.buffers[m.buffer].origins.begin(), prog_.buffers[m.buffer].origins.end());
  src.origins.assign(origins.begin(), origins.end());
  return src;
}

bool Emitter::stored(const std::string& buf) const {
  auto it = s_.buffers.find(buf);
  return it == s_.buffers.end() || it->second.stored;
}

void Emitter::collect_args() {
  KernelArgPlan plan = plan_kernel_args(prog_, s_, k_);
  args_ = std::move(plan.args);
  ptr_ = std::move(plan.pointer);
}

std::string Emitter::header_comment(const std::string& name) const {
  std::ostringstream c;
  c << "// " << name << "\n";
  for (const std::string& l : provenance_lines(prog_, s_, k_)) c << "// " << l << "\n";
  for (const auto& d : k_.decisions) c << "// decision: " << d << "\n";
  if (k_.has_reduction() && k_.column_block == 0 && !k_.scan) {
    c << "// decision: reduction looped over r inside each x point (CPU)\n";
  }
  if (stream_ && vectorized_) {
    c << "// decision: streaming stores: whole aligned vectors written around the caches ("
      << (min_trip_ <= 1 ? std::string("cpp_vectorize=\"on\"")
                         : "at least " + std::to_string(kStreamMinBytes >> 20) + " MiB written")
      << "), a fence after each "
      << (k_.tile > 0            ? "tile"
          : k_.xsizes.size() > 1 ? "row"
                                 : "chunk")
      << "\n";
  }
  if (rows_ > 1) {
    c << "// decision: row groups of " << rows_ << " x points: each loop over the row reads "
      << rows_ << " rows at a time\n";
  }
  std::set<std::string> said;  // (a loop rendered for several replicas is noted once)
  for (const std::string& d : vec_decisions_) {
    if (said.insert(d).second) c << "// decision: " << d << "\n";
  }
  for (const std::string& d : row_cache_decisions()) c << "// decision: " << d << "\n";
  for (const std::string& d : row_prefetch_decisions()) c << "// decision: " << d << "\n";
  if (const ir::Buffer* sc = scatter()) {
    std::string how = sc->scatter_mode == ir::ScatterMode::Store ? "plain stores (a duplicate "
                                                                   "index keeps one value)"
                      : atomic_scatter()                         ? "omp atomic updates"
                      : scatter_owner() ? "each point of x" + std::to_string(*scatter_owner()) +
                                              " owns its targets: its thread updates them in "
                                              "index order, no atomics"
                                        : "serial updates, in index order";
    c << "// decision: scatter " << ir::scatter_mode_name(sc->scatter_mode) << " into " << sc->name
      << ": " << how << "\n";
  }
  return c.str();
}

std::string Emitter::index_text(const std::string& buf, const Expr& idx) {
  const ir::Buffer& b = prog_.buffer(buf);
  // Pointers are tensor data pointers: indices are relative to the layout's storage offset. In a
  // row group, the x variable is the replica's.
  Expr at = row_rename_.empty() ? idx : sym::substitute(idx, row_rename_);
  return sym::to_cpp(sym::simplify(at - b.layout.offset, env_), env_);
}

// v's index with each indirect symbol replaced by a temporary holding its checked position
// (coil_index: wrapped, bounds-checked where the access happens, 0 when out of bounds).
Expr Emitter::checked_index(Value v) {
  std::vector<Expr> syms = ir::indirect_symbols(v->index);
  if (syms.empty()) return v->index;
  auto hoisted = hoisted_checked_.find(v.get());
  if (hoisted != hoisted_checked_.end()) return hoisted->second;
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
std::string Emitter::value(Value root) {
  for (const Value& v : render_order(root)) {
    if (lookup(v) || (vec_ && is_lane_value(v))) continue;
    if (const RowCache* c = cached_in_stage(v)) {
      read_row_cache(v, *c);
      continue;
    }
    if (auto h = column_hoisted_.find(v.get()); h != column_hoisted_.end()) {
      std::string name = "tmp" + std::to_string(next_tmp_++);
      if (lanes_vec_) {  // (16-bit values: float lanes, widened in their array)
        lane_type(v.dtype());
        std::string lanes = is_half(v.dtype()) ? std::string("VecF") : vec();
        line("auto " + name + " = " + lanes + "::loadu(" + h->second + " + xi, " + vec_->count +
             ");");
        vec_names_.insert(name);
      } else {
        line(ctype(v.dtype()) + " " + name + " = " + h->second + "[xi];");
      }
      memo_.back()[v.get()] = name;
      continue;
    }
    if (vec_ && varies(v)) {
      if (lane_value(v)) {  // computed per lane where an indirect load uses it
        lane_values_[v.get()] = lane_value_origin(v);
        continue;
      }
      vector_value(v);
      fill_row_cache(v, *lookup(v));
      continue;
    }
    std::string text;
    switch (v.op()) {
      case Op::Constant:
        memo_.back()[v.get()] = constant_text(v);
        continue;
      case Op::IndexExpr: {
        Expr at = checked_index(v);
        if (!row_rename_.empty()) at = sym::substitute(at, row_rename_);
        text = "static_cast<" + ctype(v.dtype()) + ">(" +
               sym::to_cpp(sym::simplify(at, env_), env_) + ")";
        break;
      }
      case Op::Guard:
        checked_index(v);
        memo_.back()[v.get()] = *lookup(v->args[0]);
        continue;
      case Op::Load: {
        auto avail = available_.find(v->buffer);
        if (avail != available_.end() && !ir::has_indirect(v->index)) {
          memo_.back()[v.get()] = avail->second;
          fill_row_cache(v, avail->second);  // (a buffer this loop computes, kept for a later one)
          continue;
        }
        std::string load = ptr_.at(v->buffer) + "[" + index_text(v->buffer, checked_index(v)) + "]";
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
        } else if (auto lane = lane_math_text(v)) {
          text = *lane;
        } else if (v->args.size() == 1) {
          text = unary_text(v.op(), *lookup(v->args[0]), v.dtype());
        } else {
          text = binary_text(v.op(), *lookup(v->args[0]), *lookup(v->args[1]), v->args[0].dtype());
        }
    }
    std::string name = "tmp" + std::to_string(next_tmp_++);
    line(ctype(v.dtype()) + " " + name + " = " + text + ";");
    memo_.back()[v.get()] = name;
    fill_row_cache(v, name);
  }
  if (vec_ && is_lane_value(root)) throw NoVectorForm{lane_value_why(root)};
  return *lookup(root);
}

// A special-function op's call (cpp_special.h), noting when it needs ATen's header.
std::optional<std::string> Emitter::special_text(Value v) {
  std::vector<std::string> operands;
  for (const Value& a : v->args) operands.push_back(*lookup(a));
  auto special = special_op_text(v.op(), operands, v->args.at(0).dtype());
  if (!special) return std::nullopt;
  aten_math_ |= special->aten_math;
  return special->text;
}

std::optional<std::string> Emitter::lane_math_text(Value v) {
  std::optional<std::string> vec = vec_type(v.dtype());
  // (Exact ops: the scalar form is the same function.)
  if (!lane_math_ || !vec || v->args.empty() || v->args[0].dtype() != v.dtype() ||
      !ir::inexact_op(v.op(), v.dtype()))
    return std::nullopt;
  const std::string& V = *vec;
  std::string text;
  if (v->args.size() == 1) {
    std::optional<std::string> f = vec_unary_text(v.op(), "a", V);
    if (!f) return std::nullopt;
    text =
        "coil_lane<" + V + ">(" + *lookup(v->args[0]) + ", [](" + V + " a) { return " + *f + "; })";
  } else if (v->args.size() == 2 && v->args[1].dtype() == v.dtype()) {
    std::optional<std::string> f = vec_binary_text(v.op(), "a", "b", V);
    if (!f) return std::nullopt;
    text = "coil_lane2<" + V + ">(" + *lookup(v->args[0]) + ", " + *lookup(v->args[1]) + ", [](" +
           V + " a, " + V + " b) { return " + *f + "; })";
  } else {
    return std::nullopt;
  }
  vec_math_ = true;
  return text;
}

const std::string* Emitter::lookup(Value v) const {
  for (auto it = memo_.rbegin(); it != memo_.rend(); ++it) {
    auto f = it->find(v.get());
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

// A scatter combines its value into the element its target names.
void Emitter::scatter_store(const ir::Buffer& b, const sched::Member& m, const std::string& val) {
  if (vec_) {
    vector_scatter_store(b, m, val);
    return;
  }
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

const ir::Buffer* Emitter::scatter() const {
  for (const sched::Member& m : k_.members) {
    if (prog_.buffers[m.buffer].is_scatter()) return &prog_.buffers[m.buffer];
  }
  return nullptr;
}

// Scatter-adds of types `omp atomic` handles run in parallel; other scatters that combine values
// run serially (no two updates of one element may interleave).
bool Emitter::atomic_scatter() const {
  const ir::Buffer* b = scatter();
  if (!b || b->scatter_mode != ir::ScatterMode::Add || scatter_owner()) return false;
  DType d = b->layout.dtype;
  return d != DType::BFloat16 && d != DType::Float16 && d != DType::Bool;
}

void Emitter::store(const ir::Buffer& b, const sched::Member& m, const std::string& val) {
  if (b.is_scatter()) {
    scatter_store(b, m, val);
    return;
  }
  if (!stored(b.name)) return;
  Expr idx = sym::substitute(b.write_index(), member_map(m));
  if (vec_) {
    vector_store(b, idx, val);
    return;
  }
  line(ptr_.at(b.name) + "[" + index_text(b.name, idx) + "] = " + val + ";");
}

void Emitter::open_lanes(bool simd, const std::string& begin, const std::string& end) {
  if (!column()) return;
  if (simd) line("#pragma omp simd");
  line("for (int64_t xi = " + begin + "; xi < " + end + "; ++xi) {");
  ++indent_;
  line("const int64_t " + last_x() + " = xc + xi;");
  memo_.emplace_back();
}

void Emitter::close_lanes() {
  if (!column()) return;
  memo_.pop_back();
  --indent_;
  line("}");
}

void Emitter::lanes(bool simd, const std::string& begin, const std::string& end,
                    const std::function<void()>& f) {
  if (!column()) {
    f();
    return;
  }
  if (!lanes_vec_) {
    open_lanes(simd, begin, end);
    f();
    close_lanes();
    return;
  }
  // The lanes in vector form: the loop runs over the x variable itself, a vector of lanes a step;
  // xi is the first lane's slot in the per-lane arrays.
  vector_loop(begin == "0" ? "xc" : "xc + " + begin, "xc + " + end, "", [&] {
    line("const int64_t xi = " + last_x() + " - xc;");
    memo_.emplace_back();
    f();
    memo_.pop_back();
  });
}

void Emitter::lane_pieces(const std::function<void()>& f) {
  std::vector<int64_t> cuts = column() ? inner_pieces() : std::vector<int64_t>{};
  if (cuts.empty()) {
    lanes(true, "0", "xn", f);
    return;
  }
  if (!lanes_split_said_) {
    say_split("lanes of " + last_x(), cuts);
    lanes_split_said_ = true;
  }
  each_piece(cuts, [&](int64_t begin, int64_t end) {
    lanes(true, std::to_string(begin), std::to_string(end), f);
  });
}

void Emitter::say_split(const std::string& what, const std::vector<int64_t>& cuts) {
  std::string said = what + " split at";
  for (int64_t c : cuts) said += " " + std::to_string(c);
  vec_decisions_.push_back(said + " (where comparisons of index values along it change)");
}

void Emitter::each_piece(const std::vector<int64_t>& cuts,
                         const std::function<void(int64_t, int64_t)>& f) {
  Expr var = Expr::symbol(last_x());
  int64_t begin = 0;
  for (size_t p = 0; p <= cuts.size(); ++p) {
    int64_t end = p < cuts.size() ? cuts[p] : *k_.xsizes.back().as_int();
    // (Names a piece made vectors, v_buf0 among them, may be scalars in the next.)
    sym::RangeEnv whole = env_;
    std::set<std::string> vectors = vec_names_;
    env_.set_range(var, sym::Range{begin, end - 1});
    fold_pieces_ = true;
    f(begin, end);
    fold_pieces_ = false;
    env_ = whole;
    vec_names_ = vectors;
    begin = end;
  }
}

// Computes a pointwise member; outer-level values in column mode go to their lane's slot.
void Emitter::emit_pointwise(const sched::Member& m) {
  const ir::Buffer& b = prog_.buffers[m.buffer];
  std::string val = value(kernel_body(m));
  std::string var = "v_" + b.name + sfx();
  if (column() && !m.inner && lanes_vec_) {
    write_slot(b, val);
    store(b, m, vec_operand(val, b.layout.dtype));
    return;
  }
  if (column() && !m.inner) {
    var = lane(var);
    line(var + " = " + val + ";");
  } else if (vec_ && is_vector(val)) {
    line("auto " + var + " = " + val + ";");
    vec_names_.insert(var);
    // (v_<buf> names repeat in each piece of a split loop.)
    if (rounded_.count(val)) {
      rounded_[var] = rounded_.at(val);
    } else {
      rounded_.erase(var);
    }
    if (half_loads_.count(val)) {
      half_loads_[var] = half_loads_.at(val);
    } else {
      half_loads_.erase(var);
    }
  } else {
    line(ctype(b.layout.dtype) + " " + var + " = " + val + ";");
  }
  available_[b.name] = var;
  store(b, m, var);
}

bool Emitter::plan_stream_stores(bool tiled) const {
  // (Unrolled short loops: the stores are strided along the vector loop.)
  if (!vectorize_ || scatter() || k_.has_reduction() || k_.xsizes.empty() || k_.unrolled > 0)
    return false;
  // (cpp_vectorize="on" streams small kernels too, as it renders them in vector form and in row
  // groups: how tests and the fuzzer reach streaming stores with small tensors.)
  bool forced = min_trip_ <= 1;
  if (!forced && !tiled && k_.xsizes.size() > 1) {
    auto row = sym::try_size_hint(k_.xsizes.back());
    if (!row || *row < kStreamMinRow) return false;
  }
  int64_t bytes = 0;
  for (const sched::Member& m : k_.members) {
    const ir::Buffer& b = prog_.buffers[m.buffer];
    // A kernel computing exp, erf, tanh, ... is bound by them: its stores fill each line
    // slowly, and a write-combining buffer flushed half full costs more than the line's read
    // (gelu(x * y + z) over 2^24 float32: 17.1 ms streamed, 16.9 not).
    if (!forced && ir::computes_inexactly(kernel_body(m))) return false;
    if (!stored(b.name)) continue;
    auto n = sym::try_size_hint(b.layout.numel());
    if (!n) return false;
    bytes += *n * graph::dtype_itemsize(b.layout.dtype);
  }
  return forced || bytes >= kStreamMinBytes;
}

void Emitter::render_loops() {
  if (k_.scan) {
    render_scan();
    return;
  }
  indent_ = 1;
  Expr work = 1;
  for (const Expr& e : k_.xsizes) work = work * e;
  for (const Expr& e : k_.rsizes) work = work * e;
  auto w = work.as_int();
  bool parallel = !k_.xsizes.empty() && (!w || *w >= kParallelMinElements) && !split_columns();
  // Scatters: no SIMD (two lanes may target one element); parallel when updates cannot race.
  const ir::Buffer* sc = scatter();
  bool simd = !sc || scatter_lanes_distinct();
  std::optional<size_t> owner = scatter_owner();
  bool owned = owner.has_value();
  size_t parallel_at = owned ? *owner : 0;  // the loop the parallel pragma goes on
  if (sc && sc->scatter_mode != ir::ScatterMode::Store && !atomic_scatter() && !owned)
    parallel = false;
  size_t nx = k_.xsizes.size();
  bool pointwise = !k_.has_reduction();
  bool tiled = pointwise && k_.tile > 0 && nx >= 2;
  // The vector loop's dim: the last, or the one before the unrolled short loops.
  size_t vd = nx ? vector_dim() : 0;
  // Loops as (header, pragma-able) pairs, outermost first; the parallel pragma covers the
  // leading loops that are perfectly nested.
  std::vector<std::string> headers;
  size_t parallel_loops = 0;
  std::string inner_begin = "0", inner_end = nx ? sym::to_cpp(k_.xsizes[vd], env_) : "";
  auto size = [&](size_t i) { return sym::to_cpp(k_.xsizes[i], env_); };
  if (column()) {
    for (size_t i = 0; i + 1 < nx; ++i)
      headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
    headers.push_back(loop_header("xc", "0", size(nx - 1), std::to_string(k_.column_block)));
    parallel_loops = nx;
  } else if (tiled) {
    for (size_t i = 0; i + 2 < nx; ++i)
      headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
    std::string t = std::to_string(k_.tile), tr = std::to_string(k_.tile_rows);
    headers.push_back(loop_header("xt0", "0", size(nx - 2), tr));
    headers.push_back(loop_header("xt1", "0", size(nx - 1), t));
    parallel_loops = nx;
    std::string a = "x" + std::to_string(nx - 2), b = "x" + std::to_string(nx - 1);
    headers.push_back(
        loop_header(a, "xt0", "std::min<int64_t>(xt0 + " + tr + ", " + size(nx - 2) + ")"));
    inner_begin = "xt1";
    inner_end = "std::min<int64_t>(xt1 + " + t + ", " + size(nx - 1) + ")";
    headers.push_back(loop_header(b, inner_begin, inner_end));
  } else {
    for (size_t i = 0; i <= vd && i < nx; ++i)
      headers.push_back(loop_header("x" + std::to_string(i), "0", size(i)));
    parallel_loops = owned ? 1 : pointwise ? (vd > 0 ? vd : 1) : nx;
    if (!pointwise && plan_row_group()) {
      headers.back() = loop_header("xg", "0", size(nx - 1), std::to_string(rows_));
    }
  }
  stream_ = pointwise && simd && nx > 0 && plan_stream_stores(tiled);
  auto open_loop = [&](size_t i) {
    bool innermost_pointwise = pointwise && i + 1 == headers.size() && simd;
    if (i == parallel_at && parallel && parallel_loops > 0) {
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
    // A constant lane count where the blocks divide the dim: the lane loops then unroll.
    auto last = k_.xsizes[nx - 1].as_int();
    if (last && *last % k_.column_block == 0) {
      line("constexpr int64_t xn = " + std::to_string(k_.column_block) + ";");
    } else {
      line("const int64_t xn = std::min<int64_t>(" + std::to_string(k_.column_block) + ", " +
           size(nx - 1) + " - xc);");
    }
    // Per-lane slots for every per-x-point value of the kernel.
    for (const sched::Member& m : k_.members) {
      const ir::Buffer& b = prog_.buffers[m.buffer];
      if (m.inner && !b.is_reduction()) continue;
      line(ctype(b.layout.dtype) + " v_" + b.name + "[" + std::to_string(k_.column_block) + "];");
    }
  }
  plan_row_caches();
  plan_row_prefetch();
  auto body = [&] {
    memo_.emplace_back();
    row_memo_ = memo_.size() - 1;
    if (rows_ > 1) {
      // Each replica's x variable.
      row_states_.assign(static_cast<size_t>(rows_), RowState{});
      for (int64_t g = 0; g < rows_; ++g) {
        std::string xg = last_x() + "_g" + std::to_string(g);
        line("const int64_t " + xg + " = xg + " + std::to_string(g) + ";");
        env_.add_index_var(Expr::symbol(xg), k_.xsizes.back());
      }
      set_row(0);
    }
    each_unrolled_point([&] {
      for (size_t i = 0; i < k_.stages.size(); ++i) {
        stage_ = static_cast<int>(i);
        render_stage(k_.stages[i]);
      }
    });
    stage_ = -1;
    memo_.pop_back();
  };
  if (column()) {
    // Column kernels: every lane loop in vector form, or every one scalar (omp simd).
    bool allowed = vectorize_ && k_.column_block >= min_trip_;
    with_vector_attempt(last_x(), allowed, vectorize_ ? "too few lanes" : "", [&](bool vector) {
      lanes_vec_ = vector;
      body();
      lanes_vec_ = false;
    });
  } else if (vector_inner) {
    size_t i = headers.size() - 1;
    std::optional<int64_t> trip = tiled ? std::optional<int64_t>(k_.tile) : k_.xsizes[vd].as_int();
    bool allowed = vectorize_ && (!trip || *trip >= min_trip_);
    std::string why = !vectorize_ ? "" : "too few iterations";
    with_vector_attempt("x" + std::to_string(vd), allowed, why, [&](bool vector) {
      if (tiled && vector) {
        transposed_tiles(size(nx - 2), size(nx - 1));
        open_loop(i - 1);
        emit_tile_row_prefetches();
      } else if (tiled) {
        tile_prefetch_decision_.clear();  // (a vector attempt's, rendered again as scalar)
        open_loop(i - 1);
      }
      std::vector<int64_t> cuts = vector && !tiled ? inner_pieces() : std::vector<int64_t>{};
      if (vector && !cuts.empty()) {
        // One vector loop per piece, its body folded where the piece's range decides it.
        std::string pragma = i == 0 && parallel ? "#pragma omp parallel for" : "";
        int64_t chunk = stream_ && i == 0 ? kStreamChunk : 0;
        say_split("loop " + last_x(), cuts);
        each_piece(cuts, [&](int64_t begin, int64_t end) {
          vector_loop(std::to_string(begin), std::to_string(end), pragma, body, chunk);
        });
        if (stream_ && i != 0) line("coil_stream_fence();");
      } else if (vector) {
        std::string pragma = i == 0 && parallel ? "#pragma omp parallel for" : "";
        bool flat = i == 0 && !tiled;
        // (The hoisted values live in a memo frame of their own, around the vector loop.)
        // (A loop that may run no step checks no index: hoisted, a bad one would be reported.)
        bool hoist = i > 0 && rows_ <= 1 && sym::bounds(k_.xsizes[vd], env_).lo >= 1;
        if (hoist) {
          memo_.emplace_back();
          hoist_lane_invariant_indices("x" + std::to_string(vd));
        }
        vector_loop(inner_begin, inner_end, pragma, body, stream_ && flat ? kStreamChunk : 0);
        if (hoist) memo_.pop_back();
        hoisted_checked_.clear();
        if (stream_ && !flat && !tiled) line("coil_stream_fence();");
      } else {
        open_loop(i);
        body();
        --indent_;
        line("}");
      }
      if (tiled) {
        --indent_;
        line("}");
        if (vector && stream_) line("coil_stream_fence();");
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

// At most this many pieces of a split loop (a concatenation of more inputs keeps one loop).
constexpr size_t kMaxLoopPieces = 16;

std::vector<int64_t> Emitter::inner_pieces() const {
  size_t nx = k_.xsizes.size();
  if (nx == 0 || rows_ > 1 || scatter() || k_.unrolled > 0) return {};
  auto extent = k_.xsizes.back().as_int();
  if (!extent) return {};
  // Column mode: lanes split only where one block covers the row (x = xi, xc being 0).
  if (column() && k_.column_block < *extent) return {};
  std::vector<Value> bodies;
  for (const sched::Member& m : k_.members) {
    bodies.push_back(ir::substitute_indices(prog_.buffers[m.buffer].body, m.var_map));
  }
  Expr var = Expr::symbol("x" + std::to_string(nx - 1));
  std::vector<int64_t> cuts = ir::index_breakpoints(bodies, var, *extent, env_);
  if (cuts.size() + 1 > kMaxLoopPieces) return {};
  return cuts;
}

}  // namespace cpp

namespace {

// Kernel names list at most this many op names.
constexpr size_t kMaxNameOps = 10;

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
    sym::Expr work = 1;
    for (const sym::Expr& e : k.xsizes) work = work * e;
    for (const sym::Expr& e : k.rsizes) work = work * e;
    // Symbolic sizes: decided for the hint (the traced size), as every size choice is.
    vector = std::max<int64_t>(sym::size_hint(work, sym::RangeEnv{}), 0) >= kVectorMinWork;
  }
  // "on" vectorizes short loops too (all tail): how tests and the fuzzer reach the vector forms
  // with small tensors.
  int64_t min_trip = vectorize == "on" ? 1 : cpp::kMinVectorTrip;
  bool lane_math = vectorize != "off";
  try {
    cpp::Emitter e(prog, s, k, vector, min_trip, cpp::kRowGroup, lane_math);
    return e.render(name);
  } catch (const cpp::NoRowGroup&) {
    cpp::Emitter e(prog, s, k, vector, min_trip, 1, lane_math);
    return e.render(name);
  }
}

}  // namespace coil::codegen
