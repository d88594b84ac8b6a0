"""The performance fuzzer: random programs (fuzz_perf_programs.py) timed for eager, Inductor and
coil in one process, reporting every program where coil is more than --threshold (1.25) times
slower than Inductor or slower than eager, with its seed and the kernels involved.

    python -m coil.fuzz --perf --count 40 --seed 1000 --out /tmp/perf   # 40 programs
    python -m coil.fuzz --perf --seed 1017 --count 1                    # replay one
    python -m coil.fuzz --perf --seeds 1017,1035                        # replay these
    python -m coil.fuzz --perf --device cuda --count 50                 # a GPU sample

Each program is built and run eagerly first; one whose eager call takes over 0.2 s is shrunk
(its largest size halved) until it does not. Then each backend compiles it (the first call,
excluded from the timing, as are --warmup calls more), coil with a debug folder under --out, and
the compiled outputs are checked against eager's. Timed repetitions go round robin with a
rotating order (coil.bench.timing.time_call: time.perf_counter on the CPU, CUDA events on the
GPU), and each backend's median counts.

A finder, not a test: the exit status is 0 when programs are flagged, and 1 only when coil
raised or returned a wrong result (a correctness bug, printed with its seed). Graphs coil ran
eagerly are a flag of their own. Written under --out: results.json (every program), table.txt,
and kernels/seed_N (coil's debug folders of the flagged programs; the others are removed).
With --save-cases, the programs flagged for speed (and right) are added to
coil/bench/perf_cases.json, where `python -m coil.bench --cases perf_N` times them as benchmark
cases.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import signal
import statistics
import sys
import threading
import time
import traceback
import warnings

import torch

from coil import fuzz_perf_programs as programs
from coil.fuzz_perf_programs import PerfProgram

BACKENDS = ("eager", "inductor", "coil")
MAX_EAGER_S = 0.2  # an eager call slower than this: the program is shrunk
MAX_SHRINKS = 8


# --------------------------------------------------------------------------------------------
# one program
# --------------------------------------------------------------------------------------------


def _sized(program: PerfProgram, device: str, max_eager_s: float):
    """(program, fn, inputs, expected, shrinks): the program, shrunk until a warm eager call takes
    at most max_eager_s, and eager's outputs."""
    from coil.bench.timing import time_call

    shrinks = 0
    while True:
        fn, inputs = programs.build(program, device)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = fn(*inputs)
            # (the faster of two calls: a busy machine's one slow call shrinks nothing)
            seconds = min(time_call(lambda: fn(*inputs), device)  # noqa: B023 - called at once
                          for _ in range(2))
        smaller = programs.shrink(program) if seconds > max_eager_s else None
        if smaller is None or shrinks >= MAX_SHRINKS:
            return program, fn, inputs, expected, shrinks
        program, shrinks = smaller, shrinks + 1


def _is_16bit(tensors) -> bool:
    return any(t.dtype in (torch.bfloat16, torch.float16) for t in tensors)


def _close(a: torch.Tensor, e: torch.Tensor, slack: float) -> bool:
    if not e.dtype.is_floating_point:
        return torch.equal(a, e)
    scale = max(1.0, float(e.abs().nan_to_num(0.0).max())) if e.numel() else 1.0
    try:
        torch.testing.assert_close(a, e, rtol=slack, atol=slack * scale, equal_nan=True)
    except AssertionError:
        return False
    return True


def judge(fn, inputs, actual, expected) -> str:
    """"" when the compiled outputs are eager's: within tolerance (1e-4 of each output's
    magnitude, 2e-2 in 16 bits), or failing that as close to the program run in float64 as
    eager's, within that slack; integer outputs equal, or no further from eager's than the
    float64 program's (which of two nearly equal elements an argmax picks). Else what differs."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, eager has {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"output {k}: {a.dtype}{tuple(a.shape)}, eager {e.dtype}{tuple(e.shape)}"
    slack = 2e-2 if _is_16bit(list(inputs) + list(expected)) else 1e-4
    if all(_close(a, e, slack) for a, e in zip(actual, expected)):
        return ""
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = fn(*[t.double() if t.dtype.is_floating_point else t for t in inputs])
    except Exception:  # noqa: BLE001 - no float64 program: the tolerance decides
        reference = None
    for k, (a, e) in enumerate(zip(actual, expected)):
        if _close(a, e, slack):
            continue
        if reference is None:
            return f"output {k} differs from eager's (no float64 program to judge by)"
        r = reference[k]
        if not e.dtype.is_floating_point:
            off, ref_off = int((a != e).sum()), int((r != e).sum())
            if not (torch.equal(a, r) or off <= 2 * ref_off):
                return f"output {k}: {off} of {e.numel()} elements differ from eager's"
            continue
        r = r.double()
        if bool((a.isnan() & ~e.isnan() & ~r.isnan()).any()):
            return f"output {k}: NaN where eager and float64 have none"
        err = float((a.double() - r).abs().nan_to_num(0.0).max())
        eager_err = float((e.double() - r).abs().nan_to_num(0.0).max())
        bound = 2 * eager_err + slack * max(1.0, float(r.abs().nan_to_num(0.0).max()))
        if err > bound:
            return (f"output {k}: {err:.3g} from float64, eager {eager_err:.3g} (bound "
                    f"{bound:.3g})")
    return ""


def _judge_program(program: PerfProgram, fn, inputs, actual, expected) -> str:
    """judge, and for the correctness fuzzer's programs its own judge of rounding (an output
    about as close to float64 as eager's within the spread rounding gives it) when judge fails."""
    msg = judge(fn, inputs, actual, expected)
    if msg and program.family == "fuzz":
        from coil import fuzz

        slack = 2e-2 if _is_16bit(list(inputs) + list(expected)) else 1e-4
        if fuzz._as_close_as_eager(fn.program, list(inputs), actual, expected, slack,
                                   program.seed):
            return ""
    return msg


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]


TIMED_OUT = "compile ran past"  # (what a compile stopped by _deadline raises, then its limit)


@contextlib.contextmanager
def _deadline(seconds: float | None):
    """Raises TimeoutError in the main thread once `seconds` have passed (a compile that runs on
    and on: Inductor's inlining of nested pointwise bodies can take hours). Off elsewhere."""
    if not seconds or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{TIMED_OUT} {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _compile(backend: str, fn, inputs, device: str, res: dict, debug_dir: str | None):
    """The backend's step (a no_grad call), after its first call (which compiles) into res."""
    import coil
    from coil.bench.timing import _first_call, compile_for

    compiled = compile_for(backend, fn)

    def step():
        with torch.no_grad():
            return compiled(*inputs)

    if backend == "coil":
        with coil.config.patch(debug_dir=debug_dir):
            out = _first_call(backend, step, device, res)
        records = coil.compiled_graphs()
        res["kernel_names"] = [k for r in records for k in r.kernel_names]
        res["debug_dirs"] = [r.debug_dir for r in records if r.debug_dir]
        eager = [r for r in records if r.eager_fallback]
        if eager:
            res["eager_graphs"] = len(eager)
            res["eager_reason"] = eager[0].eager_reason[:300]
        # (a graph coil ran eagerly is a flag of its own, and still timed)
        res["status"] = "ok"
        res.pop("reason", None)
    else:
        out = _first_call(backend, step, device, res)
    return step, tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _time(steps: dict, results: dict, device: str, settings: dict) -> None:
    """Warm-up, then round-robin repetitions; medians and minimums into results."""
    from coil.bench.timing import time_call

    calls, estimate = {}, 0.0
    for backend, step in list(steps.items()):
        try:
            for _ in range(settings["warmup"]):
                step()
            one = time_call(step, device)
        except Exception as e:  # noqa: BLE001
            results[backend].update(status="failed", reason=_reason(e))
            del steps[backend]
            continue
        # (CUDA: back-to-back calls of about 2 ms in all between two events, as coil.bench's)
        calls[backend] = max(3, min(50, math.ceil(2e-3 / max(one, 1e-6)))) if device == "cuda" \
            else 1
        estimate += one * calls[backend]
    reps = int(min(settings["max_reps"],
                   max(settings["min_reps"], settings["budget_s"] / max(estimate, 1e-6))))
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
                results[backend].update(status="failed", reason=_reason(e))
                del steps[backend]
    for backend, ts in times.items():
        if ts and backend in steps:
            results[backend].update(reps=len(ts), median_ms=statistics.median(ts) * 1e3,
                                    min_ms=min(ts) * 1e3)


def run_one(program: PerfProgram, settings: dict, debug_dir: str | None = None) -> dict:
    """Sizes, compiles, checks and times one program; never raises. The row: the program, each
    backend's result, the ratios, the kernels and the flags (flags())."""
    import coil

    device = settings["device"]
    torch._dynamo.reset()
    coil.reset()
    row = {"seed": program.seed, "family": program.family}
    try:
        program, fn, inputs, expected, shrinks = _sized(program, device, settings["max_eager_s"])
    except Exception as e:  # noqa: BLE001 - a generator bug: reported, not fatal
        row.update(desc=program.describe(), params=program.params, status="eager failed",
                   reason=_reason(e), backends={}, flags=[f"eager failed: {_reason(e)}"])
        return row
    expected = tuple(expected)
    row.update(desc=program.describe(), params=program.params, shrinks=shrinks, status="ok")
    results, steps = {b: {"status": "ok"} for b in BACKENDS}, {}
    for backend in BACKENDS:
        res = results[backend]
        try:
            with _deadline(settings.get("compile_timeout_s")):
                step, out = _compile(backend, fn, inputs, device, res, debug_dir)
        except Exception as e:  # noqa: BLE001
            status = "timed out" if TIMED_OUT in str(e) else "failed"
            res.update(status=status, reason=_reason(e), traceback=traceback.format_exc(limit=6))
            continue
        if backend != "eager":
            try:
                msg = _judge_program(program, fn, inputs, out, expected)
            except Exception as e:  # noqa: BLE001
                msg = f"comparing with eager raised {_reason(e)}"
            res["correct"] = not msg
            if msg:
                res["check"] = msg
        steps[backend] = step
    _time(steps, results, device, settings)
    row["backends"] = results
    coil_ms = results["coil"].get("median_ms")
    for other in ("inductor", "eager"):
        ms = results[other].get("median_ms")
        row[f"coil_over_{other}"] = coil_ms / ms if coil_ms and ms else None
    row["flags"] = flags(row, settings["threshold"], settings["eager_threshold"])
    return row


def flags(row: dict, threshold: float = 1.25, eager_threshold: float = 1.0) -> list[str]:
    """What to report of a program: coil failing or wrong (correctness bugs), graphs coil ran
    eagerly, coil more than threshold times Inductor's time, or more than eager_threshold times
    eager's."""
    coil = (row.get("backends") or {}).get("coil") or {}
    out = []
    if coil.get("status") == "failed":
        out.append(f"coil failed: {coil.get('reason', '')}")
    if coil.get("status") == "timed out":
        out.append(f"coil {TIMED_OUT} the compile timeout")
    if coil.get("correct") is False:
        out.append(f"MISMATCH: {coil.get('check', '')}")
    if coil.get("eager_graphs"):
        why = coil.get("eager_reason", "")
        out.append(f"coil ran {coil['eager_graphs']} graphs eagerly: {why}")
    ratio = row.get("coil_over_inductor")
    if ratio is not None and ratio > threshold:
        out.append(f"slower than Inductor x{threshold:g}")
    ratio = row.get("coil_over_eager")
    if ratio is not None and ratio > eager_threshold:
        out.append("slower than eager")
    return out


def is_bug(row: dict) -> bool:
    """Whether a row is a correctness bug of coil's (it raised, or returned a wrong result)."""
    return any(f.startswith(("coil failed", "MISMATCH")) for f in row.get("flags", []))


def is_slow(row: dict) -> bool:
    """Whether a row is flagged for speed (or for graphs coil ran eagerly): a benchmark case."""
    return any(f.startswith(("slower", "coil ran")) for f in row.get("flags", []))


# --------------------------------------------------------------------------------------------
# kernels of a flagged program
# --------------------------------------------------------------------------------------------


def kernel_files(row: dict) -> dict:
    """{"kernel_files": [...], "decisions": [...]}: the file of each of coil's kernels in its debug
    folders, and the 'decision:' lines of their headers."""
    coil = row["backends"].get("coil") or {}
    names = set(coil.get("kernel_names") or [])
    files, decisions = [], []
    for folder in coil.get("debug_dirs") or []:
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            stem = os.path.splitext(entry)[0]
            if stem not in names:
                continue
            path = os.path.join(folder, entry)
            files.append(path)
            with open(path, errors="replace") as f:
                for line in f:  # (C++ headers say "// decision:", Triton's "# decision:")
                    text = line.strip()
                    if text.startswith(("// decision:", "# decision:")):
                        decisions.append(f"{stem}: {text.split('decision:', 1)[1].strip()}")
    return {"kernel_files": files, "decisions": decisions}


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------


def _worst_first(row: dict) -> tuple:
    ratio = row.get("coil_over_inductor") or row.get("coil_over_eager") or 0.0
    return (not is_bug(row), -ratio)


def _ms(row: dict, backend: str) -> str:
    res = (row.get("backends") or {}).get(backend) or {}
    if "median_ms" in res:
        return f"{res['median_ms']:.3f}"
    return res.get("status", "-")


def _x(ratio) -> str:
    return f"{ratio:.2f}x" if ratio is not None else "-"


def _kernels(row: dict) -> str:
    coil = (row.get("backends") or {}).get("coil") or {}
    names = coil.get("kernel_names") or []
    text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    fallback = coil.get("fallback_ops") or []
    if fallback:
        text += f" (fallback {', '.join(fallback[:2])})"
    return text or "-"


def table(rows: list[dict]) -> str:
    """The programs worst first (coil's bugs, then by coil/Inductor), one line each."""
    header = ("seed", "family", "program", "eager ms", "ind ms", "coil ms", "coil/ind",
              "coil/eager", "flags", "coil kernels")
    lines = [header]
    for row in sorted(rows, key=_worst_first):
        lines.append((str(row["seed"]), row["family"], row.get("desc", "")[:60],
                      _ms(row, "eager"), _ms(row, "inductor"), _ms(row, "coil"),
                      _x(row.get("coil_over_inductor")), _x(row.get("coil_over_eager")),
                      "; ".join(f[:70] for f in row.get("flags", [])) or "-", _kernels(row)))
    widths = [max(len(line[k]) for line in lines) for k in range(len(header) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) + "  " + line[-1]
                     for line in lines)


def summary(rows: list[dict]) -> str:
    """The geometric mean of coil/Inductor over the programs both ran (coil correct), the worst
    program, and how many were flagged."""
    ratios = [(r["coil_over_inductor"], r) for r in rows
              if r.get("coil_over_inductor") and r["backends"]["coil"].get("correct") is not False]
    slow, bugs = sum(1 for r in rows if is_slow(r)), sum(1 for r in rows if is_bug(r))
    lines = [f"{len(rows)} programs: {slow} flagged for speed, {bugs} coil bugs"]
    if ratios:
        gm = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst, row = max(ratios, key=lambda p: p[0])
        lines.append(f"geomean coil/Inductor time over {len(ratios)} programs: {gm:.2f}x "
                     f"(below 1: coil faster)")
        lines.append(f"worst: seed {row['seed']} {row['desc']}: coil {worst:.2f}x Inductor's time")
    return "\n".join(lines)


def _replay(seed: int, settings: dict) -> str:
    cmd = f"python -m coil.fuzz --perf --seed {seed} --count 1"
    if settings["device"] != "cpu":
        cmd += f" --device {settings['device']}"
    if settings["size_scale"] != 1.0:
        cmd += f" --size-scale {settings['size_scale']}"
    return cmd


def _progress(k: int, n: int | None, row: dict) -> str:
    flags_text = "; ".join(f[:60] for f in row.get("flags", [])) or "ok"
    total = f"/{n}" if n else ""
    return (f"[{k}{total}] seed {row['seed']} {row['family']:9} {row.get('desc', '')[:55]:55} "
            f"coil/ind {_x(row.get('coil_over_inductor')):>6} coil/eager "
            f"{_x(row.get('coil_over_eager')):>6}  {flags_text}")


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m coil.fuzz --perf",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=None, help="first seed (default: time-based)")
    p.add_argument("--count", type=int, default=None, help="number of programs")
    p.add_argument("--seeds", default=None, help="comma-separated seeds to run (replays)")
    p.add_argument("--seconds", type=float, default=600.0,
                   help="time budget when --count is not given")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--out", default="coil_perf_results", help="results.json, table.txt, kernels/")
    p.add_argument("--threshold", type=float, default=1.25,
                   help="flag programs where coil takes more than this times Inductor's time")
    p.add_argument("--eager-threshold", type=float, default=1.0,
                   help="flag programs where coil takes more than this times eager's time")
    p.add_argument("--size-scale", type=float, default=1.0,
                   help="scales the largest input (8M elements on the CPU, 64M on CUDA)")
    p.add_argument("--budget", type=float, default=1.0,
                   help="seconds of timed repetitions per program, all backends together")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls after the first")
    p.add_argument("--min-reps", type=int, default=5)
    p.add_argument("--max-reps", type=int, default=50)
    p.add_argument("--compile-timeout", type=float, default=120.0,
                   help="seconds a backend's first call (its compile) may take")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--save-cases", action="store_true",
                   help="add the programs flagged for speed to the benchmark's perf cases")
    p.add_argument("--cases-file", default=None,
                   help="where --save-cases writes (default: coil/bench/perf_cases.json)")
    return p


def _seeds(args):
    """The seeds to run: --seeds, --count of them, or as many as --seconds allows."""
    if args.seeds:
        yield from (int(s) for s in args.seeds.split(","))
        return
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000 * 1000
    start = time.time()
    k = 0
    while (k < args.count) if args.count is not None else (time.time() - start < args.seconds):
        yield seed + k
        k += 1


def main(argv: list[str] | None = None) -> int:
    from coil.bench import perf_cases, report

    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("coil.fuzz --perf: CUDA is not available on this machine", file=sys.stderr)
        return 1
    settings = {"device": args.device, "threshold": args.threshold,
                "eager_threshold": args.eager_threshold, "size_scale": args.size_scale,
                "budget_s": args.budget, "warmup": args.warmup, "min_reps": args.min_reps,
                "max_reps": args.max_reps, "max_eager_s": MAX_EAGER_S,
                "compile_timeout_s": args.compile_timeout}
    argv = sys.argv[1:] if argv is None else list(argv)
    command = ["python", "-m", "coil.fuzz", "--perf"] + argv
    os.makedirs(args.out, exist_ok=True)
    results = {"environment": report.environment(args.device, command), "settings": settings,
               "programs": []}
    rows = results["programs"]
    for seed in _seeds(args):
        program = programs.generate(seed, args.device, args.size_scale)
        folder = os.path.join(args.out, "kernels", f"seed_{seed}")
        row = run_one(program, settings, folder)
        if row["flags"] and "backends" in row and row["backends"]:
            row.update(kernel_files(row))
        else:
            shutil.rmtree(folder, ignore_errors=True)
        if is_bug(row):
            bugs = [f for f in row["flags"] if f.startswith(("coil failed", "MISMATCH"))]
            print(f"\nCOIL BUG seed {seed} ({_replay(seed, settings)}): {row['desc']}\n  "
                  + "\n  ".join(bugs) + "\n", file=sys.stderr)
        rows.append(row)
        total = len(args.seeds.split(",")) if args.seeds else args.count
        print(_progress(len(rows), total, row), file=sys.stderr, flush=True)
        report.write_json(os.path.join(args.out, "results.json"), results)
    text = table(rows) + "\n\n" + summary(rows)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    flagged = [r for r in rows if r["flags"] and r.get("kernel_files") is not None]
    if flagged:
        print("\nFlagged programs (replay: " + _replay(flagged[0]["seed"], settings)
              .replace(str(flagged[0]["seed"]), "SEED") + "):")
        for row in sorted(flagged, key=_worst_first):
            print(f"  seed {row['seed']} {row['desc']}: {'; '.join(row['flags'])}")
            for line in row.get("decisions", [])[:6]:
                print(f"      {line}")
            for path in row.get("kernel_files", [])[:4]:
                print(f"      {path}")
    if args.save_cases:
        path = args.cases_file or perf_cases.PATH
        added = perf_cases.add([r for r in rows if is_slow(r) and not is_bug(r)], args.device,
                               path)
        print(f"\n{added} new benchmark cases in {path}")
    print(f"\nresults: {os.path.join(args.out, 'results.json')}", file=sys.stderr)
    return 1 if any(is_bug(r) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
