"""Compiling a group of cases as one graph with a backend, and telling how the backend handled it.

A runner knows one backend in one mode:
- "normal": ATen fallback ops allowed; the runner records which ones the graph used.
- "lowered": a graph that needs an ATen fallback op fails. coil: allow_fallback=False (the graph
  runs eagerly, which the runner reports). Inductor: creating a FallbackKernel raises; such a run
  only checks lowering (it stops before code generation, see InductorRunner), since the same
  group already ran and matched eager in the normal mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import warnings

import torch

from coil.coverage.cases import compare, first_line


# Whether sweeps compile with symbolic sizes (python -m coil.coverage --dynamic): every case
# traced with dynamic=True, so each op meets its symbolic-size path in both backends.
DYNAMIC = [False]


class _ForbiddenFallback(Exception):
    """Raised inside Inductor when a lowered-mode graph creates a fallback kernel."""


class _LoweringDone(Exception):
    """Raised inside Inductor after lowering: a lowered-mode check needs no code."""


class CoilRunner:
    """backend="coil"; a graph that coil ran eagerly (CoilWarning) fails the group."""

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
                return "eager fallback: " + first_line(r.eager_reason)
        return ""

    def fallbacks(self) -> list:
        return sorted({op for r in self.coil.compiled_graphs() for op in r.fallback_ops})


class InductorRunner:
    """backend="inductor". Inductor runs an op it has no lowering for through ir.FallbackKernel
    (and a few dedicated fallback nodes: scatter, index_put, bernoulli_, copy_); creating one is
    what "fell back" means here (checked: sort, cumsum and masked_select create one on CPU; mm and
    convolution are ExternKernel calls, not fallbacks, as in coil)."""

    name = "inductor"
    _FALLBACK_CLASSES = (
        "FallbackKernel",
        "ScatterFallback",
        "IndexPutFallback",
        "InplaceBernoulliFallback",
        "InplaceCopyFallback",
    )

    def __init__(self, mode: str):
        self.mode = mode
        self._seen: list = []

    def reset(self) -> None:
        self._seen.clear()
        torch._dynamo.reset()

    def _on_fallback(self, obj) -> None:
        op = getattr(obj, "op_overload", None) or getattr(obj, "python_kernel_name", None)
        what = str(op) if op is not None else type(obj).__name__
        self._seen.append(what)
        if self.mode == "lowered":
            raise _ForbiddenFallback(what)

    @contextlib.contextmanager
    def context(self):
        import torch._inductor.config as iconfig
        from torch._inductor import ir
        from torch._inductor.graph import GraphLowering

        saved = []

        def patch(owner, attr, make):
            original = getattr(owner, attr)
            saved.append((owner, attr, original))
            setattr(owner, attr, make(original))

        def hooked_init(original):
            def init(obj, *args, **kwargs):
                original(obj, *args, **kwargs)
                self._on_fallback(obj)

            return init

        def stop(original):
            def after_lowering(*args, **kwargs):
                raise _LoweringDone

            return after_lowering

        for cls_name in self._FALLBACK_CLASSES:
            if hasattr(ir, cls_name):
                patch(getattr(ir, cls_name), "__init__", hooked_init)
        if self.mode == "lowered":
            for attr in ("codegen", "codegen_with_cpp_wrapper", "compile_to_module"):
                patch(GraphLowering, attr, stop)
        try:
            # A cached graph would skip lowering, where fallbacks are seen.
            with iconfig.patch(fx_graph_cache=False, autotune_local_cache=False, compile_threads=1):
                yield
        finally:
            for owner, attr, original in reversed(saved):
                setattr(owner, attr, original)

    def failure(self) -> str:
        if self.mode == "lowered" and self._seen:
            return "ATen fallback: " + ", ".join(sorted(set(self._seen)))
        return ""

    def fallbacks(self) -> list:
        return sorted(set(self._seen))


def make_runner(backend: str, mode: str):
    if backend == "coil":
        return CoilRunner(mode)
    if backend == "inductor":
        return InductorRunner(mode)
    raise ValueError(f"unknown backend {backend!r} (coil or inductor)")


def classify_exception(e: BaseException) -> str:
    """A short reason, prefixed by its group ("dynamo", "backend error", ...), for an exception
    raised by torch.compile or by the compiled call."""
    import torch._dynamo.exc as dexc

    chain = []
    cur = e
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for c in chain:
        if isinstance(c, _ForbiddenFallback):
            return f"ATen fallback: {c}"
    if isinstance(e, dexc.BackendCompilerFailed):
        inner = getattr(e, "inner_exception", None) or chain[-1]
        return f"backend error: {type(inner).__name__}: {first_line(str(inner))}"
    if type(e).__module__.startswith("torch._dynamo"):
        msg = first_line(str(e))
        explanation = re.search(r"Explanation: (.*)", str(e))
        if explanation:
            msg = f"{msg}: {explanation.group(1).strip()}"
        return f"dynamo: {type(e).__name__}: {msg[:200]}"
    return f"runtime error: {type(e).__name__}: {first_line(str(e))}"


def _lowering_done(e: BaseException) -> bool:
    cur, depth = e, 0
    while cur is not None and depth < 8:
        if isinstance(cur, _LoweringDone):
            return True
        cur, depth = cur.__cause__ or cur.__context__, depth + 1
    return False


@dataclasses.dataclass
class GroupResult:
    failure: str  # '' when the group went through the backend's compiler
    mismatches: dict  # index of a case in the group -> why it differs from eager
    fallbacks: list  # ATen fallback ops the group's graphs used (normal mode)


def run_group(runner, cases: list) -> GroupResult:
    """Compiles all samples of all cases as one function (one graph), runs it once and compares
    each case with eager. (Inductor's lowered mode stops after lowering: nothing runs.)"""
    runner.reset()
    ops = [case.op.op for case in cases]
    # The samples are arguments (Dynamo makes their tensors graph inputs); the traced function
    # only calls the ops, so tracing costs what the ops cost.
    data = [[s.fresh() for s in case.samples] for case in cases]

    def batch(data):
        return [
            [op(inp, *args, **kwargs) for inp, args, kwargs in samples]
            for op, samples in zip(ops, data)
        ]

    torch.manual_seed(0)
    try:
        with runner.context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch.compile(batch, backend=runner.name, fullgraph=True,
                                     dynamic=DYNAMIC[0])
            actual = compiled(data)
    except Exception as e:  # noqa: BLE001 - every failure becomes a reason
        if _lowering_done(e):
            return GroupResult("", {}, [])
        return GroupResult(classify_exception(e), {}, runner.fallbacks())
    failure = runner.failure()
    if failure:
        return GroupResult(failure, {}, runner.fallbacks())
    mismatches = {}
    for i, (case, got) in enumerate(zip(cases, actual)):
        why = compare(case, got)
        if why:
            mismatches[i] = why
    return GroupResult("", mismatches, runner.fallbacks())
