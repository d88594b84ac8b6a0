"""Writing a run's results: results.json (everything measured) and results.md (the tables); and
joining the results of runs split by --group or --cases into one report:

    python -m coil.bench.report merge A/results.json B/results.json --out DIR
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import sys

import torch

from coil.bench.compile_time import COIL_PHASES, INDUCTOR_PHASES


def environment(device: str, command: list[str]) -> dict:
    """Date, versions, machine and the exact command of this run."""
    env = {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "command": " ".join(shlex.quote(a) for a in command),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "threads": torch.get_num_threads(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
    }
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        env["transformers"] = "not installed"
    for lib in ("torchvision", "timm", "triton"):
        try:
            env[lib] = __import__(lib).__version__
        except ImportError:
            env[lib] = "not installed"
    if device == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
    try:
        env["loadavg"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        pass
    return env


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_json(path: str, results: dict) -> None:
    with open(path, "w") as f:
        json.dump(results, f, indent=2, default=str)


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _ms(res: dict | None) -> str:
    if not res:
        return "—"
    if res.get("status") != "ok" or "median_ms" not in res:
        return res.get("status", "—")
    return f"{res['median_ms']:.3f}"


def _ratio(num: dict | None, den: dict | None) -> str:
    """den/num time ratio, i.e. how many times faster `num` is than `den`."""
    try:
        return f"{den['median_ms'] / num['median_ms']:.2f}x"
    except (KeyError, TypeError, ZeroDivisionError):
        return "—"


def _correct(backends: dict) -> str:
    parts = []
    for b in ("inductor", "coil"):
        res = backends.get(b)
        if res and "correct" in res:
            parts.append(f"{b} {'ok' if res['correct'] else 'MISMATCH'}")
    return ", ".join(parts) or "—"


def _gbps(res: dict | None, copy_gbps: float) -> str:
    if not res or "gbps" not in res:
        return "—"
    return f"{res['gbps']:.1f} ({100 * res['gbps'] / copy_gbps:.0f}%)"


def _notes(row: dict) -> str:
    """What a reader must know to read the coil column: graphs that ran eagerly, ATen fallbacks
    inside coil's graphs, and what of a training step coil compiles."""
    coil = (row.get("backends") or {}).get("coil") or {}
    notes = []
    if coil.get("eager_graphs"):
        notes.append(f"{coil['eager_graphs']} coil graphs ran eagerly")
    if coil.get("note"):
        notes.append(coil["note"])
    if coil.get("cudagraphs"):
        why = "; ".join(coil.get("cudagraph_reasons") or [])
        notes.append(f"coil graphs in CUDA graphs: {coil['cudagraphs']}" + (f" ({why[:120]})"
                                                                           if why else ""))
    fallback = coil.get("fallback_ops") or []
    if fallback:
        shown = ", ".join(op.replace("aten.", "") for op in fallback[:4])
        more = f" +{len(fallback) - 4}" if len(fallback) > 4 else ""
        notes.append(f"ATen fallbacks in coil graphs: {shown}{more}")
    return "; ".join(notes).replace("|", "/") or ""


def _kernels(backends: dict) -> str:
    def count(b):
        res = backends.get(b) or {}
        return str(res["kernels"]) if "kernels" in res else "n/a"

    return f"{count('coil')}/{count('inductor')}"


def _row(row: dict, copy_gbps: float) -> list[str]:
    name = row["case"]
    copy_gbps = row.get("copy_gbps") or copy_gbps
    if row["status"] not in ("ok", "eager failed"):
        why = row.get("reason", "")
        return [name, row.get("desc", "—"), f"{row['status']} ({why})"] + ["—"] * 8
    b = row["backends"]
    coil = b.get("coil") or {}
    cells = {}
    for backend in ("eager", "inductor", "coil"):
        res = b.get(backend)
        if res and res.get("status") != "ok":
            why = res.get("reason", "")[:160]
            cells[backend] = f"{res['status']} ({why})".replace("|", "/")
        else:
            cells[backend] = _ms(res)
    return [
        name,
        row.get("desc", ""),
        cells["eager"],
        cells["inductor"],
        cells["coil"],
        _ratio(coil, b.get("eager")),
        _ratio(coil, b.get("inductor")),
        _gbps(coil, copy_gbps),
        _kernels(b),
        _correct(b),
        _notes(row),
    ]


HEADER = [
    "case",
    "shape/dtype",
    "eager ms",
    "inductor ms",
    "coil ms",
    "coil/eager speedup",
    "coil/inductor speedup",
    "coil GB/s (% of copy)",
    "kernels coil/inductor",
    "correct",
    "notes",
]


def _mb(res: dict | None, key: str) -> str:
    if not res or key not in res:
        return "—"
    return f"{res[key]:.1f}"


def _memory_rows(results: dict) -> list[list[str]]:
    """Per case: peak memory above the step's start and, for training steps, what the forward
    saved for the backward (coil/memory.py), eager / Inductor / coil."""
    rows = []
    for row in results["cases"]:
        b = row.get("backends") or {}
        if not any("peak_mb" in (b.get(k) or {}) for k in BACKEND_NAMES):
            continue
        coil, inductor = b.get("coil") or {}, b.get("inductor") or {}
        ratio = "—"
        if coil.get("peak_mb") and inductor.get("peak_mb"):
            ratio = f"{coil['peak_mb'] / inductor['peak_mb']:.2f}"
        saved = [
            f"{_mb(b.get(k), 'saved_mb')} ({b[k]['saved_count']})"
            if "saved_count" in (b.get(k) or {}) else "—"
            for k in BACKEND_NAMES
        ]
        rows.append([row["case"]] + [_mb(b.get(k), "peak_mb") for k in BACKEND_NAMES]
                    + [ratio] + saved)
    return rows


BACKEND_NAMES = ("eager", "inductor", "coil")
MEMORY_HEADER = [
    "case",
    "eager peak MB",
    "inductor peak MB",
    "coil peak MB",
    "coil/inductor peak",
    "eager saved MB (tensors)",
    "inductor saved MB (tensors)",
    "coil saved MB (tensors)",
]


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _phases(res: dict, names) -> str:
    ph = res.get("phases") or {}
    return ", ".join(f"{k} {_dur(ph[k])}" for k in names if k in ph)


def _dur(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.3g} ms"


def _compile_rows(results: dict) -> list[list[str]]:
    rows = []
    for row in results["cases"]:
        ct = row.get("compile_time")
        in_proc = {b: r.get("first_call_s") for b, r in row.get("backends", {}).items()}
        for backend in ("inductor", "coil"):
            if ct and backend in ct:
                cold, warm = ct[backend]["cold"], ct[backend]["warm"]
            else:
                cold = warm = None
            first = in_proc.get(backend)

            def fmt(r):
                if r is None:
                    return "not measured"
                if r.get("status") != "ok":
                    return f"{r.get('status')} ({r.get('reason', '')})".replace("|", "/")[:120]
                return f"{r['first_call_s']:.2f} (process {r.get('process_s', 0):.1f})"

            names = (COIL_PHASES + ("rest",)) if backend == "coil" else tuple(INDUCTOR_PHASES)
            phases = _phases(cold, names) if cold and cold.get("status") == "ok" else "—"
            if backend == "coil" and cold and "build_cache_hits" in (warm or {}):
                phases += f"; warm build cache hits {warm['build_cache_hits']}"
            if first is None and cold is None:
                continue
            rows.append(
                [
                    row["case"],
                    backend,
                    (
                        f"{first:.2f}"
                        + (" (empty caches)" if row.get("first_call_caches") == "empty" else "")
                        if first is not None
                        else "—"
                    ),
                    fmt(cold),
                    fmt(warm),
                    phases,
                ]
            )
    return rows


def _geomeans(rows: list[dict]) -> str:
    """Geometric means of the speedups over the cases where all three ran and matched eager."""
    groups = {"all": [], "micro": [], "models": []}
    for row in rows:
        b = row.get("backends") or {}
        if not all((b.get(k) or {}).get("median_ms") for k in ("eager", "inductor", "coil")):
            continue
        if b["coil"].get("correct") is False:
            continue
        coil = b["coil"]["median_ms"]
        ratios = (b["eager"]["median_ms"] / coil, b["inductor"]["median_ms"] / coil)
        groups["all"].append(ratios)
        groups["micro" if row.get("kind") == "micro" else "models"].append(ratios)
    if not groups["all"]:
        return ""

    def gm(pairs, i):
        return math.exp(sum(math.log(p[i]) for p in pairs) / len(pairs))

    parts = [
        f"{name} ({len(pairs)} cases): coil/eager {gm(pairs, 0):.2f}x, coil/inductor "
        f"{gm(pairs, 1):.2f}x"
        for name, pairs in groups.items()
        if pairs
    ]
    return (
        "Geometric mean of the speedups over the cases where all three ran and coil matched "
        "eager: " + "; ".join(parts) + "."
    )


def _header(results: dict) -> list[str]:
    """Date, command(s), machine, versions, load and copy bandwidth of a run, or of each part of a
    merged run."""
    env = results["environment"]
    parts = results.get("parts") or [
        {
            "date": env["date"],
            "command": env["command"],
            "loadavg": env.get("loadavg"),
            "loadavg_end": env.get("loadavg_end"),
            "copy_bandwidth": results["copy_bandwidth"],
            "wall_s": results.get("wall_s"),
        }
    ]
    out = []
    for part in parts:
        line = f"Date: {part['date']}. Command: `{part['command']}`"
        if part.get("wall_s"):
            line += f" (took {part['wall_s'] / 60:.1f} min)"
        out.append(line + ".")
        load = part.get("loadavg")
        if load:
            end = part.get("loadavg_end")
            out.append(
                f"Load average (1/5/15 min) at the start: {load}"
                + (f"; at the end: {end}." if end else ".")
            )
        copy = part.get("copy_bandwidth") or {}
        clone = (
            f" The same bytes into a fresh tensor (src.clone(): allocated, as each case's output "
            f"is, its pages faulted in on first write): {copy['clone_gbps']:.1f} GB/s."
            if copy.get("clone_gbps")
            else ""
        )
        out.append(
            f"Copy bandwidth (dst.copy_(src), bytes read + written, same run): "
            f"**{copy['gbps']:.1f} GB/s**.{clone} A memory-bound case's % of copy is against a "
            f"copy of its own bytes timed in the same rounds as the backends."
            if copy.get("bytes")
            else "Copy bandwidth: not measured."
        )
        out.append("")
    versions = (
        f"torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}"
        + (f", Triton {env['triton']}" if env.get("device") == "cuda" else "")
    )
    if env["device"] == "cuda":
        machine = f"{env.get('gpu', 'GPU')} (CUDA {env.get('cuda')})"
    else:
        machine = f"{env['cpu']}, {env['threads']} threads ({env['cpus']} CPUs)"
    out += [f"Machine: {machine}. Versions: {versions}.", ""]
    return out


def markdown(results: dict) -> str:
    copy = results["copy_bandwidth"]
    out = _header(results)
    mode = results["settings"].get("mode", "default")
    if mode != "default":
        out += [f'torch.compile mode="{mode}" for Inductor and coil alike.', ""]
    out.append(
        f"Times are medians of interleaved repetitions (round robin, order rotated) after the "
        f"compiling call and {results['settings']['warmup']} warm-up call(s) (1 warm-up and at "
        "least 3 repetitions where an eager call takes over 0.5 s); speedup = other's time / "
        "coil's time (>1 means coil is faster). On CUDA a repetition times 3-50 back-to-back "
        "calls (about 2 ms) between two events and reports the time per call. GB/s: minimal "
        "bytes (inputs read once, outputs written once) / median time."
    )
    out.append("")
    out.append(_table(HEADER, [_row(r, copy["gbps"]) for r in results["cases"]]))
    summary = _geomeans(results["cases"])
    if summary:
        out += ["", summary]
    memory = _memory_rows(results)
    if memory:
        out += [
            "",
            "Memory of one call or training step (after the timed calls): the peak allocated "
            "above what was allocated when it started (CUDA: max_memory_allocated; CPU: the "
            "most memory the step's own allocations held at once, from torch.profiler's "
            "records), and for training steps the distinct storages the forward saved for the "
            "backward, parameters excluded (saved_tensors_hooks). MB = 2^20 bytes.",
            "",
            _table(MEMORY_HEADER, memory),
        ]
    out += [
        "",
        (
            "Compile time, seconds. Cold: a fresh process with empty caches (coil's, "
            "Inductor's and Triton's); warm: the same again with the caches the cold run left. "
            "Each: first call (Dynamo + AOTAutograd + compile + one run) and, in parentheses, the "
            "whole process's wall time (imports included). In-process: the first call in the "
            "benchmark process, whose imports are warm, on the caches the warm run left (marked "
            "where it ran on empty caches: cases without cold/warm runs). Phases from the cold "
            "run; coil's from its own timers (rest = Dynamo + AOTAutograd + first run), "
            "Inductor's from torch._dynamo.utils.compile_times() (nested: aot contains "
            "Inductor's phases, load contains build)."
        ),
        "",
    ]
    out.append(
        _table(
            ["case", "backend", "in-process first call", "cold", "warm", "cold phases"],
            _compile_rows(results),
        )
    )
    failures = []
    for row in results["cases"]:
        for b, res in row.get("backends", {}).items():
            if res.get("status") != "ok" or res.get("correct") is False:
                why = res.get("reason") or res.get("check", "")
                failures.append(
                    f"- {row['case']} / {b}: {res.get('status')}"
                    f"{' (output mismatch)' if res.get('correct') is False else ''}: "
                    f"{why}"
                )
    if failures:
        out += ["", "Failures and mismatches:", ""] + failures
    return "\n".join(out) + "\n"


def write_markdown(path: str, results: dict) -> None:
    with open(path, "w") as f:
        f.write(markdown(results))


# --------------------------------------------------------------------------------------------
# merging split runs
# --------------------------------------------------------------------------------------------


def _measured(row: dict) -> bool:
    return row.get("status") in ("ok", "eager failed") and bool(row.get("backends"))


def _merge_rows(old: dict | None, new: dict) -> dict:
    """A case found in two parts: the timed row wins over one that was not timed (a
    --compile-time only run, or a case left by --time-limit), else the later one; compile times
    come from whichever part measured them (the later, if both)."""
    if old is None:
        return new
    if _measured(old) and not _measured(new):
        old, new = new, old
    merged = dict(new)
    if "compile_time" not in merged and "compile_time" in old:
        merged["compile_time"] = old["compile_time"]
        merged["first_call_caches"] = merged.get("first_call_caches", "empty")
    elif "compile_time" in merged and not _measured(merged) and _measured(old):
        ct = merged["compile_time"]
        merged = dict(old, compile_time=ct)
    return merged


def merge(parts: list[dict]) -> dict:
    """One report from runs of different cases (the same device): cases in the registry's order
    (a case present twice: the later file's), each part's command, date, load and copy bandwidth
    kept; a row's bandwidth percentage stays relative to its own run's copy bandwidth."""
    from coil.bench.cases import CASES

    if not parts:
        raise ValueError("nothing to merge")
    devices = {p["environment"]["device"] for p in parts}
    if len(devices) > 1:
        raise ValueError(f"cannot merge runs of different devices: {sorted(devices)}")
    rows = {}
    for p in parts:
        for row in p["cases"]:
            row.setdefault("copy_gbps", p["copy_bandwidth"].get("gbps"))
            rows[row["case"]] = _merge_rows(rows.get(row["case"]), row)
    order = {c.name: i for i, c in enumerate(CASES)}
    merged_parts = []
    for p in parts:
        merged_parts.extend(
            p.get("parts")
            or [
                {
                    "date": p["environment"]["date"],
                    "command": p["environment"]["command"],
                    "loadavg": p["environment"].get("loadavg"),
                    "loadavg_end": p["environment"].get("loadavg_end"),
                    "copy_bandwidth": p["copy_bandwidth"],
                    "wall_s": p.get("wall_s"),
                }
            ]
        )
    return {
        "environment": parts[0]["environment"],
        "settings": parts[0]["settings"],
        "copy_bandwidth": parts[0]["copy_bandwidth"],
        "parts": merged_parts,
        "wall_s": sum(p.get("wall_s") or 0.0 for p in parts),
        "cases": sorted(rows.values(), key=lambda r: order.get(r["case"], len(order))),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    from coil.bench.suite import write_outputs

    p = argparse.ArgumentParser(prog="python -m coil.bench.report")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="join results.json files of split runs into one report")
    m.add_argument("inputs", nargs="+", help="results.json files (or the folders holding them)")
    m.add_argument("--out", required=True)
    m.add_argument("--no-plots", action="store_true")
    r = sub.add_parser("render", help="rewrite results.md and the plots from a results.json")
    r.add_argument("input")
    r.add_argument("--out", required=True)
    r.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)

    def load(path):
        if os.path.isdir(path):
            path = os.path.join(path, "results.json")
        with open(path) as f:
            return json.load(f)

    if args.command == "merge":
        results = merge([load(path) for path in args.inputs])
    else:
        results = load(args.input)
    paths = write_outputs(results, args.out, with_plots=not args.no_plots)
    print(markdown(results))
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
