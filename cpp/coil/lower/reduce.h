// The reduction builder the reduction and normalization lowerings share (defined in
// reduction.cpp): which dims a `dim` argument names, and reduce(), which makes a reduction buffer
// (or, for a few elements, a pointwise combination) of a box over some of its dims.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "coil/lower/lowering.h"

namespace coil::lower {

struct ReduceSpec {
  std::vector<int64_t> dims;  // sorted, unique, non-negative
  bool keepdim = false;
};

// Reads the `dim` argument: an int, a list of ints, or None / [] (all dims).
std::vector<int64_t> reduce_dims(const Lowering& L, const graph::Arg* a, size_t rank);

// Whether boolean argument i (or keyword `name`) of n is given and true.
bool flag(const Lowering& L, const graph::Node& n, size_t i, const std::string& name);

// Whether dim d is one of dims.
bool has_dim(const std::vector<int64_t>& dims, int64_t d);

// Maps the loaded element (already cast to acc) at x's index to the value reduced.
using ReducePre = std::function<Value(Value, const std::vector<Expr>&)>;

// Reduces x over spec.dims with `type`. The result box has the keepdim shape when spec.keepdim,
// else the reduced shape; its dtype is `out`.
TensorBox reduce(Lowering& L, const TensorBox& x, const ReduceSpec& spec, ir::ReductionType type,
                 DType acc, DType out, const ReducePre& pre = nullptr);

// The accumulator dtype of a reduction with output dtype `out`.
DType acc_dtype(DType in, DType out);

// Casts a box (typically an fp32 reduction result) to the node's output dtype.
TensorBox with_dtype(TensorBox b, DType d);

}  // namespace coil::lower
