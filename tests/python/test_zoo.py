"""The model-zoo sweep's machinery (python -m coil.bench.zoo): the population listed and
deterministic, one tiny transformers model run end to end in this process, a model that kills
its process or hangs recorded without stopping the sweep, shards that partition the population,
and the report's ordering. A harness test, not a performance test: no timing is asserted."""

import json
import math
import os
import sys
import textwrap

import pytest
import torch
from coil.bench import zoo, zoo_models, zoo_report
from coil.bench.zoo_models import Entry, Example
from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="runs coil's zoo sweep harness")

needs_transformers = pytest.mark.skipif(zoo_models.missing("hf") is not None,
                                        reason="transformers is not installed")


@needs_transformers
def test_list_prints_the_hf_population(capsys):
    assert zoo.main(["--list", "--family", "hf"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert "hf/BertModel" in names and "hf/GPT2LMHeadModel" in names
    assert names == sorted(names) and len(names) == len(set(names)) >= 50


@needs_transformers
def test_population_and_builds_are_deterministic():
    first = [e.name for e in zoo_models.population(("hf",))]
    assert first == [e.name for e in zoo_models.population(("hf",))]
    entry = zoo_models.find("hf/BertModel")
    a, b = entry.build("cpu", False, 3), entry.build("cpu", False, 3)
    assert a.kwargs.keys() == b.kwargs.keys()
    assert all(torch.equal(a.kwargs[k], b.kwargs[k]) for k in a.kwargs)
    for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(p, q), name
    c = entry.build("cpu", False, 4)
    assert not torch.equal(a.kwargs["input_ids"], c.kwargs["input_ids"])
    cfg = a.model.config
    assert cfg.num_hidden_layers == 2 and cfg.hidden_size == 128 and cfg.vocab_size == 1000


def test_smallest_variant_by_name():
    assert zoo_models.smallest(["resnet50", "resnet18", "resnet101", "resnet18d"]) == "resnet18"
    assert zoo_models.smallest(["vit_base_patch16_224", "vit_tiny_patch16_384",
                                "vit_tiny_patch16_224", "vit_small_patch8_224"]) \
        == "vit_tiny_patch16_224"
    assert zoo_models.smallest(["efficientnet_b3", "efficientnet_b0"]) == "efficientnet_b0"
    assert zoo_models.smallest(["convnext_base", "convnext_tiny", "convnext_atto"]) \
        == "convnext_atto"
    assert zoo_models.smallest(["regnetx_032", "regnetx_002", "regnetx_004"]) == "regnetx_002"


def test_shards_partition_the_population():
    entries = [Entry(f"hf/M{i:02d}", "hf", "text", build=None) for i in range(23)]
    parts = [zoo.shard(entries, k, 4) for k in range(4)]
    names = [e.name for part in parts for e in part]
    assert sorted(names) == [e.name for e in entries] and len(names) == len(set(names))
    assert all(part == sorted(part, key=entries.index) for part in parts)  # order kept
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(ValueError):
        zoo.shard(entries, 4, 4)


def _tiny_bert(size, train, seed):
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    model = BertModel(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 100, (2, 16), generator=gen)
    return Example(model, (), {"input_ids": ids}, desc="2x16 tokens")


@needs_transformers
def test_one_model_end_to_end_in_process(tmp_path):
    entry = Entry("hf/TinyBert", "hf", "text", _tiny_bert)
    settings = zoo.Settings(device="cpu", dtype="float32", budget_s=0.05, warmup=1, min_reps=2,
                            isolate=False)
    records = zoo.sweep([entry], settings, str(tmp_path), quiet=True)
    (record,) = records
    assert record["status"] == "ok", record
    for key in ("model", "family", "group", "device", "dtype", "mode", "desc", "params_m",
                "reference", "tolerance", "wall_s", "backends"):
        assert key in record, key
    assert record["reference"] == "float64" and record["tolerance"] == 1e-3
    b = record["backends"]
    assert set(b) == {"eager", "inductor", "coil"}
    for name, res in b.items():
        assert res["status"] == "ok", (name, res)
        assert res["first_call_s"] > 0 and res["median_ms"] > 0 and res["reps"] >= 2
        assert res["steady_peak_mb"] >= 0
        assert "first_peak_mb" not in res  # the CPU keeps no allocation statistics: n/a
    for name in ("inductor", "coil"):
        assert b[name]["accurate"] is True, b[name]["accuracy"]
        assert b[name]["dynamo_graphs"] >= 1 and b[name]["graph_breaks"] == {}
    coil = b["coil"]
    assert coil["graphs"] >= 1 and coil["kernels"] >= 1 and coil["eager_graphs"] == 0
    assert isinstance(coil["fallback_ops"], list) and coil["eager_reasons"] == []
    assert zoo.speedup(record) > 0
    # the line in results.jsonl is the record; the table names the model
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["model"] == "hf/TinyBert"
    table = zoo_report.markdown(records)
    assert "| hf/TinyBert | ok | pass / pass |" in table and "geomean coil/Inductor" in table


INJECTED = textwrap.dedent('''
    import os, time
    import torch
    from coil.bench.zoo_models import Example

    class AbortWhenCompiled(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            if torch.compiler.is_compiling():
                os.abort()  # a graph break: runs while the compiled function runs
            return y + 1

    def crash(size, train, seed):
        return Example(AbortWhenCompiled(), (torch.randn(4, 4),), desc="aborts")

    def hang(size, train, seed):
        time.sleep(600)

    def linear(size, train, seed):
        torch.manual_seed(seed)
        return Example(torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),), desc="2x8")
''')


def test_crashes_and_hangs_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    (tmp_path / "zoo_injected.py").write_text(INJECTED)
    path = os.pathsep.join([str(tmp_path)] + [p for p in sys.path if p])
    monkeypatch.setenv("PYTHONPATH", path)

    def entry(name):
        return Entry(f"test/{name}", "test", "injected", build=None, ref=f"zoo_injected:{name}")

    settings = zoo.Settings(device="cpu", dtype="float32", budget_s=0.05,
                            backends=("eager", "coil"), timeout_s=240, keep_caches=True)
    out = tmp_path / "out"
    crashed, fine = zoo.sweep([entry("crash"), entry("linear")], settings, str(out), quiet=True)
    assert crashed["status"] == "coil crash", crashed
    assert crashed["crash"]["phase"] == "coil: first call"
    assert "SIGABRT" in crashed["crash"]["why"]
    assert crashed["backends"]["coil"]["status"] == "crash"
    assert fine["status"] == "ok", fine
    assert fine["backends"]["coil"]["accurate"] is True
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert os.path.exists(crashed["log"])

    settings.timeout_s = 10
    (hung,) = zoo.sweep([entry("hang")], settings, str(out), quiet=True)
    assert hung["crash"]["why"] == "timeout after 10 s", hung
    # charged to the phase it hung in: the build (or, on a host too busy to import torch in
    # time, the child's start)
    assert (hung["crash"]["phase"], hung["status"]) in (("build", "eager failed"),
                                                        ("start", "timeout")), hung
    # --resume keeps what is there and runs nothing again
    again = zoo.sweep([entry("crash"), entry("linear"), entry("hang")], settings, str(out),
                      resume=True, quiet=True)
    assert [r["status"] for r in again] == ["coil crash", "ok", hung["status"]]


def test_jobs_run_models_side_by_side_and_time_them_in_turn(tmp_path, monkeypatch):
    """--jobs 2: two children at once; each one's timing holds the lock file, the records keep
    the population's order and say that first calls were compiled side by side."""
    (tmp_path / "zoo_injected.py").write_text(INJECTED)
    path = os.pathsep.join([str(tmp_path)] + [p for p in sys.path if p])
    monkeypatch.setenv("PYTHONPATH", path)
    entries = [Entry(f"test/{name}", "test", "injected", build=None,
                     ref=f"zoo_injected:{name}") for name in ("crash", "linear")]
    settings = zoo.Settings(device="cpu", dtype="float32", budget_s=0.05,
                            backends=("eager", "coil"), timeout_s=240, keep_caches=True, jobs=2)
    out = tmp_path / "out"
    crashed, fine = zoo.sweep(entries, settings, str(out), quiet=True)
    assert crashed["model"] == "test/crash" and crashed["status"] == "coil crash", crashed
    assert fine["status"] == "ok" and fine["backends"]["coil"]["median_ms"] > 0, fine
    assert fine["jobs"] == 2 and os.path.exists(out / "logs" / ".timing.lock")
    assert "side by side" in zoo_report.markdown([crashed, fine])
    with zoo._measuring_alone():  # without the parent's lock file: no lock taken
        pass


def _record(name, status="ok", coil=None, inductor=None):
    base = {"status": "ok", "median_ms": 1.0, "accurate": True}
    return {"model": name, "status": status, "mode": "inference", "dtype": "float32",
            "device": "cpu", "backends": {"eager": {"status": "ok", "median_ms": 2.0},
                                          "inductor": {**base, **(inductor or {})},
                                          "coil": {**base, **(coil or {})}}}


def test_report_orders_worst_first_and_appends_to_the_docs(tmp_path):
    records = [
        _record("fast", coil={"median_ms": 0.5}),
        _record("slow", coil={"median_ms": 2.0}),
        _record("wrong", coil={"accurate": False, "accuracy": "RMSE too big"}),
        _record("broken", status="coil crash",
                coil={"status": "crash", "error": "boom", "median_ms": None}),
        _record("eagerly", coil={"eager_graphs": 1, "graphs": 2,
                                 "eager_reasons": ["a reason"]}),
        {"model": "na", "status": "not applicable", "backends": {}},
        # the same error from both compilers: Dynamo's (or the model's), no coil crash
        _record("traced", status="coil crash",
                coil={"status": "crash", "error": "E", "median_ms": None},
                inductor={"status": "crash", "error": "E", "median_ms": None}),
    ]
    order = [r["model"] for r in sorted(records, key=zoo_report._sort_key)]
    assert order == ["broken", "wrong", "eagerly", "slow", "fast", "traced", "na"]
    s = zoo_report.summarize(records)
    assert s["problems"]["coil crash"] == ["broken"] and s["status"]["both crash"] == 1
    assert s["problems"]["coil slower"] == ["slow"]
    assert s["worst"] == ("slow", 0.5)
    assert math.isclose(s["geomean_speedup"], (2.0 * 0.5 * 1 * 1) ** 0.25)
    docs = tmp_path / "zoo.md"
    docs.write_text("# zoo\n")
    zoo_report.update_docs(str(docs), zoo_report.docs_section(records, "cpu test", "cmd"))
    zoo_report.update_docs(str(docs), zoo_report.docs_section(records[:1], "cpu again", "cmd"))
    text = docs.read_text()
    assert text.startswith("# zoo\n") and text.count("### ") == 2
    assert text.index("| broken |") < text.index("| fast |") < text.index("cpu again")
