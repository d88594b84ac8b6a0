"""Variable-length GPT-2: one compiled function called at many sequence lengths in turn, as a
server or a data loader with ragged batches calls it.

    python -m coil.bench.varlen [--device cuda] [--lengths 96,128,...] [--json out.json]

Each backend (eager, Inductor, coil) compiles the same model with torch.compile's default
(automatic dynamic shapes: the first length compiles static, the second recompiles with symbolic
sizes, later lengths reuse that graph). Reported per backend: how many graphs Dynamo compiled and
the seconds the first call at each of the first two lengths took (the static compile, then the
dynamic one); per length: the median time of a call after warm-up, the backends interleaved
length by length so that drift of the machine hits them alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types

import torch

from coil.bench.timing import sync, time_call

BACKENDS = ("eager", "inductor", "coil")


def _model(device: str, layers: int | None):
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    if layers:
        cfg.n_layer = layers
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = GPT2Model(cfg).eval().to(device=device, dtype=dtype)
    return model, cfg


def _compile(backend: str, model):
    def run(ids):
        return model(input_ids=ids, use_cache=False)[0]

    # Dynamo keeps compiled code (and what it learned about dynamic sizes) per code object: each
    # backend gets its own, so neither sees the other's graphs or guards.
    run = types.FunctionType(run.__code__.replace(co_name=f"gpt2_{backend}"), run.__globals__,
                             f"gpt2_{backend}", None, run.__closure__)
    if backend == "eager":
        return run
    if backend == "inductor":
        return torch.compile(run)
    return torch.compile(run, backend="coil")


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"].get("unique_graphs", 0))


def run(device: str, batch: int, lengths: list[int], layers: int | None, reps: int) -> dict:
    model, cfg = _model(device, layers)
    torch.manual_seed(0)
    inputs = {n: torch.randint(0, cfg.vocab_size, (batch, n), device=device) for n in lengths}
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "batch": batch,
        "layers": cfg.n_layer,
        "lengths": lengths,
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "backends": {},
    }
    fns = {}
    torch._dynamo.reset()
    with torch.no_grad():
        for backend in BACKENDS:
            before = _graphs()
            fn = _compile(backend, model)
            first = []
            for n in lengths:  # warm-up: every length once, compiles included
                start = time.perf_counter()
                fn(inputs[n])
                sync(device)
                first.append(time.perf_counter() - start)
            info = {"graphs": _graphs() - before, "first_call_s": first[:2]}
            if backend == "coil":
                import coil

                records = coil.compiled_graphs()
                info["coil_graphs"] = len(records)
                info["coil_eager_graphs"] = sum(r.eager_fallback for r in records)
                info["dynamic_graphs"] = sum(r.dynamic for r in records)
            fns[backend] = fn
            result["backends"][backend] = info
        per_length = []
        for n in lengths:
            row = {"length": n}
            samples = {b: [] for b in BACKENDS}
            for _ in range(reps):
                for b in BACKENDS:
                    samples[b].append(time_call(lambda b=b: fns[b](inputs[n]), device, calls=3))
            for b in BACKENDS:
                row[f"{b}_ms"] = statistics.median(samples[b]) * 1e3
            row["coil_vs_inductor"] = row["coil_ms"] / row["inductor_ms"]
            per_length.append(row)
        result["per_length"] = per_length
    return result


def table(result: dict) -> str:
    lines = [
        f"GPT-2 ({result['layers']} layers), batch {result['batch']}, {result['device']}, "
        f"{result['date']}, torch {result['torch']}",
        "",
        "| length | eager ms | Inductor ms | coil ms | coil/Inductor |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in result["per_length"]:
        lines.append(
            f"| {r['length']} | {r['eager_ms']:.2f} | {r['inductor_ms']:.2f} | {r['coil_ms']:.2f} "
            f"| {r['coil_vs_inductor']:.2f}x |"
        )
    lines += ["", "| backend | graphs compiled | first call, first length (s) | first call, "
              "second length (s) |", "|---|---:|---:|---:|"]
    for b in ("inductor", "coil"):
        info = result["backends"][b]
        f = info["first_call_s"] + [float("nan")] * 2
        lines.append(f"| {b} | {info['graphs']} | {f[0]:.2f} | {f[1]:.2f} |")
    coil_info = result["backends"]["coil"]
    lines.append("")
    lines.append(
        f"coil: {coil_info.get('coil_graphs', 0)} graphs, {coil_info.get('dynamic_graphs', 0)} "
        f"dynamic, {coil_info.get('coil_eager_graphs', 0)} run eagerly"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--lengths", default=None, help="comma-separated sequence lengths")
    p.add_argument("--layers", type=int, default=None, help="default: 12 on cuda, 2 on cpu")
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    cuda = args.device == "cuda"
    lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else (
        [96, 512, 160, 224, 288, 352, 416, 480, 128, 320] if cuda else [16, 64, 24, 40, 56, 32])
    batch = args.batch or (8 if cuda else 1)
    layers = args.layers or (None if cuda else 2)
    reps = args.reps or (10 if cuda else 5)
    result = run(args.device, batch, lengths, layers, reps)
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
