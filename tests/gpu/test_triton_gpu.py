"""Correctness of coil's Triton kernels on a CUDA GPU: the cases of
tests/python/test_triton_interpret.py at realistic sizes, plus launch tuning (the winning config
is cached in coil's cache directory). Skipped where torch.cuda.is_available() is False."""

import glob
import json
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

BF16 = torch.bfloat16
DEV = "cuda"


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device=DEV).to(dtype)


def check(fn, *inputs, atol=None, rtol=None, kinds=()):
    """Eager vs coil on CUDA tensors: values, dtypes, shapes; every kernel a Triton kernel."""
    import coil
    import coil.backend

    expected = fn(*inputs)
    compiled = torch.compile(fn, backend=coil.backend.coil_backend)  # works without the entry point
    with warnings.catch_warnings():
        warnings.simplefilter("error", coil.backend.CoilWarning)
        actual = compiled(*inputs)
        again = compiled(*inputs)
    records = coil.compiled_graphs()
    assert records and not any(r.eager_fallback for r in records)
    names = [n for r in records for n in r.kernel_names]
    assert names and all(n.startswith("triton_") for n in names), names
    assert all(r.backend == "triton" for r in records)
    for kind in kinds:
        assert any(n.startswith(f"triton_{kind}_") for n in names), (kind, names)
    for out in (actual, again):
        exp = expected if isinstance(expected, (tuple, list)) else (expected,)
        act = out if isinstance(out, (tuple, list)) else (out,)
        for a, e in zip(act, exp):
            assert a.dtype == e.dtype and a.shape == e.shape and a.device == e.device
            # bf16 results are compared at bf16's own tolerances (one rounding step apart at most).
            tol = {} if atol is None else dict(atol=atol, rtol=rtol)
            torch.testing.assert_close(a, e, equal_nan=True, **tol)
    return names


def test_pointwise_chain():
    def f(x, y, z):
        return F.gelu(x * y + z).relu() * 0.5 + torch.tanh(x) - torch.sigmoid(y).log1p()

    check(f, randn(1000, 1037), randn(1000, 1037), randn(1000, 1037), kinds=["poi"])


def test_pointwise_bf16_large():
    x = randn(1 << 22, dtype=BF16)
    check(lambda x: (F.gelu(x * 2.0).relu() * 0.5).to(BF16), x, kinds=["poi"])


@pytest.mark.parametrize("layout", ["transposed", "broadcast", "strided", "offset"])
def test_layouts(layout):
    base = randn(300, 500)
    x = {
        "transposed": randn(500, 300).t(),
        "broadcast": randn(1, 500).expand(300, 500),
        "strided": randn(300, 1000)[:, ::2],
        "offset": randn(300 * 500 + 3)[3:].view(300, 500),
    }[layout]
    check(lambda x, y: x * 2 + y, x, base)


def test_integer_division_and_remainder():
    a = torch.randint(-200, 200, (300, 70), device=DEV)
    b = torch.randint(1, 9, (300, 70), device=DEV) * (torch.randint(0, 2, (300, 70), device=DEV) * 2 - 1)
    check(lambda a, b: (a // b, a % b, torch.remainder(a.float(), b.float()), torch.fmod(a, b)), a, b)


def test_nan_propagation():
    x, y = randn(64, 129), randn(64, 129)
    x[0, 0] = y[1, 2] = float("nan")
    check(lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), x.amax(1), x.amin(0)), x, y)


@pytest.mark.parametrize("shape", [(4096, 512), (256, 16384)], ids=["persistent", "looped"])
@pytest.mark.parametrize("dim", [1, 0], ids=["rows", "columns"])
def test_sum(shape, dim):
    check(lambda x: x.sum(dim), randn(*shape), atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("shape", [(512, 333), (64, 5000)], ids=["persistent", "looped"])
def test_argmax_argmin(shape):
    x = torch.randint(0, 8, shape, device=DEV).float()  # many ties: the first index must win
    x[1, 3] = float("nan")
    check(lambda x: (x.argmax(1), x.argmin(1), x.argmax(0)), x)


@pytest.mark.parametrize("shape", [(1024, 1000), (64, 32768)], ids=["persistent", "looped"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["f32", "bf16"])
def test_softmax(op, shape, dtype):
    f = getattr(torch, op)
    check(lambda x: f(x, -1), randn(*shape, dtype=dtype), atol=1e-5 if dtype != BF16 else None,
          rtol=1e-4 if dtype != BF16 else None)


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["f32", "bf16"])
def test_layer_norm(dtype):
    ln = torch.nn.LayerNorm(4096, device=DEV, dtype=dtype)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
        check(ln, randn(512, 4096, dtype=dtype), atol=1e-4 if dtype != BF16 else None,
              rtol=1e-4 if dtype != BF16 else None)


def test_var_mean():
    check(lambda x: torch.var_mean(x, dim=1, correction=1), randn(300, 3000), atol=1e-4, rtol=1e-4)


def test_cat():
    check(lambda a, b: torch.cat([a, b * 2], 1), randn(400, 80), randn(400, 50))


def test_bool_and_int_reductions():
    x = torch.randint(-5, 6, (500, 300), device=DEV)
    check(lambda x: ((x > 0).any(1), (x > -4).all(1), x.sum(1), x.amax(1)), x)


def test_tuning_is_cached():
    import coil

    x = randn(2048, 4000)
    check(lambda x: torch.softmax(x, -1), x)
    files = glob.glob(os.path.join(coil.config.options.cache_dir, "triton", "*.best_config.json"))
    assert files, "no tuned config was cached"
    data = json.load(open(files[0]))
    assert data["config"] in [t["config"] for t in data["timings_ms"]]


def test_cpu_scalar_tensor_input():
    # A 0-d CPU tensor next to CUDA tensors is a scalar to eager; coil's kernels read device
    # memory only, so the wrapper copies it over.
    scale = torch.tensor(2.5)
    check(lambda x, s: (x * s).exp(), randn(64, 33), scale)


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["f32", "bf16"])
def test_transposed_tiles(dtype):
    # A transposed read with a contiguous store runs in 2-D tiles (sizes not multiples of a tile).
    names = check(lambda x, y: ((x.t() + y).contiguous(), x.permute(1, 0).relu().contiguous()),
                  randn(1000, 3001, dtype=dtype), randn(3001, 1000, dtype=dtype))
    assert len(names) >= 1


def test_nhwc_to_nchw():
    check(lambda x: (x.permute(0, 3, 1, 2) * 2).contiguous(), randn(8, 56, 56, 96, dtype=BF16))


@pytest.mark.parametrize("op", ["sum", "amax", "mean_bf16", "prod"])
def test_split_reduction(op):
    # Few output rows, long rows: a partial pass over many programs, then a second pass.
    x = randn(1 << 22) if op != "prod" else 1 + randn(1 << 20) * 1e-4
    fns = {
        "sum": lambda t: t.sum(),
        "amax": lambda t: t.amax(),
        "mean_bf16": lambda t: t.to(BF16).view(4, -1).mean(1),
        "prod": lambda t: t.prod(),
    }
    names = check(fns[op], x, atol=1e-2, rtol=1e-3)
    assert len(names) == 2, names


@pytest.mark.parametrize("cols", [4096, 32768, 65536], ids=["4k", "32k", "64k"])
def test_long_rows(cols):
    # Up to 32768 a row stays in registers (persistent); beyond, a loop over r.
    x = randn(256, cols, dtype=BF16)  # 256 rows: enough not to be split
    kind = "per" if cols <= 32768 else "red"
    check(lambda x: (torch.softmax(x, -1), x.float().pow(2).mean(-1)), x, kinds=[kind])


def test_misaligned_input_takes_the_checked_launch_path():
    # The direct launch path assumes 16-byte aligned pointers; a view with an odd offset must
    # still compute the right thing.
    import coil

    f = torch.compile(lambda x: x * 2 + 1, backend=coil.backend.coil_backend)
    base = randn(4097)
    aligned, misaligned = base[:4096], base[1:]
    torch.testing.assert_close(f(aligned), aligned * 2 + 1)
    torch.testing.assert_close(f(misaligned), misaligned * 2 + 1)
    torch.testing.assert_close(f(aligned), aligned * 2 + 1)


def test_wrapper_guards_the_device(tmp_path):
    import coil

    with coil.config.patch(debug_dir=str(tmp_path)):
        check(lambda x: x.exp(), randn(128))
    code = open(os.path.join(coil.compiled_graphs()[-1].debug_dir, "output_code.py")).read()
    assert "with torch.cuda._DeviceGuard(0):" in code
    assert "empty_strided_cuda(" in code


# ---- indirect indexing ----


def test_gather_embedding_index():
    x = randn(4096, 64)
    i = torch.randint(0, 4096, (2048, 64), device=DEV)
    check(lambda x, i: torch.gather(x, 0, i) * 2, x, i)
    w, ids = randn(30000, 256), torch.randint(0, 30000, (8, 512), device=DEV)
    check(lambda w, ids, p: F.embedding(ids, w) + p, w, ids, randn(512, 256))
    check(lambda x, i: x[i].sum(1), x, torch.randint(-4096, 4096, (1000,), device=DEV))


def test_index_put_accumulate_and_scatter():
    x = randn(1000, 128)
    i = torch.randint(-1000, 1000, (5000,), device=DEV)
    v = randn(5000, 128)
    check(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, i, v, atol=1e-4, rtol=1e-4)
    check(lambda x, i, v: x.scatter_add(1, i, v), x, torch.randint(0, 128, (1000, 300), device=DEV),
          randn(1000, 300), atol=1e-4, rtol=1e-4)
    # 16-bit float atomic adds are left to ATen (an extern call between coil's kernels).
    xb, vb = x.to(BF16), v.to(BF16)
    check(lambda x, i, v: x.index_put((i,), v, accumulate=True) * 2, xb, i, vb, atol=1, rtol=0.05)


def test_pooling_forward_and_backward():
    x = randn(8, 64, 56, 56, dtype=BF16)
    check(lambda x: F.max_pool2d(F.relu(x), 3, 2, 1, return_indices=True), x)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1) + F.adaptive_avg_pool2d(x, 7).mean(), x)
    assert not [op for r in __import__("coil").compiled_graphs() for op in r.fallback_ops]
    xg = randn(4, 16, 33, 33).requires_grad_()
    out = torch.compile(lambda x: F.max_pool2d(x, 3, 2, 1), backend="coil")(xg)
    out.sum().backward()
    ref = xg.detach().clone().requires_grad_()
    F.max_pool2d(ref, 3, 2, 1).sum().backward()
    torch.testing.assert_close(xg.grad, ref.grad)


def test_special_functions_libdevice():
    x = randn(4096, 33).abs() + 0.1
    check(lambda x: (torch.lgamma(x), torch.erfc(x), torch.special.i0(x), torch.special.ndtri(
        torch.sigmoid(x) * 0.98 + 0.01), torch.acosh(x + 1), torch.log10(x)), x, atol=1e-5, rtol=1e-5)


def test_random_ops_on_the_device():
    import coil

    f = torch.compile(lambda x: (torch.rand_like(x), torch.randn_like(x),
                                 torch.ops.aten.native_dropout(x, 0.25, True)), backend="coil")
    x = torch.ones(1024, 1024, device=DEV)
    torch.manual_seed(0)
    u, z, (out, mask) = f(x)
    assert not [op for r in coil.compiled_graphs() for op in r.fallback_ops]
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 1) < 0.01
    assert abs(mask.float().mean().item() - 0.75) < 0.01
    torch.testing.assert_close(out, mask.float() / 0.75)
    torch.manual_seed(0)
    assert torch.equal(f(x)[0], u)


def test_out_of_bounds_index_fails_on_the_device():
    # Like eager's device-side assert, the error surfaces at a synchronization. A failed device
    # assert leaves the CUDA context unusable, so this runs in a process of its own: every test
    # after it in this one would fail at its first CUDA call.
    import subprocess
    import sys

    script = """
import torch, coil
f = torch.compile(lambda x, i: torch.gather(x, 0, i) + 1, backend="coil")
x = torch.randn(5, 3, device="cuda")
f(x, torch.zeros(2, 3, dtype=torch.int64, device="cuda"))
torch.cuda.synchronize()
print("in bounds ok", flush=True)
try:
    f(x, torch.tensor([[0, 5, 1]], device="cuda"))
    torch.cuda.synchronize()
except RuntimeError as e:
    print("raised:", type(e).__name__, str(e).splitlines()[0], flush=True)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "in bounds ok" in run.stdout, run.stdout + run.stderr
    assert "raised:" in run.stdout, run.stdout + run.stderr


def test_lm_head_logits_are_written_in_place_by_row_groups():
    # GPT-2's vocabulary: the product (N 50257) is a graph output, written straight into eager's
    # contiguous logits by 8 aligned products over rows 8 apart; the peak is the logits alone
    # (411 MB): no scratch block, no padded copy of the weight (77 MB).
    import coil

    head = torch.nn.Linear(768, 50257, bias=False).to(DEV, BF16).eval()
    x = randn(8, 512, 768, dtype=BF16)
    with torch.no_grad():
        expected = head(x)
        compiled = torch.compile(head, backend="coil")
        actual = compiled(x)
        torch.testing.assert_close(actual, expected, atol=2e-2, rtol=2e-2)
        assert actual.stride() == expected.stride()
        (record,) = coil.compiled_graphs()
        assert record.extern_ops == ["coil.mm_row_groups.default"], record.extern_ops
        del actual
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        compiled(x)
        peak = torch.cuda.max_memory_allocated() - before
    assert peak < 1.05 * expected.numel() * expected.element_size(), peak


def _check_autocast_attention_step(block, qkv, x):
    """One bf16-autocast training step of `block` (its projection `qkv`), eager against coil:
    values and the projection's gradient, and an attention call in coil's forward graph."""
    import coil

    def step(fn):
        qkv.zero_grad()
        with torch.autocast("cuda", dtype=BF16):
            out = fn(x)
        out.float().square().mean().backward()
        return out, qkv.weight.grad.clone()

    coil.reset()
    want, want_grad = step(block)
    got, got_grad = step(torch.compile(block, backend="coil"))
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(got_grad, want_grad, atol=2e-3, rtol=5e-2)
    forward = [op for r in coil.compiled_graphs() if r.kind == "forward" for op in r.fallback_ops]
    assert any("attention" in op for op in forward), forward


def test_training_attention_under_autocast_calls_flash_attention():
    # Written-out attention in a bf16-autocast training step: rewritten before AOTAutograd
    # (python/coil/attention_training.py), so the forward saves no [B, H, S, S] probabilities.
    import math

    torch.manual_seed(0)
    qkv = torch.nn.Linear(256, 768, device=DEV)

    def block(x):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(64), dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, s, 256)

    _check_autocast_attention_step(block, qkv, torch.randn(4, 512, 256, device=DEV))


def test_dropout_attention_in_training_is_one_call_with_dropout_p():
    # nanoGPT's eager attention in training: dropout(0.1) on the probabilities. Rewritten before
    # AOTAutograd into one attention call with dropout_p (its own mask stream: values are not
    # eager's, their distribution is), so neither the probabilities nor a dropout mask is saved.
    import math

    import coil

    torch.manual_seed(0)
    qkv = torch.nn.Linear(256, 768, device=DEV)

    def block(x, p=0.1):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 4, 64).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(64), dim=-1)
        att = torch.nn.functional.dropout(att, p, True)
        return (att @ v).transpose(1, 2).reshape(b, s, 256)

    x = torch.randn(4, 512, 256, device=DEV)

    def saved_by(fn, kept=None):
        saved = []

        def pack(t):
            saved.append(t.untyped_storage().nbytes())
            if kept is not None:
                kept.append((tuple(t.shape), str(t.dtype).replace("torch.", "")))
            return t

        with torch.autocast("cuda", dtype=BF16), \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(x)
        return sum(saved), out

    coil.reset()
    written, _ = saved_by(block)
    kept = []
    saved, out = saved_by(torch.compile(block, backend="coil"), kept)
    out.float().square().mean().backward()
    assert torch.isfinite(qkv.weight.grad).all()
    forward = [op for r in coil.compiled_graphs() if r.kind == "forward" for op in r.fallback_ops]
    assert any("attention" in op for op in forward), forward
    probabilities = 4 * 4 * 512 * 512 * 2  # one bf16 [B, H, S, S] tensor
    assert saved < written - probabilities, (saved, written, forward, kept)
    # Dropout keeps the expectation: over 2M outputs the mean is the undropped one's.
    with torch.no_grad(), torch.autocast("cuda", dtype=BF16):
        plain = block(x, 0.0).float()
    assert abs(float(out.float().mean() - plain.mean())) < 0.05 * float(plain.abs().mean())


def test_causal_masked_fill_attention_under_autocast_is_one_call():
    # nanoGPT's written-out causal attention (masked_fill with -inf) in a bf16-autocast training
    # step: sdpa with the mask's negation as its bool attn_mask, values and gradients as eager's.
    import math

    torch.manual_seed(0)
    keep = torch.tril(torch.ones(256, 256, device=DEV)).view(1, 1, 256, 256)
    qkv = torch.nn.Linear(128, 384, device=DEV)

    def block(x):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 2, 64).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(64))
        att = att.masked_fill(keep[:, :, :s, :s] == 0, float("-inf"))
        return (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, 128)

    _check_autocast_attention_step(block, qkv, torch.randn(4, 200, 128, device=DEV))
