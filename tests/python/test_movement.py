"""Correctness of data-movement and normalization lowerings that coil once left to ATen: flip,
repeat/tile, unfold, diagonal, the *_scatter ops, copy, *_copy views, vector norms, elu, group
norm, batch norm in training, addmv. Each is compared with eager and must compile without an ATen
fallback op. Short scans (cumsum, cumprod) are prefix reductions."""

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, check, coil_records, dtype_id, make_tensor, requires_coil

F32, F64, I64, BOOL, BF16 = torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16


def check_lowered(fn, *inputs, **kw):
    out = check(fn, *inputs, **kw)
    if BACKEND == "coil":
        fallbacks = [op for r in coil_records() for op in r.fallback_ops]
        assert not fallbacks, f"ATen fallback ops: {fallbacks}"
    return out


MOVEMENT = {
    "flip": lambda x: torch.flip(x, (0, 2)),
    "flip_neg": lambda x: torch.flip(x * 2, (-1,)),
    "fliplr": lambda x: torch.fliplr(x),
    "rot90": lambda x: torch.rot90(x, 1, (1, 2)),
    "repeat": lambda x: x.repeat(2, 1, 3),
    "repeat_new_dims": lambda x: x.repeat(2, 1, 1, 2),
    "tile": lambda x: torch.tile(x[0], (3, 2)),
    "unfold": lambda x: x.unfold(2, 3, 2),
    "unfold_step1": lambda x: (x + 1).unfold(1, 2, 1),
    "diagonal": lambda x: torch.diagonal(x, 1, 1, 2),
    "diagonal_neg": lambda x: torch.diagonal(x * 2, -2, 2, 0),
    "trace": lambda x: torch.trace(x[0]),
    "narrow_copy": lambda x: torch.narrow_copy(x, 2, 1, 3),
    "permute_copy": lambda x: torch.permute_copy(x, (2, 0, 1)),
    "unbind_copy": lambda x: torch.unbind_copy(x, 1),
    "diff": lambda x: torch.diff(x, dim=-1),
}


# Eager rejects bool for these (arithmetic on bool, or trace).
NOT_BOOL = ("trace", "diff", "flip_neg", "diagonal_neg", "unfold_step1")
MOVEMENT_CASES = [
    (name, dtype)
    for name in MOVEMENT
    for dtype in (F32, I64, BOOL, BF16)
    if not (dtype == BOOL and name in NOT_BOOL)
]


@pytest.mark.parametrize(
    "name,dtype", MOVEMENT_CASES, ids=[f"{n}-{dtype_id(d)}" for n, d in MOVEMENT_CASES]
)
def test_movement(name, dtype):
    check_lowered(MOVEMENT[name], make_tensor((3, 4, 6), dtype))


SCATTERS = {
    "slice_scatter": lambda x, s: torch.slice_scatter(x, s[:, :2], dim=1, start=1, end=3),
    "slice_scatter_step": lambda x, s: torch.slice_scatter(x, s[:, :, :3], dim=2, start=0, step=2),
    "slice_scatter_neg": lambda x, s: torch.slice_scatter(x, s[:, :, :2], dim=-1, start=-3, end=-1),
    "select_scatter": lambda x, s: torch.select_scatter(x, s[:, 0], 1, -1),
    "diagonal_scatter": lambda x, s: torch.diagonal_scatter(x, s[:, :4, 0], 1, 1, 2),
    "diagonal_scatter_neg": lambda x, s: torch.diagonal_scatter(x, s[:, :3, 0], -1, 1, 2),
}


@pytest.mark.parametrize("dtype", [F32, I64, BF16], ids=dtype_id)
@pytest.mark.parametrize("name", list(SCATTERS))
def test_scatter_region(name, dtype):
    check_lowered(SCATTERS[name], make_tensor((3, 4, 6), dtype), make_tensor((3, 4, 6), dtype))


def test_copy_broadcasts_and_casts():
    # aten.copy(self, src): src broadcast to self's shape, in self's dtype.
    fn = lambda x, y: torch.ops.aten.copy(x, y)
    check_lowered(fn, make_tensor((3, 4), F64), make_tensor((4,), F32))


NORMS = [
    ("2", lambda x: torch.linalg.vector_norm(x)),
    ("2_dim", lambda x: torch.linalg.vector_norm(x, dim=-1, keepdim=True)),
    ("1", lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 2))),
    ("inf", lambda x: torch.linalg.vector_norm(x, float("inf"), dim=1)),
    ("-inf", lambda x: torch.linalg.vector_norm(x, float("-inf"), dim=1)),
    ("0", lambda x: torch.linalg.vector_norm(x, 0, dim=2)),
    ("3.5", lambda x: torch.linalg.vector_norm(x, 3.5, dim=0)),
    ("dtype", lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float64)),
    ("normalize", lambda x: F.normalize(x, dim=-1)),
    ("cosine_similarity", lambda x: F.cosine_similarity(x, x.flip(0), dim=-1)),
]


@pytest.mark.parametrize("dtype", [F32, F64, BF16], ids=dtype_id)
@pytest.mark.parametrize("name,fn", NORMS, ids=[n for n, _ in NORMS])
def test_vector_norm(name, fn, dtype):
    x = make_tensor((3, 4, 6), dtype)
    x[0, 1, 2] = 0
    check_lowered(fn, x)


@pytest.mark.parametrize("dtype", [F32, F64, BF16], ids=dtype_id)
def test_elu_family(dtype):
    x = make_tensor((4, 9), dtype, scale=3)
    check_lowered(lambda t: F.elu(t, alpha=0.7), x)
    check_lowered(lambda t: F.selu(t), x)
    check_lowered(lambda t: F.celu(t, alpha=1.3), x)


@pytest.mark.parametrize("dtype", [F32, F64, BF16], ids=dtype_id)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_group_norm_lowered(dtype, affine):
    x = make_tensor((2, 6, 4, 5), dtype)
    w, b = (make_tensor((6,), dtype), make_tensor((6,), dtype)) if affine else (None, None)
    tol = {} if dtype == BF16 else {"atol": 1e-5, "rtol": 1e-5}
    check_lowered(lambda t: F.group_norm(t, 3, w, b, eps=1e-5), x, **tol)
    # the saved statistics too (what backward reads)
    fn = lambda t: torch.ops.aten.native_group_norm(t, w, b, 2, 6, 20, 2, 1e-5)
    check_lowered(fn, x, **tol)


@pytest.mark.parametrize("dtype", [F32, F64], ids=dtype_id)
def test_batch_norm_training_functional(dtype):
    # The functional form AOTAutograd produces: outputs plus the updated running statistics.
    x = make_tensor((4, 3, 5, 2), dtype)
    w, b = make_tensor((3,), dtype), make_tensor((3,), dtype)
    rm, rv = make_tensor((3,), dtype), make_tensor((3,), dtype, domain="positive")
    fn = lambda t, rm, rv: torch.ops.aten._native_batch_norm_legit_functional(
        t, w, b, rm, rv, True, 0.1, 1e-5
    )
    check_lowered(fn, x, rm, rv, atol=1e-5, rtol=1e-5)
    fn = lambda t: torch.ops.aten._native_batch_norm_legit.no_stats(t, w, b, True, 0.1, 1e-5)
    check_lowered(fn, x, atol=1e-5, rtol=1e-5)


def test_batch_norm_training_updates_running_stats():
    bn = torch.nn.BatchNorm2d(3).train()
    ref = torch.nn.BatchNorm2d(3).train()
    ref.load_state_dict(bn.state_dict())
    x = make_tensor((4, 3, 5, 2))
    out = torch.compile(bn, backend=BACKEND)(x)
    torch.testing.assert_close(out, ref(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)


@pytest.mark.parametrize("dtype", [F32, F64, BF16], ids=dtype_id)
def test_addmv(dtype):
    s, m, v = make_tensor((5,), dtype), make_tensor((5, 7), dtype), make_tensor((7,), dtype)
    check_lowered(lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2), s, m, v)
    check_lowered(lambda s, m, v: torch.addmv(s, m, v, beta=0), s, m, v)


SCANS = [
    ("cumsum_last", lambda x: torch.cumsum(x, -1)),
    ("cumsum_first", lambda x: torch.cumsum(x * 2, 0)),
    ("cumprod", lambda x: torch.cumprod(x, 1)),
    ("cumsum_dtype", lambda x: torch.cumsum(x, 2, dtype=torch.float64)),
]


@pytest.mark.parametrize("dtype", [F32, F64, I64, BOOL, BF16], ids=dtype_id)
@pytest.mark.parametrize("name,fn", SCANS, ids=[n for n, _ in SCANS])
def test_short_scans_are_prefix_reductions(name, fn, dtype):
    x = make_tensor((3, 5, 7), dtype)
    if name == "cumprod" and dtype.is_floating_point:
        x = x.clamp(-1.5, 1.5)
    check_lowered(fn, x)


LONG_SCANS = [
    ("cumsum_row", lambda x: torch.cumsum(x, -1) + 1),
    ("cumsum_first", lambda x: torch.cumsum(x * 2, 0)),
    ("cumsum_middle", lambda x: torch.cumsum(x, 1)),
    ("cumprod_row", lambda x: torch.cumprod(1 + x / 64, 2)),
    ("cumprod_middle", lambda x: torch.cumprod(1 + x / 64, 1)),
    ("cumsum_transposed", lambda x: torch.cumsum(x.transpose(0, 2), 0)),
    ("cumsum_dtype", lambda x: torch.cumsum(x, 1, dtype=torch.float64)),
]


@pytest.mark.parametrize("dtype", [F32, I64, BOOL, BF16], ids=dtype_id)
@pytest.mark.parametrize("name,fn", LONG_SCANS, ids=[n for n, _ in LONG_SCANS])
def test_long_scans_are_scan_kernels(name, fn, dtype):
    # Beyond realize_policy::kMaxPrefixReductionScan (32) a scan is a kernel of its own that
    # carries the running value (ir::Buffer::scan): row form along the innermost dim, column form
    # (a loop over the scan, contiguous points side by side) along the others.
    check_lowered(fn, make_tensor((35, 40, 37), dtype), atol=1e-3, rtol=1e-3)


SCAN_EPILOGUES = [
    ("row", lambda x: torch.cumsum(x, -1) * 2 + x, 1),
    ("column", lambda x: torch.cumsum(x, 0) * 3 - x, 1),
    # math functions (exp, ...) stay in a vector kernel of their own: the scan loop is scalar
    ("sigmoid", lambda x: torch.sigmoid(torch.cumsum(x, 0)) - x, 2),
    ("middle", lambda x: (torch.cumprod(1 + x / 64, 1) > 1).to(x.dtype), 1),
    ("cummax", lambda x: (torch.cummax(x, 2).values - x, torch.cummax(x, 2).indices), 1),
    # a reader at other positions (the scan flipped) is a kernel of its own
    ("flipped", lambda x: torch.cumsum(x, 1).flip(1) + 1, 2),
]


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dtype_id)
@pytest.mark.parametrize("name,fn,kernels", SCAN_EPILOGUES, ids=[n for n, _, _ in SCAN_EPILOGUES])
def test_pointwise_readers_join_the_scan(name, fn, kernels, dtype):
    # sched::fuse_scan_epilogue: a pointwise reader over the scan's own elements that reads it
    # where it is written is computed at each step of the scan, in its kernel; a 16-bit scan's
    # readers see the rounded value, as eager's.
    coil = requires_coil()
    check_lowered(fn, make_tensor((35, 40, 37), dtype), atol=1e-3, rtol=1e-3)
    assert sum(len(r.kernel_names) for r in coil.compiled_graphs()) == kernels


@pytest.mark.parametrize("length", [33, 1000])
def test_scans_of_a_symbolic_length(length):
    check_lowered(lambda x: torch.cumsum(x, 1) * 2, make_tensor((3, length)), dynamic=True,
                  atol=1e-4, rtol=1e-4)
    check_lowered(lambda x: torch.cumprod(1 + x / 64, 0), make_tensor((length, 5)), dynamic=True,
                  atol=1e-4, rtol=1e-4)


def test_a_scan_of_32_is_a_prefix_reduction():
    check_lowered(lambda x: torch.cumsum(x, 1) + 1, make_tensor((2, 32)))


CUMULATIVE = [
    ("cummax", lambda x: torch.cummax(x, 1)),
    ("cummin", lambda x: torch.cummin(x, 0)),
    ("logcumsumexp", lambda x: torch.logcumsumexp(x, -1)),
]


# (eager has no integer logcumsumexp)
CUMULATIVE_CASES = [
    (name, fn, dtype)
    for name, fn in CUMULATIVE
    for dtype in (F32, F64, I64, BOOL, BF16)
    if name != "logcumsumexp" or dtype.is_floating_point
]


@pytest.mark.parametrize(
    "name,fn,dtype", CUMULATIVE_CASES, ids=[f"{n}-{dtype_id(d)}" for n, _, d in CUMULATIVE_CASES]
)
def test_cumulative_extremes_and_logcumsumexp(name, fn, dtype):
    # Small integers make ties, which eager resolves to the last position; NaN and infinities in
    # float rows (the last NaN's position wins, as in eager).
    x = torch.randint(-2, 3, (4, 9)).to(dtype)
    if dtype.is_floating_point:
        x[1, 3], x[2, 5], x[2, 7], x[3, 0] = float("nan"), float("nan"), float("nan"), float("-inf")
        x[0, :2] = float("-inf")
    check_lowered(fn, x)


@pytest.mark.parametrize("dtype", [F32, I64, BOOL, BF16], ids=dtype_id)
@pytest.mark.parametrize("dim", [0, 1])
def test_long_cumulative_extremes_scan(dim, dtype):
    # Beyond the prefix reductions: a running max (min) scan, then a scan of the positions that
    # hold their prefix's extreme. Ties (small integers), NaNs and infinities as above; the scan
    # dim in row form (1) and column form (0).
    x = torch.randint(-2, 3, (40, 45)).to(dtype)
    if dtype.is_floating_point:
        x[1, 3], x[2, 5], x[2, 7], x[3, 0], x[30, 40] = (float("nan"),) * 3 + (float("-inf"),) * 2
        x[5, 2], x[33, 1] = float("nan"), float("inf")
        x[0, :2] = float("-inf")
    check_lowered(lambda t: (torch.cummax(t, dim), torch.cummin(t * 1, dim)), x)


@pytest.mark.parametrize("dtype", [F32, F64, BF16], ids=dtype_id)
@pytest.mark.parametrize("dim", [0, 1])
def test_long_logcumsumexp_scans(dim, dtype):
    # A scan whose combine is log-add-exp (coil_logaddexp): -inf rows stay -inf, a +inf stays,
    # NaN propagates; values far apart (no shift would keep them all in range).
    x = (make_tensor((40, 45), F32) * 30).to(dtype)
    x[0, :] = float("-inf")
    x[:, 0] = float("-inf")
    x[3, 7], x[9, 40], x[20, 20] = float("inf"), float("nan"), float("-inf")
    check_lowered(lambda t: torch.logcumsumexp(t, dim), x, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.5, float("inf")])
def test_dist(p):
    check_lowered(lambda a, b: torch.dist(a, b, p), make_tensor((3, 4)), make_tensor((4,)))


# Cats and pads along an outer dim of short rows (their inner loop unrolled inside the loop over
# rows, each element read under the condition of its piece): GCC 12 vectorized the conditional
# loads of such a loop wrongly (fuzzer seed 7182: rows 13-15 of a cat of two [13, 2] int32
# tensors came out zero).
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("rows,cols", [(13, 2), (13, 3), (29, 4), (7, 2)])
def test_cat_and_pad_of_short_rows(rows, cols, dtype):
    x = (torch.randn(rows, cols) * 8).to(dtype)
    y = (torch.randn(rows + 3, cols) * 8).to(dtype)
    f = lambda a, b: (torch.cat([a, a]), torch.cat([a, b, a]), F.pad(a, (0, 0, 5, 2)))
    out = torch.compile(f, backend="coil")(x, y)
    for o, r in zip(out, f(x, y)):
        assert torch.equal(o, r)


# A pad that only crops (negative pads) reads no element outside its input: a strided copy with
# no mask (perf fuzzer seed 6064: each element read under an always-true mask, 4x eager's time);
# mixed signs keep the mask of the padded side.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pads", [(-1, -1), (-1, -1, 0, 0), (-2, 3, -1, 0), (0, -3, 2, -1)])
def test_pads_that_crop(pads, dtype):
    x = torch.randn(5, 13, 22).to(dtype)
    f = lambda t: F.pad(t, pads, value=-1.5)
    out = torch.compile(f, backend="coil")(x)
    assert torch.equal(out, f(x))
