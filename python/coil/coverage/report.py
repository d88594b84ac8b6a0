"""The sweep's outputs: the expected-failure file (read by tests/python/test_opinfo.py, written
by `python -m coil.coverage --write-expected`) and the Markdown report (docs/coverage.md)."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import os
import re

import torch

from coil.coverage.sweep import SweepResult


def reason_group(reason: str) -> str:
    """The group a reason belongs to: the text before the first ':'."""
    return reason.split(":", 1)[0]


def read_expected(path: str) -> dict:
    """{(name, dtype): reason} from lines "name dtype reason"; '#' starts a comment line."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2:
                raise ValueError(f"{path}: bad line {line!r} (expected 'op dtype reason')")
            out[(parts[0], parts[1])] = parts[2] if len(parts) > 2 else ""
    return out


def write_expected(path: str, sweeps: list, header: str) -> None:
    failures = {}
    for s in sweeps:
        for key, o in s.outcomes.items():
            if o.status == "fail":
                failures[key] = o.reason
    by_group = collections.defaultdict(list)
    for key, reason in failures.items():
        by_group[reason_group(reason)].append((key, reason))
    lines = [header.rstrip(), ""]
    for group in sorted(by_group):
        lines.append(f"# --- {group} ({len(by_group[group])}) ---")
        for (name, dtype), reason in sorted(by_group[group]):
            lines.append(f"{name} {dtype} {_one_line(reason)}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _one_line(s: str) -> str:
    return " ".join(s.split())[:240]


EXPECTED_HEADER = """\
# Expected failures of the OpInfo sweep (tests/python/test_opinfo.py), normal mode (ATen fallback
# ops allowed): one "op dtype reason" per line, grouped by reason. An unexpected pass fails the
# test, so this list can only shrink: delete the line of a case that now passes.
# Regenerate with: python -m coil.coverage --backends coil --modes normal \\
#     --write-expected tests/python/opinfo_expected.txt
"""


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Summary:
    tried: int
    lowered: int
    via_fallback: int
    failed: int
    failures_by_group: dict


def summarize(normal: SweepResult, lowered: SweepResult | None) -> Summary:
    tried = lowered_n = via_fb = failed = 0
    groups = collections.Counter()
    for key, o in normal.outcomes.items():
        if o.status == "skip":
            continue
        tried += 1
        if o.status == "fail":
            failed += 1
            groups[reason_group(o.reason)] += 1
            continue
        lo = lowered.outcomes.get(key) if lowered else None
        if lo is not None and lo.status == "pass":
            lowered_n += 1
        else:
            via_fb += 1
    return Summary(tried, lowered_n, via_fb, failed, dict(groups))


def missing_lowerings(coil: dict, inductor: dict) -> list:
    """Cases Inductor lowers (passes with fallbacks forbidden) and coil does not: [(name, dtype,
    coil's reason)] with coil's reason from the lowered-only sweep, else the normal one."""
    out = []
    ind_lowered = inductor.get("lowered")
    if ind_lowered is None:
        return out
    for key, o in ind_lowered.outcomes.items():
        if o.status != "pass":
            continue
        c = coil["lowered"].outcomes.get(key) if "lowered" in coil else None
        cn = coil["normal"].outcomes.get(key) if "normal" in coil else None
        if c is not None and c.status == "pass":
            continue
        if c is None and (cn is None or cn.status == "pass"):
            continue
        reason = cn.reason if cn is not None and cn.status == "fail" else c.reason
        out.append((key[0], key[1], reason))
    return out


def _rank_missing(missing: list) -> list:
    """Groups missing cases by the ATen op (or reason) that blocks them, most cases first."""
    blockers = collections.defaultdict(list)
    for name, dtype, reason in missing:
        if reason.startswith("ATen fallback: "):
            for aten in reason[len("ATen fallback: ") :].split(", "):
                blockers[aten].append((name, dtype))
        else:
            blockers[reason].append((name, dtype))
    return sorted(blockers.items(), key=lambda kv: (-len(kv[1]), kv[0]))


_INDEXING_ATEN = re.compile(
    r"^aten\.(index|_unsafe_index|_unsafe_masked_index|index_put|_index_put_impl|gather|scatter"
    r"|scatter_add|scatter_reduce|index_select|embedding|take|index_add|index_copy|index_fill"
    r"|index_reduce)[._]"
)


def _is_indexing(blocker: str) -> bool:
    return bool(_INDEXING_ATEN.match(blocker))


def _op_counts(normal: SweepResult, lowered: SweepResult | None) -> tuple:
    """(ops tried, ops lowered in every dtype tried): ops are OpInfo names with variant."""
    tried = collections.defaultdict(list)
    for key, o in normal.outcomes.items():
        if o.status == "skip":
            continue
        lo = lowered.outcomes.get(key) if lowered else None
        tried[o.name].append(o.status == "pass" and lo is not None and lo.status == "pass")
    return len(tried), sum(all(v) for v in tried.values())


def _dynamic() -> bool:
    from coil.coverage import runners

    return runners.DYNAMIC[0]


def render_report(results: dict, command: str, seconds: float) -> str:
    """Markdown for docs/coverage.md. results: {backend: {mode: SweepResult}}."""
    today = datetime.date.today().isoformat()
    lines = [
        "# OpInfo coverage",
        "",
        f"Generated {today} with torch {torch.__version__} by:",
        "",
        "```bash",
        command,
        "```",
        "",
        (
            f"({seconds / 60:.1f} minutes on this machine.) A case is one (OpInfo op incl. "
            "variant, "
            "dtype) on CPU, dtypes float32, float64, int64, bool and bfloat16 where the op supports "
            "them; the first sample input (every sample for reductions and indexing ops), compiled "
            f"with `torch.compile(fn, backend=..., fullgraph=True, dynamic={_dynamic()})` and "
            "compared with "
            "eager under the OpInfo's tolerances (a bfloat16 result that differs from eager's "
            "passes when it is no further from the op computed in float64). Cases where eager "
            "raises or that have no sample "
            "are not counted. *Lowered*: passes with ATen fallback ops forbidden (coil: "
            "`COIL_ALLOW_FALLBACK=0`; Inductor: no `FallbackKernel`); *via fallback*: passes only "
            "when fallbacks are allowed; *failed*: fails even then (a graph coil runs eagerly counts "
            "as a failure). Extern calls (mm, conv) count as lowered for both."
        ),
        "",
        (
            "| backend | cases tried | lowered | via fallback | failed | ops tried | ops lowered "
            "in every dtype |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    summaries = {}
    for backend, modes in results.items():
        s = summarize(modes["normal"], modes.get("lowered"))
        summaries[backend] = s
        ops, ops_lowered = _op_counts(modes["normal"], modes.get("lowered"))
        lines.append(
            f"| {backend} | {s.tried} | {s.lowered} | {s.via_fallback} | {s.failed} | {ops} "
            f"| {ops_lowered} |"
        )
    lines.append("")
    if "coil" in results and "inductor" in results:
        missing = missing_lowerings(results["coil"], results["inductor"])
        ranked = _rank_missing(missing)
        lines += [
            "## What to lower next: cases Inductor lowers and coil does not",
            "",
            (
                f"{len(missing)} (op, dtype) cases pass through Inductor's own lowering but fall "
                "back or fail in coil. Ranked by the ATen op (or failure) that blocks them, most "
                "cases first (top 30):"
            ),
            "",
            "| # | blocking ATen op / reason | cases | ops (dtypes) |",
            "|---:|---|---:|---|",
        ]
        for i, (blocker, keys) in enumerate(ranked[:30], 1):
            by_op = collections.defaultdict(list)
            for name, dtype in keys:
                by_op[name].append(dtype)
            ops = "; ".join(f"{n} ({', '.join(ds)})" for n, ds in sorted(by_op.items()))
            note = " (indexing)" if _is_indexing(blocker) else ""
            lines.append(f"| {i} | `{_md(blocker)}`{note} | {len(keys)} | {_md(ops)} |")
        lines += [
            "",
            (
                "(indexing): an indexing op (index, index_put, gather, scatter, index_select, "
                "embedding, take): coil lowers these (lower/indexing.cpp) except for 0-d "
                "inputs, size-0 indexed dims and, on Triton, scatters without an atomic form."
            ),
        ]
        lines += ["", "<details><summary>Every such case (op, dtype, coil's reason)</summary>", ""]
        lines += ["| op | dtype | coil's reason |", "|---|---|---|"]
        for name, dtype, reason in sorted(missing):
            lines.append(f"| {name} | {dtype} | {_md(_one_line(reason))} |")
        lines += ["", "</details>", ""]
    for backend, modes in results.items():
        s = summaries[backend]
        lines += [f"## {backend}: failures by reason", ""]
        lines += ["| reason group | cases |", "|---|---:|"]
        for group, n in sorted(s.failures_by_group.items(), key=lambda kv: -kv[1]):
            lines.append(f"| {_md(group)} | {n} |")
        lines.append("")
        normal = modes["normal"]
        fails = [o for o in normal.outcomes.values() if o.status == "fail"]
        if fails:
            lines += [
                f"<details><summary>{backend}: every failing case</summary>",
                "",
                "| op | dtype | reason |",
                "|---|---|---|",
            ]
            for o in sorted(fails, key=lambda o: (reason_group(o.reason), o.name, o.dtype)):
                lines.append(f"| {o.name} | {o.dtype} | {_md(_one_line(o.reason))} |")
            lines += ["", "</details>", ""]
        graphs = " + ".join(f"{r.graphs} ({mode})" for mode, r in modes.items())
        lines.append(
            f"- {backend}: {graphs} compiled graphs, {normal.seconds:.0f} s (both modes run in "
            "one pass: only groups that used a fallback are compiled again, fallbacks forbidden)"
        )
        for mode, r in modes.items():
            if r.batch_only_mismatches:
                lines.append(
                    f"- {backend} {mode}: mismatched only inside a batch (a compiler bug): "
                    + ", ".join(r.batch_only_mismatches)
                )
        lines.append("")
    return "\n".join(lines)


KEEP_MARKER = "<!-- Kept by python -m coil.coverage: everything below is written by hand. -->"


def kept_tail(path: str) -> str:
    """The hand-written part of an existing report (from KEEP_MARKER on), kept on regeneration."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        text = f.read()
    at = text.find(KEEP_MARKER)
    return "\n" + text[at:] if at >= 0 else ""


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def results_to_json(results: dict, command: str, seconds: float) -> dict:
    """Everything render_report needs, to re-render without re-running (--json / --from-json)."""
    out = {"command": command, "seconds": seconds, "torch": torch.__version__, "results": {}}
    for backend, modes in results.items():
        out["results"][backend] = {
            mode: {
                "graphs": r.graphs,
                "seconds": r.seconds,
                "batch_only_mismatches": r.batch_only_mismatches,
                "outcomes": [dataclasses.astuple(o) for o in r.outcomes.values()],
            }
            for mode, r in modes.items()
        }
    return out


def results_from_json(doc: dict) -> tuple:
    """(results, command, seconds) from results_to_json's document."""
    from coil.coverage.sweep import Outcome

    results = {}
    for backend, modes in doc["results"].items():
        results[backend] = {}
        for mode, r in modes.items():
            sr = SweepResult(backend, mode, graphs=r["graphs"], seconds=r["seconds"])
            sr.batch_only_mismatches = list(r["batch_only_mismatches"])
            for row in r["outcomes"]:
                o = Outcome(*row)
                sr.outcomes[o.key] = o
            results[backend][mode] = sr
    return results, doc["command"], doc["seconds"]
