"""The performance fuzzer's machinery (python -m coil.fuzz --perf): programs a function of their
seed, every family built, run eagerly and compiled by coil at tiny sizes, the flags of the report
on made-up timings, and flagged programs stored as benchmark cases and loaded back. No test here
times anything or asserts a speed: the fuzzer is a finder, and its finds are benchmark cases."""

import json
import time

import pytest
import torch
from coil import fuzz_perf, fuzz_perf_programs
from coil.fuzz_perf_programs import OPS, SCHEDULE, PerfProgram
from conftest import BACKEND, requires_coil

TINY = 1.0 / 2048  # --size-scale: inputs of at most 4096 elements


def _seeds_of(family: str, count: int) -> list:
    """The first `count` seeds of a family (a seed's family is fixed by SCHEDULE)."""
    return [s for s in range(10 * count) if SCHEDULE[s % len(SCHEDULE)] == family][:count]


def test_a_program_is_a_function_of_its_seed():
    for seed in range(20):
        a = fuzz_perf_programs.generate(seed)
        b = fuzz_perf_programs.generate(seed)
        assert a.to_json() == b.to_json()
        _, xa = fuzz_perf_programs.build(a)
        _, xb = fuzz_perf_programs.build(b)
        assert all(torch.equal(x, y) for x, y in zip(xa, xb)), seed
    # and the params alone rebuild it (what a stored benchmark case keeps)
    p = fuzz_perf_programs.generate(7)
    again = PerfProgram.from_json(json.loads(json.dumps(p.to_json())))
    assert again.describe() == p.describe()


def test_consecutive_seeds_cover_every_op_and_every_reduction_over_every_kind_of_dim():
    seen = {f: set() for f in OPS}
    places = set()
    for seed in range(1000, 1000 + 2 * 3 * len(OPS["reduction"])):
        p = fuzz_perf_programs.generate(seed, size_scale=TINY)
        seen[p.family].add(p.params["op"])
        if p.family == "reduction" and p.params["op"] != "layer_norm_f":
            dim, rank = p.params["dim"], len(p.params["shape"])
            places.add((p.params["op"], "last" if dim == rank - 1 else "first" if dim == 0
                        else "inner"))
    assert seen == {f: set(ops) for f, ops in OPS.items()}
    assert len(places) == 3 * (len(OPS["reduction"]) - 1)


def test_sizes_stay_within_the_limit_and_include_odd_and_large():
    seeds = [s for s in range(200) if SCHEDULE[s % len(SCHEDULE)] != "fuzz"]  # (fuzz: slow)
    shapes = [fuzz_perf_programs.generate(s).params["shape"] for s in seeds]
    numels = [torch.Size(s).numel() for s in shapes]
    assert max(numels) <= fuzz_perf_programs.MAX_NUMEL["cpu"]
    dims = {d for s in shapes for d in s}
    assert dims & {127, 509, 1021} and dims & {7, 31} and max(numels) > 1 << 20


@pytest.mark.parametrize("family", sorted(OPS))
def test_every_family_runs_eagerly_and_under_coil(family, tmp_path):
    """Each op of the family at tiny sizes: eager runs it, coil compiles it and agrees."""
    requires_coil()
    count = len(OPS[family]) if family != "fuzz" else 3
    for seed in _seeds_of(family, count):
        program = fuzz_perf_programs.generate(seed, size_scale=TINY)
        fn, inputs = fuzz_perf_programs.build(program)
        expected = fn(*inputs)
        torch._dynamo.reset()
        actual = torch.compile(fn, backend=BACKEND)(*inputs)
        msg = fuzz_perf.judge(fn, inputs, tuple(actual), tuple(expected))
        assert not msg, f"seed {seed} {program.describe()}: {msg}"


def test_shrink_halves_the_largest_size_until_nothing_is_left():
    p = PerfProgram(1, "reduction", {"op": "sum", "shape": [6, 1021], "dim": 1, "pre": "none",
                                     "dtype": "float32"})
    smaller = fuzz_perf_programs.shrink(p)
    assert smaller.params["shape"] == [6, 511] and p.params["shape"] == [6, 1021]
    steps = 0
    while p is not None:
        p, steps = fuzz_perf_programs.shrink(p), steps + 1
    assert steps < 20
    # a fuzz program never below the correctness fuzzer's own size
    f = PerfProgram(2, "fuzz", {"op": "fuzz", "fuzz_seed": 1, "shape": [8, 1], "base": [5, 1],
                                "dtype": "float32"})
    assert fuzz_perf_programs.shrink(f) is None


def test_run_one_times_every_backend_and_lists_coil_kernels(tmp_path):
    """The whole path for one tiny program, through the real compilers (no speed asserted)."""
    requires_coil()
    program = fuzz_perf_programs.generate(_seeds_of("reduction", 1)[0], size_scale=TINY)
    settings = {"device": "cpu", "threshold": 1.25, "eager_threshold": 1.0, "size_scale": TINY,
                "budget_s": 0.01, "warmup": 0, "min_reps": 2, "max_reps": 3, "max_eager_s": 0.2}
    row = fuzz_perf.run_one(program, settings, str(tmp_path / "dbg"))
    assert row["status"] == "ok"
    for backend in fuzz_perf.BACKENDS:
        assert row["backends"][backend]["reps"] >= 2, (backend, row["backends"][backend])
    assert row["backends"]["coil"]["correct"] and row["backends"]["inductor"]["correct"]
    assert row["backends"]["coil"]["kernel_names"]
    files = fuzz_perf.kernel_files(row)
    assert files["kernel_files"] and all("cpp_fused" in f for f in files["kernel_files"])
    assert all(d.startswith(tuple(row["backends"]["coil"]["kernel_names"]))
               for d in files["decisions"])


def _tiny_run(monkeypatch, broken: str, how):
    """run_one of a tiny program with one backend's compiled function replaced by how(compiled)."""
    from coil.bench import timing

    real = timing.compile_for

    def compile_for(backend, fn, mode=None):
        compiled = real(backend, fn, mode)
        return how(compiled) if backend == broken else compiled

    monkeypatch.setattr(timing, "compile_for", compile_for)
    program = fuzz_perf_programs.generate(_seeds_of("loss", 1)[0], size_scale=TINY)
    settings = {"device": "cpu", "threshold": 1.25, "eager_threshold": 1.0, "size_scale": TINY,
                "budget_s": 0.01, "warmup": 0, "min_reps": 2, "max_reps": 2, "max_eager_s": 0.2,
                "compile_timeout_s": 1.0}
    return fuzz_perf.run_one(program, settings)


def test_a_compile_past_the_timeout_is_stopped_and_the_rest_timed(monkeypatch):
    requires_coil()

    def hangs(compiled):
        def call(*xs):
            time.sleep(60)
            return compiled(*xs)

        return call

    row = _tiny_run(monkeypatch, "inductor", hangs)
    assert row["backends"]["inductor"]["status"] == "timed out"
    assert row["backends"]["coil"]["reps"] == 2 and row["coil_over_inductor"] is None
    assert not fuzz_perf.is_bug(row)


def test_a_wrong_or_failing_coil_is_a_bug(monkeypatch):
    requires_coil()
    row = _tiny_run(monkeypatch, "coil", lambda compiled: lambda *xs: tuple(
        o + 1 for o in compiled(*xs)))
    assert row["flags"][0].startswith("MISMATCH") and fuzz_perf.is_bug(row)

    def raises(compiled):
        def call(*xs):
            raise RuntimeError("injected")

        return call

    row = _tiny_run(monkeypatch, "coil", raises)
    assert row["flags"][0] == "coil failed: RuntimeError: injected" and fuzz_perf.is_bug(row)


def _row(seed, eager, inductor, coil, **coil_extra):
    row = {"seed": seed, "family": "reduction", "desc": f"program {seed}",
           "params": {"op": "sum", "shape": [64, 33], "dim": 0, "pre": "none",
                      "dtype": "float32"},
           "backends": {"eager": {"status": "ok", "median_ms": eager},
                        "inductor": {"status": "ok", "median_ms": inductor, "correct": True},
                        "coil": {"status": "ok", "median_ms": coil, "correct": True,
                                 **coil_extra}}}
    row["coil_over_inductor"] = coil / inductor
    row["coil_over_eager"] = coil / eager
    row["flags"] = fuzz_perf.flags(row)
    return row


def test_flags_on_made_up_timings():
    assert _row(1, eager=2.0, inductor=1.0, coil=1.2)["flags"] == []
    assert _row(2, eager=2.0, inductor=1.0, coil=1.3)["flags"] == ["slower than Inductor x1.25"]
    assert _row(3, eager=1.0, inductor=2.0, coil=1.1)["flags"] == ["slower than eager"]
    both = _row(4, eager=1.0, inductor=1.0, coil=9.0)
    assert both["flags"] == ["slower than Inductor x1.25", "slower than eager"]
    eager = _row(5, 2.0, 1.0, 1.0, eager_graphs=2, eager_reason="BuildError: x")
    assert eager["flags"] == ["coil ran 2 graphs eagerly: BuildError: x"]
    assert fuzz_perf.is_slow(eager) and not fuzz_perf.is_bug(eager)
    wrong = _row(6, 2.0, 1.0, 1.0, correct=False, check="output 0: 3 of 64 differ")
    assert fuzz_perf.is_bug(wrong) and not fuzz_perf.is_slow(wrong)
    assert fuzz_perf.flags(_row(7, 2.0, 1.0, 1.3), threshold=1.5) == []


def test_table_puts_bugs_then_the_slowest_first_and_summarises():
    rows = [_row(1, 2.0, 1.0, 1.2), _row(2, 2.0, 1.0, 3.0), _row(3, 2.0, 1.0, 0.5),
            _row(4, 2.0, 1.0, 1.0, correct=False, check="x")]
    lines = fuzz_perf.table(rows).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["4", "2", "1", "3"]
    text = fuzz_perf.summary(rows)
    assert "1 flagged for speed, 1 coil bugs" in text
    # geomean over the three correct programs: (1.2 * 3.0 * 0.5) ** (1/3)
    assert f"{(1.2 * 3.0 * 0.5) ** (1 / 3):.2f}x" in text and "worst: seed 2" in text


def test_judge_passes_rounding_and_catches_wrong_values():
    x = torch.randn(64, 1021)

    def fn(x):
        return (x.sum(1), x.argmax(1))

    expected = fn(x)
    assert fuzz_perf.judge(fn, (x,), expected, expected) == ""
    rounded = (expected[0] * (1 + 1e-6), expected[1])
    assert fuzz_perf.judge(fn, (x,), rounded, expected) == ""
    assert "output 0" in fuzz_perf.judge(fn, (x,), (expected[0] + 1, expected[1]), expected)
    off = expected[1].clone()
    off[3] += 1
    assert "output 1" in fuzz_perf.judge(fn, (x,), (expected[0], off), expected)


def test_flagged_programs_become_benchmark_cases(tmp_path, monkeypatch):
    from coil.bench import cases, perf_cases

    path = str(tmp_path / "perf_cases.json")
    monkeypatch.setattr(perf_cases, "PATH", path)
    seeds = (_seeds_of("reduction", 1)[0], _seeds_of("index", 1)[0])
    rows = []
    for seed in seeds:
        program = fuzz_perf_programs.generate(seed, size_scale=TINY)
        row = _row(seed, 1.0, 1.0, 2.0)
        row.update(params=program.params, family=program.family, desc=program.describe())
        rows.append(row)
    assert perf_cases.add(rows, "cpu", path) == 2
    assert perf_cases.add(rows, "cpu", path) == 0  # (deduplicated by seed)
    loaded = perf_cases.cases(path)
    assert [c.name for c in loaded] == [f"perf_{s}" for s in seeds]
    for case, row in zip(loaded, rows):
        built = case.build("cpu", "cpu")
        program = PerfProgram(row["seed"], row["family"], row["params"])
        fn, inputs = fuzz_perf_programs.build(program)
        assert built.desc == program.describe()
        assert all(torch.equal(a, b) for a, b in zip(built.inputs, inputs))
        assert all(torch.equal(a, b) for a, b in zip(built.fn(*built.inputs), fn(*inputs)))
        tiny = case.build("cpu", "tiny")
        assert tiny.inputs[0].numel() <= perf_cases.TINY_NUMEL
    with open(path) as f:
        stored = json.load(f)["cases"]
    assert stored[0]["found"]["median_ms"] == {"eager": 1.0, "inductor": 1.0, "coil": 2.0}
    # the bench finds them by name (--cases perf_SEED, --cases perf), its own cases as before
    name = f"perf_{seeds[1]}"
    assert cases.find(name).name == name
    assert [c.name for c in cases.select(["softmax", name], False)] == ["softmax", name]
    assert [c.name for c in cases.select(["perf"], False)] == [c.name for c in loaded]
    assert cases.find("softmax").name == "softmax"
    with pytest.raises(KeyError):
        cases.find("perf_1")


def test_every_stored_case_builds_and_runs_eagerly_at_tiny_size():
    """coil/bench/perf_cases.json: each stored program still builds from its params."""
    from coil.bench import perf_cases

    for case in perf_cases.cases():
        built = case.build("cpu", "tiny")
        assert built.fn(*built.inputs), case.name
