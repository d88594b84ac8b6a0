"""PNG plots of a run: speedup per case (coil and Inductor over eager) and compile time per case
(cold and warm, coil and Inductor). Needs matplotlib; without it the plots are skipped."""

from __future__ import annotations


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _speedups(results: dict):
    names, coil, inductor = [], [], []
    for row in results["cases"]:
        b = row.get("backends", {})
        eager = (b.get("eager") or {}).get("median_ms")
        if not eager:
            continue
        names.append(row["case"])
        for series, key in ((coil, "coil"), (inductor, "inductor")):
            ms = (b.get(key) or {}).get("median_ms")
            series.append(eager / ms if ms else 0.0)
    return names, coil, inductor


def speedup_plot(results: dict, path: str) -> bool:
    plt = _pyplot()
    names, coil, inductor = _speedups(results)
    if plt is None or not names:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(names) + 2), 4.5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], coil, 0.4, label="coil")
    ax.bar([x + 0.2 for x in xs], inductor, 0.4, label="Inductor")
    for x, v in zip(xs, coil):
        if v == 0.0:
            ax.text(x - 0.2, 0.02, "could not run", rotation=90, fontsize=7, va="bottom")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=45, ha="right")
    ax.set_ylabel("speedup over eager (higher is better)")
    ax.set_title(f"{results['environment']['device']}: time(eager) / time(backend)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def compile_time_plot(results: dict, path: str) -> bool:
    plt = _pyplot()
    if plt is None:
        return False
    series = {}  # label -> {case: seconds}
    cases = []
    for row in results["cases"]:
        ct = row.get("compile_time") or {}
        for backend in ("coil", "inductor"):
            for temp in ("cold", "warm"):
                r = (ct.get(backend) or {}).get(temp) or {}
                if r.get("status") == "ok":
                    series.setdefault(f"{backend} {temp}", {})[row["case"]] = r["first_call_s"]
            first = (row.get("backends", {}).get(backend) or {}).get("first_call_s")
            if first is not None and not ct:
                series.setdefault(f"{backend} in-process", {})[row["case"]] = first
        if ct or row.get("backends"):
            cases.append(row["case"])
    cases = [c for c in cases if any(c in s for s in series.values())]
    if not cases:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(cases) + 2), 4.5))
    width = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(sorted(series.items())):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(cases))]
        ax.bar(xs, [values.get(c, 0.0) for c in cases], width, label=label)
    ax.set_xticks(list(range(len(cases))))
    ax.set_xticklabels(cases, rotation=45, ha="right")
    ax.set_ylabel("first call, seconds (log)")
    ax.set_yscale("log")
    ax.set_title("compile time (first call: compile + one run)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
