// Tests for ir/scalar.h: interning, dtype checks, constant casts, and the walks over a body DAG
// (topo_order, substitute_indices, replace_loads, loaded_buffers, count_ops, body_to_text).
#include "coil/ir/scalar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "coil/ir/program.h"

namespace coil::ir {
namespace {

using graph::DType;
using sym::Expr;

const Expr v0 = index_var(0);
const Expr v1 = index_var(1);

Value f32_load(const std::string& buf, const Expr& index) {
  return load(buf, DType::Float32, index);
}

// The message of the std::logic_error f throws ("" when it does not throw).
template <typename F>
std::string logic_error_of(F&& f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

// ---- interning ----

TEST(Scalar, SameExpressionBuiltTwiceIsTheSameValue) {
  auto build = [] {
    Value a = f32_load("a", v0 * 16 + v1);
    Value b = f32_load("b", v1);
    return unary(Op::Exp, add(mul(a, constant(2.0, DType::Float32)), b));
  };
  Value first = build();
  Value second = build();
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.get(), second.get());
  // Sub-DAGs are shared too: the operand of both exps is one node.
  EXPECT_EQ(first->args[0], second->args[0]);
}

TEST(Scalar, ComputesInexactlyNamesFunctionsWhoseBitsDependOnTheirImplementation) {
  Value x = load("x", DType::Float32, Expr::symbol("v0"));
  Value y = load("y", DType::Float32, Expr::symbol("v0"));
  // IEEE's correctly rounded operations, comparisons and selection give one answer anywhere.
  EXPECT_FALSE(computes_inexactly(add(mul(x, y), unary(Op::Sqrt, y))));
  EXPECT_FALSE(computes_inexactly(where(binary(Op::Lt, x, y), div(x, y), unary(Op::Rsqrt, x))));
  // exp, tanh, pow: libm, libmvec and SLEEF may differ in the last place.
  EXPECT_TRUE(computes_inexactly(add(unary(Op::Exp, x), y)));
  EXPECT_TRUE(computes_inexactly(cast(unary(Op::Tanh, x), DType::Float64)));
  EXPECT_TRUE(computes_inexactly(binary(Op::Pow, x, y)));
}

TEST(Scalar, StructurallyDifferentValuesDiffer) {
  Value a = f32_load("a", v0);
  EXPECT_NE(a, f32_load("a", v1));              // index
  EXPECT_NE(a, f32_load("b", v0));              // buffer
  EXPECT_NE(a, load("a", DType::Float64, v0));  // dtype
  EXPECT_NE(add(a, a), mul(a, a));              // op
  Value b = f32_load("b", v0);
  EXPECT_NE(sub(a, b), sub(b, a));  // operand order
  EXPECT_NE(constant(1.0, DType::Float32), constant(1.0, DType::Float64));
  EXPECT_NE(int_constant(1, DType::Int32), int_constant(1, DType::Int64));
  EXPECT_NE(index_expr(v0, DType::Int64), index_expr(v0, DType::Int32));
}

TEST(Scalar, FloatConstantsInternBitwise) {
  // -0.0 and 0.0 compare equal as doubles but are different constants (1/x differs).
  EXPECT_NE(constant(0.0, DType::Float32), constant(-0.0, DType::Float32));
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(constant(nan, DType::Float32), constant(nan, DType::Float32));
  EXPECT_TRUE(std::isnan(constant(nan, DType::Float32)->fvalue));
}

TEST(Scalar, ConstantPayloads) {
  Value f = constant(2.5, DType::Float32);
  EXPECT_EQ(f.op(), Op::Constant);
  EXPECT_EQ(f->fvalue, 2.5);
  Value i = int_constant(-7, DType::Int64);
  EXPECT_EQ(i->ivalue, -7);
  EXPECT_EQ(constant(3.0, DType::Int32)->ivalue, 3);
  EXPECT_EQ(constant(0.5, DType::Bool)->ivalue, 1);  // any nonzero is true
  EXPECT_EQ(int_constant(5, DType::Bool)->ivalue, 1);
  // An integer constant of a float dtype is the float constant.
  EXPECT_EQ(int_constant(3, DType::Float32), constant(3.0, DType::Float32));
  EXPECT_TRUE(is_constant(f));
  EXPECT_FALSE(is_constant(f32_load("a", v0)));
  EXPECT_TRUE(is_float_constant(f, 2.5));
  EXPECT_TRUE(is_float_constant(i, -7.0));
  EXPECT_FALSE(is_float_constant(f, 2.0));
}

// ---- dtype discipline ----

TEST(Scalar, BinaryOnMismatchedDtypesThrows) {
  Value a = f32_load("a", v0);
  Value h = load("h", DType::Float16, v0);
  std::string msg = logic_error_of([&] { add(a, h); });
  EXPECT_NE(msg.find("binary add: operand dtypes differ (float32 vs float16)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cast first"), std::string::npos) << msg;
  EXPECT_THROW(binary(Op::Lt, a, index_expr(v0, DType::Int64)), std::logic_error);
  EXPECT_NO_THROW(add(a, cast(h, DType::Float32)));
}

TEST(Scalar, BuildersCheckTheirOperands) {
  Value a = f32_load("a", v0);
  Value flag = binary(Op::Lt, a, constant(0.0, DType::Float32));
  EXPECT_NE(logic_error_of([&] { where(a, a, a); }).find("condition must be bool"),
            std::string::npos);
  EXPECT_NE(logic_error_of([&] {
              where(flag, a, int_constant(0, DType::Int64));
            }).find("branch dtypes differ"),
            std::string::npos);
  EXPECT_NE(logic_error_of([&] { load("m", DType::Float32, v0, a); }).find("mask must be bool"),
            std::string::npos);
  EXPECT_NE(logic_error_of([&] { unary(Op::Add, a); }).find("not a unary op: add"),
            std::string::npos);
  EXPECT_NE(logic_error_of([&] { binary(Op::Exp, a, a); }).find("not a binary op: exp"),
            std::string::npos);
}

TEST(Scalar, ComparisonsAndLogicProduceBool) {
  Value a = f32_load("a", v0);
  Value b = f32_load("b", v0);
  for (Op op : {Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne}) {
    EXPECT_EQ(binary(op, a, b).dtype(), DType::Bool) << op_name(op);
  }
  EXPECT_EQ(unary(Op::IsNan, a).dtype(), DType::Bool);
  EXPECT_EQ(unary(Op::IsInf, a).dtype(), DType::Bool);
  Value t = binary(Op::Lt, a, b);
  EXPECT_EQ(unary(Op::LogicalNot, t).dtype(), DType::Bool);
  EXPECT_EQ(binary(Op::LogicalAnd, t, t).dtype(), DType::Bool);
  // Arithmetic keeps its operands' dtype.
  EXPECT_EQ(add(a, b).dtype(), DType::Float32);
  EXPECT_EQ(unary(Op::Neg, index_expr(v0, DType::Int64)).dtype(), DType::Int64);
}

TEST(Scalar, WhereWithEqualBranchesIsTheBranch) {
  Value a = f32_load("a", v0);
  Value t = binary(Op::Gt, a, constant(0.0, DType::Float32));
  EXPECT_EQ(where(t, a, a), a);
  Value w = where(t, a, constant(0.0, DType::Float32));
  EXPECT_EQ(w.op(), Op::Where);
  EXPECT_EQ(w.dtype(), DType::Float32);
}

// ---- casts ----

TEST(Scalar, CastOfConstantsFolds) {
  Value c = cast(constant(2.5, DType::Float32), DType::Float64);
  EXPECT_EQ(c, constant(2.5, DType::Float64));
  // float -> int truncates toward zero, as C++ and torch do.
  EXPECT_EQ(cast(constant(2.5, DType::Float32), DType::Int64), int_constant(2, DType::Int64));
  EXPECT_EQ(cast(constant(-2.5, DType::Float32), DType::Int64), int_constant(-2, DType::Int64));
  EXPECT_EQ(cast(int_constant(7, DType::Int64), DType::Float32), constant(7.0, DType::Float32));
  EXPECT_EQ(cast(int_constant(7, DType::Int64), DType::Int32), int_constant(7, DType::Int32));
  EXPECT_EQ(cast(int_constant(7, DType::Int64), DType::Bool), int_constant(1, DType::Bool));
  EXPECT_EQ(cast(int_constant(0, DType::Int64), DType::Bool), int_constant(0, DType::Bool));
  EXPECT_EQ(cast(int_constant(1, DType::Bool), DType::Float32), constant(1.0, DType::Float32));
  // bool(NaN) is true.
  EXPECT_EQ(cast(constant(std::nan(""), DType::Float32), DType::Bool),
            int_constant(1, DType::Bool));
}

TEST(Scalar, CastOfAValueIsANodeUnlessTheDtypeIsTheSame) {
  Value a = f32_load("a", v0);
  EXPECT_EQ(cast(a, DType::Float32), a);
  Value c = cast(a, DType::BFloat16);
  EXPECT_EQ(c.op(), Op::Cast);
  EXPECT_EQ(c.dtype(), DType::BFloat16);
  ASSERT_EQ(c->args.size(), 1u);
  EXPECT_EQ(c->args[0], a);
  EXPECT_EQ(cast(a, DType::BFloat16), c);
}

// ---- walks ----

TEST(Scalar, TopoOrderPutsOperandsFirst) {
  Value a = f32_load("a", v0);
  Value b = f32_load("b", v0);
  Value s = add(a, b);
  Value root = mul(s, unary(Op::Exp, s));
  std::vector<Value> order = topo_order({root});
  ASSERT_EQ(order.size(), 5u);  // a, b, s, exp(s), root: s once although used twice
  EXPECT_EQ(order.back(), root);
  std::set<const ScalarNode*> seen;
  for (const Value& v : order) {
    for (const Value& arg : v->args) EXPECT_TRUE(seen.count(arg.get())) << op_name(v.op());
    EXPECT_TRUE(seen.insert(v.get()).second) << "visited twice";
  }
  // Deterministic: operands in argument order, depth first.
  EXPECT_EQ(order[0], a);
  EXPECT_EQ(order[1], b);
  EXPECT_EQ(order[2], s);
}

TEST(Scalar, TopoOrderOfSeveralRootsVisitsSharedNodesOnce) {
  Value a = f32_load("a", v0);
  Value r1 = unary(Op::Exp, a);
  Value r2 = unary(Op::Log, a);
  std::vector<Value> order = topo_order({r1, Value(), r2, r1});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], a);
  EXPECT_EQ(order[1], r1);
  EXPECT_EQ(order[2], r2);
  EXPECT_TRUE(topo_order({}).empty());
}

TEST(Scalar, TopoOrderHandlesDeepChainsWithoutRecursion) {
  Value v = f32_load("a", v0);
  Value one = constant(1.0, DType::Float32);
  for (int i = 0; i < 100000; ++i) v = add(v, one);
  EXPECT_EQ(topo_order({v}).size(), 100002u);
  EXPECT_EQ(count_ops(v), 100000);
}

TEST(Scalar, SubstituteIndicesIsSimultaneous) {
  Value a = f32_load("a", v0 * 16 + v1);
  Value i = index_expr(v0, DType::Int64);
  Value root = add(a, cast(i, DType::Float32));
  sym::ExprMap swap = {{v0, v1}, {v1, v0}};
  Value swapped = substitute_indices(root, swap);
  Value expected =
      add(f32_load("a", v1 * 16 + v0), cast(index_expr(v1, DType::Int64), DType::Float32));
  EXPECT_EQ(swapped, expected);
  // Substituting back gives the original node.
  EXPECT_EQ(substitute_indices(swapped, swap), root);
}

TEST(Scalar, SubstituteIndicesRewritesMasks) {
  Value mask = binary(Op::Lt, index_expr(v0, DType::Int64), int_constant(4, DType::Int64));
  Value root = load("a", DType::Float32, v0, mask);
  Expr x0 = Expr::symbol("x0");
  Value out = substitute_indices(root, {{v0, x0 + 2}});
  Value expected_mask =
      binary(Op::Lt, index_expr(x0 + 2, DType::Int64), int_constant(4, DType::Int64));
  EXPECT_EQ(out, load("a", DType::Float32, x0 + 2, expected_mask));
}

TEST(Scalar, SubstituteIndicesWithoutMatchesKeepsTheValue) {
  Value root = unary(Op::Exp, f32_load("a", v0));
  EXPECT_EQ(substitute_indices(root, {{v1, Expr(3)}}), root);
  Value c = constant(1.0, DType::Float32);
  EXPECT_EQ(substitute_indices(c, {{v0, Expr(3)}}), c);
}

TEST(Scalar, ReplaceLoadsRewritesOnlyTheNamedBuffer) {
  Value a = f32_load("a", v0);
  Value b = f32_load("b", v0);
  Value root = add(unary(Op::Exp, a), b);
  int calls = 0;
  Value out = replace_loads(root, "a", [&](Value old, Value mask) {
    ++calls;
    EXPECT_EQ(old, a);
    EXPECT_FALSE(mask);
    return f32_load("c", old->index + 1);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out, add(unary(Op::Exp, f32_load("c", v0 + 1)), b));
  // No load of the buffer: the same Value comes back.
  EXPECT_EQ(replace_loads(root, "zzz", [](Value old, Value) { return old; }), root);
}

TEST(Scalar, ReplaceLoadsPassesTheRebuiltMask) {
  Value m = binary(Op::Gt, f32_load("m", v0), constant(0.0, DType::Float32));
  Value root = load("a", DType::Float32, v0, m);
  Value out = replace_loads(root, "m", [](Value old, Value) { return f32_load("n", old->index); });
  Value new_mask = binary(Op::Gt, f32_load("n", v0), constant(0.0, DType::Float32));
  EXPECT_EQ(out, load("a", DType::Float32, v0, new_mask));
  Value seen_mask;
  replace_loads(out, "a", [&](Value old, Value mask) {
    seen_mask = mask;
    return old;
  });
  EXPECT_EQ(seen_mask, new_mask);
}

TEST(Scalar, LoadedBuffersAreDistinctInFirstUseOrder) {
  Value root = add(add(f32_load("y", v0), f32_load("x", v0)), f32_load("y", v1));
  EXPECT_EQ(loaded_buffers(root), (std::vector<std::string>{"y", "x"}));
  EXPECT_TRUE(loaded_buffers(constant(1.0, DType::Float32)).empty());
  // Loads inside masks count.
  Value mask = binary(Op::Gt, f32_load("m", v0), constant(0.0, DType::Float32));
  EXPECT_EQ(loaded_buffers(load("a", DType::Float32, v0, mask)),
            (std::vector<std::string>{"m", "a"}));
}

TEST(Scalar, CountOpsCountsDistinctNonLeafNodes) {
  Value a = f32_load("a", v0);
  Value one = constant(1.0, DType::Float32);
  EXPECT_EQ(count_ops(a), 0);
  EXPECT_EQ(count_ops(one), 0);
  EXPECT_EQ(count_ops(index_expr(v0, DType::Int64)), 0);
  Value s = add(a, one);
  EXPECT_EQ(count_ops(s), 1);
  // s is shared: mul(s, exp(s)) has three ops, not four.
  EXPECT_EQ(count_ops(mul(s, unary(Op::Exp, s))), 3);
  EXPECT_EQ(count_ops(cast(a, DType::Float64)), 1);
}

TEST(Scalar, BodyToText) {
  Value x = f32_load("buf0", v0 * 16 + v1);
  Value y = f32_load("buf1", v1);
  Value body = mul(unary(Op::Exp, add(x, y)), constant(0.5, DType::Float32));
  EXPECT_EQ(body_to_text({body}),
            "tmp0 = load(buf0, 16*v0 + v1) : f32\n"
            "tmp1 = load(buf1, v1) : f32\n"
            "tmp2 = add(tmp0, tmp1) : f32\n"
            "tmp3 = exp(tmp2) : f32\n"
            "tmp4 = constant(0.5) : f32\n"
            "tmp5 = mul(tmp3, tmp4) : f32\n");
}

TEST(Scalar, BodyToTextOfMasksIndicesAndCasts) {
  Value in_range = binary(Op::Lt, index_expr(v0, DType::Int64), int_constant(8, DType::Int64));
  Value x = load("buf2", DType::BFloat16, v0 - 8, in_range);
  Value body = where(in_range, cast(x, DType::Float32), constant(-1.0, DType::Float32));
  EXPECT_EQ(body_to_text({body}),
            "tmp0 = index(v0) : i64\n"
            "tmp1 = constant(8) : i64\n"
            "tmp2 = lt(tmp0, tmp1) : b8\n"
            "tmp3 = load(buf2, v0 - 8, mask=tmp2) : bf16\n"
            "tmp4 = cast(tmp3) : f32\n"
            "tmp5 = constant(-1) : f32\n"
            "tmp6 = where(tmp2, tmp4, tmp5) : f32\n");
}

TEST(Scalar, OpTables) {
  EXPECT_STREQ(op_name(Op::Div), "truediv");
  EXPECT_STREQ(op_name(Op::Where), "where");
  EXPECT_EQ(op_arity(Op::Load), -1);
  EXPECT_EQ(op_arity(Op::Exp), 1);
  EXPECT_EQ(op_arity(Op::Atan2), 2);
  EXPECT_EQ(op_arity(Op::Where), 3);
}

}  // namespace
}  // namespace coil::ir

namespace coil::ir {
namespace {

// ---- indirect indices ----

const Expr w0 = index_var(0);
const Expr w1 = index_var(1);

Value i64_load(const std::string& buf, const Expr& index) {
  return load(buf, DType::Int64, index);
}

TEST(Indirect, OneSymbolPerValueSizeAndWrap) {
  Value i = i64_load("idx", w0);
  Expr s = indirect(i, 10, false);
  EXPECT_EQ(s, indirect(i, 10, false));
  EXPECT_NE(s, indirect(i, 11, false));
  EXPECT_NE(s, indirect(i, 10, true));
  EXPECT_NE(s, indirect(i64_load("idx", w1), 10, false));
  ASSERT_NE(indirect_of(s), nullptr);
  EXPECT_EQ(indirect_of(s)->value, i);
  EXPECT_EQ(indirect_of(s)->size, Expr(10));
  EXPECT_EQ(indirect_of(w0), nullptr);  // an index variable is not indirect
  // An int32 index is read as int64.
  Value i32 = load("idx32", DType::Int32, w0);
  EXPECT_EQ(indirect_of(indirect(i32, 4, false))->value, cast(i32, DType::Int64));
  EXPECT_NE(logic_error_of([] { indirect(f32_load("x", w0), 4, false); }), "");
}

TEST(Indirect, SymbolNamesComeFromStructureNotAddresses) {
  // The same name in every process (kernel sources, ordered by these names, are content-hashed):
  // a change here means generated code changes too.
  EXPECT_EQ(indirect(i64_load("idx", w0), 10, false).name(), "indc61b5e32012dfd56");
}

TEST(Indirect, ALoadCarriesTheValuesOfItsIndirectSymbols) {
  Value i = i64_load("idx", w0);
  Value g = f32_load("w", indirect(i, 10, false) * 16 + w1);
  ASSERT_EQ(indirect_operands(g).size(), 1u);
  EXPECT_EQ(indirect_operands(g)[0], i);
  EXPECT_FALSE(load_mask(g));
  // Walks see the dependency: the index load comes first, both buffers are read.
  std::vector<Value> order = topo_order({g});
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], i);
  EXPECT_EQ(loaded_buffers(g), (std::vector<std::string>{"idx", "w"}));
  EXPECT_EQ(count_ops(g), 0);
  EXPECT_EQ(body_to_text({g}),
            "tmp0 = load(idx, v0) : i64\n"
            "tmp1 = load(w, 16*tmp0 + v1, check 0 <= tmp0 < 10) : f32\n");
}

TEST(Indirect, AMaskedLoadKeepsItsMaskFirst) {
  Value i = i64_load("idx", w0);
  Value m = binary(Op::Lt, index_expr(w1, DType::Int64), int_constant(3, DType::Int64));
  Value g = load("w", DType::Float32, indirect(i, 10, true) * 16 + w1, m);
  EXPECT_EQ(load_mask(g), m);
  ASSERT_EQ(indirect_operands(g).size(), 1u);
  EXPECT_EQ(indirect_operands(g)[0], i);
}

TEST(Indirect, SubstitutionRebuildsTheIndexValueAndItsSymbol) {
  Value i = i64_load("idx", w0);
  Value g = unary(Op::Exp, f32_load("w", indirect(i, 10, false) * 16 + w1));
  sym::ExprMap repl = {{w0, w1 * 3}, {w1, w0}};
  Value h = substitute_indices(g, repl);
  Value moved = i64_load("idx", w1 * 3);
  EXPECT_EQ(h, unary(Op::Exp, f32_load("w", indirect(moved, 10, false) * 16 + w0)));
  EXPECT_EQ(indirect_operands(h->args[0])[0], moved);
  // Nothing to substitute: the same node.
  EXPECT_EQ(substitute_indices(g, {{index_var(5), w0}}), g);
}

TEST(Indirect, AProducerInlinedAtAGatheredPositionCarriesTheIndex) {
  // exp(x)[idx]: x's body read with v0 -> an indirect symbol.
  Value body = unary(Op::Exp, f32_load("x", w0 * 4 + w1));
  Expr at = indirect(i64_load("idx", w0), 6, true);
  Value g = substitute_indices(body, {{w0, at}});
  EXPECT_EQ(body_to_text({g}),
            "tmp0 = load(idx, v0) : i64\n"
            "tmp1 = load(x, 4*tmp0 + v1, check -6 <= tmp0 < 6) : f32\n"
            "tmp2 = exp(tmp1) : f32\n");
}

TEST(Indirect, ReplacingTheIndexBufferRenamesTheSymbol) {
  Value g = f32_load("w", indirect(i64_load("idx", w0), 10, false) + w1);
  Value h = replace_loads(g, "idx",
                          [](Value old, Value) { return add(old, int_constant(1, DType::Int64)); });
  Value plus = add(i64_load("idx", w0), int_constant(1, DType::Int64));
  EXPECT_EQ(h, f32_load("w", indirect(plus, 10, false) + w1));
}

TEST(Indirect, GuardKeepsAnIndexWhoseSymbolIsNotInAnyLoad) {
  Value x = f32_load("x", w1);
  Expr s = indirect(i64_load("idx", w0), 5, false);
  Value g = guard_missing(x, {s});
  EXPECT_EQ(g.op(), Op::Guard);
  EXPECT_EQ(body_to_text({g}),
            "tmp0 = load(x, v1) : f32\n"
            "tmp1 = load(idx, v0) : i64\n"
            "tmp2 = guard(tmp0, check 0 <= tmp1 < 5) : f32\n");
  // A symbol some load already checks needs no guard.
  Value read = f32_load("x", s * 4 + w1);
  EXPECT_EQ(guard_missing(read, {s}), read);
  EXPECT_EQ(guard(x, w0), x);  // no indirect symbols: nothing to check
}

TEST(Indirect, AnIndexExprMayBeIndirect) {
  Expr s = indirect(i64_load("idx", w0), 7, true);
  Value e = index_expr(s * 2, DType::Int64);
  EXPECT_EQ(indirect_operands(e).size(), 1u);
  EXPECT_EQ(body_to_text({e}),
            "tmp0 = load(idx, v0) : i64\n"
            "tmp1 = index(2*tmp0, check -7 <= tmp0 < 7) : i64\n");
}

}  // namespace
}  // namespace coil::ir
