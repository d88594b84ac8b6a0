"""The command line of the benchmark suite (python -m coil.bench).

    python -m coil.bench [--device cpu|cuda] [--quick] [--cases a,b] [--out DIR]
                         [--compile-time auto|all|none] [--backends eager,inductor,coil]

Runs the selected cases (coil.bench.cases) side by side, measures the copy bandwidth in the same
run, then the cold and warm compile times in fresh processes, and writes results.json,
results.md, speedup.png and compile_time.png to --out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from coil.bench import cases as case_registry
from coil.bench import compile_time, plots, report
from coil.bench.timing import BACKENDS, Progress, copy_bandwidth, run_case


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m coil.bench", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--quick", action="store_true", help="the quick set (minutes on a laptop CPU)")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
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
        help="size class of the inputs (default: the device's)",
    )
    p.add_argument("--out", default=None, help="output folder (default: bench_results/DEVICE)")
    p.add_argument(
        "--compile-time",
        choices=("auto", "all", "none"),
        default="auto",
        help="cold/warm compile in fresh processes: auto = --quick's probe cases, or "
        "every case without --quick",
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


def run(args: argparse.Namespace, command: list[str]) -> dict:
    """Runs the suite as configured by args; returns the results (also written to args.out)."""
    device = args.device
    size = args.size or device
    backends = tuple(b for b in BACKENDS if b == "eager" or b in args.backends.split(","))
    selected = case_registry.select([c for c in args.cases.split(",") if c], args.quick)
    budget = args.budget or (2.0 if args.quick else 8.0)
    max_reps = args.max_reps or (200 if device == "cuda" else 50)
    if args.min_reps is None:
        args.min_reps = 3 if args.quick else 5
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2
    results = {
        "environment": report.environment(device, command),
        "settings": {
            "quick": args.quick,
            "size": size,
            "backends": list(backends),
            "budget_s": budget,
            "min_reps": args.min_reps,
            "max_reps": max_reps,
            "warmup": args.warmup,
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

    if args.compile_time == "none":
        probe = set()
    elif args.compile_time == "all" or not args.quick:
        probe = {c.name for c in selected}
    else:
        probe = {c.name for c in selected if c.compile_probe}
    compilers = [b for b in backends if b != "eager"]
    progress = Progress(
        len(selected) + 1 + 2 * len(compilers) * len(probe), enabled=not args.no_progress
    )
    start = time.perf_counter()
    progress.label("copy bandwidth")
    results["copy_bandwidth"] = copy_bandwidth(device)
    progress.step("copy bandwidth")
    for case in selected:
        row = run_case(
            case, device, size, backends, budget, args.min_reps, max_reps, args.warmup, progress
        )
        results["cases"].append(row)
        progress.step(case.name)
    for row in results["cases"]:
        if row["case"] not in probe:
            continue
        if row["status"] != "ok":
            progress.step(row["case"], 2 * len(compilers))
            continue
        progress.label(f"{row['case']}: compile time")
        row["compile_time"] = compile_time.measure(row["case"], compilers, device, size)
        progress.step(f"{row['case']} compile time", 2 * len(compilers))
    progress.close()
    results["wall_s"] = time.perf_counter() - start
    return results


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
            args.compile_one, args.backend, args.device, args.size or args.device
        )
        return 0
    if args.list:
        for c in case_registry.CASES:
            print(f"{c.name:18} {c.kind:6} {'quick' if c.quick else ''}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    command = ["python", "-m", "coil.bench"] + (sys.argv[1:] if argv is None else list(argv))
    results = run(args, command)
    out = args.out or os.path.join("bench_results", args.device)
    paths = write_outputs(results, out, with_plots=not args.no_plots)
    print(report.markdown(results))
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0
