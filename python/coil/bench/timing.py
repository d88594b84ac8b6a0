"""Running one case side by side: eager, Inductor and coil in one process, repetitions interleaved
round robin (the order rotates each repetition), warm-up calls excluded, medians reported, every
compiled output checked against eager.

CPU calls are timed with time.perf_counter. On CUDA each repetition times several back-to-back
calls between two CUDA events (at least 3, about 2 ms in all) and reports the time per call: the
GPU stays busy as it does inside a model, so host overhead (Dynamo's guards, the wrappers, kernel
launches) counts only where the host is slower than the GPU, the same for every backend.
"""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
import sys
import time
import traceback
import warnings

import torch

from coil.bench.cases import Built, Case, NotAvailable

BACKENDS = ("eager", "inductor", "coil")


# --------------------------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------------------------


class Progress:
    """A progress line on stderr: tqdm when installed, a plain carriage-return line otherwise."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled = total, 0, enabled
        self._bar = None
        self._start = time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, file=sys.stderr, unit="step", dynamic_ncols=True)
            except ImportError:
                pass

    def step(self, label: str, advance: int = 1) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_description(label[:40])
            self._bar.update(advance)
            return
        self.done += advance
        elapsed = time.perf_counter() - self._start
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        print(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{elapsed:6.0f}s {label[:40]:<40}",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def label(self, label: str) -> None:
        if self.enabled and self._bar is not None:
            self._bar.set_description(label[:40])

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            print(file=sys.stderr)


# --------------------------------------------------------------------------------------------
# timers
# --------------------------------------------------------------------------------------------


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn, device: str, calls: int = 1) -> float:
    """Seconds one call of fn takes (CUDA: device time between two events around `calls`
    back-to-back calls, divided by `calls`)."""
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / calls
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def copy_bandwidth(device: str, reps: int = 20) -> dict:
    """Bytes read + written per second by dst.copy_(src) on a large tensor: the practical
    bandwidth ceiling that memory-bound kernels are measured against."""
    numel = (1 << 29) if device == "cuda" else (1 << 25)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    src = torch.randn(numel, device=device, dtype=dtype)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = [time_call(lambda: dst.copy_(src), device) for _ in range(reps)]
    seconds = statistics.median(times)
    nbytes = 2 * src.numel() * src.element_size()
    # src.clone(): the same bytes into a fresh tensor, as every case's call allocates its output.
    # On the CPU a fresh buffer of many megabytes is new memory, faulted in on its first write
    # (10 ms and more per 64 MiB on a virtual machine), which the copy into dst does not pay.
    clone = statistics.median([time_call(lambda: src.clone(), device) for _ in range(reps)])
    return {"bytes": nbytes, "median_ms": seconds * 1e3, "gbps": nbytes / seconds / 1e9,
            "clone_gbps": nbytes / clone / 1e9}


def _copy_step(nbytes: int, device: str):
    """dst.copy_(src) moving nbytes in all (half read, half written), float32."""
    numel = max(1, nbytes // 8)
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


# --------------------------------------------------------------------------------------------
# one case
# --------------------------------------------------------------------------------------------


LEARNING_RATE = 1e-4  # SGD, for the optimizer step of a training step


def model_for(backend: str, built: Built):
    """The module or function a backend compiles. A training step updates the parameters, so each
    backend trains its own copy, and all start from the same weights (the first step's loss and
    gradients are compared with eager's)."""
    if built.train and isinstance(built.fn, torch.nn.Module):
        return copy.deepcopy(built.fn)
    return built.fn


def loss_target(out: torch.Tensor) -> torch.Tensor:
    """The regression target of a training step's loss: N(0, 1) noise of the output's shape, the
    same for every backend (its own generator, a fixed seed)."""
    gen = torch.Generator().manual_seed(1234)
    return torch.randn(out.shape, generator=gen).to(out.device)


def make_step(compiled, module, built: Built, device: str):
    """A zero-argument callable running one call (inference) or one training step: forward,
    loss = mean((output - target)**2), backward, optimizer step (SGD, run eagerly for every
    backend)."""
    inputs = built.inputs
    if not built.train:

        def infer():
            with torch.no_grad():
                return compiled(*inputs)

        return infer
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=LEARNING_RATE)
    target = []  # made on the first call, once the output's shape is known

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        ctx = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if built.autocast
            else contextlib.nullcontext()
        )
        with ctx:
            out = compiled(*inputs)
        if not target:
            target.append(loss_target(out))
        # mean squared error against a fixed random target: mean(out**2) of a LayerNorm'd output
        # is ~1 whatever comes before the norm, so every gradient upstream of the last norm would
        # be rounding noise (and a plain mean is near 0); the target makes all of them real
        loss = (out.float() - target[0]).square().mean()
        loss.backward()
        # the loss and a few gradients, to check against eager (before the update)
        grads = [p.grad.detach().clone() for p in params[-3:] if p.grad is not None]
        optimizer.step()
        return [loss.detach(), *grads]

    return train_step


def _compare(actual, expected, built: Built) -> tuple[bool, str]:
    """Compiled outputs against eager's: assert_close with the case's tolerances, or for models
    the relative error of each output against the case's rel_err. Returns (ok, message)."""
    a_flat = actual if isinstance(actual, (list, tuple)) else [actual]
    e_flat = expected if isinstance(expected, (list, tuple)) else [expected]
    if len(a_flat) != len(e_flat):
        return False, f"{len(a_flat)} outputs, eager has {len(e_flat)}"
    worst_abs, worst_rel = 0.0, 0.0
    for i, (a, e) in enumerate(zip(a_flat, e_flat)):
        a, e = a.detach().float(), e.detach().float()
        if a.shape != e.shape:
            return False, f"output {i}: shape {tuple(a.shape)}, eager {tuple(e.shape)}"
        if not e.numel():
            continue
        worst_abs = max(worst_abs, (a - e).abs().max().item())
        rel = ((a - e).norm() / e.norm().clamp_min(1e-30)).item()
        worst_rel = max(worst_rel, rel)
        if built.rel_err is not None:
            if not rel <= built.rel_err:  # also catches NaN
                return False, f"output {i}: relative error {rel:.2e} > {built.rel_err:.0e}"
            continue
        try:
            torch.testing.assert_close(a, e, atol=built.atol, rtol=built.rtol)
        except AssertionError as err:
            lines = str(err).strip().splitlines()
            return False, f"output {i}: " + " ".join(lines[:3])[:300]
    return True, f"max abs err {worst_abs:.2e}, relative {worst_rel:.2e}"


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text[:300]


def compile_for(backend: str, fn, mode: str | None = None):
    """fn compiled by the backend under torch.compile's mode (None: the default mode)."""
    if backend == "eager":
        return fn
    if backend == "inductor":
        return torch.compile(fn, mode=mode)
    return torch.compile(fn, backend="coil", mode=mode)


def _first_call(backend: str, step, device: str, result: dict) -> object:
    """The first call compiles; its wall time and the compiler's records go into result."""
    coil_mod = None
    if backend == "coil":
        import coil as coil_mod

        before = len(coil_mod.compiled_graphs())
    if backend == "inductor":
        from torch._inductor import metrics

        metrics.generated_kernel_count = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        out = step()
        sync(device)
        result["first_call_s"] = time.perf_counter() - start
    if backend == "inductor":
        from torch._inductor import metrics

        result["kernels"] = metrics.generated_kernel_count
    if coil_mod is not None:
        records = coil_mod.compiled_graphs()[before:]
        result["graphs"] = len(records)
        result["kernels"] = sum(len(r.kernel_names) for r in records)
        result["renderers"] = sorted({getattr(r, "backend", "") or "?" for r in records})
        result["extern_ops"] = sorted({op for r in records for op in r.extern_ops})
        result["fallback_ops"] = sorted({op for r in records for op in r.fallback_ops})
        result["coil_seconds"] = {}
        for r in records:
            for k, v in r.seconds.items():
                result["coil_seconds"][k] = result["coil_seconds"].get(k, 0.0) + v
        if any(r.options and r.options.cudagraphs for r in records):
            result["cudagraphs"] = f"{sum(r.cudagraph for r in records)}/{len(records)}"
            reasons = sorted({r.cudagraph_reason for r in records if r.cudagraph_reason})
            if reasons:
                result["cudagraph_reasons"] = reasons[:4]
        failed = [r for r in records if r.eager_fallback]
        msgs = [str(w.message) for w in caught if type(w.message).__name__ == "CoilWarning"]
        if failed:
            why = msgs[0] if msgs else f"graph {failed[0].graph_id} fell back to eager"
            result["eager_graphs"] = f"{len(failed)}/{len(records)}"
            result["eager_reason"] = why[:400]
        if records and len(failed) == len(records):
            result["status"] = "could not run"
            result["reason"] = f"every graph ({len(records)}) ran eagerly; {why}"[:400]
        elif not records:
            result["status"] = "could not run"
            result["reason"] = "coil was handed no graph"
    return out


def _fail(res: dict, status: str, exc: BaseException) -> None:
    res.update(status=status, reason=_reason(exc), traceback=traceback.format_exc(limit=8))


def run_case(
    case: Case,
    device: str,
    size: str,
    backends: tuple,
    reps_budget_s: float,
    min_reps: int,
    max_reps: int,
    warmup: int,
    progress: Progress | None = None,
    mode: str | None = None,
) -> dict:
    """Builds, compiles, checks and times one case; never raises. A backend that raises (while
    compiling, in its first call, or later) or whose output differs from eager's is reported as
    such in its result, and the others go on. mode: torch.compile's, for both compilers."""
    row = {
        "case": case.name,
        "kind": case.kind,
        "train": case.train,
        "device": device,
        "status": "ok",
        "backends": {},
    }
    torch.manual_seed(0)
    try:
        built = case.build(device, size)
    except NotAvailable as e:
        row.update(status="not available here", reason=str(e))
        return row
    except Exception as e:  # noqa: BLE001 - a broken case is reported, not fatal
        row.update(status="build failed", reason=_reason(e))
        return row
    row["desc"] = built.desc
    row["min_bytes"] = built.min_bytes
    torch._dynamo.reset()

    steps, results, modules = {}, {}, {}
    expected = None
    for backend in backends:
        if progress:
            progress.label(f"{case.name}: compile {backend}")
        res = {"status": "ok"}
        results[backend] = res
        if backend != "eager" and expected is None:
            res.update(status="not run", reason="eager failed: nothing to check against")
            continue
        try:
            module = model_for(backend, built)
            step = make_step(compile_for(backend, module, mode), module, built, device)
            out = _first_call(backend, step, device, res)
        except Exception as e:  # noqa: BLE001
            _fail(res, "failed" if backend != "coil" else "could not run", e)
            continue
        if backend == "eager":
            expected = out
        else:
            try:
                ok, msg = _compare(out, expected, built)
            except Exception as e:  # noqa: BLE001
                ok, msg = False, f"comparing with eager raised {_reason(e)}"
            res["correct"] = ok
            res["check"] = msg
        if res["status"] == "ok":
            steps[backend] = step
            modules[backend] = module
        if built.train and backend == "coil":
            from coil import config as coil_config

            res["note"] = (
                "forward and backward compiled by coil; optimizer step eager"
                if coil_config.options.compile_backward
                else "forward compiled by coil; backward and optimizer step eager"
            )
    row["status"] = "ok" if "eager" in steps else "eager failed"

    # warm-up (excluded), then an estimate of one call to size the repetitions; a case whose eager
    # call takes over half a second (a model on a small CPU) gets one warm-up call and 3 reps
    if results.get("eager", {}).get("first_call_s", 0.0) > 0.5:
        warmup, min_reps = min(warmup, 1), min(min_reps, 3)
    estimate = 0.0
    calls = {}
    for backend, step in list(steps.items()):
        try:
            for _ in range(warmup):
                step()
            one = time_call(step, device)
            calls[backend] = (
                max(3, min(50, math.ceil(2e-3 / max(one, 1e-6)))) if device == "cuda" else 1
            )
            estimate += one * calls[backend]
        except Exception as e:  # noqa: BLE001
            _fail(results[backend], "failed", e)
            del steps[backend]
    # A memory-bound case's ceiling: a copy of its bytes (read + written), timed in the same
    # rounds as the backends, so that the memory system's state (a shared host's neighbours, the
    # clock) is the same for both figures.
    if built.min_bytes and steps:
        steps["copy"] = _copy_step(built.min_bytes, device)
        for _ in range(warmup):
            steps["copy"]()
        one = time_call(steps["copy"], device)
        calls["copy"] = max(3, min(50, math.ceil(2e-3 / max(one, 1e-6)))) if device == "cuda" else 1
        estimate += one * calls["copy"]
    reps = int(min(max_reps, max(min_reps, reps_budget_s / max(estimate, 1e-6))))
    times = {b: [] for b in steps}
    order = list(steps)
    if progress:
        progress.label(f"{case.name}: {reps} reps")
    for rep in range(reps):
        k = rep % max(len(order), 1)
        for backend in order[k:] + order[:k]:
            if backend not in steps:
                continue
            try:
                times[backend].append(time_call(steps[backend], device, calls[backend]))
            except Exception as e:  # noqa: BLE001
                _fail(results[backend], "failed", e)
                del steps[backend]
    copy_times = times.pop("copy", None)
    steps.pop("copy", None)
    if copy_times:
        row["copy_ms"] = statistics.median(copy_times) * 1e3
        row["copy_gbps"] = built.min_bytes / (row["copy_ms"] / 1e3) / 1e9
    for backend, ts in times.items():
        res = results[backend]
        if res["status"] != "ok" or not ts:
            continue
        res["reps"] = len(ts)
        res["calls_per_rep"] = calls[backend]
        res["median_ms"] = statistics.median(ts) * 1e3
        res["min_ms"] = min(ts) * 1e3
        if built.min_bytes:
            res["gbps"] = built.min_bytes / (res["median_ms"] / 1e3) / 1e9
    # memory, after the timed calls (every backend warm): one profiled step each
    from coil.bench.memory import measure

    for backend, step in steps.items():
        try:
            results[backend].update(measure(step, modules[backend], device, built.train))
        except Exception as e:  # noqa: BLE001 - a figure missing, not a failed case
            results[backend]["memory_error"] = _reason(e)
    row["backends"] = results
    row["warmup"] = warmup
    del steps, built
    if device == "cuda":
        torch.cuda.empty_cache()
    return row
