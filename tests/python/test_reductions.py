"""Correctness: reductions (sum, mean, amax, amin, prod, argmax, argmin, var, std, var_mean)
over one dim, several dims and all dims, keepdim True/False, dtype=, correction 0/1."""

import pytest
import torch
from conftest import KINDS, check, dtype_id, make_input, make_tensor, requires_coil

F32, F64, I64, BOOL, BF16 = torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16

SHAPE = (3, 5, 7)
DIMS = [0, 1, -1, (0, 2), (1, 2), None]


def _dim_id(d):
    return "all" if d is None else (f"d{d}" if isinstance(d, int) else "d" + "_".join(map(str, d)))


def _reduce(op, dim, keepdim, **kw):
    """fn(x) calling torch.<op> over ``dim`` (None = all dims)."""
    f = getattr(torch, op)
    if dim is None:
        if keepdim:
            return lambda x: f(x, dim=tuple(range(x.dim())), keepdim=True, **kw)
        return lambda x: f(x, **kw)
    return lambda x: f(x, dim=dim, keepdim=keepdim, **kw)


# op -> input domain
SIMPLE = {"sum": "any", "mean": "any", "amax": "any", "amin": "any"}


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("dim", DIMS, ids=[_dim_id(d) for d in DIMS])
def test_reduction_dims(dim, keepdim):
    fns = {op: _reduce(op, dim, keepdim) for op in SIMPLE}
    check(lambda x: {op: f(x) for op, f in fns.items()}, make_tensor(SHAPE, F32))


DTYPE_CASES = {
    "sum": (F64, BF16, I64, BOOL),
    "mean": (F64, BF16),
    "amax": (F64, BF16, I64, BOOL),
    "amin": (F64, BF16, I64, BOOL),
    "prod": (F64, BF16, I64),
}


@pytest.mark.parametrize(
    "op,dtype",
    [(op, dt) for op, dts in DTYPE_CASES.items() for dt in dts],
    ids=[f"{op}-{dtype_id(dt)}" for op, dts in DTYPE_CASES.items() for dt in dts],
)
def test_reduction_dtypes(op, dtype):
    if op == "prod":
        x = (
            (make_tensor(SHAPE, F64, "unit") * 0.5 + 1).to(dtype)
            if dtype != I64
            else make_tensor(SHAPE, I64)
        )
    else:
        x = make_tensor(SHAPE, dtype)
    fns = [_reduce(op, -1, False), _reduce(op, 0, True)]
    if not (op == "prod" and dtype == I64):  # an int64 product of 105 elements overflows
        fns.append(_reduce(op, None, False))
    check(lambda t: [f(t) for f in fns], x)


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("dim", [0, -1, None], ids=["d0", "d-1", "all"])
def test_prod(dim, keepdim):
    x = make_tensor(SHAPE, F32, "unit") * 0.5 + 1  # in (0.55, 1.45): no over/underflow
    x[0, 0, 0] = 0.0
    if dim is None:
        fn = (lambda t: t.prod()) if not keepdim else (lambda t: t.prod(-1, keepdim=True).prod(0))
    else:
        fn = lambda t: torch.prod(t, dim, keepdim=keepdim)
    check(fn, x)


@pytest.mark.parametrize("keepdim", [False, True], ids=["nokeep", "keep"])
@pytest.mark.parametrize("dim", [0, 1, -1, None], ids=["d0", "d1", "d-1", "all"])
def test_arg_reduction(dim, keepdim):
    check(
        lambda x: (
            torch.argmax(x, dim=dim, keepdim=keepdim),
            torch.argmin(x, dim=dim, keepdim=keepdim),
        ),
        make_tensor(SHAPE, F32),
    )


@pytest.mark.parametrize("dtype", [I64, BF16, F64], ids=["int64", "bfloat16", "float64"])
def test_arg_reduction_ties(dtype):
    # small ints produce ties: the first index of the extreme value wins
    x = make_tensor(SHAPE, I64).to(dtype)
    check(
        lambda t: (
            [f(t, dim=-1) for f in (torch.argmax, torch.argmin)]
            + [f(t, dim=0) for f in (torch.argmax, torch.argmin)]
            + [torch.argmax(t), torch.argmin(t)]
        ),
        x,
    )


def test_arg_reduction_nan():
    x = make_tensor((4, 8), F32)
    x[1, 3] = float("nan")
    x[2, 0] = float("nan")
    x[2, 5] = float("nan")
    check(lambda t: (t.argmax(-1), t.argmin(-1), t.amax(-1), t.amin(0), t.sum(-1)), x)


VAR_DIMS = [-1, 0, (0, 2), None]


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("dim", VAR_DIMS, ids=[_dim_id(d) for d in VAR_DIMS])
def test_var_std(dim, correction):
    fns = {op: _reduce(op, dim, False, correction=correction) for op in ("var", "std", "var_mean")}
    check(lambda x: {op: f(x) for op, f in fns.items()}, make_tensor(SHAPE, F32))


@pytest.mark.parametrize("op", ["var", "std", "var_mean"])
def test_var_std_keepdim_and_unbiased(op):
    f = getattr(torch, op)
    check(
        lambda t: (
            f(t, dim=(0, 2), keepdim=True, correction=0),
            f(t, 1, unbiased=False),
            f(t, -1, keepdim=True),
        ),
        make_tensor(SHAPE, F32),
    )


@pytest.mark.parametrize("dtype", [F64, BF16], ids=["float64", "bfloat16"])
def test_var_std_dtypes(dtype):
    check(
        lambda t: (t.var(-1), t.std(0, correction=0), torch.var_mean(t, (0, 2))),
        make_tensor(SHAPE, dtype),
    )


def test_var_large_mean():
    # a large common offset: a naive E[x^2] - E[x]^2 loses all precision
    x = make_tensor((4, 64), F32) + 1000.0
    check(
        lambda t: (t.var(-1), t.std(-1, correction=0), torch.var_mean(t, -1)),
        x,
        atol=1e-4,
        rtol=1e-4,
    )


DTYPE_ARG_CASES = [
    ("sum", I64, F32),
    ("sum", BF16, F32),
    ("sum", F32, F64),
    ("sum", BOOL, I64),
    ("mean", BF16, F32),
    ("mean", F32, F64),
    ("mean", I64, F32),
    ("sum", F64, F32),
]


@pytest.mark.parametrize(
    "op,src,dst",
    DTYPE_ARG_CASES,
    ids=[f"{o}-{dtype_id(s)}-{dtype_id(d)}" for o, s, d in DTYPE_ARG_CASES],
)
def test_reduction_dtype_arg(op, src, dst):
    f1, f2 = _reduce(op, -1, False, dtype=dst), _reduce(op, None, False, dtype=dst)
    check(lambda t: (f1(t), f2(t)), make_tensor(SHAPE, src))


def test_sum_of_bool_and_int_promote_to_int64():
    check(
        lambda b, i: (b.sum(), b.sum(0), i.sum(-1), i.to(torch.int32).sum(-1)),
        make_tensor(SHAPE, BOOL),
        make_tensor(SHAPE, I64),
    )


@pytest.mark.parametrize("kind", KINDS)
def test_reduction_kinds(kind):
    ops = {op: getattr(torch, op) for op in ("sum", "amax", "mean", "argmax", "prod")}
    x = make_input(kind, SHAPE, F32)
    check(lambda t: {op: (f(t, -1), f(t, 0) if t.dim() else f(t)) for op, f in ops.items()}, x)


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset"])
def test_var_kinds(kind):
    check(lambda t: (t.var(-1), t.std(0, correction=0)), make_input(kind, SHAPE, F32))


@pytest.mark.parametrize(
    "shape,dim",
    [((3, 1031), -1), ((1031,), 0), ((129, 3), 0), ((2, 67, 33), (0, 2)), ((1000, 10), None)],
    ids=["rows1031", "vec1031", "cols129", "outer_inner", "all10000"],
)
def test_reduction_odd_sizes(shape, dim):
    # sizes that are not multiples of any vector width; reductions across the outer dim
    x = make_tensor(shape, F32)
    if dim is None:
        check(lambda t: (t.sum(), t.amax(), t.mean(), t.var()), x, atol=1e-4, rtol=1e-5)
    else:
        check(
            lambda t: (t.sum(dim), t.amax(dim), t.amin(dim), t.mean(dim), t.var(dim)),
            x,
            atol=1e-4,
            rtol=1e-5,
        )


def test_reduction_of_size_one_and_empty_dims():
    x = make_tensor((4, 1, 8), F32)
    check(lambda t: (t.sum(1), t.amax(1, keepdim=True), t.mean(1), t.argmax(1)), x)
    e = torch.randn(4, 0)
    check(lambda t: (t.sum(-1), t.prod(-1), t.sum()), e)


def test_reduction_fused_with_pointwise():
    x, y = make_tensor((4, 8)), make_tensor((4, 1))
    check(
        lambda a, b: (
            (a * 2).exp().sum(-1) + 1,
            a - a.mean(-1, keepdim=True),
            (a + b).amax(0),
            (a * b).sum(),
        ),
        x,
        y,
    )
    check(lambda a: a / a.abs().sum(-1, keepdim=True).clamp_min(1e-6), x)


def test_multiple_reductions_one_input():
    x = make_tensor(SHAPE)
    check(
        lambda t: (t.sum(-1), t.amax(-1), t.amin(-1), t.mean(0), t.argmin(1), t.sum(-1).amax(-1)), x
    )


def test_max_min_with_indices():
    x = make_tensor(SHAPE)
    check(lambda t: (torch.max(t, -1), torch.min(t, 0, keepdim=True), t.max(), t.min()), x)


@pytest.mark.parametrize("name", ["eq_max", "sub_max", "onehot_min", "argmax_gather"])
def test_a_value_compared_with_its_own_reduction(name):
    # A value several nodes read is computed once when its bits depend on the implementation of a
    # function (exp, tanh, ...): computed again in another C++ kernel (libmvec in one loop, libm
    # or SLEEF in another), `y == y.amax(-1, keepdim=True)` found no maximum in some rows and
    # `(y - y.amax(-1, keepdim=True)).amax(-1)` was not 0 (4 and 2 of 8 shapes x dtypes).
    requires_coil()
    fns = {
        "eq_max": lambda x: (lambda y: (y == y.amax(-1, keepdim=True)).sum(-1))(torch.exp(x)),
        "sub_max": lambda x: (lambda y: (y - y.amax(-1, keepdim=True)).amax(-1))(torch.exp(x)),
        "onehot_min": lambda x: (lambda y: (y == y.amin(0)).sum(0))(torch.tanh(x * 0.3)),
        "argmax_gather": lambda x: (lambda y: y.gather(-1, y.argmax(-1, keepdim=True))
                                    - y.amax(-1, keepdim=True))(torch.sigmoid(x) * 5),
    }
    torch.manual_seed(0)
    for shape in ((8, 1, 5), (16, 37), (64, 300), (300, 64)):
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(shape, dtype=dtype) * 3
            torch._dynamo.reset()
            out = torch.compile(fns[name], backend="coil")(x)
            assert torch.equal(out, fns[name](x)), (shape, dtype)
