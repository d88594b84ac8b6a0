// Lowerings of random ops: rand/randn/randint (and their _like forms), bernoulli, uniform,
// exponential, cauchy, log_normal, geometric.
//
// Each random node draws a seed from torch's generator of its device when the graph runs (one
// aten.randint call: torch.manual_seed makes runs reproducible, and each run draws new numbers),
// and element i of its result is a function of (seed, i) through a counter-based generator
// (Philox-4x32-10: the C++ prelude's coil_rand/coil_randn, Triton's tl.rand/tl.randn). The values
// follow eager's distributions but are not eager's stream: the same seed gives other numbers than
// eager's kernels would.
//
// Under LowerOptions::fallback_random every lowering here declines (returns no boxes), so each
// random node becomes an ATen fallback call that draws from torch's generator exactly as eager
// does, in graph order (python/coil/backend.py also keeps these ops out of the decomposition
// table then, so AOTAutograd hands them over whole).
#include <cmath>
#include <cstdint>

#include "coil/lower/lowering.h"
#include "coil/lower/pointwise_util.h"

namespace coil::lower {

using graph::Arg;
using graph::Node;
using ir::Op;

namespace {

// Seeds are drawn in [0, 2^31): Triton's Philox takes any integer seed, and a positive int32 keeps
// the generated code free of sign questions.
constexpr int64_t kSeedBound = (int64_t{1} << 31) - 1;

// The seed of random node n: a one-element int64 tensor the wrapper draws with aten.randint on the
// node's device, read as a scalar.
Value seed_of(Lowering& L, const Node& n, const std::string& device) {
  Node draw = n;
  draw.target = "aten.randint.low";
  draw.args = {Arg::integer(0), Arg::integer(kSeedBound), Arg::list_of({Arg::integer(1)})};
  draw.kwargs = {{"dtype", Arg::dtype_of(graph::DType::Int64)},
                 {"device", Arg::enum_text("device:" + device)}};
  graph::TensorMeta m;
  m.dtype = graph::DType::Int64;
  m.device = device;
  m.sizes = {Expr(1)};
  m.strides = {Expr(1)};
  m.offset = Expr(0);
  draw.meta = {m};
  TensorBox seed = L.add_extern(draw, /*is_fallback=*/false).at(0);
  return seed.load({Expr(0)});
}

// The row-major position of the element at v0..v{n-1} in a tensor of `sizes`: the generator's
// counter.
Value counter(const std::vector<Expr>& sizes) {
  Expr flat = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    flat = flat * sizes[i] + ir::index_var(static_cast<int>(i));
  return ir::index_expr(flat, DType::Int64);
}

// A box of the node's output shape and dtype whose element is fn(u), u one draw per element
// (uniform in [0, 1), or standard normal) converted to `compute`.
using DrawFn = std::function<Value(Value u, DType compute)>;
std::vector<TensorBox> random_box(Lowering& L, const Node& n, Op draw, const DrawFn& fn) {
  const graph::TensorMeta& m = L.meta(n);
  if (graph::is_opaque(m.dtype)) return {};
  DType compute = m.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Value u = ir::cast(ir::binary(draw, seed_of(L, n, m.device), counter(m.sizes)), compute);
  return {TensorBox{m.dtype, m.device, m.sizes, ir::cast(fn(u, compute), m.dtype), {}}};
}

Value number(const Lowering& L, const Node& n, size_t i, const std::string& name, double fallback,
             DType d) {
  const Arg* a = L.arg(n, i, name);
  return a && !a->is_none() ? L.scalar(*a, d) : ir::constant(fallback, d);
}

// randint: low + floor(u * (high - low)), computed in double. u has 24 random bits, so ranges
// wider than 2^24 are covered unevenly (a documented difference from eager).
std::vector<TensorBox> randint(Lowering& L, const Node& n, const Arg* low, const Arg& high) {
  return random_box(L, n, Op::Rand, [&](Value u, DType) {
    Value lo = low ? L.scalar(*low, DType::Float64) : ir::constant(0.0, DType::Float64);
    Value hi = L.scalar(high, DType::Float64);
    Value span = ir::sub(hi, lo);
    Value x = ir::add(lo, ir::unary(Op::Floor, ir::mul(ir::cast(u, DType::Float64), span)));
    return ir::cast(x, DType::Int64);
  });
}

// The draw itself (rand, randn).
Value identity_draw(Value u, DType) {
  return u;
}

}  // namespace

void register_random(Registry& out) {
  Registry r;
  for (const char* name : {"aten.rand.default", "aten.rand_like.default"}) {
    r[name] = [](Lowering& L, const Node& n) { return random_box(L, n, Op::Rand, identity_draw); };
  }
  for (const char* name : {"aten.randn.default", "aten.randn_like.default"}) {
    r[name] = [](Lowering& L, const Node& n) { return random_box(L, n, Op::Randn, identity_draw); };
  }
  r["aten.randint.low"] = [](Lowering& L, const Node& n) {
    return randint(L, n, &n.args.at(0), n.args.at(1));
  };
  r["aten.randint.default"] = [](Lowering& L, const Node& n) {
    return randint(L, n, nullptr, n.args.at(0));
  };
  r["aten.randint_like.default"] = [](Lowering& L, const Node& n) {
    return randint(L, n, nullptr, n.args.at(1));
  };
  r["aten.randint_like.low_dtype"] = [](Lowering& L, const Node& n) {
    return randint(L, n, &n.args.at(1), n.args.at(2));
  };
  // bernoulli(x): 1 where u < x (x holds the probabilities); bernoulli.p: 1 where u < p.
  r["aten.bernoulli.default"] = [](Lowering& L, const Node& n) {
    const TensorBox& p = L.box_of(n, 0);
    return random_box(L, n, Op::Rand, [&](Value u, DType d) {
      Value prob = ir::cast(p.load(ir::index_vars(p.rank())), d);
      return ir::cast(ir::binary(Op::Lt, u, prob), d);
    });
  };
  r["aten.bernoulli.p"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Rand, [&](Value u, DType d) {
      return ir::cast(ir::binary(Op::Lt, u, number(L, n, 1, "p", 0.5, d)), d);
    });
  };
  // native_dropout(x, p, train) -> (x * keep / (1 - p), keep) with keep = (u >= p); the identity
  // and an all-true mask when not training.
  r["aten.native_dropout.default"] = [](Lowering& L, const Node& n) -> std::vector<TensorBox> {
    const TensorBox& x = L.box_of(n, 0);
    const Arg* train = L.arg(n, 2, "train");
    double p = static_number(n.args.at(1), "dropout's p");
    const graph::TensorMeta& om = L.meta(n, 0);
    const graph::TensorMeta& mm = L.meta(n, 1);
    std::vector<Expr> idx = ir::index_vars(x.rank());
    if (train && train->kind == Arg::Kind::Bool && !train->b) {
      return {x, TensorBox{mm.dtype, mm.device, mm.sizes, ir::int_constant(1, mm.dtype), {}}};
    }
    Value u = ir::binary(Op::Rand, seed_of(L, n, om.device), counter(om.sizes));
    Value keep = ir::binary(Op::Ge, u, ir::constant(p, DType::Float32));
    TensorBox mask{mm.dtype, mm.device, mm.sizes, ir::cast(keep, mm.dtype), {}};
    L.apply_realize_policy(mask, 2);
    DType d = opmath(om.dtype);
    // p = 1 drops everything; eager's scale is then 0, not infinity.
    Value scale = ir::constant(p < 1.0 ? 1.0 / (1.0 - p) : 0.0, d);
    Value kept = ir::cast(mask.load(idx), d);
    Value y = ir::mul(ir::mul(ir::cast(x.load(idx), d), kept), scale);
    TensorBox out{om.dtype, om.device, om.sizes, ir::cast(y, om.dtype), x.origins};
    return {out, mask};
  };
  // normal: mean + std * z, with mean and std numbers or tensors (broadcast to the output).
  auto normal = [](size_t first) {
    return [first](Lowering& L, const Node& n) {
      const graph::TensorMeta& m = L.meta(n);
      std::vector<Expr> idx = ir::index_vars(m.rank());
      return random_box(L, n, Op::Randn, [&](Value z, DType d) {
        const Arg* mean_arg = L.arg(n, first, "mean");
        const Arg* std_arg = L.arg(n, first + 1, "std");
        Value mean = mean_arg ? read_operand(L, *mean_arg, m.sizes, idx, d) : ir::constant(0.0, d);
        Value std = std_arg ? read_operand(L, *std_arg, m.sizes, idx, d) : ir::constant(1.0, d);
        return ir::add(mean, ir::mul(std, z));
      });
    };
  };
  r["aten.normal_functional.default"] = normal(1);
  for (const char* name : {"aten.normal.Tensor_Tensor", "aten.normal.Tensor_float",
                           "aten.normal.float_Tensor", "aten.normal.float_float"}) {
    r[name] = normal(0);
  }
  r["aten.uniform.default"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Rand, [&](Value u, DType d) {
      Value lo = number(L, n, 1, "from", 0.0, d), hi = number(L, n, 2, "to", 1.0, d);
      return ir::add(lo, ir::mul(ir::sub(hi, lo), u));
    });
  };
  // exponential: -log(1 - u) / lambda (1 - u is in (0, 1], so the result is finite).
  r["aten.exponential.default"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Rand, [&](Value u, DType d) {
      Value lambd = number(L, n, 1, "lambd", 1.0, d);
      return ir::div(ir::unary(Op::Neg, ir::unary(Op::Log1p, ir::unary(Op::Neg, u))), lambd);
    });
  };
  // cauchy: median + sigma * tan(pi * (u - 1/2)).
  r["aten.cauchy.default"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Rand, [&](Value u, DType d) {
      Value median = number(L, n, 1, "median", 0.0, d), sigma = number(L, n, 2, "sigma", 1.0, d);
      Value angle = ir::mul(ir::constant(M_PI, d), ir::sub(u, ir::constant(0.5, d)));
      return ir::add(median, ir::mul(sigma, ir::unary(Op::Tan, angle)));
    });
  };
  // log_normal: exp(mean + std * z), z standard normal.
  r["aten.log_normal.default"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Randn, [&](Value z, DType d) {
      Value mean = number(L, n, 1, "mean", 1.0, d), std = number(L, n, 2, "std", 2.0, d);
      return ir::unary(Op::Exp, ir::add(mean, ir::mul(std, z)));
    });
  };
  // geometric: the number of trials up to the first success, ceil(log(1 - u) / log(1 - p)), at
  // least 1.
  r["aten.geometric.default"] = [](Lowering& L, const Node& n) {
    return random_box(L, n, Op::Rand, [&](Value u, DType) {
      DType d = DType::Float64;
      Value p = number(L, n, 1, "p", 0.5, d);
      Value trials = ir::div(ir::unary(Op::Log1p, ir::unary(Op::Neg, ir::cast(u, d))),
                             ir::unary(Op::Log1p, ir::unary(Op::Neg, p)));
      return ir::binary(Op::Maximum, ir::unary(Op::Ceil, trials), ir::constant(1.0, d));
    });
  };
  for (auto& [name, fn] : r) {
    out[name] = [f = std::move(fn)](Lowering& L, const Node& n) -> std::vector<TensorBox> {
      if (L.options().fallback_random) return {};
      return f(L, n);
    };
  }
}

}  // namespace coil::lower
