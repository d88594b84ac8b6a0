"""The performance fuzzer's programs (python -m coil.fuzz --perf; timing and report in
fuzz_perf.py): one op, or a short program, at a size worth timing.

A program is a family and a dict of JSON values (its params), drawn from its seed alone
(random.Random(seed)), and `build` turns the params into a function and its inputs (drawn from a
torch.Generator seeded with the seed). The params, not the seed, are what a benchmark case
stores (coil/bench/perf_cases.py), so a stored case stays what was timed when this generator
changes or when the fuzzer shrank a program that took eager too long.

Families:
- reduction: every reduction, scan, arg-reduction, norm and softmax-family op over every dim of
  2-D to 4-D tensors, sometimes after a pointwise op it can fuse;
- permute: transposes and permutes made contiguous, or read by a pointwise op;
- cat_pad: cat, constant and reflect pads, stack, roll;
- index: gather, index_select, embedding, x[idx], scatter_add, index_put;
- loss: cross_entropy (vocabularies up to GPT-2's 50257), nll_loss, mse_loss,
  binary_cross_entropy_with_logits, kl_div;
- fuzz: a program of the correctness fuzzer (fuzz_programs.generate), its inputs grown to a
  timing size where the program still runs.

Seeds take the families in turn (SCHEDULE), within a family its ops in turn, and a reduction's
dim is by turns the last, the first and an inner one, so that a run of consecutive seeds covers
every op and every reduction over every kind of dim; sizes, dtypes and the rest are drawn.
"""

from __future__ import annotations

import dataclasses
import math
import random
import warnings

import torch
import torch.nn.functional as F

from coil import fuzz_programs

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Sizes of one dim: tiny, odd or prime, powers of two, large (GPT-2's vocabulary among them).
SIZE_CLASSES = {
    "tiny": (3, 7, 31),
    "odd": (33, 67, 99, 127, 257, 509, 1021),
    "pow2": (64, 128, 256, 512, 1024, 2048, 4096),
    "large": (8192, 16384, 50257),
}
SIZE_WEIGHTS = (1, 3, 5, 1)
# Most elements an input has, per device, before --size-scale.
MAX_NUMEL = {"cpu": 1 << 23, "cuda": 1 << 26}

# Ten seeds in a row: five reductions and one of each other family.
SCHEDULE = ("reduction", "reduction", "permute", "reduction", "cat_pad", "reduction", "index",
            "reduction", "loss", "fuzz")
OPS = {
    "reduction": ("sum", "mean", "amax", "amin", "prod", "var", "std", "norm", "logsumexp",
                  "softmax", "log_softmax", "cumsum", "cumprod", "cummax", "logcumsumexp",
                  "argmax", "argmin", "max_dim", "layer_norm", "rms_norm", "layer_norm_f"),
    "permute": ("permute_contiguous", "permute_add", "transpose_mul", "channels_last"),
    "cat_pad": ("cat", "pad_constant", "pad_reflect", "stack", "roll"),
    "index": ("gather", "index_select", "embedding", "getitem", "scatter_add", "index_put"),
    "loss": ("cross_entropy", "nll_loss", "mse_loss", "bce_with_logits", "kl_div"),
    "fuzz": ("fuzz",),
}
KEEPDIM_OPS = {"sum", "mean", "amax", "amin", "prod", "var", "std", "norm", "logsumexp",
               "argmax", "argmin", "max_dim"}
# Ops returning indices: float32 only (bfloat16 has ties in every long row, and which of equal
# elements eager's kernels return is theirs to choose).
INDEX_OPS = {"argmax", "argmin", "max_dim", "cummax"}
# Products over long rows: inputs near 1, and no pointwise op before them.
NEAR_ONE_OPS = {"prod", "cumprod"}


@dataclasses.dataclass
class PerfProgram:
    seed: int
    family: str
    params: dict  # JSON values only: what build() needs

    def describe(self) -> str:
        p = self.params
        shape = "x".join(str(n) for n in p["shape"])
        return f"{_op_text(self.family, p)} {shape} {p['dtype']}"

    def to_json(self) -> dict:
        return {"seed": self.seed, "family": self.family, "params": self.params,
                "desc": self.describe()}

    @staticmethod
    def from_json(entry: dict) -> PerfProgram:
        return PerfProgram(int(entry["seed"]), entry["family"], dict(entry["params"]))


def _op_text(family: str, p: dict) -> str:
    op = p["op"]
    x = "(x*1.5-0.25)" if p.get("pre") == "affine" else "x"
    if family == "reduction":
        extra = ", keepdim" if p.get("keepdim") else ""
        if op in ("var", "std"):
            extra += f", correction={p['correction']}"
        return f"{op}({x}, {p['dim']}{extra})"
    if family == "fuzz":
        return f"fuzz program {p['fuzz_seed']} grown to"
    shown = {k: v for k, v in p.items() if k not in ("op", "shape", "dtype")}
    return f"{op}({', '.join(f'{k}={v}' for k, v in shown.items())})"


# --------------------------------------------------------------------------------------------
# drawing a program
# --------------------------------------------------------------------------------------------


def family_and_ordinal(seed: int) -> tuple[str, int]:
    """The seed's family, and how many programs of that family come before it (from seed 0)."""
    slot = seed % len(SCHEDULE)
    family = SCHEDULE[slot]
    per_round = SCHEDULE.count(family)
    return family, (seed // len(SCHEDULE)) * per_round + SCHEDULE[:slot].count(family)


def _dim_size(rng: random.Random) -> int:
    kind = rng.choices(tuple(SIZE_CLASSES), SIZE_WEIGHTS)[0]
    return rng.choice(SIZE_CLASSES[kind])


def _fit(shape: list, max_numel: int) -> list:
    """shape with its largest dim halved (rounded up) until it has at most max_numel elements."""
    shape = list(shape)
    while math.prod(shape) > max_numel:
        k = shape.index(max(shape))
        shape[k] = (shape[k] + 1) // 2
    return shape


def _shape(rng: random.Random, rank: int, max_numel: int) -> list:
    return _fit([_dim_size(rng) for _ in range(rank)], max_numel)


def _dtype(rng: random.Random, op: str) -> str:
    if op in INDEX_OPS:
        return "float32"
    return rng.choices(("float32", "bfloat16"), (7, 3))[0]


def generate(seed: int, device: str = "cpu", size_scale: float = 1.0) -> PerfProgram:
    """The program of a seed: a function of the seed, the device's size limit and size_scale."""
    rng = random.Random(seed)
    family, ordinal = family_and_ordinal(seed)
    ops = OPS[family]
    op = ops[ordinal % len(ops)]
    max_numel = max(64, int(MAX_NUMEL[device] * size_scale))
    if family == "reduction":  # (the reduced dim's place in turn too: each op meets each place)
        place = DIM_PLACES[(ordinal // len(ops) + ordinal) % len(DIM_PLACES)]
        params = _draw_reduction(rng, op, max_numel, place)
    else:
        draw = {"permute": _draw_permute, "cat_pad": _draw_cat_pad, "index": _draw_index,
                "loss": _draw_loss, "fuzz": _draw_fuzz}[family]
        params = draw(rng, op, max_numel)
    params.setdefault("dtype", _dtype(rng, op))
    return PerfProgram(seed, family, params)


# Where a reduction's dim is: the last (contiguous) dim, the first, or one between them.
DIM_PLACES = ("last", "first", "inner")


def _draw_reduction(rng, op, max_numel, place: str) -> dict:
    rank = rng.choice((3, 4) if place == "inner" else (2, 2, 3, 3, 4))
    shape = _shape(rng, rank, max_numel)
    if op == "layer_norm_f":
        place = "last"  # (normalized_shape: the last dims)
    dim = rank - 1 if place == "last" else 0 if place == "first" else rng.randrange(1, rank - 1)
    p = {"op": op, "shape": shape, "dim": dim}
    if op in KEEPDIM_OPS:
        p["keepdim"] = rng.random() < 0.3
    if op in ("var", "std"):
        p["correction"] = rng.choice((0, 1))
    p["pre"] = "none" if op in NEAR_ONE_OPS or rng.random() < 0.6 else "affine"
    return p


def _draw_permute(rng, op, max_numel) -> dict:
    rank = 4 if op == "channels_last" else rng.choice((2, 3, 3, 4))
    perm = list(range(rank))
    while perm == sorted(perm):
        rng.shuffle(perm)
    return {"op": op, "shape": _shape(rng, rank, max_numel // 2), "perm": perm}


def _draw_cat_pad(rng, op, max_numel) -> dict:
    rank = rng.choice((2, 3, 4))
    shape = _shape(rng, rank, max_numel // 3)
    p = {"op": op, "shape": shape}
    if op in ("cat", "stack"):
        p["n"] = rng.choice((2, 3))
        p["dim"] = rng.randrange(rank + (op == "stack"))
        p["post"] = rng.choice(("none", "relu"))
    elif op == "pad_constant":
        p["pads"] = [rng.choice((-1, 0, 1, 3, 8)) for _ in range(2 * rng.choice((1, 2)))]
        p["value"] = rng.choice((0.0, -1.5))
    elif op == "pad_reflect":
        # (a 1-D reflect pads a 2-D or 3-D input, a 2-D one a 3-D or 4-D input)
        count = {2: 2, 3: rng.choice((2, 4)), 4: 4}[rank]
        p["pads"] = [rng.choice((1, 2, 5)) for _ in range(count)]
    else:
        p["shifts"] = rng.choice((1, 3, -17, 100))
        p["dim"] = rng.randrange(rank)
    return p


def _draw_index(rng, op, max_numel) -> dict:
    rank = 2 if op == "embedding" else rng.choice((2, 3))
    shape = _shape(rng, rank, max_numel // 2)
    if op == "embedding":
        shape = _fit([rng.choice((1000, 32000, 50257, 509)), rng.choice((64, 128, 768, 1021))],
                     max_numel)
    p = {"op": op, "shape": shape}
    if op in ("gather", "index_select", "scatter_add"):
        p["dim"] = rng.randrange(rank)
    # n indices, each picking a slice of the other dims: at most half the size limit in all
    rest = math.prod(shape) // shape[p.get("dim", 0)]
    p["n"] = max(1, min(_dim_size(rng), max_numel // (2 * rest)))
    if op == "index_put":
        p["accumulate"] = rng.random() < 0.5
        if not p["accumulate"]:
            p["n"] = min(p["n"], shape[0])  # (distinct rows)
    return p


def _draw_loss(rng, op, max_numel) -> dict:
    if op in ("cross_entropy", "nll_loss"):
        classes = rng.choice((10, 1000, 1021, 32000, 50257))
        shape = [max(1, min(_dim_size(rng), max_numel // classes)), classes]  # (fewer rows)
    else:
        shape = _shape(rng, rng.choice((2, 3)), max_numel // 2)
    p = {"op": op, "shape": shape, "reduction": rng.choice(("mean", "mean", "sum", "none"))}
    if op == "cross_entropy":
        p["label_smoothing"] = rng.choice((0.0, 0.0, 0.1))
    if op == "kl_div":
        p["reduction"] = rng.choice(("batchmean", "sum", "none"))
    return p


# Elements the fuzz family grows a program's first input to (at most the device's size limit).
FUZZ_TARGETS = (1 << 16, 1 << 18, 1 << 20, 1 << 22)


def _draw_fuzz(rng, op, max_numel) -> dict:
    """A correctness-fuzzer program over float32 or bfloat16 whose inputs, grown by one factor on
    every dim of 2 or more (the dims of size 1 stay), still run eagerly with bounded integers:
    the first such fuzz seed of up to 40 drawn."""
    target = min(rng.choice(FUZZ_TARGETS), max_numel)
    fuzz_seed = 0
    for _ in range(40):
        fuzz_seed = rng.randrange(1 << 30)
        _, inputs = fuzz_programs.generate(fuzz_seed)
        base = list(inputs[0].shape)
        grow = [k for k, n in enumerate(base) if n >= 2]
        if not grow or 0 in base or inputs[0].dtype not in DTYPES.values():
            continue
        factor = (target / math.prod(base)) ** (1 / len(grow))
        shape = [int(n * factor) if k in grow else n for k, n in enumerate(base)]
        shape = [max(n, b) for n, b in zip(shape, base)]
        p = {"op": "fuzz", "fuzz_seed": fuzz_seed, "shape": shape, "base": base}
        if factor >= 2 and _fuzz_runs(p, max_numel):
            p["dtype"] = _dtype_name(inputs[0].dtype)
            return p
    _, inputs = fuzz_programs.generate(fuzz_seed)  # none grows: the last at its own size
    shape = list(inputs[0].shape)
    return {"op": "fuzz", "fuzz_seed": fuzz_seed, "shape": shape, "base": shape,
            "dtype": _dtype_name(inputs[0].dtype)}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _fuzz_runs(p: dict, max_numel: int) -> bool:
    """Whether the grown program runs eagerly, no value over 4 * max_numel elements (a repeat or
    an attention's scores grow faster than its input) and its integers bounded (fuzz_programs'
    INT_LIMIT: signed overflow is undefined behaviour in C++ kernels)."""
    program, inputs = _fuzz_program(p)
    vals = list(inputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for step in program.steps:
                value = fuzz_programs._apply(step, vals)
                if value.numel() > 4 * max_numel:
                    return False
                if _large_ints(value):
                    return False
                vals.append(value)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return False
    return True


def _large_ints(value: torch.Tensor) -> bool:
    if value.dtype.is_floating_point or value.dtype in (torch.bool, torch.uint8):
        return False
    return value.numel() > 0 and int(value.abs().max()) >= fuzz_programs.INT_LIMIT


def _fuzz_program(p: dict):
    """The fuzz program of p and its inputs at p's shape: each input's dims that match the first
    input's at its own size take the new size (broadcast dims of 1 stay 1)."""
    program, small = fuzz_programs.generate(p["fuzz_seed"])
    rng = random.Random(p["fuzz_seed"])
    base = p["base"]
    inputs = []
    for t in small:
        shape = tuple(new if n == b else n for n, b, new in zip(t.shape, base, p["shape"]))
        inputs.append(fuzz_programs._make_input(rng, shape, t.dtype, "contiguous"))
    return program, inputs


# --------------------------------------------------------------------------------------------
# building a program: a function and its inputs
# --------------------------------------------------------------------------------------------


def build(program: PerfProgram, device: str = "cpu"):
    """(fn, inputs): fn a plain function of the inputs returning a tuple of tensors; the inputs
    drawn on the CPU from the seed's generator, then moved to the device."""
    p = program.params
    gen = torch.Generator().manual_seed(program.seed)
    if program.family == "fuzz":
        prog, inputs = _fuzz_program(p)
        fn = _fuzz_fn(prog)
    else:
        maker = {"reduction": _reduction, "permute": _permute, "cat_pad": _cat_pad,
                 "index": _index, "loss": _loss}[program.family]
        fn, inputs = maker(p, DTYPES[p["dtype"]], gen)
    return fn, tuple(t.to(device) for t in inputs)


def _fuzz_fn(prog):
    def fuzz_program(*xs):
        return fuzz_programs.run_program(prog, list(xs))

    fuzz_program.program = prog  # (fuzz_perf judges a mismatch as the correctness fuzzer does)
    return fuzz_program


def _randn(shape, dtype, gen, scale=1.0, shift=0.0):
    return (torch.randn(tuple(shape), generator=gen) * scale + shift).to(dtype)


def _reduction(p: dict, dtype, gen):
    op, d, keep, affine = p["op"], p["dim"], p.get("keepdim", False), p["pre"] == "affine"
    correction = p.get("correction", 1)
    near_one = op in NEAR_ONE_OPS
    x = _randn(p["shape"], dtype, gen, 0.01 if near_one else 1.0, 1.0 if near_one else 0.0)
    extra = ()
    if op == "layer_norm_f":
        n = p["shape"][-1]
        extra = (_randn([n], dtype, gen, 0.1, 1.0), _randn([n], dtype, gen, 0.1))

    def reduction(x, *wb):
        if affine:
            x = x * 1.5 - 0.25
        if op in ("sum", "mean", "amax", "amin", "prod", "logsumexp"):
            return (getattr(torch, op)(x, d, keepdim=keep),)
        if op in ("var", "std"):
            return (getattr(torch, op)(x, d, keepdim=keep, correction=correction),)
        if op == "norm":
            return (torch.linalg.vector_norm(x, 2, d, keepdim=keep),)
        if op in ("softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp"):
            return (getattr(torch, op)(x, d),)
        if op == "cummax":
            return tuple(torch.cummax(x, d))
        if op in ("argmax", "argmin"):
            return (getattr(torch, op)(x, d, keepdim=keep),)
        if op == "max_dim":
            return tuple(torch.max(x, d, keepdim=keep))
        if op == "layer_norm":
            centred = x - x.mean(d, keepdim=True)
            return (centred * torch.rsqrt((centred * centred).mean(d, keepdim=True) + 1e-5),)
        if op == "rms_norm":
            return (x * torch.rsqrt(x.pow(2).mean(d, keepdim=True) + 1e-6),)
        return (F.layer_norm(x, (x.shape[-1],), *wb),)

    return reduction, (x, *extra)


def _permute(p: dict, dtype, gen):
    op, perm = p["op"], p["perm"]
    x = _randn(p["shape"], dtype, gen)
    permuted = [p["shape"][k] for k in perm]
    d0, d1 = perm[0], perm[-1]  # (transpose_mul: two dims the permutation moves)

    def permute(x, *ys):
        if op == "permute_contiguous":
            return (x.permute(perm).contiguous() * 2.0,)
        if op == "permute_add":
            return (x.permute(perm) + ys[0],)
        if op == "transpose_mul":
            return ((x.transpose(d0, d1) * ys[0].transpose(d0, d1)).contiguous(),)
        return (torch.relu(x).contiguous(memory_format=torch.channels_last),)

    if op == "permute_add":
        return permute, (x, _randn(permuted, dtype, gen))
    if op == "transpose_mul":
        return permute, (x, _randn(p["shape"], dtype, gen))
    return permute, (x,)


def _cat_pad(p: dict, dtype, gen):
    op, shape = p["op"], list(p["shape"])
    d = p.get("dim", 0)
    if op in ("cat", "stack"):
        shapes = [list(shape) for _ in range(p["n"])]
        if op == "cat":  # pieces of other lengths along the cat's dim
            for k, s in enumerate(shapes):
                s[d] = max(1, (s[d] * (k + 1)) // p["n"])
        xs = [_randn(s, dtype, gen) for s in shapes]
        relu = p["post"] == "relu"

        def cat(*xs):
            out = torch.cat(xs, d) if op == "cat" else torch.stack(xs, d)
            return (torch.relu(out) if relu else out,)

        return cat, tuple(xs)
    x = _randn(shape, dtype, gen)
    if op == "pad_constant":
        pads, value = _narrowing_pads(p["pads"], shape), p["value"]

        def pad_constant(x):
            return (F.pad(x, pads, value=value),)

        return pad_constant, (x,)
    if op == "pad_reflect":
        # (reflect pads are smaller than the dim they pad)
        dims = shape[::-1]
        pads = [min(n, dims[k // 2] - 1) for k, n in enumerate(p["pads"])]

        def pad_reflect(x):
            return (F.pad(x, pads, mode="reflect") * 0.5,)

        return pad_reflect, (x,)
    shifts = p["shifts"]

    def roll(x):
        return (torch.roll(x, shifts, d) + 1.0,)

    return roll, (x,)


def _narrowing_pads(pads: list, shape: list) -> list:
    """Negative pads narrow a dim: never to nothing."""
    dims = shape[::-1]
    out = list(pads)
    for k in range(0, len(out), 2):
        if dims[k // 2] + min(out[k], 0) + min(out[k + 1], 0) < 1:
            out[k], out[k + 1] = abs(out[k]), abs(out[k + 1])
    return out


def _index(p: dict, dtype, gen):
    op, shape, n = p["op"], list(p["shape"]), p["n"]
    d = p.get("dim", 0)
    x = _randn(shape, dtype, gen)

    def ints(high, size):
        return torch.randint(0, high, tuple(size), generator=gen)

    if op == "gather":
        idx = ints(shape[d], shape[:d] + [n] + shape[d + 1:])

        def gather(x, idx):
            return (torch.gather(x, d, idx) * 2.0,)

        return gather, (x, idx)
    if op == "index_select":
        def index_select(x, idx):
            return (torch.index_select(x, d, idx) + 1.0,)

        return index_select, (x, ints(shape[d], [n]))
    if op == "embedding":
        def embedding(ids, w):
            return (F.embedding(ids, w),)

        return embedding, (ints(shape[0], [n]), x)
    if op == "getitem":
        def getitem(x, idx):
            return (x[idx] * 0.5,)

        return getitem, (x, ints(shape[0], [n]))
    if op == "scatter_add":
        idx = ints(shape[d], shape[:d] + [n] + shape[d + 1:])
        src = _randn(idx.shape, dtype, gen)

        def scatter_add(x, idx, src):
            return (x.scatter_add(d, idx, src),)

        return scatter_add, (x, idx, src)
    accumulate = p["accumulate"]
    # Without accumulate, distinct rows (which of two writes to one row wins is unspecified).
    rows = ints(shape[0], [n]) if accumulate else torch.randperm(shape[0], generator=gen)[:n]
    values = _randn([len(rows)] + shape[1:], dtype, gen)

    def index_put(x, rows, values):
        return (x.index_put((rows,), values, accumulate=accumulate),)

    return index_put, (x, rows, values)


def _loss(p: dict, dtype, gen):
    op, shape, reduction = p["op"], list(p["shape"]), p["reduction"]
    x = _randn(shape, dtype, gen)
    if op in ("cross_entropy", "nll_loss"):
        target = torch.randint(0, shape[1], (shape[0],), generator=gen)
        smoothing = p.get("label_smoothing", 0.0)

        def classification(x, target):
            if op == "nll_loss":
                return (F.nll_loss(F.log_softmax(x, 1), target, reduction=reduction),)
            return (F.cross_entropy(x, target, reduction=reduction, label_smoothing=smoothing),)

        return classification, (x, target)
    y = _randn(shape, dtype, gen)
    if op == "bce_with_logits":
        y = torch.rand(tuple(shape), generator=gen).to(dtype)

    def loss(x, y):
        if op == "mse_loss":
            return (F.mse_loss(x, y, reduction=reduction),)
        if op == "bce_with_logits":
            return (F.binary_cross_entropy_with_logits(x, y, reduction=reduction),)
        return (F.kl_div(F.log_softmax(x, -1), F.log_softmax(y, -1), reduction=reduction,
                         log_target=True),)

    return loss, (x, y)


# --------------------------------------------------------------------------------------------
# shrinking
# --------------------------------------------------------------------------------------------


def shrink(program: PerfProgram) -> PerfProgram | None:
    """The program with its largest size (a dim of its shape, or its count of indices n) halved,
    rounded up; None when nothing can shrink (a fuzz program is at its own size)."""
    p = dict(program.params)
    shape = list(p["shape"])
    floor = p.get("base") or [1] * len(shape)
    sizes = [(n, k) for k, n in enumerate(shape) if (n + 1) // 2 >= floor[k] and n > 1]
    if "n" in p and p["n"] > 1:
        sizes.append((p["n"], -1))
    if not sizes:
        return None
    _, k = max(sizes)
    if k < 0:
        p["n"] = (p["n"] + 1) // 2
    else:
        shape[k] = (shape[k] + 1) // 2
        p["shape"] = shape
    if p.get("op") == "index_put" and not p.get("accumulate"):
        p["n"] = min(p["n"], shape[0])
    return PerfProgram(program.seed, program.family, p)


def shrink_to(program: PerfProgram, max_numel: int) -> PerfProgram:
    """The program shrunk until every size it has multiplies to at most max_numel (the bench's
    "tiny" size class)."""
    while math.prod(program.params["shape"]) * program.params.get("n", 1) > max_numel:
        smaller = shrink(program)
        if smaller is None:
            break
        program = smaller
    return program
