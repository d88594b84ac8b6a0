// The innermost loop of a C++ kernel in vector form (cpp_emitter.h, cpp_vec.h): which values
// vary along it, their vector texts, loads and stores of lanes, transposed tiles, and the attempt
// that falls back to the scalar loop.
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

std::string Emitter::vec() const {
  if (!vec_->elem) throw NoVectorForm{"no floating-point value varies along the loop"};
  return *vec_type(*vec_->elem);
}

void Emitter::lane_type(DType d) {
  if (d == DType::Bool) return;
  DType lanes = is_half(d) ? DType::Float32 : d;
  if (!vec_type(lanes)) throw NoVectorForm{std::string(graph::dtype_name(d)) + " values vary"};
  if (!vec_->elem) vec_->elem = lanes;
  if (*vec_->elem != lanes) throw NoVectorForm{"float32 and float64 values vary in one loop"};
}

// c10's type of a 16-bit float, for at::vec's conversions.
std::string Emitter::c10_half(DType d) {
  return d == DType::BFloat16 ? "c10::BFloat16" : "c10::Half";
}

bool Emitter::mentions_loop_var(const Expr& e) const {
  for (const Expr& x : sym::free_symbols(e)) {
    if (x == vec_->sym) return true;
  }
  return false;
}

// Whether v differs between the lanes of the vector loop.
bool Emitter::varies(Value v) const {
  switch (v.op()) {
    case Op::Constant:
      return false;
    case Op::Load:
      // (A per-x-point value: the same in every lane of an r loop, one per lane of the lanes.)
      if (available_.count(v->buffer) && !ir::has_indirect(v->index))
        return lanes_vec_ && slots_.count(v->buffer) > 0;
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
    const std::string* t = lookup(a);
    if (t ? is_vector(*t) : is_lane_value(a)) return true;
  }
  return false;
}

// An operand of a vector op: a vector variable, or a value the same in every lane, broadcast.
std::string Emitter::vec_operand(const std::string& text, DType d) const {
  if (is_vector(text)) return text;
  if (d == DType::Bool) return "coil_vmask<" + vec() + ">(" + text + ")";
  return vec() + "(" + text + ")";
}

// The step of idx between consecutive lanes, when it is the same for every lane.
std::optional<Expr> Emitter::lane_step(const Expr& idx) const {
  sym::ExprMap next{{vec_->sym, vec_->sym + 1}};
  Expr step = sym::simplify(sym::substitute(idx, next) - idx, env_);
  if (mentions_loop_var(step)) return std::nullopt;
  return step;
}

// A vector of buf's elements at idx, one per lane: one load where idx is contiguous along the
// loop, else lane by lane.
std::string Emitter::lanes_read(const std::string& buf, const Expr& idx, DType d) {
  auto tile = tiles_.empty() ? tiles_.end()
                             : tiles_.find(buf + "@" + sym::to_cpp(sym::simplify(idx, env_), env_));
  if (tile != tiles_.end()) {  // (a 16-bit value's tile holds floats)
    return (is_half(d) ? std::string("VecF") : vec()) + "::loadu(" + tile_names_.at(tile->first) +
           " + (" + tile->second + "), " + vec_->count + ")";
  }
  std::string at = index_text(buf, idx);
  auto step = lane_step(idx);
  if (step && step->as_int() == 1 && is_half(d)) {
    half_load_src_ = ptr_.at(buf) + " + (" + at + ")";
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
// its vector loop xb is transposed, a tile at a time, into a local buffer
// (coil_transpose_tile in prelude.h: 8x8 or 16x16 float blocks in registers), so that both the
// read of the input and the vector loop's read of the tile are contiguous. The buffers are
// emitted here, before the xa loop.
void Emitter::transposed_tiles(const std::string& size_a, const std::string& size_b) {
  size_t nx = k_.xsizes.size();
  Expr xa = Expr::symbol("x" + std::to_string(nx - 2));
  Expr xb = Expr::symbol("x" + std::to_string(nx - 1));
  // The tile: tile_rows points of xa by tile points of xb, held as rows of xb.
  std::string t = std::to_string(k_.tile), tr = std::to_string(k_.tile_rows);
  for (const sched::Member& m : k_.members) {
    for (const Value& v : ir::topo_order({kernel_body(m)})) {
      if (v.op() != Op::Load || v->masked || ir::has_indirect(v->index)) continue;
      // float32/float64 tiles; 16-bit values are widened into a float32 tile as they are
      // transposed (the loop's loads of them are float lanes either way).
      bool widen = is_half(v.dtype());
      if ((!vec_type(v.dtype()) && !widen) || available_.count(v->buffer)) continue;
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
      std::string ty = widen ? "float" : ctype(v.dtype());
      line("alignas(64) " + ty + " " + name + "[" + tr + " * " + t + "];  // " + v->buffer +
           "'s tile, transposed" + (widen ? " and widened" : ""));
      std::string fn = widen ? "coil_transpose_tile_widen<" + c10_half(v.dtype()) + ">"
                             : "coil_transpose_tile<" + ty + ">";
      line(fn + "(" + ptr_.at(v->buffer) + " + (" + index_text(v->buffer, origin) + "), " +
           sym::to_cpp(*sb, env_) + ", " + name + ", " + t + ", std::min<int64_t>(" + t + ", " +
           size_b + " - xt1), std::min<int64_t>(" + tr + ", " + size_a + " - xt0));");
      tiles_[key] =
          t + "*(x" + std::to_string(nx - 2) + " - xt0) + x" + std::to_string(nx - 1) + " - xt1";
      tile_names_[key] = name;
    }
  }
}

void Emitter::vector_value(Value v) {
  DType d = v.dtype();
  // Comparisons of index values (a causal mask): arange lanes, before the rule below.
  std::optional<std::string> special = index_comparison(v);
  // An integer lane value (cpp_vec_gather.cpp) made a bool or a float: built lane by lane (an
  // int64 padding mask read along the loop, then cast to bool).
  if (!special) special = lanes_cast(v);
  if (special) {
    bind_vector(v, *special);
    return;
  }
  // Lane values (cpp_vec_gather.cpp) are used only as the indirect indices of loads and guards.
  bool gathers = false;
  for (const Value& a : v->args) {
    if (!is_lane_value(a)) continue;
    bool indirect = v.op() == Op::Load || (v.op() == Op::Guard && a.get() != v->args[0].get());
    if (!indirect) throw NoVectorForm{lane_value_why(a)};
    gathers = true;
  }
  std::string text;
  std::string rounded;   // text is this rounded to d (rounded_)
  std::string half_src;  // text is the 16-bit elements there, widened (half_loads_)
  switch (v.op()) {
    case Op::Load: {
      if (lanes_vec_ && slots_.count(v->buffer) && available_.count(v->buffer) &&
          !ir::has_indirect(v->index)) {
        text = read_lanes("v_" + v->buffer, v.dtype());
        break;
      }
      if (gathers) {
        text = gather_lanes(v);
        break;
      }
      // An indirect index the same in every lane (an embedding row) is checked once, scalar.
      for (const Value& a : ir::indirect_operands(v)) {
        if (is_vector(*lookup(a))) throw NoVectorForm{"an indirect index varies"};
      }
      if (d == DType::Bool) {  // bytes: a mask built lane by lane
        if (v->masked) throw NoVectorForm{"a masked bool load varies"};
        std::string fn = lane_lambda([&] {
          line("return " + ptr_.at(v->buffer) + "[" + index_text(v->buffer, checked_index(v)) +
               "];");
        });
        text =
            "coil_vmask_lanes<" + vec() + ">(" + fn + ", " + vec_->var + ", " + vec_->count + ")";
        break;
      }
      lane_type(d);
      half_load_src_.clear();
      text = lanes_read(v->buffer, checked_index(v), d);
      if (!v->masked && !half_load_src_.empty()) half_src = half_load_src_;
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
      if (is_lane_value(v->args[0])) throw NoVectorForm{lane_value_why(v->args[0])};
      if (gathers) {
        check_lanes(v);
        memo_.back()[v.get()] = *lookup(v->args[0]);
        return;
      }
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
        rounded = vec_operand(v->args[0]);
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
    case Op::LogicalNot:
      // A mask's lanes flipped (every bit of each lane).
      text = "(" + vec_operand(v->args[0]) + " ^ coil_vmask<" + vec() + ">(true))";
      break;
    default: {
      Op op = v.op();
      // &, |, ^ of bools are the logical ops (of masks).
      if (d == DType::Bool && v->args.size() == 2 && v->args[0].dtype() == DType::Bool &&
          v->args[1].dtype() == DType::Bool) {
        if (op == Op::BitwiseAnd) op = Op::LogicalAnd;
        if (op == Op::BitwiseOr) op = Op::LogicalOr;
        if (op == Op::BitwiseXor) op = Op::LogicalXor;
      }
      bool logical = op == Op::LogicalAnd || op == Op::LogicalOr || op == Op::LogicalXor;
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
        t = vec_binary_text(op, vec_operand(v->args[0]), vec_operand(v->args[1]), vec());
        // A number that is not NaN first (relu's 0, a clamp's bound): one max/min instruction,
        // which gives its second operand on a tie (Maximum's rule) and passes a NaN there
        // through (at::vec::maximum's NaN check is for operands that both vary).
        const Value& k = v->args[0];
        if ((v.op() == Op::Maximum || v.op() == Op::Minimum) && k.op() == Op::Constant &&
            graph::is_floating(k.dtype()) && !std::isnan(k->fvalue)) {
          t = std::string(v.op() == Op::Maximum ? "at::vec::clamp_min(" : "at::vec::clamp_max(") +
              vec_operand(v->args[1]) + ", " + vec_operand(k) + ")";
        }
      }
      if (!t) throw NoVectorForm{std::string(ir::op_name(v.op())) + " has no vector form"};
      text = *t;
      // An op computed in a 16-bit type: its float result rounded, as the scalar form's is.
      if (is_half(d)) {
        rounded = text;
        text = "coil_vround<" + c10_half(d) + ">(" + text + ")";
      }
    }
  }
  std::string name = bind_vector(v, text);
  if (!rounded.empty()) rounded_[name] = {rounded, d};
  if (!half_src.empty()) half_loads_[name] = {half_src, d};
}

std::string Emitter::bind_vector(Value v, const std::string& text) {
  std::string name = "tmp" + std::to_string(next_tmp_++);
  line("auto " + name + " = " + text + ";");
  memo_.back()[v.get()] = name;
  vec_names_.insert(name);
  return name;
}

void Emitter::vector_store(const ir::Buffer& b, const Expr& idx, const std::string& val) {
  DType d = b.layout.dtype;
  lane_type(d);
  if (d == DType::Bool) throw NoVectorForm{"a bool store varies"};
  if (!mentions_loop_var(idx)) throw NoVectorForm{"a store's index is the same in every lane"};
  std::string v = vec_operand(val, d);
  auto unrounded = rounded_.find(v);
  if (unrounded != rounded_.end() && unrounded->second.second == d) v = unrounded->second.first;
  if (interleaved_.count(b.name)) {
    // (Emitted with copy 0's store, in the body's scope: coil_interleave after the last copy.)
    std::string stage = "stage_" + b.name, lanes = vec() + "_lanes";
    if (unrolled_p_ == 0) {
      line("alignas(64) " + ctype(d) + " " + stage + "[" + std::to_string(unrolled_points_) +
           " * " + lanes + "];");
    }
    std::string row = stage + " + " + std::to_string(unrolled_p_) + " * " + lanes;
    if (is_half(d)) {
      line("coil_vstore_half<" + c10_half(d) + ">(" + v + ", " + row + ", " + vec_->count + ");");
    } else {
      line(v + ".store(" + row + ", " + vec_->count + ");");
    }
    return;
  }
  std::string at = index_text(b.name, idx);
  auto step = lane_step(idx);
  if (step && step->as_int() == 1) {
    auto copied = half_loads_.find(v);
    if (is_half(d) && copied != half_loads_.end() && copied->second.second == d) {
      line("coil_vcopy_half(" + ptr_.at(b.name) + " + (" + at + "), " + copied->second.first +
           ", " + vec_->count + ");");
    } else if (is_half(d)) {
      line("coil_vstore_half<" + c10_half(d) + ">(" + v + ", " + ptr_.at(b.name) + " + (" + at +
           "), " + vec_->count + ");");
    } else if (stream_) {
      line("coil_vstream(" + v + ", " + ptr_.at(b.name) + " + (" + at + "), " + vec_->count + ");");
    } else {
      line(v + ".store(" + ptr_.at(b.name) + " + (" + at + "), " + vec_->count + ");");
    }
    return;
  }
  if (is_half(d)) {
    line("coil_vstore_half_lanes<" + c10_half(d) + ">(" + v + ", [&](int64_t " + vec_->var + ", " +
         c10_half(d) + " e) { " + ptr_.at(b.name) + "[" + at + "].bits = e.x; }, " + vec_->var +
         ", " + vec_->count + ");");
    return;
  }
  std::string lane_t = *vec_->elem == DType::Float64 ? "double" : "float";
  line("coil_vstore_lanes(" + v + ", [&](int64_t " + vec_->var + ", " + lane_t + " e) { " +
       ptr_.at(b.name) + "[" + at + "] = static_cast<" + ctype(d) + ">(e); }, " + vec_->var + ", " +
       vec_->count + ");");
}

std::string Emitter::read_lanes(const std::string& array, DType d) {
  lane_type(d);
  if (d == DType::Bool) throw NoVectorForm{"a bool value per x point"};
  if (is_half(d)) {
    return "coil_vload_half<" + c10_half(d) + ">(" + array + " + xi, " + vec_->count + ")";
  }
  return vec() + "::loadu(" + array + " + xi, " + vec_->count + ")";
}

void Emitter::write_slot(const ir::Buffer& b, const std::string& val) {
  DType d = b.layout.dtype;
  lane_type(d);
  if (d == DType::Bool) throw NoVectorForm{"a bool value per x point"};
  std::string v = vec_operand(val, d), slot = "v_" + b.name;
  if (is_half(d)) {
    line("coil_vstore_half<" + c10_half(d) + ">(" + v + ", " + slot + " + xi, " + vec_->count +
         ");");
  } else {
    line(v + ".store(" + slot + " + xi, " + vec_->count + ");");
  }
  available_[b.name] = lane(slot);
  slots_.insert(b.name);
}

Emitter::Snapshot Emitter::snapshot() const {
  return {memo_,     available_, vec_names_, env_,
          next_tmp_, indent_,    aten_math_, vec_decisions_.size()};
}

void Emitter::restore(const Snapshot& s) {
  memo_ = s.memo;
  available_ = s.available;
  vec_names_ = s.vec_names;
  env_ = s.env;
  next_tmp_ = s.next_tmp;
  indent_ = s.indent;
  aten_math_ = s.aten_math;
  fold_pieces_ = false;  // (an attempt that failed inside a piece of a split loop)
  if (vec_decisions_.size() > s.decisions) vec_decisions_.resize(s.decisions);
  lane_values_.clear();
  tiles_.clear();
  tile_names_.clear();
  interleaved_.clear();
  rounded_.clear();
  half_loads_.clear();
  unrolled_at_.clear();
  unrolled_sfx_.clear();
  unrolled_p_ = 0;
}

// Renders a loop nest through render(vector) in vector form over the innermost loop `var`, or,
// where some value has no vector form, scalar; the choice goes into the kernel's header.
void Emitter::with_vector_attempt(const std::string& var, bool allowed,
                                  const std::string& not_allowed,
                                  const std::function<void(bool)>& render) {
  if (allowed) {
    Snapshot saved = snapshot();
    std::ostringstream* out = out_;
    std::ostringstream attempt;
    out_ = &attempt;
    vec_ = VecLoop{var, Expr::symbol(var), "n_" + var, std::nullopt};
    lane_values_.clear();
    vec_gathers_ = vec_lane_checks_ = false;
    try {
      render(true);
      out_ = out;
      *out_ << attempt.str();
      vectorized_ = true;
      std::string lanes = vec_gathers_       ? "; indirect loads gathered lane by lane"
                          : vec_lane_checks_ ? "; indirect indices checked lane by lane"
                                             : "";
      vec_decisions_.push_back("loop " + var + " vectorized (at::vec " + vec_last_type_ +
                               ", a masked tail" + lanes + ")");
      vec_.reset();
      lane_values_.clear();
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
void Emitter::vector_loop(const std::string& begin, const std::string& end,
                          const std::string& pragma, const std::function<void()>& body,
                          int64_t chunk) {
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
  line("const int64_t " + whole + " = " + begin + " + ((" + end + ") - (" + begin + ")) / " +
       lanes + " * " + lanes + ";");
  if (!pragma.empty()) line(pragma);
  if (chunk > 0) {
    std::string c = std::to_string(chunk);
    line("for (int64_t " + var + "c = " + begin + "; " + var + "c < " + whole + "; " + var +
         "c += " + c + ") {");
    ++indent_;
    line("const int64_t " + var + "c_end = std::min<int64_t>(" + var + "c + " + c + ", " + whole +
         ");");
    line("for (int64_t " + var + " = " + var + "c; " + var + " < " + var + "c_end; " + var +
         " += " + lanes + ") {");
  } else {
    line("for (int64_t " + var + " = " + begin + "; " + var + " < " + whole + "; " + var +
         " += " + lanes + ") {");
  }
  line("  constexpr int64_t " + vec_->count + " = " + lanes + ";");
  *out_ << inner.str();
  line("}");
  if (chunk > 0) {
    line("coil_stream_fence();");
    --indent_;
    line("}");
  }
  line("if (" + whole + " < " + end + ") {  // the tail");
  line("  const int64_t " + var + " = " + whole + ";");
  line("  const int64_t " + vec_->count + " = " + end + " - " + whole + ";");
  *out_ << inner.str();
  line("}");
  --indent_;
  line("}");
}

}  // namespace coil::codegen::cpp
