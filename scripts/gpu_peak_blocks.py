"""What is alive at the peak of one training step, Inductor against coil (CUDA).

    python scripts/gpu_peak_blocks.py bert_train [--top 25] [--debug-dir DIR]

A training step is the benchmark's own (coil.bench.timing.make_step: zero_grad(set_to_none),
forward, loss, backward, SGD step); an inference case (a name without `_train`) is one call under
no_grad. The peak is counted from the step's start, when the previous step's gradients are still
alive, as the benchmark counts it; the allocation that reached it is printed too.
With --debug-dir, coil writes its debug folders there (graph.json, schedule.txt, output_code.py).

Builds the bench case (coil.bench.cases, the bench's size class on CUDA), compiles it with each
backend, runs two warm steps, then records one step with torch.cuda.memory's allocation history
and replays it: the peak above the step's start, and the blocks alive at that moment, largest
first, each with its innermost frames in the model, in coil's or Inductor's generated code or in
torch. A diagnostic for a peak that is higher with equal saved bytes (docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import copy

import torch

from coil.bench import cases
from coil.bench.timing import make_step


def _frames(frames: list, keep: int = 4) -> str:
    useful = [f for f in frames if not f["filename"].endswith(("memory.py", "__init__.py"))
              and "site-packages/torch/utils" not in f["filename"]]
    return " <- ".join(f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}"
                       for f in useful[:keep])


def peak_blocks(trace: list, top: int):
    """The peak of the bytes allocated above the step's start (a free of a block allocated before
    the step, such as the previous step's gradients, counts too, as in max_memory_allocated), the
    blocks the step allocated that are alive then (largest first), and the allocation that
    reached it."""
    live, total, peak, at_peak, last = {}, 0, 0, {}, None
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames", []))
            total += e["size"]
            if total > peak:
                peak, at_peak, last = total, dict(live), live[e["addr"]]
        elif e["action"] == "free_requested":
            total -= live.pop(e["addr"])[0] if e["addr"] in live else e["size"]
    blocks = sorted(at_peak.values(), key=lambda b: -b[0])
    return peak, blocks[:top], blocks, last


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("case")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--debug-dir", default="")
    p.add_argument("--all-mb", type=float, default=0.0,
                   help="also list every block alive at the peak of at least this many MB, "
                        "with the line of the generated code that allocated it")
    args = p.parse_args()
    case = cases.find(args.case)
    for backend in ("inductor", "coil"):
        torch.manual_seed(0)
        built = case.build("cuda", "cuda")
        model = copy.deepcopy(built.fn)
        options = {"debug_dir": args.debug_dir} if backend == "coil" and args.debug_dir else None
        fn = torch.compile(model, backend=backend, options=options)
        # The benchmark's own step (coil.bench.timing.make_step): zero_grad(set_to_none) first,
        # so the previous step's gradients are alive when it starts, as in the bench's figure.
        step = make_step(fn, model, built, "cuda")
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=400000)
        step()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        bench_peak = torch.cuda.max_memory_allocated() - start
        trace = snap["device_traces"][0]
        peak, blocks, alive, last = peak_blocks(trace, args.top)
        print(f"== {backend}: {args.case}, peak {bench_peak / 2**20:.1f} MB above the step's "
              f"start (traced: {peak / 2**20:.1f}), {len(alive)} of its blocks alive then")
        if last:
            print(f"  reached by {last[0] / 2**20:.2f} MB at {_frames(last[1], 6)}")
        sizes: dict = {}
        for size, _ in alive:
            sizes[size] = sizes.get(size, 0) + 1
        print("  alive by size (MB x count): " + ", ".join(
            f"{size / 2**20:.2f}x{count}" for size, count in sorted(sizes.items(), reverse=True)))
        for size, frames in blocks:
            print(f"  {size / 2**20:8.2f} MB  {_frames(frames)}")
        if args.all_mb:
            listed = [f"{size / 2**20:.2f}@{_frames(frames, 1)}" for size, frames in alive
                      if size >= args.all_mb * 2**20]
            print("  all: " + "; ".join(listed))
        del fn, model, step
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
