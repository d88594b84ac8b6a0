"""Compile time, cold and warm, each in a fresh process.

Cold: `python -m coil.bench --compile-one CASE --backend B` with empty cache folders (coil's
COIL_CACHE_DIR, Inductor's TORCHINDUCTOR_CACHE_DIR, Triton's TRITON_CACHE_DIR). Warm: the same
command again with the same folders. The child reports the wall time of the first call (which
compiles and runs once) and of the second call (which only runs), and the phases:

- coil: import (FX graph -> coil's graph), lower, schedule, codegen (coil's own timers,
  CompiledGraph.seconds), core (the rest of the C++ compile call), build (the C++ compiler, or the
  cache lookup), load (the generated wrapper module and the kernel library), and the rest
  (Dynamo, AOTAutograd, the first run). The import/build/load timers wrap coil's Python entry
  points from outside; coil itself is not changed.
- Inductor: the totals torch._dynamo.utils.compile_times() keeps, summarised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import torch

from coil.bench.cases import NotAvailable, find

MARK = "COIL_BENCH_RESULT "

# Inductor's timers (torch._dynamo.utils.compile_times) shown in the table, by phase.
# Its timers nest: "aot" (AOTAutograd) contains all of Inductor's phases, and "load" contains the
# wait for the kernels' compilation ("build").
INDUCTOR_PHASES = {
    "dynamo": ["bytecode_tracing"],
    "aot": ["create_aot_dispatcher_function"],
    "lower": ["GraphLowering.run"],
    "schedule": ["Scheduler.__init__"],
    "codegen": ["GraphLowering.codegen"],
    "build": ["async_compile.wait"],
    "load": ["PyCodeCache.load_by_key_path"],
}
COIL_PHASES = ("import", "lower", "schedule", "codegen", "core", "build", "load")


class _CoilProbes:
    """Times coil's Python entry points by wrapping them for the length of one compile."""

    def __init__(self):
        self.t = {"import": 0.0, "core": 0.0, "build": 0.0, "load": 0.0}
        self.builds = []
        self._undo = []

    def _wrap(self, owner, name, phase, on_result=None):
        original = getattr(owner, name, None)
        if original is None:
            return

        def wrapped(*args, **kwargs):
            start = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                self.t[phase] += time.perf_counter() - start
            if on_result is not None:
                on_result(result)
            return result

        setattr(owner, name, wrapped)
        self._undo.append((owner, name, original))

    def install(self):
        from coil import _C, fx_import, runtime

        self._wrap(fx_import, "import_graph", "import")
        self._wrap(_C, "compile_graph", "core")
        self._wrap(_C, "build_shared_library", "build", self._on_build)
        self._wrap(runtime, "load_module", "load")
        return self

    def _on_build(self, built):
        try:
            self.builds.append(bool(built["cache_hit"]))
        except (KeyError, TypeError):
            pass

    def remove(self):
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def _inductor_times() -> dict:
    from torch._dynamo import utils

    names, values = utils.compile_times(repr="csv")
    out = {}
    for name, value in zip(names, values):
        out[name] = sum(float(v) for v in str(value).split(",") if v.strip())
    return out


def compile_one(case_name: str, backend: str, device: str, size: str,
                mode: str | None = None) -> dict:
    """Runs in the child process: compile one case with one backend, report its times."""
    from coil.bench.timing import compile_for, make_step, model_for, sync

    torch.manual_seed(0)
    result = {"case": case_name, "backend": backend, "status": "ok"}
    try:
        built = find(case_name).build(device, size)
    except NotAvailable as e:
        return {**result, "status": "not available here", "reason": str(e)}
    probes = None
    if backend == "coil":
        import coil

        before = len(coil.compiled_graphs())
        probes = _CoilProbes().install()
    module = model_for(backend, built)
    try:
        step = make_step(compile_for(backend, module, mode), module, built, device)
        # COIL_BENCH_PROFILE=path: the first call under cProfile, its stats written to path
        # (where a warm start's time goes: python -m pstats path).
        profile_path = os.environ.get("COIL_BENCH_PROFILE")
        profiler = None
        if profile_path:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        start = time.perf_counter()
        step()
        sync(device)
        result["first_call_s"] = time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile_path)
        start = time.perf_counter()
        step()
        sync(device)
        result["second_call_s"] = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001
        result.update(status="failed", reason=f"{type(e).__name__}: {e}"[:300])
        return result
    finally:
        if probes is not None:
            probes.remove()
    if backend == "coil":
        records = coil.compiled_graphs()[before:]
        phases = {"import": probes.t["import"]}
        for key in ("lower", "schedule", "codegen"):
            phases[key] = sum(r.seconds.get(key, 0.0) for r in records)
        phases["core"] = max(
            0.0, probes.t["core"] - sum(phases[k] for k in ("lower", "schedule", "codegen"))
        )
        phases["build"] = probes.t["build"]
        phases["load"] = max(0.0, probes.t["load"] - probes.t["build"])
        result["phases"] = phases
        result["build_cache_hits"] = f"{sum(probes.builds)}/{len(probes.builds)}"
        failed = sum(r.eager_fallback for r in records)
        if failed:
            result["eager_graphs"] = f"{failed}/{len(records)}"
        if not records or failed == len(records):
            result["status"] = "could not run"
            result["reason"] = "no graph ran through coil"
    else:
        raw = _inductor_times()
        result["raw_phases"] = raw
        result["phases"] = {
            k: sum(raw.get(n, 0.0) for n in names) for k, names in INDUCTOR_PHASES.items()
        }
        return result
    # what coil's timers do not cover: Dynamo, AOTAutograd and the first run
    result["phases"]["rest"] = max(0.0, result["first_call_s"] - sum(phases.values()))
    return result


def child_main(case_name: str, backend: str, device: str, size: str,
               mode: str | None = None) -> None:
    result = compile_one(case_name, backend, device, size, mode)
    print(MARK + json.dumps(result), flush=True)


def cache_env(root: str) -> dict:
    """The cache folders of one backend's cold/warm pair, under root."""
    return {
        "COIL_CACHE_DIR": os.path.join(root, "coil"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
        "TRITON_CACHE_DIR": os.path.join(root, "triton"),
    }


def _run_child(case_name, backend, device, size, cache_root, timeout_s, mode=None) -> dict:
    env = dict(os.environ)
    env.update(cache_env(cache_root))
    env.pop("COIL_DEBUG", None)
    env.pop("COIL_DEBUG_DIR", None)
    cmd = [
        sys.executable,
        "-m",
        "coil.bench",
        "--compile-one",
        case_name,
        "--backend",
        backend,
        "--device",
        device,
        "--size",
        size,
    ] + (["--mode", mode] if mode else [])
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {timeout_s} s"}
    wall = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            result = json.loads(line[len(MARK) :])
            result["process_s"] = wall
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {
        "status": "failed",
        "reason": f"exit {proc.returncode}: {' | '.join(tail)}"[:400],
        "process_s": wall,
    }


def measure(
    case_name: str, backends, device: str, size: str, root: str, timeout_s: float = 900,
    mode: str | None = None,
) -> dict:
    """Cold then warm compile of one case for each backend, each in a fresh process; backend B's
    caches are left under root/B (see cache_env), for the benchmark process to reuse."""
    out = {}
    for backend in backends:
        if backend == "eager":
            continue
        folder = os.path.join(root, backend)
        os.makedirs(folder, exist_ok=True)
        cold = _run_child(case_name, backend, device, size, folder, timeout_s, mode)
        warm = _run_child(case_name, backend, device, size, folder, timeout_s, mode)
        out[backend] = {"cold": cold, "warm": warm}
    return out
