#pragma once
// Folding a kernel body where its index variables are known to lie in narrower ranges: what
// loop partitioning (codegen/cpp: a loop split where a concatenation's pieces meet) needs so
// that each piece of a loop computes only its own part, without per-element selects.

#include <cstdint>
#include <vector>

#include "coil/ir/scalar.h"
#include "coil/sym/expr.h"

namespace coil::ir {

// root with what env's ranges decide folded: a comparison of index values (IndexExpr without
// indirect symbols, integer constants) whose outcome is the same over the ranges becomes a bool
// constant; logical ops, where() and masked loads with constant operands fold after it (a load
// whose mask is always true becomes a plain load; always false, its 0); an IndexExpr that is one
// value over the ranges becomes that constant. Nothing folds that the ranges do not prove.
Value fold_in_ranges(Value root, const sym::RangeEnv& env);

// Where comparisons of index values in the bodies can change outcome along `var` within
// [0, extent): the points p (0 < p < extent, sorted, distinct) such that splitting the range
// before each p leaves every comparison whose index depends on var only through var (affine in
// it, or a FloorDiv of an affine form by a constant) constant on each piece. Empty when none.
std::vector<int64_t> index_breakpoints(const std::vector<Value>& roots, const sym::Expr& var,
                                       int64_t extent, const sym::RangeEnv& env);

}  // namespace coil::ir
