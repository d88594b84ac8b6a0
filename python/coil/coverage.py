"""OpInfo coverage: every op of PyTorch's OpInfo database, compiled and compared with eager.

    python -m coil.coverage                      # coil and Inductor, both modes -> docs/coverage.md
    python -m coil.coverage --backends coil --dtypes float32 --ops add,sum
    python -m coil.coverage --write-expected tests/python/opinfo_expected.txt

A case is one (op, dtype): the op's first sample input (every sample for reductions and indexing
ops), compiled with torch.compile(fullgraph=True, dynamic=False) and compared with eager under the
OpInfo's tolerances. A case passes only when its graph went through the backend's own compiler:
coil running a graph eagerly (its CoilWarning path) is a failure. Cases where eager itself raises
or the op has no sample for the dtype are skipped by construction (not counted).

Each sweep runs in one of two modes: "normal" (ATen fallback ops allowed) and "lowered" (a graph
that needs one fails: coil's allow_fallback=False; for Inductor, creating a FallbackKernel). A case
passing in both modes went through lowering; passing only in the normal mode, through a fallback.

Speed: building one shared library per graph costs ~0.2 s of g++ (mostly the headers), so cases
are compiled together, up to MAX_BATCH_SAMPLES samples in one graph; the outputs of every case are
compared separately. A batch that fails as a whole (a graph break, an eager fallback, a forbidden
fallback op) is split in halves until each failure is a single case, compiled alone, so every
failure has its own reason. Cases known to fail (the expected-failure file given as hints) are
compiled alone from the start. A numerics mismatch found in a batch is re-run alone, and that run
decides; a case that mismatches only inside a batch is reported separately (a compiler bug).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import math
import os
import re
import sys
import time
import warnings

import torch
from torch.utils import _pytree as pytree

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16)
MAX_BATCH_SAMPLES = 48
MAX_BATCH_CASES = 24

# Ops compiled with every sample input (the others: the first sample only).
INDEXING_OPS = frozenset(
    {
        "__getitem__",
        "_unsafe_masked_index",
        "_unsafe_masked_index_put_accumulate",
        "gather",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "index_reduce",
        "index_select",
        "masked_fill",
        "masked_scatter",
        "masked_select",
        "nn.functional.embedding",
        "nn.functional.embedding_bag",
        "put",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "take",
        "take_along_dim",
    }
)

# Ops whose values are random: compared by shape, dtype and finiteness only (their OpInfos call
# the op through wrapper_set_seed, which Dynamo cannot trace and the sweep replaces).
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "nn.functional.alpha_dropout",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.rrelu",
        "normal",
        "normal.in_place",
        "normal.number_mean",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "uniform",
    }
)

MODES = ("normal", "lowered")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def op_name(op) -> str:
    """The OpInfo's name with its variant: "max.reduction_with_dim"."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_db() -> list:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


# ------------------------------------------------------------------------------------------------
# Cases and their samples
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Sample:
    leaves: list  # the flattened (input, args, kwargs); tensors are replaced at call time
    spec: object  # pytree spec to rebuild (input, args, kwargs)
    tensor_slots: list  # positions of tensor leaves
    tensors: list  # the tensor leaves (never passed to a compiled function: clones are)
    expected: object  # eager's result


@dataclasses.dataclass
class Case:
    name: str
    dtype: torch.dtype
    op: object  # the OpInfo
    samples: list = dataclasses.field(default_factory=list)
    atol: float = 0.0  # the OpInfo's tolerance overrides for this dtype (0: none)
    rtol: float = 0.0

    @property
    def key(self) -> tuple:
        return (self.name, dtype_name(self.dtype))


@dataclasses.dataclass
class Outcome:
    name: str
    dtype: str
    status: str  # "pass", "fail", "skip"
    reason: str = ""
    samples: int = 0
    batched: bool = False  # passed inside a batch (False: compiled alone)

    @property
    def key(self) -> tuple:
        return (self.name, self.dtype)


def _noop_set_seed(op, *args, **kwargs):
    # OpInfos of random ops call them through wrapper_set_seed (freeze the RNG, seed 42), which
    # Dynamo cannot trace; their values are not compared, so the plain call is enough.
    return op(*args, **kwargs)


def _patch_testing_harness() -> None:
    import torch.testing._internal.common_methods_invocations as cmi

    cmi.wrapper_set_seed = _noop_set_seed


def case_dtypes(op, dtypes=DTYPES) -> list:
    supported = op.supported_dtypes("cpu")
    return [d for d in dtypes if d in supported]


def _tolerance_overrides(op, dtype: torch.dtype) -> tuple[float, float]:
    """The OpInfo's own tolerances for the dtype: the largest of its toleranceOverride /
    precisionOverride decorators that apply on CPU; (0, 0) when it has none."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    atol = rtol = 0.0
    for info in getattr(op, "decorators", ()) or ():
        decorators = [info]
        if isinstance(info, DecorateInfo):
            if info.device_type not in (None, "cpu") or not info.active_if:
                continue
            if info.dtypes is not None and dtype not in info.dtypes:
                continue
            decorators = info.decorators
        for dec in decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                atol = max(atol, dec.d[dtype].atol)
                rtol = max(rtol, dec.d[dtype].rtol)
            elif isinstance(dec, precisionOverride) and dtype in dec.d:
                atol = max(atol, dec.d[dtype])
    return atol, rtol


def _clone_tree(x):
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def _call(op, sample_leaves, spec, slots, tensors):
    leaves = list(sample_leaves)
    for slot, t in zip(slots, tensors):
        leaves[slot] = t
    inp, args, kwargs = pytree.tree_unflatten(leaves, spec)
    return op(inp, *args, **kwargs)


def prepare(op, dtype: torch.dtype) -> Case | None:
    """The case's samples with eager's results; None when no sample runs eagerly."""
    name = op_name(op)
    torch.manual_seed(0)
    every = op.name in INDEXING_OPS or _is_reduction(op)
    case = Case(name, dtype, op)
    case.atol, case.rtol = _tolerance_overrides(op, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = op.sample_inputs("cpu", dtype, requires_grad=False)
            for s in samples:
                leaves, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
                slots = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
                if any(leaves[i].layout != torch.strided for i in slots):
                    continue  # sparse inputs: not what a compiler backend is asked to handle
                tensors = [leaves[i] for i in slots]
                try:
                    expected = _call(op.op, leaves, spec, slots, _clone_tree(tensors))
                except Exception:  # noqa: BLE001, S112 - eager raises: skipped by construction
                    continue
                if _has_unsupported_output(expected):
                    continue
                case.samples.append(Sample(leaves, spec, slots, tensors, expected))
                if not every:
                    break
        except Exception:  # noqa: BLE001, S110 - a sample generator that raises: no samples
            pass
    return case if case.samples else None


def _is_reduction(op) -> bool:
    from torch.testing._internal.opinfo.core import ReductionOpInfo

    return isinstance(op, ReductionOpInfo)


def _has_unsupported_output(x) -> bool:
    """Complex or sparse results: outside what the sweep compares."""
    for leaf in pytree.tree_leaves(x):
        if isinstance(leaf, torch.Tensor) and (leaf.is_complex() or leaf.layout != torch.strided):
            return True
    return False


def all_cases(dtypes=DTYPES, only=None):
    """(op, dtype) pairs in op_db order (the OpInfo objects; samples are made later)."""
    for op in op_db():
        name = op_name(op)
        if only is not None and name not in only and op.name not in only:
            continue
        for dtype in case_dtypes(op, dtypes):
            yield op, dtype


# ------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------


def compare(case: Case, actual: list) -> str:
    """'' when every sample's result matches eager; otherwise what differs (first mismatch)."""
    random = case.name in RANDOM_OPS
    for i, (sample, got) in enumerate(zip(case.samples, actual)):
        try:
            if random:
                _compare_random(got, sample.expected)
            else:
                _compare(got, sample.expected, case.atol, case.rtol)
        except Exception as e:  # noqa: BLE001 - any difference is a mismatch
            first = _first_line(str(e))
            detail = _mismatch_detail(str(e))
            where = f"sample {i}: " if len(case.samples) > 1 else ""
            return f"numerics mismatch: {where}{first}{detail}"
    return ""


def _compare(got, expected, atol: float, rtol: float) -> None:
    """Structure, then each leaf: tensors by assert_close with the defaults of the leaf's dtype,
    loosened by the OpInfo's overrides (keyed by the case's dtype; an int64 op may return
    float32); other values by equality."""
    from torch.testing._comparison import default_tolerances

    g_leaves, g_spec = pytree.tree_flatten(got)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if g_spec != e_spec:
        raise AssertionError(f"output structure {g_spec} != eager {e_spec}")
    for k, (g, e) in enumerate(zip(g_leaves, e_leaves)):
        if not isinstance(e, torch.Tensor):
            both_nan = (
                isinstance(e, float) and math.isnan(e) and isinstance(g, float) and math.isnan(g)
            )
            if not (g == e or both_nan):
                raise AssertionError(f"output {k}: {g!r} != eager {e!r}")
            continue
        if not isinstance(g, torch.Tensor):
            raise AssertionError(f"output {k}: {type(g).__name__} where eager has a tensor")  # noqa: TRY004
        d_rtol, d_atol = default_tolerances(e)
        torch.testing.assert_close(
            g,
            e,
            atol=max(atol, d_atol),
            rtol=max(rtol, d_rtol),
            equal_nan=True,
            check_stride=False,
        )


def _compare_random(got, expected) -> None:
    g_leaves, g_spec = pytree.tree_flatten(got)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if g_spec != e_spec:
        raise AssertionError(f"output structure {g_spec} != eager {e_spec}")
    for g, e in zip(g_leaves, e_leaves):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            raise AssertionError(f"random op: {_describe(g)} != eager {_describe(e)}")
        if e.is_floating_point() and bool(e.isfinite().all()) and not bool(g.isfinite().all()):
            raise AssertionError("random op: non-finite values where eager has none")


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{dtype_name(t.dtype)}{list(t.shape)}"
    return type(t).__name__


def _first_line(msg: str) -> str:
    for line in msg.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def _mismatch_detail(msg: str) -> str:
    m = re.search(r"Greatest absolute difference: ([^ ]+)", msg)
    return f" (max abs diff {m.group(1)})" if m else ""


# ------------------------------------------------------------------------------------------------
# Backends
# ------------------------------------------------------------------------------------------------


class _ForbiddenFallback(Exception):
    pass


class CoilRunner:
    """Compiles with backend="coil"; a graph that ran eagerly fails the batch."""

    name = "coil"

    def __init__(self, mode: str):
        import coil

        self.coil = coil
        self.mode = mode

    def reset(self) -> None:
        self.coil.reset()
        torch._dynamo.reset()

    def context(self):
        return self.coil.config.patch(allow_fallback=self.mode == "normal")

    def failure(self) -> str:
        """Why the graphs compiled since reset() did not go through coil ('' if they did)."""
        for r in self.coil.compiled_graphs():
            if r.eager_fallback:
                if r.eager_reason.startswith("ATen fallback ops not allowed"):
                    return "ATen fallback: " + r.eager_reason.split(": ", 1)[1]
                return "eager fallback: " + _first_line(r.eager_reason)
        return ""


class InductorRunner:
    """Compiles with backend="inductor"; in "lowered" mode a FallbackKernel fails the batch.

    Inductor runs an op it has no lowering for through ir.FallbackKernel (and a few dedicated
    fallback nodes for scatter/index_put/bernoulli/copy_); creating one is what "fell back" means
    here. mm/conv go through ExternKernel calls, which are not fallbacks, as in coil.
    """

    name = "inductor"
    _FALLBACK_CLASSES = (
        "FallbackKernel",
        "ScatterFallback",
        "IndexPutFallback",
        "InplaceBernoulliFallback",
        "InplaceCopyFallback",
    )

    def __init__(self, mode: str):
        import torch._inductor.config as iconfig
        from torch._inductor import ir

        self.mode = mode
        self.ir = ir
        self.iconfig = iconfig
        self.fallbacks: list = []
        self._originals = {}

    def reset(self) -> None:
        self.fallbacks.clear()
        torch._dynamo.reset()

    def _hook(self, cls_name):
        original = getattr(self.ir, cls_name).__init__
        runner = self

        def init(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            op = getattr(obj, "op_overload", None) or getattr(obj, "python_kernel_name", None)
            what = str(op) if op is not None else type(obj).__name__
            runner.fallbacks.append(what)
            if runner.mode == "lowered":
                raise _ForbiddenFallback(what)

        return original, init

    def context(self):
        import contextlib

        @contextlib.contextmanager
        def ctx():
            saved = {}
            for cls_name in self._FALLBACK_CLASSES:
                cls = getattr(self.ir, cls_name, None)
                if cls is None:
                    continue
                original, init = self._hook(cls_name)
                saved[cls] = original
                cls.__init__ = init
            try:
                # Cached graphs skip lowering, where fallbacks are detected.
                with self.iconfig.patch(
                    fx_graph_cache=False, autotune_local_cache=False, compile_threads=1
                ):
                    yield
            finally:
                for cls, original in saved.items():
                    cls.__init__ = original

        return ctx()

    def failure(self) -> str:
        if self.mode == "lowered" and self.fallbacks:
            return "ATen fallback: " + ", ".join(sorted(set(self.fallbacks)))
        return ""


def make_runner(backend: str, mode: str):
    if backend == "coil":
        return CoilRunner(mode)
    if backend == "inductor":
        return InductorRunner(mode)
    raise ValueError(f"unknown backend {backend!r} (coil or inductor)")


# ------------------------------------------------------------------------------------------------
# Running cases
# ------------------------------------------------------------------------------------------------


def classify_exception(e: BaseException) -> str:
    """A short reason, prefixed by its group, for an exception raised by torch.compile or the
    compiled call."""
    chain = []
    cur = e
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for c in chain:
        if isinstance(c, _ForbiddenFallback):
            return f"ATen fallback: {c}"
    import torch._dynamo.exc as dexc

    inner = chain[-1]
    if isinstance(e, dexc.BackendCompilerFailed):
        inner = getattr(e, "inner_exception", None) or inner
        return f"backend error: {type(inner).__name__}: {_first_line(str(inner))}"
    if isinstance(e, (dexc.Unsupported, dexc.UserError, dexc.TorchRuntimeError)) or type(
        e
    ).__module__.startswith("torch._dynamo"):
        msg = _first_line(str(e))
        explanation = re.search(r"Explanation: (.*)", str(e))
        if explanation:
            msg = f"{msg}: {explanation.group(1).strip()}"
        return f"dynamo: {type(e).__name__}: {msg[:200]}"
    return f"runtime error: {type(e).__name__}: {_first_line(str(e))}"


@dataclasses.dataclass
class _GroupResult:
    failure: str  # '' when the group compiled through the backend
    mismatches: dict  # case index -> reason


def run_group(runner, cases: list) -> _GroupResult:
    """Compiles all samples of all cases as one function (one graph) and runs it once."""
    runner.reset()
    plan = []  # per case, per sample: (op, leaves, spec, slots, first input index)
    inputs = []
    for case in cases:
        rows = []
        for s in case.samples:
            rows.append((case.op.op, s.leaves, s.spec, s.tensor_slots, len(inputs)))
            inputs.extend(t.clone() for t in s.tensors)
        plan.append(rows)

    def batch(*ts):
        out = []
        for rows in plan:
            case_out = []
            for op, leaves, spec, slots, first in rows:
                case_out.append(_call(op, leaves, spec, slots, ts[first : first + len(slots)]))
            out.append(case_out)
        return out

    torch.manual_seed(0)
    try:
        with runner.context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch.compile(batch, backend=runner.name, fullgraph=True, dynamic=False)
            actual = compiled(*inputs)
    except Exception as e:  # noqa: BLE001 - every failure becomes a reason
        return _GroupResult(classify_exception(e), {})
    failure = runner.failure()
    if failure:
        return _GroupResult(failure, {})
    mismatches = {}
    for i, (case, got) in enumerate(zip(cases, actual)):
        why = compare(case, got)
        if why:
            mismatches[i] = why
    return _GroupResult("", mismatches)


@dataclasses.dataclass
class SweepResult:
    backend: str
    mode: str
    outcomes: dict  # (name, dtype) -> Outcome
    batch_only_mismatches: list  # names of cases that mismatched only inside a batch
    seconds: float = 0.0
    graphs: int = 0  # compiled groups (batches and single cases)


def _batches(cases: list) -> list:
    out, cur, n = [], [], 0
    for c in cases:
        k = len(c.samples)
        if cur and (n + k > MAX_BATCH_SAMPLES or len(cur) >= MAX_BATCH_CASES):
            out.append(cur)
            cur, n = [], 0
        cur.append(c)
        n += k
    if cur:
        out.append(cur)
    return out


def sweep(
    backend: str,
    mode: str,
    dtypes=DTYPES,
    only=None,
    alone=frozenset(),
    progress=None,
) -> SweepResult:
    """Runs every (op, dtype) case. `alone`: keys of cases to compile alone (expected failures)."""
    _patch_testing_harness()
    runner = make_runner(backend, mode)
    result = SweepResult(backend, mode, {}, [])
    start = time.time()
    pending = []  # prepared cases not yet run, grouped by dtype order of op_db

    def record(case: Case, status: str, reason: str = "", batched: bool = False) -> None:
        o = Outcome(case.name, dtype_name(case.dtype), status, reason, len(case.samples), batched)
        result.outcomes[case.key] = o
        if progress:
            progress(o)

    def run_alone(case: Case, batch_reason: str = "") -> None:
        g = run_group(runner, [case])
        result.graphs += 1
        if g.failure:
            record(case, "fail", g.failure)
        elif g.mismatches:
            record(case, "fail", g.mismatches[0])
        else:
            if batch_reason:
                result.batch_only_mismatches.append(
                    f"{case.name} {dtype_name(case.dtype)}: {batch_reason}"
                )
            record(case, "pass")

    def run_batch(cases: list) -> None:
        work = [cases]
        while work:
            group = work.pop()
            if len(group) == 1:
                run_alone(group[0])
                continue
            g = run_group(runner, group)
            result.graphs += 1
            if g.failure:
                half = len(group) // 2
                work.append(group[half:])
                work.append(group[:half])
                continue
            for i, case in enumerate(group):
                if i in g.mismatches:
                    run_alone(case, g.mismatches[i])
                else:
                    record(case, "pass", batched=True)

    def flush() -> None:
        solo = [c for c in pending if c.key in alone]
        rest = [c for c in pending if c.key not in alone]
        for c in solo:
            run_alone(c)
        for b in _batches(rest):
            run_batch(b)
        pending.clear()

    for op, dtype in all_cases(dtypes, only):
        case = prepare(op, dtype)
        if case is None:
            o = Outcome(op_name(op), dtype_name(dtype), "skip", "no sample runs eagerly")
            result.outcomes[o.key] = o
            continue
        pending.append(case)
        if sum(len(c.samples) for c in pending) >= 4 * MAX_BATCH_SAMPLES:
            flush()
    flush()
    runner.reset()
    result.seconds = time.time() - start
    return result


# ------------------------------------------------------------------------------------------------
# Expected-failure file
# ------------------------------------------------------------------------------------------------


def reason_group(reason: str) -> str:
    """The group a reason belongs to: the text before the first ':'."""
    return reason.split(":", 1)[0]


def read_expected(path: str) -> dict:
    """{(name, dtype): reason} from lines "name dtype reason"; '#' starts a comment line."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2:
                raise ValueError(f"{path}: bad line {line!r} (expected 'op dtype reason')")
            out[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    return out


def write_expected(path: str, sweeps: list, header: str) -> None:
    failures = {}
    for s in sweeps:
        for key, o in s.outcomes.items():
            if o.status == "fail":
                failures[key] = o.reason
    by_group = collections.defaultdict(list)
    for key, reason in failures.items():
        by_group[reason_group(reason)].append((key, reason))
    lines = [header.rstrip(), ""]
    for group in sorted(by_group):
        lines.append(f"# --- {group} ({len(by_group[group])}) ---")
        for (name, dtype), reason in sorted(by_group[group]):
            lines.append(f"{name} {dtype} {_one_line(reason)}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _one_line(s: str) -> str:
    return " ".join(s.split())[:240]


EXPECTED_HEADER = """\
# Expected failures of the OpInfo sweep (tests/python/test_opinfo.py), normal mode (ATen fallback
# ops allowed): one "op dtype reason" per line, grouped by reason. An unexpected pass fails the
# test, so this list can only shrink: delete the line of a case that now passes.
# Regenerate with: python -m coil.coverage --backends coil --modes normal \\
#     --write-expected tests/python/opinfo_expected.txt
"""


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Summary:
    tried: int
    lowered: int
    via_fallback: int
    failed: int
    failures_by_group: dict


def summarize(normal: SweepResult, lowered: SweepResult | None) -> Summary:
    tried = lowered_n = via_fb = failed = 0
    groups = collections.Counter()
    for key, o in normal.outcomes.items():
        if o.status == "skip":
            continue
        tried += 1
        if o.status == "fail":
            failed += 1
            groups[reason_group(o.reason)] += 1
            continue
        lo = lowered.outcomes.get(key) if lowered else None
        if lo is not None and lo.status == "pass":
            lowered_n += 1
        else:
            via_fb += 1
    return Summary(tried, lowered_n, via_fb, failed, dict(groups))


def missing_lowerings(coil: dict, inductor: dict) -> list:
    """Cases Inductor lowers (passes with fallbacks forbidden) and coil does not: [(name, dtype,
    coil's reason)] with coil's reason from the lowered-only sweep, else the normal one."""
    out = []
    ind_lowered = inductor.get("lowered")
    if ind_lowered is None:
        return out
    for key, o in ind_lowered.outcomes.items():
        if o.status != "pass":
            continue
        c = coil["lowered"].outcomes.get(key) if "lowered" in coil else None
        cn = coil["normal"].outcomes.get(key) if "normal" in coil else None
        if c is not None and c.status == "pass":
            continue
        if c is None and (cn is None or cn.status == "pass"):
            continue
        reason = cn.reason if cn is not None and cn.status == "fail" else c.reason
        out.append((key[0], key[1], reason))
    return out


def _rank_missing(missing: list) -> list:
    """Groups missing cases by the ATen op (or reason) that blocks them, most cases first."""
    blockers = collections.defaultdict(list)
    for name, dtype, reason in missing:
        if reason.startswith("ATen fallback: "):
            for aten in reason[len("ATen fallback: ") :].split(", "):
                blockers[aten].append((name, dtype))
        else:
            blockers[reason].append((name, dtype))
    return sorted(blockers.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def render_report(results: dict, command: str, seconds: float) -> str:
    """Markdown for docs/coverage.md. results: {backend: {mode: SweepResult}}."""
    today = datetime.date.today().isoformat()
    lines = [
        "# OpInfo coverage",
        "",
        f"Generated {today} with torch {torch.__version__} by:",
        "",
        "```bash",
        command,
        "```",
        "",
        (
            f"({seconds / 60:.1f} minutes on this machine.) A case is one (OpInfo op incl. "
            "variant, "
            "dtype) on CPU, dtypes float32, float64, int64, bool and bfloat16 where the op supports "
            "them; the first sample input (every sample for reductions and indexing ops), compiled "
            "with `torch.compile(fn, backend=..., fullgraph=True, dynamic=False)` and compared with "
            "eager under the OpInfo's tolerances. Cases where eager raises or that have no sample "
            "are not counted. *Lowered*: passes with ATen fallback ops forbidden (coil: "
            "`COIL_ALLOW_FALLBACK=0`; Inductor: no `FallbackKernel`); *via fallback*: passes only "
            "when fallbacks are allowed; *failed*: fails even then (a graph coil runs eagerly counts "
            "as a failure). Extern calls (mm, conv) count as lowered for both."
        ),
        "",
        "| backend | cases tried | lowered | via fallback | failed |",
        "|---|---:|---:|---:|---:|",
    ]
    summaries = {}
    for backend, modes in results.items():
        s = summarize(modes["normal"], modes.get("lowered"))
        summaries[backend] = s
        lines.append(f"| {backend} | {s.tried} | {s.lowered} | {s.via_fallback} | {s.failed} |")
    lines.append("")
    if "coil" in results and "inductor" in results:
        missing = missing_lowerings(results["coil"], results["inductor"])
        ranked = _rank_missing(missing)
        lines += [
            "## What to lower next: cases Inductor lowers and coil does not",
            "",
            (
                f"{len(missing)} (op, dtype) cases pass through Inductor's own lowering but fall "
                "back or fail in coil. Ranked by the ATen op (or failure) that blocks them, most "
                "cases first (top 30):"
            ),
            "",
            "| # | blocking ATen op / reason | cases | ops (dtypes) |",
            "|---:|---|---:|---|",
        ]
        for i, (blocker, keys) in enumerate(ranked[:30], 1):
            by_op = collections.defaultdict(list)
            for name, dtype in keys:
                by_op[name].append(dtype)
            ops = "; ".join(f"{n} ({', '.join(ds)})" for n, ds in sorted(by_op.items()))
            lines.append(f"| {i} | `{_md(blocker)}` | {len(keys)} | {_md(ops)} |")
        lines += ["", "<details><summary>Every such case (op, dtype, coil's reason)</summary>", ""]
        lines += ["| op | dtype | coil's reason |", "|---|---|---|"]
        for name, dtype, reason in sorted(missing):
            lines.append(f"| {name} | {dtype} | {_md(_one_line(reason))} |")
        lines += ["", "</details>", ""]
    for backend, modes in results.items():
        s = summaries[backend]
        lines += [f"## {backend}: failures by reason", ""]
        lines += ["| reason group | cases |", "|---|---:|"]
        for group, n in sorted(s.failures_by_group.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {_md(group)} | {n} |")
        lines.append("")
        normal = modes["normal"]
        fails = [o for o in normal.outcomes.values() if o.status == "fail"]
        if fails:
            lines += [
                f"<details><summary>{backend}: every failing case</summary>",
                "",
                "| op | dtype | reason |",
                "|---|---|---|",
            ]
            for o in sorted(fails, key=lambda o: (reason_group(o.reason), o.name, o.dtype)):
                lines.append(f"| {o.name} | {o.dtype} | {_md(_one_line(o.reason))} |")
            lines += ["", "</details>", ""]
        for mode, r in modes.items():
            lines.append(
                f"- {backend} {mode} sweep: {r.graphs} compiled graphs, {r.seconds:.0f} s"
                + (
                    f"; mismatched only inside a batch: {', '.join(r.batch_only_mismatches)}"
                    if r.batch_only_mismatches
                    else ""
                )
            )
        lines.append("")
    return "\n".join(lines)


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


# ------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------


def _parse_dtypes(text: str) -> tuple:
    names = {dtype_name(d): d for d in DTYPES}
    out = []
    for t in text.split(","):
        if t not in names:
            raise SystemExit(f"unknown dtype {t!r}; choose from {', '.join(names)}")
        out.append(names[t])
    return tuple(out)


def _default_hints() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "tests", "python", "opinfo_expected.txt")
    return path if os.path.exists(path) else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coil.coverage", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--backends", default="coil,inductor", help="comma list: coil,inductor")
    parser.add_argument("--modes", default="normal,lowered", help="comma list: normal,lowered")
    parser.add_argument("--dtypes", default=",".join(dtype_name(d) for d in DTYPES))
    parser.add_argument("--ops", default=None, help="comma list of op names (default: all)")
    parser.add_argument("--out", default=None, help="write the Markdown report here")
    parser.add_argument(
        "--write-expected", default=None, help="write coil's normal-mode failures here"
    )
    parser.add_argument(
        "--hints",
        default=_default_hints(),
        help="expected-failure file: its cases are compiled alone (speed only)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failing case")
    args = parser.parse_args(argv)
    backends = args.backends.split(",")
    modes = args.modes.split(",")
    dtypes = _parse_dtypes(args.dtypes)
    only = frozenset(args.ops.split(",")) if args.ops else None
    hints = frozenset(read_expected(args.hints)) if args.hints else frozenset()
    command = "python -m coil.coverage " + " ".join(argv if argv is not None else sys.argv[1:])

    def progress(o: Outcome) -> None:
        if args.verbose and o.status == "fail":
            print(f"  FAIL {o.name} {o.dtype}: {o.reason}", flush=True)

    start = time.time()
    results = {}
    for backend in backends:
        results[backend] = {}
        for mode in modes:
            # Inductor's known failures are not in the hint file; its lowered-mode fallbacks are
            # found by splitting batches.
            alone = hints if backend == "coil" else frozenset()
            r = sweep(backend, mode, dtypes, only, alone, progress)
            results[backend][mode] = r
            s = summarize(r, None)
            print(
                f"{backend} {mode}: {s.tried} tried, {s.tried - s.failed} passed, {s.failed} failed"
                f" ({r.graphs} graphs, {r.seconds:.0f} s)",
                flush=True,
            )
            for group, n in sorted(s.failures_by_group.items(), key=lambda kv: -kv[1]):
                print(f"    {n:5d}  {group}")
            if r.batch_only_mismatches:
                print(f"    mismatched only inside a batch: {r.batch_only_mismatches}")
    seconds = time.time() - start
    for backend, ms in results.items():
        if "normal" in ms:
            s = summarize(ms["normal"], ms.get("lowered"))
            print(
                f"{backend}: {s.tried} cases tried, {s.lowered} lowered, "
                f"{s.via_fallback} via fallback, {s.failed} failed"
            )
    if args.write_expected and "coil" in results and "normal" in results["coil"]:
        write_expected(args.write_expected, [results["coil"]["normal"]], EXPECTED_HEADER)
        print(f"wrote {args.write_expected}")
    if args.out and all("normal" in ms for ms in results.values()):
        with open(args.out, "w") as f:
            f.write(render_report(results, command, seconds))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
