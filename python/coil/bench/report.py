"""Writing a run's results: results.json (everything measured) and results.md (the tables)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex

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


def _kernels(backends: dict) -> str:
    def count(b):
        res = backends.get(b) or {}
        return str(res["kernels"]) if "kernels" in res else "n/a"

    return f"{count('coil')}/{count('inductor')}"


def _row(row: dict, copy_gbps: float) -> list[str]:
    name = row["case"]
    if row["status"] != "ok":
        why = row.get("reason", "")
        return [name, row.get("desc", "—"), f"{row['status']} ({why})"] + ["—"] * 7
    b = row["backends"]
    coil = b.get("coil") or {}
    coil_ms = _ms(coil)
    if coil and coil.get("status") != "ok":
        coil_ms = f"could not run ({coil.get('reason', '')})".replace("|", "/")
    if b.get("inductor", {}).get("status", "ok") != "ok":
        ind_ms = f"failed ({b['inductor'].get('reason', '')})".replace("|", "/")
    else:
        ind_ms = _ms(b.get("inductor"))
    return [
        name,
        row.get("desc", ""),
        _ms(b.get("eager")),
        ind_ms,
        coil_ms,
        _ratio(coil, b.get("eager")),
        _ratio(coil, b.get("inductor")),
        _gbps(coil, copy_gbps),
        _kernels(b),
        _correct(b),
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
                    f"{first:.2f}" if first is not None else "—",
                    fmt(cold),
                    fmt(warm),
                    phases,
                ]
            )
    return rows


def markdown(results: dict) -> str:
    env = results["environment"]
    copy = results["copy_bandwidth"]
    out = [f"Date: {env['date']}. Command: `{env['command']}`", ""]
    versions = (
        f"torch {env['torch']}, transformers {env['transformers']}, torchvision "
        f"{env['torchvision']}, timm {env['timm']}, Python {env['python']}"
    )
    if env["device"] == "cuda":
        machine = f"{env.get('gpu', 'GPU')} (CUDA {env.get('cuda')})"
    else:
        machine = f"{env['cpu']}, {env['threads']} threads ({env['cpus']} CPUs)"
    out.append(f"Machine: {machine}. Versions: {versions}.")
    if "loadavg" in env:
        out.append(f"Load average at the start: {env['loadavg']}.")
    out += [
        "",
        (
            f"Copy bandwidth (dst.copy_(src), bytes read + written, same run): "
            f"**{copy['gbps']:.1f} GB/s**."
            if copy.get("bytes")
            else "Copy bandwidth: not measured."
        ),
        "",
    ]
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
    out += [
        "",
        (
            "Compile time, seconds. In-process: the first call in the benchmark process "
            "(warm imports, shared caches). Cold: a fresh process with empty caches; warm: the "
            "same again with the caches the cold run left. Each: first call (compile + one "
            "run) and the whole process's wall time. Phases from the cold run; coil's from its "
            "own timers (rest = Dynamo + AOTAutograd + first run), Inductor's from "
            "torch._dynamo.utils.compile_times() (nested: aot contains Inductor's phases, load "
            "contains build)."
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
