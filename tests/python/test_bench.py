"""The benchmark harness itself (python -m coil.bench) on one tiny case, eager and coil only:
the run finishes, and results.json / results.md carry the fields the reports are built from.
A harness test, not a performance test: no timing is asserted."""

import json

import pytest
from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="runs coil's benchmark harness")


def test_bench_tiny_case_writes_results(tmp_path):
    from coil.bench import main

    out = tmp_path / "bench"
    rc = main(
        [
            "--cases",
            "pointwise_chain",
            "--backends",
            "eager,coil",
            "--size",
            "tiny",
            "--out",
            str(out),
            "--compile-time",
            "none",
            "--no-progress",
            "--no-plots",
            "--budget",
            "0.05",
            "--min-reps",
            "3",
            "--warmup",
            "1",
        ]
    )
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    for key in ("environment", "settings", "copy_bandwidth", "cases"):
        assert key in results, key
    for key in ("date", "command", "torch", "device", "threads", "cpu"):
        assert key in results["environment"], key
    assert results["copy_bandwidth"]["gbps"] > 0
    (row,) = results["cases"]
    assert row["case"] == "pointwise_chain" and row["status"] == "ok"
    assert row["min_bytes"] > 0 and row["desc"]
    assert set(row["backends"]) == {"eager", "coil"}
    eager, coil = row["backends"]["eager"], row["backends"]["coil"]
    for res in (eager, coil):
        assert res["reps"] >= 3 and res["median_ms"] > 0 and res["first_call_s"] > 0
        assert res["gbps"] > 0
    assert coil["status"] == "ok", coil.get("reason")
    assert coil["correct"] is True, coil.get("check")
    assert coil["kernels"] >= 1 and coil["graphs"] >= 1
    assert {"lower", "schedule", "codegen"} <= set(coil["coil_seconds"])
    table = (out / "results.md").read_text()
    assert "| pointwise_chain |" in table and "coil/eager speedup" in table


def test_bench_compile_one_reports_phases():
    from coil.bench.compile_time import COIL_PHASES, compile_one

    result = compile_one("softmax", "coil", "cpu", "tiny")
    assert result["status"] == "ok", result.get("reason")
    assert result["first_call_s"] > 0
    assert set(COIL_PHASES) <= set(result["phases"])
    assert "rest" in result["phases"]
