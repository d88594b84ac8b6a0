"""The command line of the benchmark suite (python -m coil.bench).

    python -m coil.bench [--device cpu|cuda] [--quick | --smoke] [--group micro|models|perf]
                         [--cases a,b] [--shard K/N] [--time-limit MIN] [--out DIR]
                         [--compile-time auto|all|none|only] [--backends eager,inductor,coil]
                         [--mode default|reduce-overhead|max-autotune|...]

Measures the copy bandwidth, then for each selected case (coil.bench.cases): its cold and warm
compile times in fresh processes, then eager, Inductor and coil side by side in this process (on
the caches the warm runs left). Writes results.json and results.md to --out after every case (an
interrupted run keeps what it measured), then speedup.png and compile_time.png. Parts of a run
(--group, --cases, --shard) are joined by
`python -m coil.bench.report merge A/results.json B/results.json --out DIR`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import torch

from coil.bench import cases as case_registry
from coil.bench import compile_time, plots, report
from coil.bench.timing import BACKENDS, Progress, copy_bandwidth, run_case


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m coil.bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--quick", action="store_true", help="the quick set (minutes on a laptop CPU)")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="the harness's own check: tiny inputs, few repetitions, no compile-time children "
        "(unless --compile-time says so), no plots; numbers mean nothing",
    )
    p.add_argument("--group", choices=("all", "micro", "models", "perf"), default="all")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="run the K-th of N parts of the selected cases (0 <= K < N), parts balanced by a "
        "rough cost per case; e.g. one part per GPU, joined by `python -m coil.bench.report "
        "merge`",
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        help="torch.compile's mode for Inductor and coil alike (reduce-overhead: CUDA graphs)",
    )
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated subset of eager,inductor,coil (eager is always run)",
    )
    p.add_argument(
        "--size",
        choices=("cpu", "cuda", "tiny"),
        default=None,
        help="size class of the inputs (default: the device's; --smoke: tiny)",
    )
    p.add_argument("--out", default=None, help="output folder (default: bench_results/DEVICE)")
    p.add_argument(
        "--compile-time",
        choices=("auto", "all", "none", "only"),
        default="auto",
        help="cold/warm compile in fresh processes: auto = every case, except --quick (its "
        "probe case) and --smoke (none); only = compile times without the timed comparison "
        "(join with a timing run's results by `python -m coil.bench.report merge`)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="minutes: start no case after this much time; the cases left are listed as "
        "'not run (time limit)' with the command that runs them",
    )
    p.add_argument(
        "--keep-caches",
        action="store_true",
        help="let the benchmark process itself use the usual coil/Inductor/Triton caches "
        "(default: per case, the caches its compile-time children left, else empty ones)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of timed repetitions per case (all backends together)",
    )
    p.add_argument("--min-reps", type=int, default=None, help="default 5 (--quick: 3)")
    p.add_argument("--max-reps", type=int, default=None)
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed calls after the first (default 2, --quick 1)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-plots", action="store_true")
    # internal: one cold/warm compile in a child process (see compile_time.py)
    p.add_argument("--compile-one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="coil", help=argparse.SUPPRESS)
    return p


_CACHE_VARS = ("COIL_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _cache_state() -> tuple:
    import coil.config

    return {k: os.environ.get(k) for k in _CACHE_VARS}, coil.config.options.cache_dir


def _restore_caches(state: tuple) -> None:
    import coil.config

    env, coil.config.options.cache_dir = state
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _use_caches(root: str) -> None:
    """Points this process's coil, Inductor and Triton caches at the folders the compile-time
    children of a case left under root (compile_time.measure), or at empty ones."""
    import coil.config

    coil_env = compile_time.cache_env(os.path.join(root, "coil"))
    inductor_env = compile_time.cache_env(os.path.join(root, "inductor"))
    os.makedirs(coil_env["COIL_CACHE_DIR"], mode=0o700, exist_ok=True)
    os.environ["COIL_CACHE_DIR"] = coil_env["COIL_CACHE_DIR"]
    coil.config.options.cache_dir = coil_env["COIL_CACHE_DIR"]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_env["TORCHINDUCTOR_CACHE_DIR"]
    os.environ["TRITON_CACHE_DIR"] = inductor_env["TRITON_CACHE_DIR"]


def run(args: argparse.Namespace, command: list[str], out: str | None = None) -> dict:
    """Runs the suite as configured by args; returns the results. With out, results.json and
    results.md are written there after every case."""
    device = args.device
    size = args.size or ("tiny" if args.smoke else device)
    backends = tuple(b for b in BACKENDS if b == "eager" or b in args.backends.split(","))
    names = [c for c in args.cases.split(",") if c]
    selected = case_registry.select(names, args.quick or args.smoke, args.group)
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        selected = case_registry.shard(selected, k, n)
    budget = args.budget or (0.05 if args.smoke else 2.0 if args.quick else 8.0)
    max_reps = args.max_reps or (200 if device == "cuda" else 50)
    if args.min_reps is None:
        args.min_reps = 2 if args.smoke else 3 if args.quick else 5
    if args.warmup is None:
        args.warmup = 1 if (args.quick or args.smoke) else 2
    results = {
        "environment": report.environment(device, command),
        "settings": {
            "quick": args.quick,
            "smoke": args.smoke,
            "group": args.group,
            "size": size,
            "backends": list(backends),
            "budget_s": budget,
            "min_reps": args.min_reps,
            "max_reps": max_reps,
            "warmup": args.warmup,
            "fresh_caches": not args.keep_caches,
            "mode": args.mode or "default",
        },
        "cases": [],
    }
    if device == "cuda" and not torch.cuda.is_available():
        print(
            "coil.bench: CUDA is not available on this machine; skipping every case.",
            file=sys.stderr,
        )
        results["copy_bandwidth"] = {"gbps": float("nan"), "bytes": 0, "median_ms": 0.0}
        results["cases"] = [
            {
                "case": c.name,
                "kind": c.kind,
                "status": "skipped",
                "reason": "CUDA not available",
                "backends": {},
            }
            for c in selected
        ]
        results["skipped"] = "CUDA not available"
        return results

    if args.compile_time == "none" or (args.smoke and args.compile_time == "auto"):
        probe = set()
    elif args.compile_time in ("all", "only") or not args.quick:
        probe = {c.name for c in selected}
    else:
        probe = {c.name for c in selected if c.compile_probe}
    results["settings"]["compile_time_cases"] = [c.name for c in selected if c.name in probe]
    compilers = [b for b in backends if b != "eager"]
    progress = Progress(
        len(selected) + 1 + 2 * len(compilers) * len(probe), enabled=not args.no_progress
    )
    start = time.perf_counter()
    progress.label("copy bandwidth")
    results["copy_bandwidth"] = copy_bandwidth(device)
    progress.step("copy bandwidth")
    saved = _cache_state()
    left = []
    try:
        for case in selected:
            if args.time_limit is not None and time.perf_counter() - start > 60 * args.time_limit:
                left.append(case)
                continue
            _one_case(case, args, results, probe, compilers, progress, out, start)
    finally:
        _restore_caches(saved)
    if left:
        rest = " ".join(_resume_command(command, [c.name for c in left]))
        results["not_run"] = {"cases": [c.name for c in left], "command": rest}
        for case in left:
            results["cases"].append(
                {
                    "case": case.name,
                    "kind": case.kind,
                    "train": case.train,
                    "device": device,
                    "status": "not run",
                    "reason": "time limit",
                    "backends": {},
                }
            )
        print(f"coil.bench: time limit reached; the rest: {rest}", file=sys.stderr)
    progress.close()
    results["wall_s"] = time.perf_counter() - start
    try:
        results["environment"]["loadavg_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        pass
    return results


def _one_case(case, args, results, probe, compilers, progress, out, start) -> None:
    """Compile time (if asked) and timing of one case; appends its row and writes the results."""
    s = results["settings"]
    device, size, backends = args.device, s["size"], tuple(s["backends"])
    # compile time first (cold, then warm, each backend in fresh processes); the benchmark
    # process then compiles the case on the caches those left, which saves the long cold
    # compiles a second time. Without compile-time children: on empty caches.
    root = tempfile.mkdtemp(prefix=f"coil_bench_{case.name}_")
    try:
        ct = None
        if case.name in probe:
            progress.label(f"{case.name}: compile time")
            ct = compile_time.measure(case.name, compilers, device, size, root, mode=args.mode)
            progress.step(f"{case.name} compile time", 2 * len(compilers))
        if not args.keep_caches:
            _use_caches(root)
        if args.compile_time == "only":
            row = {"case": case.name, "kind": case.kind, "train": case.train}
            row.update(device=device, status="ok", backends={}, timed=False)
        else:
            row = run_case(
                case,
                device,
                size,
                backends,
                s["budget_s"],
                s["min_reps"],
                s["max_reps"],
                s["warmup"],
                progress,
                mode=args.mode,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if ct is not None:
        row["compile_time"] = ct
    row["first_call_caches"] = (
        "shared" if args.keep_caches else "warm" if ct is not None else "empty"
    )
    row.setdefault("copy_gbps", results["copy_bandwidth"]["gbps"])  # (a case's own copy first)
    results["cases"].append(row)
    progress.step(case.name)
    results["wall_s"] = time.perf_counter() - start
    if out:
        write_outputs(results, out, with_plots=False)


def _resume_command(command: list[str], cases: list[str]) -> list[str]:
    """The command that runs the given cases with this run's other options."""
    out, skip = [], False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg in ("--cases", "--group", "--time-limit", "--out", "--shard"):
            skip = True
            continue
        if arg.startswith(("--cases=", "--group=", "--time-limit=", "--out=", "--shard=")):
            continue
        out.append(arg)
    return out + ["--cases", ",".join(cases), "--out", "DIR"]


def write_outputs(results: dict, out: str, with_plots: bool = True) -> dict:
    os.makedirs(out, exist_ok=True)
    paths = {"json": os.path.join(out, "results.json"), "md": os.path.join(out, "results.md")}
    report.write_json(paths["json"], results)
    report.write_markdown(paths["md"], results)
    if with_plots and "skipped" not in results:
        for name, fn in (
            ("speedup", plots.speedup_plot),
            ("compile_time", plots.compile_time_plot),
        ):
            path = os.path.join(out, f"{name}.png")
            if fn(results, path):
                paths[name] = path
    return paths


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.compile_one:
        compile_time.child_main(
            args.compile_one, args.backend, args.device, args.size or args.device, args.mode
        )
        return 0
    if args.list:
        for c in case_registry.CASES:
            group = "micro" if c.name in case_registry.GROUPS["micro"] else "models"
            print(f"{c.name:20} {group:7} {'quick' if c.quick else ''}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    command = ["python", "-m", "coil.bench"] + (sys.argv[1:] if argv is None else list(argv))
    out = args.out or os.path.join("bench_results", args.device)
    results = run(args, command, out)
    paths = write_outputs(results, out, with_plots=not (args.no_plots or args.smoke))
    print(report.markdown(results))
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0
