"""The fuzzer's flex_attention programs (python -m coil.fuzz --flex): random score_mod and mask_mod
bodies, BlockMasks and shapes, compiled by coil and compared with eager's flex_attention.

Each seed draws a FlexProgram: shapes (batch 1-2, 1-4 query heads, fewer key/value heads under GQA,
query and key lengths of 1..200 that are odd, prime, equal or not, head dims 8..64), float32 or
bfloat16, query/key/value made contiguous or as transposed views of (batch, length, heads, dim)
tensors or as slices of one fused (B, S, 3, H, D) projection; a score_mod whose body is a few steps
drawn from what models write (relative positions, ALiBi slopes, soft-capping through tanh, bias
tables (some transposed), per-head scales and a temperature captured and indexed by
b/h/q_idx/kv_idx, bucketed relative biases, where() over comparisons, negative positions into a
table); and a mask (causal, bottom-right causal, sliding windows, document ids, prefix-LM, per-
batch key lengths, a captured table, rows or heads masked whole; combined with &, |, ~ or
and_masks/or_masks) applied by a BlockMask of a random BLOCK_SIZE built outside the compiled
function, passed to it, or built inside it, or applied by the score_mod itself as where(mask, x,
-inf). Sometimes also return_lse, a scale of its own, an op on an input before the call and on the
output after it, a second call taking the first one's output as its query.

A program is Python source (FlexProgram.source): exec'd, its functions are real functions that
Dynamo traces, with the captured tensors as globals; the same source is what a failure saves
(program.py under --out, runnable next to the tensors.pt saved with it).

flex_inline.py writes the forward into coil's graph as the math form's ATen ops, so coil's values
must be eager's up to the order of sums; outputs are compared with eager's, and where they
differ by more than the tolerance, coil's must be about as close as eager's to the program run
in float64. Rows every position of which is masked must be what eager gives them exactly: zeros
(and -inf log-sum-exp). No graph may run eagerly, and the forward must be inlined. With train,
the gradients of query, key and value (and of the captured tensors, which require grad in a
third of the programs: learned biases) are compared too; flex_attention_backward runs as an
opaque eager call inside coil's backward graph. torch refuses flex's backward on the CPU, for
want of a fused CPU kernel, so the check is lifted while the fuzzer runs (_cpu_backward). With
dynamic, the program is compiled with symbolic sizes and run at a second pair of lengths.

Each FlexProgram field is a plain value, so a failing program is shrunk by editing them
(minimize: fewer steps, smaller shapes, no options) while it fails the same way.
"""
from __future__ import annotations

import contextlib
import dataclasses
import linecache
import math
import os
import random
import re
import tempfile
import traceback
import warnings

import torch

DIMS = (8, 16, 32, 64)
BLOCK_SIZES = (16, 32, 64, 128)
PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 37, 61, 67, 97, 127, 131, 163, 199)


@dataclasses.dataclass
class FlexProgram:
    seed: int
    batch: int
    heads: int
    kv_heads: int  # fewer than heads: GQA (enable_gqa=True)
    q_len: int
    kv_len: int
    head_dim: int
    v_dim: int
    dtype: torch.dtype
    # "bhsd" (contiguous), "bshd" (transposed views of (B, S, H, D) tensors) or "fused" (each
    # of q, k, v one of three slices of a (B, S, 3, H, D) tensor, as a fused projection makes)
    layout: str
    score_steps: list  # statements over x, each a source line (score_mod absent when empty)
    mask: tuple | None  # ("atom", source) / ("and" | "or", a, b) / ("not", a)
    mask_use: str  # "global", "argument", "inside": a BlockMask; "score_mod": where(mask, x, -inf)
    block_size: int | tuple
    mask_bh: bool  # the BlockMask made per batch and head (B, H), or broadcast (None, None)
    combinators: bool  # a top-level "and"/"or" mask written with and_masks/or_masks
    return_lse: bool
    scale: float | None
    pre: str  # a statement over q, k, v before the call ("" for none)
    post: str  # a statement over out after it
    q_gain: float  # the query's values multiplied by this (large scores: saturated softmaxes)
    # With train, the captured float tensors require grad (learned biases, slopes, scales):
    # their gradients come back from flex_attention_backward in a tuple of their own.
    learned: bool = False
    twice: bool = False  # the output is the query of a second call with the same arguments

    def source(self) -> str:
        """The program as Python: globals B, H, Q, KV (the lengths drawn; the program runs at
        other lengths too, as --dynamic does), torch, flex_attention, create_block_mask,
        and_masks, or_masks, AuxRequest (where torch has it) and the captured tensors."""
        lines = []
        if self.mask is not None:
            lines += _mask_source(self.mask, self.combinators)
        if self.score_steps or (self.mask is not None and self.mask_use == "score_mod"):
            lines.append("def score_mod(score, b, h, q_idx, kv_idx):")
            lines.append("    x = score")
            lines += [f"    {s}" for s in self.score_steps]
            if self.mask is not None and self.mask_use == "score_mod":
                lines.append('    x = torch.where(mask_mod(b, h, q_idx, kv_idx), x, -float("inf"))')
            lines.append("    return x")
        uses_block_mask = self.mask is not None and self.mask_use != "score_mod"
        if uses_block_mask:
            bh = "B, H" if self.mask_bh else "None, None"
            lines += ["def make_block_mask(q_len, kv_len):",
                      (f"    return create_block_mask(mask_mod, {bh}, q_len, kv_len, "
                       f"device=\"cpu\", BLOCK_SIZE={self.block_size})")]
        if uses_block_mask and self.mask_use in ("global", "argument"):
            lines.append("block_mask = make_block_mask(Q, KV)")
        params = "q, k, v, block_mask" if uses_block_mask and self.mask_use == "argument" \
            else "q, k, v"
        lines.append(f"def fn({params}):")
        if uses_block_mask and self.mask_use == "inside":
            lines.append("    block_mask = make_block_mask(q.shape[-2], k.shape[-2])")
        if self.pre:
            lines.append(f"    {self.pre}")
        call = []
        if self.score_steps or (self.mask is not None and self.mask_use == "score_mod"):
            call.append("score_mod=score_mod")
        if uses_block_mask:
            call.append("block_mask=block_mask")
        if self.scale is not None:
            call.append(f"scale={self.scale!r}")
        if self.kv_heads != self.heads:
            call.append("enable_gqa=True")
        again = ", ".join(["out, k, v"] + call)
        if self.return_lse:
            call.append("return_aux=AuxRequest(lse=True)" if _has_aux() else "return_lse=True")
        result = "out, aux" if self.return_lse and _has_aux() else \
            "out, lse" if self.return_lse else "out"
        lines.append(f"    {result} = flex_attention({', '.join(['q, k, v'] + call)})")
        if self.return_lse and _has_aux():
            lines.append("    lse = aux.lse")
        if self.twice:
            lines.append(f"    out = flex_attention({again})")
        if self.post:
            lines.append(f"    {self.post}")
        lines.append("    return (out, lse)" if self.return_lse else "    return (out,)")
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        head = (f"flex program (seed {self.seed}): q ({self.batch}, {self.heads}, {self.q_len}, "
                f"{self.head_dim}), k/v ({self.batch}, {self.kv_heads}, {self.kv_len}, "
                f"{self.head_dim}/{self.v_dim}) {dtype} {self.layout}, q x {self.q_gain}; "
                f"captured{' (learned with --train)' if self.learned else ''}: "
                f"{', '.join(_captured_shapes(self)) or 'none'}")
        return head + "\n" + _indent(self.source())


def _has_aux() -> bool:
    from torch.nn.attention import flex_attention as fa

    return hasattr(fa, "AuxRequest")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.rstrip().split("\n"))


def _mask_expr(tree) -> str:
    kind = tree[0]
    if kind == "atom":
        return f"({tree[1]})"
    if kind == "not":
        return f"~{_mask_expr(tree[1])}"
    op = "&" if kind == "and" else "|"
    return f"({_mask_expr(tree[1])} {op} {_mask_expr(tree[2])})"


def _mask_source(tree, combinators: bool) -> list:
    if combinators and tree[0] in ("and", "or"):
        lines = []
        for i, part in enumerate(tree[1:]):
            lines += [f"def mask_{i}(b, h, q_idx, kv_idx):", f"    return {_mask_expr(part)}"]
        lines.append(f"mask_mod = {tree[0]}_masks(mask_0, mask_1)")
        return lines
    return ["def mask_mod(b, h, q_idx, kv_idx):", f"    return {_mask_expr(tree)}"]


# ------------------------------------------------------------------------------------------------
# drawing a program
# ------------------------------------------------------------------------------------------------


def _length(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.15:
        return rng.randint(1, 8)
    if r < 0.4:
        return rng.choice(PRIMES)
    if r < 0.55:
        return rng.choice((16, 32, 64, 96, 128))
    return rng.randint(1, 200)


def _score_step(rng: random.Random) -> str:
    c = rng.choice((0.05, -0.1, 0.02, 0.25))
    kind = rng.choice(("relpos", "alibi", "alibi_const", "softcap", "bias", "bias_bh",
                       "rel_bias", "head_scale", "temperature", "where", "const", "bucket",
                       "self", "log", "wrap"))
    if kind == "relpos":
        return f"x = x + {c} * (q_idx - kv_idx)"
    if kind == "alibi":
        return "x = x - slopes[h] * (q_idx - kv_idx).abs()"
    if kind == "alibi_const":
        return f"x = x - (h + 1) * {abs(c)} * (kv_idx - q_idx).abs()"
    if kind == "softcap":
        cap = rng.choice((5.0, 20.0, 50.0))
        return f"x = {cap} * torch.tanh(x / {cap})"
    if kind == "bias":
        return "x = x + bias[q_idx, kv_idx]"
    if kind == "bias_bh":
        return "x = x + bias_bh[b, h, q_idx, kv_idx]"
    if kind == "rel_bias":
        return "x = x + rel_bias[h, q_idx - kv_idx + (KV_MAX - 1)]"
    if kind == "head_scale":
        return "x = x * head_scale[h]"
    if kind == "wrap":  # (negative positions index from the end, as in Python)
        return "x = x + wrap_bias[h, q_idx - kv_idx]"
    if kind == "temperature":  # (a captured tensor of no dims)
        return "x = x / temperature"
    if kind == "const":
        return f"x = x * {rng.choice((0.5, 1.5, 2.0))} + {c}"
    if kind == "bucket":
        return "x = x + buckets[torch.clamp((q_idx - kv_idx).abs() // 8, max=7)]"
    if kind == "self":
        return rng.choice(("x = x * torch.sigmoid(x)", "x = x + 0.1 * x * x",
                           "x = torch.where(x > 1.0, x, x * 0.5)"))
    if kind == "log":
        return f"x = x - {abs(c)} * torch.log1p((q_idx - kv_idx).abs().to(torch.float32))"
    which = rng.choice(("causal", "mod", "batch", "head"))
    if which == "causal":
        return f"x = torch.where(q_idx >= kv_idx, x, x - {abs(c) * 10})"
    if which == "mod":
        return f"x = torch.where(kv_idx % {rng.choice((2, 3, 7))} == 0, x * 0.5, x)"
    if which == "batch":
        return f"x = torch.where(b == 0, x, x + {c})"
    return f"x = torch.where(h < kv_idx % 4, x + {c}, x)"


def _mask_atom(rng: random.Random, q_len: int, kv_len: int) -> tuple:
    kind = rng.choice(("causal", "causal", "bottom_right", "window", "window", "doc", "prefix",
                       "table", "rows", "heads", "batch", "stride", "padding"))
    if kind == "causal":
        return ("atom", "q_idx >= kv_idx")
    if kind == "bottom_right":  # (rows before KV - Q masked whole when KV < Q)
        return ("atom", "q_idx + (KV - Q) >= kv_idx")
    if kind == "window":
        w = rng.randint(0, 64)
        return ("atom", rng.choice((f"(q_idx - kv_idx).abs() <= {w}", f"q_idx - kv_idx < {w}")))
    if kind == "doc":
        return ("atom", "doc[q_idx] == doc[kv_idx]")
    if kind == "prefix":
        return ("atom", f"kv_idx < {rng.randint(1, kv_len)}")
    if kind == "table":
        return ("atom", "keep[q_idx, kv_idx]")
    if kind == "rows":  # rows from some point on masked whole
        return ("atom", f"q_idx < {rng.randint(0, q_len)}")
    if kind == "heads":
        return ("atom", rng.choice(("h % 2 == 0", "h >= 1")))
    if kind == "batch":
        return ("atom", "b == 0")
    if kind == "padding":  # each batch's keys from its length on are padding
        return ("atom", "kv_idx < kv_lens[b]")
    return ("atom", f"kv_idx % {rng.choice((2, 3, 5))} == 0")


def _mask(rng: random.Random, q_len: int, kv_len: int, depth: int = 0) -> tuple:
    r = rng.random()
    if depth >= 2 or r < 0.45:
        return _mask_atom(rng, q_len, kv_len)
    if r < 0.52:
        return ("not", _mask_atom(rng, q_len, kv_len))
    return (rng.choice(("and", "and", "or")), _mask(rng, q_len, kv_len, depth + 1),
            _mask(rng, q_len, kv_len, depth + 1))


def generate(seed: int) -> tuple[FlexProgram, list]:
    """The program of `seed` and its query, key and value."""
    rng = random.Random(seed)
    heads = rng.choice((1, 2, 3, 4))
    kv_heads = heads
    if heads > 1 and rng.random() < 0.3:
        kv_heads = rng.choice([d for d in range(1, heads) if heads % d == 0])
    q_len = _length(rng)
    kv_len = q_len if rng.random() < 0.4 else _length(rng)
    head_dim = rng.choice(DIMS)
    mask = _mask(rng, q_len, kv_len) if rng.random() < 0.65 else None
    # A BlockMask made for b = h = 0 only where the mask reads b or h would skip blocks other
    # batches and heads need (the math form coil inlines ignores the blocks, fused kernels not).
    mask_reads_bh = mask is not None and re.search(r"\b[bh]\b", _mask_expr(mask)) is not None
    block_size = rng.choice(BLOCK_SIZES)
    if rng.random() < 0.2:
        block_size = (block_size, rng.choice(BLOCK_SIZES))
    program = FlexProgram(
        seed=seed,
        batch=rng.choice((1, 1, 2)),
        heads=heads,
        kv_heads=kv_heads,
        q_len=q_len,
        kv_len=kv_len,
        head_dim=head_dim,
        v_dim=rng.choice(DIMS) if rng.random() < 0.2 else head_dim,
        dtype=torch.bfloat16 if rng.random() < 0.2 else torch.float32,
        layout=rng.choice(("bshd", "fused")) if rng.random() < 0.4 else "bhsd",
        score_steps=[_score_step(rng) for _ in range(rng.choice((0, 1, 1, 2, 3, 4)))],
        mask=mask,
        mask_use=rng.choice(("global", "global", "argument", "inside", "score_mod")),
        block_size=block_size,
        mask_bh=rng.random() < 0.5 or mask_reads_bh,
        combinators=rng.random() < 0.3,
        return_lse=rng.random() < 0.35,
        scale=rng.choice((0.1, 0.5, 1.0, round(2 / math.sqrt(head_dim), 4)))
        if rng.random() < 0.3 else None,
        pre=rng.choice(("q = q * 0.5", "k = k.sin()", "v = v.relu() - 0.5",
                        "q, k = q.cos(), k + 1"))
        if rng.random() < 0.3 else "",
        post=rng.choice(("out = out * 2 + 1", "out = out.relu()", "out = out.sum(-1)",
                         "out = out.transpose(1, 2)"))
        if rng.random() < 0.3 else "",
        q_gain=rng.choice((1.0, 1.0, 1.0, 4.0)),
        learned=rng.random() < 0.3,
    )
    program.twice = program.v_dim == program.head_dim and rng.random() < 0.15
    return program, make_inputs(program)


def second_lengths(p: FlexProgram) -> tuple[int, int]:
    """The query and key lengths --dynamic runs the program at after the drawn ones (lengths of 1
    stay: Dynamo specializes them); the captured tables cover both (Q_MAX, KV_MAX)."""
    return (p.q_len + 3 if p.q_len > 1 else 1, p.kv_len + 5 if p.kv_len > 1 else 1)


def make_inputs(program: FlexProgram, lengths: tuple[int, int] | None = None) -> list:
    """Query, key and value: standard normal values (the query's times q_gain), a function of
    the program's seed and shapes; lengths: (query, key) lengths other than the program's."""
    gen = torch.Generator().manual_seed(program.seed)
    p = program
    if lengths is not None:
        p = dataclasses.replace(p, q_len=lengths[0], kv_len=lengths[1])
    shapes = [(p.batch, p.heads, p.q_len, p.head_dim), (p.batch, p.kv_heads, p.kv_len, p.head_dim),
              (p.batch, p.kv_heads, p.kv_len, p.v_dim)]
    out = []
    for k, (b, h, s, d) in enumerate(shapes):
        gain = p.q_gain if k == 0 else 1.0
        if p.layout == "bshd":
            t = (torch.randn((b, s, h, d), generator=gen) * gain).to(p.dtype).transpose(1, 2)
        elif p.layout == "fused":
            t = (torch.randn((b, s, 3, h, d), generator=gen) * gain).to(p.dtype)
            t = t[:, :, k].transpose(1, 2)
        else:
            t = (torch.randn((b, h, s, d), generator=gen) * gain).to(p.dtype)
        out.append(t)
    return out


def _captured_shapes(p: FlexProgram) -> list:
    return [f"{name}{tuple(t.shape)}" for name, t in _captured(p).items() if _reads(p, name)]


def _reads(p: FlexProgram, name: str) -> bool:
    return re.search(rf"\b{name}\b", p.source()) is not None


def _captured(p: FlexProgram) -> dict:
    """The tensors a program's functions may read, by name (a function of seed and shapes; the
    bias tables in the program's dtype or float32), indexed by positions up to second_lengths."""
    gen = torch.Generator().manual_seed(p.seed + 1)
    table_dtype = p.dtype if p.seed % 2 else torch.float32
    q_max, kv_max = second_lengths(p)
    n = max(q_max, kv_max)
    doc = torch.sort(torch.randint(0, max(1, n // 16) + 1, (n,), generator=gen)).values
    return {
        "slopes": torch.rand(p.heads, generator=gen) * 0.25 + 0.01,
        # (a third of the programs index a transposed table)
        "bias": (torch.randn(q_max, kv_max, generator=gen) * 0.5).to(table_dtype)
        if p.seed % 3 else (torch.randn(kv_max, q_max, generator=gen) * 0.5).to(table_dtype).t(),
        "bias_bh": torch.randn(p.batch, p.heads, q_max, kv_max, generator=gen) * 0.5,
        "rel_bias": torch.randn(p.heads, q_max + kv_max - 1, generator=gen) * 0.5,
        "head_scale": torch.rand(p.heads, generator=gen) + 0.5,
        "buckets": torch.randn(8, generator=gen).to(table_dtype),
        "doc": doc,
        "keep": torch.rand(q_max, kv_max, generator=gen) < 0.7,
        "temperature": torch.rand((), generator=gen) + 0.5,
        "kv_lens": torch.randint(0, p.kv_len + 1, (p.batch,), generator=gen),
        "wrap_bias": torch.randn(p.heads, n, generator=gen),
    }


@dataclasses.dataclass
class Built:
    """A program made into a function: fn(q, k, v, *extra)."""

    fn: object
    extra: tuple  # the arguments after q, k, v (the BlockMask, where it is passed)
    learned: dict  # the captured tensors that require grad, by name (FlexProgram.learned)
    namespace: dict  # the program's globals

    def extra_for(self, q_len: int, kv_len: int) -> tuple:
        """The arguments after q, k, v at other lengths (a BlockMask made for them)."""
        if not self.extra:
            return ()
        return (self.namespace["make_block_mask"](q_len, kv_len),)


def build(p: FlexProgram, float64: bool = False, train: bool = False) -> Built:
    """The program's source exec'd with its globals. float64: the captured float tensors in
    float64 (the reference). train: those the program reads require grad if p.learned."""
    from torch.nn.attention import flex_attention as fa

    captured = _captured(p)
    if float64:
        captured = {k: t.double() if t.is_floating_point() else t for k, t in captured.items()}
    # (Not a tensor of no dims: torch's flex_attention backward cannot return its gradient, in
    # eager too: "vmap: can not return a BatchedTensor when out_dim is None", seed 613.)
    learned = {k: t.requires_grad_() for k, t in captured.items()
               if train and p.learned and t.is_floating_point() and t.dim() and _reads(p, k)}
    namespace = {
        "torch": torch, "flex_attention": fa.flex_attention,
        "create_block_mask": fa.create_block_mask, "and_masks": fa.and_masks,
        "or_masks": fa.or_masks, "AuxRequest": getattr(fa, "AuxRequest", None),
        "B": p.batch, "H": p.heads, "Q": p.q_len, "KV": p.kv_len,
        "KV_MAX": second_lengths(p)[1], **captured,
    }
    source = p.source()
    filename = f"<flex program {p.seed}>"
    # (tracebacks and Dynamo's messages show the program's lines)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102
    passed = p.mask is not None and p.mask_use == "argument"
    return Built(namespace["fn"], (namespace["block_mask"],) if passed else (), learned,
                 namespace)


# ------------------------------------------------------------------------------------------------
# checking a program against eager
# ------------------------------------------------------------------------------------------------


class WrongValues(AssertionError):
    """coil's outputs or gradients are not eager's (nor about as close to float64)."""


class MaskedRows(AssertionError):
    """A row with every position masked is not eager's exact zeros / -inf log-sum-exp."""


class GraphRanEagerly(AssertionError):
    """A graph coil was given ran eagerly (coil.compiled_graphs(): eager_fallback)."""


class NotInlined(AssertionError):
    """flex_attention's forward stayed an opaque eager call (flex_inline.py could not trace it)."""


@contextlib.contextmanager
def _cpu_backward(on: bool):
    """flex_attention refuses inputs that require grad on the CPU (its fused kernels have no
    backward there); the math form's backward, which eager runs and coil's backward graph calls,
    works on any device. While `on`, that check lets CPU tensors through."""
    from torch.nn.attention import flex_attention as fa

    original = getattr(fa, "_validate_device", None)
    if not on or original is None:
        yield
        return

    def validate(query, key, value):
        if query.device.type != "cpu":
            original(query, key, value)

    fa._validate_device = validate
    try:
        yield
    finally:
        fa._validate_device = original


def _run(fn, built: Built, inputs: list, extra: tuple, train: bool,
         seed: int) -> tuple[list, list]:
    """(the outputs of fn (built.fn or its compiled form), and with train the gradients of q, k,
    v and the learned tensors of sum(output * w) for fixed random weights w; the log-sum-exp's
    -inf of rows masked whole count as 0)."""
    xs = [_copy(t).requires_grad_(train) for t in inputs]
    for t in built.learned.values():
        t.grad = None
    outs = fn(*xs, *extra)
    grads = []
    if train:
        gen = torch.Generator().manual_seed(seed)
        loss = 0
        for o in outs:
            w = torch.randn(o.shape, generator=gen, dtype=torch.float64)
            loss = loss + (torch.where(o.isfinite(), o, 0).double() * w).sum()
        loss.backward()
        grads = [x.grad for x in xs] + [t.grad for t in built.learned.values()]
    return [o.detach() for o in outs], grads


def _copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with t's strides, even where t has gaps (clone() makes such a tensor contiguous)."""
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    return out.copy_(t.detach())


def _masked_rows(p: FlexProgram, inputs: list) -> torch.Tensor:
    """(batch, heads, query length): the rows whose every position is masked (eager's -inf
    log-sum-exp of the program's first call)."""
    built = build(dataclasses.replace(p, return_lse=True, post="", twice=False))
    extra = built.extra_for(inputs[0].shape[-2], inputs[1].shape[-2])
    with torch.no_grad():
        return built.fn(*inputs, *extra)[1] == -math.inf


def _tolerance(dtype: torch.dtype, grad: bool) -> dict:
    if dtype == torch.bfloat16:
        return {"rtol": 4e-2 if grad else 2e-2, "atol": 4e-2 if grad else 2e-2}
    return {"rtol": 1e-3, "atol": 1e-4} if grad else {"rtol": 1e-4, "atol": 1e-5}


def _closer_than_eager(a: torch.Tensor, e: torch.Tensor, r: torch.Tensor, slack: float) -> bool:
    """coil's value at most about as far from float64's as eager's is (coil sums in another
    order and may round the probabilities otherwise); a NaN eager does not have never is."""
    if bool((a.isnan() & ~e.isnan()).any()):
        return False
    finite = a.isfinite() & e.isfinite() & r.isfinite()
    if not torch.equal(a.isfinite(), e.isfinite()):
        return False
    r = r.double()
    err = (a.double() - r).abs()[finite].max() if bool(finite.any()) else 0.0
    eager_err = (e.double() - r).abs()[finite].max() if bool(finite.any()) else 0.0
    scale = float(r.abs()[finite].max()) if bool(finite.any()) else 0.0
    return float(err) <= 2 * float(eager_err) + slack * max(1.0, scale)


def _compare(p: FlexProgram, names: list, actual: list, expected: list, reference, grad: bool):
    """Each of coil's tensors against eager's: dtype, shape and strides the same; values within
    the tolerance, or about as close as eager's to float64 (reference(): the outputs and the
    gradients so computed; grad: these are gradients)."""
    for name, a, e in zip(names, actual, expected):
        if a.dtype != e.dtype or a.shape != e.shape:
            raise WrongValues(f"{name}: {a.dtype}{tuple(a.shape)} vs eager's "
                              f"{e.dtype}{tuple(e.shape)}")
        if a.numel() and any(x != y for x, y, n in zip(a.stride(), e.stride(), e.shape) if n > 1):
            raise WrongValues(f"{name}: strides {a.stride()} vs eager's {e.stride()}")
    for k, (name, a, e) in enumerate(zip(names, actual, expected)):
        try:
            torch.testing.assert_close(a, e, equal_nan=True, **_tolerance(p.dtype, grad))
        except AssertionError as err:
            slack = 2e-2 if p.dtype == torch.bfloat16 else 1e-4
            if not _closer_than_eager(a, e, reference()[grad][k], slack):
                raise WrongValues(f"{name}: {err}") from None


def _check_masked_rows(p: FlexProgram, masked: torch.Tensor, actual: list, expected: list):
    if not bool(masked.any()) or [a.shape for a in actual] != [e.shape for e in expected]:
        return  # (_compare tells shapes apart)
    if not p.post:
        out = actual[0]
        wrong = masked & (out != 0).any(-1)
        if bool(wrong.any()):
            at = tuple(int(i) for i in wrong.nonzero()[0])
            raise MaskedRows(f"{int(wrong.sum())} rows masked whole are not zeros (first at "
                             f"{at}: {out[at][:4].tolist()}...)")
    if p.return_lse:
        lse = actual[1]
        wrong = masked != (lse == -math.inf)
        if bool(wrong.any()):
            at = tuple(int(i) for i in wrong.nonzero()[0])
            raise MaskedRows(f"log-sum-exp: {int(wrong.sum())} rows -inf in one of coil's and "
                             f"eager's only (first at {at}: coil {float(lse[at])})")


def _check_records(records) -> None:
    if not any(r.kernel_names for r in records if r.kind in ("inference", "forward")):
        raise GraphRanEagerly(f"no graph of coil's computes the forward: {records}")
    for r in records:
        if r.eager_fallback:
            raise GraphRanEagerly(f"graph {r.graph_id} ({r.kind}) ran eagerly: {r.eager_reason}")
        opaque = [op for op in r.fallback_ops if op.startswith("opaque.flex_attention_")
                  and not op.startswith("opaque.flex_attention_backward")]
        if opaque:
            raise NotInlined(f"graph {r.graph_id} ({r.kind}) calls {opaque[0]} eagerly")


def _float64_reference(p: FlexProgram, inputs: list, train: bool) -> tuple[list, list]:
    built = build(p, float64=True, train=train)
    extra = built.extra_for(inputs[0].shape[-2], inputs[1].shape[-2])
    return _run(built.fn, built, [t.double() for t in inputs], extra, train, p.seed)


def check_program(p: FlexProgram, out_dir: str | None = None, train: bool = False,
                  dynamic: bool = False, options: dict | None = None):
    """Compiles the program with coil (fullgraph) and compares with eager; a Result (fuzz.py).
    dynamic: run at second_lengths too (a BlockMask made outside the compiled function is
    passed to it, one per length), compiled with symbolic sizes from the start for even seeds
    and for odd ones as torch.compile does by default (dynamic=None: the second length
    recompiles the graph with symbolic sizes). options: coil options to
    compile under (cpp_vectorize="on", cpp_wrapper=True). A program Dynamo cannot capture whole
    passes as skipped."""
    import coil
    from coil.fuzz import Result

    if dynamic and p.mask is not None and p.mask_use == "global":
        p = dataclasses.replace(p, mask_use="argument")
    lengths = [(p.q_len, p.kv_len)] + ([second_lengths(p)] if dynamic else [])
    inputs = make_inputs(p)
    folder = tempfile.mkdtemp(prefix=f"flex{p.seed}_", dir=out_dir) if out_dir else None
    try:
        with _cpu_backward(train), warnings.catch_warnings():
            # (eager flex_attention on the CPU warns that it is unfused; return_lse is deprecated)
            warnings.simplefilter("ignore")
            built = build(p, train=train)
            torch._dynamo.reset()
            coil.reset()
            how = (True if p.seed % 2 == 0 else None) if dynamic else False
            compiled = torch.compile(built.fn, backend="coil", fullgraph=True, dynamic=how)
            for q_len, kv_len in lengths:
                inputs = make_inputs(p, (q_len, kv_len))
                extra = built.extra_for(q_len, kv_len)
                expected, expected_grads = _run(built.fn, built, inputs, extra, train, p.seed)
                masked = _masked_rows(p, inputs)
                with coil.config.patch(debug_dir=folder, **(options or {})):
                    warnings.simplefilter("error", coil.CoilWarning)
                    try:
                        actual, grads = _run(compiled, built, inputs, extra, train, p.seed)
                    except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as e:
                        _cleanup(folder)
                        first = str(e).strip().split("\n", 1)[0]
                        return Result(p.seed, True, f"skipped: Dynamo: {first}", None)
                at = f" (lengths {q_len}, {kv_len})" if dynamic else ""
                reference = _lazy(lambda inputs=inputs: _float64_reference(p, inputs, train))
                names = [f"out{at}", f"lse{at}"][:len(actual)]
                _check_masked_rows(p, masked, actual, expected)
                _compare(p, names, actual, expected, reference, grad=False)
                if train:
                    names = [f"grad {n}{at}" for n in ["q", "k", "v", *built.learned]]
                    _compare(p, names, grads, expected_grads, reference, grad=True)
            _check_records(coil.compiled_graphs())
    except Exception as e:  # noqa: BLE001 - every failure is reported with its seed
        msg = f"{type(e).__name__}: {e}\n{p.describe()}"
        if not isinstance(e, AssertionError):
            msg += "\n" + traceback.format_exc(limit=-4)
        if folder:
            _save(p, inputs, folder, msg, train, dynamic)
        return Result(p.seed, False, msg, folder)
    _cleanup(folder)
    return Result(p.seed, True)


def check_flex(seed: int, out_dir: str | None = None, train: bool = False,
               dynamic: bool = False, options: dict | None = None):
    """python -m coil.fuzz --flex: the program of `seed`, checked (check_program)."""
    return check_program(generate(seed)[0], out_dir, train, dynamic, options)


def _lazy(make):
    value = []

    def get():
        if not value:
            value.append(make())
        return value[0]

    return get


def _cleanup(folder: str | None) -> None:
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _save(p: FlexProgram, inputs: list, folder: str, message: str, train: bool,
          dynamic: bool) -> None:
    """program.py (the program, runnable: eager against coil) and tensors.pt (its inputs and
    captured tensors) next to coil's debug artifacts."""
    torch.save({"inputs": inputs, "captured": _captured(p)}, os.path.join(folder, "tensors.pt"))
    why = "\n".join("# " + line for line in message.split("\n")[:12])
    argument = p.mask is not None and p.mask_use == "argument"
    text = f'''# flex fuzzer seed {p.seed}: python -m coil.fuzz --flex --seed {p.seed} --count 1\
{" --train" if train else ""}{" --dynamic" if dynamic else ""}
{why}
import os

import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention, \\
    or_masks

import coil  # noqa: F401 (the "coil" backend)

try:
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:
    AuxRequest = None
saved = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors.pt"))
globals().update(saved["captured"])
B, H, Q, KV, KV_MAX = {p.batch}, {p.heads}, {p.q_len}, {p.kv_len}, {second_lengths(p)[1]}

{p.source()}
args = [*saved["inputs"]{", block_mask" if argument else ""}]
expected = fn(*args)
# (the forward at the drawn lengths; the command above also replays gradients and lengths)
actual = torch.compile(fn, backend="coil", fullgraph=True, dynamic={dynamic})(*args)
for a, e in zip(actual, expected):
    print("max difference", (a.double() - e.double()).abs().nan_to_num(0.0).max().item())
'''
    with open(os.path.join(folder, "program.py"), "w") as f:
        f.write(text)


# ------------------------------------------------------------------------------------------------
# shrinking a failing program
# ------------------------------------------------------------------------------------------------


def _smaller(p: FlexProgram):
    """Programs one edit simpler than p, simplest edits first."""
    r = dataclasses.replace
    for i in range(len(p.score_steps)):
        yield r(p, score_steps=p.score_steps[:i] + p.score_steps[i + 1:])
    if p.mask is not None:
        yield r(p, mask=None)
        if p.mask[0] != "atom":
            for part in p.mask[1:]:
                yield r(p, mask=part)
    yield from (r(p, **{f: v}) for f, v in (
        ("return_lse", False), ("scale", None), ("pre", ""), ("post", ""), ("twice", False),
        ("q_gain", 1.0), ("learned", False),
        ("layout", "bhsd"), ("dtype", torch.float32), ("combinators", False),
        ("mask_use", "global"), ("mask_bh", False), ("v_dim", p.head_dim), ("batch", 1),
        ("block_size", 128)) if getattr(p, f) != v)
    if p.kv_heads != p.heads:
        yield r(p, kv_heads=p.heads)
    if p.heads > 1:
        yield r(p, heads=1, kv_heads=1)
    if p.head_dim > 8:
        yield r(p, head_dim=8, v_dim=8 if p.v_dim == p.head_dim else p.v_dim)
    for n in _shorter(p.q_len):
        yield r(p, q_len=n)
    for n in _shorter(p.kv_len):
        yield r(p, kv_len=n)


def _shorter(n: int) -> list:
    return sorted({1, n // 4, n // 2, 3 * n // 4, n - 1} - {0, n})


def minimize(p: FlexProgram, train: bool = False, dynamic: bool = False,
             options: dict | None = None, budget: int = 60, log=print) -> FlexProgram:
    """The smallest program found (one edit at a time, at most `budget` checks) that still
    fails as p does (the same exception class)."""
    first = check_program(p, None, train, dynamic, options)
    if first.ok:
        return p
    kind = first.message.split(":", 1)[0]
    checks = 0
    improved = True
    while improved and checks < budget:
        improved = False
        for q in _smaller(p):
            checks += 1
            result = check_program(q, None, train, dynamic, options)
            if not result.ok and result.message.split(":", 1)[0] == kind:
                log(f"  still fails: {q.describe().split(chr(10), 1)[0]}")
                p, improved = q, True
                break
            if checks >= budget:
                break
    return p
