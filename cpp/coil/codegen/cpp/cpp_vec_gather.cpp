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

#include "coil/codegen/cpp/cpp_emitter.h"
#include "coil/codegen/cpp/cpp_ops.h"
#include "coil/codegen/cpp/cpp_vec.h"

namespace coil::codegen::cpp {

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

void Emitter::check_lanes(Value v) {
  std::string fn = lane_lambda([&] {
    for (const Value& a : ir::indirect_operands(v)) value(a);
    checked_index(v);
  });
  line("coil_lanes_do(" + fn + ", " + vec_->var + ", " + vec_->count + ");");
  vec_lane_checks_ = true;
}

}  // namespace coil::codegen::cpp
