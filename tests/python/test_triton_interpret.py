"""Correctness of the Triton backend without a GPU: CPU tensors, coil's Triton kernels run by
Triton's interpreter with coil.config cpu_backend="triton". Sizes stay small: the interpreter runs
each program instance in NumPy. The same cases run on CUDA in tests/gpu/test_triton_gpu.py.

The interpreter never compiles a kernel, so every test here also compiles each kernel for an
H200 (triton_check_target="sm_90", python/coil/triton_check.py) where Triton can do so on this
machine: a kernel the GPU compiler rejects fails the test that made it.

TRITON_INTERPRET=1 must be set before triton is imported (Triton's own library functions, such as
tl.sum, are made interpretable at import), so in an ordinary run these tests execute in one child
process started by test_in_interpreter_process; run with TRITON_INTERPRET=1 set, they run directly.
"""

import functools
import os
import re
import subprocess
import sys
import zlib

import pytest
import torch
import torch.nn.functional as F

from conftest import BACKEND, check, make_input, make_tensor, requires_coil

pytest.importorskip("triton")

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's Triton kernels")

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
BF16 = torch.bfloat16


def run_in_interpreter(path: str, timeout: float) -> None:
    """Runs the test file at path in a child process with TRITON_INTERPRET=1 (which must be set
    before triton is imported); fails with its output if any of its tests fails."""
    env = dict(os.environ, TRITON_INTERPRET="1", COIL_CPU_BACKEND="triton")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=os.path.dirname(path))
    assert r.returncode == 0, f"{r.stdout[-8000:]}\n{r.stderr[-4000:]}"


@pytest.mark.skipif(INTERPRETING, reason="this process already runs the tests themselves")
def test_in_interpreter_process():
    run_in_interpreter(__file__, timeout=1200)


@functools.cache
def check_target() -> str | None:
    """"sm_90" where Triton compiles kernels for it here (its CUDA backend and ptxas: no GPU
    needed), else None: the tests then run without the GPU-target compile check."""
    from coil import triton_check

    why = triton_check.available("sm_90")
    if why is not None:
        print(f"test_triton_interpret: no sm_90 compile check ({why})", file=sys.stderr)
    return None if why else "sm_90"


@pytest.fixture(autouse=True)
def _triton_interpreter(request):
    if request.node.name == "test_in_interpreter_process":
        yield
        return
    if not INTERPRETING:
        pytest.skip("runs in the child process of test_in_interpreter_process (TRITON_INTERPRET=1)")
    coil = requires_coil()
    from coil import triton_interp_check

    # Every load, store and atomic checked against the launch's tensor arguments; each test runs
    # the kernels' first, second or third candidate config (by its name's hash), so that every
    # config a GPU's autotuner may pick is run by some test.
    triton_interp_check.enable(config=zlib.crc32(request.node.name.encode()) % 3)
    with coil.config.patch(cpu_backend="triton", triton_check_target=check_target()):
        yield
    # A graph whose kernels did not compile for the GPU fails its test, whether or not the test
    # looks at fallbacks (tests that expect one forget their graphs with coil.reset()).
    failed = [r.eager_reason for r in coil.compiled_graphs() if "TritonCheckError" in r.eager_reason]
    assert not failed, failed[0]


def check_triton(fn, *inputs, atol=None, rtol=None, kinds=None):
    out = check(fn, *inputs, atol=atol, rtol=rtol)
    records = requires_coil().compiled_graphs()
    names = [n for r in records for n in r.kernel_names]
    assert names, "no kernel was generated"
    assert all(r.backend == "triton" for r in records), [r.backend for r in records]
    assert all(n.startswith("triton_") for n in names), names
    for kind in kinds or ():
        assert any(n.startswith(f"triton_{kind}_") for n in names), (kind, names)
    return out


def test_pointwise_chain():
    def f(x, y, z):
        return (F.gelu(x * y + z).relu() * 0.5 + torch.tanh(x) - torch.sigmoid(y)).sqrt().log1p()

    xs = [make_tensor((5, 37)) for _ in range(3)]
    check_triton(f, *xs, kinds=["poi"])


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset"])
def test_layouts(kind):
    check_triton(lambda x, y: x * 2 + y, make_input(kind, (6, 10)), make_tensor((6, 10)))


def test_integer_division_and_remainder():
    def f(a, b):
        return a // b, a % b, torch.remainder(a.float(), b.float()), torch.fmod(a, b)

    a = torch.randint(-20, 20, (7, 9))
    b = torch.randint(1, 6, (7, 9)) * (torch.randint(0, 2, (7, 9)) * 2 - 1)
    check_triton(f, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_rounding_division_is_exact(dtype, tmp_path):
    # Quotients that are whole numbers (4.6875 / 0.9375 = 5) and ones just below them: Triton's
    # float32 `/` may land one ulp off, so floor/trunc of a quotient divide IEEE-exactly.
    a = torch.tensor([4.6875, -4.6875, 1.5, -7.0, 2.9921875, 1.9765625, 0.0, -0.5] * 4).to(dtype)
    b = torch.tensor([0.9375, 0.9375, 0.75, 3.5, 1.0, 0.66015625, 2.0, 2.0] * 4).to(dtype)

    def f(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                torch.floor(a / b), a // b)

    coil = requires_coil()
    with coil.config.patch(debug_dir=str(tmp_path)):
        check_triton(f, a, b)
    code = open(os.path.join(coil.compiled_graphs()[-1].debug_dir, "output_code.py")).read()
    assert "tl.math.div_rn(" in code, code


def test_repeated_layers_share_one_launcher(tmp_path):
    # Two identical layers: the second layer's kernel is the first's, compiled and tuned once.
    def f(x, w):
        h = F.gelu(x @ w) * 2
        return F.gelu(h @ w) * 2

    coil = requires_coil()
    with coil.config.patch(debug_dir=str(tmp_path)):
        check_triton(f, make_tensor((8, 16)), make_tensor((16, 16)))
    record = coil.compiled_graphs()[-1]
    code = open(os.path.join(record.debug_dir, "output_code.py")).read()
    first, second = record.kernel_names
    assert f"{second} = {first}\n" in code, code
    assert code.count(" = triton_launcher.Launcher(") == 1, code


def test_math_and_nan_propagation():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y), torch.atan2(x, y), torch.pow(x.abs(), y)

    x, y = make_tensor((4, 9)), make_tensor((4, 9))
    x[0, 0] = float("nan")
    y[1, 2] = float("nan")
    check_triton(f, x, y)


def test_special_functions():
    # libdevice functions the interpreter's NumPy stand-in has, and special functions made of tl
    # ops (signbit's bit test, fmin, angle, the bit shifts' out-of-range counts).
    def f(x, y, e, i):
        return (torch.acosh(y + 1), torch.log10(y), torch.erfc(x), torch.lgamma(x),
                torch.hypot(x, y), torch.copysign(y, x), torch.nextafter(x, y), torch.ldexp(x, e),
                torch.signbit(x), torch.fmin(x, y), torch.angle(x),
                torch.bitwise_left_shift(i, e), torch.bitwise_right_shift(-i, e))

    x, y = make_tensor((4, 9)), make_tensor((4, 9), domain="positive")
    x[0, :3] = torch.tensor([-0.0, float("nan"), float("-inf")])
    e = torch.randint(-3, 70, (4, 9))
    i = torch.randint(-50, 50, (4, 9))
    check_triton(f, x, y, e, i, kinds=["poi"])
    assert not [op for r in requires_coil().compiled_graphs() for op in r.fallback_ops]


def test_special_function_without_a_triton_form_falls_back():
    check_triton(lambda x: torch.digamma(x).exp(), make_tensor((4, 9), domain="positive"))
    fallbacks = [op for r in requires_coil().compiled_graphs() for op in r.fallback_ops]
    assert fallbacks == ["aten.digamma.default"], fallbacks


@pytest.mark.parametrize("dim", [1, 0], ids=["rows", "columns"])
def test_sum(dim):
    check_triton(lambda x: x.sum(dim), make_tensor((9, 33)), kinds=["per"])


@pytest.mark.parametrize(
    "shape,dim,kind",
    [
        ((3, 2500), 1, "per"),  # a long row: persistent, one row per block
        # rnumel > 32768: a loop over r with block accumulators (a prime rnumel: not split)
        ((2, 40009), 1, "red"),
        # A column reduction: looped, wide XBLOCK (3001 rows, a prime: not split into partials)
        ((3001, 40), 0, "red"),
    ],
    ids=["long_row", "looped_row", "looped_column"],
)
def test_sum_long(shape, dim, kind):
    check_triton(lambda x: x.sum(dim), make_tensor(shape), atol=1e-4, rtol=1e-4, kinds=[kind])


def test_transpose_tiles(tmp_path):
    # A transposed read and a contiguous store: 2-D tiles (masks on both axes: 50 and 70 are not
    # multiples of the block sizes).
    def f(x, y):
        return (x.t() * 2 + y).contiguous(), x.permute(1, 0).sin().contiguous()

    coil = requires_coil()
    with coil.config.patch(debug_dir=str(tmp_path)):
        check_triton(f, make_tensor((50, 70)), make_tensor((70, 50)), kinds=["poi"])
    code = open(os.path.join(coil.compiled_graphs()[-1].debug_dir, "output_code.py")).read()
    assert "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]" in code, code


def test_amax_with_nan():
    x = make_tensor((6, 40))
    x[2, 7] = float("nan")
    check_triton(lambda x: (x.amax(1), x.amin(0)), x)


@pytest.mark.parametrize("shape", [(5, 33), (2, 1500)], ids=["persistent", "looped"])
def test_argmax_argmin(shape):
    x = torch.randint(0, 4, shape).float()  # many ties: the first index must win
    x[1, 3] = float("nan")
    check_triton(lambda x: (x.argmax(1), x.argmin(1), x.argmax(0)), x)


@pytest.mark.parametrize("shape", [(6, 50), (2, 1300)], ids=["persistent", "looped"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, shape):
    f = getattr(torch, op)
    check_triton(lambda x: f(x, -1), make_tensor(shape))


def test_softmax_dim0():
    check_triton(lambda x: torch.softmax(x, 0), make_tensor((12, 7)))


def test_layer_norm():
    ln = torch.nn.LayerNorm(48)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = make_tensor((6, 48))
    with torch.no_grad():
        check_triton(ln, x, atol=1e-5, rtol=1e-5)


def test_var_mean():
    check_triton(lambda x: torch.var_mean(x, dim=1, correction=1), make_tensor((7, 30)))


def test_cat():
    check_triton(lambda a, b: torch.cat([a, b * 2], 1), make_tensor((4, 8)), make_tensor((4, 5)))


def test_bf16():
    def f(x, w):
        return torch.softmax(x * w, -1).to(BF16) + x.abs()  # no cancellation: 1-ulp diffs stay small

    x, w = make_tensor((4, 40), BF16), make_tensor((40,), BF16)
    check_triton(f, x, w)


def test_bool_and_int_reductions():
    x = make_tensor((5, 20), torch.int64)
    check_triton(lambda x: ((x > 0).any(1), (x > -4).all(1), x.sum(1), x.amax(1)), x)


@pytest.mark.parametrize("op", ["sum", "amax", "mean_bf16"])
def test_split_reduction(op):
    # One output row of 2^16 elements: the GPU plan splits it into partial rows and a second pass.
    x = make_tensor((64, 1024))
    fns = {
        "sum": lambda t: t.sum(),
        "amax": lambda t: t.amax(),
        "mean_bf16": lambda t: t.to(BF16).mean(dim=(0, 1)),
    }
    check_triton(fns[op], x, atol=1e-3, rtol=1e-3)
    names = [n for r in requires_coil().compiled_graphs() for n in r.kernel_names]
    assert len(names) == 2, names  # the partial pass and the final pass


def test_split_column_reduction_with_pointwise_outputs(tmp_path):
    # A norm backward's weight gradients: column sums over 4096 rows of 64 columns (2 programs of
    # whole columns) split into [64, 64] partials; the pointwise result the same loop stores, and
    # a per-row statistic read beside the matrix, come out as eager's.
    x, dy, w = make_tensor((4096, 64)), make_tensor((4096, 64)), make_tensor((64,))
    rstd = make_tensor((4096, 1))

    def f(x, dy, w, rstd):
        xhat = x * rstd
        return (dy * xhat).sum(0), dy.sum(0), dy * w * rstd

    with requires_coil().config.patch(debug_dir=str(tmp_path)):
        check_triton(f, x, dy, w, rstd, atol=1e-3, rtol=1e-3)
    kernels = "".join(p.read_text() for p in tmp_path.rglob("triton_*.py"))
    assert "split reduction: 64 partial sums of 64 elements" in kernels, kernels[:4000]
    assert "(only 64 columns, summed over 4096 rows" in kernels, kernels[:4000]


# ---- indirect indexing ----


def test_gather_and_embedding():
    x = make_tensor((5, 6))
    i = torch.randint(0, 5, (4, 6))
    check_triton(lambda x, i: torch.gather(x, 0, i) * 2, x, i, kinds=["poi"])
    w, ids = make_tensor((10, 8)), torch.randint(0, 10, (3, 4))
    check_triton(lambda w, ids, p: F.embedding(ids, w) + p, w, ids, make_tensor((4, 8)))
    # Negative indices wrap; a gathered value feeds a reduction.
    check_triton(lambda x, i: x[i].sum(1), x, torch.tensor([0, -1, 3, -5]))


def test_index_put_accumulate_with_duplicates():
    x = make_tensor((5, 6))
    i = torch.tensor([0, 2, -1, 2, 2])
    v = make_tensor((5, 6))
    check_triton(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, i, v)
    check_triton(lambda x, i, v: x.scatter_add(1, i, v), x, torch.randint(0, 6, (5, 9)),
                 make_tensor((5, 9)))


def test_index_put_and_scatter_store():
    x = make_tensor((6, 4))
    check_triton(lambda x, i, v: x.index_put((i,), v), x, torch.tensor([5, 0, -3]),
                 make_tensor((3, 4)))
    check_triton(lambda x, i: x.scatter(0, i, 2.5), x, torch.randperm(6)[:2].view(2, 1))


def test_out_of_bounds_index_raises():
    f = torch.compile(lambda x, i: torch.gather(x, 0, i) + 1, backend="coil")
    x = make_tensor((5, 3))
    f(x, torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension with size 5"):
        f(x, torch.tensor([[0, 5, 1], [0, 0, 0]]))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate(mode):
    kw = {} if mode == "nearest" else {"align_corners": False}
    check_triton(lambda x: F.interpolate(x, scale_factor=2, mode=mode, **kw), make_tensor((1, 2, 4, 5)))



@pytest.mark.parametrize("ceil_mode", [False, True], ids=["floor", "ceil"])
def test_max_pool2d_with_indices(ceil_mode):
    # Masked loads at the padding, eager's scan order for the index, NaN propagation.
    x = make_tensor((2, 3, 9, 7))
    x[0, 1, 2, 2] = float("nan")
    x[1, 0, 4, 4] = x[1, 0, 4, 5] = 5.0  # a tie: the first maximum's index
    fn = lambda x: F.max_pool2d(F.relu(x), 3, 2, 1, ceil_mode=ceil_mode, return_indices=True)
    check_triton(fn, x, kinds=["poi"])


def test_pooling_backward():
    # Gathers over the windows that may contain each input element (max: checking saved indices).
    aten = torch.ops.aten

    def f(x, g):
        _, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        k, s, p = [3, 3], [2, 2], [1, 1]
        return (
            aten.max_pool2d_with_indices_backward(g, x, k, s, p, [1, 1], False, indices),
            aten.avg_pool2d_backward(g, x, k, s, p, False, False, None),
        )

    check_triton(f, make_tensor((2, 3, 9, 7)), make_tensor((2, 3, 5, 4)), kinds=["poi"])


@pytest.mark.parametrize(
    "args", [(3, 2, 1, False, True), ((2, 3), (2, 1), 1, True, False)], ids=["k3s2p1", "rect"]
)
def test_avg_pool2d(args):
    check_triton(lambda x: F.avg_pool2d(x, *args), make_tensor((2, 3, 9, 7)), kinds=["poi"])


def test_adaptive_avg_pool2d_large_window_is_a_reduction():
    # Windows of 12x6 elements: a sum reduction over the window.
    check_triton(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), make_tensor((2, 3, 24, 18)),
                 kinds=["per"])


def test_random_ops():
    # tl.rand / tl.randn with the seed drawn per call: the distribution, not eager's values.
    coil = requires_coil()
    torch.manual_seed(0)
    f = torch.compile(lambda x: (torch.rand_like(x), torch.randn_like(x) * 2 + 1,
                                 torch.ops.aten.native_dropout(x, 0.5, True)), backend="coil")
    u, z, (out, mask) = f(torch.ones(64, 64))
    records = coil.compiled_graphs()
    assert all(r.backend == "triton" for r in records) and records[-1].kernel_names
    assert not [op for r in records for op in r.fallback_ops]
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean().item() - 0.5) < 0.03
    assert abs(z.mean().item() - 1) < 0.15 and abs(z.std().item() - 2) < 0.15
    torch.testing.assert_close(out, mask.float() * 2)
    torch.manual_seed(0)
    assert torch.equal(f(torch.ones(64, 64))[0], u)


def test_tensor_constants():
    # A three-element constant reaches the kernel as an input, a one-element one as a literal.
    def f(x, mask):
        return x * torch.tensor([1.5, -2.0, 4.0]) + torch.tensor(0.25), torch.masked._ops.sum(
            x, 1, mask=mask
        )

    check_triton(f, make_tensor((5, 3)), make_tensor((5, 3), torch.bool))


def test_effects_and_numbers():
    # with_effects (linalg.inv's error check) and .item() run in the wrapper, as on the C++ path.
    def f(a):
        return torch.linalg.inv(a) * 2 + a[0, 0].item()

    a = make_tensor((4, 4), torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        check_triton(f, a)


def test_short_scans():
    # Prefix reductions: cumsum, cummax (values and eager's last-position indices), logcumsumexp
    # (scans of at most realize_policy::kMaxPrefixReductionScan = 32 elements).
    x = torch.randint(-2, 3, (6, 29)).float()
    x[1, 3] = float("nan")
    check_triton(lambda t: (torch.cumsum(t, 1), torch.cummax(t, 1), torch.logcumsumexp(t, 0)), x)
    assert not [op for r in requires_coil().compiled_graphs() for op in r.fallback_ops]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scan_kernels(dim):
    # Scans longer than the prefix reductions take (ir::Buffer::scan): along the innermost dim a
    # block row scanned with tl.cumsum plus the carry of the blocks before (persistent where the
    # row fits a block), along the others [XBLOCK, RBLOCK] blocks of a strided scan (column
    # form). Small shapes: the interpreter runs every lane in NumPy.
    x = make_tensor((34, 33, 35))
    check_triton(lambda t: torch.cumsum(t, dim) + 1, x, atol=1e-3, rtol=1e-3)
    check_triton(lambda t: torch.cumprod(1 + t / 64, dim), x, atol=1e-4, rtol=1e-4)
    # bfloat16: the running value in float32 (the carry), each step stored in bfloat16.
    check_triton(lambda t: torch.cumsum(t, dim), x.bfloat16(), atol=5e-2, rtol=2e-2)
    # cummax/cummin: a running extreme, then the positions holding it (ties and NaNs as eager).
    y = torch.randint(-2, 3, (34, 33, 35)).float()
    y[1, 3, 4], y[7, 30, 34], y[20, 2, 2] = float("nan"), float("nan"), float("-inf")
    check_triton(lambda t: (torch.cummax(t, dim), torch.cummin(t.long(), dim)), y)
    # logcumsumexp: log-add-exp as the combine (coil_logaddexp), infinities and NaN as eager.
    z = x * 30
    z[0, 0, :], z[2, 3, 4], z[5, 6, 7] = float("-inf"), float("inf"), float("nan")
    check_triton(lambda t: torch.logcumsumexp(t, dim), z, atol=1e-4, rtol=1e-4)
    if dim == 2:  # rows longer than a block: looped, each block carrying into the next
        check_triton(lambda t: torch.cumsum(t, 1) + 1, make_tensor((2, 1100)), atol=1e-3,
                     rtol=1e-3)
    assert not [op for r in requires_coil().compiled_graphs() for op in r.fallback_ops]


# Layouts across extern calls (the family of tests/python/test_layouts.py), sampled: a
# convolution fed channels-last / permuted-clone / transposed tensors and read through views, and
# a matrix product with padded leading dimensions (as on CUDA).
@pytest.mark.parametrize(
    "producer,consumer",
    [("permuted_clone", "nhwc_view"), ("channels_last", "pointwise"), ("transposed", "tokens")],
)
def test_extern_layouts(producer, consumer):
    from test_layouts import CONSUMERS, PRODUCERS

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 8, 3, padding=1).eval()
    make, use = PRODUCERS[producer], CONSUMERS[consumer]
    with torch.no_grad():
        x = torch.randn(2, 8, 5, 6)
        for x in (x, x.to(memory_format=torch.channels_last)):
            check(lambda x: use(conv(make(x))), x, check_strides=True, atol=1e-4, rtol=1e-4)


# GPU convolutions' biases are added by the kernel that reads the result (cuDNN does not add them:
# ATen adds them with a kernel of its own). 1-D, 2-D and transposed, float32 and bfloat16.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_bias_peeled(dtype, tmp_path):
    coil = requires_coil()
    torch.manual_seed(0)
    convs = [torch.nn.Conv1d(4, 6, 3), torch.nn.Conv2d(4, 6, 3, padding=1),
             torch.nn.ConvTranspose2d(4, 6, 3, stride=2)]
    inputs = [torch.randn(2, 4, 9), torch.randn(2, 4, 5, 5), torch.randn(2, 4, 5, 5)]
    tol = {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    with coil.config.patch(debug_dir=str(tmp_path)), torch.no_grad():
        for conv, x in zip(convs, inputs):
            conv = conv.eval().to(dtype)
            check_triton(lambda x: torch.relu(conv(x)) * 2, x.to(dtype), **tol)
    text = "".join(open(os.path.join(root, f)).read() for root, _, files in os.walk(tmp_path)
                   for f in files if f.endswith(".txt") or f.endswith(".py"))
    assert text.count("bias added by the kernel that reads the result") >= 3


def test_padded_matmul():
    coil = requires_coil()
    head = torch.nn.Linear(12, 37, bias=False)
    with coil.config.patch(gemm_padding="on"), torch.no_grad():
        check_triton(lambda x: torch.log_softmax(head(torch.tanh(x)).float(), -1) * 2,
                     torch.randn(3, 5, 12), atol=1e-5, rtol=1e-5)


def test_values_a_later_stage_reads_stay_in_registers(tmp_path):
    # A safe softmax (rows entirely -inf give zeros, as SDPA's math path and T5's masked
    # attention compute): the probabilities are read again by the where in a later stage. Rows
    # of 40 fit one block (persistent), so they stay in registers: no buffer, no store.
    def f(x, m):
        s = x.masked_fill(m, float("-inf"))
        p = torch.softmax(s, -1)
        return torch.where((s == float("-inf")).all(-1, keepdim=True), 0.0, p) * 2

    x = make_tensor((6, 40))
    m = torch.zeros(6, 40, dtype=torch.bool)
    m[2] = True
    m[4, ::3] = True
    coil = requires_coil()
    with coil.config.patch(debug_dir=str(tmp_path)):
        check_triton(f, x, m, kinds=["per"])
    code = open(os.path.join(coil.compiled_graphs()[-1].debug_dir, "output_code.py")).read()
    allocations = re.findall(r"^ +buf\d+ = empty_strided", code, re.M)
    assert len(allocations) == 1, code  # the output alone


def test_kernel_failing_at_first_launch_falls_back(monkeypatch):
    # A Triton kernel that does not compile surfaces at its first launch (the interpreter raises
    # the type error Triton's compiler raises: torchvision's swin_t on the H200 hit one, and it
    # reached the user's program). The graph must run its fallback instead, with a warning
    # naming the kernel, on that call and every later one.
    coil = requires_coil()
    real = coil.runtime.load_module

    def broken(source, name, path=None):
        bad = "    bad = in_ptr0 + 0.5\n    xoffset = tl.program_id(0)"
        return real(source.replace("    xoffset = tl.program_id(0)", bad), name, path)

    monkeypatch.setattr(coil.runtime, "load_module", broken)

    def fn(x):
        return (x.sin() * 2).softmax(-1)

    x = make_tensor((8, 16))
    # (Without the GPU-target check, which would find the kernel at the graph's compile.)
    compiled = torch.compile(fn, backend="coil", options={"triton_check_target": None})
    with pytest.warns(coil.CoilWarning, match=r"kernel triton_\w+ failed"):
        out = compiled(x)
    again = compiled(x)
    torch.testing.assert_close(out, fn(x))
    torch.testing.assert_close(again, fn(x))
    (record,) = coil.compiled_graphs()
    assert record.eager_fallback and "IncompatibleType" in record.eager_reason, record.eager_reason
    # Later calls run Dynamo's graph as captured (softmax whole), not AOTAutograd's decomposed
    # one: a fallback costs what eager does (crossvit_9_240 on the H100, 2026-12-05: a launch
    # failure's fallback took 17.5 ms against eager's 12.1).
    assert "Dynamo's graph" in record.eager_reason, record.eager_reason
    ops = _aten_ops_called(compiled, x)
    assert "aten._softmax.default" in ops and "aten.amax.default" not in ops, ops


def _aten_ops_called(fn, *args) -> set:
    from torch.utils._python_dispatch import TorchDispatchMode

    called = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            called.add(str(func.name()).replace("::", ".").replace("aten.", "aten.", 1))
            return func(*args, **(kwargs or {}))

    with Record():
        fn(*args)
    return {c if c.count(".") == 2 else c + ".default" for c in called}


def test_cross_branches():
    # CrossViT's class-token exchange (test_modules.CrossBranches): with GPU scheduling (split
    # reductions, rows in registers) its kernels and attention calls still form no cycle.
    from test_modules import _cross_branches

    m, a, b = _cross_branches()
    with torch.no_grad():
        check_triton(m.eval(), a, b, atol=1e-4, rtol=1e-4)


# ---- the GPU-target compile check (python/coil/triton_check.py) ----


_UNCOMPILABLE = """import torch
import triton
import triton.language as tl
from coil import triton_launcher


@triton.jit
def triton_poi_masked_wider_than_pointer_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    one = tl.zeros([1], tl.int32)
    first = tl.load(in_ptr0 + one)
    # A store whose mask spans more of the block than its pointer (coil_index's report did, in
    # a tiled kernel).
    tl.store(out_ptr0 + one, first, mask=xindex < xnumel)


kernel = triton_launcher.Launcher(triton_poi_masked_wider_than_pointer_0, "pointwise",
                                  [{"XBLOCK": 64, "num_warps": 2}], written=[1],
                                  dtypes=[torch.float32, torch.float32], sizes={"xnumel": 100})
"""


def test_gpu_check_names_the_kernel_and_config():
    if check_target() is None:
        pytest.skip("Triton cannot compile for sm_90 here")
    coil = requires_coil()
    from coil import triton_check

    module = coil.runtime.load_module(_UNCOMPILABLE, "coil_check_test")
    with pytest.raises(triton_check.TritonCheckError) as e:
        triton_check.check_module(module, "sm_90")
    message = str(e.value)
    assert "kernel triton_poi_masked_wider_than_pointer_0 (config {'XBLOCK': 64, 'num_warps': 2})" \
        " does not compile for sm_90" in message, message
    assert "tl.store(out_ptr0" in message, message


def test_gpu_check_fails_the_graph_compile(monkeypatch):
    # A kernel whose GPU form does not compile (the interpreter's form, which runs, is intact):
    # the graph does not compile; it runs eagerly, with the reason in its record.
    if check_target() is None:
        pytest.skip("Triton cannot compile for sm_90 here")
    coil = requires_coil()
    real = coil.backend._C.compile_graph

    def broken(*args, **kwargs):
        result = dict(real(*args, **kwargs))
        result["triton_gpu_source"] = result["triton_gpu_source"].replace(
            "    xoffset = tl.program_id(0)", "    bad = in_ptr0 + 0.5\n    xoffset = tl.program_id(0)")
        return result

    monkeypatch.setattr(coil.backend._C, "compile_graph", broken)
    x = make_tensor((8, 16))
    with pytest.warns(coil.CoilWarning, match="TritonCheckError"):
        out = torch.compile(lambda x: (x.sin() * 2).softmax(-1), backend="coil")(x)
    torch.testing.assert_close(out, (x.sin() * 2).softmax(-1))
    (record,) = coil.compiled_graphs()
    assert record.eager_fallback, record
    assert re.search(r"kernel triton_\w+ \(config \{.*\}\) does not compile for sm_90: "
                     r"CompilationError", record.eager_reason), record.eager_reason
    coil.reset()


def test_gpu_form_is_what_the_check_compiles(tmp_path):
    # bf16 results are rounded by coil_f32_to_bf16 under the interpreter, by the GPU's own
    # conversion on a GPU: the check compiles the GPU's form (kernels_gpu_form.py beside
    # kernels.py in the debug folder).
    coil = requires_coil()
    if check_target() is None:
        pytest.skip("Triton cannot compile for sm_90 here")
    with coil.config.patch(debug_dir=str(tmp_path)):
        check_triton(lambda x: (x.float().exp() * 2).to(BF16), make_tensor((4, 8), BF16))
    folder = coil.compiled_graphs()[-1].debug_dir
    interpreted = open(os.path.join(folder, "kernels.py")).read()
    gpu = open(os.path.join(folder, "kernels_gpu_form.py")).read()
    assert "= coil_f32_to_bf16(tmp" in interpreted, interpreted
    assert "= coil_f32_to_bf16(tmp" not in gpu and ".to(tl.bfloat16)" in gpu, gpu


# ---- a Swin-style block: shifted windows, rolls, relative position bias (torchvision's swin_t
# on an H200 hit a kernel the interpreter ran and Triton's compiler refused) ----


class WindowBlock(torch.nn.Module):
    """Layer norm, attention within windows of `window` x `window` tokens shifted by `shift`
    (torch.roll: an index_select of fmod(arange + shift, n)), a bias from a table of relative
    positions gathered by an index buffer, the shifted windows' mask, residuals, an MLP."""

    def __init__(self, dim: int, heads: int, window: int, shift: int):
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)
        span = 2 * window - 1
        self.table = torch.nn.Parameter(torch.randn(span * span, heads) * 0.02)
        pos = torch.arange(window)
        row, col = pos.repeat_interleave(window), pos.repeat(window)
        rel = (row[:, None] - row[None, :] + window - 1) * span + (col[:, None] - col[None, :]
                                                                    + window - 1)
        self.register_buffer("index", rel.flatten().clone())  # (not a view of rel)

    def window_mask(self, x, hp: int, wp: int):
        # Each token's region of the shifted image (9 of them); tokens of one window attend to
        # each other only within a region.
        w, s = self.window, self.shift
        label = x.new_zeros((hp, wp))
        k = 0
        for hs in (slice(0, hp - w), slice(hp - w, hp - s), slice(hp - s, hp)):
            for ws in (slice(0, wp - w), slice(wp - w, wp - s), slice(wp - s, wp)):
                label[hs, ws] = k
                k += 1
        label = label.view(hp // w, w, wp // w, w).transpose(1, 2).reshape(-1, w * w)
        return torch.where(label[:, None, :] == label[:, :, None], 0.0, -100.0).to(x.dtype)

    def attention(self, x):
        b, h, wd, c = x.shape
        w, heads = self.window, self.heads
        x = F.pad(x, (0, 0, 0, (-wd) % w, 0, (-h) % w))
        hp, wp = x.shape[1], x.shape[2]
        s = self.shift if w < min(hp, wp) else 0
        if s:
            x = torch.roll(x, (-s, -s), (1, 2))
        n = (hp // w) * (wp // w)
        win = x.view(b, hp // w, w, wp // w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b * n, w * w, c)
        qkv = self.qkv(win).view(b * n, w * w, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q * (c // heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.table[self.index].view(w * w, w * w, heads).permute(2, 0, 1).unsqueeze(0)
        scores = scores + bias
        if s:
            scores = scores.view(b, n, heads, w * w, w * w) + self.window_mask(x, hp, wp)[:, None]
            scores = scores.view(b * n, heads, w * w, w * w)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b * n, w * w, c)
        out = self.proj(out).view(b, hp // w, wp // w, w, w, c)
        out = out.permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        if s:
            out = torch.roll(out, (s, s), (1, 2))
        return out[:, :h, :wd, :].contiguous()

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class PatchMerge(torch.nn.Module):
    """Halves the token grid: each 2x2 group of tokens (the grid padded to even sizes)
    concatenated, normalized and projected to twice the channels."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4 * dim)
        self.reduce = torch.nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        x = F.pad(x, (0, 0, 0, x.shape[2] % 2, 0, x.shape[1] % 2))
        x = torch.cat([x[:, i::2, j::2] for j in (0, 1) for i in (0, 1)], -1)
        return self.reduce(self.norm(x))


class WindowStage(torch.nn.Module):
    """A patch embedding (a 4x4 convolution, NCHW to NHWC, layer norm), two blocks (the second
    shifted) and a patch merge: swin_t's first stage. Once the convolution is channels-last, the
    shifted block's rolled-back output, its residual and the merge's pad meet in a tiled
    kernel."""

    def __init__(self, dim: int = 96, heads: int = 3, window: int = 7, shift: int = 3,
                 merge: bool = True):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, dim, 4, 4)
        self.norm = torch.nn.LayerNorm(dim)
        self.blocks = torch.nn.Sequential(WindowBlock(dim, heads, window, 0),
                                          WindowBlock(dim, heads, window, shift))
        self.merge = PatchMerge(dim) if merge else torch.nn.Identity()

    def forward(self, image):
        return self.merge(self.blocks(self.norm(self.embed(image).permute(0, 2, 3, 1))))


# The layouts a CUDA graph gets (channels-last 16-bit convolutions, padded matrix products), for
# CPU tensors.
CUDA_LAYOUTS = {"channels_last": "on", "gemm_padding": "on"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_swin_stage_compiles_for_the_gpu(dtype):
    # swin_t's first stage at its size (56x56 tokens, windows of 7, shifted by 3) as on the H200:
    # compiled, every kernel compiled for sm_90, not run (the interpreter would take minutes).
    # The roll back of the shifted block's output, added to the residual, was a tiled kernel (the
    # residual stream is read through transposes once the convolution is channels-last, as CUDA
    # makes it) whose checked index (of the columns only) was active under a mask of rows and
    # columns: coil_index stored its report with a mask wider than its pointers.
    if check_target() is None:
        pytest.skip("Triton cannot compile for sm_90 here")
    coil = requires_coil()
    torch.manual_seed(0)
    model = WindowStage().eval().to(dtype)
    image = torch.randn(1, 3, 224, 224).to(dtype)
    captured = []

    def capture(gm, example_inputs):
        captured.append((gm, example_inputs))
        return gm.forward

    with torch.no_grad():
        torch.compile(model, backend=capture)(image)
        (gm, example_inputs), = captured
        coil.backend.coil_backend(gm, example_inputs, options=CUDA_LAYOUTS)
    (record,) = coil.compiled_graphs()
    assert not record.eager_fallback, record.eager_reason
    assert any("constant_pad_nd_fmod_index_select" in n for n in record.kernel_names), \
        record.kernel_names


def test_swin_stage_matches_eager():
    # The same stage in bf16, run, at 14x14 tokens (a 56x56 image: two windows a side, shifted by
    # 3; about two minutes under the interpreter).
    torch.manual_seed(0)
    model = WindowStage().eval().to(BF16)
    image = torch.randn(1, 3, 56, 56).to(BF16)
    with torch.no_grad(), requires_coil().config.patch(**CUDA_LAYOUTS):
        check_triton(model, image, atol=3e-2, rtol=3e-2)


def test_swin_stage_training_step():
    # Forward and backward (the rolls' gradients are index_selects of their own, the bias
    # table's an index_put with accumulation) against eager's gradients. (With the CPU's layouts
    # and without the patch merge: otherwise the training graph's forward returns a view of an
    # input that coil cannot express, and runs eagerly.)
    torch.manual_seed(0)
    model = WindowStage(merge=False)
    image = torch.randn(1, 3, 56, 56)
    expected = model(image)
    expected.square().mean().backward()
    want = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    out = torch.compile(model, backend="coil")(image)
    out.square().mean().backward()
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[name], atol=1e-4, rtol=1e-3, msg=name)
    records = requires_coil().compiled_graphs()
    assert [r.kind for r in records] == ["forward", "backward"], records
    assert not any(r.eager_fallback for r in records), [r.eager_reason for r in records]


@pytest.mark.parametrize("shape", [(5, 5, 13, 0), (0, 7)])
def test_zero_element_graphs(shape):
    # A dim of size 0: kernels that run no lane (fuzzer seed 730022: the flat index's divisor,
    # the product of the inner sizes, was 0 and the kernel failed to compile).
    x = make_tensor(shape)
    check(lambda x: torch.cat([x.sin(), torch.maximum(x, x).flip(0)], 0), x)
    check(lambda x: ((x > 0).any(-1, keepdim=True), torch.softmax(x.flip(0), -1)), x)


def test_zero_element_contiguous_walk():
    # (fuzzer seed 730026: a contiguous walk merged into the flat index, modulo the product of
    # sizes that include a 0.)
    x = make_tensor((3, 0, 4, 5))
    check(lambda x: (x.permute(1, 3, 2, 0).sum(1, keepdim=True), x.unsqueeze(2) * 2), x)
