// Type promotion (torch.result_type for the dtypes coil handles) and the dtype arithmetic of a
// dtype happens in (opmath): the rules every lowering's result dtypes follow.
#include <optional>
#include <stdexcept>

#include "coil/lower/lowering.h"

namespace coil::lower {

namespace {

int category(DType d) {
  if (d == DType::Bool) return 0;
  if (graph::is_floating(d)) return 2;
  return 1;
}

// torch.promote_types for the dtypes coil handles.
DType promote_pair(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // bfloat16 and float16 promote to float32; otherwise the wider float.
    bool a_half = a == DType::BFloat16 || a == DType::Float16;
    bool b_half = b == DType::BFloat16 || b == DType::Float16;
    if (a_half && b_half) return DType::Float32;
    return graph::dtype_itemsize(a) >= graph::dtype_itemsize(b) ? a : b;
  }
  // Integers: uint8 with a signed type promotes to a signed type that holds both.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return graph::dtype_itemsize(a) >= graph::dtype_itemsize(b) ? a : b;
}

}  // namespace

DType promote(const std::vector<Operand>& operands) {
  // Each priority class (tensors, 0-d tensors, scalars) promotes within itself; a lower-priority
  // class only matters when it is of a higher category than everything above it.
  std::optional<DType> result;
  for (Operand::Kind kind :
       {Operand::Kind::Tensor, Operand::Kind::ZeroDimTensor, Operand::Kind::Scalar}) {
    std::optional<DType> cls;
    for (const Operand& o : operands) {
      if (o.kind != kind) continue;
      DType d = o.dtype;
      if (kind == Operand::Kind::Scalar) {
        // Python scalars: bool stays bool, int -> int64, float -> the default dtype float32.
        d = category(d) == 2 ? DType::Float32 : (category(d) == 1 ? DType::Int64 : DType::Bool);
      }
      cls = cls ? promote_pair(*cls, d) : d;
    }
    if (!cls) continue;
    if (!result) {
      result = cls;
    } else if (category(*cls) > category(*result)) {
      // Scalars were mapped to their category's default dtype above, so a float scalar with
      // integer tensors gives float32, not float64.
      result = *cls;
    }
  }
  if (!result) throw std::logic_error("promote: no operands");
  return *result;
}

DType opmath(DType d) {
  if (d == DType::BFloat16 || d == DType::Float16) return DType::Float32;
  return d;
}

}  // namespace coil::lower
