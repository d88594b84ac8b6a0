"""Differential fuzzer: random programs of pointwise, reduction, view, memory-format and library
(convolution, matrix product, attention, pooling) ops, compiled by coil and compared with eager:
values, dtypes, shapes and output strides.

Programs run over float, integer and bool tensors, with size-1 and size-0 dims. Comparisons, casts
to integers and other steps that turn a one-ulp difference into a different answer (a < b,
floor_divide) only take "exact" operands: values that eager and coil must compute bit for bit
(inputs, integer arithmetic, single IEEE operations), so a mismatch is never a false positive.

    python -m coil.fuzz --seconds 60            # run for a minute, new seeds each time
    python -m coil.fuzz --seed 1234 --count 1   # replay one program
    python -m coil.fuzz --dynamic --seconds 60  # symbolic sizes, each program at two sizes
    python -m coil.fuzz --train --seconds 60    # and a training step: gradients against eager's
    python -m coil.fuzz --control-flow --seconds 60  # each program as both branches of a cond
    python -m coil.fuzz --flex --seconds 60     # random flex_attention programs (fuzz_flex.py)
    python -m coil.fuzz --flex --seed N --count 1 --minimize  # and shrink a failing one
    TRITON_INTERPRET=1 python -m coil.fuzz --triton-check --seconds 60
                                                # Triton kernels, each also compiled for sm_90

Library ops and memory formats are drawn because layouts meet there: an extern op's result
layout follows its inputs' (a convolution of a channels-last tensor is channels-last), so a
program that stores the op's input in another layout than eager's, or reads its result through a
view with the wrong strides, gives wrong values; output strides are compared for the same reason.

Masks are drawn as attention writes them: positions compared over the last two dims (causal,
banded, offset: tril/triu and flex attention's masks) selecting a value, and any/all reductions
of comparisons (vector masks in C++ loops).

Normalizations and softmaxes are drawn as models write them, and a quarter of the programs end
in one: their kernels loop over each row several times and keep values the loops share in the
output's elements (C++ row caches), which is only right while no operand's memory is the output's.

Every program is a function of its seed, so a failure is reproduced by its seed alone; the failing
graph is also saved (graph.json, replayable with `coil repro`) under --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import time
import traceback
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensor

from coil.fuzz_programs import Program, Step, _apply, _is_exact, generate, run_program  # noqa: F401


def _tolerances(t: torch.Tensor, dtypes: set) -> dict:
    """Tolerance by the least precise floating dtype the value may have passed through: one
    rounding step of an intermediate (eager and coil may round it to neighbouring values, e.g.
    after summing in a different order) carries into every later, wider dtype."""
    if not t.dtype.is_floating_point:
        return {"rtol": 0.0, "atol": 0.0}
    if t.dtype == torch.bfloat16 or torch.bfloat16 in dtypes:
        return {"rtol": 2e-2, "atol": 2e-2}
    if t.dtype == torch.float32 or torch.float32 in dtypes:
        return {"rtol": 1e-4, "atol": 1e-5}
    return {}


def _same_strides(t: torch.Tensor, strides) -> bool:
    return all(a == b for a, b, n in zip(t.stride(), strides, t.shape) if n > 1)


def _fake_strides(program: Program, inputs: list) -> list:
    """Each output's strides as PyTorch's meta functions give them (what Dynamo's graph says)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fakes = [mode.from_tensor(t) for t in inputs]
        return [tuple(o.stride()) for o in run_program(program, fakes)]


@dataclasses.dataclass
class Result:
    seed: int
    ok: bool
    message: str = ""
    folder: str | None = None


def _grown(inputs: list, seed: int) -> list:
    """The program's inputs at another size: every dim of 2 or more grown by 3 (sizes 0 and 1
    stay: Dynamo specializes them), same dtypes, fresh values."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for t in inputs:
        shape = tuple(n + 3 if n >= 2 else n for n in t.shape)
        if t.dtype.is_floating_point:
            out.append(torch.randn(shape, generator=gen).to(t.dtype))
        elif t.dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=gen).bool())
        else:
            out.append(torch.randint(0, 8, shape, generator=gen).to(t.dtype))
    return out


def _compare(actual, expected, dtypes: set, fake: list | None, values: bool = True,
             exact: list | None = None) -> None:
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a.dtype != e.dtype or a.shape != e.shape:
            raise AssertionError(
                f"dtype/shape {a.dtype}{tuple(a.shape)} vs eager {e.dtype}{tuple(e.shape)}"
            )
        if values:
            torch.testing.assert_close(a, e, equal_nan=True, **_tolerances(e, dtypes))
            if exact and exact[k]:
                _check_zero_signs(a, e)
    for k, (a, e) in enumerate(zip(actual, expected)):
        # The graph coil receives says what layout each output has (fake tensors' strides);
        # where PyTorch's meta functions disagree with its kernels (a broadcast bool operand
        # with size-1 dims, seed 7266: Inductor returns the meta's layout too), either is
        # accepted; any other layout is a coil bug.
        if e.numel() == 0 or _same_strides(a, e.stride()):
            continue
        if fake is None or not _same_strides(a, fake[k]):
            raise AssertionError(
                f"output {k}: strides {a.stride()} vs eager {e.stride()} "
                f"(fake tensors: {fake[k] if fake else '?'}; shape {tuple(e.shape)})"
            )


class ZeroSignError(AssertionError):
    """A zero of the other sign than eager's (no tolerance or float64 reference excuses it)."""


def _check_zero_signs(a: torch.Tensor, e: torch.Tensor) -> None:
    """Where both results are zero, the same zero: assert_close takes -0.0 for 0.0, but 1 / x
    tells them apart (relu(-0.0) is -0.0 in eager; coil's was 0.0)."""
    if not a.dtype.is_floating_point or a.numel() == 0:
        return
    both = (a == 0) & (e == 0)
    if not bool(both.any()):
        return
    differ = both & (torch.signbit(a) != torch.signbit(e))
    if bool(differ.any()):
        at = tuple(int(i) for i in differ.nonzero()[0])
        raise ZeroSignError(
            f"{int(differ.sum())} zeros of the other sign than eager's (first at {at}: "
            f"{float(a[at])} vs {float(e[at])})")


def _as_close_as_eager(program: Program, inputs: list, actual, expected, slack: float,
                       seed: int = 0) -> bool:
    """Whether each floating output of coil is at least about as close as eager's to the program
    run in float64, within `slack` of the output's magnitude. coil may round less often than
    eager or in another order (16-bit programs: a written-out attention computed by one
    attention call, seed 20182; float32: a softmax of a large matrix product, seed 5172), and a
    normalization after it magnifies both results' rounding beyond any fixed elementwise
    tolerance (a layer norm of a constant row is its mean's rounding times 1/sqrt(eps), seed
    4130 under --dynamic). Where an output is that far still, it passes within twice the spread
    that rounding every value of the program a few times gives it (_rounding_spreads): such an
    output is no function of the summation order (seed 150017: a layer norm written out as
    x - x.mean() over a column of equal values, eager 0, coil 1.9e-4). A NaN of coil's that
    neither eager nor float64 has always fails."""
    try:
        reference = _eager(program, [t.double() if t.dtype.is_floating_point else t
                                     for t in inputs])
    except Exception:  # noqa: BLE001 - a program float64 cannot run: no reference
        return False
    spreads = None
    for i, (a, e, r) in enumerate(zip(actual, expected, reference)):
        if not a.dtype.is_floating_point or a.numel() == 0:
            if not torch.equal(a, e):
                return False
            continue
        r = r.double()
        if bool((a.isnan() & ~e.isnan() & ~r.isnan()).any()):  # (the distances ignore NaNs)
            return False
        err = (a.double() - r).abs().nan_to_num(0.0).max()
        eager_err = (e.double() - r).abs().nan_to_num(0.0).max()
        bound = 2 * eager_err + slack * max(1.0, float(r.abs().nan_to_num(0.0).max()))
        if err <= bound:
            continue
        if spreads is None:
            spreads = _rounding_spreads(program, inputs, reference, seed)
        if spreads is None or err > bound + 2 * spreads[i]:
            return False
    return True


# _rounding_spreads: each floating value moved by up to this many times its dtype's epsilon (one
# epsilon is two roundings to nearest; four were 3% of each bfloat16 value, which let a value
# 0.25 off in a well-conditioned bf16 output of magnitude 3 pass), in this many draws.
PERTURB_EPS = 1
PERTURB_DRAWS = 3


def _rounding_spreads(program: Program, inputs: list, reference, seed: int) -> list | None:
    """For each output, the largest move of any of its elements from `reference` (the program
    in float64) when every floating value (inputs and each step's result) is moved by a random
    relative amount of up to PERTURB_EPS times the epsilon of the dtype it has in the real
    program, over PERTURB_DRAWS draws: what a computation that rounds each value a few times
    may return (backward stability, step by step). The largest over the output, not per
    element: a rounding inside a step (a row's mean) moves a whole row the same way, which
    independent draws per element do not model. None where float64 cannot run the program."""
    gen = torch.Generator().manual_seed(seed)

    def perturb(v: torch.Tensor, like: torch.dtype) -> torch.Tensor:
        if not v.dtype.is_floating_point or not like.is_floating_point or v.numel() == 0:
            return v
        u = torch.rand(v.shape, generator=gen, dtype=torch.float64) * 2 - 1
        return v + v * (PERTURB_EPS * torch.finfo(like).eps) * u

    spreads = [0.0] * len(program.outputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = [t.clone() for t in inputs]  # (each value's dtype in the real program)
            for step in program.steps:
                real.append(_apply(step, real))
            for _ in range(PERTURB_DRAWS):
                vals = [perturb(t.double() if t.dtype.is_floating_point else t.clone(), t.dtype)
                        for t in inputs]
                for k, step in enumerate(program.steps):
                    vals.append(perturb(_apply(step, vals), real[program.n_inputs + k].dtype))
                for i, (o, r) in enumerate(zip(program.outputs, reference)):
                    if vals[o].dtype.is_floating_point:
                        move = (vals[o].double() - r.double()).abs().nan_to_num(0.0)
                        spreads[i] = max(spreads[i], float(move.max()) if move.numel() else 0.0)
    except Exception:  # noqa: BLE001 - a program float64 cannot run: no spread
        return None
    return spreads


SIGN_FREE_STEPS = frozenset({"amax", "amin", "max_pool2d", "maximum", "minimum"})


def _exact_outputs(program: Program, vals: list) -> list:
    """Which outputs eager and coil compute bit for bit (fuzz_programs.EXACT_STEPS from exact
    operands), given every value of the program run eagerly (its inputs, then one per step):
    their zeros must have eager's signs. A layer norm's or a sum's zero may be either, by the
    order and formula each computes it with."""
    exact = [True] * program.n_inputs
    for k, step in enumerate(program.steps):
        args_exact = all(exact[a] for a in step.args)
        # Which of two equal zeros a max or min keeps is the order's (IEEE leaves it open).
        value = vals[program.n_inputs + k]
        exact.append(_is_exact(step, args_exact, value) and step.op not in SIGN_FREE_STEPS)
    return [exact[k] for k in program.outputs]


def _check(program: Program, inputs: list, actual, expected, dtypes: set, fake,
           exact: list | None = None) -> None:
    """Values within eager's tolerances or, failing that, about as close as eager's to float64
    (a 16-bit program within 2% of its outputs' magnitude, float32 within 1e-4, or within the
    spread rounding gives an ill-conditioned output); layouts always eager's."""
    try:
        _compare(actual, expected, dtypes, fake, exact=exact)
    except ZeroSignError:
        raise
    except AssertionError:
        slack = 2e-2 if dtypes & {torch.bfloat16, torch.float16} else 1e-4
        if not _as_close_as_eager(program, inputs, actual, expected, slack, program.seed):
            raise
        _compare(actual, expected, dtypes, fake, values=False)


def _check_consistency(program: Program, actual) -> None:
    """Exact relations between outputs that eager satisfies by construction: a returned max, min
    or argmax of a returned value is that of the value returned (coil computed such a value once
    for the output and again, with other bits, for the reduction: the returned max was no
    element of the returned exp; fuzzer --train seeds 73274, 74708 found it as NaN gradients)."""
    where = {v: i for i, v in enumerate(program.outputs)}
    for j, v in enumerate(program.outputs):
        k = v - program.n_inputs
        if k < 0 or program.steps[k].op not in ("amax", "amin", "argmax"):
            continue
        step = program.steps[k]
        if step.args[0] not in where:
            continue
        operand = actual[where[step.args[0]]]
        redo = _apply(step, [None] * step.args[0] + [operand])
        if not torch.equal(redo, actual[j]) and not (
                redo.dtype.is_floating_point and torch.allclose(redo, actual[j], 0, 0, True)):
            raise AssertionError(f"output {j} ({step.op}) is not the {step.op} of output "
                                 f"{where[step.args[0]]}, which it reduces")


def with_invariants(program: Program, inputs: list) -> Program | None:
    """The program with, for each float amax or amin it computes, the mask of the elements equal
    to it also returned (`--invariants`): eager's mask marks at least one element of every row,
    by construction, and so must coil's (a value computed again in another kernel, through
    another exp, found no maximum in some rows). None when the program has no such reduction."""
    vals = [t.clone() for t in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            vals.append(_apply(step, vals))
    extra = []
    for k, step in enumerate(program.steps):
        operand = vals[step.args[0]] if step.args else None
        if step.op in ("amax", "amin") and operand is not None and operand.dtype.is_floating_point:
            extra.append(Step("matches", (step.args[0], program.n_inputs + k), dict(step.params)))
    if not extra:
        return None
    steps = list(program.steps) + extra
    first = program.n_inputs + len(program.steps)
    outputs = list(program.outputs) + list(range(first, first + len(extra)))
    return Program(program.seed, steps, outputs, program.n_inputs)


def with_pieces(program: Program, inputs: list, dynamic: bool = False) -> Program:
    """The program with up to three steps more, returned too (`--pieces`): a pad, slice_scatter,
    three-way cat or rotate-half (a rotary embedding's cat) of its values, each fused with the
    value's producers into a kernel whose innermost loop splits where the pieces meet (codegen's
    loop partitioning: each piece folded over its range). Drawn from the program's own values,
    by a generator of its own, so the original program is unchanged. dynamic: every pad widens
    somewhere (the pads become symbolic ints, and eager's pad that only narrows is a view of its
    input, whose layout a symbolic trace cannot know: Inductor's output strides differ from
    eager's there as coil's do)."""
    rng = random.Random(program.seed * 7919 + 17)
    vals = [t.clone() for t in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            vals.append(_apply(step, vals))
    usable = [k for k, v in enumerate(vals) if v.dim() > 0 and v.dtype.is_floating_point
              and v.numel() > 0]
    extra = []
    for _ in range(3 if usable else 0):
        k = rng.choice(usable)
        a = vals[k]
        same = [j for j in usable if vals[j].shape == a.shape and vals[j].dtype == a.dtype]
        j = rng.choice(same)
        d = rng.randrange(a.dim())
        n = a.shape[d]
        op = rng.choice(["pad", "slice_scatter", "cat3", "rotate_half"])
        if op == "pad":
            lo, hi = rng.randint(-2, 4), rng.randint(-2, 4)
            if a.shape[-1] + min(lo, 0) + min(hi, 0) <= 0:
                lo, hi = abs(lo), abs(hi)
            if dynamic and max(lo, hi) <= 0:
                hi = 1 - hi
            extra.append(Step("pad", (k,), {"pads": (lo, hi), "value": rng.choice([0.0, -1.25])}))
        elif op == "slice_scatter":
            start = rng.randrange(n)
            end = rng.randint(start, n)
            extra.append(Step("slice_scatter", (k, j), {"dim": d, "start": start, "end": end}))
        elif op == "cat3":
            extra.append(Step("cat3", (k, j), {"dim": d}))
        elif a.shape[-1] % 2 == 0:
            extra.append(Step("rotate_half", (k,), {}))
    steps = list(program.steps) + extra
    first = program.n_inputs + len(program.steps)
    outputs = list(program.outputs) + list(range(first, first + len(extra)))
    return Program(program.seed, steps, outputs, program.n_inputs)


def _mask_count(program: Program) -> int:
    """How many of the program's last outputs are with_invariants' masks."""
    return sum(1 for step in program.steps if step.op == "matches")


def _check_masks(program: Program, actual, expected, fake) -> None:
    """with_invariants' masks: eager's layouts, and every row where eager's mask marks an element
    equal to the row's max (or min) has one marked by coil's. Not equal to eager's masks: where
    coil computes the reduced value otherwise (a written-out attention as one attention call,
    seed 112441 under --invariants), two nearly equal elements may swap which is the max."""
    if not actual:
        return
    _compare(actual, expected, set(), fake, values=False)
    steps = [step for step in program.steps if step.op == "matches"]
    for k, (a, e, step) in enumerate(zip(actual, expected, steps)):
        if a.numel() == 0:
            continue
        d = step.params["dim"]
        if not bool((a.any(d) | ~e.any(d)).all()):
            raise AssertionError(
                f"mask {k} (of step {program.steps.index(step)}): a row with an element equal "
                f"to its reduction in eager has none in coil's result")


def _eager(program: Program, inputs: list):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var() with too few elements: eager warns, so would coil
        return run_program(program, [t.clone() for t in inputs])


def _grad_tolerances(e: torch.Tensor, dtypes: set) -> dict:
    """Gradients pass through the backward's reductions too (broadcasts, norms): the forward's
    tolerance, relative to the gradient's largest magnitude."""
    scale = max(1.0, float(e.abs().max())) if e.numel() else 1.0
    if e.dtype == torch.bfloat16 or torch.bfloat16 in dtypes:
        return {"rtol": 4e-2, "atol": 4e-2 * scale}
    if e.dtype == torch.float32 or torch.float32 in dtypes:
        return {"rtol": 1e-3, "atol": 1e-4 * scale}
    return {"rtol": 1e-7, "atol": 1e-9 * scale}


def _input_grads(fn, inputs: list, seed: int):
    """The gradients of sum(output * w) (w fixed random weights, one per floating output that
    requires grad) with respect to the floating inputs; None where nothing is differentiable."""
    xs = [t.detach().clone() for t in inputs]
    for x in xs:
        if x.dtype.is_floating_point:
            x.requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = fn(*xs)
    gen = torch.Generator().manual_seed(seed)
    loss = None
    for o in outs:
        if o.requires_grad and o.numel():
            w = torch.randn(o.shape, generator=gen, dtype=torch.float64)
            term = (o.to(torch.float64) * w).sum()
            loss = term if loss is None else loss + term
    if loss is None:
        return None
    loss.backward()
    return [x.grad for x in xs if x.dtype.is_floating_point]


def _check_grads(program: Program, inputs: list, seed: int, dtypes: set, dynamic: bool) -> None:
    """A training step of the program: coil compiles its forward and backward graphs (the
    partitioner decides what the backward recomputes); the inputs' gradients must be eager's."""
    def fn(*xs):
        return run_program(program, list(xs))

    # 16-bit gradients are not compared: a batch norm over a few rounded values has a near-zero
    # variance, and its backward scales the rounding of every operand by 1/std (seed 9214:
    # eager's and coil's bf16 gradients differed by 95% where their forward values agreed).
    if any(t.dtype in (torch.bfloat16, torch.float16) for t in inputs):
        return
    try:
        expected = _input_grads(fn, inputs, seed)
    except RuntimeError:  # a step eager cannot differentiate (floor_divide, ...)
        return
    if expected is None:
        return
    torch._dynamo.reset()
    # The user's saved_tensors_hooks see only what the compiled step saves, never a tensor of a
    # compile-time trace (the training attention rewrite's make_fx trace handed them its fake
    # probabilities and dropout mask: tests/gpu on the H200, 2026-12-03).
    fakes = []

    def pack(t):
        if isinstance(t, FakeTensor):
            fakes.append(f"{t.dtype}{tuple(t.shape)}")
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            actual = _input_grads(torch.compile(fn, backend="coil", dynamic=dynamic), inputs,
                                  seed)
    except torch._dynamo.exc.BackendCompilerFailed as err:
        # AOTAutograd traces the whole backward, so an op without a derivative fails the compile
        # even where eager's backward never reaches it (seed 74087: floor_divide of a float that
        # requires grad; Inductor fails the same way): not coil's to differentiate.
        if "derivative for" in str(err) and "is not implemented" in str(err):
            return
        raise
    if fakes:
        raise AssertionError(f"the user's saved_tensors_hooks were handed fake tensors: {fakes}")
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a is None and e is None:
            continue
        if a is None or e is None:
            a = torch.zeros_like(e if a is None else a) if a is None else a
            e = torch.zeros_like(a) if e is None else e
        if a.shape != e.shape or a.dtype != e.dtype:
            raise AssertionError(f"grad of input {k}: {a.dtype}{tuple(a.shape)} vs eager "
                                 f"{e.dtype}{tuple(e.shape)}")
        try:
            torch.testing.assert_close(a, e, equal_nan=True, **_grad_tolerances(e, dtypes))
        except AssertionError as err:
            raise AssertionError(f"grad of input {k}: {err}") from None


def check_seed(seed: int, out_dir: str | None = None, dynamic: bool = False,
               vectorize: str | None = None, train: bool = False,
               invariants: bool = False, pieces: bool = False,
               triton_check: bool = False, cpp_wrapper: bool = False) -> Result:
    """Compiles and runs one program; compares with eager. With `dynamic`, the program is
    compiled with symbolic sizes (dynamic=True) and also run at a second size where eager can
    run it (a program whose reshapes or slices fit one size only is checked at that size).
    vectorize: the cpp_vectorize option to compile under ("on": every C++ kernel's innermost
    loop in vector form where it has one, so the fuzzer's small programs exercise them).
    train: also a training step, whose input gradients are compared with eager's.
    invariants: the program with the masks of with_invariants (programs without an amax or amin
    pass at once). pieces: the program with with_pieces' steps. triton_check: Triton kernels
    (cpu_backend="triton", run by Triton's interpreter: TRITON_INTERPRET=1), each also compiled
    for sm_90 (python/coil/triton_check.py; one that does not compile fails the program), GEMM
    operands padded as on CUDA, and every load and store checked against the launch's tensors,
    tuning launches included (python/coil/triton_interp_check.py).
    cpp_wrapper: CPU graphs run through their C++ wrappers (option cpp_wrapper)."""
    import coil

    program, inputs = generate(seed)
    if pieces:
        program = with_pieces(program, inputs, dynamic)
    if invariants:
        program = with_invariants(program, inputs)
        if program is None:
            return Result(seed, True, "", None)
    expected = _eager(program, inputs)
    vals = [t.clone() for t in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            vals.append(_apply(step, vals))
    dtypes = {v.dtype for v in vals}
    torch._dynamo.reset()
    coil.reset()
    folder = tempfile.mkdtemp(prefix=f"seed{seed}_", dir=out_dir) if out_dir else None

    def fn(*xs):
        return run_program(program, list(xs))

    try:
        patch = {"debug_dir": folder}
        if vectorize:
            patch["cpp_vectorize"] = vectorize
        if triton_check:
            # As on CUDA: padded GEMM operands; every access checked against the launch's
            # tensors, each kernel's tuning launch on copies included, with one of its first
            # three configs (coil.triton_interp_check)
            from coil import triton_interp_check

            triton_interp_check.enable(config=seed % 3, tuning=True)
            patch.update(cpu_backend="triton", triton_check_target="sm_90", gemm_padding="on")
        if cpp_wrapper:
            patch["cpp_wrapper"] = True
        with coil.config.patch(**patch), warnings.catch_warnings():
            warnings.simplefilter("error", coil.CoilWarning)
            compiled = torch.compile(fn, backend="coil", dynamic=dynamic)
            actual = compiled(*[t.clone() for t in inputs])
            fake = _fake_strides(program, inputs)
            n = len(actual) - _mask_count(program)
            exact = _exact_outputs(program, vals)[:n]
            _check(program, inputs, actual[:n], expected[:n], dtypes, fake[:n] if fake else fake,
                   exact)
            _check_masks(program, actual[n:], expected[n:], fake[n:] if fake else fake)
            _check_consistency(program, actual)
            if dynamic:
                grown = _grown(inputs, seed)
                try:
                    expected2 = _eager(program, grown)
                except Exception:  # noqa: BLE001 - the program fits its first size only
                    expected2 = None
                if expected2 is not None:
                    actual2 = compiled(*[t.clone() for t in grown])
                    try:
                        fake2 = _fake_strides(program, grown)
                    except Exception:  # noqa: BLE001
                        fake2 = None
                    _check(program, grown, actual2, expected2, dtypes, fake2)
            if train:
                _check_grads(program, inputs, seed, dtypes, dynamic)
    except Exception as e:  # noqa: BLE001 - every failure is reported with its seed
        msg = f"{type(e).__name__}: {e}\n{program.describe()}"
        if not isinstance(e, AssertionError):
            msg += "\n" + traceback.format_exc(limit=3)
        return Result(seed, False, msg, folder)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return Result(seed, True)


def _branch(program: Program, scale: float):
    """One branch of --control-flow's cond: the program over the operands, float ones scaled
    (exactly: by 1 or 0.5), its results copied (a branch may not return a view of an operand)."""

    def branch(*xs):
        xs = [x * scale if x.is_floating_point() else x for x in xs]
        return tuple(o.clone() for o in run_program(program, xs))

    return branch


def check_control_flow(seed: int, out_dir: str | None = None,
                       vectorize: str | None = None) -> Result:
    """--control-flow: the program as both branches of a torch.cond (the second over its float
    inputs halved), compiled once and called with the predicate true and false; each result is
    compared with the program run eagerly on that branch's inputs (values, dtypes, shapes; the
    branches are compiled by coil as graphs of their own, python/coil/opaque_calls.py). A
    program Dynamo does not capture as a cond (a branch it cannot trace) passes as skipped."""
    import coil

    program, inputs = generate(seed)
    vals = [t.clone() for t in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            vals.append(_apply(step, vals))
        expected = {p: _branch(program, scale)(*[t.clone() for t in inputs])
                    for p, scale in ((True, 1.0), (False, 0.5))}
    dtypes = {v.dtype for v in vals}
    torch._dynamo.reset()
    coil.reset()
    folder = tempfile.mkdtemp(prefix=f"seed{seed}_", dir=out_dir) if out_dir else None

    def fn(pred, *xs):
        return torch.cond(pred, _branch(program, 1.0), _branch(program, 0.5), tuple(xs))

    patch = {"debug_dir": folder}
    if vectorize:
        patch["cpp_vectorize"] = vectorize
    try:
        with coil.config.patch(**patch), warnings.catch_warnings():
            warnings.simplefilter("error", coil.CoilWarning)
            compiled = torch.compile(fn, backend="coil", fullgraph=True)
            for pred in (True, False):
                try:
                    actual = compiled(torch.tensor(pred), *[t.clone() for t in inputs])
                except (torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError) as e:
                    return Result(seed, True, f"skipped: Dynamo: {first_line(str(e))}", None)
                _compare(actual, expected[pred], dtypes, fake=None, values=True)
                # (strides: a cond's result has the layout Dynamo traced for both branches)
            if not any(r.kind == "subgraph" for r in coil.compiled_graphs()):
                raise AssertionError("the branches were not compiled by coil")
    except Exception as e:  # noqa: BLE001 - every failure is reported with its seed
        msg = f"{type(e).__name__}: {e}\n{program.describe()}"
        if not isinstance(e, AssertionError):
            msg += "\n" + traceback.format_exc(limit=3)
        return Result(seed, False, msg, folder)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return Result(seed, True)


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--perf" in argv:  # (its own options: coil/fuzz_perf.py)
        from coil import fuzz_perf

        return fuzz_perf.main([a for a in argv if a != "--perf"])
    parser = argparse.ArgumentParser(
        prog="python -m coil.fuzz", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: time-based)")
    parser.add_argument("--count", type=int, default=None, help="number of programs")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="time budget when --count is not given"
    )
    parser.add_argument(
        "--out", default="coil_fuzz_failures", help="where failing graphs are saved"
    )
    parser.add_argument(
        "--dynamic", action="store_true",
        help="compile with symbolic sizes and also run each program at a second size",
    )
    parser.add_argument(
        "--vectorize", choices=("auto", "on", "off"), default=None,
        help="compile under this cpp_vectorize option (on: vector loops even in small kernels)",
    )
    parser.add_argument(
        "--train", action="store_true",
        help="also compile a training step of each program and compare the inputs' gradients",
    )
    parser.add_argument(
        "--invariants", action="store_true",
        help="also return, for each amax/amin, the mask of the elements equal to it (every row "
             "has one in eager)",
    )
    parser.add_argument(
        "--pieces", action="store_true",
        help="also return pads, slice_scatters, three-way cats and rotate-halves of the "
             "program's values (kernels whose loops split where their pieces meet)",
    )
    parser.add_argument(
        "--triton-check", action="store_true",
        help="Triton kernels run by Triton's interpreter (set TRITON_INTERPRET=1), each also "
             "compiled for sm_90: a kernel the GPU compiler rejects fails its program",
    )
    parser.add_argument(
        "--cpp-wrapper", action="store_true",
        help="CPU graphs run through C++ wrappers built into their kernel libraries (option "
             "cpp_wrapper) instead of generated Python",
    )
    parser.add_argument(
        "--control-flow", action="store_true",
        help="each program as both branches of a torch.cond, called with the predicate true "
             "and false (the branches compiled by coil)",
    )
    parser.add_argument(
        "--flex", action="store_true",
        help="random flex_attention programs instead (score_mod and mask_mod bodies, "
             "BlockMasks, shapes; coil/fuzz_flex.py); with --train, gradients too; with "
             "--dynamic, symbolic lengths and a second length; --vectorize and --cpp-wrapper "
             "apply",
    )
    parser.add_argument(
        "--minimize", action="store_true",
        help="with --flex: shrink each failing program to the smallest that fails the same way",
    )
    parser.add_argument(
        "--perf", action="store_true",
        help="the performance fuzzer instead: coil vs Inductor vs eager, timed "
             "(coil/fuzz_perf.py; `python -m coil.fuzz --perf --help` for its options)",
    )
    args = parser.parse_args(argv)
    if args.triton_check and os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("--triton-check runs Triton kernels under Triton's interpreter: "
                     "set TRITON_INTERPRET=1")
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000 * 1000
    os.makedirs(args.out, exist_ok=True)
    flex_options = {}
    if args.vectorize:
        flex_options["cpp_vectorize"] = args.vectorize
    if args.cpp_wrapper:
        flex_options["cpp_wrapper"] = True
    start = time.time()
    ran = failed = skipped = 0
    while True:
        if args.count is not None and ran >= args.count:
            break
        if args.count is None and time.time() - start > args.seconds:
            break
        if args.flex:
            from coil import fuzz_flex

            r = fuzz_flex.check_flex(seed, args.out, train=args.train, dynamic=args.dynamic,
                                     options=flex_options)
        elif args.control_flow:
            r = check_control_flow(seed, args.out, vectorize=args.vectorize)
        else:
            r = check_seed(seed, args.out, dynamic=args.dynamic, vectorize=args.vectorize,
                           train=args.train, invariants=args.invariants, pieces=args.pieces,
                           triton_check=args.triton_check, cpp_wrapper=args.cpp_wrapper)
        ran += 1
        skipped += r.message.startswith("skipped")
        if not r.ok:
            failed += 1
            print(f"FAIL seed {seed} (graph: {r.folder})\n{r.message}\n", file=sys.stderr)
            if args.flex and args.minimize:
                smallest = fuzz_flex.minimize(fuzz_flex.generate(seed)[0], train=args.train,
                                              dynamic=args.dynamic, options=flex_options)
                print(f"smallest program failing as seed {seed} does:\n{smallest.describe()}\n",
                      file=sys.stderr)
        seed += 1
    note = f", {skipped} skipped (not captured by Dynamo)" if skipped else ""
    print(f"fuzz: {ran} programs, {failed} failed{note} ({time.time() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
