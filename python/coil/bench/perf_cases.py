"""Benchmark cases found by the performance fuzzer (python -m coil.fuzz --perf --save-cases):
programs where coil was flagged slower than Inductor or eager, kept in perf_cases.json next to
this file and timed by `python -m coil.bench --cases perf_SEED` (`--cases perf`: all of them).

Each entry holds the program's seed, family and params (coil/fuzz_perf_programs.py), which
rebuild its function and inputs exactly, and what the fuzzer measured when it found it. They are
benchmark cases only: no test times them.
"""

from __future__ import annotations

import datetime
import json
import os

import torch

from coil.bench.cases import Built, Case
from coil.fuzz_perf_programs import PerfProgram, build, shrink_to

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_cases.json")
PREFIX = "perf_"
TINY_NUMEL = 4096  # the "tiny" size class (the harness's own check): programs shrunk to this
# Relative error (||coil - eager|| / ||eager|| per output) a case's outputs may have.
REL_ERR = {torch.float32: 1e-3, torch.bfloat16: 3e-2}


def load(path: str | None = None) -> list[dict]:
    """The stored entries, in the order they were found ([] when there is no file). path: PATH
    by default (read when called)."""
    path = path or PATH
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(json.load(f).get("cases", []))


def add(rows: list[dict], device: str, path: str | None = None) -> int:
    """Adds the fuzzer's rows (fuzz_perf.run_one) whose seeds are not stored yet; returns how
    many it added."""
    entries = load(path)
    seen = {e["seed"] for e in entries}
    date = datetime.date.today().isoformat()
    added = 0
    for row in rows:
        if row["seed"] in seen:
            continue
        seen.add(row["seed"])
        found = {b: round(r["median_ms"], 4) for b, r in row["backends"].items()
                 if "median_ms" in r}
        entries.append({"seed": row["seed"], "family": row["family"], "params": row["params"],
                        "desc": row["desc"],
                        "found": {"device": device, "date": date, "torch": torch.__version__,
                                  "median_ms": found, "flags": row["flags"]}})
        added += 1
    with open(path or PATH, "w") as f:
        json.dump({"cases": entries}, f, indent=1)
        f.write("\n")
    return added


def _builder(entry: dict):
    def build_case(device: str, size: str) -> Built:
        program = PerfProgram.from_json(entry)
        if size == "tiny":
            program = shrink_to(program, TINY_NUMEL)
        fn, inputs = build(program, device)
        dtype = inputs[0].dtype if inputs[0].dtype.is_floating_point else torch.float32
        return Built(fn, inputs, program.describe(), rel_err=REL_ERR.get(dtype, 1e-3))

    return build_case


def cases(path: str | None = None) -> list[Case]:
    """Every stored program as a benchmark case named perf_SEED."""
    return [Case(f"{PREFIX}{e['seed']}", "micro", _builder(e)) for e in load(path)]


def find(name: str, path: str | None = None) -> Case | None:
    return next((c for c in cases(path) if c.name == name), None)
