"""Attention written out as matmuls and a softmax is compiled as one scaled_dot_product_attention
call (cpp/coil/lower/attention_pattern.h): the scores are never stored. Values match eager's
written-out form; in training the rewrite happens before AOTAutograd differentiates the graph
(python/coil/attention_training.py), so the forward saves q, k, v and the output, never the
probabilities; attention_rewrite=False turns it off."""

import math

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="a coil graph rewrite")


def attention(q, k, v, scale_by="div"):
    s = q @ k.transpose(-2, -1)
    s = s / math.sqrt(q.shape[-1]) if scale_by == "div" else s * 0.3
    return torch.softmax(s, dim=-1) @ v


def _rewritten(records) -> bool:
    return any("aten.scaled_dot_product_attention.default" in r.fallback_ops for r in records)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale_by", ["div", "mul"])
def test_written_out_attention_is_one_call_and_matches_eager(dtype, scale_by):
    reset_compiler()
    q, k, v = (torch.randn(2, 3, 40, 16, dtype=dtype) for _ in range(3))
    out = torch.compile(lambda *t: attention(*t, scale_by=scale_by), backend="coil")(q, k, v)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    ref = attention(q.double(), k.double(), v.double(), scale_by).to(dtype)
    torch.testing.assert_close(out, ref, **tol)
    assert _rewritten(coil_records())


def test_a_block_with_projections_and_heads():
    # Heads split from one qkv product (strided views of it), merged again after.
    torch.manual_seed(0)
    qkv, proj = torch.nn.Linear(64, 192), torch.nn.Linear(64, 64)

    def block(x):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 4, 16).permute(2, 0, 3, 1, 4)
        return proj(attention(q, k, v).transpose(1, 2).reshape(b, s, 64))

    reset_compiler()
    x = torch.randn(2, 24, 64)
    with torch.no_grad():
        out = torch.compile(block, backend="coil")(x)
        torch.testing.assert_close(out, block(x), atol=1e-5, rtol=1e-4)
    assert _rewritten(coil_records())


def _attention_ops(records, kind: str) -> list[str]:
    return [op for r in records if r.kind == kind for op in r.fallback_ops if "attention" in op]


def _saved_bytes(fn, *args) -> tuple[int, object]:
    saved = []

    def pack(t):
        saved.append(t.untyped_storage().nbytes() if isinstance(t, torch.Tensor) else 0)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    return sum(saved), out


def _grads(fn, inputs):
    for t in inputs:
        t.grad = None
    fn(*inputs).square().sum().backward()
    return [t.grad.clone() for t in inputs]


def _cast_softmax(q, k, v):
    # What CUDA autocast makes of attention: 16-bit products, the softmax in float32.
    s = (q @ k.transpose(-2, -1)) * 0.25
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


@pytest.mark.parametrize("dynamic", [False, True])
def test_training_calls_attention_and_matches_eagers_gradients(dynamic):
    # Rewritten before differentiation: ATen's attention forward and backward, nothing [S, L]
    # saved; gradients within float32 rounding of the written form's.
    reset_compiler()
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 64, 16, requires_grad=True) for _ in range(3))
    compiled = torch.compile(attention, backend="coil")
    if dynamic:  # a first length: the second compile is symbolic in the length alone
        _grads(compiled, [torch.randn(2, 2, 80, 16, requires_grad=True) for _ in range(3)])
    before = len(coil_records())
    got = _grads(compiled, (q, k, v))
    want = _grads(attention, (q, k, v))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    records = coil_records()[before:]
    assert _attention_ops(records, "forward") and _attention_ops(records, "backward")
    assert any(r.dynamic for r in records) == dynamic
    saved, _ = _saved_bytes(compiled, q, k, v)
    written, _ = _saved_bytes(attention, q, k, v)
    probabilities = 2 * 2 * 64 * 64 * 4
    assert saved < written - probabilities / 2, (saved, written)
    if dynamic:  # a second length: the same graphs, symbolic in it
        q2, k2, v2 = (torch.randn(2, 2, 48, 16, requires_grad=True) for _ in range(3))
        for g, w in zip(_grads(compiled, (q2, k2, v2)), _grads(attention, (q2, k2, v2))):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)


def test_training_a_block_with_autocasts_casts():
    # Heads from one qkv product, the softmax in float32 between bf16 products and a residual:
    # the casts are absorbed into the attention call; values and gradients within bf16 rounding.
    torch.manual_seed(0)
    qkv, proj = torch.nn.Linear(32, 96).bfloat16(), torch.nn.Linear(32, 32).bfloat16()

    def block(x):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 2, 16).permute(2, 0, 3, 1, 4)
        return x + proj(_cast_softmax(q, k, v).transpose(1, 2).reshape(b, s, 32))

    reset_compiler()
    x = torch.randn(2, 40, 32, dtype=torch.bfloat16, requires_grad=True)
    got = _grads(torch.compile(block, backend="coil"), (x,))
    want = _grads(block, (x,))
    torch.testing.assert_close(got[0], want[0], atol=3e-2, rtol=3e-2)
    assert _attention_ops(coil_records(), "forward")


def test_training_with_the_rewrite_off_keeps_the_written_form():
    reset_compiler()
    q, k, v = (torch.randn(2, 2, 12, 8, requires_grad=True) for _ in range(3))
    compiled = torch.compile(attention, backend="coil", options={"attention_rewrite": False})
    for g, w in zip(_grads(compiled, (q, k, v)), _grads(attention, (q, k, v))):
        torch.testing.assert_close(g, w)
    assert not _attention_ops(coil_records(), "forward")


def test_probabilities_the_user_reads_are_not_rewritten():
    # The softmax is also returned: the written form stays, exactly eager's.
    def both(q, k, v):
        p = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
        return p @ v, p

    reset_compiler()
    q, k, v = (torch.randn(1, 2, 8, 4, requires_grad=True) for _ in range(3))
    out, p = torch.compile(both, backend="coil")(q, k, v)
    ref, ref_p = both(q, k, v)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(p, ref_p)
    assert not _attention_ops(coil_records(), "forward")


def test_the_rewrite_can_be_turned_off():
    reset_compiler()
    q, k, v = (torch.randn(1, 2, 8, 8) for _ in range(3))
    out = torch.compile(attention, backend="coil", options={"attention_rewrite": False})(q, k, v)
    torch.testing.assert_close(out, attention(q, k, v))
    assert not _rewritten(coil_records())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_cross_attention_shapes(dtype):
    # Keys longer than the queries, values narrower than the keys.
    reset_compiler()
    q = torch.randn(1, 2, 5, 8, dtype=dtype)
    k, v = torch.randn(1, 2, 7, 8, dtype=dtype), torch.randn(1, 2, 7, 3, dtype=dtype)
    out = torch.compile(lambda *t: attention(*t, scale_by="mul"), backend="coil")(q, k, v)
    ref = attention(q.double(), k.double(), v.double(), "mul").to(dtype)
    torch.testing.assert_close(out, ref, **({"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {}))
    assert _rewritten(coil_records())


def test_a_checkpointed_attention_keeps_the_users_checkpoint():
    # A graph with a higher-order op (here torch.utils.checkpoint's region) is not traced again:
    # the backward recomputes the region as the user wrote it; gradients are eager's.
    from torch.utils.checkpoint import checkpoint

    def fn(q, k, v):
        return checkpoint(attention, q, k, v, use_reentrant=False) * 2

    reset_compiler()
    q, k, v = (torch.randn(1, 2, 16, 8, requires_grad=True) for _ in range(3))
    got = _grads(torch.compile(fn, backend="coil"), (q, k, v))
    for g, w in zip(got, _grads(fn, (q, k, v))):
        torch.testing.assert_close(g, w)
    # (The forward, which saves nothing of the region, may still call attention at lowering.)
    assert not _attention_ops(coil_records(), "backward")


def _check_inference_and_training(fn, qkv):
    """fn(q, k, v) compiled without gradients (one attention call, values within float32
    rounding of the written form's) and in training (an attention call in the forward graph,
    gradients of q, k, v within float32 rounding; masks need none)."""
    reset_compiler()
    with torch.no_grad():
        out = torch.compile(fn, backend="coil")(*qkv)
    torch.testing.assert_close(out, fn(*qkv), atol=1e-5, rtol=1e-4)
    assert _rewritten(coil_records())
    reset_compiler()
    inputs = [t.clone().requires_grad_() for t in qkv]
    got = _grads(torch.compile(fn, backend="coil"), inputs)
    for g, w in zip(got, _grads(fn, inputs)):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    assert _attention_ops(coil_records(), "forward")


def _masked(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 24), (20, 24), (2, 3, 20, 24)])
def test_an_additive_mask_is_the_attention_mask(mask_shape):
    # Padding masks ([B, 1, 1, L]), causal ones ([S, L]) and full ones: one attention call with
    # attn_mask, in inference and in training (gradients of q, k, v within float32
    # rounding of the written form's; ATen's fused kernels take no mask that needs a gradient).
    torch.manual_seed(0)
    q = torch.randn(2, 3, 20, 16)
    k, v = torch.randn(2, 3, 24, 16), torch.randn(2, 3, 24, 16)
    mask = torch.randn(*mask_shape)
    mask[..., -3:] = float("-inf")  # some keys masked out for every query
    _check_inference_and_training(lambda q, k, v: _masked(q, k, v, mask), (q, k, v))


def test_a_mask_of_another_dtype_keeps_the_written_form():
    # bf16 scores plus a float32 mask promote to float32: no attention call takes that mask.
    def fn(q, k, v, mask):
        s = q @ k.transpose(-2, -1) * 0.5 + mask
        return torch.softmax(s, dim=-1).to(q.dtype) @ v

    q, k, v = (torch.randn(1, 2, 8, 8, dtype=torch.bfloat16) for _ in range(3))
    mask = torch.randn(8, 8)
    reset_compiler()
    out = torch.compile(fn, backend="coil")(q, k, v, mask)
    torch.testing.assert_close(out, fn(q, k, v, mask))
    assert not _rewritten(coil_records())


def _causal(q, k, v, keep):
    # nanoGPT's written-out attention: the scores where the mask is 0 set to -inf.
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(keep[:, :, : q.shape[2], : q.shape[2]] == 0, float("-inf"))
    return torch.softmax(att, dim=-1) @ v


def test_a_masked_fill_with_minus_infinity_is_a_bool_attention_mask():
    torch.manual_seed(0)
    keep = torch.tril(torch.ones(24, 24)).view(1, 1, 24, 24)
    q, k, v = (torch.randn(2, 3, 20, 16) for _ in range(3))
    _check_inference_and_training(lambda q, k, v: _causal(q, k, v, keep), (q, k, v))


def test_a_masked_fill_with_a_finite_value_keeps_the_written_form():
    # A row masked out entirely is uniform under a finite fill and NaN under -inf: no rewrite.
    def fn(q, k, v, drop):
        att = (q @ k.transpose(-2, -1)).masked_fill(drop, -1e4)
        return torch.softmax(att, dim=-1) @ v

    q, k, v = (torch.randn(1, 2, 8, 8) for _ in range(3))
    drop = torch.rand(8, 8) > 0.5
    reset_compiler()
    out = torch.compile(fn, backend="coil")(q, k, v, drop)
    torch.testing.assert_close(out, fn(q, k, v, drop))
    assert not _rewritten(coil_records())


def _dropout_attention(q, k, v, p=0.1):
    # nanoGPT's and HF's eager attention in training: dropout on the probabilities.
    a = torch.softmax((q @ k.transpose(-2, -1)) * 0.25, dim=-1)
    return torch.nn.functional.dropout(a, p, True) @ v


def _native_dropout_attention(q, k, v, p=0.1):
    # What dropout traces to on CUDA (the fused kernel): native_dropout's first result.
    a = torch.softmax((q @ k.transpose(-2, -1)) * 0.25, dim=-1)
    return torch.native_dropout(a, p, True)[0] @ v


def _autocast_dropout_attention(q, k, v, p=0.1, native=False):
    # What CUDA autocast leaves: bf16 products, the softmax in float32 between two casts, and
    # the dropout on the float32 probabilities before their cast down (dropout keeps its
    # input's dtype). Written with explicit casts: the CPU's autocast keeps softmax in bf16.
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    a = torch.softmax(((q @ k.transpose(-2, -1)) * 0.25).float(), dim=-1)
    a = torch.native_dropout(a, p, True)[0] if native else torch.nn.functional.dropout(a, p, True)
    return a.to(torch.bfloat16) @ v


def _autocast_native_dropout_attention(q, k, v, p=0.1):
    return _autocast_dropout_attention(q, k, v, p, native=True)


def _matches(fn, dropout: bool):
    """The matcher's answer for fn's graph as the training rewrite traces it."""
    from coil import _C, attention_training, fx_import

    found = []

    def backend(gm, example_inputs):
        traced, fakes = attention_training._trace(gm)
        found.extend(_C.attention_matches(fx_import.graph_to_json(traced, fakes), dropout=dropout))
        return gm.forward

    torch._dynamo.reset()
    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))
    torch.compile(fn, backend=backend)(q, k, v)
    return found


@pytest.mark.parametrize("fn", [_dropout_attention, _native_dropout_attention,
                                _autocast_dropout_attention, _autocast_native_dropout_attention],
                         ids=["dropout", "native_dropout", "autocast", "autocast_native"])
def test_dropout_on_the_probabilities_is_the_calls_dropout_p(fn):
    # Both forms dropout traces to (on the CPU: x * bernoulli_(empty_like(x), 0.9) / 0.9; on CUDA:
    # native_dropout) are absorbed into the attention call as dropout_p, where random numbers
    # need not be eager's; asked without dropout (inference graphs), the matcher leaves them.
    (m,) = _matches(fn, dropout=True)
    assert m["dropout"] == pytest.approx(0.1) and m["scale"] == pytest.approx(0.25)
    assert _matches(fn, dropout=False) == []


def test_dropout_attention_under_fallback_random_keeps_eagers_draws():
    # fallback_random: every random number is eager's, so the dropout stays written out and the
    # gradients under one seed are eager's exactly (up to rounding).
    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))
    reset_compiler()
    compiled = torch.compile(_dropout_attention, backend="coil",
                             options={"fallback_random": True})
    torch.manual_seed(7)
    got = _grads(compiled, (q, k, v))
    torch.manual_seed(7)
    want = _grads(_dropout_attention, (q, k, v))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    assert not _attention_ops(coil_records(), "forward")


def test_dropout_attention_on_the_cpu_stays_written_out_and_trains():
    # On the CPU ATen's attention with dropout is its math path, the written-out form itself:
    # the rewrite leaves it (CUDA graphs take the dropout into the call: tests/gpu). Gradients are
    # finite, and a dropout of probability 0.5 zeroes about half of the probabilities'
    # contributions (the output's gradient with respect to v sums the kept, rescaled
    # probabilities of each column: its mean over many rows is the undropped mean).
    torch.manual_seed(0)
    q, k = (torch.randn(1, 1, 256, 8, requires_grad=True) for _ in range(2))
    v = torch.randn(1, 1, 256, 8, requires_grad=True)
    reset_compiler()
    compiled = torch.compile(lambda q, k, v: _dropout_attention(q, k, v, 0.5), backend="coil")
    compiled(q, k, v).sum().backward()
    assert not _attention_ops(coil_records(), "forward")
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    # d(sum of outputs)/dv[j] = sum over rows i of kept[i, j] * p[i, j] / 0.5: over 256 rows,
    # each row's probabilities sum to 1, so the total over j is about 256.
    total = float(v.grad[..., 0].sum())
    assert 200 < total < 312, total


def test_users_saved_tensor_hooks_see_no_tensor_of_the_compile_time_trace():
    # The rewrite traces Dynamo's graph with fake tensors while the user's saved_tensors_hooks
    # (offloading, checkpointing, a memory count) may be active: they must see only the tensors
    # the compiled step really saves, never the trace's fakes of the written-out form (on the H200
    # a count of saved bytes included the trace's float32 probabilities and dropout mask).
    from torch._subclasses.fake_tensor import FakeTensor

    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))
    seen = []

    def pack(t):
        seen.append(isinstance(t, FakeTensor))
        return t

    reset_compiler()
    compiled = torch.compile(attention, backend="coil")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        compiled(q, k, v).sum().backward()
    assert _attention_ops(coil_records(), "forward")
    assert seen and not any(seen), seen
