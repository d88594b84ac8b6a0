"""Correctness: pointwise lowerings (arithmetic, comparisons, logic, where, clamp, unary math,
conversions, factories) compared with eager across dtypes and input layout kinds."""

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    ALL_DTYPES,
    BACKEND,
    CONTIGUOUS_KINDS,
    FLOAT_DTYPES,
    KINDS,
    check,
    dtype_id,
    make_input,
    make_tensor,
    requires_coil,
)

F32, F64, I64, BOOL, BF16 = torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16
NUMERIC = (F32, F64, I64, BF16)


def _ids(dtypes):
    return [dtype_id(d) for d in dtypes]


# --------------------------------------------------------------------------------------------
# A representative subset over every dtype x every input kind
# --------------------------------------------------------------------------------------------

GRID_OPS = {
    "add": (lambda a, b: a + b, ALL_DTYPES),
    "exp": (lambda a, b: torch.exp(a), (F32, F64, I64, BF16)),
    "where": (
        lambda a, b: torch.where(a > b, a, b) if a.dtype != BOOL else torch.where(a, b, a),
        ALL_DTYPES,
    ),
}

GRID_CASES = [
    pytest.param(op, dtype, kind, id=f"{op}-{dtype_id(dtype)}-{kind}")
    for op, (_, dtypes) in GRID_OPS.items()
    for dtype in dtypes
    for kind in KINDS
]


@pytest.mark.parametrize("op,dtype,kind", GRID_CASES)
def test_grid_dtype_by_kind(op, dtype, kind):
    fn = GRID_OPS[op][0]
    a = make_input(kind, (4, 8), dtype)
    b = make_input(kind, (4, 8), dtype)
    check(fn, a, b, check_strides=kind in CONTIGUOUS_KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_mixed_kinds_binary(kind):
    # Each layout kind against a contiguous operand of the full shape (output shape may grow).
    a = make_input(kind, (4, 8))
    b = make_tensor((4, 8))
    check(lambda x, y: (x * 2 - y, y / (x.abs() + 1), x * y), a, b)


# --------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids(NUMERIC))
def test_sub(dtype):
    check(
        lambda a, b: a - b,
        make_tensor((4, 8), dtype),
        make_tensor((4, 8), dtype),
        check_strides=True,
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_mul(dtype):
    a, b = make_tensor((4, 8), dtype), make_tensor((4, 8), dtype)
    check(lambda x, y: (x * y, torch.mul(x, y[0])), a, b, check_strides=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_true_div(dtype):
    # int / int and bool / bool are true divisions producing the default float dtype.
    a = make_tensor((4, 8), dtype)
    b = make_tensor((4, 8), dtype, "nonzero") if dtype != BOOL else torch.ones(4, 8, dtype=BOOL)
    check(lambda x, y: x / y, a, b, check_strides=True)
    check(lambda x, y: torch.div(x, y), a, b)


@pytest.mark.parametrize("rounding_mode", ["floor", "trunc"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids(NUMERIC))
def test_div_rounding(dtype, rounding_mode):
    # negative operands: floor and trunc differ, and C++ '/' on ints truncates
    a = make_tensor((4, 8), dtype, scale=5.0)
    b = make_tensor((4, 8), dtype, "nonzero")
    check(lambda x, y: torch.div(x, y, rounding_mode=rounding_mode), a, b)


@pytest.mark.parametrize("dtype", (I64, F32), ids=_ids((I64, F32)))
def test_floordiv_and_remainder(dtype):
    a = make_tensor((4, 8), dtype, scale=5.0)
    b = make_tensor((4, 8), dtype, "nonzero")
    check(lambda x, y: (x // y, x % y, torch.fmod(x, y)), a, b)


@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids(NUMERIC))
def test_maximum_minimum(dtype):
    a, b = make_tensor((4, 8), dtype), make_tensor((4, 8), dtype)
    check(lambda x, y: (torch.maximum(x, y), torch.minimum(x, y)), a, b)


SCALAR_FNS = {
    "add_int": lambda x: x + 2,
    "radd_float": lambda x: 1.5 + x,
    "rsub_int": lambda x: 3 - x,
    "mul_float": lambda x: x * 2.5,
    "mul_int": lambda x: x * 3,
    "div_int": lambda x: x / 4,
    "rdiv_float": lambda x: 1.0 / (x.abs() + 1),
    "add_alpha": lambda x: torch.add(x, x, alpha=2),
    "sub_alpha": lambda x: torch.sub(x, 1, alpha=3),
    "chain": lambda x: (x * 2 + 1) * x - 7,
}


@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids(NUMERIC))
def test_python_scalars(dtype):
    # bf16: "chain" has bf16 intermediates that eager rounds and a fused kernel may keep in
    # float; values reach ~10, where one bf16 ulp is 0.0625
    tol = {"atol": 0.07, "rtol": 1.6e-2} if dtype == BF16 else {}
    check(
        lambda x: {name: f(x) for name, f in SCALAR_FNS.items()},
        make_tensor((4, 8), dtype),
        check_strides=True,
        **tol,
    )


def test_bool_with_scalars():
    x = make_tensor((4, 8), BOOL)
    check(lambda t: (t + 1, t * 2.5, t & True, t | False, t + True), x)


BROADCAST_SHAPES = [
    ((4, 1), (1, 8)),
    ((8,), (4, 8)),
    ((3, 1, 7), (5, 1)),
    ((), (4, 8)),
    ((1, 1), (3, 5, 7)),
    ((2, 3, 1), (2, 1, 4)),
]


@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES, ids=[f"{a}x{b}" for a, b in BROADCAST_SHAPES])
def test_broadcasting(sa, sb):
    a, b = make_tensor(sa), make_tensor(sb)
    check(lambda x, y: (x + y, x * y - y, torch.where(x > y, x, y)), a, b)


MIXED_PAIRS = [
    (I64, F32),
    (BOOL, I64),
    (BOOL, F32),
    (F32, F64),
    (BF16, F32),
    (I64, BF16),
    (BOOL, BF16),
    (I64, F64),
    (BF16, F64),
]


@pytest.mark.parametrize(
    "da,db", MIXED_PAIRS, ids=[f"{dtype_id(a)}-{dtype_id(b)}" for a, b in MIXED_PAIRS]
)
def test_type_promotion(da, db):
    a, b = make_tensor((4, 8), da), make_tensor((4, 8), db, "nonzero")
    fns = [
        lambda x, y: x + y,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: torch.where(x != 0, x, y),
    ]
    if BOOL not in (da, db):
        fns.append(lambda x, y: x - y)
    check(lambda x, y: [f(x, y) for f in fns], a, b)


@pytest.mark.parametrize(
    "da,db",
    [(I64, F64), (F32, F64), (BF16, F32), (I64, F32), (BOOL, I64)],
    ids=["i64-0d_f64", "f32-0d_f64", "bf16-0d_f32", "i64-0d_f32", "bool-0d_i64"],
)
def test_zero_dim_promotion(da, db):
    # a 0-d tensor only promotes across categories (int -> float), not within one
    a, s = make_tensor((4, 8), da), make_tensor((), db, "nonzero")
    # bf16 with a float 0-d operand: whether the scalar is rounded to bf16 before the op is
    # within half a bf16 ulp of the inputs (~4e-3), visible after cancellation in y - x
    tol = {"atol": 1e-2, "rtol": 1.6e-2} if da == BF16 else {}
    check(lambda x, y: (x + y, x * y, y - x if da != BOOL else x & (y > 0)), a, s, **tol)


# --------------------------------------------------------------------------------------------
# Comparisons and logic
# --------------------------------------------------------------------------------------------

CMP = {
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_comparison(dtype):
    a = make_tensor((4, 8), dtype)
    b = a.clone()
    b[::2] = make_tensor((2, 8), dtype)  # some equal, some not
    check(lambda x, y: {op: f(x, y) for op, f in CMP.items()}, a, b, check_strides=True)


@pytest.mark.parametrize("dtype", (F32, I64, BF16), ids=_ids((F32, I64, BF16)))
def test_comparison_scalar(dtype):
    x = make_tensor((4, 8), dtype)
    check(lambda t: (t == 0, t != 1, t < 0.5, t <= 0, t > -1, t >= 2, 1 < t), x)


def test_comparison_mixed_dtypes():
    a, b = make_tensor((4, 8), I64), make_tensor((4, 8), F32, scale=3.0)
    check(lambda x, y: (x < y, x == y.round(), y >= x), a, b)


LOGICAL = {
    "and": lambda x, y: torch.logical_and(x, y),
    "or": lambda x, y: torch.logical_or(x, y),
    "xor": lambda x, y: torch.logical_xor(x, y),
    "not": lambda x, y: torch.logical_not(x),
}


@pytest.mark.parametrize("dtype", (BOOL, I64, F32), ids=_ids((BOOL, I64, F32)))
def test_logical(dtype):
    a = make_tensor((4, 8), dtype)
    b = make_tensor((4, 8), dtype)
    if dtype != BOOL:
        a = a * (make_tensor((4, 8), BOOL))  # plenty of zeros
    check(lambda x, y: {op: f(x, y) for op, f in LOGICAL.items()}, a, b, check_strides=True)


BITWISE = {
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "xor": lambda x, y: x ^ y,
    "not": lambda x, y: ~x,
}


@pytest.mark.parametrize("dtype", (BOOL, I64), ids=_ids((BOOL, I64)))
def test_bitwise(dtype):
    check(
        lambda x, y: {op: f(x, y) for op, f in BITWISE.items()},
        make_tensor((4, 8), dtype),
        make_tensor((4, 8), dtype),
    )


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided"])
def test_logical_noncontiguous(kind):
    a, b = make_input(kind, (4, 8), BOOL), make_input(kind, (4, 8), BOOL)
    check(lambda x, y: (x & ~y) | torch.logical_xor(x, y), a, b)


# --------------------------------------------------------------------------------------------
# where, clamp
# --------------------------------------------------------------------------------------------

WHERE_FNS = {
    "tensors": lambda c, x, y: torch.where(c, x, y),
    "scalar_other": lambda c, x, y: torch.where(c, x, 0.0),
    "scalar_self": lambda c, x, y: torch.where(c, 1, y),
    "scalars": lambda c, x, y: torch.where(c, 2.5, -1.0),
    "computed_cond": lambda c, x, y: torch.where(x > 0, x * 2, y - 1),
    "masked_fill": lambda c, x, y: x.masked_fill(c, -5),
}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_where(dtype):
    # (arithmetic on bool is not defined: no computed_cond for bool)
    fns = {k: f for k, f in WHERE_FNS.items() if not (dtype == BOOL and k == "computed_cond")}
    c = make_tensor((4, 8), BOOL)
    check(
        lambda c, x, y: {k: f(c, x, y) for k, f in fns.items()},
        c,
        make_tensor((4, 8), dtype),
        make_tensor((4, 8), dtype),
    )


def test_where_broadcast_and_promotion():
    c = make_tensor((4, 1), BOOL)
    x = make_tensor((1, 8), I64)
    y = make_tensor((4, 8), F32)
    check(lambda c, x, y: torch.where(c, x, y), c, x, y)
    check(lambda c, x, y: torch.where(c, x, 1.5), c, x, y)
    check(lambda c, x, y: torch.where(c, y.to(BF16), x), c, x, y)


CLAMP_FNS = {
    "min_max": lambda x, lo, hi: torch.clamp(x, min=-0.5, max=0.5),
    "min_only": lambda x, lo, hi: torch.clamp(x, min=0),
    "max_only": lambda x, lo, hi: torch.clamp(x, max=1),
    "clamp_min": lambda x, lo, hi: torch.clamp_min(x, -1),
    "clamp_max": lambda x, lo, hi: torch.clamp_max(x, 0),
    "tensor_bounds": lambda x, lo, hi: torch.clamp(x, lo, hi),
    "tensor_min": lambda x, lo, hi: torch.clamp(x, min=lo),
    "tensor_max": lambda x, lo, hi: x.clamp(max=hi),
    "method": lambda x, lo, hi: x.clamp(-2, 2),
}


@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids(NUMERIC))
def test_clamp(dtype):
    x = make_tensor((4, 8), dtype, scale=2.0)
    lo = make_tensor((4, 8), dtype).abs() * -1
    hi = make_tensor((8,), dtype).abs()
    check(lambda x, lo, hi: {k: f(x, lo, hi) for k, f in CLAMP_FNS.items()}, x, lo, hi)


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "scalar"])
def test_clamp_kinds(kind):
    check(lambda t: t.clamp(-0.3, 0.7), make_input(kind, (4, 8)))


# --------------------------------------------------------------------------------------------
# Unary math
# --------------------------------------------------------------------------------------------

# name -> (fn, domain, dtypes)
UNARY = {
    "exp": (torch.exp, "any", FLOAT_DTYPES),
    "log": (torch.log, "positive", FLOAT_DTYPES + (I64,)),
    "log1p": (torch.log1p, "positive", FLOAT_DTYPES),
    "expm1": (torch.expm1, "any", FLOAT_DTYPES),
    "sqrt": (torch.sqrt, "positive", FLOAT_DTYPES + (I64,)),
    "rsqrt": (torch.rsqrt, "positive", FLOAT_DTYPES),
    "abs": (torch.abs, "any", FLOAT_DTYPES + (I64,)),
    "neg": (torch.neg, "any", FLOAT_DTYPES + (I64,)),
    "sin": (torch.sin, "any", FLOAT_DTYPES + (I64,)),
    "cos": (torch.cos, "any", FLOAT_DTYPES),
    "tanh": (torch.tanh, "any", FLOAT_DTYPES),
    "sigmoid": (torch.sigmoid, "any", FLOAT_DTYPES + (I64, BOOL)),
    "erf": (torch.erf, "any", FLOAT_DTYPES),
    "relu": (torch.relu, "any", FLOAT_DTYPES + (I64,)),
    "gelu": (F.gelu, "any", FLOAT_DTYPES),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any", FLOAT_DTYPES),
    "silu": (F.silu, "any", FLOAT_DTYPES),
    "floor": (torch.floor, "any", FLOAT_DTYPES),
    "ceil": (torch.ceil, "any", FLOAT_DTYPES),
    "round": (torch.round, "any", FLOAT_DTYPES),
    "reciprocal": (torch.reciprocal, "nonzero", FLOAT_DTYPES + (I64,)),
    "sign": (torch.sign, "any", FLOAT_DTYPES + (I64,)),
    "square": (torch.square, "any", FLOAT_DTYPES + (I64,)),
    "trunc": (torch.trunc, "any", FLOAT_DTYPES),
}


def _unary_input(name, dtype, shape=(4, 8)):
    _, domain, _ = UNARY[name]
    # scale 3 so floor/ceil/round/trunc see values on both sides of several integers
    return make_tensor(shape, dtype, domain, scale=3.0 if domain == "any" else 1.0)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_float32(name):
    check(UNARY[name][0], _unary_input(name, F32), check_strides=True)


@pytest.mark.parametrize("dtype", (F64, BF16, I64, BOOL), ids=_ids((F64, BF16, I64, BOOL)))
def test_unary_other_dtypes(dtype):
    names = [n for n, (_, _, dtypes) in UNARY.items() if dtype in dtypes]
    inputs = {n: _unary_input(n, dtype) for n in names}
    check(lambda d: {n: UNARY[n][0](d[n]) for n in names}, inputs, check_strides=True)


def test_round_half_to_even():
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -3.5, 4.5])
    check(torch.round, x)
    check(lambda t: torch.round(t, decimals=1), torch.randn(4, 8) * 10)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "contiguous"])
def test_unary_kinds(kind):
    names = ["sin", "sigmoid", "gelu", "log", "rsqrt", "tanh", "abs"]
    inputs = {n: make_input(kind, (3, 5, 7), F32, UNARY[n][1]) for n in names}
    check(lambda d: {n: UNARY[n][0](d[n]) for n in names}, inputs)


POW_EXPONENTS = [2, 3, 0.5, -1, 2.5, 0, 1, -0.5, 1.0 / 3]


@pytest.mark.parametrize("exponent", POW_EXPONENTS, ids=[f"{e:g}" for e in POW_EXPONENTS])
def test_pow_scalar(exponent):
    domain = "positive" if (exponent != int(exponent) or exponent < 0) else "any"
    check(lambda t: t**exponent, make_tensor((4, 8), F32, domain), check_strides=True)


def test_pow_scalar_float64():
    x, p = make_tensor((4, 8), F64), make_tensor((4, 8), F64, "positive")
    check(
        lambda x, p: [torch.pow(x if e == int(e) and e >= 0 else p, e) for e in POW_EXPONENTS], x, p
    )


@pytest.mark.parametrize("dtype", (I64, BF16), ids=_ids((I64, BF16)))
def test_pow_scalar_dtypes(dtype):
    x = make_tensor((4, 8), dtype)
    check(lambda t: (t**2, t**3, t * t**0), x)
    check(lambda t: torch.pow(2, t.abs()), x)


def test_pow_tensor_exponent():
    check(lambda b, e: b**e, make_tensor((4, 8), F32, "positive"), make_tensor((4, 8), F32))


def test_special_values():
    nan, inf = math.nan, math.inf
    x = torch.tensor([[nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 3.0]])
    y = torch.tensor([[1.0, nan, 2.0, -0.0, 0.0, nan, inf, -inf]])
    check(lambda t: (t.relu(), t.clamp(-1, 1), t.exp(), t.sigmoid(), t.tanh(), t.abs()), x)
    check(lambda a, b: (torch.maximum(a, b), torch.minimum(a, b), a + b, a * b, a / b), x, y)
    check(lambda t: (t.log(), t.sqrt(), t.rsqrt(), t.reciprocal(), t.isnan(), t.isinf()), x)
    check(lambda a, b: (a == b, a != b, a < b, torch.where(a > b, a, b)), x, y)


# --------------------------------------------------------------------------------------------
# Type conversion
# --------------------------------------------------------------------------------------------

CONV_CASES = [
    pytest.param(src, dst, id=f"{dtype_id(src)}-to-{dtype_id(dst)}")
    for src in ALL_DTYPES
    for dst in ALL_DTYPES
]


@pytest.mark.parametrize("src,dst", CONV_CASES)
def test_to_dtype(src, dst):
    # scale 10: float -> int truncates toward zero; float -> bool tests nonzero
    x = make_tensor((4, 8), src, scale=10.0)
    if src.is_floating_point:
        x[0, :4] = torch.tensor([0.0, -0.0, 0.5, -0.5], dtype=src)
    check(lambda t: t.to(dst), x, check_strides=True)


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset"])
def test_to_dtype_kinds(kind):
    pairs = [(F32, I64), (BOOL, F32), (BF16, F32), (I64, BF16), (F64, F32), (F32, BOOL)]
    ins = [make_input(kind, (4, 8), src, scale=10.0) for src, _ in pairs]
    check(
        lambda xs: [x.to(dst) * 2 if dst != BOOL else ~x.to(dst) for x, (_, dst) in zip(xs, pairs)],
        ins,
    )


def test_conversion_in_arithmetic():
    x = make_tensor((4, 8), F32, scale=10.0)
    # An explicit round trip through bf16/f16 must round, as eager does. (Inductor drops such
    # casts inside fused code unless emulate_precision_casts is on: enable it when validating
    # this test against inductor.)
    emulate = contextlib.nullcontext()
    if BACKEND == "inductor":
        import torch._inductor.config

        emulate = torch._inductor.config.patch(emulate_precision_casts=True)
    with emulate:
        check(lambda t: (t.to(I64) * 3).to(F32) + t.to(BF16).to(F32), x)
        check(lambda t: t.float().half().double(), x)
    check(lambda t: (t > 0).to(F32) * t + t.int().long(), x)


# --------------------------------------------------------------------------------------------
# Factories inside compiled functions
# --------------------------------------------------------------------------------------------

FACTORY_FNS = {
    "full": lambda x: torch.full((4, 8), 2.5) + x,
    "full_int": lambda x: torch.full((4, 8), 7, dtype=torch.int64) * x.to(torch.int64),
    "full_bool": lambda x: torch.full((4, 8), True) & (x > 0),
    "zeros": lambda x: torch.zeros(4, 8) + x,
    "ones": lambda x: torch.ones(4, 8, dtype=torch.float64) * x,
    "zeros_alone": lambda x: (torch.zeros(3, 5, dtype=torch.bfloat16), x + 1),
    "arange": lambda x: torch.arange(8) + x,
    "arange_start_step": lambda x: torch.arange(1, 17, 2) * x,
    "arange_float_step": lambda x: torch.arange(0.0, 0.8, 0.1) + x,
    "arange_dtype": lambda x: torch.arange(8, dtype=torch.float64) * x,
    "arange_2d": lambda x: torch.arange(32).view(4, 8) + x,
    "scalar_tensor": lambda x: torch.scalar_tensor(3.0) * x,
    "scalar_tensor_int": lambda x: x + torch.scalar_tensor(2, dtype=torch.int64),
    "zeros_like": lambda x: torch.zeros_like(x) + 1,
    "ones_like_dtype": lambda x: torch.ones_like(x, dtype=torch.int64) + x.to(torch.int64),
    "full_like": lambda x: torch.full_like(x, 7) - x,
    "full_like_bool": lambda x: torch.full_like(x, True, dtype=torch.bool),
    "empty_like_filled": lambda x: torch.empty_like(x).fill_(0.5) + x,
    "new_zeros": lambda x: x.new_zeros(2, 3) + 1,
    "new_full": lambda x: x.new_full((8,), -1.0) * x,
}


@pytest.mark.parametrize("name", list(FACTORY_FNS))
def test_factory(name):
    check(FACTORY_FNS[name], make_tensor((4, 8)), check_strides=True)


@pytest.mark.parametrize("name", ["zeros_like", "full_like", "ones_like_dtype"])
def test_factory_like_keeps_layout(name):
    # *_like preserves the layout of a dense non-contiguous input (memory_format=preserve)
    x = make_input("transposed", (4, 8))
    check(FACTORY_FNS[name], x, check_strides=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids(ALL_DTYPES))
def test_full_dtypes(dtype):
    val = True if dtype == BOOL else 3
    check(
        lambda x: (
            torch.full((3, 5), val, dtype=dtype),
            torch.ones(2, dtype=dtype),
            torch.zeros_like(x, dtype=dtype),
        ),
        make_tensor((4, 8)),
    )


SIGNED_ZERO_OPS = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "clamp_min": lambda x: x.clamp(min=0.0),
    "clamp_max": lambda x: x.clamp(max=-0.0),
    "clamp": lambda x: x.clamp(0.0, 1.0),
    "hardtanh": lambda x: F.hardtanh(x, 0.0, 1.0),
    "clamp_tensor": lambda x: torch.clamp(x, min=torch.zeros(()), max=torch.ones(())),
}


@pytest.mark.parametrize("vectorize", ["on", "off"])
@pytest.mark.parametrize("name", list(SIGNED_ZERO_OPS))
def test_bounds_keep_a_zeros_sign(name, vectorize, monkeypatch):
    # relu and the clamps keep x where it equals their bound, as eager's do: relu(-0.0) is -0.0,
    # so 1 / relu(x) is -inf there (coil's was +inf: it lowered relu to maximum(x, 0), which
    # gives its second operand on a tie). NaN passes through. Vector loops and scalar ones.
    requires_coil()
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", vectorize)
    x = torch.tensor([-0.0, 0.0, float("nan"), -1.0, 2.0, 0.5, -0.0, 1.0] * 5)
    fn = SIGNED_ZERO_OPS[name]
    got = torch.compile(lambda x: 1 / fn(x), backend="coil")(x)
    want = 1 / fn(x)
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (got, want)
    assert torch.equal(got.isnan(), want.isnan())


def test_the_fuzzer_tells_zeros_apart():
    from coil.fuzz import ZeroSignError, _check_zero_signs

    _check_zero_signs(torch.tensor([0.0, -0.0, 1.0]), torch.tensor([0.0, -0.0, 1.0]))
    with pytest.raises(ZeroSignError, match="other sign"):
        _check_zero_signs(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0]))
