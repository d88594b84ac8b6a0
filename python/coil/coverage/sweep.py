"""The sweep: every case compiled, in batches, in the normal mode and optionally the lowered mode.

Building one shared library per graph costs coil ~0.2 s of g++ and Dynamo's tracing a fixed cost
per graph, so cases are compiled together, up to MAX_BATCH_SAMPLES samples in one graph; the
outputs of every case are compared separately. A batch that fails as a whole (a graph break, an
eager fallback) is split in halves until each failure is a single case compiled alone, so every
failure has its own reason. Cases given in `alone` (the expected failures) are compiled alone
from the start. A case that mismatches eager inside a batch is re-run alone and that run decides;
one that mismatches only inside a batch is reported in batch_only_mismatches (a compiler bug).

Lowered mode: the cases that passed in a batch whose graph used no ATen fallback op passed through
lowering. Where the batch used one, the passing cases are re-checked with fallbacks forbidden,
splitting the group until each case that needs a fallback is alone.
"""

from __future__ import annotations

import dataclasses
import time

from coil.coverage.cases import (
    DTYPES,
    Case,
    all_cases,
    dtype_name,
    op_name,
    patch_testing_harness,
    prepare,
)
from coil.coverage.runners import make_runner, run_group

MAX_BATCH_SAMPLES = 48
MAX_BATCH_CASES = 24
MODES = ("normal", "lowered")


@dataclasses.dataclass
class Outcome:
    name: str
    dtype: str
    status: str  # "pass", "fail", "skip"
    reason: str = ""
    samples: int = 0

    @property
    def key(self) -> tuple:
        return (self.name, self.dtype)


@dataclasses.dataclass
class SweepResult:
    backend: str
    mode: str
    outcomes: dict = dataclasses.field(default_factory=dict)  # (name, dtype) -> Outcome
    batch_only_mismatches: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    graphs: int = 0  # groups compiled (batches and single cases)


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


def _split(group: list) -> list:
    half = len(group) // 2
    return [group[half:], group[:half]]  # the worklist pops the first half first


class _Sweep:
    def __init__(self, backend: str, modes, progress):
        unknown = set(modes) - set(MODES)
        if unknown or "normal" not in modes:
            raise ValueError(f"modes must include 'normal' and be among {MODES}; got {modes}")
        self.normal = make_runner(backend, "normal")
        self.lowered = make_runner(backend, "lowered") if "lowered" in modes else None
        self.results = {m: SweepResult(backend, m) for m in modes}
        self.progress = progress

    def record(self, mode: str, case: Case, status: str, reason: str = "") -> None:
        o = Outcome(case.name, dtype_name(case.dtype), status, reason, len(case.samples))
        self.results[mode].outcomes[case.key] = o
        if self.progress:
            self.progress(mode, o)

    def fail(self, case: Case, reason: str) -> None:
        """A case that fails in the normal mode fails in the lowered mode too."""
        for mode in self.results:
            self.record(mode, case, "fail", reason)

    def run(self, cases: list) -> None:
        suspects = {}  # case key -> its mismatch inside a batch
        work = [cases]
        while work:
            group = work.pop()
            g = run_group(self.normal, group)
            self.results["normal"].graphs += 1
            if g.failure:
                if len(group) == 1:
                    self.fail(group[0], g.failure)
                else:
                    work.extend(_split(group))
                continue
            passing = []
            for i, case in enumerate(group):
                if i not in g.mismatches:
                    passing.append(case)
                elif len(group) == 1:
                    self.fail(case, g.mismatches[i])
                else:
                    suspects[case.key] = g.mismatches[i]
                    work.append([case])
            for case in passing:
                if case.key in suspects:
                    self.results["normal"].batch_only_mismatches.append(
                        f"{case.name} {dtype_name(case.dtype)}: {suspects[case.key]}"
                    )
                self.record("normal", case, "pass")
            if self.lowered is not None and passing:
                if g.fallbacks:
                    self.check_lowered(passing)
                else:
                    for case in passing:
                        self.record("lowered", case, "pass")

    def check_lowered(self, cases: list) -> None:
        work = [cases]
        while work:
            group = work.pop()
            g = run_group(self.lowered, group)
            self.results["lowered"].graphs += 1
            if not g.failure and not g.mismatches:
                for case in group:
                    self.record("lowered", case, "pass")
            elif len(group) == 1:
                self.record("lowered", group[0], "fail", g.failure or g.mismatches[0])
            else:
                work.extend(_split(group))

    def skip(self, op, dtype) -> None:
        for r in self.results.values():
            o = Outcome(op_name(op), dtype_name(dtype), "skip", "no sample runs eagerly")
            r.outcomes[o.key] = o


def sweep(
    backend: str,
    modes=("normal",),
    dtypes=DTYPES,
    only=None,
    alone=frozenset(),
    progress=None,
) -> dict:
    """Runs every (op, dtype) case with `backend` ("coil" or "inductor"); returns {mode:
    SweepResult} for the modes asked ("normal", optionally "lowered"). only: op names (with or
    without variant) to restrict to; alone: case keys to compile alone (the expected failures);
    progress(mode, outcome) is called for every case."""
    patch_testing_harness()
    s = _Sweep(backend, modes, progress)
    start = time.time()
    pending = []

    def flush() -> None:
        for c in pending:
            if c.key in alone:
                s.run([c])
        for b in _batches([c for c in pending if c.key not in alone]):
            s.run(b)
        pending.clear()

    for op, dtype in all_cases(dtypes, only):
        case = prepare(op, dtype)
        if case is None:
            s.skip(op, dtype)
            continue
        pending.append(case)
        if sum(len(c.samples) for c in pending) >= 4 * MAX_BATCH_SAMPLES:
            flush()
    flush()
    s.normal.reset()
    for r in s.results.values():
        r.seconds = time.time() - start
    return s.results
