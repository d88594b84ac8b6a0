"""The zoo sweep's report (python -m coil.bench.zoo): reading results.jsonl files, what each
model's record shows wrong (problems), the summary (counts, geomean coil/Inductor speed, the
worst model) and the Markdown table, worst first, that --update-docs appends to docs/zoo.md
with the date, the versions and the command."""

from __future__ import annotations

import datetime
import importlib
import json
import math
import os
import subprocess

import torch

COMPILERS = ("inductor", "coil")


def read_records(paths: list[str]) -> list[dict]:
    """Records of results.jsonl files, the last one of each model (and mode, dtype, device)."""
    by_key = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    by_key[(r["model"], r.get("mode"), r.get("dtype"), r.get("device"))] = r
    return list(by_key.values())


def speedup(record: dict) -> float | None:
    """Inductor's median time over coil's: above 1, coil is faster."""
    b = record.get("backends", {})
    try:
        return b["inductor"]["median_ms"] / b["coil"]["median_ms"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def status_of(record: dict) -> str:
    """The record's status, "both crash" where coil and Inductor failed with the same error
    (Dynamo's, or the model's under Dynamo, before either backend had the graph)."""
    b = record.get("backends", {})
    coil, inductor = b.get("coil", {}), b.get("inductor", {})
    crashed = ("crash", "timeout")
    if (coil.get("status") in crashed and inductor.get("status") in crashed
            and coil.get("error") == inductor.get("error")):
        return "both crash"
    return record["status"]


def problems(record: dict) -> list[str]:
    """What the sweep exists to find in this model, worst first."""
    b = record.get("backends", {})
    coil, inductor = b.get("coil", {}), b.get("inductor", {})
    found = []
    status = status_of(record)
    if status != "both crash" and (status in ("coil crash", "coil timeout")
                                   or coil.get("status") in ("crash", "timeout")):
        found.append("coil crash")
    if coil.get("accurate") is False:
        found.append("coil inaccurate")
    if coil.get("eager_graphs") and inductor.get("status") == "ok":
        found.append("coil graphs eager")
    speed = speedup(record)
    if speed is not None and speed < 0.95:
        found.append("coil slower")
    first_coil, first_ind = coil.get("first_peak_mb"), inductor.get("first_peak_mb")
    if first_coil is not None and first_ind is not None and first_coil > first_ind + 0.5:
        found.append("coil first-call memory")
    return found


_SEVERITY = ("coil crash", "coil inaccurate", "coil graphs eager")


def _sort_key(record: dict) -> tuple:
    found = problems(record)
    severity = min((_SEVERITY.index(p) for p in found if p in _SEVERITY), default=len(_SEVERITY))
    if severity == len(_SEVERITY) and status_of(record) != "ok":
        severity += 2 if status_of(record) in ("not applicable", "build failed",
                                               "eager failed") else 1
    speed = speedup(record)
    return (severity, speed if speed is not None else math.inf, record["model"])


def summarize(records: list[dict]) -> dict:
    speeds = {r["model"]: speedup(r) for r in records if speedup(r) is not None}
    count = {}
    for r in records:
        count[status_of(r)] = count.get(status_of(r), 0) + 1
    found = {}
    for r in records:
        for p in problems(r):
            found.setdefault(p, []).append(r["model"])
    inductor_bad = [r["model"] for r in records
                    if r.get("backends", {}).get("inductor", {}).get("accurate") is False]
    out = {"models": len(records), "status": count, "problems": found,
           "inductor_inaccurate": inductor_bad, "compared": len(speeds)}
    if speeds:
        out["geomean_speedup"] = math.exp(sum(math.log(s) for s in speeds.values()) / len(speeds))
        worst = min(speeds, key=speeds.get)
        out["worst"] = (worst, speeds[worst])
    return out


def _cell(value, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _pair(b: dict, key: str, fmt: str = "{:.1f}") -> str:
    return f"{_cell(b.get('coil', {}).get(key), fmt)} / {_cell(b.get('inductor', {}).get(key), fmt)}"


def _accuracy_cell(res: dict) -> str:
    if res.get("status") not in (None, "ok"):
        return res["status"]
    ok = res.get("accurate")
    return "n/a" if "accurate" not in res else {True: "pass", False: "FAIL", None: "n/c"}[ok]


def _notes(record: dict) -> str:
    b = record.get("backends", {})
    coil = b.get("coil", {})
    notes = []
    for backend in COMPILERS:
        res = b.get(backend, {})
        if res.get("error"):
            notes.append(f"{backend}: {res['error'][:160]}")
        if res.get("accurate") is False:
            notes.append(f"{backend} accuracy: {res.get('accuracy', '')[:160]}")
    if record.get("error") and status_of(record) != "ok":
        notes.append(record["error"][:160])
    graphs = [b.get(x, {}).get("dynamo_graphs") for x in ("coil", "inductor")]
    if None not in graphs and graphs[0] != graphs[1]:
        notes.append(f"Dynamo graphs coil {graphs[0]}, Inductor {graphs[1]}")
    if coil.get("eager_reasons"):
        notes.append("eager: " + coil["eager_reasons"][0][:160])
    if coil.get("fallback_ops"):
        ops = coil["fallback_ops"]
        notes.append("fallbacks: " + ", ".join(ops[:3]) + (f" +{len(ops) - 3}" if len(ops) > 3
                                                          else ""))
    if record.get("reference", "float64") != "float64":
        notes.append("reference float32")
    return "; ".join(notes).replace("|", "/").replace("\n", " ")


HEADER = ["model", "status", "accuracy coil / Inductor", "coil graphs (eager)",
          "graph breaks coil / Inductor", "eager ms", "Inductor ms", "coil ms",
          "coil/Inductor speed", "first call s coil / Inductor",
          "first-call peak MB coil / Inductor", "steady peak MB coil / Inductor", "notes"]


def _row(r: dict) -> list[str]:
    b = r.get("backends", {})
    coil, ind = b.get("coil", {}), b.get("inductor", {})
    graphs = "n/a" if "graphs" not in coil else f"{coil['graphs']} ({coil.get('eager_graphs', 0)})"
    if coil.get("recompiled_graphs"):
        graphs += f" +{coil['recompiled_graphs']} later"
    breaks = " / ".join(_cell(None if "graph_breaks" not in x else sum(x["graph_breaks"].values()),
                              "{}") for x in (coil, ind))
    return [r["model"], status_of(r), f"{_accuracy_cell(coil)} / {_accuracy_cell(ind)}", graphs,
            breaks, _cell(b.get("eager", {}).get("median_ms"), "{:.3f}"),
            _cell(ind.get("median_ms"), "{:.3f}"), _cell(coil.get("median_ms"), "{:.3f}"),
            _cell(speedup(r), "{:.2f}x"), _pair(b, "first_call_s"), _pair(b, "first_peak_mb"),
            _pair(b, "steady_peak_mb"), _notes(r)]


def markdown(records: list[dict]) -> str:
    """The summary lines and the table, worst first."""
    s = summarize(records)
    lines = [f"- models: {s['models']} ("
             + ", ".join(f"{n} {k}" for k, n in sorted(s["status"].items())) + ")"]
    for p in ("coil crash", "coil inaccurate", "coil graphs eager", "coil slower",
              "coil first-call memory"):
        names = s["problems"].get(p, [])
        lines.append(f"- {p}: {len(names)}" + (f" ({', '.join(names[:12])}"
                                                  + (" ..." if len(names) > 12 else "") + ")"
                                                  if names else ""))
    if s["inductor_inaccurate"]:
        lines.append(f"- Inductor inaccurate: {len(s['inductor_inaccurate'])} "
                     f"({', '.join(s['inductor_inaccurate'][:12])})")
    if "geomean_speedup" in s:
        worst, w = s["worst"]
        lines.append(f"- geomean coil/Inductor speed: {s['geomean_speedup']:.2f}x over "
                     f"{s['compared']} models; worst {worst} {w:.2f}x")
    jobs = max((r.get("jobs", 1) for r in records), default=1)
    if jobs > 1:
        lines.append(f"- first calls compiled with up to {jobs} models side by side (first-call "
                     "times inflated; steady-state timing and memory ran alone)")
    lines += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in sorted(records, key=_sort_key):
        lines.append("| " + " | ".join(_row(r)) + " |")
    return "\n".join(lines) + "\n"


def versions() -> str:
    parts = [f"torch {torch.__version__}"]
    for lib in ("transformers", "timm", "torchvision"):
        try:
            parts.append(f"{lib} {importlib.import_module(lib).__version__}")
        except Exception:  # noqa: BLE001 - not installed (or not importable) here
            parts.append(f"{lib} n/a")
    try:
        root = os.path.dirname(os.path.abspath(__file__))
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=False,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, check=False,
                               capture_output=True,
                               text=True, timeout=10).stdout.strip()
        parts.append(f"coil {sha}{' (uncommitted changes)' if dirty else ''}")
    except (OSError, subprocess.SubprocessError):
        pass
    if torch.cuda.is_available():
        parts.append(torch.cuda.get_device_name())
    return " · ".join(parts)


def docs_section(records: list[dict], title: str, command: str) -> str:
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (f"\n### {date} · {title}\n\n{versions()}\n\n`{command}`\n\n" + markdown(records))


def update_docs(path: str, section: str) -> None:
    """Appends a dated section to the results page (results accumulate; none is rewritten)."""
    with open(path, "a") as f:
        f.write(section)
