"""The benchmark harness itself (python -m coil.bench): a --smoke run on tiny inputs, failures of
one backend reported without stopping the run, merging split runs, every case building, and the
vision models matching torchvision's where torchvision imports. A harness test, not a performance
test: no timing is asserted. Under a minute on a 2-core machine (no Inductor compile, no
compile-time child processes)."""

import json
import os

import pytest
import torch
from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="runs coil's benchmark harness")

SMOKE = ["--smoke", "--backends", "eager,coil", "--no-progress", "--budget", "0.02"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One --smoke run of a microbenchmark, a training step and a vision model."""
    from coil.bench import main

    out = tmp_path_factory.mktemp("bench")
    cache_vars = {k: os.environ.get(k) for k in ("COIL_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    rc = main(SMOKE + ["--cases", "pointwise_chain,attention_train,resnet18", "--out", str(out)])
    assert rc == 0
    # the run points the caches at its own folders per case, and gives them back afterwards
    assert {k: os.environ.get(k) for k in cache_vars} == cache_vars
    return out, json.loads((out / "results.json").read_text())


def test_smoke_run_writes_results(smoke_run):
    out, results = smoke_run
    for key in ("environment", "settings", "copy_bandwidth", "cases", "wall_s"):
        assert key in results, key
    for key in ("date", "command", "torch", "device", "threads", "cpu", "loadavg"):
        assert key in results["environment"], key
    assert results["settings"]["smoke"] and results["settings"]["size"] == "tiny"
    assert results["copy_bandwidth"]["gbps"] > 0
    rows = {r["case"]: r for r in results["cases"]}
    assert list(rows) == ["pointwise_chain", "attention_train", "resnet18"]
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row.get("reason"))
        assert set(row["backends"]) == {"eager", "coil"}
        assert row["first_call_caches"] == "empty"  # --smoke measures no compile time
        coil = row["backends"]["coil"]
        assert coil["status"] == "ok", (name, coil.get("reason"))
        assert coil["correct"] is True, (name, coil.get("check"))
        assert coil["kernels"] >= 1 and coil["graphs"] >= 1
        assert {"lower", "schedule", "codegen"} <= set(coil["coil_seconds"])
        for res in row["backends"].values():
            assert res["reps"] >= 2 and res["median_ms"] > 0 and res["first_call_s"] > 0
    pw = rows["pointwise_chain"]
    assert pw["min_bytes"] > 0 and pw["backends"]["coil"]["gbps"] > 0
    # % of copy against a copy of the case's own bytes, timed in the same rounds (not a backend)
    assert pw["copy_ms"] > 0 and pw["copy_gbps"] > 0 and "copy" not in pw["backends"]
    assert "peak_mb" in pw["backends"]["coil"]
    assert "backward" in rows["attention_train"]["backends"]["coil"]["note"]
    table = (out / "results.md").read_text()
    assert "| pointwise_chain |" in table and "coil/eager speedup" in table
    assert "forward and backward compiled by coil; optimizer step eager" in table


def test_training_step_updates_each_backends_own_copy():
    from coil.bench import cases, timing

    built = cases.find("attention_train").build("cpu", "tiny")
    before = [p.detach().clone() for p in built.fn.parameters()]
    module = timing.model_for("eager", built)
    step = timing.make_step(module, module, built, "cpu")
    loss, *grads = step()
    assert loss.ndim == 0 and grads
    # the optimizer moved the copy's weights, not the case's own
    assert any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(before, built.fn.parameters()))


def _case(fn, name="injected"):
    from coil.bench.cases import Built, Case

    x = torch.randn(64, 32)
    return Case(name, "micro", lambda device, size: Built(fn, (x,), "64x32 float32"))


def test_a_backend_that_raises_is_reported_and_the_run_goes_on(monkeypatch):
    from coil.bench import report, timing

    real = timing.compile_for

    def broken(backend, fn, mode=None):
        if backend == "coil":
            raise RuntimeError("injected compile failure")
        return real(backend, fn, mode)

    monkeypatch.setattr(timing, "compile_for", broken)
    row = timing.run_case(_case(torch.tanh), "cpu", "tiny", ("eager", "coil"), 0.01, 2, 3, 0)
    assert row["status"] == "ok"
    assert row["backends"]["eager"]["median_ms"] > 0
    coil = row["backends"]["coil"]
    assert coil["status"] == "could not run" and "injected compile failure" in coil["reason"]
    results = {
        "environment": report.environment("cpu", ["python", "-m", "coil.bench"]),
        "settings": {"warmup": 0},
        "copy_bandwidth": {"gbps": 1.0, "bytes": 1, "median_ms": 1.0},
        "cases": [row],
    }
    text = report.markdown(results)
    assert "could not run (RuntimeError: injected compile failure)" in text
    assert "Failures and mismatches" in text


def test_a_wrong_output_is_reported_as_mismatch(monkeypatch):
    from coil.bench import report, timing

    real = timing.compile_for

    def wrong(backend, fn, mode=None):
        compiled = real(backend, fn, mode)
        return (lambda *a: compiled(*a) + 1.0) if backend == "coil" else compiled

    monkeypatch.setattr(timing, "compile_for", wrong)
    row = timing.run_case(_case(torch.tanh), "cpu", "tiny", ("eager", "coil"), 0.01, 2, 3, 0)
    coil = row["backends"]["coil"]
    assert coil["correct"] is False and "median_ms" in coil
    cells = report._row(row, 1.0)
    assert "coil MISMATCH" in cells[report.HEADER.index("correct")]


def test_a_case_that_cannot_be_built_is_shown_not_dropped():
    from coil.bench import report, timing
    from coil.bench.cases import Case, NotAvailable

    def missing(device, size):
        raise NotAvailable("somelib is not installed")

    def broken(device, size):
        raise ValueError("bad shape")

    rows = [
        timing.run_case(Case(n, "model", b), "cpu", "tiny", ("eager", "coil"), 0.01, 2, 3, 0)
        for n, b in (("a", missing), ("b", broken))
    ]
    assert [r["status"] for r in rows] == ["not available here", "build failed"]
    cells = [report._row(r, 1.0) for r in rows]
    assert "not available here (somelib is not installed)" in cells[0][2]
    assert "build failed (ValueError: bad shape)" in cells[1][2]


def test_merge_joins_split_runs(smoke_run, tmp_path):
    from coil.bench import report

    _, results = smoke_run
    first, second = json.loads(json.dumps(results)), json.loads(json.dumps(results))
    first["cases"], second["cases"] = results["cases"][2:], results["cases"][:2]
    second["environment"]["command"] = "python -m coil.bench --group micro"
    for i, part in enumerate((first, second)):
        (tmp_path / f"p{i}").mkdir()
        (tmp_path / f"p{i}" / "results.json").write_text(json.dumps(part))
    out = tmp_path / "merged"
    rc = report.main(
        ["merge", str(tmp_path / "p0"), str(tmp_path / "p1" / "results.json")]
        + ["--out", str(out), "--no-plots"]
    )
    assert rc == 0
    merged = json.loads((out / "results.json").read_text())
    # the registry's order, whatever the order of the parts
    assert [r["case"] for r in merged["cases"]] == [
        "pointwise_chain",
        "attention_train",
        "resnet18",
    ]
    text = (out / "results.md").read_text()
    assert text.count("Command: `") == 2 and "--group micro" in text


def test_every_case_builds_and_runs_eagerly_at_tiny_size():
    from coil.bench import cases, timing

    names = [c.name for c in cases.CASES]
    assert len(names) == len(set(names))
    for model in ("gpt2", "bert", "t5_small", "resnet18", "resnet50", "vit_b_16", "mobilenet_v3"):
        assert model in names and f"{model}_train" in names
    assert set(cases.GROUPS["micro"]) | set(cases.GROUPS["models"]) == set(names)
    for case in cases.CASES:
        if case.name.startswith(("gpt2", "bert", "t5")) and not _has("transformers"):
            continue
        torch.manual_seed(0)
        built = case.build("cpu", "tiny")
        module = timing.model_for("eager", built)
        out = timing.make_step(module, module, built, "cpu")()
        assert out is not None, case.name


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_vision_models_match_torchvision():
    """Where torchvision imports (not beside a CPU-only torch, see coil.bench.vision), its state
    dict loads into the suite's models unchanged and the outputs are equal."""
    try:
        import torchvision.models as tvm
    except Exception as e:  # noqa: BLE001 - ImportError, or RuntimeError from a CUDA wheel
        pytest.skip(f"torchvision does not import here: {type(e).__name__}")
    from coil.bench import vision

    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)
    for name, make in vision.MODELS.items():
        ref, mine = getattr(tvm, name)(weights=None).eval(), make().eval()
        mine.load_state_dict(ref.state_dict(), strict=True)
        with torch.no_grad():
            torch.testing.assert_close(mine(x), ref(x), rtol=0, atol=0)


def test_compile_one_reports_phases():
    from coil.bench.compile_time import COIL_PHASES, compile_one

    result = compile_one("softmax", "coil", "cpu", "tiny")
    assert result["status"] == "ok", result.get("reason")
    assert result["first_call_s"] > 0 and result["second_call_s"] > 0
    assert set(COIL_PHASES) <= set(result["phases"])
    assert "rest" in result["phases"]


def test_merge_prefers_timed_rows_and_keeps_compile_times():
    from coil.bench.report import _merge_rows

    timed = {"case": "x", "status": "ok", "backends": {"eager": {"median_ms": 1.0}}}
    compile_only = {"case": "x", "status": "ok", "backends": {}, "compile_time": {"coil": {}}}
    left = {"case": "x", "status": "not run", "reason": "time limit", "backends": {}}
    for first, second in ((timed, compile_only), (compile_only, timed)):
        merged = _merge_rows(first, second)
        assert merged["backends"] == timed["backends"]
        assert merged["compile_time"] == {"coil": {}}
    assert _merge_rows(timed, left)["status"] == "ok"
    assert _merge_rows(left, timed)["status"] == "ok"


def test_time_limit_lists_the_cases_left_and_how_to_run_them(tmp_path):
    from coil.bench import main

    out = tmp_path / "bench"
    rc = main(SMOKE + ["--cases", "softmax,sum_rows", "--time-limit", "0", "--out", str(out)])
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    assert results["not_run"]["cases"] == ["softmax", "sum_rows"]
    assert "--cases softmax,sum_rows" in results["not_run"]["command"]
    assert "--time-limit" not in results["not_run"]["command"]
    assert [r["status"] for r in results["cases"]] == ["not run", "not run"]
    assert "not run (time limit)" in (out / "results.md").read_text()


def test_shards_split_the_cases_without_overlap():
    from coil.bench import cases

    for n in (1, 3, 8):
        parts = [cases.shard(cases.CASES, k, n) for k in range(n)]
        names = [c.name for part in parts for c in part]
        assert sorted(names) == sorted(c.name for c in cases.CASES)
    with pytest.raises(ValueError):
        cases.shard(cases.CASES, 2, 2)
