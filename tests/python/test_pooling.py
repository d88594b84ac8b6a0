"""Pooling (lower/pooling.cpp) against eager: max_pool1d/2d/3d with indices, avg_pool1d/2d/3d,
adaptive average and max pooling, area interpolation, forward and backward.

Under coil every test also checks that no graph used an ATen fallback: the pooling ops and their
backward ops are lowered into coil's own kernels (fusion tests count those kernels). Running the
suite with COIL_TEST_BACKEND=eager validates the tests themselves."""

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    BACKEND,
    FLOAT_DTYPES,
    assert_same,
    check,
    coil_records,
    compile_fn,
    dtype_id,
    make_input,
    make_tensor,
    requires_coil,
)
from torch import nn

NAN = float("nan")
INF = float("inf")

# bfloat16 gradients: eager rounds after every accumulation (and, for average pooling, the
# division); coil accumulates in float32 and rounds once.
BF16_GRAD_TOL = {"atol": 2e-2, "rtol": 2e-2}


def assert_lowered():
    """Under coil: every graph was compiled by coil and none called an ATen fallback."""
    if BACKEND != "coil":
        return
    records = coil_records()
    assert records, "coil compiled no graph"
    assert not any(r.eager_fallback for r in records), [r.eager_reason for r in records]
    fallbacks = sorted({op for r in records for op in r.fallback_ops})
    assert not fallbacks, f"ATen fallbacks: {fallbacks}"


def check_lowered(fn, *inputs, **kw):
    out = check(fn, *inputs, **kw)
    assert_lowered()
    return out


def _float_outputs(out):
    outs = out if isinstance(out, tuple) else (out,)
    return [o for o in outs if o.is_floating_point()]


def check_backward(fn, x, *, tol=None, lowered=True):
    """Forward outputs and the input's gradient (for a fixed random output gradient), eager vs
    compiled; under coil, both the forward and the backward graph must be compiled by coil."""
    x_ref = x.detach().clone().requires_grad_()
    x_cmp = x.detach().clone().requires_grad_()
    expected = fn(x_ref)
    actual = compile_fn(fn, dynamic=False)(x_cmp)
    grads = [make_tensor(o.shape, o.dtype) for o in _float_outputs(expected)]
    torch.autograd.backward(_float_outputs(expected), grads)
    torch.autograd.backward(_float_outputs(actual), grads)
    detach = lambda out: tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach()
    assert_same(detach(actual), detach(expected), **(tol or {}))
    grad_tol = BF16_GRAD_TOL if x.dtype == torch.bfloat16 else (tol or {})
    assert_same(x_cmp.grad, x_ref.grad, path="input gradient", **grad_tol)
    if BACKEND == "coil":
        kinds = {r.kind for r in coil_records()}
        assert {"forward", "backward"} <= kinds, kinds
        if lowered:
            assert_lowered()


def nchw(shape=(2, 3, 9, 11), dtype=torch.float32):
    return make_tensor(shape, dtype)


# --------------------------------------------------------------------------------------------
# max pooling
# --------------------------------------------------------------------------------------------

# (kernel_size, stride, padding, dilation, ceil_mode)
MAX_POOL_CASES = {
    "k2": (2, None, 0, 1, False),
    "k3s2p1": (3, 2, 1, 1, False),
    "k3s1p1": (3, 1, 1, 1, False),
    "rect_ceil": ((2, 3), (1, 2), (1, 0), 1, True),
    "dilation": (3, 2, 1, 2, False),
    "dilation_ceil": ((2, 3), 3, (1, 1), (3, 2), True),
    "k5s3p2_ceil": (5, 3, 2, 1, True),
}


@pytest.mark.parametrize("case", MAX_POOL_CASES)
def test_max_pool2d_forward_backward(case):
    k, s, p, d, ceil = MAX_POOL_CASES[case]
    fn = lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    check_backward(fn, nchw())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_max_pool2d_dtypes(dtype):
    fn = lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)
    check_backward(fn, nchw((2, 4, 10, 7), dtype))


def test_max_pool2d_ties_take_the_first_maximum():
    # Few distinct values: most windows hold their maximum more than once.
    x = torch.randint(0, 3, (2, 3, 9, 11)).float()
    check_backward(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), x)


def test_max_pool2d_nan_propagates_and_the_last_nan_is_the_index():
    x = nchw()
    x[0, 0, 1, 1] = NAN
    x[0, 0, 1, 2] = NAN  # the same windows as the one before: eager's index names this one
    x[1, 2, 4, 4] = NAN
    x[1, 1, 0, 0] = NAN  # in the corner, next to the padding
    out = check_lowered(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    assert out[0].isnan().any()


def test_max_pool2d_window_of_minus_infinity_points_at_its_first_element():
    x = torch.full((1, 2, 4, 5), -INF)
    x[0, 1, 2, 3] = 1.0
    check_lowered(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), x)


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset"])
def test_max_pool2d_input_layouts(kind):
    check_lowered(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
                  make_input(kind, (2, 3, 8, 10)))


def test_max_pool2d_channels_last_keeps_its_layout():
    x = nchw((2, 8, 9, 9)).to(memory_format=torch.channels_last)
    check_lowered(lambda x: F.max_pool2d(x, 3, 2, 1), x, check_strides=True)


def test_max_pool2d_unbatched_and_integer():
    check_lowered(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), nchw((3, 9, 8)))
    x = torch.randint(-9, 9, (2, 3, 9, 8))
    check_lowered(lambda x: F.max_pool2d(x, 2, 1, 1, return_indices=True), x)
    check_lowered(lambda x: F.max_pool2d(x, 3, 2, 1), -x.abs() - 1)  # windows all negative


def test_max_pool1d_forward_backward():
    fn = lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True)
    check_backward(fn, make_tensor((2, 4, 15)))


def test_max_pool3d_cube_window():
    # 3x3x3 = 27 slots: the largest window coil unrolls.
    fn = lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True)
    check_backward(fn, make_tensor((2, 3, 5, 7, 6)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_max_pool3d_forward_backward(dtype):
    fn = lambda x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True,
                                return_indices=True)
    check_backward(fn, make_tensor((2, 3, 5, 7, 6), dtype))


def test_max_pool2d_large_window_matches_eager():
    # 6x6 = 36 slots: more than coil unrolls, so the ATen op runs it (Inductor does the same).
    check(lambda x: F.max_pool2d(x, 6, 2, 3, return_indices=True), nchw((2, 3, 13, 12)))


# --------------------------------------------------------------------------------------------
# average pooling
# --------------------------------------------------------------------------------------------

# (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_POOL_CASES = {
    "k2": (2, None, 0, False, True, None),
    "k3s2p1": (3, 2, 1, False, True, None),
    "k3s2p1_exclude_pad": (3, 2, 1, False, False, None),
    "rect_ceil": ((2, 3), (2, 1), (1, 1), True, True, None),
    "rect_ceil_exclude_pad": ((3, 2), (2, 3), (1, 1), True, False, None),
    "divisor_override": ((2, 3), (2, 1), (1, 1), True, True, 5),
}


@pytest.mark.parametrize("case", AVG_POOL_CASES)
def test_avg_pool2d_forward_backward(case):
    k, s, p, ceil, include, div = AVG_POOL_CASES[case]
    fn = lambda x: F.avg_pool2d(x, k, s, p, ceil, include, div)
    check_backward(fn, nchw())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_avg_pool2d_dtypes(dtype):
    fn = lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    check_backward(fn, nchw((2, 4, 10, 7), dtype))


def test_avg_pool2d_of_integers_truncates():
    x = torch.randint(-9, 9, (2, 3, 9, 8))
    check_lowered(lambda x: F.avg_pool2d(x, 3, 2, 1), x)
    check_lowered(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), x)


def test_avg_pool2d_large_window_is_a_reduction():
    # 7x7 = 49 slots: a sum reduction over the window, then the division. The backward gathers
    # from at most 4x4 windows per input element: unrolled.
    check_backward(lambda x: F.avg_pool2d(x, 7, 2, 3, count_include_pad=False),
                   nchw((2, 3, 13, 12)))


def test_avg_pool1d_forward_backward():
    check_backward(lambda x: F.avg_pool1d(x, 3, 2, 1), make_tensor((2, 4, 15)))


def test_avg_pool3d_forward_backward():
    fn = lambda x: F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True,
                                count_include_pad=False)
    check_backward(fn, make_tensor((2, 3, 5, 7, 6)))


def test_local_response_norm():
    check_backward(lambda x: F.local_response_norm(x, 3), nchw())


# --------------------------------------------------------------------------------------------
# adaptive pooling
# --------------------------------------------------------------------------------------------

ADAPTIVE_SIZES = {
    "divides": ((3, 11), (3, 11)),
    "uneven": ((4, 5), (9, 11)),
    "larger": ((13, 17), (9, 11)),
    "one_row": ((1, 4), (5, 11)),
}


@pytest.mark.parametrize("size", ADAPTIVE_SIZES)
def test_adaptive_avg_pool2d_forward_backward(size):
    out, shape = ADAPTIVE_SIZES[size]
    check_backward(lambda x: F.adaptive_avg_pool2d(x, out), nchw((2, 3) + shape))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_adaptive_avg_pool2d_dtypes(dtype):
    check_backward(lambda x: F.adaptive_avg_pool2d(x, (4, 5)), nchw((2, 3, 9, 11), dtype))


def test_adaptive_avg_pool2d_large_window_is_a_reduction():
    # Windows of 12x6 elements: a sum reduction.
    check_backward(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), nchw((2, 3, 24, 18)))


@pytest.mark.parametrize("size", ADAPTIVE_SIZES)
def test_adaptive_max_pool2d_forward_backward(size):
    out, shape = ADAPTIVE_SIZES[size]
    fn = lambda x: F.adaptive_max_pool2d(x, out, return_indices=True)
    check_backward(fn, nchw((2, 3) + shape))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_adaptive_max_pool2d_dtypes(dtype):
    fn = lambda x: F.adaptive_max_pool2d(x, (4, 5), return_indices=True)
    check_backward(fn, nchw((2, 3, 9, 11), dtype))


def test_adaptive_max_pool2d_large_window_matches_eager():
    # Windows of 12x6 elements: more than coil unrolls, so the ATen op runs the forward.
    fn = lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True)
    check_backward(fn, nchw((2, 3, 24, 18)), lowered=False)


def test_adaptive_max_pool2d_nan():
    x = nchw()
    x[0, 0, 1, 1] = NAN
    x[0, 0, 1, 2] = NAN
    check_lowered(lambda x: F.adaptive_max_pool2d(x, (4, 5), return_indices=True), x)


def test_adaptive_pool1d():
    check_backward(lambda x: F.adaptive_avg_pool1d(x, 4), make_tensor((2, 3, 11)))
    check_backward(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True),
                   make_tensor((2, 3, 11)))


def test_adaptive_pool3d():
    x = make_tensor((2, 3, 5, 7, 6))
    check_backward(lambda x: F.adaptive_avg_pool3d(x, (3, 4, 2)), x)
    check_backward(lambda x: F.adaptive_max_pool3d(x, (3, 4, 2), return_indices=True), x)


def test_interpolate_area():
    check_backward(lambda x: F.interpolate(x, size=(4, 6), mode="area"), nchw())


# --------------------------------------------------------------------------------------------
# fusion and models
# --------------------------------------------------------------------------------------------


def _kernels():
    records = requires_coil().compiled_graphs()
    assert len(records) == 1, [r.kind for r in records]
    assert not records[0].fallback_ops, records[0].fallback_ops
    return records[0].kernel_names


def test_relu_into_max_pool2d_is_one_kernel():
    check(lambda x: F.max_pool2d(F.relu(x), 3, 2, 1), nchw())
    names = _kernels()
    assert len(names) == 1, names


def test_max_pool2d_values_and_indices_are_one_kernel():
    check(lambda x: F.max_pool2d(x * 2, 3, 2, 1, return_indices=True), nchw())
    names = _kernels()
    assert len(names) == 1, names


def test_avg_pool2d_between_pointwise_ops_is_one_kernel():
    check(lambda x: F.avg_pool2d(x.sigmoid(), 3, 2, 1).exp() + 1, nchw())
    names = _kernels()
    assert len(names) == 1, names


class Stem(nn.Module):
    """ResNet's stem: conv 7x7/2 -> batch norm -> relu -> max_pool 3x3/2."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, 2, 1)


def _pooling_fallbacks():
    return sorted({op for r in coil_records() for op in r.fallback_ops if "pool" in op})


def test_resnet_stem_inference():
    torch.manual_seed(0)
    m = Stem().eval()
    with torch.no_grad():
        m.bn.running_mean.normal_()
        m.bn.running_var.uniform_(0.5, 2.0)
        check(m, make_tensor((2, 3, 32, 30)), atol=1e-4, rtol=1e-4)
    assert not _pooling_fallbacks()
    if BACKEND == "coil":
        # The overlapping 3x3/2 windows would recompute the batch norm (five buffers) in each of
        # their 9 slots: it is stored by its own kernel and the pool reads it.
        names = [n for r in coil_records() for n in r.kernel_names]
        assert len(names) == 2 and "max_pool2d" in names[1] and "max_pool2d" not in names[0], names


def test_resnet_stem_training_step():
    torch.manual_seed(0)
    ref = Stem().train()
    model = Stem().train()
    model.load_state_dict(ref.state_dict())
    x = make_tensor((2, 3, 32, 30))

    def step(call, m):
        out = call(x)
        out.square().mean().backward()
        return out.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}

    expected = step(ref, ref)
    actual = step(compile_fn(model, dynamic=False), model)
    assert_same(actual, expected, atol=1e-4, rtol=1e-4)
    if BACKEND == "coil":
        kinds = {r.kind for r in coil_records() if not r.eager_fallback}
        assert {"forward", "backward"} <= kinds, kinds
        assert not _pooling_fallbacks(), _pooling_fallbacks()
