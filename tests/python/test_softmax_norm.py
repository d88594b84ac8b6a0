"""Correctness: softmax / log_softmax over various dims and dtypes, and normalizations
(layer_norm, batch_norm in eval, group_norm, rms_norm)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import check, dtype_id, make_input, make_tensor

F32, F64, BF16 = torch.float32, torch.float64, torch.bfloat16

SOFTMAX_CASES = [((4, 8), d) for d in (0, 1, -1)] + [((3, 5, 7), d) for d in (0, 1, 2, -1)]


@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES, ids=[f"{s}-d{d}" for s, d in SOFTMAX_CASES])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dims(op, shape, dim):
    f = getattr(torch, op)
    check(lambda x: f(x, dim=dim), make_tensor(shape), check_strides=True)


@pytest.mark.parametrize("dim", [0, -1], ids=["d0", "d-1"])
@pytest.mark.parametrize("dtype", [F64, BF16], ids=dtype_id)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dtypes(op, dtype, dim):
    f = getattr(torch, op)
    check(lambda x: f(x, dim), make_tensor((3, 5, 7), dtype))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_dtype_arg(op):
    f = getattr(F, op)
    check(lambda x: f(x, dim=-1, dtype=torch.float32), make_tensor((4, 8), BF16))
    check(lambda x: f(x, dim=0, dtype=torch.float64), make_tensor((4, 8), F32))


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset", "size1"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_kinds(op, kind):
    f = getattr(torch, op)
    x = make_input(kind, (4, 8))
    check(lambda t: (f(t, -1), f(t, 0)), x)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_numerically_stable(op):
    # large logits: exp overflows unless the row max is subtracted first
    f = getattr(torch, op)
    x = make_tensor((4, 8)) * 1000
    x[0] = 88.0
    x[1, 0] = 1e30
    check(lambda t: f(t, -1), x)
    check(lambda t: f(t.to(BF16), 0), x)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_masked_rows(op):
    # attention-style masking: some -inf entries per row (every row keeps a finite entry)
    f = getattr(torch, op)
    x = make_tensor((4, 8))
    mask = torch.ones(4, 8, dtype=torch.bool).triu(1)
    check(lambda t, m: f(t.masked_fill(m, float("-inf")), -1), x, mask)


def test_softmax_odd_sizes_and_size_one():
    check(lambda t: (t.softmax(-1), t.log_softmax(0)), make_tensor((3, 1031)), atol=1e-5, rtol=1e-5)
    check(lambda t: (t.softmax(1), t.log_softmax(1), t.softmax(-1)), make_tensor((4, 1, 8)))
    check(lambda t: t.softmax(0), make_tensor((1, 8)))


def test_softmax_in_expression():
    x, y = make_tensor((4, 8)), make_tensor((4, 8))
    check(lambda a, b: (a * 0.125).softmax(-1) @ b.t(), x, y)
    check(lambda a, b: -(a.log_softmax(-1) * b.softmax(-1)).sum(-1).mean(), x, y)
    check(lambda a: torch.nn.functional.softmin(a, 1) + a.softmax(1), x)


# --------------------------------------------------------------------------------------------
# normalizations
# --------------------------------------------------------------------------------------------

LN_CASES = [((4, 8), (8,)), ((3, 5, 7), (7,)), ((3, 5, 7), (5, 7)), ((2, 3, 1031), (1031,))]


@pytest.mark.parametrize("affine", ["weight_bias", "weight_only", "none"])
@pytest.mark.parametrize("shape,norm", LN_CASES, ids=[f"{s}-{n}" for s, n in LN_CASES])
def test_layer_norm(shape, norm, affine):
    x = make_tensor(shape)
    w = make_tensor(norm) if affine != "none" else None
    b = make_tensor(norm) if affine == "weight_bias" else None
    if w is None:
        check(lambda t: F.layer_norm(t, norm, eps=1e-5), x, atol=1e-5, rtol=1e-5)
    elif b is None:
        check(lambda t, w: F.layer_norm(t, norm, w), x, w, atol=1e-5, rtol=1e-5)
    else:
        check(lambda t, w, b: F.layer_norm(t, norm, w, b, eps=1e-3), x, w, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [F64, BF16], ids=dtype_id)
def test_layer_norm_dtypes(dtype):
    x, w, b = make_tensor((3, 5, 8), dtype), make_tensor((8,), dtype), make_tensor((8,), dtype)
    check(lambda t, w, b: F.layer_norm(t, (8,), w, b), x, w, b)


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset", "broadcast"])
def test_layer_norm_kinds(kind):
    x = make_input(kind, (4, 8))
    check(lambda t: F.layer_norm(t, (8,)), x, atol=1e-5, rtol=1e-5)


def test_layer_norm_constant_rows():
    # zero variance: the result must be finite (eps inside the rsqrt)
    x = make_tensor((4, 8))
    x[1] = 3.0
    check(lambda t: F.layer_norm(t, (8,), eps=1e-5), x)


@pytest.mark.parametrize("n", [40, 77, 1000])
def test_statistics_of_constant_rows_are_exact(n):
    # A row of equal values c whose sum rounds (c * n is not exact): eager's Welford gives mean c
    # and variance 0, so (x - mean) is 0 and layer_norm's output is exactly its bias. coil's
    # corrected two-pass moments get the same; the plain sum / n did not (its rounding times
    # 1/sqrt(eps), 1.9e-4 for a column of 40 values).
    gen = torch.Generator().manual_seed(n)
    c = torch.rand(6, 1, generator=gen) * 10 + 0.1
    x = c.expand(6, n).contiguous()
    b = torch.randn(n, generator=gen)
    ln = torch.compile(lambda t, b: F.layer_norm(t, (n,), None, b), backend="coil")
    assert torch.equal(ln(x, b), b.expand(6, n))
    var, mean = torch.compile(lambda t: torch.var_mean(t, 1), backend="coil")(x)
    assert torch.equal(mean, c[:, 0]) and torch.equal(var, torch.zeros(6))
    g = torch.compile(lambda t: F.group_norm(t, 6), backend="coil")(x.view(1, 6, n))
    assert torch.equal(g, torch.zeros(1, 6, n))
    t = x.t().reshape(n, 6, 1, 1)  # channels of equal values for a training batch norm
    bn = torch.compile(lambda t: F.batch_norm(t, None, None, training=True), backend="coil")(t)
    assert torch.equal(bn, torch.zeros(n, 6, 1, 1))


def test_batch_norm_eval():
    x = make_tensor((2, 3, 4, 5))
    mean, var = make_tensor((3,)), make_tensor((3,), domain="positive")
    w, b = make_tensor((3,)), make_tensor((3,))
    check(
        lambda t, m, v, w, b: F.batch_norm(t, m, v, w, b, training=False, eps=1e-5),
        x,
        mean,
        var,
        w,
        b,
        atol=1e-5,
        rtol=1e-5,
    )
    check(lambda t, m, v: F.batch_norm(t, m, v, training=False), x, mean, var, atol=1e-5, rtol=1e-5)


def test_group_norm():
    x = make_tensor((2, 6, 4, 5))
    w, b = make_tensor((6,)), make_tensor((6,))
    check(lambda t, w, b: F.group_norm(t, 3, w, b), x, w, b, atol=1e-5, rtol=1e-5)


def test_rms_norm():
    x, w = make_tensor((3, 5, 8)), make_tensor((8,))
    check(lambda t, w: F.rms_norm(t, (8,), w, eps=1e-6), x, w, atol=1e-5, rtol=1e-5)
    check(lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6), x)
