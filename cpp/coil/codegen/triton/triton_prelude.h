// The text every generated Triton module starts with, after its imports: small @triton.jit helpers
// with PyTorch's semantics where Triton's differ (Triton's // and % on integers truncate toward
// zero like C; torch's floor division and remainder follow Python), NaN-propagating max/min
// combines for reductions, and argmax/argmin combines that keep the first index on ties. Kept as
// one string so every output_code.py is self-contained and readable.
#pragma once

namespace coil::codegen::triton {

inline constexpr const char* kPrelude =
    R"PRELUDE(# ---- coil's Triton helpers (the same in every generated module) ----


@triton.jit
def coil_floordiv(a, b):
    # Python floor division on integers; Triton's // truncates toward zero.
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


@triton.jit
def coil_mod(a, b):
    # Python remainder on integers: the result takes the divisor's sign.
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def coil_fremainder(a, b):
    # torch.remainder on floats: fmod, moved to the divisor's sign.
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def coil_ffloordiv(a, b):
    # torch.floor_divide on floats: exact when a is a multiple of b, unlike floor(a / b).
    m = a % b
    d = (a - m) / b
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1.0, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    # a zero quotient takes the sign of a / b, as eager's (floor_divide(-0.0, 1) is -0.0)
    f = tl.where(d == 0, (a / b) * 0.0, f)
    return tl.where(b == 0, a / b, f)


@triton.jit
def coil_ipow(a, b):
    # Integer power by squaring; negative exponents give 0 except for bases 1 and -1.
    result = a * 0 + 1
    base = a + b * 0
    e = b + a * 0
    for _ in range(63):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = tl.where(e > 0, e >> 1, e)
    neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0))
    return tl.where(b < 0, neg.to(a.dtype), result)


@triton.jit
def coil_f32_to_bf16(x):
    # float32 -> bfloat16, round to nearest even, NaN kept, in integer ops. Used only by kernels
    # run under Triton's interpreter, whose own conversion rounds differently.
    u = x.to(tl.uint32, bitcast=True)
    r = tl.where((u & 0x7FFFFFFF) > 0x7F800000, u | 0x400000, u + 0x7FFF + ((u >> 16) & 1))
    return (r >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def coil_fmax(a, b):
    # coil_max of the C++ kernels: NaN wins, and of two equal values (0.0 and -0.0) the second,
    # so relu(-0.0) = maximum(0.0, -0.0) is -0.0 as eager's (tl.maximum gives +0.0).
    return tl.where((a != a) | (a > b), a, b)


@triton.jit
def coil_fmin(a, b):
    return tl.where((a != a) | (a < b), a, b)


@triton.jit
def coil_sign(x):
    s = (x > 0).to(x.dtype) - (x < 0).to(x.dtype)
    return tl.where(x != x, x, s)


@triton.jit
def coil_shl(a, b, bits: tl.constexpr):
    # torch's left shift: 0 for a count that is negative or at least the width.
    bad = (b < 0) | (b >= bits)
    return tl.where(bad, tl.zeros_like(a), a << tl.where(bad, 0, b))


@triton.jit
def coil_shr(a, b, bits: tl.constexpr, signed: tl.constexpr):
    # torch's right shift: a count that is negative or shifts every value bit out leaves the sign
    # fill (a >> (bits - 1)) of a signed type and 0 of an unsigned one.
    bad = (b < 0) | (b >= bits - signed)
    fill = tl.zeros_like(a)
    if signed:
        fill = a >> (bits - 1)
    return tl.where(bad, fill, a >> tl.where(bad, 0, b))


@triton.jit
def coil_max_combine(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def coil_min_combine(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def coil_prod_combine(a, b):
    return a * b


@triton.jit
def coil_logaddexp(a, b):
    # log(exp(a) + exp(b)), as eager's logcumsumexp combines: two equal infinities give
    # themselves (never inf - inf); NaN propagates.
    hi = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    lo = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    same_inf = (hi == lo) & ((hi == float("inf")) | (hi == float("-inf")))
    return tl.where(same_inf, hi, hi + libdevice.log1p(tl.exp(lo - hi)))


@triton.jit
def coil_argmax_combine(a, ia, b, ib):
    # The larger value wins; NaN beats everything; equal values keep the smaller index.
    a_nan = a != a
    b_nan = b != b
    tie = (a == b) | (a_nan & b_nan)
    take_b = ((b > a) & ~a_nan) | (b_nan & ~a_nan) | (tie & (ib < ia))
    return tl.where(take_b, b, a), tl.where(take_b, ib, ia)


@triton.jit
def coil_argmin_combine(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    tie = (a == b) | (a_nan & b_nan)
    take_b = ((b < a) & ~a_nan) | (b_nan & ~a_nan) | (tie & (ib < ia))
    return tl.where(take_b, b, a), tl.where(take_b, ib, ia)


@triton.jit
def coil_index(i, size, wrap: tl.constexpr, active, err):
    # An indirect index (an element of an index tensor) into a dimension of `size` elements:
    # wrapped when negative indices count from the end, returned when in [0, size). Lanes where it
    # is out of bounds and the access really happens (`active`) write (flag, index, size) to err,
    # and 0 over its fourth slot (ok, which a GPU's wrapper asserts without reading it back), for
    # the wrapper to raise; those lanes use position 0, so no access leaves the buffer.
    # `active` may span more of the block than i (a tiled kernel's access masked by rows and
    # columns through an index of the columns only; an index that is one value for the whole
    # block): the report is stored from every lane of `bad`, as a store's mask may not span more
    # of the block than its pointers.
    w = i
    if wrap:
        w = tl.where(i < 0, i + size, i)
    ok = (w >= 0) & (w < size)
    bad = (~ok) & active
    lanes = i + tl.zeros_like(bad).to(i.dtype)
    zero = tl.zeros_like(lanes)
    tl.store(err + 1 + zero, lanes, mask=bad)
    tl.store(err + 2 + zero, zero + size, mask=bad)
    tl.store(err + zero, zero + 1, mask=bad)
    tl.store(err + 3 + zero, zero, mask=bad)
    return tl.where(ok, w, tl.zeros_like(w))
)PRELUDE";

}  // namespace coil::codegen::triton
