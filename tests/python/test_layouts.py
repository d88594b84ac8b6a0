"""Layouts across extern calls: library ops (convolution, mm, bmm, addmm, attention) and pooling
fed channels-last, permuted, transposed, sliced and padded tensors, then read through views and
pointwise ops. Values and output strides must be eager's.

The family of the bug where a convolution's input was stored contiguous while coil assumed the
channels-last result eager's layout gives: every producer x consumer pair below runs, on the C++
path here and under the Triton interpreter in test_triton_interpret.py (a sample).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, check, coil_records, reset_compiler

# What makes the extern's input, from x [N, C, H, W] (contiguous, or channels-last where named).
PRODUCERS = {
    "computed": lambda x: x * 2,
    "channels_last": lambda x: (x * 2).contiguous(memory_format=torch.channels_last),
    "permuted_clone": lambda x: (x * 2).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "transposed": lambda x: (x * 2).transpose(2, 3),
    "sliced": lambda x: (x * 2)[:, :, 1:, :],
    "padded": lambda x: F.pad(x * 2, (1, 0, 0, 1)),
    "input": lambda x: x,
    "input_transposed": lambda x: x.transpose(2, 3),
}

# What reads the extern's result y [N, C', H', W'].
CONSUMERS = {
    "nhwc_view": lambda y: y.permute(0, 2, 3, 1) * 3,
    "pointwise": lambda y: y * 3,
    "tokens": lambda y: y.flatten(2).transpose(1, 2) + 1,
    "reshape_sum": lambda y: y.reshape(y.shape[0], -1).sum(1),
    "channel_mean": lambda y: y.mean((2, 3), keepdim=True) + y,
    "identity": lambda y: y,
}


def _input(channels_last: bool, shape=(2, 8, 5, 6)):
    x = torch.randn(shape)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_conv(producer, consumer):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 8, 3, padding=1).eval()
    make, use = PRODUCERS[producer], CONSUMERS[consumer]

    def f(x):
        return use(conv(make(x)))

    with torch.no_grad():
        for channels_last in (False, True):
            check(f, _input(channels_last), check_strides=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("producer", ["channels_last", "permuted_clone", "transposed", "padded"])
def test_conv_chain(producer):
    """Two convolutions in a row with a pointwise op between them (no layout copies expected to
    change values), a depthwise convolution, and a strided one."""
    torch.manual_seed(0)
    c1 = torch.nn.Conv2d(8, 8, 3, padding=1).eval()
    dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8).eval()
    c2 = torch.nn.Conv2d(8, 4, 1, stride=2).eval()
    make = PRODUCERS[producer]

    def f(x):
        y = torch.relu(c1(make(x)))
        return c2(dw(y) + y).permute(0, 2, 3, 1)

    with torch.no_grad():
        check(f, _input(True), check_strides=True, atol=1e-4, rtol=1e-4)
        check(f, _input(False), check_strides=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("consumer", ["nhwc_view", "pointwise", "tokens", "identity"])
@pytest.mark.parametrize("producer", ["channels_last", "permuted_clone", "transposed", "sliced"])
@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pooling(pool, producer, consumer):
    make, use = PRODUCERS[producer], CONSUMERS[consumer]
    p = F.max_pool2d if pool == "max" else F.avg_pool2d

    def f(x):
        return use(p(make(x), 2))

    check(f, _input(True), check_strides=True)
    check(f, _input(False), check_strides=True)


# 2-D operands of a matrix product, from a [M, K] or [K, M] tensor.
MATRIX_PRODUCERS = {
    "computed": lambda a: a * 2,
    "transposed": lambda a: (a * 2).t().contiguous().t(),
    "view_t": lambda a: a.t().t() * 2,
    "sliced": lambda a: (a * 2)[:, 1:],
    "padded": lambda a: F.pad(a * 2, (0, 1)),
    "input_t": lambda a: a.t().t(),
}


def _matrix_shape(producer, rows, cols):
    # The producers that add or drop a column get a matching input width.
    return rows, cols + (1 if producer == "sliced" else -1 if producer == "padded" else 0)


@pytest.mark.parametrize("producer", sorted(MATRIX_PRODUCERS))
@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_matmul(op, producer):
    make = MATRIX_PRODUCERS[producer]
    a = torch.randn(_matrix_shape(producer, 6, 5))
    b = torch.randn(5, 7)
    bias = torch.randn(7)

    def f(a, b, bias):
        x = make(a)
        y = x @ b if op == "mm" else torch.addmm(bias, x, b)
        return y.t() * 3, (y + 1).view(-1)

    check(f, a, b, bias, check_strides=True, atol=1e-4, rtol=1e-4)
    check(f, a, b.t().contiguous().t(), bias, check_strides=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("producer", ["computed", "permuted", "sliced", "input_t"])
def test_bmm(producer):
    a = torch.randn(3, 6, 5 + (producer == "sliced"))
    b = torch.randn(3, 5, 4)
    make = {
        "computed": lambda t: t * 2,
        "permuted": lambda t: (t * 2).permute(1, 0, 2).contiguous().permute(1, 0, 2),
        "sliced": lambda t: (t * 2)[..., 1:],
        "input_t": lambda t: t.transpose(1, 2).transpose(1, 2),
    }[producer]

    def f(a, b):
        y = torch.bmm(make(a), b)
        return y.transpose(0, 1) + 1, y.sum(0)

    check(f, a, b, check_strides=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("producer", ["computed", "heads_permuted", "transposed_clone"])
def test_sdpa(producer):
    q = torch.randn(2, 6, 4, 8)  # [B, T, H, D]
    k = torch.randn(2, 6, 4, 8)
    v = torch.randn(2, 6, 4, 8)
    make = {
        "computed": lambda t: (t * 2).transpose(1, 2).contiguous(),
        "heads_permuted": lambda t: (t * 2).transpose(1, 2),
        "transposed_clone": lambda t: (t * 2).transpose(1, 2).contiguous().transpose(2, 3)
        .contiguous().transpose(2, 3),
    }[producer]

    def f(q, k, v):
        y = F.scaled_dot_product_attention(make(q), make(k), make(v))
        return y.transpose(1, 2).reshape(2, 6, 32) * 2, y

    check(f, q, k, v, check_strides=True, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("batch", [1, 2])
def test_sdpa_reads_heads_of_a_projection_in_place(batch):
    # GPT-2's attention: q, k, v are head views of one projection's result. At batch 1 the view's
    # batch stride (size 1: any value) differed from eager's, and each was copied before the call.
    torch.manual_seed(0)
    proj = torch.nn.Linear(32, 96)
    x = torch.randn(batch, 6, 32)

    def f(x):
        q, k, v = proj(x).split(32, dim=2)
        heads = [t.view(batch, 6, 4, 8).transpose(1, 2) for t in (q, k, v)]
        return F.scaled_dot_product_attention(*heads, is_causal=True).transpose(1, 2).reshape(
            batch, 6, 32)

    reset_compiler()
    with torch.no_grad():
        check(f, x, check_strides=True, atol=1e-4, rtol=1e-4)
    if BACKEND == "coil":
        (record,) = coil_records()
        assert len(record.kernel_names) <= 1, record.kernel_names  # the output's reshape, at most


# --------------------------------------------------------------------------------------------
# GEMM padding (on by default for CUDA only; forced here so the C++ path checks it)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def gemm_padding():
    import coil

    with coil.config.patch(gemm_padding="on"):
        yield


@pytest.mark.parametrize("producer", sorted(MATRIX_PRODUCERS))
@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_matmul_padded(gemm_padding, op, producer):
    test_matmul(op, producer)


def test_lm_head_padded(gemm_padding):
    """An odd vocabulary (GPT-2's 50257, here 37) read by a softmax and returned: the padded
    logits are invisible in the results; forward and backward through the padded products."""
    torch.manual_seed(0)
    head = torch.nn.Linear(12, 37, bias=False)
    x = torch.randn(3, 5, 12, requires_grad=True)

    def f(x):
        h = torch.tanh(x) * 1.5
        logits = head(h)
        return logits, torch.log_softmax(logits.float(), -1)

    check(f, x, check_strides=True, atol=1e-5, rtol=1e-5)

    def step(x):
        logits, logp = f(x)
        return logp.sum() + logits.pow(2).mean()

    expected = torch.autograd.grad(step(x), (x, head.weight))
    compiled = torch.compile(step, backend="coil")
    actual = torch.autograd.grad(compiled(x), (x, head.weight))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_padded_product_returned_is_written_in_place_by_row_groups(gemm_padding, bias):
    """A padded product that is a graph output (an LM head's logits) comes out with eager's
    contiguous strides and no padded product beside it: aligned products over groups of rows
    write straight into the output. Peak: the output alone (and the allocator's rounding)."""
    torch.manual_seed(0)
    head = torch.nn.Linear(64, 20001, bias=bias).eval()
    x = torch.randn(4, 500, 64)
    with torch.no_grad():
        check(head, x, check_strides=True, atol=1e-4, rtol=1e-4)
        if BACKEND != "coil":
            return
        (record,) = coil_records()
        assert record.extern_ops == ["coil.mm_row_groups.default"], record.extern_ops
        from coil.bench.memory import peak_bytes

        compiled = torch.compile(head, backend="coil")
        compiled(x)
        out_bytes = 4 * 500 * 20001 * 4
        assert peak_bytes(lambda: compiled(x), "cpu") < 1.1 * out_bytes


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_padded_product_returned_and_read_by_a_loss_is_written_in_place(gemm_padding, train):
    """A masked-LM head with labels (BERT's, DistilBERT's): the logits are returned and read by
    the cross entropy. They are written in place by row groups as a product that is only an
    output is, not computed padded and copied to eager's strides beside it (BertForMaskedLM
    b16x512 on the H200 peaked at 1.00 GB under coil, 0.56 under Inductor: twice the logits)."""
    torch.manual_seed(0)
    head = torch.nn.Linear(64, 20001)
    x = torch.randn(4, 100, 64, requires_grad=train)
    labels = torch.randint(0, 20001, (4, 100))
    labels[0, :7] = -100

    def f(x):
        logits = head(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 20001), labels.view(-1))
        return loss, logits

    with torch.set_grad_enabled(train):
        check(f, x, check_strides=True, atol=1e-4, rtol=1e-4)
    if BACKEND != "coil":
        return
    forward = [r for r in coil_records() if r.kind != "backward"]
    assert "coil.mm_row_groups.default" in forward[0].extern_ops, forward[0].extern_ops
    if train:
        return
    from coil.bench.memory import peak_bytes

    compiled = torch.compile(f, backend="coil")
    with torch.no_grad():
        compiled(x)
        assert peak_bytes(lambda: compiled(x), "cpu") < 1.15 * 4 * 100 * 20001 * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [37, 50, 66, 4099])
def test_row_groups_product_is_the_product(dtype, n):
    """coil.mm_row_groups on its own: every alignment class of N (odd, 2 and 4 mod 8), rows not a
    multiple of the group count, each kind of bias; values eager's, the result contiguous."""
    torch.manual_seed(n)
    m, k = 29, 24
    a, w = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
    align = 16 // a.element_size()
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    for bias in [None, torch.randn(n), torch.randn(m, n), torch.randn(1), torch.randn(m, 1)]:
        bias = None if bias is None else bias.to(dtype)
        actual = torch.ops.coil.mm_row_groups(a, w.t(), bias, align)
        expected = a @ w.t() if bias is None else torch.addmm(bias, a, w.t())
        torch.testing.assert_close(actual, expected, **tol)
        assert actual.stride() == (n, 1)


def test_bmm_padded(gemm_padding):
    test_bmm("computed")
    test_bmm("sliced")


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "linear_backward"])
def test_large_odd_gemm_padded(gemm_padding, op):
    """Products large enough that odd K and N are rounded up (zero-extended operands, the first N
    columns of a wider result): values and strides are eager's."""
    torch.manual_seed(0)
    if op == "bmm":
        a, b = torch.randn(2, 256, 67), torch.randn(2, 67, 4099)
        check(lambda a, b: torch.bmm(a.tanh(), b) * 2, a, b, check_strides=True, **_LARGE_TOL)
        return
    a, w, bias = torch.randn(512, 67), torch.randn(4099, 67), torch.randn(4099)
    if op == "mm":
        check(lambda a, w: (a.tanh() @ w.t()).relu(), a, w, check_strides=True, **_LARGE_TOL)
    elif op == "addmm":
        check(lambda a, w, c: torch.addmm(c, a.tanh(), w.t()), a, w, bias, **_LARGE_TOL)
    else:
        a.requires_grad_(True)
        w.requires_grad_(True)

        def step(a, w):
            return torch.log_softmax(F.linear(a.tanh(), w), -1).sum()

        # Gradients are sums of 4099 terms that cancel: compared with a float64 reference, as
        # close as eager's (elementwise, both differ from it by rounding).
        ref = torch.autograd.grad(step(a.double(), w.double()), (a, w))
        eager = torch.autograd.grad(step(a, w), (a, w))
        actual = torch.autograd.grad(torch.compile(step, backend="coil")(a, w), (a, w))
        for x, e, r in zip(actual, eager, ref):
            err, eager_err = (x - r).norm() / r.norm(), (e - r).norm() / r.norm()
            assert err <= 2 * eager_err + 1e-7, (err, eager_err)


_LARGE_TOL = {"atol": 2e-4, "rtol": 2e-4}


# --------------------------------------------------------------------------------------------
# The channels-last layout decision (auto: CUDA inference graphs with 16-bit convolutions;
# forced on here so that the C++ path checks the mechanism)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("producer", ["computed", "permuted_clone", "transposed", "input"])
def test_conv_family_channels_last(producer):
    import coil

    with coil.config.patch(channels_last="on"):
        test_conv(producer, "nhwc_view")
        test_conv(producer, "channel_mean")


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v3_large"])
def test_vision_models_channels_last(model):
    """Whole conv nets kept NHWC: eager's values and output strides, the decision recorded, and
    no convolution result re-laid out by the wrapper (cuDNN/oneDNN return NHWC for NHWC)."""
    import coil
    import coil.runtime as rt
    from coil.bench import vision

    torch.manual_seed(0)
    m = vision.MODELS[model]().eval()
    x = torch.randn(2, 3, 64, 64)
    relaid = []
    original = rt.require_strides

    def counting(t, strides):
        out = original(t, strides)
        if out is not t:
            relaid.append((tuple(t.shape), t.stride(), strides))
        return out

    rt.require_strides = counting
    try:
        with torch.no_grad(), coil.config.patch(channels_last="on"):
            check(m, x, check_strides=True, atol=1e-4, rtol=1e-4)
    finally:
        rt.require_strides = original
    assert not relaid, relaid
    record = coil.compiled_graphs()[-1]
    assert record.layout.startswith("channels-last (NHWC)"), record.layout


@pytest.mark.parametrize("shape", [(1, 8), (4, 8)])
def test_flipped_operand(shape):
    """A flipped tensor is no strided view (negative strides): the fuzzer's seed 8140 passed one to
    mm, which read memory before the tensor."""
    a = torch.randn(shape)

    def f(a):
        v = a.flip(1)
        w = a.flip(1)[:, :3].unsqueeze(0)
        return v @ v.t() + 1, torch.nn.functional.conv1d(a.flip(0).unsqueeze(0), w)

    check(f, a, check_strides=True, atol=1e-5, rtol=1e-5)


def test_layout_options_are_checked():
    import coil

    for name in ("channels_last", "gemm_padding"):
        with pytest.raises(ValueError, match=name):
            with coil.config.patch(**{name: "sometimes"}):
                pass
