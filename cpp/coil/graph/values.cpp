// The value types of graph.h: dtype tables, TensorMeta and Arg.
#include "coil/graph/graph.h"

#include <cmath>
#include <iterator>

namespace coil::graph {

const char* dtype_tag(DType d) {
  switch (d) {
    case DType::Bool:
      return "b8";
    case DType::UInt8:
      return "u8";
    case DType::Int8:
      return "i8";
    case DType::Int16:
      return "i16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
    case DType::Complex64:
      return "c64";
    case DType::Complex128:
      return "c128";
    case DType::UInt16:
      return "u16";
    case DType::UInt32:
      return "u32";
    case DType::UInt64:
      return "u64";
  }
  return "?";
}

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  int itemsize;
  const char* cpp_type;
};

// One row per DType, in enum order.
constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "bool", 1, "bool"},
    {DType::UInt8, "uint8", 1, "uint8_t"},
    {DType::Int8, "int8", 1, "int8_t"},
    {DType::Int16, "int16", 2, "int16_t"},
    {DType::Int32, "int32", 4, "int32_t"},
    {DType::Int64, "int64", 8, "int64_t"},
    {DType::Float16, "float16", 2, "coil_half"},
    {DType::BFloat16, "bfloat16", 2, "coil_bf16"},
    {DType::Float32, "float32", 4, "float"},
    {DType::Float64, "float64", 8, "double"},
    {DType::Complex64, "complex64", 8, "void"},
    {DType::Complex128, "complex128", 16, "void"},
    {DType::UInt16, "uint16", 2, "uint16_t"},
    {DType::UInt32, "uint32", 4, "uint32_t"},
    {DType::UInt64, "uint64", 8, "uint64_t"},
};

const DTypeInfo& info(DType d) {
  size_t i = static_cast<size_t>(d);
  if (i >= std::size(kDTypes) || kDTypes[i].dtype != d) {
    throw GraphError("invalid DType value " + std::to_string(i));
  }
  return kDTypes[i];
}

// Floats compare equal when they are the same value; NaN equals NaN and 0.0 differs from -0.0,
// so that equality means "prints and serializes the same".
bool same_float(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace

const char* dtype_name(DType d) {
  return info(d).name;
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const DTypeInfo& row : kDTypes) {
    if (name == row.name) return row.dtype;
  }
  return std::nullopt;
}

int dtype_itemsize(DType d) {
  return info(d).itemsize;
}

bool is_floating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}

bool is_opaque(DType d) {
  return d == DType::Complex64 || d == DType::Complex128 || d == DType::UInt16 ||
         d == DType::UInt32 || d == DType::UInt64;
}

bool is_integral(DType d) {
  return d == DType::UInt8 || d == DType::Int8 || d == DType::Int16 || d == DType::Int32 ||
         d == DType::Int64 || is_wide_unsigned(d);
}

bool is_wide_unsigned(DType d) {
  return d == DType::UInt16 || d == DType::UInt32 || d == DType::UInt64;
}

const char* dtype_cpp_type(DType d) {
  return info(d).cpp_type;
}

sym::Expr TensorMeta::numel() const {
  sym::Expr n = 1;
  for (const sym::Expr& s : sizes) n = n * s;
  return n;
}

bool TensorMeta::operator==(const TensorMeta& o) const {
  return dtype == o.dtype && device == o.device && sizes == o.sizes && strides == o.strides &&
         offset == o.offset;
}

Arg Arg::boolean(bool v) {
  Arg a;
  a.kind = Kind::Bool;
  a.b = v;
  return a;
}

Arg Arg::integer(int64_t v) {
  Arg a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}

Arg Arg::floating(double v) {
  Arg a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}

Arg Arg::str(std::string v) {
  Arg a;
  a.kind = Kind::Str;
  a.s = std::move(v);
  return a;
}

Arg Arg::enum_text(std::string v) {
  Arg a;
  a.kind = Kind::Enum;
  a.s = std::move(v);
  return a;
}

Arg Arg::dtype_of(graph::DType d) {
  Arg a;
  a.kind = Kind::DType;
  a.dtype = d;
  return a;
}

Arg Arg::symbolic(sym::Expr e) {
  Arg a;
  a.kind = Kind::Sym;
  a.sym = e;
  return a;
}

Arg Arg::node_ref(int id) {
  Arg a;
  a.kind = Kind::Node;
  a.node = id;
  return a;
}

Arg Arg::list_of(std::vector<Arg> items) {
  Arg a;
  a.kind = Kind::List;
  a.list = std::move(items);
  return a;
}

bool Arg::operator==(const Arg& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::None:
      return true;
    case Kind::Bool:
      return b == o.b;
    case Kind::Int:
      return i == o.i;
    case Kind::Float:
      return same_float(f, o.f);
    case Kind::Str:
    case Kind::Enum:
      return s == o.s;
    case Kind::DType:
      return dtype == o.dtype;
    case Kind::Sym:
      return sym == o.sym;
    case Kind::Node:
      return node == o.node;
    case Kind::List:
      return list == o.list;
  }
  return false;
}

const Arg* Node::kwarg(const std::string& key) const {
  for (const auto& [k, v] : kwargs) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace coil::graph
