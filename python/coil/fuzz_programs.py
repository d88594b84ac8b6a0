"""The fuzzer's programs (python -m coil.fuzz): random steps of pointwise, reduction, view,
memory-format and library ops over float, integer and bool tensors, each program a function of
its seed, with which steps eager and coil must compute bit for bit. Checking them against eager
is in fuzz.py."""

from __future__ import annotations

import dataclasses
import random
import warnings

import torch

SIZES = (1, 2, 3, 5, 8, 13)
FLOAT_DTYPES = (torch.float32, torch.float32, torch.float64, torch.bfloat16)
INT_DTYPES = (torch.int64, torch.int64, torch.int32, torch.uint8)
ZERO_DIM_PROBABILITY = 0.12  # programs whose shape has one size-0 dim
INT_LIMIT = 1 << 31  # integer steps whose values get larger are dropped (no overflow)


@dataclasses.dataclass
class Step:
    op: str
    args: tuple  # indices of earlier values
    params: dict


@dataclasses.dataclass
class Program:
    seed: int
    steps: list
    outputs: list

    n_inputs: int = 1

    def describe(self) -> str:
        def name(k):
            return f"in{k}" if k < self.n_inputs else f"v{k - self.n_inputs}"

        lines = [f"program (seed {self.seed}):"]
        def show(params):
            return {
                k: f"tensor{tuple(v.shape)}" if isinstance(v, torch.Tensor) else v
                for k, v in params.items()
            }

        for i, s in enumerate(self.steps):
            lines.append(
                f"  v{i} = {s.op}({', '.join(name(a) for a in s.args)}; {show(s.params)})"
            )
        lines.append(f"  return {', '.join(name(o) for o in self.outputs)}")
        return "\n".join(lines)


def _make_input(rng: random.Random, shape, dtype, layout: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    if layout == "channels_last" and len(shape) == 4:
        base = _make_input(rng, (shape[0], shape[2], shape[3], shape[1]), dtype, "contiguous")
        return base.permute(0, 3, 1, 2)
    if layout == "transposed" and len(shape) >= 2:
        base = _make_input(rng, shape[:-2] + (shape[-1], shape[-2]), dtype, "contiguous")
        return base.transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        base = _make_input(rng, shape[:-1] + (shape[-1] * 2,), dtype, "contiguous")
        return base[..., ::2]
    if layout == "offset":
        base = _make_input(
            rng, (shape[0] + 1,) + tuple(shape[1:]) if shape else (2,), dtype, "contiguous"
        )
        return base[1:] if shape else base[1]
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=gen)
        # A quarter of float inputs get zeros of both signs (drawn from the input's own generator:
        # programs and their other inputs stay what each seed made before). relu, clamp and the
        # like keep x where it equals their bound: relu(-0.0) is -0.0, which coil's was not.
        if torch.rand((), generator=gen) < 0.25:
            zero = torch.rand(shape, generator=gen) < 0.2
            sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
            t = torch.where(zero, 0.0 * sign, t)
        return t.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 11, shape, generator=gen, dtype=dtype)
    return torch.randint(-5, 6, shape, generator=gen, dtype=dtype)


UNARY = (
    "deep",
    "exp",
    "abs",
    "neg",
    "relu",
    "sigmoid",
    "tanh",
    "sin",
    "sqrt_abs",
    "square",
    "log_abs1p",
    "sign",
    "bitwise_not",
    "logical_not",
)
BINARY = (
    "add",
    "sub",
    "mul",
    "maximum",
    "minimum",
    "div_safe",
    "where_pos",
    "floordiv_safe",
    "remainder_safe",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "eq",
    "lt",
)
REDUCE = ("sum", "amax", "amin", "mean", "var", "softmax", "log_softmax", "argmax", "layer_norm",
          "rms_norm")
# Row ops whose kernels loop over a row several times sharing values between the loops (C++ row
# caches keep them in the output's elements): normalizations as models write them, and a softmax
# added to another value (which the output may take over in place).
FLOAT_ONLY = ("mean", "var", "softmax", "log_softmax", "layer_norm", "rms_norm")
VIEWS = ("permute", "transpose", "flatten", "unsqueeze", "slice", "select", "flip", "repeat")
# Layout changes: the same values in another memory layout.
FORMATS = ("channels_last", "contiguous")
# Library ops (extern calls in coil) and pooling; their weights are drawn with the program.
LIBRARY = ("conv2d", "matmul", "gram", "max_pool2d", "avg_pool2d", "sdpa", "attention",
           "batch_norm")

# Steps whose result eager and coil compute bit for bit when their operands are exact: integer
# and bool arithmetic, and single correctly rounded IEEE operations (coil rounds each ATen op once,
# as eager does). Reductions of floats (summation order), transcendental functions (within ulps)
# and division by a computed value are not exact.
EXACT_STEPS = frozenset(
    {
        "abs",
        "neg",
        "relu",
        "square",
        "sign",
        "bitwise_not",
        "logical_not",
        "add",
        "sub",
        "mul",
        "maximum",
        "minimum",
        "where_pos",
        "floordiv_safe",
        "remainder_safe",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "logical_and",
        "eq",
        "lt",
        "add_scalar",
        "cast",
        "cat",
        "amax",
        "amin",
        "argmax",
        "argmax_onehot",
        "max_pool2d",
        "index_mask",
        "any",
        "all",
    }
    | set(VIEWS)
    | set(FORMATS)
)
# Steps whose result can flip when an operand is off by one ulp: they need exact operands.
# (Casts from float to int or bool need them too: see _pick_step.)
NEEDS_EXACT = frozenset({"where_pos", "floordiv_safe", "remainder_safe", "sign", "eq", "lt", "any",
                         "all"})


def _is_exact(step: Step, args_exact: bool, value: torch.Tensor) -> bool:
    if not args_exact:
        return False
    if step.op in EXACT_STEPS:
        return True
    # Integer sums and other integer reductions are exact too.
    return step.op == "sum" and not value.dtype.is_floating_point


def _apply(step: Step, vals: list) -> torch.Tensor:
    a = vals[step.args[0]]
    p = step.params
    op = step.op
    if op == "exp":
        return torch.exp(a.clamp(max=10))
    if op == "index_mask":
        # A causal / band mask over the last two dims (positions compared: attention masks,
        # tril/triu), keeping a where it holds, p["fill"] elsewhere.
        n = a.shape[-1]
        rows = a.shape[-2] if a.dim() >= 2 else 1
        q = torch.arange(rows).view(rows, 1) * p["qscale"] + p["offset"]
        kv = torch.arange(n) * p["kscale"]
        keep = getattr(torch, p["cmp"])(q, kv)
        if a.dim() < 2:
            keep = keep[0]
        return torch.where(keep, a, torch.tensor(p["fill"], dtype=a.dtype) if a.dtype != torch.bool
                           else torch.tensor(False))
    if op == "abs":
        return a.abs()
    if op == "neg":
        return -a
    if op == "relu":
        return torch.relu(a)
    if op == "sigmoid":
        return torch.sigmoid(a)
    if op == "tanh":
        return torch.tanh(a)
    if op == "sin":
        # Large arguments make sin ill-conditioned: one ulp of input moves the result visibly.
        return torch.sin(a.clamp(-10, 10))
    if op == "deep":
        # A body long enough to be stored rather than inlined into its readers (realize_policy):
        # a kernel then computes a buffer in one loop and reads it back in another.
        # (a + small terms: the values keep their spread; an iterated contraction would make
        # them nearly equal, and a normalization after it would amplify rounding into noise.)
        for _ in range(12):
            a = a + torch.sin(a) * 0.05
        return a
    if op == "sqrt_abs":
        return torch.sqrt(a.abs())
    if op == "square":
        return a * a
    if op == "log_abs1p":
        return torch.log1p(a.abs())
    if op == "sign":
        return torch.sign(a)
    if op == "bitwise_not":
        return torch.bitwise_not(a)
    if op == "logical_not":
        return torch.logical_not(a)
    if op == "cast":
        return a.to(p["dtype"])
    b = vals[step.args[1]] if len(step.args) > 1 else None
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("maximum", "minimum"):
        # (+ 0: which zero eager's maximum(-0.0, 0.0) gives depends on the element's position,
        # in its vector loop or its scalar tail; adding +0 makes every zero +0.)
        m = torch.maximum(a, b) if op == "maximum" else torch.minimum(a, b)
        return m + 0 if m.dtype.is_floating_point else m
    if op == "div_safe":
        return a / (b.abs() + 1)
    if op == "where_pos":
        return torch.where(a > 0, a, b)
    if op == "floordiv_safe":
        return torch.floor_divide(a, b.abs() + 1)
    if op == "remainder_safe":
        return torch.remainder(a, b.abs() + 1)
    if op == "bitwise_and":
        return a & b
    if op == "bitwise_or":
        return a | b
    if op == "bitwise_xor":
        return a ^ b
    if op == "logical_and":
        return torch.logical_and(a, b)
    if op == "eq":
        return a == b
    if op == "lt":
        return a < b
    if op == "add_scalar":
        return a + p["value"]
    if op == "cat":
        return torch.cat([a, b], dim=p["dim"])
    # (fuzz --pieces: ops whose kernels split a loop where its pieces meet.)
    if op == "pad":
        return torch.nn.functional.pad(a, p["pads"], value=p["value"]) * 1.5
    if op == "slice_scatter":
        src = (b * 2).narrow(p["dim"], 0, p["end"] - p["start"])
        return torch.slice_scatter(a, src, p["dim"], p["start"], p["end"]) + 1
    if op == "cat3":
        return torch.cat([a, b.neg(), a * b], dim=p["dim"])
    if op == "rotate_half":
        h = a.shape[-1] // 2
        return torch.cat([-a[..., h:], a[..., :h]], dim=-1) * 0.5 + a
    d = p.get("dim")
    if op == "sum":
        return a.sum(d, keepdim=p["keepdim"])
    if op == "matches":  # (fuzz --invariants) where a equals its reduction b along p["dim"]
        b = vals[step.args[1]]
        return a == (b if p["keepdim"] else b.unsqueeze(p["dim"]))
    if op in ("any", "all"):  # of a comparison: bool rows reduced (vector masks in C++ loops)
        m = a > p["threshold"] if a.dtype != torch.bool else a
        return m.any(d, keepdim=p["keepdim"]) if op == "any" else m.all(d, keepdim=p["keepdim"])
    if op == "amax":
        return a.amax(d, keepdim=p["keepdim"])
    if op == "amin":
        return a.amin(d, keepdim=p["keepdim"])
    if op == "mean":
        return a.mean(d, keepdim=p["keepdim"])
    if op == "cumsum_flat":  # (at least two dims flattened where there are two)
        x = a.flatten(0, min(max(d, 1), a.dim() - 1))
        if p.get("ones"):  # a scan of a constant (the same in every lane): positions, counts
            return torch.ones_like(x).cumsum(0) * x
        return x.cumsum(0)
    if op == "var":
        return a.var(d, keepdim=p["keepdim"], correction=p["correction"])
    if op == "softmax":
        return torch.softmax(a, d)
    if op == "log_softmax":
        return torch.log_softmax(a, d)
    if op == "layer_norm":
        centred = a - a.mean(d, keepdim=True)
        return centred * torch.rsqrt((centred * centred).mean(d, keepdim=True) + 1e-5)
    if op == "rms_norm":
        return a * torch.rsqrt(a.pow(2).mean(d, keepdim=True) + 1e-6)
    if op == "softmax_add":
        return torch.softmax(a, -1) + b
    if op == "argmax":
        return a.argmax(d, keepdim=p["keepdim"])
    if op == "argmax_onehot":
        return torch.zeros_like(a).scatter(d, a.argmax(d, keepdim=True), 1)
    if op == "permute":
        return a.permute(p["perm"])
    if op == "transpose":
        return a.transpose(p["d0"], p["d1"])
    if op == "flatten":
        return a.flatten()
    if op == "unsqueeze":
        return a.unsqueeze(d)
    if op == "slice":
        return a.narrow(d, p["start"], p["length"])
    if op == "select":
        return a.select(d, p["index"])
    if op == "flip":
        return a.flip(d)
    if op == "repeat":
        return a.repeat(p["repeats"])
    if op == "channels_last":
        return a.contiguous(memory_format=torch.channels_last)
    if op == "contiguous":
        return a.contiguous()
    if op == "conv2d":
        w = p["weight"].to(a.dtype)
        return torch.nn.functional.conv2d(
            a, w, stride=p["stride"], padding=w.shape[-1] // 2, groups=p["groups"]
        )
    if op == "matmul":
        return a @ p["weight"].to(a.dtype)
    if op == "gram":
        return a @ a.transpose(-1, -2)
    if op == "sdpa":
        # q and v the same value (an extern argument taken twice: stored once), k computed; the
        # operands' size-1 dims and views are what attention ops are strict about.
        return torch.nn.functional.scaled_dot_product_attention(a, a * 0.5, a,
                                                                is_causal=p["causal"])
    if op == "attention":
        # Written out (coil replaces it with one attention call): k a view of a computed value,
        # the scores scaled by a division or a product.
        k = (a * 0.5).transpose(-2, -1)
        s = a @ k / p["scale"] if p["divide"] else (a @ k) * p["scale"]
        # A mask, by the scale drawn (no draw of its own: the seeds' programs stay as they were):
        # added to the scores (sdpa's float attn_mask; computed from a, so it needs a gradient
        # in training) or -inf above the diagonal (nanoGPT's masked_fill: a bool attn_mask).
        mask = {0.25: "add", 3.0: "causal"}.get(p["scale"])
        if mask == "add":
            s = s + (a.mean(-1, keepdim=True) * 0.1).transpose(-2, -1)
        elif mask == "causal":
            n = s.shape[-1]
            keep = torch.ones(n, n, device=a.device).tril()
            s = s.masked_fill(keep == 0, float("-inf"))
        return torch.softmax(s, dim=-1) @ a
    if op == "max_pool2d":
        k, stride, pad = p.get("window", (2, 2, 0))
        return torch.nn.functional.max_pool2d(a, k, stride, pad)
    if op == "batch_norm":  # training mode: batch statistics
        return torch.nn.functional.batch_norm(a, None, None, p["weight"].to(a.dtype),
                                              p["bias"].to(a.dtype), training=True)
    if op == "avg_pool2d":
        return torch.nn.functional.avg_pool2d(a, 2)
    raise ValueError(op)


def run_program(program: Program, inputs: list):
    vals = list(inputs)
    for step in program.steps:
        vals.append(_apply(step, vals))
    return tuple(vals[o] for o in program.outputs)


def _input_dtype(rng: random.Random) -> torch.dtype:
    kind = rng.choices(("float", "int", "bool"), (6, 3, 1))[0]
    if kind == "float":
        return rng.choice(FLOAT_DTYPES)
    if kind == "int":
        return rng.choice(INT_DTYPES)
    return torch.bool


def _shape(rng: random.Random) -> tuple:
    # Rank 4 more often than the others: convolutions, pooling and channels-last need it.
    rank = rng.choices(range(5), (2, 3, 3, 3, 5))[0]
    shape = [rng.choice(SIZES) for _ in range(rank)]
    if shape and rng.random() < ZERO_DIM_PROBABILITY:
        shape[rng.randrange(rank)] = 0
    return tuple(shape)


def _pick_step(rng: random.Random, vals: list, exact: list) -> Step | None:
    """One random step on earlier values, or None when the pick does not apply to them."""
    i = rng.randrange(len(vals))
    a = vals[i]
    kind = rng.choices(
        ("unary", "binary", "reduce", "view", "cast", "cat", "format", "library", "mask"),
        (4, 4, 2, 2, 1, 1, 1, 2, 1),
    )[0]
    if kind == "mask" and a.dim() > 0:
        if rng.random() < 0.5:
            fill = rng.choice((0.0, -1.5, -float("inf"))) if a.dtype.is_floating_point else 0
            return Step("index_mask", (i,), {
                "cmp": rng.choice(("ge", "gt", "le", "lt", "eq", "ne")),
                "offset": rng.randint(-3, 3), "qscale": rng.choice((1, 1, 2)),
                "kscale": rng.choice((1, 1, 2, -1)), "fill": fill})
        return Step(rng.choice(("any", "all")), (i,), {
            "dim": rng.randrange(a.dim()), "keepdim": rng.random() < 0.5,
            "threshold": rng.choice((0, 1)) if not a.dtype.is_floating_point
            else rng.choice((0.0, 0.5))})
    if kind == "unary":
        return Step(rng.choice(UNARY), (i,), {})
    if kind == "binary":
        j = rng.randrange(len(vals))
        try:
            torch.broadcast_shapes(a.shape, vals[j].shape)
        except RuntimeError:
            return Step("add_scalar", (i,), {"value": rng.choice((0.5, 2, -1.25))})
        op = rng.choice(BINARY + ("softmax_add",))
        if op == "softmax_add" and (not a.dtype.is_floating_point or a.dim() == 0):
            op = "add"
        return Step(op, (i, j), {})
    if kind == "reduce" and a.dim() > 0:
        op = rng.choice(REDUCE)
        if a.dtype == torch.bool and op in ("amax", "amin", "argmax"):
            return None
        if not a.dtype.is_floating_point and op in FLOAT_ONLY:
            # Eager raises for these, except on an empty tensor, where it returns one and
            # Dynamo's fake tensors raise (seeds 3251, 3480): not a coil question.
            return None
        if op == "argmax" and a.dtype == torch.bfloat16:
            return None  # eager's bf16 argmax tie-breaking differs from float comparisons
        params = {"dim": rng.randrange(a.dim()), "keepdim": rng.random() < 0.5}
        params["correction"] = rng.choice((0, 1))
        if op == "argmax" and (len(vals) + params["dim"]) % 3 == 0:
            # A third of them mark the maximum in zeros (scatter of a number into a constant:
            # nll_loss's backward, one_hot). Decided without the generator: every seed drawn
            # before draws the same program but for this step.
            op = "argmax_onehot"
        if op == "mean" and (len(vals) + params["dim"]) % 4 == 1:
            # A quarter of the means become scans, decided without the generator as above: a
            # cumsum over the leading dims flattened (long enough for coil's scan kernels, in
            # column form where dims follow the scanned one, row form where none do).
            op = "cumsum_flat"
            # half of them scan ones (timm's edgenext: (~zeros).cumsum(1), a Triton compile
            # error when the scanned block had rank 1)
            params["ones"] = len(vals) % 2 == 0
        return Step(op, (i,), params)
    if kind == "view" and a.dim() > 0:
        op = rng.choice(VIEWS)
        d = rng.randrange(a.dim())
        if op == "permute":
            perm = list(range(a.dim()))
            rng.shuffle(perm)
            return Step(op, (i,), {"perm": perm})
        if op == "transpose":
            return Step(op, (i,), {"d0": d, "d1": rng.randrange(a.dim())})
        if op == "flatten":
            return Step(op, (i,), {})
        if op == "unsqueeze":
            return Step(op, (i,), {"dim": rng.randrange(a.dim() + 1)})
        if op == "flip":
            return Step(op, (i,), {"dim": d})
        if op == "repeat":
            # one repeat count per dim, sometimes with a new leading dim
            repeats = [rng.choice((1, 1, 2, 3)) for _ in range(a.dim() + rng.choice((0, 0, 1)))]
            return Step(op, (i,), {"repeats": repeats})
        size = a.shape[d]
        if size == 0:
            return None
        if op == "slice":
            start = rng.randrange(size)
            return Step(
                op, (i,), {"dim": d, "start": start, "length": rng.randint(0, size - start)}
            )
        return Step(op, (i,), {"dim": d, "index": rng.randrange(size)})
    if kind == "cast":
        to = rng.choice(
            (torch.float32, torch.float64, torch.int64, torch.bfloat16, torch.int32, torch.bool)
        )
        if a.dtype.is_floating_point and not to.is_floating_point:
            # Truncating a float that may be off by one ulp (2.9999 vs 3.0) is not comparable.
            return Step("cast", (i,), {"dtype": to}) if exact[i] else None
        return Step("cast", (i,), {"dtype": to})
    if kind == "format":
        op = rng.choice(FORMATS)
        return Step(op, (i,), {}) if op == "contiguous" or a.dim() == 4 else None
    if kind == "library":
        return _pick_library_step(rng, i, a)
    if kind == "cat" and a.dim() > 0:
        same = [j for j, v in enumerate(vals) if v.shape == a.shape and v.dtype == a.dtype]
        return Step("cat", (i, rng.choice(same)), {"dim": rng.randrange(a.dim())})
    return None


def _pick_library_step(rng: random.Random, i: int, a: torch.Tensor) -> Step | None:
    """A convolution, matrix product or pooling of value i, where its shape and dtype allow."""
    if a.dtype not in (torch.float32, torch.float64, torch.bfloat16) or a.numel() == 0:
        return None
    fits = {
        "conv2d": a.dim() == 4,
        "matmul": a.dim() in (2, 3),
        "gram": a.dim() in (2, 3),
        "max_pool2d": a.dim() in (3, 4) and min(a.shape[-2:]) >= 2,
        "avg_pool2d": a.dim() in (3, 4) and min(a.shape[-2:]) >= 2,
        "sdpa": a.dim() == 4 and a.dtype != torch.bfloat16,
        "attention": a.dim() == 4 and a.dtype.is_floating_point,
        "batch_norm": a.dim() in (2, 3, 4) and a.numel() > a.shape[1],
    }
    ops = [op for op in LIBRARY if fits[op]]
    if not ops:
        return None
    op = rng.choice(ops)
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    if op == "conv2d":
        c = a.shape[1]
        groups = c if c > 1 and rng.random() < 0.3 else 1  # depthwise sometimes
        out = c if groups > 1 else rng.choice((1, 3, 8))
        k = rng.choice((1, 3))
        w = torch.randn((out, c // groups, k, k), generator=gen) / (c // groups * k * k) ** 0.5
        return Step(op, (i,), {"weight": w, "stride": rng.choice((1, 1, 2)), "groups": groups})
    if op == "matmul":
        w = torch.randn((a.shape[-1], rng.choice((1, 5, 8))), generator=gen)
        return Step(op, (i,), {"weight": w / a.shape[-1] ** 0.5})
    if op == "sdpa":
        return Step(op, (i,), {"causal": rng.random() < 0.5})
    if op == "attention":
        return Step(op, (i,), {"scale": rng.choice((2.0, 0.25, 3.0)), "divide": rng.random() < 0.5})
    if op == "max_pool2d":  # ResNet's 3x3 / 2 with padding among them
        return Step(op, (i,), {"window": rng.choice(((2, 2, 0), (3, 2, 1), (3, 1, 1)))})
    if op == "batch_norm":
        c = a.shape[1]
        return Step(op, (i,), {"weight": torch.rand(c, generator=gen) + 0.5,
                               "bias": torch.randn(c, generator=gen)})
    return Step(op, (i,), {})


def _acceptable(value: torch.Tensor) -> bool:
    if value.numel() > 1 << 16:
        return False
    if value.dtype.is_floating_point or value.dtype in (torch.bool, torch.uint8):
        return True
    # Signed overflow is undefined behaviour in C++ kernels (and in ATen's): keep ints small.
    return value.numel() == 0 or int(value.abs().max()) < INT_LIMIT


def generate(seed: int, max_ops: int = 20):
    """A random program and inputs for it; shapes and dtypes are tracked by running eagerly."""
    rng = random.Random(seed)
    shape = _shape(rng)
    dtype = _input_dtype(rng)
    layouts = ("contiguous", "contiguous", "transposed", "sliced", "offset", "channels_last")
    inputs = [_make_input(rng, shape, dtype, rng.choice(layouts))]
    for _ in range(rng.randint(0, 2)):
        # Broadcast partners: the same shape with some dims set to 1, or an int/bool tensor.
        other = tuple(s if rng.random() < 0.7 else 1 for s in shape)
        odt = rng.choice((dtype, dtype, torch.int64, torch.bool))
        inputs.append(_make_input(rng, other, odt, rng.choice(layouts)))
    vals = list(inputs)
    exact = [True] * len(inputs)
    n_inputs = len(inputs)
    program = Program(seed, [], [], n_inputs)
    for _ in range(rng.randint(2, max_ops)):
        step = _pick_step(rng, vals, exact)
        if step is None:
            continue
        args_exact = all(exact[k] for k in step.args)
        if step.op in NEEDS_EXACT and not args_exact:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # var() with too few elements, say
                value = _apply(step, vals)
        except (RuntimeError, ValueError, IndexError, TypeError):
            continue  # eager rejects it (dtype, empty reduction, division by zero, ...)
        if not _acceptable(value):
            continue
        program.steps.append(step)
        vals.append(value)
        exact.append(_is_exact(step, args_exact, value))
    if not program.steps:
        program.steps.append(Step("cast", (0,), {"dtype": torch.float64}))
        vals.append(vals[0].to(torch.float64))
    # A quarter of the programs end in a row op: its result is stored (an output), so its kernel's
    # loops may keep shared values in it (row caches) and its output may take over a dead operand.
    a = vals[-1]
    if rng.random() < 0.25 and a.dtype.is_floating_point and a.dim() > 0 and a.numel() > 0:
        if rng.random() < 0.3:  # a stored body the row op's loops read (computed by the first)
            program.steps.append(Step("deep", (len(vals) - 1,), {}))
            vals.append(_apply(program.steps[-1], vals))
            a = vals[-1]
        op = rng.choice(("layer_norm", "rms_norm", "softmax", "log_softmax", "softmax_add"))
        j = rng.randrange(len(vals))
        try:
            torch.broadcast_shapes(a.shape, vals[j].shape)
        except RuntimeError:
            j = len(vals) - 1
        step = Step(op, (len(vals) - 1, j) if op == "softmax_add" else (len(vals) - 1,),
                    {"dim": -1 if op == "softmax_add" or rng.random() < 0.6 else rng.randrange(a.dim())})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = _apply(step, vals)
            if _acceptable(value):
                program.steps.append(step)
                vals.append(value)
        except (RuntimeError, ValueError, IndexError, TypeError):
            pass
    last = n_inputs + len(program.steps) - 1
    extra = [k for k in range(n_inputs, last) if rng.random() < 0.2]
    program.outputs = extra + [last]
    return program, inputs
