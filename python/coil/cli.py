"""Command line: `coil repro graph.json` (or `python -m coil repro graph.json`)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="coil", description="coil compiler tools")
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("repro", help="recompile a saved graph.json and run it on random inputs")
    rp.add_argument("graph", help="path to graph.json (from a COIL_DEBUG folder)")
    rp.add_argument("--print-graph", action="store_true", help="print the graph before running it")
    args = parser.parse_args(argv)

    import coil

    if args.command == "repro":
        try:
            if args.print_graph:
                from coil.repro import graph_summary

                print(graph_summary(args.graph))
            outputs = coil.repro(args.graph)
        except coil.GraphError as e:
            print(f"coil repro: invalid graph file {args.graph}: {e}", file=sys.stderr)
            return 2
        for i, out in enumerate(outputs):
            if hasattr(out, "shape"):
                print(f"output {i}: {tuple(out.shape)} {out.dtype}")
            else:
                print(f"output {i}: {out!r}")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
