"""What is alive at the peak of one training step, Inductor against coil (CUDA).

    python scripts/gpu_peak_blocks.py bert_train [--top 25] [--debug-dir DIR]

An inference case (a name without `_train`) is one forward call under no_grad instead of a step.
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


def _step(fn, built, target):
    if not built.train:
        with torch.no_grad():
            fn(*built.inputs)
        return
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=built.autocast):
        out = fn(*built.inputs)
    loss = (out.float() - target).square().mean()
    loss.backward()


def _frames(frames: list, keep: int = 4) -> str:
    useful = [f for f in frames if not f["filename"].endswith(("memory.py", "__init__.py"))
              and "site-packages/torch/utils" not in f["filename"]]
    return " <- ".join(f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}"
                       for f in useful[:keep])


def peak_blocks(trace: list, top: int):
    live, total, peak, at_peak = {}, 0, 0, {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = (e["size"], e.get("frames", []))
            total += e["size"]
            if total > peak:
                peak, at_peak = total, dict(live)
        elif e["action"] in ("free_requested",) and e["addr"] in live:
            total -= live.pop(e["addr"])[0]
    blocks = sorted(at_peak.values(), key=lambda b: -b[0])[:top]
    return peak, len(at_peak), blocks


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("case")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--debug-dir", default="")
    args = p.parse_args()
    case = cases.find(args.case)
    for backend in ("inductor", "coil"):
        torch.manual_seed(0)
        built = case.build("cuda", "cuda")
        model = copy.deepcopy(built.fn)
        options = {"debug_dir": args.debug_dir} if backend == "coil" and args.debug_dir else None
        fn = torch.compile(model, backend=backend, options=options)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=built.autocast):
            target = torch.randn_like(built.fn(*built.inputs).float())
        for _ in range(2):
            _step(fn, built, target)
            model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=200000)
        _step(fn, built, target)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        model.zero_grad(set_to_none=True)
        trace = snap["device_traces"][0]
        peak, n, blocks = peak_blocks(trace, args.top)
        print(f"== {backend}: {args.case}, peak {peak / 2**20:.1f} MB above the step's start, "
              f"{n} blocks alive then")
        for size, frames in blocks:
            print(f"  {size / 2**20:8.2f} MB  {_frames(frames)}")
        del fn, model
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
