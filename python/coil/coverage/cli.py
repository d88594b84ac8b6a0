"""Command line of the coverage sweep (see coil/coverage/__init__.py): `python -m coil.coverage
--help`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from coil.coverage.cases import DTYPES, dtype_name
from coil.coverage.report import (
    EXPECTED_HEADER,
    kept_tail,
    read_expected,
    render_report,
    results_from_json,
    results_to_json,
    summarize,
    write_expected,
)
from coil.coverage.sweep import sweep


def _parse_dtypes(text: str) -> tuple:
    names = {dtype_name(d): d for d in DTYPES}
    out = []
    for t in text.split(","):
        if t not in names:
            raise SystemExit(f"unknown dtype {t!r}; choose from {', '.join(names)}")
        out.append(names[t])
    return tuple(out)


def _default_hints() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "tests", "python", "opinfo_expected.txt")
    return path if os.path.exists(path) else None


def main(argv=None) -> int:
    import coil.coverage

    parser = argparse.ArgumentParser(
        prog="python -m coil.coverage",
        description=coil.coverage.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backends", default="coil,inductor", help="comma list: coil,inductor")
    parser.add_argument("--modes", default="normal,lowered", help="comma list: normal,lowered")
    parser.add_argument("--dtypes", default=",".join(dtype_name(d) for d in DTYPES))
    parser.add_argument("--ops", default=None, help="comma list of op names (default: all)")
    parser.add_argument("--out", default=None, help="write the Markdown report here")
    parser.add_argument(
        "--write-expected", default=None, help="write coil's normal-mode failures here"
    )
    parser.add_argument(
        "--hints",
        default=_default_hints(),
        help="expected-failure file: its cases are compiled alone (speed only)",
    )
    parser.add_argument("--json", default=None, help="also save the raw results here")
    parser.add_argument(
        "--from-json", default=None, help="re-render --out from saved results; runs nothing"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failing case")
    parser.add_argument(
        "--dynamic", action="store_true",
        help="compile every case with symbolic sizes (torch.compile(dynamic=True))",
    )
    args = parser.parse_args(argv)
    from coil.coverage import runners

    runners.DYNAMIC[0] = True if args.dynamic else False
    backends = args.backends.split(",")
    modes = args.modes.split(",")
    dtypes = _parse_dtypes(args.dtypes)
    only = frozenset(args.ops.split(",")) if args.ops else None
    hints = frozenset(read_expected(args.hints)) if args.hints else frozenset()
    command = "python -m coil.coverage " + " ".join(argv if argv is not None else sys.argv[1:])

    if args.from_json:
        with open(args.from_json) as f:
            results, command, seconds = results_from_json(json.load(f))
        _write_report(args.out, results, command, seconds)
        return 0

    def progress(mode: str, o) -> None:
        if args.verbose and o.status == "fail":
            print(f"  FAIL [{mode}] {o.name} {o.dtype}: {o.reason}", flush=True)

    start = time.time()
    results = {}
    for backend in backends:
        # The hint file lists coil's expected failures; Inductor's are found by splitting batches.
        alone = hints if backend == "coil" else frozenset()
        results[backend] = sweep(backend, modes, dtypes, only, alone, progress)
        for mode, r in results[backend].items():
            s = summarize(r, None)
            print(
                f"{backend} {mode}: {s.tried} tried, {s.tried - s.failed} passed, {s.failed} failed"
                f" ({r.graphs} graphs)",
                flush=True,
            )
            for group, n in sorted(s.failures_by_group.items(), key=lambda kv: -kv[1]):
                print(f"    {n:5d}  {group}")
            if r.batch_only_mismatches:
                print(f"    mismatched only inside a batch: {r.batch_only_mismatches}")
        print(f"{backend}: {time.time() - start:.0f} s so far", flush=True)
    seconds = time.time() - start
    for backend, ms in results.items():
        if "normal" in ms:
            s = summarize(ms["normal"], ms.get("lowered"))
            print(
                f"{backend}: {s.tried} cases tried, {s.lowered} lowered, "
                f"{s.via_fallback} via fallback, {s.failed} failed"
            )
    if args.write_expected and "coil" in results and "normal" in results["coil"]:
        write_expected(args.write_expected, [results["coil"]["normal"]], EXPECTED_HEADER)
        print(f"wrote {args.write_expected}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results_to_json(results, command, seconds), f)
    if "normal" in modes:
        _write_report(args.out, results, command, seconds)
    return 0


def _write_report(path, results: dict, command: str, seconds: float) -> None:
    if not path:
        return
    text = render_report(results, command, seconds) + kept_tail(path)
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
