"""The CPU numerics suite's op families and models on a CUDA GPU, in float32, bfloat16 and
float16: pointwise math, binary arithmetic and comparisons, reductions, normalizations and
models (MLP, transformer block, a small CNN, GPT-2). Each test compiles a few graphs that hold
many ops at once, so the whole file costs a few dozen Triton compiles.

Tolerances: a single op in a 16-bit dtype is computed in float32 and rounded once, like eager's
CUDA kernels, so it is compared at the dtype's own tolerances; reductions and fused chains round
at different points than eager's op-by-op kernels, so they get looser ones (named at each use).
Skipped where torch.cuda.is_available() is False."""

import math
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytest.importorskip("triton")
# COIL_GPU_TEST_DEVICE=cpu runs the same cases through coil's C++ backend (a check of the tests
# themselves on a machine without a GPU).
DEV = os.environ.get("COIL_GPU_TEST_DEVICE", "cuda")
BACKEND_NAME = "triton" if DEV == "cuda" else "cpp"
pytestmark = pytest.mark.skipif(DEV == "cuda" and not torch.cuda.is_available(),
                                reason="needs a CUDA GPU")
F32, BF16, F16, I64 = torch.float32, torch.bfloat16, torch.float16, torch.int64
FLOATS = [F32, BF16, F16]
IDS = ["f32", "bf16", "f16"]
# Tolerances of one rounding step in each dtype (assert_close's defaults for the 16-bit ones).
ONE_OP = {F32: dict(atol=1e-5, rtol=1.3e-6), BF16: dict(atol=1e-5, rtol=1.6e-2),
          F16: dict(atol=1e-5, rtol=1e-3)}
# Reductions and fused chains: eager rounds every intermediate to the dtype, coil keeps float32.
CHAIN = {F32: dict(atol=1e-4, rtol=1e-4), BF16: dict(atol=5e-2, rtol=5e-2),
         F16: dict(atol=5e-3, rtol=5e-3)}


def check(fn, *inputs, tol=None, fallbacks_allowed=()):
    """Eager vs coil: same structure, dtypes, shapes and values; every kernel a Triton kernel,
    no graph run eagerly and no ATen fallback beyond the ones named."""
    import coil

    expected = fn(*inputs)
    actual = torch.compile(fn, backend="coil")(*inputs)
    records = coil.compiled_graphs()
    assert records and not any(r.eager_fallback for r in records)
    assert all(r.backend == BACKEND_NAME for r in records)
    names = [n for r in records for n in r.kernel_names]
    assert names and all(n.startswith(BACKEND_NAME + "_") for n in names), names
    fallbacks = {op for r in records for op in r.fallback_ops}
    assert fallbacks <= set(fallbacks_allowed), sorted(fallbacks)
    _assert_same(actual, expected, tol or {})
    return actual


def _assert_same(actual, expected, tol, path="out"):
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            _assert_same(actual[k], expected[k], tol.get(k, tol) if _nested(tol) else tol,
                         f"{path}[{k!r}]")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, tol, f"{path}[{i}]")
    elif isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, path
        assert actual.device == expected.device, path
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}",
                                   **tol)
    else:
        assert actual == expected, path


def _nested(tol):
    return any(isinstance(v, dict) for v in tol.values())


def randn(*shape, dtype=F32, scale=1.0):
    return (torch.randn(*shape, device=DEV) * scale).to(dtype)


# --------------------------------------------------------------------------------------------
# Pointwise
# --------------------------------------------------------------------------------------------

# name -> (fn, input domain)
UNARY = {
    "exp": (torch.exp, "any"), "log": (torch.log, "positive"), "log1p": (torch.log1p, "positive"),
    "expm1": (torch.expm1, "any"), "sqrt": (torch.sqrt, "positive"),
    "rsqrt": (torch.rsqrt, "positive"), "abs": (torch.abs, "any"), "neg": (torch.neg, "any"),
    "sin": (torch.sin, "any"), "cos": (torch.cos, "any"), "tan": (torch.tan, "small"),
    "tanh": (torch.tanh, "any"), "sigmoid": (torch.sigmoid, "any"), "erf": (torch.erf, "any"),
    "relu": (torch.relu, "any"), "gelu": (F.gelu, "any"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any"), "silu": (F.silu, "any"),
    "mish": (F.mish, "any"), "softplus": (F.softplus, "any"), "elu": (F.elu, "any"),
    "hardswish": (F.hardswish, "any"), "floor": (torch.floor, "any"),
    "ceil": (torch.ceil, "any"), "round": (torch.round, "any"), "trunc": (torch.trunc, "any"),
    "reciprocal": (torch.reciprocal, "positive"), "sign": (torch.sign, "any"),
    "square": (torch.square, "any"), "atan": (torch.atan, "any"), "asin": (torch.asin, "small"),
    "sinh": (torch.sinh, "small"), "log2": (torch.log2, "positive"),
    "exp2": (torch.exp2, "any"), "isnan": (torch.isnan, "any"), "frac": (torch.frac, "any"),
}


def _domain(x, domain):
    if domain == "positive":
        return x.abs() + 0.05
    if domain == "small":
        return x.clamp(-0.9, 0.9)
    return x


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_unary_math(dtype):
    base = randn(1000, 37, scale=3.0, dtype=dtype)
    inputs = {n: _domain(base, d).contiguous() for n, (_, d) in UNARY.items()}
    check(lambda d: {n: UNARY[n][0](d[n]) for n in UNARY}, inputs, tol=ONE_OP[dtype])


@pytest.mark.parametrize("dtype", FLOATS + [I64], ids=IDS + ["i64"])
def test_binary_arithmetic_and_comparisons(dtype):
    if dtype == I64:
        a = torch.randint(-50, 50, (513, 257), device=DEV)
        b = torch.randint(1, 20, (513, 257), device=DEV) * torch.where(a > 0, 1, -1)
    else:
        a, b = randn(513, 257, dtype=dtype), randn(513, 257, dtype=dtype).abs() + 0.5

    def f(a, b):
        out = {"add": a + b, "sub": a - b * 2, "mul": a * b, "div": a / b,
               "floordiv": torch.div(a, b, rounding_mode="floor"),
               "truncdiv": torch.div(a, b, rounding_mode="trunc"), "rem": torch.remainder(a, b),
               "fmod": torch.fmod(a, b), "max": torch.maximum(a, b), "min": torch.minimum(a, b),
               "lt": a < b, "eq": a == b, "ge": a >= b, "where": torch.where(a > 0, a, b),
               "clamp": a.clamp(-3, 3), "row_bcast": a + b[:1], "col_bcast": a * b[:, :1]}
        if dtype == I64:
            out |= {"and": a & b, "xor": a ^ b, "shl": a << 2, "pow": a.pow(2)}
        else:
            out |= {"pow": b.pow(1.7), "atan2": torch.atan2(a, b), "hypot": torch.hypot(a, b),
                    "lerp": torch.lerp(a, b, 0.3)}
        return out

    # One op each, but fmod/remainder of a rounded quotient can differ by one ulp of b.
    check(f, a, b, tol=CHAIN[dtype] if dtype != I64 else None)


def test_mixed_dtype_promotion():
    a, b, c = randn(300, 200, dtype=BF16), randn(300, 200, dtype=F16), randn(300, 200)
    i = torch.randint(-5, 5, (300, 200), device=DEV)
    check(lambda a, b, c, i: (a + b, a * c, b - i, (i * 0.5).to(F16), (a > b) & (c < 0)),
          a, b, c, i, tol=CHAIN[BF16])


def test_transposed_and_sliced_inputs_16bit():
    x = randn(1024, 768, dtype=F16)
    check(lambda x: (x.t() * 2 + 1, x[::2, 5:] - x[1::2, :-5], F.gelu(x.t()[:, ::3])), x,
          tol=ONE_OP[F16])


# --------------------------------------------------------------------------------------------
# Reductions and normalizations
# --------------------------------------------------------------------------------------------

REDUCTION_DIMS = [0, 1, -1, (0, 2), None]


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_reductions(dtype):
    x = randn(33, 65, 257, dtype=dtype)

    def f(x, p):
        out = {}
        for d in REDUCTION_DIMS:
            kw = {} if d is None else {"dim": d}
            out[f"sum{d}"] = x.sum(**kw)
            out[f"mean{d}"] = x.mean(**kw)
            out[f"amax{d}"] = x.amax(**kw) if d is not None else x.max()
            out[f"var{d}"] = x.var(**kw)
            out[f"norm{d}"] = torch.linalg.vector_norm(x, **kw)
        out["std1"] = x.std(1, keepdim=True)
        out["argmax-1"] = x.argmax(-1)
        out["argmin0"] = x.argmin(0)
        out["lse-1"] = torch.logsumexp(x, -1)
        if DEV == "cuda" or dtype == F32:  # eager's CPU prod multiplies in the 16-bit dtype
            out["prod-1"] = p.prod(-1)
        out["any"] = (x > 3).any(1)
        return out

    # Factors near 1, made outside the graph: inside it coil would keep x * 0.1 + 1 in float32
    # where eager rounds it to the dtype, and a product of 257 such roundings drifts by percents.
    p = x * 0.1 + 1
    # 16-bit sums over 33*257 elements: eager and coil both accumulate in float32, in a
    # different order; compared after one final rounding each.
    check(f, x, p, tol=CHAIN[dtype])


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_softmax_and_norms(dtype):
    x = randn(64, 1000, dtype=dtype)
    w, b = randn(1000, dtype=dtype), randn(1000, dtype=dtype)
    img = randn(8, 32, 14, 14, dtype=dtype)
    gw, gb = randn(32, dtype=dtype), randn(32, dtype=dtype)
    rm, rv = randn(32).abs(), randn(32).abs() + 0.5

    def f(x, w, b, img, gw, gb):
        return {
            "softmax": x.softmax(-1), "log_softmax": x.log_softmax(-1),
            "softmax0": x.softmax(0),
            "layer_norm": F.layer_norm(x, (1000,), w, b),
            "rms_norm": x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dtype),
            "group_norm": F.group_norm(img, 8, gw, gb),
            "batch_norm_eval": F.batch_norm(img, rm.to(dtype), rv.to(dtype), gw, gb),
            "batch_norm_train": F.batch_norm(img, None, None, gw, gb, training=True),
        }

    # On the CPU (the tests' own check), 16-bit training batch norm is left to eager's kernel.
    cpu_16bit = DEV == "cpu" and dtype != F32
    check(f, x, w, b, img, gw, gb, tol=CHAIN[dtype],
          fallbacks_allowed=("aten._native_batch_norm_legit.no_stats",) if cpu_16bit else ())


def test_scans_and_pooling_bf16():
    x = randn(64, 200, dtype=BF16)
    img = randn(4, 16, 30, 30, dtype=BF16)
    check(lambda x, img: (x.float().cumsum(-1), x.float().cummax(1).values,
                          F.max_pool2d(img, 3, 2, 1), F.avg_pool2d(img, 2),
                          F.adaptive_avg_pool2d(img, 1)),
          x, img, tol=CHAIN[BF16])


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_cumsum_16bit_accumulates_in_float32(dtype):
    # Eager's CUDA cumsum adds in the 16-bit dtype, rounding every partial sum (its CPU kernel
    # adds in float32); coil adds in float32 and rounds once. So coil is compared with a
    # float64 reference, and must be at least as close to it as eager.
    x = randn(64, 200, dtype=dtype)
    import coil

    actual = torch.compile(lambda x: x.cumsum(-1), backend="coil")(x)
    assert not any(r.eager_fallback for r in coil.compiled_graphs())
    exact = x.double().cumsum(-1)
    torch.testing.assert_close(actual, exact.to(dtype), atol=1e-3, rtol=ONE_OP[dtype]["rtol"])
    coil_err = (actual.double() - exact).abs().max().item()
    eager_err = (x.cumsum(-1).double() - exact).abs().max().item()
    assert coil_err <= eager_err, (coil_err, eager_err)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, d=256, heads=4, causal=True):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads, self.causal = heads, causal

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, -1)
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        if self.causal:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def _rel_err(actual, expected):
    return ((actual.float() - expected.float()).norm() / expected.float().norm()).item()


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_transformer_block(dtype):
    torch.manual_seed(0)
    m = Block().to(DEV, dtype).eval()
    x = randn(4, 128, 256, dtype=dtype)
    with torch.no_grad():
        # The written-out causal attention becomes one scaled_dot_product_attention call.
        check(m, x, tol=CHAIN[dtype] if dtype == F32 else dict(atol=0.1, rtol=0.05),
              fallbacks_allowed=("aten.scaled_dot_product_attention.default",))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_cnn_with_batch_norm_and_pooling(dtype):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.Hardswish(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).to(DEV, dtype).eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    x = randn(16, 3, 64, 64, dtype=dtype)
    with torch.no_grad():
        check(m, x, tol=CHAIN[dtype] if dtype == F32 else dict(atol=0.05, rtol=0.05))


def _gpt2(attn):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_head=8, n_embd=512, vocab_size=1000,
                                  n_positions=256, bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=IDS)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpt2_forward(attn, dtype):
    m = _gpt2(attn).to(DEV, dtype)
    ids = torch.randint(0, 1000, (4, 256), device=DEV)
    mask = torch.ones(4, 256, dtype=torch.long, device=DEV)
    mask[1, 200:] = 0
    fn = lambda i, a: m(input_ids=i, attention_mask=a, use_cache=False).logits  # noqa: E731
    with torch.no_grad():
        expected = fn(ids, mask)
        actual = torch.compile(fn, backend="coil")(ids, mask)
    import coil

    records = coil.compiled_graphs()
    assert records and not any(r.eager_fallback for r in records)
    assert all(r.backend == BACKEND_NAME for r in records)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # Logits of a random-init model: relative error of the whole tensor, at the dtype's scale.
    bound = {F32: 1e-5, BF16: 2e-2, F16: 3e-3}[dtype]
    err = _rel_err(actual, expected)
    assert err < bound, (attn, dtype, err)


def test_bad_index_asserts_on_the_device():
    # Triton kernels report a bad indirect index in one buffer per device, allocated once
    # (runtime.index_error_buffer); the wrapper asserts its ok slot without waiting for the
    # device. The assert ends the CUDA context, so the program runs in a process of its own.
    import subprocess
    import sys

    code = (
        "import torch, coil\n"
        "f = torch.compile(lambda x, i: x[i] + 1, backend='coil')\n"
        "x = torch.randn(8, device='cuda')\n"
        "good = torch.tensor([1, 7], device='cuda')\n"
        "for _ in range(3):\n"
        "    assert torch.equal(f(x, good), x[good] + 1)\n"
        "torch.cuda.synchronize()\n"
        "print('good indices ok', flush=True)\n"
        "f(x, torch.tensor([1, 9], device='cuda'))\n"
        "torch.cuda.synchronize()\n"
        "print('bad index not reported', flush=True)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "good indices ok" in r.stdout, r.stdout + r.stderr
    assert r.returncode != 0 and "bad index not reported" not in r.stdout, r.stdout + r.stderr
    assert "device-side assert" in r.stderr or "out of bounds" in r.stderr, r.stderr[-2000:]
