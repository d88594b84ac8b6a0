"""coil in PyTorch's logging (python/coil/torch_logs.py): TORCH_LOGS names show coil's graph,
generated code, decisions and fallbacks, and a TORCH_TRACE folder holds coil's artifacts in the
compile that made each graph (what tlparse reads).

The subprocess tests set TORCH_LOGS/TORCH_TRACE as a user does, before torch is imported (with
"+coil", torch's own import imports coil to find the module); the in-process test uses
torch._logging.set_logs and restores torch's defaults after."""

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's own logs")

# A graph break (print), a recompile (n changes), an ATen fallback (searchsorted), a backward,
# and a graph coil runs eagerly (a build made to fail).
SCRIPT = textwrap.dedent("""
    import torch
    import coil

    def f(x, n):
        y = x.sin() * 2
        if n > 0:
            print("break")
        return torch.searchsorted(torch.arange(8.0), y) + n

    g = torch.compile(f, backend="coil")
    g(torch.randn(4, 8), 1)
    g(torch.randn(4, 8), 2)
    w = torch.randn(6, requires_grad=True)
    torch.compile(lambda x: (x * w).cos().sum(), backend="coil")(torch.randn(6)).backward()
    with coil.config.patch(inject_build_failure=True):
        torch.compile(lambda x: x.exp() - 1, backend="coil")(torch.randn(5))
""")


def _run(tmp_path, **env):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    full = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE")}
    full.update(env)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=600, env=full, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stderr


def _lines(err: str, tag: str) -> list:
    return [line for line in err.splitlines() if tag in line]


def test_torch_logs_show_coils_graph_code_and_decisions(tmp_path):
    err = _run(tmp_path, TORCH_LOGS="+coil,output_code,perf_hints,graph_breaks,recompiles")
    # +coil: a line per graph, and (DEBUG) the graph and the fusion verdicts and schedule
    summary = _lines(err, "coil graph 0 (inference, Dynamo 0/0, f at")
    assert len([s for s in summary if "kernels: cpp_fused" in s]) == 1, err[-4000:]  # not twice
    assert "extern calls: none; ATen fallbacks: none;" in summary[0], summary
    assert " build " in summary[0], "the phase times include the kernels' build"
    assert _lines(err, "[__graph_code] %arg0_1 : f32[4, 8]"), "coil's graph (graph.txt)"
    assert _lines(err, "fusion.txt:") and _lines(err, "schedule.txt:")
    assert _lines(err, "(forward, Dynamo 2/0"), "a training graph's forward"
    assert _lines(err, "(backward, Dynamo 2/0"), "the backward graph, in its function's compile"
    # output_code: the generated program, kernels inside
    code = _lines(err, "[__output_code]")
    assert any("output_code.py:" in line for line in code), err[-4000:]
    assert any("CPP_SOURCE" in line for line in code), "the kernels' source"
    # perf_hints: the ATen fallback
    hints = _lines(err, "[__perf_hints]")
    assert any("aten.searchsorted" in line and "ATen fallback" in line for line in hints), hints
    # recompiles: the coil graph Dynamo's recompile made, with Dynamo's reason
    recompiles = [line for line in _lines(err, "[__recompiles]") if "coil graph" in line]
    assert any("compiled for Dynamo's recompile: 0/0: n == 1" in line for line in recompiles), (
        recompiles or err[-4000:])
    # graph_breaks: the graph coil ran eagerly, and why
    breaks = [line for line in _lines(err, "[__graph_breaks]") if "coil graph" in line]
    assert any("runs eagerly" in line and "BuildError" in line for line in breaks), breaks


def test_torch_logs_output_code_alone(tmp_path):
    # coil imported after torch (not by TORCH_LOGS): its records still reach torch's handlers
    err = _run(tmp_path, TORCH_LOGS="output_code")
    code = _lines(err, "[__output_code]")
    assert any("coil graph 0 (inference" in line and "output_code.py:" in line for line in code), (
        err[-4000:])
    assert not _lines(err, "[__graph_code]") and not _lines(err, "fusion.txt:"), "only what was named"
    assert len([line for line in code if "output_code.py:" in line and "coil graph 0 " in line]) == 1


def _trace_records(folder) -> list:
    """(metadata, payload) of each structured-trace record in the folder's logs."""
    records = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("\t") or "{" not in line:
                continue
            meta = json.loads(line[line.index("{"):])
            payload = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith("\t"):
                    break
                payload.append(nxt[1:])
            records.append((meta, "\n".join(payload)))
    return records


def test_torch_trace_holds_coils_artifacts(tmp_path):
    trace = tmp_path / "trace"
    _run(tmp_path, TORCH_TRACE=str(trace))
    records = _trace_records(trace)
    coil_ones = {m["artifact"]["name"]: (m, p) for m, p in records
                 if m.get("artifact", {}).get("name", "").startswith("coil_")}
    for what in ("graph", "ir_pre_fusion", "ir_post_fusion", "fusion", "schedule", "output_code",
                 "provenance", "compile"):
        assert f"coil_inference_0_{what}" in coil_ones, sorted(coil_ones)
    meta, code = coil_ones["coil_inference_0_output_code"]
    assert (meta["frame_id"], meta["frame_compile_id"]) == (0, 0), meta  # in Dynamo's compile
    # The program: a Python call(), or (C++ wrapper) coil_graph_run inside the kernels' source.
    assert "CPP_SOURCE" in code and ("def call(" in code or "coil_graph_run(" in code), code[:2000]
    meta, summary = coil_ones["coil_inference_0_compile"]
    summary = json.loads(summary)
    assert summary["kernels"] and summary["kernels"][0].startswith("cpp_fused")
    # ("import" too, unless the warm-start graph cache skipped it)
    assert {"lower", "schedule", "codegen", "build"} <= set(summary["seconds"]), summary
    fallbacks = [json.loads(p)["fallback_ops"] for name, (m, p) in coil_ones.items()
                 if name.endswith("_compile")]
    assert any(op.startswith("aten.searchsorted") for ops in fallbacks for op in ops), fallbacks
    backward = [m for name, (m, p) in coil_ones.items() if name.startswith("coil_backward_")]
    assert backward and all(m["frame_id"] == 2 for m in backward), "in its function's compile"
    eager = [json.loads(p) for name, (m, p) in coil_ones.items() if name.endswith("_eager")]
    assert len(eager) == 1 and "BuildError" in eager[0]["reason"], eager
    json.loads(coil_ones["coil_inference_0_provenance"][1])


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_set_logs_in_process():
    if "TORCH_LOGS" in os.environ:
        pytest.skip("set_logs is ignored under TORCH_LOGS")
    reset_compiler()
    handler = _Records()
    logging.getLogger("coil").addHandler(handler)
    try:
        torch._logging.set_logs(fusion=True, kernel_code=True, modules={"coil": logging.INFO})
        torch.compile(lambda x: (x.exp() + 1).sum(0), backend="coil")(torch.randn(6, 3))
    finally:
        logging.getLogger("coil").removeHandler(handler)
        torch._logging.set_logs()
    (record,) = coil_records()
    by_logger = {}
    for r in handler.records:
        by_logger.setdefault(r.name, []).append(r.getMessage())
    assert any(f"coil graph {record.graph_id} (inference" in m for m in by_logger["coil"])
    assert any("fusion.txt:" in m for m in by_logger["coil.__fusion"])
    kernel = record.kernel_names[0]
    assert any(f"kernel {kernel}:" in m and "void " in m for m in by_logger["coil.__kernel_code"])
    assert "coil.__output_code" not in by_logger, "not named"
    assert not any(r.levelno < logging.INFO for r in handler.records if r.name == "coil"), (
        "coil at INFO: no DEBUG records")
