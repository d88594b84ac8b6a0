// Tests for ir/fold.h: folding a body over narrower ranges of its index variables, and the
// points where comparisons of index values change along a loop (loop partitioning).
#include "coil/ir/fold.h"

#include <gtest/gtest.h>

#include <vector>

#include "coil/ir/program.h"

namespace coil::ir {
namespace {

using graph::DType;
using sym::Expr;

const Expr x = Expr::symbol("x1");
const Expr y = Expr::symbol("x0");

Value idx(const Expr& e) {
  return index_expr(e, DType::Int64);
}
Value i64(int64_t v) {
  return int_constant(v, DType::Int64);
}

// torch.cat([a, b], 1) of (n, 512) and (n, 1024): out[y, x] in the shape the lowering gives.
Value cat_body() {
  Value first = binary(Op::Lt, idx(x), i64(512));
  Value a = load("a", DType::Float32, 512 * y + x, first);
  Value b = load("b", DType::Float32, 1024 * y + x - 512, unary(Op::LogicalNot, first));
  return where(first, a, b);
}

sym::RangeEnv within(int64_t lo, int64_t hi) {
  sym::RangeEnv env;
  env.add_index_var(y, Expr(8));
  env.add_index_var(x, Expr(1536));
  env.set_range(x, sym::Range{lo, hi});
  return env;
}

TEST(Fold, EachPieceOfACatReadsOnlyItsInput) {
  Value first = fold_in_ranges(cat_body(), within(0, 511));
  EXPECT_EQ(first, load("a", DType::Float32, 512 * y + x));
  Value second = fold_in_ranges(cat_body(), within(512, 1535));
  EXPECT_EQ(second, load("b", DType::Float32, 1024 * y + x - 512));
  // Over the whole range nothing is decided: the body is unchanged.
  EXPECT_EQ(fold_in_ranges(cat_body(), within(0, 1535)), cat_body());
  EXPECT_EQ(fold_in_ranges(cat_body(), within(500, 600)), cat_body());
}

TEST(Fold, ComparisonsLogicAndIndexValues) {
  sym::RangeEnv env = within(1024, 1535);
  auto fold = [&](Value v) { return fold_in_ranges(v, env); };
  Value t = constant(1, DType::Bool), f = constant(0, DType::Bool);
  EXPECT_EQ(fold(binary(Op::Ge, idx(x), i64(1024))), t);
  EXPECT_EQ(fold(binary(Op::Gt, idx(x), i64(1024))), binary(Op::Gt, idx(x), i64(1024)));
  EXPECT_EQ(fold(binary(Op::Le, idx(x), i64(1535))), t);
  EXPECT_EQ(fold(binary(Op::Eq, idx(sym::floordiv(x, 512)), i64(2))), t);
  EXPECT_EQ(fold(binary(Op::Ne, idx(sym::floordiv(x, 512)), i64(1))), t);
  EXPECT_EQ(fold(binary(Op::Eq, idx(x), i64(7))), f);
  // An arange's start + step * x, computed by value ops.
  Value arange = binary(Op::Add, i64(3), binary(Op::Mul, i64(2), idx(x)));
  EXPECT_EQ(fold(binary(Op::Lt, arange, i64(2000))), f);
  EXPECT_EQ(fold(idx(sym::floordiv(x, 512))), i64(2));
  // false && c, true || c; true && c is c.
  Value c = binary(Op::Lt, idx(y), i64(3));
  EXPECT_EQ(fold(binary(Op::LogicalAnd, binary(Op::Lt, idx(x), i64(5)), c)), f);
  EXPECT_EQ(fold(binary(Op::LogicalOr, binary(Op::Ge, idx(x), i64(5)), c)), t);
  EXPECT_EQ(fold(binary(Op::LogicalAnd, binary(Op::Ge, idx(x), i64(5)), c)), c);
  // A masked load whose mask is always false yields its 0, unread.
  Value masked = load("a", DType::Float32, x, binary(Op::Lt, idx(x), i64(10)));
  EXPECT_EQ(fold(masked), constant(0, DType::Float32));
  // Indices through an indirect symbol are never decided.
  Value raw = load("i", DType::Int64, y);
  Value gathered = idx(ir::indirect(raw, Expr(4096), true));
  EXPECT_EQ(fold(binary(Op::Lt, gathered, i64(0))), binary(Op::Lt, gathered, i64(0)));
}

TEST(Fold, BreakpointsAlongALoop) {
  sym::RangeEnv env = within(0, 1535);
  auto points = [&](Value body) { return index_breakpoints({body}, x, 1536, env); };
  EXPECT_EQ(points(cat_body()), (std::vector<int64_t>{512}));
  // Le changes one past its constant; Eq at both ends; a negative step mirrors it.
  EXPECT_EQ(points(binary(Op::Le, idx(x), i64(99))), (std::vector<int64_t>{100}));
  EXPECT_EQ(points(binary(Op::Eq, idx(x), i64(99))), (std::vector<int64_t>{99, 100}));
  EXPECT_EQ(points(binary(Op::Lt, idx(Expr(1535) - x), i64(35))), (std::vector<int64_t>{1501}));
  // FloorDiv of x by a constant: where it reaches and leaves the compared value.
  EXPECT_EQ(points(binary(Op::Eq, idx(sym::floordiv(x, 512)), i64(1))),
            (std::vector<int64_t>{512, 1024}));
  // A pad's border: x - 3 >= 0 and x - 3 < 40.
  Value in = binary(Op::LogicalAnd, binary(Op::Ge, idx(x - 3), i64(0)),
                    binary(Op::Lt, idx(x - 3), i64(40)));
  EXPECT_EQ(points(in), (std::vector<int64_t>{3, 43}));
  // Points outside (0, extent) and comparisons that depend on another variable too are dropped.
  EXPECT_TRUE(points(binary(Op::Lt, idx(x), i64(4000))).empty());
  EXPECT_TRUE(points(binary(Op::Lt, idx(x), idx(y))).empty());
  EXPECT_TRUE(points(binary(Op::Lt, idx(y), i64(3))).empty());
}

}  // namespace
}  // namespace coil::ir
