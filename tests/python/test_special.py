"""Correctness: the special-function lowerings (lower/special.cpp) compared with eager — inverse
hyperbolics, erf and gamma families, Bessel and Airy functions, orthogonal polynomials, incomplete
gamma and zeta, signbit/copysign/fmin/fmax/hypot/nextafter/ldexp/angle, bit shifts and round with
decimals — on edge values (0, -0, negatives, poles, large values, NaN, +-inf) in float32, float64,
bfloat16 and integer inputs. Under coil every graph must be lowered: no ATen fallback op.

Ops of one dtype share a graph (one kernel build) and return a dict, so a mismatch names its op.
"""

import math

import pytest
import torch
from conftest import BACKEND, check, dtype_id, requires_coil

F32, F64, BF16, I64, BOOL = torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool
FLOATS = (F32, F64, BF16)
NAN, INF = math.nan, math.inf

# Edge values for the float functions: zeros of both signs, the domain borders of atanh/erfinv
# (+-1), ndtri (0, 1) and acosh (1), the poles of lgamma/digamma (0, -1, -2), Bessel zeros'
# neighbourhood, values where exp-scaled functions overflow (100, 1e4), and non-finite values.
EDGE = [0.0, -0.0, 0.25, -0.25, 0.5, -0.5, 0.9, -0.9, 0.999, -0.999, 1.0, -1.0, 1.5, -1.5,
        2.0, -2.0, 2.4048, 3.7, -3.7, 8.0, -8.0, 12.5, -12.5, 30.0, -30.0, 100.0, -100.0,
        1e4, -1e4, NAN, INF, -INF]
INTS = [-100, -7, -2, -1, 0, 1, 2, 3, 7, 25, 100]


def edge(dtype):
    """EDGE plus random values, as a 1-D tensor of dtype (integers for integer dtypes)."""
    if dtype == BOOL:
        return torch.tensor([True, False, True])
    if not dtype.is_floating_point:
        return torch.tensor(INTS, dtype=dtype)
    extra = torch.randn(24, dtype=torch.float64) * 6
    return torch.cat([torch.tensor(EDGE, dtype=torch.float64), extra]).to(dtype)


def check_lowered(fn, *inputs, **kwargs):
    """check() (eager vs compiled), and under coil no graph may run an op through ATen."""
    out = check(fn, *inputs, **kwargs)
    if BACKEND == "coil":
        records = requires_coil().compiled_graphs()
        fallbacks = [op for r in records for op in r.fallback_ops]
        assert not fallbacks, f"ATen fallback ops: {fallbacks}"
    return out


def eager_supports(fn, *inputs) -> bool:
    """Whether eager implements fn for these inputs' dtypes (many special functions have no
    bfloat16 kernel on the CPU)."""
    try:
        fn(*inputs)
    except (RuntimeError, NotImplementedError):
        return False
    return True


def only_supported(ops: dict, *inputs) -> dict:
    kept = {name: fn for name, fn in ops.items() if eager_supports(fn, *inputs)}
    assert kept, "eager supports none of the ops for these inputs"
    return kept


def run_all(ops: dict):
    """One function computing every op of `ops`; its result is a dict keyed by op name."""

    def fn(*args):
        return {name: op(*args) for name, op in ops.items()}

    return fn


UNARY = {
    "acosh": torch.acosh,
    "asinh": torch.asinh,
    "atanh": torch.atanh,
    "log10": torch.log10,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "i0": torch.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "erfcx": torch.special.erfcx,
    "ndtri": torch.special.ndtri,
    "log_ndtr": torch.special.log_ndtr,
    "bessel_j0": torch.special.bessel_j0,
    "bessel_j1": torch.special.bessel_j1,
    "bessel_y0": torch.special.bessel_y0,
    "bessel_y1": torch.special.bessel_y1,
    "modified_bessel_i0": torch.special.modified_bessel_i0,
    "modified_bessel_i1": torch.special.modified_bessel_i1,
    "modified_bessel_k0": torch.special.modified_bessel_k0,
    "modified_bessel_k1": torch.special.modified_bessel_k1,
    "scaled_modified_bessel_k0": torch.special.scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": torch.special.scaled_modified_bessel_k1,
    "spherical_bessel_j0": torch.special.spherical_bessel_j0,
    "airy_ai": torch.special.airy_ai,
    "angle": torch.angle,
    "signbit": torch.signbit,
}


@pytest.mark.parametrize("dtype", FLOATS + (I64, BOOL), ids=dtype_id)
def test_unary(dtype):
    x = edge(dtype)
    check_lowered(run_all(only_supported(UNARY, x)), x)


def test_unary_of_a_transposed_view():
    x = edge(F32)[:56].reshape(8, 7).t()
    check_lowered(run_all(only_supported(UNARY, x)), x)


def test_signbit_sees_negative_zero_and_negative_nan():
    x = torch.tensor([0.0, -0.0, NAN, -NAN, 1.0, -1.0, INF, -INF])
    check_lowered(torch.signbit, x)
    # The check above must be able to see the sign of zero: eager's answer differs from x < 0.
    assert torch.signbit(x)[1] and not (x < 0)[1]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", FLOATS + (I64,), ids=dtype_id)
def test_polygamma(n, dtype):
    # bfloat16 with n >= 3: eager's calc_polygamma<BFloat16> rounds intermediate products to
    # bfloat16, differing by up to 80% from a float32 computation.
    x = edge(dtype)
    if dtype == BF16:
        x = torch.cat([x, torch.linspace(-6, 6, 97, dtype=BF16)])
    check_lowered(lambda t: torch.polygamma(n, t), x)


def grid(a, b, dtype):
    """a down the rows, b across the columns: every pair once."""
    return (torch.tensor(a, dtype=torch.float64).to(dtype)[:, None],
            torch.tensor(b, dtype=torch.float64).to(dtype)[None, :])


SIGNED = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.0, 1e30, -1e-30, 1e-40, NAN, -NAN, INF, -INF]
BINARY = {
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "fmin": torch.fmin,
    "fmax": torch.fmax,
}


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_binary_float_utilities(dtype):
    a, b = grid(SIGNED, SIGNED, dtype)
    check_lowered(run_all(only_supported(BINARY, a, b)), a, b)


def test_nextafter_bfloat16_steps_to_the_neighbouring_bfloat16():
    a, b = grid([1.0, -1.0, 0.0, 3.0], [2.0, -2.0], BF16)
    out = check_lowered(torch.nextafter, a, b)
    assert out[0, 0] == torch.tensor(1.0078125, dtype=BF16)


def test_copysign_and_fmin_with_numbers_and_integers():
    x = torch.tensor(INTS)
    y = torch.tensor([1.5, NAN, -2.0] * 4)[: x.numel()]
    check_lowered(
        lambda t, f: {
            "copysign_scalar": torch.copysign(t, -2.0),
            "copysign_int": torch.copysign(t, t - 3),
            "fmin_int": torch.fmin(t, 3 - t),
            "fmax_bool": torch.fmax(t > 0, t < 5),
            "fmin_mixed": torch.fmin(t, f),
        },
        x,
        y,
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_incomplete_gamma_and_zeta(dtype):
    a, x = grid([0.5, 1.0, 2.5, 10.0, 100.0, 0.0, -1.0, NAN, INF],
                [0.0, 0.1, 1.0, 3.0, 20.0, 200.0, -1.0, NAN, INF], dtype)
    ops = {"igamma": torch.igamma, "igammac": torch.igammac}
    s, q = grid([1.0, 1.5, 2.0, 3.0, 5.5, 10.0, 0.5, NAN, INF],
                [-2.5, -2.0, 0.0, 0.5, 1.0, 2.0, 7.5, 100.0, NAN], dtype)
    zeta = {"zeta": torch.special.zeta}
    check_lowered(run_all(only_supported(ops, a, x)), a, x)
    if eager_supports(torch.special.zeta, s, q):
        check_lowered(run_all(zeta), s, q)


def test_zeta_with_a_number():
    q = torch.tensor([0.5, 1.0, 2.0, 7.5, -2.5])
    check_lowered(lambda t: (torch.special.zeta(2.0, t), torch.special.zeta(t + 2, 3.0)), q)


POLYNOMIALS = {
    name: getattr(torch.special, name)
    for name in [
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p",
    ]
}


@pytest.mark.parametrize("dtype", (F32, F64, I64), ids=dtype_id)
def test_orthogonal_polynomials(dtype):
    # ATen's special cases: n < 0, n = 0, 1, |x| = 1, |x| < 1 with n > 6 (the cos/acos form).
    xs = [-1.5, -1.0, -0.7, -0.2, 0.0, 0.3, 0.5, 0.99, 1.0, 1.7]
    ns = [-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 12.0]
    if not dtype.is_floating_point:
        xs, ns = [-2, -1, 0, 1, 2, 3], [-1, 0, 1, 2, 5, 8]
    x, n = grid(xs, ns, dtype)
    check_lowered(run_all(only_supported(POLYNOMIALS, x, n)), x, n)


def test_orthogonal_polynomials_of_nan():
    # Only these three: for a NaN x and n >= 2 the others return an uninitialized variable in
    # ATen (their recurrence loops stop at once on NaN), which no compiled code can reproduce.
    x, n = grid([NAN, 0.5], [0.0, 1.0, 2.0, 5.0, 12.0], F32)
    ops = {k: POLYNOMIALS[k]
           for k in ("chebyshev_polynomial_t", "hermite_polynomial_h", "hermite_polynomial_he")}
    check_lowered(run_all(ops), x, n)


def test_orthogonal_polynomials_with_a_number():
    x = torch.linspace(-1.2, 1.2, 13)
    check_lowered(
        lambda t: (torch.special.chebyshev_polynomial_t(t, 4),
                   torch.special.hermite_polynomial_h(0.5, (t * 5).round())),
        x,
    )


@pytest.mark.parametrize("decimals", [-3, -1, 0, 1, 3])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_round_decimals(decimals, dtype):
    # Halfway cases after scaling (2.675 * 100 is 267.5 in float32), large and non-finite values.
    x = torch.tensor([2.675, -2.675, 0.0015, 1234.5678, -1234.5678, 2500.0, 3500.0, 1e20,
                      0.5, 1.5, NAN, INF, -INF], dtype=torch.float64).to(dtype)
    x = torch.cat([x, (torch.randn(40, dtype=torch.float64) * 1000).to(dtype)])
    check_lowered(lambda t: torch.round(t, decimals=decimals), x)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_ldexp_integer_exponent(dtype):
    x, e = grid([0.75, -3.0, 1e-3, 5e3, NAN, INF, -INF], [-20, -1, 0, 1, 5, 40], dtype)
    # Eager's int-exponent ldexp allocates its output like x: give x the full shape.
    x, e = torch.broadcast_tensors(x, e.to(torch.int64))
    check_lowered(torch.ldexp, x.contiguous(), e)


def test_ldexp_past_the_float_range():
    # std::ldexp scales exactly where pow(2, e) alone over- or underflows (torch >= 2.12 takes that
    # path for integer exponents; older versions multiply by pow(2, e)).
    x, e = torch.tensor([1e-30, 3.0, 0.0]), torch.tensor([130, -140, 300])
    if not torch.equal(torch.ldexp(x, e), x * torch.pow(2.0, e.double()).float()):
        check_lowered(torch.ldexp, x, e)
    else:
        pytest.skip("this torch computes ldexp as x * pow(2, e)")


def test_ldexp_float_and_integer_operands():
    x = torch.tensor([0.75, -3.0, 2.0, 0.0])
    e = torch.tensor([-1.5, 0.5, 3.0, 2.0])
    check_lowered(
        lambda a, b: {
            "float_exponent": torch.ldexp(a, b),
            "bf16_exponent": torch.ldexp(a, b.bfloat16()),
            "int_mantissa": torch.ldexp(a.round().long(), b.round().long()),
        },
        x,
        e,
    )


@pytest.mark.parametrize("dtype", (I64, torch.int32, torch.int8, torch.uint8), ids=dtype_id)
def test_bit_shifts(dtype):
    info = torch.iinfo(dtype)
    values = [0, 1, -1, 5, -5, 100, -100, info.max, info.min]
    counts = [-3, -1, 0, 1, 2, 5, 7, 8, 31, 32, 63, 64, 70]
    a = torch.tensor([v for v in values if info.min <= v <= info.max], dtype=dtype)[:, None]
    b = torch.tensor([c for c in counts if info.min <= c <= info.max], dtype=dtype)[None, :]
    check_lowered(
        lambda x, y: {
            "left": torch.bitwise_left_shift(x, y),
            "right": torch.bitwise_right_shift(x, y),
            "left_scalar": torch.bitwise_left_shift(x, 3),
            "right_scalar": torch.bitwise_right_shift(x, 2),
        },
        a,
        b,
    )


def test_bit_shifts_of_a_number_by_a_tensor():
    counts = torch.tensor([-1, 0, 1, 5, 63, 64])
    check_lowered(
        lambda c: (torch.bitwise_left_shift(3, c), torch.bitwise_right_shift(-1000, c)), counts
    )


def test_results_feed_fused_consumers():
    # Special functions inside a longer fused chain, with a reduction after them.
    x = torch.rand(6, 33) * 4 + 0.1

    def f(t):
        y = torch.special.i0e(t) * torch.digamma(t) + torch.acosh(t + 1)
        return y.sum(-1), torch.special.chebyshev_polynomial_t(t - 2, 3.0) - y

    check_lowered(f, x)
