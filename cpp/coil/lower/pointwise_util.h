// Helpers shared by the lowering files: broadcasting and pointwise box construction.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "coil/lower/lowering.h"

namespace coil::lower {

// The index into `box` for output index `out_idx` under numpy broadcasting to `out_sizes`.
std::vector<Expr> broadcast_index(const TensorBox& box, const std::vector<Expr>& out_sizes,
                                  const std::vector<Expr>& out_idx);

// Reads an argument (tensor or Python number) at output index `idx`, cast to dtype `d`. Tensors
// are first cast to `common` (the op's promoted dtype) when given, as eager converts every tensor
// operand to the common dtype before computing in opmath; Python numbers go straight to `d`.
Value read_operand(const Lowering& L, const graph::Arg& a, const std::vector<Expr>& out_sizes,
                   const std::vector<Expr>& idx, DType d,
                   std::optional<DType> common = std::nullopt);

using PointwiseFn = std::function<Value(const std::vector<Value>&)>;

// A lazy pointwise box with the node's output shape: reads `inputs` broadcast to that shape (cast
// to `common`, then to `compute`), applies fn, and casts to the node's output dtype.
TensorBox make_pointwise(const Lowering& L, const graph::Node& n,
                         const std::vector<const graph::Arg*>& inputs, DType compute,
                         const PointwiseFn& fn, std::optional<DType> common = std::nullopt);

// Origins of lazy inputs (what a pointwise body inlines).
std::set<std::string> inlined_origins(const Lowering& L,
                                      const std::vector<const graph::Arg*>& inputs);

// The dtype eager converts tensor operands to (torch.result_type of the operands).
DType common_dtype(const Lowering& L, const std::vector<const graph::Arg*>& inputs);

// The node's first `count` positional arguments (fewer when it has fewer).
std::vector<const graph::Arg*> positional(const graph::Node& n, size_t count);

// Normalizes a possibly negative dim against rank.
int64_t wrap_dim(int64_t dim, size_t rank);

}  // namespace coil::lower
