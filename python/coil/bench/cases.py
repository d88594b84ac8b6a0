"""The benchmark cases: what each one computes, at which size on which device, and how many bytes
a memory-bound case must move at the least.

A case builds, for a device and a size class, a `Built`: the function to compile (a plain function
or an nn.Module), its inputs, a short shape/dtype description, the minimal bytes (memory-bound
cases only: every input read once, every output written once) and correctness tolerances.
Sizes: "cpu" (fp32, small enough for a 2-core machine; the memory-bound inputs are 64 MB, twice a
typical last-level cache, so that repeated calls cannot run from cache), "cuda" (bf16, the sizes of
shared/reference/measured-anchors.md) and "tiny" (for the harness's own test).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class NotAvailable(Exception):
    """The case needs a library this machine does not have (shown as "not available here")."""


@dataclasses.dataclass
class Built:
    fn: Callable  # what torch.compile wraps: a function or an nn.Module
    inputs: tuple
    desc: str  # shape/dtype, for the table
    min_bytes: int | None = None  # memory-bound cases: inputs read once + outputs written once
    train: bool = False  # one training step: forward, MSE loss, backward, SGD step
    autocast: bool = False  # CUDA training in bf16 autocast (parameters stay fp32)
    atol: float = 1e-4
    rtol: float = 1e-4
    # models: compare by relative error ||actual - eager|| / ||eager|| per output instead of
    # elementwise (a deep network in bf16 drifts elementwise while being right)
    rel_err: float | None = None


@dataclasses.dataclass
class Case:
    name: str
    kind: str  # "micro" or "model"
    build: Callable[[str, str], Built]  # (device, size class) -> Built
    quick: bool = False  # part of the --quick set
    compile_probe: bool = False  # --quick also measures its cold/warm compile time

    @property
    def train(self) -> bool:
        return self.name.endswith("_train")


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _dtype(device: str) -> torch.dtype:
    return torch.bfloat16 if device == "cuda" else torch.float32


def _tol(dtype: torch.dtype, loose: bool = False) -> dict:
    if dtype == torch.bfloat16:
        return {"atol": 5e-2, "rtol": 5e-2} if loose else {"atol": 2e-2, "rtol": 2e-2}
    return {"atol": 2e-3, "rtol": 2e-3} if loose else {"atol": 1e-4, "rtol": 1e-4}


def _pick(size: str, cpu, cuda, tiny):
    return {"cpu": cpu, "cuda": cuda, "tiny": tiny}[size]


def _desc(shape, dtype) -> str:
    dims = "x".join(str(s) for s in shape) if isinstance(shape, tuple) else str(shape)
    return f"{dims} {str(dtype).replace('torch.', '')}"


# --------------------------------------------------------------------------------------------
# microbenchmarks
# --------------------------------------------------------------------------------------------


def pointwise_chain(x, y, z):
    return F.gelu(x * y + z).relu() * 0.5


def softmax_last(x):
    return torch.softmax(x, dim=-1)


def log_softmax_last(x):
    return torch.log_softmax(x, dim=-1)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def rotary(x, cos, sin):
    """Rotary position embedding (LLaMA's apply_rotary_pos_emb): x * cos + rotate_half(x) * sin,
    rotate_half a cat of the negated second half and the first."""
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin


def sum_rows(x):
    return x.sum(dim=1)


def sum_cols(x):
    return x.sum(dim=0)


def mean_var(x):
    return torch.var_mean(x, dim=-1, correction=0)


def transpose_add(x, y):
    return x.t() + y


def matmul_nt(x, w):
    return x @ w.t()


def matmul_bias_gelu(x, w, b):
    return F.gelu(x @ w + b)


def _pointwise(device, size):
    n = _pick(size, 1 << 24, 1 << 28, 1 << 12)
    dt = _dtype(device)
    xs = tuple(torch.randn(n, device=device, dtype=dt) for _ in range(3))
    return Built(pointwise_chain, xs, _desc((n,), dt), _nbytes(*xs) + _nbytes(xs[0]), **_tol(dt))


def _rows_cols(device, size, cpu=(4096, 4096), cuda=(8192, 32768), dtype=None):
    shape = _pick(size, cpu, cuda, (64, 128))
    return shape, dtype or _dtype(device)


def _row_op(fn):
    def build(device, size):
        shape, dt = _rows_cols(device, size)
        x = torch.randn(shape, device=device, dtype=dt)
        return Built(fn, (x,), _desc(shape, dt), 2 * _nbytes(x), **_tol(dt))

    return build


def _layer_norm(device, size):
    shape, dt = _rows_cols(device, size, (16384, 1024), (32768, 4096))
    mod = nn.LayerNorm(shape[1]).to(device=device, dtype=dt)
    with torch.no_grad():
        mod.weight.normal_()
        mod.bias.normal_()
    x = torch.randn(shape, device=device, dtype=dt)
    return Built(
        mod,
        (x,),
        _desc(shape, dt),
        2 * _nbytes(x) + _nbytes(mod.weight, mod.bias),
        **_tol(dt, loose=True),
    )


def _rms_norm(device, size):
    shape, dt = _rows_cols(device, size, (16384, 1024), (32768, 4096))
    x = torch.randn(shape, device=device, dtype=dt)
    w = torch.randn(shape[1], device=device, dtype=dt)
    return Built(
        rms_norm, (x, w), _desc(shape, dt), 2 * _nbytes(x) + _nbytes(w), **_tol(dt, loose=True)
    )


def _reduce(fn, out_dim):
    def build(device, size):
        shape, dt = _rows_cols(device, size, (4096, 4096), (16384, 16384), torch.float32)
        x = torch.randn(shape, device=device, dtype=dt)
        out = shape[out_dim] * x.element_size()
        return Built(fn, (x,), _desc(shape, dt), _nbytes(x) + out, atol=1e-2, rtol=1e-4)

    return build


def _mean_var(device, size):
    shape, dt = _rows_cols(device, size, (4096, 4096), (16384, 16384))
    x = torch.randn(shape, device=device, dtype=dt)
    return Built(
        mean_var,
        (x,),
        _desc(shape, dt),
        _nbytes(x) + 2 * shape[0] * x.element_size(),
        **_tol(dt, loose=True),
    )


def _transpose_add(device, size):
    shape, dt = _rows_cols(device, size, (4096, 4096), (16384, 16384))
    if size == "tiny":
        shape = (64, 64)  # x.t() + y needs a square x
    x = torch.randn(shape, device=device, dtype=dt)
    y = torch.randn(shape, device=device, dtype=dt)
    return Built(transpose_add, (x, y), _desc(shape, dt), 3 * _nbytes(x), **_tol(dt))


def _rotary(device, size):
    b, heads, seq, d = _pick(size, (1, 32, 1024, 128), (8, 32, 4096, 128), (1, 2, 16, 8))
    dt = _dtype(device)
    x = torch.randn(b, heads, seq, d, device=device, dtype=dt)
    cos = torch.randn(1, 1, seq, d, device=device, dtype=dt)
    sin = torch.randn(1, 1, seq, d, device=device, dtype=dt)
    return Built(rotary, (x, cos, sin), _desc((b, heads, seq, d), dt), 2 * _nbytes(x) +
                 _nbytes(cos, sin), **_tol(dt))


def _mm_odd(device, size):
    """x @ w with an odd output width (GPT-2's vocabulary): cuBLAS's aligned kernels need padded
    rows (lower::LowerOptions::gemm_padding)."""
    m, k, n = _pick(size, (512, 768, 50257), (4096, 768, 50257), (32, 64, 37))
    dt = _dtype(device)
    x = torch.randn(m, k, device=device, dtype=dt)
    w = torch.randn(n, k, device=device, dtype=dt) / math.sqrt(k)
    return Built(
        matmul_nt,
        (x, w),
        f"{m}x{k} @ {k}x{n} {_desc((), dt).strip()}",
        **_tol(dt, loose=True),
    )


def _mm_bias_gelu(device, size):
    m, k, n = _pick(size, (512, 1024, 1024), (8192, 4096, 4096), (32, 64, 64))
    dt = _dtype(device)
    x = torch.randn(m, k, device=device, dtype=dt)
    w = torch.randn(k, n, device=device, dtype=dt) / math.sqrt(k)
    b = torch.randn(n, device=device, dtype=dt)
    return Built(
        matmul_bias_gelu,
        (x, w, b),
        f"{m}x{k} @ {k}x{n} {_desc((), dt).strip()}",
        **_tol(dt, loose=True),
    )


class Attention(nn.Module):
    """One self-attention block written out (no fused SDPA), so the softmax can be fused."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        return x + self.proj(y)


def _attention(train: bool):
    def build(device, size):
        b, s, d, h = _pick(size, (1, 256, 512, 8), (8, 1024, 1024, 16), (1, 16, 32, 4))
        dt = _dtype(device)
        mod = Attention(d, h).to(device)
        x = torch.randn(b, s, d, device=device)
        if not train:
            mod, x = mod.to(dt), x.to(dt)
        tol = _tol(dt, loose=True)
        return Built(
            mod,
            (x,),
            f"{b}x{s}x{d}, {h} heads {_desc((), dt).strip()}",
            train=train,
            autocast=train and device == "cuda",
            **tol,
        )

    return build


# --------------------------------------------------------------------------------------------
# models (random initialisation, nothing downloaded)
# --------------------------------------------------------------------------------------------


class FirstOutput(nn.Module):
    """Wraps a transformers model so that the compiled function returns one tensor."""

    def __init__(self, model: nn.Module, names: tuple = ("input_ids",), **kwargs):
        super().__init__()
        self.model = model
        self.names = names
        self.kwargs = kwargs

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), **self.kwargs)[0]


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise NotAvailable(f"{module} is not installed")


def _no_dropout(model: nn.Module) -> nn.Module:
    """Training steps are compared with eager: random dropout masks would differ, so p = 0."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def _finish_model(model, inputs, desc, device, train):
    dt = _dtype(device)
    model = model.to(device)
    if train:
        model = _no_dropout(model.train())
    else:
        model = model.eval().to(dt)
    if train:  # the loss and gradients through a whole model
        tol = {"rel_err": 5e-2 if device == "cuda" else 1e-2}
    else:
        tol = {"rel_err": 2e-2 if dt == torch.bfloat16 else 1e-3}
    precision = "fp32 + bf16 autocast" if train and device == "cuda" else str(dt)[6:]
    return Built(
        model,
        inputs,
        f"{desc} {precision}",
        train=train,
        autocast=train and device == "cuda",
        **tol,
    )


# Batch x sequence length of the language models, per size class: inference, training step.
# The CPU sizes are small so that a model case takes seconds on a 2-core machine.
TEXT_SIZES = {
    "gpt2": {"cpu": ((1, 128), (1, 64)), "cuda": ((8, 512), (4, 512)), "tiny": ((1, 8), (1, 8))},
    "bert": {"cpu": ((1, 128), (1, 64)), "cuda": ((16, 512), (8, 512)), "tiny": ((1, 8), (1, 8))},
    "t5": {"cpu": ((1, 128), (1, 64)), "cuda": ((8, 512), (4, 512)), "tiny": ((1, 8), (1, 8))},
}
# Depth of the transformer models on the CPU (the "cpu" size class): the named model's width and
# everything else, fewer layers, so that the full suite (with cold and warm compiles of every case,
# where Inductor's cold compile of a 12-layer training step takes minutes) fits in well under an
# hour on a 2-core machine. The "cuda" size class has the full depth.
CPU_LAYERS = {"gpt2": 4, "bert": 4, "t5": 2, "vit_b_16": 4}


def _layers(model: str, size: str, full: int) -> int:
    return CPU_LAYERS[model] if size == "cpu" else full


# Batch of the vision models (3x224x224 images; "tiny": 3x32x32), inference and training step.
VISION_BATCH = {"cpu": (1, 2), "cuda": (64, 32), "tiny": (1, 2)}


def _text_size(model: str, size: str, train: bool) -> tuple[int, int]:
    return TEXT_SIZES[model][size][1 if train else 0]


# GPT-2 small at batch 1 x 32 tokens (gpt2_b1): a launch-bound inference call, where the host's
# time per kernel launch, not the GPU, sets the pace (what mode="reduce-overhead" is for).
SMALL_BATCH = {"cpu": (1, 32), "cuda": (1, 32), "tiny": (1, 8)}


def _gpt2(train: bool, lm_head: bool = False, sizes: dict | None = None):
    """GPT-2 small (GPT2Model), or with lm_head GPT2LMHeadModel returning the logits: its
    50257-wide vocabulary product is the unaligned GEMM that padding is for. sizes: batch x
    sequence per size class instead of TEXT_SIZES (the full depth on every device but "tiny")."""

    def build(device, size):
        _need("transformers")
        from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

        b, s = sizes[size] if sizes else _text_size("gpt2", size, train)
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        if not sizes:
            cfg.n_layer = _layers("gpt2", size, cfg.n_layer)
        if size == "tiny":
            cfg.n_layer, cfg.n_embd, cfg.n_head = 1, 64, 2
        model = FirstOutput((GPT2LMHeadModel if lm_head else GPT2Model)(cfg), use_cache=False)
        ids = torch.randint(0, cfg.vocab_size, (b, s), device=device)
        desc = f"batch {b}x{s}, {cfg.n_layer} layers" + (", LM head" if lm_head else "")
        return _finish_model(model, (ids,), desc, device, train)

    return build


def _bert(train: bool):
    def build(device, size):
        _need("transformers")
        from transformers import BertConfig, BertModel

        b, s = _text_size("bert", size, train)
        cfg = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        cfg.num_hidden_layers = _layers("bert", size, cfg.num_hidden_layers)
        if size == "tiny":
            cfg.num_hidden_layers, cfg.hidden_size = 1, 64
            cfg.num_attention_heads, cfg.intermediate_size = 2, 128
        model = FirstOutput(BertModel(cfg, add_pooling_layer=False))
        ids = torch.randint(0, cfg.vocab_size, (b, s), device=device)
        desc = f"batch {b}x{s}, {cfg.num_hidden_layers} layers"
        return _finish_model(model, (ids,), desc, device, train)

    return build


def _t5(train: bool):
    def build(device, size):
        _need("transformers")
        from transformers import T5Config, T5Model

        b, s = _text_size("t5", size, train)
        dims = {"d_model": 512, "d_kv": 64, "d_ff": 2048, "heads": 8}  # T5-small
        dims["layers"] = _layers("t5", size, 6)
        if size == "tiny":
            dims = {"d_model": 64, "d_kv": 32, "d_ff": 128, "layers": 1, "heads": 2}
        cfg = T5Config(
            vocab_size=32128,
            d_model=dims["d_model"],
            d_kv=dims["d_kv"],
            d_ff=dims["d_ff"],
            num_layers=dims["layers"],
            num_decoder_layers=dims["layers"],
            num_heads=dims["heads"],
            dropout_rate=0.0,
            use_cache=False,
        )
        model = FirstOutput(T5Model(cfg), ("input_ids", "decoder_input_ids"), use_cache=False)
        ids = torch.randint(0, cfg.vocab_size, (b, s), device=device)
        dec = torch.randint(0, cfg.vocab_size, (b, s), device=device)
        return _finish_model(
            model,
            (ids, dec),
            f"batch {b}x{s}, {dims['layers']}+{dims['layers']} layers",
            device,
            train,
        )

    return build


def _vision(name: str, train: bool):
    """ResNet-18/50, ViT-B/16, MobileNetV3-Large as defined in coil.bench.vision (torchvision's
    architectures and module names; see that module for why not torchvision itself)."""

    def build(device, size):
        from coil.bench import vision

        if size == "tiny" and name == "vit_b_16":  # one narrow layer on 32x32 images
            model = vision.vit_b_16(32, num_layers=1, num_heads=2, hidden_dim=64, mlp_dim=128)
        elif name == "vit_b_16":
            model = vision.vit_b_16(num_layers=_layers("vit_b_16", size, 12))
        else:
            model = vision.MODELS[name]()
        b = VISION_BATCH[size][1 if train else 0]
        hw = 32 if size == "tiny" else 224
        x = torch.randn(b, 3, hw, hw, device=device)
        if not train:
            x = x.to(_dtype(device))
        desc = f"batch {b}x3x{hw}x{hw}"
        if name == "vit_b_16":
            desc += f", {len(model.encoder.layers)} layers"
        return _finish_model(model, (x,), desc, device, train)

    return build


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------

MICRO = [
    Case("pointwise_chain", "micro", _pointwise, quick=True, compile_probe=True),
    Case("softmax", "micro", _row_op(softmax_last), quick=True),
    Case("log_softmax", "micro", _row_op(log_softmax_last), quick=True),
    Case("layer_norm", "micro", _layer_norm, quick=True),
    Case("rms_norm", "micro", _rms_norm, quick=True),
    Case("sum_rows", "micro", _reduce(sum_rows, 0), quick=True),
    Case("sum_cols", "micro", _reduce(sum_cols, 1), quick=True),
    Case("mean_var", "micro", _mean_var, quick=True),
    Case("transpose_add", "micro", _transpose_add, quick=True),
    Case("mm_bias_gelu", "micro", _mm_bias_gelu, quick=True),
    Case("mm_odd", "micro", _mm_odd),
    Case("rotary", "micro", _rotary),
    Case("attention", "micro", _attention(False), quick=True),
    Case("attention_train", "micro", _attention(True), quick=True),
]


def _model_pair(name, make, quick=False):
    """A model's inference case and its training-step case (NAME_train)."""
    return [
        Case(name, "model", make(False), quick=quick),
        Case(f"{name}_train", "model", make(True)),
    ]


MODELS = (
    _model_pair("gpt2", _gpt2, quick=True)
    + [Case("gpt2_lm", "model", _gpt2(False, lm_head=True))]
    + [Case("gpt2_b1", "model", _gpt2(False, sizes=SMALL_BATCH))]
    + _model_pair("bert", _bert)
    + _model_pair("t5_small", _t5)
    + _model_pair("resnet18", lambda t: _vision("resnet18", t), quick=True)
    + _model_pair("resnet50", lambda t: _vision("resnet50", t))
    + _model_pair("vit_b_16", lambda t: _vision("vit_b_16", t))
    + _model_pair("mobilenet_v3", lambda t: _vision("mobilenet_v3_large", t))
)

CASES: list[Case] = MICRO + MODELS
GROUPS = {"micro": [c.name for c in MICRO], "models": [c.name for c in MODELS]}


def find(name: str) -> Case:
    for case in CASES:
        if case.name == name:
            return case
    if name.startswith("perf_"):  # a program the performance fuzzer stored (perf_cases.py)
        from coil.bench import perf_cases

        found = perf_cases.find(name)
        if found is not None:
            return found
    raise KeyError(f"unknown case {name!r}; known: {', '.join(c.name for c in CASES)}, and "
                   f"perf_SEED for the performance fuzzer's stored programs")


def select(names: list[str] | None, quick: bool, group: str | None = None) -> list[Case]:
    """The cases named (in the registry's order, then the performance fuzzer's in the order
    named; "perf" names all of those), else the --quick set or all, within group."""
    if group == "perf" or names == ["perf"]:
        from coil.bench import perf_cases

        return perf_cases.cases()
    pool = [c for c in CASES if group in (None, "all") or c.name in GROUPS[group]]
    if names:
        found = {c.name: c for c in (find(n) for n in names)}
        registry = [c for c in CASES if c.name in found]
        return registry + [c for c in found.values() if c not in registry]
    return [c for c in pool if c.quick or not quick]


def cost(case: Case) -> float:
    """A rough relative cost of a case with its cold/warm compiles (for --shard): models cost
    several microbenchmarks, training steps more (Inductor compiles their backward too)."""
    if case.kind == "micro":
        return 2.0 if case.train else 1.0
    return 6.0 if case.train else 4.0


def shard(cases: list[Case], k: int, n: int) -> list[Case]:
    """The k-th of n parts of cases, balanced by cost: the costliest first, each to the part with
    the least so far; registry order within a part."""
    if not 0 <= k < n:
        raise ValueError(f"--shard {k}/{n}: need 0 <= K < N")
    loads, parts = [0.0] * n, [[] for _ in range(n)]
    for case in sorted(cases, key=lambda c: -cost(c)):  # stable: registry order among equals
        i = loads.index(min(loads))
        loads[i] += cost(case)
        parts[i].append(case.name)
    return [c for c in cases if c.name in parts[k]]
