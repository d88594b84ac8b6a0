"""The model-population sweep: every model of coil.bench.zoo_models run eagerly, by Inductor and by
coil, each checked against a float64 reference and timed.

    python -m coil.bench.zoo --list --family hf                  # the population, nothing run
    python -m coil.bench.zoo --family hf --device cpu --out /tmp/zoo_cpu
    python -m coil.bench.zoo --device cuda --shard 0/4 --out zoo_gpu_0 --time-limit 8
    python -m coil.bench.zoo --report zoo_gpu_*/results.jsonl --update-docs

Per model, in one child process (--isolate, the default: a segfault or a hang past --timeout is
recorded as a crash of the phase it happened in, and the sweep goes on): the model built from its
seed; a float64 reference (a float64 copy of the model on the same inputs; where float64 is not
supported, float32 with a 10x looser tolerance, said in the record); eager, Inductor and coil,
each one's first call timed cold (fresh cache folders per model unless --keep-caches) with its
peak memory (CUDA only: the CPU keeps no allocation statistics, so n/a); each compiled output
checked against eager's and the reference by torch._dynamo.utils.same with the PyTorch benchmark
harness's settings (benchmarks/dynamo: tol 1e-3 for inference, 1e-2 for a training step, no
cosine similarity, equal_nan except in float32); Dynamo's graphs and graph breaks per backend,
coil's graphs run eagerly and why, its ATen fallback ops; then steady-state medians, repetitions
interleaved round robin with warm-up excluded (coil.bench.timing.time_call: CUDA events on the
GPU), and the peak memory of one steady call (coil.bench.memory.peak_bytes).

Writes DIR/results.jsonl (a line per model, appended as each finishes; --resume skips those
already there) and DIR/summary.md (worst first: coil crashes, accuracy failures, graphs run
eagerly, then the slowest against Inductor). --update-docs appends a dated section to docs/zoo.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import dataclasses
import fcntl
import importlib
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import torch

from coil.bench import zoo_models
from coil.bench.zoo_models import Entry, NotApplicable
from coil.bench.zoo_report import (
    docs_section,
    markdown,
    read_records,
    speedup,
    status_of,
    update_docs,
    versions,
)

BACKENDS = ("eager", "inductor", "coil")
COMPILERS = ("inductor", "coil")
DOCS = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "zoo.md"))
FP32_REFERENCE_LOOSENING = 10.0  # tolerance factor when the reference is float32
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclasses.dataclass
class Settings:
    device: str = "cpu"
    dtype: str = "float32"
    train: bool = False
    seed: int = 0
    backends: tuple = BACKENDS
    budget_s: float = 3.0  # seconds of timed repetitions per model, all backends together
    warmup: int = 2
    min_reps: int = 5
    max_reps: int = 50
    timeout_s: float = 900.0
    isolate: bool = True
    keep_caches: bool = False
    threads: int | None = None  # torch.set_num_threads (CPU); None: torch's default
    jobs: int = 1  # models run side by side (isolated children); their timing takes turns
    stop_at: float | None = None  # time.time() at which running children are killed, unrecorded

    @property
    def size(self) -> str:
        return "cuda" if self.device == "cuda" else "cpu"

    def tolerance(self) -> float:
        """The benchmark harness's: timm_models.py and huggingface.py
        get_tolerance_and_cosine_flag (no per-model exceptions)."""
        return 1e-2 if self.train else 1e-3


# --------------------------------------------------------------------------------------------
# one model
# --------------------------------------------------------------------------------------------


def flatten(out) -> list:
    """The tensors of a model's output, in order (ModelOutputs and dicts by their keys, lists,
    tuples, named tuples); None and other values skipped."""
    found, stack = [], [out]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
    return found


def _cast(tree, device: str, dtype: torch.dtype):
    from torch.utils._pytree import tree_map

    def one(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(device, dtype) if x.is_floating_point() else x.to(device)

    return tree_map(one, tree)


def make_step(fn, module: torch.nn.Module, example, train: bool):
    """A zero-argument call of fn (the module, or the module compiled) on the example's inputs
    returning a list of tensors: the outputs under no_grad; or one training step (gradients
    cleared, forward, loss, backward) returning the loss, the outputs and every parameter's
    gradient (zeros where none, as the harness's collect_results)."""
    args, kwargs = example.args, example.kwargs
    if not train:

        def infer():
            with torch.no_grad():
                return [t.detach() for t in flatten(fn(*args, **kwargs))]

        return infer
    params = list(module.parameters())

    def train_step():
        for p in params:
            p.grad = None
        out = fn(*args, **kwargs)
        if example.has_loss:
            loss = out["loss"]
        else:
            from torch._dynamo.testing import reduce_to_scalar_loss

            loss = reduce_to_scalar_loss([t for t in flatten(out) if t.is_floating_point()])
        loss.backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in params]
        return [loss.detach(), *(t.detach() for t in flatten(out)), *grads]

    return train_step


def _error(exc: BaseException) -> str:
    lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:400]


def _fail(res: dict, status: str, exc: BaseException, when: str) -> None:
    res.update(status=status, error=_error(exc), when=when,
               traceback=traceback.format_exc(limit=-6)[-3000:])


def _reference(example, settings: Settings) -> tuple[list, str, float]:
    """(outputs as float64, what the reference is, tolerance): a float64 copy of the model on the
    same inputs; else float32, with the tolerance loosened."""
    tol, why = settings.tolerance(), ""
    for dtype in (torch.float64, torch.float32):
        model = None
        try:
            model = copy.deepcopy(example.model).to(settings.device, dtype)
            ex = dataclasses.replace(example, args=_cast(example.args, settings.device, dtype),
                                     kwargs=_cast(example.kwargs, settings.device, dtype))
            torch.manual_seed(settings.seed)
            out = make_step(model, model, ex, settings.train)()
            out = [t.double() if t.is_floating_point() else t for t in out]
            if dtype == torch.float64:
                return out, "float64", tol
            return out, f"float32 (float64 raised {why})", tol * FP32_REFERENCE_LOOSENING
        except Exception as e:  # noqa: BLE001 - float64 unsupported: the next precision
            why = _error(e)[:200]
        finally:
            del model
    raise RuntimeError(f"the reference did not run in float64 or float32: {why}")


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item()


def check(expected: list, actual: list, fp64: list, tol: float, equal_nan: bool,
          variable: bool) -> tuple[bool | None, str]:
    """(accurate, detail): torch._dynamo.utils.same, as the harness calls it (eager's outputs,
    the compiled ones, the reference's). None: not comparable (outputs whose sizes depend on
    values came out in other sizes)."""
    from torch._dynamo.utils import same

    if len(actual) != len(expected):
        return False, f"{len(actual)} outputs, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape:
            detail = f"output {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
            return (None, f"not comparable: {detail} (sizes depend on values)") if variable \
                else (False, detail)
    messages = []
    try:
        ok = same(expected, actual, fp64_ref=fp64, cos_similarity=False, tol=tol,
                  equal_nan=equal_nan, log_error=lambda fmt, *a: messages.append(fmt % a))
    except Exception as err:  # noqa: BLE001 - same() raises on some mismatches
        ok, messages = False, [f"same() raised {_error(err)}"]
    floats = [(a, e, r) for a, e, r in zip(actual, expected, fp64)
              if a.is_floating_point() and a.numel()]
    worst = max(floats, key=lambda t: _rmse(t[0], t[2]), default=None)
    errors = ""
    if worst is not None:
        errors = f"rmse vs reference {_rmse(worst[0], worst[2]):.2e} (eager {_rmse(worst[1], worst[2]):.2e})"
    if ok:
        return True, errors
    return False, "; ".join(messages[:2] + [errors])[:500]


def _first_call(backend: str, step, device: str, res: dict):
    """The first call (compiles): its time, peak memory (CUDA), Dynamo's graphs and breaks."""
    from torch._dynamo.utils import counters

    counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device == "cuda":
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        out = step()
        if device == "cuda":
            torch.cuda.synchronize()
            res["first_peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        res["first_call_s"] = time.perf_counter() - start
    if backend != "eager":
        res["dynamo_graphs"] = counters["stats"].get("unique_graphs", 0)
        breaks = {}
        for reason, count in counters["graph_break"].items():
            line = reason.strip().splitlines()[0][:200] if reason.strip() else "?"
            breaks[line] = breaks.get(line, 0) + count
        res["graph_breaks"] = breaks
    res["warnings"] = sorted({str(w.message).splitlines()[0][:300] for w in caught
                              if type(w.message).__name__ == "CoilWarning"})[:5]
    return out


def _coil_records(res: dict, first: int, after_first_call: int) -> None:
    """What coil made of the model: graphs of the first call, graphs compiled later (recompiles),
    kernels, graphs run eagerly and why, ATen fallback ops."""
    import coil

    records = coil.compiled_graphs()[first:]
    forward = [r.kind in ("inference", "forward") for r in records]
    res["graphs"] = sum(forward[: after_first_call - first])
    res["recompiled_graphs"] = sum(forward[after_first_call - first:])
    res["backward_graphs"] = sum(r.kind == "backward" for r in records)
    res["kernels"] = sum(len(r.kernel_names) for r in records)
    eager = [r for r in records if r.eager_fallback]
    res["eager_graphs"] = len(eager)
    res["eager_reasons"] = sorted({r.eager_reason[:400] for r in eager})[:5]
    res["fallback_ops"] = sorted({op for r in records for op in r.fallback_ops})


def _time(steps: dict, results: dict, settings: Settings) -> None:
    """Warm-up calls, then repetitions round robin (the order rotates each one), medians."""
    from coil.bench.timing import time_call

    device, calls, estimate = settings.device, {}, 0.0
    slow = results.get("eager", {}).get("first_call_s", 0.0) > 0.5
    warmup, min_reps = (1, min(settings.min_reps, 3)) if slow else (settings.warmup,
                                                                     settings.min_reps)
    for backend, step in list(steps.items()):
        try:  # the warm-up calls' fastest as the estimate: a busy host's spikes overestimate
            one = min(time_call(step, device) for _ in range(max(warmup, 1)))
            calls[backend] = max(3, min(50, math.ceil(2e-3 / max(one, 1e-6)))) \
                if device == "cuda" else 1
            estimate += one * calls[backend]
        except Exception as e:  # noqa: BLE001
            _fail(results[backend], "crash", e, "a later call")
            del steps[backend]
    reps = int(min(settings.max_reps, max(min_reps, settings.budget_s / max(estimate, 1e-6))))
    times = {b: [] for b in steps}
    order = list(steps)
    for rep in range(reps):
        k = rep % max(len(order), 1)
        for backend in order[k:] + order[:k]:
            if backend not in steps:
                continue
            try:
                times[backend].append(time_call(steps[backend], device, calls[backend]))
            except Exception as e:  # noqa: BLE001
                _fail(results[backend], "crash", e, "a later call")
                del steps[backend]
    for backend, ts in times.items():
        if ts and backend in steps:
            results[backend].update(median_ms=statistics.median(ts) * 1e3, min_ms=min(ts) * 1e3,
                                    reps=len(ts))


LOCK_ENV = "COIL_ZOO_TIMING_LOCK"


@contextlib.contextmanager
def _measuring_alone():
    """With --jobs N the children compile side by side, but the steady-state timing and memory of
    one model run while no other child times: they hold an exclusive lock on one file (its path
    in COIL_ZOO_TIMING_LOCK, set by the parent)."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_model(entry: Entry, settings: Settings, report=lambda record: None) -> dict:
    """Builds, references, compiles, checks and times one model in this process; never raises.
    report(record) is called at the start of every phase (record["phase"] says which), so that a
    parent process knows where a child died."""
    record = {"model": entry.name, "family": entry.family, "group": entry.group,
              "device": settings.device, "dtype": settings.dtype,
              "mode": "train" if settings.train else "inference", "seed": settings.seed,
              "status": "running", "backends": {}}
    if settings.jobs > 1:
        record["jobs"] = settings.jobs  # first calls compiled beside other models
    start = time.perf_counter()
    if settings.threads:
        torch.set_num_threads(settings.threads)

    def phase(name: str) -> None:
        record["phase"] = name
        report(record)

    try:
        _run(entry, settings, record, phase)
    except Exception as e:  # noqa: BLE001 - the harness's own failure, recorded
        record.update(status="harness error", error=_error(e),
                      traceback=traceback.format_exc(limit=-6)[-3000:])
    record["wall_s"] = time.perf_counter() - start
    if record["status"] == "running":
        record["status"] = _status(record)
    record.pop("phase", None)
    if settings.device == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 - a device fault a backend left behind: recorded
            record.setdefault("error", f"after the model: {_error(e)}")
    return record


def _run(entry: Entry, settings: Settings, record: dict, phase) -> None:
    device, dtype = settings.device, getattr(torch, settings.dtype)
    phase("build")
    try:
        example = entry.build(settings.size, settings.train, settings.seed)
    except NotApplicable as e:
        record.update(status="not applicable", error=str(e))
        return
    except Exception as e:  # noqa: BLE001
        record.update(status="build failed", error=_error(e))
        return
    record["desc"] = example.desc
    record["params_m"] = sum(p.numel() for p in example.model.parameters()) / 1e6
    phase("reference")
    try:
        fp64, record["reference"], tol = _reference(example, settings)
    except Exception as e:  # noqa: BLE001
        record.update(status="eager failed", error=_error(e))
        return
    record["tolerance"] = tol
    example.model.to(device, dtype)
    example = dataclasses.replace(example, args=_cast(example.args, device, dtype),
                                  kwargs=_cast(example.kwargs, device, dtype))
    torch._dynamo.reset()
    results = {b: {"status": "ok"} for b in settings.backends}
    record["backends"] = results
    # a training step updates gradients: each backend its own copy, from the same weights
    modules = {b: copy.deepcopy(example.model) if settings.train else example.model
               for b in settings.backends}
    steps, outputs, coil_first, coil_after = {}, {}, 0, 0
    for backend in settings.backends:
        res = results[backend]
        if backend != "eager" and "eager" not in outputs:
            res.update(status="not run", error="eager failed")
            continue
        phase(f"{backend}: first call")
        module = modules[backend]
        try:
            if backend == "coil":
                import coil

                coil_first = len(coil.compiled_graphs())
            fn = module if backend == "eager" else torch.compile(
                module, backend="inductor" if backend == "inductor" else "coil")
            step = make_step(fn, module, example, settings.train)
            torch.manual_seed(settings.seed)
            outputs[backend] = _first_call(backend, step, device, res)
            steps[backend] = step
            if backend == "coil":
                coil_after = len(coil.compiled_graphs())
        except Exception as e:  # noqa: BLE001
            _fail(res, "eager failed" if backend == "eager" else "crash", e, "first call")
            if backend == "eager":
                record.update(status="eager failed", error=res["error"])
                return
    equal_nan = settings.dtype != "float32"
    for backend in COMPILERS:
        if backend in outputs:
            ok, detail = check(outputs["eager"], outputs[backend], fp64, tol, equal_nan,
                               example.variable_outputs)
            results[backend].update(accurate=ok, accuracy=detail)
    del outputs, fp64
    with _measuring_alone():
        phase("timing")
        _time(steps, results, settings)
        phase("memory")
        from coil.bench.memory import peak_bytes

        for backend, step in steps.items():
            try:
                results[backend]["steady_peak_mb"] = peak_bytes(step, device) / 2**20
            except Exception as e:  # noqa: BLE001 - a figure missing, not a failed model
                results[backend]["memory_error"] = _error(e)
    if "coil" in results and results["coil"]["status"] == "ok":
        _coil_records(results["coil"], coil_first, coil_after)


def _status(record: dict) -> str:
    b = record.get("backends", {})
    for backend in ("coil", "inductor"):
        if b.get(backend, {}).get("status") in ("crash", "timeout"):
            return status_of({**record, "status": f"{backend} {b[backend]['status']}"})
    return "ok"


# --------------------------------------------------------------------------------------------
# isolation: one child process per model
# --------------------------------------------------------------------------------------------


def _write(path: str, record: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, default=str)
    os.replace(tmp, path)


def _child_command(entry: Entry, settings: Settings, result: str) -> list[str]:
    cmd = [sys.executable, "-m", "coil.bench.zoo", "--child", entry.name, "--result", result,
           "--device", settings.device, "--dtype", settings.dtype, "--seed", str(settings.seed),
           "--budget", str(settings.budget_s), "--backends", ",".join(settings.backends)]
    if entry.ref:
        cmd += ["--builder", entry.ref]
    if settings.threads:
        cmd += ["--threads", str(settings.threads)]
    if settings.jobs > 1:
        cmd += ["--jobs", str(settings.jobs)]
    return cmd + (["--train"] if settings.train else [])


def _died(record: dict, why: str, log_tail: str) -> dict:
    """The record of a child that died (signal, exit) or hung, charged to the phase it was in."""
    phase = record.pop("phase", "start")
    backend = phase.split(":")[0] if ":" in phase else None
    status = "timeout" if why.startswith("timeout") else "crash"
    record["crash"] = {"phase": phase, "why": why, "log_tail": log_tail[-2000:]}
    if backend in COMPILERS:
        record["backends"].setdefault(backend, {}).update(status=status, error=why,
                                                          when=phase)
        record["status"] = f"{backend} {status}"
    elif backend == "eager" or phase in ("build", "reference"):
        record["status"] = "eager failed"
        record["error"] = f"{why} in {phase}"
    else:  # timing or memory: every backend was running
        record["status"] = status
        record["error"] = f"{why} in {phase}"
    return record


def run_isolated(entry: Entry, settings: Settings, log_dir: str, lock: str | None = None) -> dict:
    """run_model in a child process with fresh cache folders (unless keep_caches); a child that
    crashes or passes the timeout is killed with its process group and recorded. lock: the file
    the children of a --jobs sweep take turns on to time."""
    work = tempfile.mkdtemp(prefix="coil_zoo_")
    result = os.path.join(work, "record.json")
    log_path = os.path.join(log_dir, entry.name.replace("/", "__") + ".log")
    env = dict(os.environ, **OFFLINE_ENV)
    if lock:
        env[LOCK_ENV] = lock
    if settings.jobs > 1:
        # Inductor's compile workers are processes (one pool per child, as many as cores): with
        # several models side by side, a share of the cores each (nine children with full pools
        # took down a 16-core, 128 GB GPU machine, 2026-12-05)
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS",
                       str(max(1, (os.cpu_count() or 2) // settings.jobs)))
    if not settings.keep_caches:
        from coil.bench.compile_time import cache_env

        env.update(cache_env(os.path.join(work, "caches")))
    start = time.perf_counter()
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen(_child_command(entry, settings, result), stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
            limit = settings.timeout_s
            cut = settings.stop_at is not None and settings.stop_at - time.time() < limit
            if cut:
                limit = max(settings.stop_at - time.time(), 0.0)
            try:
                rc = proc.wait(timeout=limit)
                why = None if rc == 0 else (f"killed by {signal.Signals(-rc).name}" if rc < 0
                                            else f"exit status {rc}")
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if cut:  # the sweep's --stop-after, not the model: no record, --resume reruns it
                    return None
                why = f"timeout after {settings.timeout_s:.0f} s"
        try:
            with open(result) as f:
                record = json.load(f)
        except (OSError, ValueError):
            record = {"model": entry.name, "family": entry.family, "group": entry.group,
                      "device": settings.device, "dtype": settings.dtype,
                      "mode": "train" if settings.train else "inference", "backends": {}}
        if why is not None or record.get("status") == "running":
            with open(log_path, errors="replace") as f:
                tail = f.read()[-4000:]
            record = _died(record, why or "exited before finishing", tail)
            record["wall_s"] = time.perf_counter() - start
        record["log"] = log_path
        return record
    finally:
        shutil.rmtree(work, ignore_errors=True)


def child_main(args) -> int:
    settings = _settings(args)
    if args.builder:
        module, _, fn = args.builder.partition(":")
        build = getattr(importlib.import_module(module), fn)
        family = zoo_models.family_of(args.child) or "test"
        entry = Entry(args.child, family, "injected", build, args.builder)
    else:
        entry = zoo_models.find(args.child)
    record = run_model(entry, settings, report=lambda r: _write(args.result, r))
    _write(args.result, record)
    return 0


# --------------------------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------------------------


def shard(entries: list, k: int, n: int) -> list:
    """The k-th of n parts: every n-th entry from the k-th (the population's order mixes small
    and large models, so the parts come out alike)."""
    if not 0 <= k < n:
        raise ValueError(f"--shard {k}/{n}: need 0 <= K < N")
    return entries[k::n]


def select(families: tuple, models: list[str], shard_kn: tuple | None,
           limit: int | None) -> list[Entry]:
    entries = zoo_models.population(families)
    if models:
        wanted = set(models)
        entries = [e for e in entries if e.name in wanted or e.name.split("/", 1)[1] in wanted]
        found = {e.name for e in entries} | {e.name.split("/", 1)[1] for e in entries}
        unknown = sorted(wanted - found)
        if unknown:
            raise KeyError(f"not in the population: {', '.join(unknown)} (see --list)")
    if shard_kn:
        entries = shard(entries, *shard_kn)
    return entries[:limit] if limit else entries


def _line(record: dict) -> str:
    b = record.get("backends", {})
    parts = [record["status"]]
    speed = speedup(record)
    if speed is not None:
        parts.append(f"coil/Inductor {speed:.2f}x")
    for backend in COMPILERS:
        if b.get(backend, {}).get("accurate") is False:
            parts.append(f"{backend} INACCURATE")
    if b.get("coil", {}).get("eager_graphs"):
        parts.append(f"{b['coil']['eager_graphs']} coil graphs eager")
    if record.get("error"):
        parts.append(record["error"][:120])
    return ", ".join(parts)


def sweep(entries: list[Entry], settings: Settings, out: str | None, resume: bool = False,
          time_limit_min: float | None = None, quiet: bool = False) -> list[dict]:
    """Runs the entries one after another (each in a child process when settings.isolate), or
    settings.jobs of them side by side, their steady-state timing taking turns (a file lock);
    appends each record to out/results.jsonl as it finishes. Returns the records of this run
    (and, with resume, the earlier ones of the same entries)."""
    done = {}
    jsonl = os.path.join(out, "results.jsonl") if out else None
    if out:
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    if jsonl and resume and os.path.exists(jsonl):
        done = {r["model"]: r for r in read_records([jsonl])}
    log_dir = os.path.join(out, "logs") if out else tempfile.mkdtemp(prefix="coil_zoo_logs_")
    todo = [(i, e) for i, e in enumerate(entries) if e.name not in done]
    by_index = {i: done[e.name] for i, e in enumerate(entries) if e.name in done}
    start = time.perf_counter()

    def finished(i: int, record: dict | None) -> None:
        if record is None:  # stopped by --stop-after
            return
        by_index[i] = record
        if jsonl:
            with open(jsonl, "a") as f:
                f.write(json.dumps(record, default=str) + "\n")
        if not quiet:
            print(f"[{i + 1}/{len(entries)}] {record['model']}: {_line(record)}", file=sys.stderr,
                  flush=True)

    def out_of_time(k: int) -> bool:
        stopped = settings.stop_at is not None and time.time() >= settings.stop_at
        if not stopped and (time_limit_min is None
                            or time.perf_counter() - start <= 60 * time_limit_min):
            return False
        print(f"coil.bench.zoo: time limit; {len(todo) - k} models not run (--resume runs them)",
              file=sys.stderr)
        return True

    if settings.jobs <= 1 or not settings.isolate:
        for k, (i, entry) in enumerate(todo):
            if out_of_time(k):
                break
            record = (run_isolated(entry, settings, log_dir) if settings.isolate
                      else run_model(entry, settings))
            finished(i, record)
        return [by_index[i] for i in sorted(by_index)]
    lock = os.path.join(log_dir, ".timing.lock")
    with concurrent.futures.ThreadPoolExecutor(settings.jobs) as pool:
        running, k = {}, 0
        while k < len(todo) or running:
            while k < len(todo) and len(running) < settings.jobs and not out_of_time(k):
                i, entry = todo[k]
                running[pool.submit(run_isolated, entry, settings, log_dir, lock)] = i
                k += 1
            if k < len(todo) and len(running) < settings.jobs:
                k = len(todo)  # out of time: start nothing more, wait for those running
            if not running:
                break
            ready, _ = concurrent.futures.wait(running, return_when="FIRST_COMPLETED")
            for future in ready:
                finished(running.pop(future), future.result())
    return [by_index[i] for i in sorted(by_index)]


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m coil.bench.zoo", description=__doc__.split("\n")[0])
    p.add_argument("--family", default="", help="comma-separated subset of timm,torchvision,hf")
    p.add_argument("--models", default="", help="comma-separated names (hf/BertModel or BertModel)")
    p.add_argument("--shard", default=None, metavar="K/N", help="the K-th of N parts (0 <= K < N)")
    p.add_argument("--limit", type=int, default=None, help="at most this many models")
    p.add_argument("--list", action="store_true", help="print the population and exit")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                   help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--train", action="store_true", help="one training step instead of inference")
    p.add_argument("--out", default=None, help="results folder (default zoo_results/DEVICE)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per model (isolated)")
    p.add_argument("--no-isolate", dest="isolate", action="store_false",
                   help="run every model in this process (a crash ends the sweep)")
    p.add_argument("--keep-caches", action="store_true",
                   help="use the usual coil/Inductor caches (default: fresh ones per model)")
    p.add_argument("--resume", action="store_true", help="skip models already in --out")
    p.add_argument("--time-limit", type=float, default=None,
                   help="minutes: start no model after this much time")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timed repetitions per model (default 3 cpu, 5 cuda)")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--stop-after", type=float, default=None, metavar="MIN",
                   help="kill the models still running after this many minutes, unrecorded "
                        "(--resume runs them again)")
    p.add_argument("--jobs", type=int, default=1,
                   help="models run side by side (each isolated; steady-state timing takes turns)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads in each model's process (CPU)")
    p.add_argument("--report", nargs="+", default=None, metavar="JSONL",
                   help="summarize results.jsonl files instead of running")
    p.add_argument("--update-docs", action="store_true",
                   help="append a dated section with the table to docs/zoo.md")
    p.add_argument("--title", default=None,
                   help="the docs section's title (default: device, dtype, mode, families)")
    p.add_argument("--docs", default=DOCS, help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true")
    # internal: one model in a child process
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--builder", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    return p


def _settings(args) -> Settings:
    backends = tuple(b for b in BACKENDS if b == "eager" or b in args.backends.split(","))
    return Settings(device=args.device,
                    dtype=args.dtype or ("bfloat16" if args.device == "cuda" else "float32"),
                    train=args.train, seed=args.seed, backends=backends,
                    budget_s=args.budget or (5.0 if args.device == "cuda" else 3.0),
                    timeout_s=args.timeout, isolate=args.isolate, keep_caches=args.keep_caches,
                    threads=args.threads, jobs=max(1, args.jobs),
                    stop_at=None if args.stop_after is None
                    else time.time() + 60 * args.stop_after)


def _families(text: str) -> tuple:
    chosen = tuple(f.strip() for f in text.split(",") if f.strip()) or zoo_models.FAMILIES
    bad = [f for f in chosen if f not in zoo_models.FAMILIES]
    if bad:
        raise SystemExit(f"--family: unknown {bad}; choose from {zoo_models.FAMILIES}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    if args.child:
        return child_main(args)
    argv_list = sys.argv[1:] if argv is None else list(argv)
    command = "python -m coil.bench.zoo " + " ".join(shlex.quote(a) for a in argv_list)
    if args.report:
        records = read_records(args.report)
        print(markdown(records))
        if args.update_docs:
            title = args.title or f"merged from {len(args.report)} result files"
            update_docs(args.docs, docs_section(records, title, command))
        return 0
    families = _families(args.family)
    for family in families:
        why = zoo_models.missing(family)
        if why:
            print(f"coil.bench.zoo: {why}", file=sys.stderr)
    shard_kn = tuple(int(x) for x in args.shard.split("/")) if args.shard else None
    entries = select(families, [m for m in args.models.split(",") if m], shard_kn, args.limit)
    if args.list:
        for e in entries:
            print(f"{e.name:60} {e.family:12} {e.group}")
        print(f"{len(entries)} models", file=sys.stderr)
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("coil.bench.zoo: --device cuda, but CUDA is not available here")
    settings = _settings(args)
    out = args.out or os.path.join("zoo_results", args.device)
    records = sweep(entries, settings, out, args.resume, args.time_limit, args.quiet)
    table = markdown(records)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(f"`{command}`\n\n{versions()}\n\n{table}")
    print(table)
    if args.update_docs:
        mode = "train" if settings.train else "inference"
        title = args.title or (f"{settings.device} · {settings.dtype} · {mode} · "
                               f"{','.join(families)}"
                               + (f" · shard {args.shard}" if args.shard else ""))
        update_docs(args.docs, docs_section(records, title, command))
    print(f"coil.bench.zoo: wrote {out}/results.jsonl and {out}/summary.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
