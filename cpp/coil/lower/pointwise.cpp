// Lowerings of elementwise ops: arithmetic, comparisons, logic, unary math, activations, casts.
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

std::vector<Expr> broadcast_index(const TensorBox& box, const std::vector<Expr>& out_sizes,
                                  const std::vector<Expr>& out_idx) {
  size_t rank = box.rank();
  if (rank > out_sizes.size())
    throw std::logic_error("broadcast: input has more dims than the output");
  std::vector<Expr> idx(rank);
  size_t lead = out_sizes.size() - rank;
  for (size_t j = 0; j < rank; ++j) {
    bool broadcast = box.sizes[j] == Expr(1) && out_sizes[lead + j] != Expr(1);
    idx[j] = broadcast ? Expr(0) : out_idx[lead + j];
  }
  return idx;
}

Value read_operand(const Lowering& L, const Arg& a, const std::vector<Expr>& out_sizes,
                   const std::vector<Expr>& idx, DType d, std::optional<DType> common) {
  if (a.kind != Arg::Kind::Node) return L.scalar(a, d);
  const TensorBox& b = L.box(a);
  Value v = b.load(broadcast_index(b, out_sizes, idx));
  if (common) v = ir::cast(v, *common);
  return ir::cast(v, d);
}

std::set<std::string> inlined_origins(const Lowering& L, const std::vector<const Arg*>& inputs) {
  std::set<std::string> out;
  for (const Arg* a : inputs) {
    if (a && L.is_tensor(*a)) {
      const auto& o = L.box(*a).origins;
      out.insert(o.begin(), o.end());
    }
  }
  return out;
}

TensorBox make_pointwise(const Lowering& L, const Node& n, const std::vector<const Arg*>& inputs,
                         DType compute, const PointwiseFn& fn, std::optional<DType> common) {
  const graph::TensorMeta& m = L.meta(n);
  std::vector<Expr> idx = ir::index_vars(m.rank());
  std::vector<Value> vals;
  for (const Arg* a : inputs) vals.push_back(read_operand(L, *a, m.sizes, idx, compute, common));
  TensorBox out;
  out.dtype = m.dtype;
  out.device = m.device;
  out.sizes = m.sizes;
  out.body = ir::cast(fn(vals), m.dtype);
  out.origins = inlined_origins(L, inputs);
  return out;
}

Value mask_loads(Value body, Value mask) {
  std::vector<std::string> bufs = ir::loaded_buffers(body);
  for (const std::string& b : bufs) {
    body = ir::replace_loads(body, b, [&](Value old, Value old_mask) {
      Value m = old_mask ? ir::binary(ir::Op::LogicalAnd, old_mask, mask) : mask;
      return ir::load(b, old.dtype(), old->index, m);
    });
  }
  return body;
}

int64_t wrap_dim(int64_t dim, size_t rank) {
  int64_t r = static_cast<int64_t>(rank == 0 ? 1 : rank);
  if (dim < -r || dim >= r) throw std::logic_error("dim out of range");
  return dim < 0 ? dim + r : dim;
}

DType common_dtype(const Lowering& L, const std::vector<const Arg*>& inputs) {
  std::vector<Operand> ops;
  for (const Arg* a : inputs) ops.push_back(L.operand(*a));
  return promote(ops);
}

std::vector<const Arg*> positional(const Node& n, size_t count) {
  std::vector<const Arg*> out;
  for (size_t i = 0; i < count && i < n.args.size(); ++i) out.push_back(&n.args[i]);
  return out;
}

namespace {

Value fconst(double v, DType d) {
  return ir::constant(v, d);
}

// erf-based GELU: x * 0.5 * (1 + erf(x / sqrt(2))).
Value gelu_erf(Value x) {
  DType d = x.dtype();
  Value inner = ir::unary(Op::Erf, ir::mul(x, fconst(M_SQRT1_2, d)));
  return ir::mul(ir::mul(x, fconst(0.5, d)), ir::add(fconst(1.0, d), inner));
}

// tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
Value gelu_tanh(Value x) {
  DType d = x.dtype();
  Value cube = ir::mul(ir::mul(x, x), x);
  Value inner =
      ir::mul(fconst(std::sqrt(2.0 / M_PI), d), ir::add(x, ir::mul(fconst(0.044715, d), cube)));
  return ir::mul(ir::mul(fconst(0.5, d), x), ir::add(fconst(1.0, d), ir::unary(Op::Tanh, inner)));
}

// The dtype an op computes in: float math for float outputs, the promoted input type otherwise.
DType compute_dtype_for_output(const Lowering& L, const Node& n) {
  return opmath(L.meta(n).dtype);
}

DType promoted_inputs(const Lowering& L, const std::vector<const Arg*>& inputs) {
  std::vector<Operand> ops;
  for (const Arg* a : inputs) ops.push_back(L.operand(*a));
  return opmath(promote(ops));
}

// Registers `target` as op(inputs...) computed in the output's opmath dtype.
void reg_math(Registry& r, const std::string& target, size_t arity, PointwiseFn fn) {
  r[target] = [arity, fn](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    auto inputs = positional(n, arity);
    return {
        make_pointwise(L, n, inputs, compute_dtype_for_output(L, n), fn, common_dtype(L, inputs))};
  };
}

void reg_unary(Registry& r, const std::string& name, Op op) {
  reg_math(r, "aten." + name + ".default", 1,
           [op](const std::vector<Value>& v) { return ir::unary(op, v[0]); });
}

// Comparisons compute in the promoted input dtype and produce bool.
void reg_compare(Registry& r, const std::string& name, Op op) {
  for (const char* overload : {".Tensor", ".Scalar"}) {
    r["aten." + name + overload] = [op](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      auto inputs = positional(n, 2);
      return {make_pointwise(
          L, n, inputs, promoted_inputs(L, inputs),
          [op](const std::vector<Value>& v) { return ir::binary(op, v[0], v[1]); },
          common_dtype(L, inputs))};
    };
  }
}

// Logical ops read their operands as bool.
void reg_logical(Registry& r, const std::string& name, Op op) {
  r["aten." + name + ".default"] = [op](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    auto inputs = positional(n, 2);
    return {make_pointwise(L, n, inputs, DType::Bool, [op](const std::vector<Value>& v) {
      return ir::binary(op, v[0], v[1]);
    })};
  };
}

// add/sub with an optional alpha: a + alpha * b.
void reg_add_sub(Registry& r, const std::string& name, Op op) {
  for (const char* overload : {".Tensor", ".Scalar"}) {
    r["aten." + name + overload] = [op](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      std::vector<const Arg*> inputs = positional(n, 2);
      const Arg* alpha = L.arg(n, 2, "alpha");
      if (alpha && !alpha->is_none()) inputs.push_back(alpha);
      DType d = compute_dtype_for_output(L, n);
      return {make_pointwise(
          L, n, inputs, d,
          [op](const std::vector<Value>& v) {
            Value b = v.size() > 2 ? ir::mul(v[1], v[2]) : v[1];
            return ir::binary(op, v[0], b);
          },
          common_dtype(L, positional(n, 2)))};
    };
  }
}

void reg_binary(Registry& r, const std::string& name, Op op) {
  for (const char* overload : {".Tensor", ".Scalar", ".default"}) {
    reg_math(r, "aten." + name + overload, 2,
             [op](const std::vector<Value>& v) { return ir::binary(op, v[0], v[1]); });
  }
}

}  // namespace

void register_pointwise(Registry& r) {
  reg_add_sub(r, "add", Op::Add);
  reg_add_sub(r, "sub", Op::Sub);
  reg_binary(r, "mul", Op::Mul);
  reg_binary(r, "div", Op::Div);
  // Of two equal values (0.0 and -0.0) eager's maximum and minimum return the first; coil's
  // Maximum and Minimum return the second (so that relu, Maximum(0, x), keeps -0.0): swapped.
  for (const auto& [name, op] : {std::pair<const char*, Op>{"maximum", Op::Maximum},
                                 std::pair<const char*, Op>{"minimum", Op::Minimum}}) {
    for (const char* overload : {".Tensor", ".Scalar", ".default"}) {
      reg_math(r, std::string("aten.") + name + overload, 2,
               [op](const std::vector<Value>& v) { return ir::binary(op, v[1], v[0]); });
    }
  }
  reg_binary(r, "remainder", Op::Remainder);
  reg_binary(r, "fmod", Op::Fmod);
  reg_binary(r, "atan2", Op::Atan2);
  reg_binary(r, "bitwise_and", Op::BitwiseAnd);
  reg_binary(r, "bitwise_or", Op::BitwiseOr);
  reg_binary(r, "bitwise_xor", Op::BitwiseXor);
  reg_binary(r, "floor_divide", Op::FloorDiv);
  for (const char* overload : {".Tensor_Scalar", ".Tensor_Tensor", ".Scalar"}) {
    reg_math(r, std::string("aten.pow") + overload, 2, [](const std::vector<Value>& v) {
      // The exponents ATen's pow kernels special-case (CPU and CUDA), computed the same way:
      // cheap, and bit-identical to eager (gelu's tanh form raises to 3 in every transformer).
      if (is_float_constant(v[1], 2.0)) return ir::mul(v[0], v[0]);
      if (is_float_constant(v[1], 3.0)) return ir::mul(ir::mul(v[0], v[0]), v[0]);
      if (is_float_constant(v[1], 1.0)) return v[0];
      if (is_float_constant(v[1], 0.5)) return ir::unary(Op::Sqrt, v[0]);
      if (is_float_constant(v[1], -1.0)) return ir::unary(Op::Reciprocal, v[0]);
      if (is_float_constant(v[1], -2.0)) return ir::unary(Op::Reciprocal, ir::mul(v[0], v[0]));
      return ir::binary(Op::Pow, v[0], v[1]);
    });
  }
  r["aten.div.Tensor_mode"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const Arg* mode = L.arg(n, 2, "rounding_mode");
    auto inputs = positional(n, 2);
    std::string m = mode && mode->kind == Arg::Kind::Str ? mode->s : "";
    DType out = L.meta(n).dtype;
    DType compute = compute_dtype_for_output(L, n);
    return {make_pointwise(L, n, inputs, compute, [m, out, compute](const std::vector<Value>& v) {
      // floor: ATen's div_floor (exact where a is a multiple of b) for every dtype.
      if (m == "floor") return ir::binary(Op::FloorDiv, v[0], v[1]);
      if (m == "trunc") {
        if (out == compute) return ir::binary(Op::TruncDiv, v[0], v[1]);
        // Eager's 16-bit kernels (CPU and CUDA) round the quotient to the dtype before
        // truncating: 2.994 becomes 3.0 in bfloat16 and truncates to 3, not 2. The renderers
        // divide exactly (IEEE) wherever a rounding op reads the quotient.
        Value q = ir::cast(ir::cast(ir::div(v[0], v[1]), out), compute);
        return ir::unary(Op::Trunc, q);
      }
      return ir::div(v[0], v[1]);
    })};
  };
  // rsub(x, other, alpha) = other - alpha * x.
  for (const char* overload : {".Scalar", ".Tensor"}) {
    r[std::string("aten.rsub") + overload] = [](Lowering& L,
                                                const Node& n) -> std::vector<TensorBox> {
      std::vector<const Arg*> inputs = positional(n, 2);
      const Arg* alpha = L.arg(n, 2, "alpha");
      if (alpha && !alpha->is_none()) inputs.push_back(alpha);
      return {make_pointwise(
          L, n, inputs, compute_dtype_for_output(L, n),
          [](const std::vector<Value>& v) {
            Value x = v.size() > 2 ? ir::mul(v[0], v[2]) : v[0];
            return ir::sub(v[1], x);
          },
          common_dtype(L, positional(n, 2)))};
    };
  }

  reg_compare(r, "eq", Op::Eq);
  reg_compare(r, "ne", Op::Ne);
  reg_compare(r, "lt", Op::Lt);
  reg_compare(r, "le", Op::Le);
  reg_compare(r, "gt", Op::Gt);
  reg_compare(r, "ge", Op::Ge);
  reg_logical(r, "logical_and", Op::LogicalAnd);
  reg_logical(r, "logical_or", Op::LogicalOr);
  reg_logical(r, "logical_xor", Op::LogicalXor);
  r["aten.logical_not.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    return {make_pointwise(L, n, positional(n, 1), DType::Bool, [](const std::vector<Value>& v) {
      return ir::unary(Op::LogicalNot, v[0]);
    })};
  };
  r["aten.bitwise_not.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    DType d = L.meta(n).dtype;
    return {make_pointwise(L, n, positional(n, 1), d, [](const std::vector<Value>& v) {
      return v[0].dtype() == DType::Bool ? ir::unary(Op::LogicalNot, v[0])
                                         : ir::unary(Op::BitwiseNot, v[0]);
    })};
  };
  for (const char* name : {"isnan", "isinf"}) {
    Op op = std::string(name) == "isnan" ? Op::IsNan : Op::IsInf;
    r[std::string("aten.") + name + ".default"] = [op](Lowering& L,
                                                       const Node& n) -> std::vector<TensorBox> {
      auto inputs = positional(n, 1);
      DType d = promoted_inputs(L, inputs);
      return {make_pointwise(L, n, inputs, d, [op](const std::vector<Value>& v) {
        if (!graph::is_floating(v[0].dtype())) return ir::int_constant(0, DType::Bool);
        return ir::unary(op, v[0]);
      })};
    };
  }

  const std::pair<const char*, Op> unary_ops[] = {
      {"neg", Op::Neg},
      {"abs", Op::Abs},
      {"exp", Op::Exp},
      {"exp2", Op::Exp2},
      {"log", Op::Log},
      {"log2", Op::Log2},
      {"log1p", Op::Log1p},
      {"expm1", Op::Expm1},
      {"sqrt", Op::Sqrt},
      {"rsqrt", Op::Rsqrt},
      {"sin", Op::Sin},
      {"cos", Op::Cos},
      {"tan", Op::Tan},
      {"asin", Op::Asin},
      {"acos", Op::Acos},
      {"atan", Op::Atan},
      {"sinh", Op::Sinh},
      {"cosh", Op::Cosh},
      {"tanh", Op::Tanh},
      {"sigmoid", Op::Sigmoid},
      {"erf", Op::Erf},
      {"sign", Op::Sign},
      {"reciprocal", Op::Reciprocal},
  };
  for (const auto& [name, op] : unary_ops) reg_unary(r, name, op);
  // Rounding ops on integers are the identity (the generic path would cast through float).
  const std::pair<const char*, Op> rounding_ops[] = {
      {"floor", Op::Floor}, {"ceil", Op::Ceil}, {"round", Op::Round}, {"trunc", Op::Trunc}};
  for (const auto& [name, op] : rounding_ops) {
    reg_math(r, std::string("aten.") + name + ".default", 1,
             [op = op](const std::vector<Value>& v) {
               return graph::is_floating(v[0].dtype()) ? ir::unary(op, v[0]) : v[0];
             });
  }

  // relu and clamp keep x where it equals the bound, as eager's clamp_min does: relu(-0.0) is
  // -0.0 (1 / relu(x) is -inf there). Maximum(a, b) gives b on a tie (coil_max, at::vec::maximum),
  // so the bound goes first.
  reg_math(r, "aten.relu.default", 1, [](const std::vector<Value>& v) {
    return ir::binary(Op::Maximum, ir::int_constant(0, v[0].dtype()), v[0]);
  });
  reg_math(r, "aten.silu.default", 1,
           [](const std::vector<Value>& v) { return ir::mul(v[0], ir::unary(Op::Sigmoid, v[0])); });
  r["aten.gelu.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const Arg* approx = L.arg(n, 1, "approximate");
    bool tanh = approx && approx->kind == Arg::Kind::Str && approx->s == "tanh";
    return {make_pointwise(
        L, n, positional(n, 1), compute_dtype_for_output(L, n),
        [tanh](const std::vector<Value>& v) { return tanh ? gelu_tanh(v[0]) : gelu_erf(v[0]); })};
  };
  r["aten.leaky_relu.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const Arg* slope = L.arg(n, 1, "negative_slope");
    std::vector<const Arg*> inputs = positional(n, 1);
    Arg default_slope = Arg::floating(0.01);
    inputs.push_back(slope ? slope : &default_slope);
    return {make_pointwise(
        L, n, inputs, compute_dtype_for_output(L, n), [](const std::vector<Value>& v) {
          Value zero = ir::constant(0.0, v[0].dtype());
          return ir::where(ir::binary(Op::Gt, v[0], zero), v[0], ir::mul(v[0], v[1]));
        })};
  };

  // elu(x, alpha=1, scale=1, input_scale=1): scale * x for x > 0, else
  // alpha * scale * expm1(x * input_scale) (selu and celu are elu with particular constants).
  r["aten.elu.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    std::vector<const Arg*> inputs = positional(n, 1);
    Arg one = Arg::floating(1.0);
    const char* names[] = {"alpha", "scale", "input_scale"};
    for (size_t i = 0; i < 3; ++i) {
      const Arg* a = L.arg(n, i + 1, names[i]);
      inputs.push_back(a && !a->is_none() ? a : &one);
    }
    return {make_pointwise(
        L, n, inputs, compute_dtype_for_output(L, n), [](const std::vector<Value>& v) {
          Value zero = ir::constant(0.0, v[0].dtype());
          Value negative = ir::mul(ir::mul(v[1], v[2]), ir::unary(Op::Expm1, ir::mul(v[0], v[3])));
          return ir::where(ir::binary(Op::Gt, v[0], zero), ir::mul(v[0], v[2]), negative);
        })};
  };

  r["aten.where.self"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const graph::TensorMeta& m = L.meta(n);
    std::vector<Expr> idx = ir::index_vars(m.rank());
    DType d = opmath(m.dtype);
    Value cond = read_operand(L, n.args[0], m.sizes, idx, DType::Bool);
    Value a = read_operand(L, n.args[1], m.sizes, idx, d);
    Value b = read_operand(L, n.args[2], m.sizes, idx, d);
    TensorBox out{m.dtype, m.device, m.sizes, ir::cast(ir::where(cond, a, b), m.dtype), {}};
    out.origins = inlined_origins(L, {&n.args[0], &n.args[1], &n.args[2]});
    return {out};
  };
  r["aten.masked_fill.Scalar"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const graph::TensorMeta& m = L.meta(n);
    std::vector<Expr> idx = ir::index_vars(m.rank());
    DType d = opmath(m.dtype);
    Value x = read_operand(L, n.args[0], m.sizes, idx, d);
    Value mask = read_operand(L, n.args[1], m.sizes, idx, DType::Bool);
    Value fill = read_operand(L, n.args[2], m.sizes, idx, d);
    TensorBox out{m.dtype, m.device, m.sizes, ir::cast(ir::where(mask, fill, x), m.dtype), {}};
    out.origins = inlined_origins(L, {&n.args[0], &n.args[1]});
    return {out};
  };
  r["aten.masked_fill.Tensor"] = r["aten.masked_fill.Scalar"];

  // clamp(x, min=None, max=None), with tensors or numbers; NaN propagates like torch.clamp.
  auto clamp = [](Lowering& L, const Node& n, const Arg* lo,
                  const Arg* hi) -> std::vector<TensorBox> {
    const graph::TensorMeta& m = L.meta(n);
    std::vector<const Arg*> inputs = {&n.args[0]};
    if (lo) inputs.push_back(lo);
    if (hi) inputs.push_back(hi);
    DType d = promoted_inputs(L, inputs);
    if (graph::is_floating(m.dtype)) d = opmath(m.dtype);
    std::vector<Expr> idx = ir::index_vars(m.rank());
    Value x = read_operand(L, n.args[0], m.sizes, idx, d);
    if (lo) x = ir::binary(Op::Maximum, read_operand(L, *lo, m.sizes, idx, d), x);
    if (hi) x = ir::binary(Op::Minimum, read_operand(L, *hi, m.sizes, idx, d), x);
    TensorBox out{m.dtype, m.device, m.sizes, ir::cast(x, m.dtype), inlined_origins(L, inputs)};
    return {out};
  };
  auto present = [](const Arg* a) { return a && !a->is_none() ? a : nullptr; };
  for (const char* overload : {"aten.clamp.default", "aten.clamp.Tensor"}) {
    r[overload] = [clamp, present](Lowering& L, const Node& n) {
      return clamp(L, n, present(L.arg(n, 1, "min")), present(L.arg(n, 2, "max")));
    };
  }
  for (const char* name : {"aten.clamp_min.default", "aten.clamp_min.Tensor"}) {
    r[name] = [clamp, present](Lowering& L, const Node& n) {
      return clamp(L, n, present(L.arg(n, 1, "min")), nullptr);
    };
  }
  for (const char* name : {"aten.clamp_max.default", "aten.clamp_max.Tensor"}) {
    r[name] = [clamp, present](Lowering& L, const Node& n) {
      return clamp(L, n, nullptr, present(L.arg(n, 1, "max")));
    };
  }
  r["aten.hardtanh.default"] = [clamp](Lowering& L, const Node& n) {
    Arg lo = Arg::floating(-1.0), hi = Arg::floating(1.0);
    const Arg* a1 = L.arg(n, 1, "min_val");
    const Arg* a2 = L.arg(n, 2, "max_val");
    return clamp(L, n, a1 ? a1 : &lo, a2 ? a2 : &hi);
  };

  // Casts and copies: the body is the input, cast to the output dtype.
  auto copy = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    TensorBox out = x;
    const graph::TensorMeta& m = L.meta(n);
    out.dtype = m.dtype;
    out.body = ir::cast(x.body, m.dtype);
    return {out};
  };
  for (const char* name : {"aten._to_copy.default", "aten.clone.default", "aten.alias.default",
                           "aten.lift_fresh_copy.default", "prims.convert_element_type.default",
                           "aten.detach.default", "aten._assert_tensor_metadata.default"}) {
    r[name] = copy;
  }
  r["aten._assert_tensor_metadata.default"] = [](Lowering&, const Node&) -> std::vector<TensorBox> {
    return {};
  };
}

}  // namespace coil::lower
