// Helpers shared by the lowering files: broadcasting, pointwise box construction, masked reads,
// and the index remapping that views are made of (defined in views.cpp).
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

// Masks every load in body with `mask` (loads outside the mask read nothing and yield 0, so the
// body's value there is meaningless: callers select another value with where()).
Value mask_loads(Value body, Value mask);

// The dtype eager converts tensor operands to (torch.result_type of the operands).
DType common_dtype(const Lowering& L, const std::vector<const graph::Arg*>& inputs);

// The node's first `count` positional arguments (fewer when it has fewer).
std::vector<const graph::Arg*> positional(const graph::Node& n, size_t count);

// Normalizes a possibly negative dim against rank.
int64_t wrap_dim(int64_t dim, size_t rank);

// ---- views (views.cpp) ----
// The ranges of index variables v0..v{n-1} over `sizes` (for simplification).
sym::RangeEnv ranges_for(const std::vector<Expr>& sizes);
// A box of shape `sizes` whose element v is x's element at old_idx(v) (indices simplified).
TensorBox remap(const TensorBox& x, std::vector<Expr> sizes, const std::vector<Expr>& old_idx);
// Row-major reinterpretation of x with new sizes (same numel).
TensorBox reshape(const TensorBox& x, const std::vector<Expr>& sizes);
TensorBox slice(const TensorBox& x, size_t dim, Expr start, Expr step,
                const std::vector<Expr>& out_sizes);
TensorBox select(const TensorBox& x, size_t dim, Expr index);
// A static integer argument (NeedsStaticValue when it is symbolic).
int64_t int_of(const Lowering& L, const graph::Arg& a);
// Python's index rules over a possibly symbolic size: a negative index counts from the end
// (wrap_index), and a slice start is then clamped into [0, size] (slice_start). The sign of a
// symbolic index must follow from the symbols' ranges (NeedsStaticValue otherwise).
Expr wrap_index(const Expr& v, const Expr& size);
Expr slice_start(const Expr& v, const Expr& size);

}  // namespace coil::lower
