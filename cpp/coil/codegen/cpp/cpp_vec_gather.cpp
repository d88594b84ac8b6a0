// Gathers in vector form (cpp_emitter.h): a vector loop whose body reads an index tensor along
// the loop and uses its elements as indirect indices (a relative-position-bias table indexed by
// a position index, inside softmax's row loops; an embedding or index_select along the loop).
// The index values are integers, which have no lanes in coil's vector loops (float32/float64
// lanes only), and such loops used to stay scalar: each element then ran the vector code of
// every inexact function (sigmoid, exp: coil_lane) on one lane. Now the integers are lane
// values: computed per lane, in scalar code, inside a small lane loop (coil_vlanes) that checks
// each index as the scalar loop does (coil_index: wrapped, bounds-checked, the first bad index
// reported) and reads the element, filling a vector; everything after it is vector math.
// Tests: tests/python/test_cpu_vec.py (gathers), tests/python/test_indexing.py (bad indices).
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

void Emitter::hoist_lane_invariant_indices(const std::string& var) {
  hoisted_checked_.clear();
  std::vector<Expr> vars{Expr::symbol(var)};
  std::unordered_map<const ir::ScalarNode*, bool> known;
  for (const sched::Member& m : k_.members) {
    for (const Value& v : ir::topo_order({kernel_body(m)})) {
      if (v.op() != Op::Load || v->masked || hoisted_checked_.count(v.get())) continue;
      std::vector<Value> raw = ir::indirect_operands(v);
      if (raw.empty()) continue;
      bool same = true;
      for (const Value& a : raw) same = same && invariant_along(a, vars, false, known);
      if (!same) continue;
      for (const Value& a : raw) value(a);
      hoisted_checked_[v.get()] = checked_index(v);
    }
  }
}

bool Emitter::lane_value(Value v) const {
  // (Column kernels' vector lanes index per-lane slots by xi, which a lane's scalar code does not
  // follow.)
  if (lanes_vec_) return false;
  DType d = v.dtype();
  if (graph::is_floating(d) || d == DType::Bool) return false;
  for (const Value& a : v->args) {
    const std::string* t = lookup(a);
    if (t && is_vector(*t)) return false;  // (an integer made from vector lanes)
  }
  return true;
}

std::string Emitter::lane_value_origin(Value v) const {
  if (v.op() == Op::IndexExpr) return "an index value varies";
  for (const Value& a : v->args) {
    if (is_lane_value(a)) return lane_value_why(a);
  }
  return std::string(graph::dtype_name(v.dtype())) + " values vary";
}

std::string Emitter::lane_lambda(const std::function<void()>& f) {
  std::optional<VecLoop> loop = vec_;
  std::string name = "lane" + std::to_string(next_tmp_++);
  line("auto " + name + " = [&](int64_t " + loop->var + ") {");
  ++indent_;
  memo_.emplace_back();
  vec_.reset();  // (the lane's own values: scalar code)
  f();
  vec_ = loop;
  memo_.pop_back();
  --indent_;
  line("};");
  return name;
}

std::string Emitter::gather_lanes(Value v) {
  DType d = v.dtype();
  lane_type(d);
  if (d == DType::Bool) throw NoVectorForm{"a bool load varies"};
  Value mask = ir::load_mask(v);
  if (mask && is_vector(*lookup(mask))) throw NoVectorForm{"a masked load's mask varies"};
  std::string fn = lane_lambda([&] {
    for (const Value& a : ir::indirect_operands(v)) value(a);
    std::string load = ptr_.at(v->buffer) + "[" + index_text(v->buffer, checked_index(v)) + "]";
    if (mask) load = "(" + *lookup(mask) + " ? " + load + " : static_cast<" + ctype(d) + ">(0))";
    line("return " + load + ";");
  });
  vec_gathers_ = true;
  return "coil_vlanes<" + vec() + ">(" + fn + ", " + vec_->var + ", " + vec_->count + ")";
}

std::optional<std::string> Emitter::lanes_cast(Value v) {
  if (v.op() != Op::Cast || !is_lane_value(v->args[0])) return std::nullopt;
  DType d = v.dtype();
  if (d != DType::Bool && !graph::is_floating(d)) return std::nullopt;
  if (d != DType::Bool) lane_type(d);
  const Value& from = v->args[0];
  std::string fn = lane_lambda([&] {
    value(from);
    line("return " + *lookup(from) + (d == DType::Bool ? " != 0;" : ";"));
  });
  return std::string(d == DType::Bool ? "coil_vmask_lanes<" : "coil_vlanes<") + vec() + ">(" + fn +
         ", " + vec_->var + ", " + vec_->count + ")";
}

void Emitter::check_lanes(Value v) {
  std::string fn = lane_lambda([&] {
    for (const Value& a : ir::indirect_operands(v)) value(a);
    checked_index(v);
  });
  line("coil_lanes_do(" + fn + ", " + vec_->var + ", " + vec_->count + ");");
  vec_lane_checks_ = true;
}

// The integer v computes as an expression of the loop variables: index values (no indirect
// symbols), integer constants, and sums, differences, products, negations and absolute values of
// them, and casts between integer types (exact: the caller checks the bounds).
std::optional<Expr> Emitter::index_value_expr(Value v) const {
  // int32/int64 values only, each within int32's range: no value on the way wraps as a narrower
  // integer type would (a uint8 cast of -1 is 255, not -1).
  DType d = v.dtype();
  if (d != DType::Int64 && d != DType::Int32) return std::nullopt;
  std::optional<Expr> e = index_value_expr_unchecked(v);
  if (!e) return std::nullopt;
  sym::Range r = sym::bounds(sym::simplify(*e, env_), env_);
  constexpr int64_t kInt32 = int64_t{1} << 31;
  if (r.lo == sym::Range::kNegInf || r.hi == sym::Range::kPosInf || r.lo < -kInt32 ||
      r.hi >= kInt32)
    return std::nullopt;
  return e;
}

std::optional<Expr> Emitter::index_value_expr_unchecked(Value v) const {
  switch (v.op()) {
    case Op::Constant:
      return Expr(v->ivalue);
    case Op::IndexExpr: {
      if (ir::has_indirect(v->index)) return std::nullopt;
      Expr at = v->index;
      if (!row_rename_.empty()) at = sym::substitute(at, row_rename_);
      return at;
    }
    case Op::Cast:
    case Op::Neg:
    case Op::Abs: {
      auto a = index_value_expr(v->args[0]);
      if (!a) return std::nullopt;
      if (v.op() == Op::Neg) return -*a;
      if (v.op() == Op::Abs) return sym::max(*a, -*a);
      return *a;
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      auto a = index_value_expr(v->args[0]), b = index_value_expr(v->args[1]);
      if (!a || !b) return std::nullopt;
      if (v.op() == Op::Add) return *a + *b;
      if (v.op() == Op::Sub) return *a - *b;
      return *a * *b;
    }
    default:
      return std::nullopt;
  }
}

// v's integer values as floating lanes (index_comparison's operands): an arange where v is
// affine along the loop, else its operands' lanes combined; nullopt when some value on the way
// may not be exact in the lane type.
std::optional<std::string> Emitter::index_lanes(Value v) {
  std::optional<Expr> e = index_value_expr(v);
  if (!e) return std::nullopt;
  Expr x = sym::simplify(*e, env_);
  const int64_t exact = *vec_->elem == DType::Float64 ? (int64_t{1} << 53) : (int64_t{1} << 24);
  sym::Range r = sym::bounds(x, env_);
  if (r.lo == sym::Range::kNegInf || r.hi == sym::Range::kPosInf || r.lo < -exact || r.hi > exact)
    return std::nullopt;
  std::string lane_t = *vec_->elem == DType::Float64 ? "double" : "float";
  if (!mentions_loop_var(x))
    return vec() + "(static_cast<" + lane_t + ">(" + sym::to_cpp(x, env_) + "))";
  std::optional<Expr> step = lane_step(x);
  if (step && step->as_int()) {
    return vec() + "::arange(static_cast<" + lane_t + ">(" + sym::to_cpp(x, env_) +
           "), static_cast<" + lane_t + ">(" + std::to_string(*step->as_int()) + "))";
  }
  std::vector<std::string> ops;
  for (const Value& a : v->args) {
    std::optional<std::string> t = index_lanes(a);
    if (!t) return std::nullopt;
    ops.push_back(*t);
  }
  switch (v.op()) {
    case Op::Cast:
      return ops[0];
    case Op::Neg:
      return "(" + vec() + "(0) - " + ops[0] + ")";
    case Op::Abs:
      return ops[0] + ".abs()";
    case Op::Add:
      return "(" + ops[0] + " + " + ops[1] + ")";
    case Op::Sub:
      return "(" + ops[0] + " - " + ops[1] + ")";
    case Op::Mul:
      return "(" + ops[0] + " * " + ops[1] + ")";
    default:
      return std::nullopt;
  }
}

std::optional<std::string> Emitter::index_comparison(Value v) {
  switch (v.op()) {
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::Eq:
    case Op::Ne:
      break;
    default:
      return std::nullopt;
  }
  if (!index_value_expr(v->args[0]) || !index_value_expr(v->args[1])) return std::nullopt;
  lane_type(vec_->elem ? *vec_->elem : DType::Float32);
  std::optional<std::string> a = index_lanes(v->args[0]), b = index_lanes(v->args[1]);
  if (!a || !b) return std::nullopt;
  return vec_binary_text(v.op(), *a, *b, vec());
}

}  // namespace coil::codegen::cpp
