"""The OpInfo sweep: every op of torch's OpInfo database, per dtype, compiled by coil and compared
with eager (python/coil/coverage.py says how). A graph that coil runs eagerly fails its case.

Known failures are listed per (op, dtype), with a reason, in opinfo_expected.txt. A case missing
from the list that fails, or a listed case that passes, fails the test: fix the regression, or
delete the line of the case that now passes (the list only shrinks). Regenerate the file with
`python -m coil.coverage --backends coil --modes normal --write-expected
tests/python/opinfo_expected.txt` after a deliberate change.
"""

import os
import warnings

import pytest
import torch
from conftest import requires_coil

EXPECTED_FILE = os.path.join(os.path.dirname(__file__), "opinfo_expected.txt")
DTYPES = ("float32", "float64", "int64", "bool", "bfloat16")


def _expected():
    from coil import coverage

    return coverage.read_expected(EXPECTED_FILE)


@pytest.mark.parametrize("dtype", DTYPES)
def test_opinfo_sweep(dtype):
    requires_coil()
    from coil import coverage

    expected = {k: v for k, v in _expected().items() if k[1] == dtype}
    result = coverage.sweep(
        "coil", ("normal",), dtypes=(getattr(torch, dtype),), alone=frozenset(expected)
    )["normal"]
    outcomes = result.outcomes
    unexpected_failures = [
        f"{o.name} {o.dtype}: {o.reason}"
        for o in outcomes.values()
        if o.status == "fail" and o.key not in expected
    ]
    unexpected_passes = [
        f"{name} {d} (listed: {why})"
        for (name, d), why in expected.items()
        if outcomes.get((name, d)) is not None and outcomes[(name, d)].status == "pass"
    ]
    stale = [
        f"{name} {d}"
        for (name, d) in expected
        if (name, d) not in outcomes or outcomes[(name, d)].status == "skip"
    ]
    counts = {s: sum(o.status == s for o in outcomes.values()) for s in ("pass", "fail", "skip")}
    print(
        f"opinfo {dtype}: {counts['pass']} passed, {counts['fail']} failed (expected), "
        f"{counts['skip']} skipped by construction; {result.graphs} graphs, {result.seconds:.0f} s"
    )
    problems = []
    if unexpected_failures:
        problems.append("unexpected failures:\n  " + "\n  ".join(sorted(unexpected_failures)))
    if unexpected_passes:
        problems.append(
            "unexpected passes (delete these lines from opinfo_expected.txt):\n  "
            + "\n  ".join(sorted(unexpected_passes))
        )
    if stale:
        problems.append(
            "listed cases that no longer run (delete them):\n  " + "\n  ".join(sorted(stale))
        )
    if result.batch_only_mismatches:
        problems.append(
            "cases that mismatch eager only when compiled together with other cases (a compiler "
            "bug):\n  " + "\n  ".join(result.batch_only_mismatches)
        )
    assert not problems, "\n".join(problems)


def test_expected_file_names_real_cases():
    from coil import coverage

    expected = _expected()
    known = {coverage.op_name(op) for op in coverage.op_db()}
    bad = [f"{n} {d}" for n, d in expected if n not in known or d not in DTYPES]
    assert not bad, f"opinfo_expected.txt names unknown ops or dtypes: {bad}"
    for (name, d), reason in expected.items():
        assert reason, f"opinfo_expected.txt: {name} {d} has no reason"


def test_fallbacks_forbidden_mode_runs_graph_eagerly():
    coil = requires_coil()
    # frexp has no coil lowering yet: it runs as an ATen fallback op. If it gets one, pick
    # another op that coil leaves to ATen.
    fn = lambda x: torch.frexp(x)[0] + 1
    x = torch.rand(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend="coil", fullgraph=True, dynamic=False)(x)
    (normal,) = coil.compiled_graphs()
    assert normal.fallback_ops and not normal.eager_fallback
    coil.reset()
    with coil.config.patch(allow_fallback=False), pytest.warns(coil.CoilWarning, match="fallback"):
        out = torch.compile(fn, backend="coil", fullgraph=True, dynamic=False)(x)
    (forbidden,) = coil.compiled_graphs()
    assert forbidden.eager_fallback
    assert "allow_fallback=False" in forbidden.eager_reason
    assert forbidden.fallback_ops == normal.fallback_ops
    torch.testing.assert_close(out, fn(x))


def test_fallbacks_forbidden_mode_allows_extern_calls():
    coil = requires_coil()
    fn = lambda a, b: torch.relu(a @ b)
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    with coil.config.patch(allow_fallback=False), warnings.catch_warnings():
        warnings.simplefilter("error", coil.CoilWarning)
        out = torch.compile(fn, backend="coil", fullgraph=True, dynamic=False)(a, b)
    (record,) = coil.compiled_graphs()
    assert not record.eager_fallback and record.extern_ops
    torch.testing.assert_close(out, fn(a, b))


def test_sweep_counts_an_eager_fallback_as_a_failure():
    coil = requires_coil()
    from coil import coverage

    # A graph that coil runs eagerly (here: its kernels fail to build) is a failure, not a pass.
    with coil.config.patch(inject_build_failure=True):
        result = coverage.sweep("coil", ("normal",), dtypes=(torch.float32,), only={"abs"})
    (outcome,) = result["normal"].outcomes.values()
    assert outcome.status == "fail"
    assert outcome.reason.startswith("eager fallback"), outcome.reason


def test_sweep_lowered_mode_separates_fallbacks():
    requires_coil()
    from coil import coverage

    result = coverage.sweep(
        "coil", ("normal", "lowered"), dtypes=(torch.float32,), only={"abs", "frexp"}
    )
    normal, lowered = result["normal"].outcomes, result["lowered"].outcomes
    assert normal[("abs", "float32")].status == "pass"
    assert normal[("frexp", "float32")].status == "pass"
    assert lowered[("abs", "float32")].status == "pass"
    scan = lowered[("frexp", "float32")]
    assert scan.status == "fail" and "aten.frexp" in scan.reason, scan.reason
