"""What is live at the peak of one call, per backend: the CUDA caching allocator's trace of one
call (torch.cuda.memory._record_memory_history), replayed to find the moment of the largest live
total, then the blocks live at that moment with their sizes and the Python frames that allocated
them.

    python scripts/gpu_memory.py --model gpt2 [--batch 8 --seq 512] [--backends eager,inductor,coil]

Models as in scripts/gpu_profile.py. With --debug-dir, coil writes its debug folders there (the
schedule's memory plan names each buffer's allocation and free).
"""

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from gpu_profile import build  # noqa: E402


def frames_text(frames, keep=3):
    out = []
    for f in frames:
        name = f.get("filename", "")
        if "torch/" in name and "_inductor" not in name and "output_code" not in name:
            continue
        out.append(f"{os.path.basename(name)}:{f.get('line')}:{f.get('name')}")
        if len(out) == keep:
            break
    return " <- ".join(out)


def live_at_peak(call, inputs):
    with torch.no_grad():
        for _ in range(3):
            call(*inputs)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=200000)
        out = call(*inputs)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        del out
    live, total, best, best_live = {}, 0, -1, {}
    for trace in snap["device_traces"]:
        for e in trace:
            if e["action"] == "alloc":
                live[e["addr"]] = e
                total += e["size"]
                if total > best:
                    best, best_live = total, dict(live)
            elif e["action"] == "free_requested" and e["addr"] in live:
                total -= live.pop(e["addr"])["size"]
    return peak, best, sorted(best_live.values(), key=lambda e: -e["size"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt2")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--top", type=int, default=14)
    p.add_argument("--backends", default="eager,inductor,coil")
    p.add_argument("--debug-dir", default="")
    a = p.parse_args()
    torch.manual_seed(0)
    model, inputs, fn = build(a.model, a.batch, a.seq)
    for backend in a.backends.split(","):
        torch._dynamo.reset()
        ctx = contextlib.nullcontext()
        if backend == "coil" and a.debug_dir:
            import coil

            ctx = coil.config.patch(debug_dir=a.debug_dir)
        with ctx:
            call = fn(model) if backend == "eager" else torch.compile(fn(model), backend=backend)
            peak, traced, blocks = live_at_peak(call, inputs)
        print(f"\n=== {backend}: peak above the inputs {peak / 2**20:.1f} MB "
              f"(traced live maximum {traced / 2**20:.1f} MB, {len(blocks)} blocks live)")
        for e in blocks[: a.top]:
            print(f"  {e['size'] / 2**20:8.2f} MB  {frames_text(e.get('frames', []))}")


if __name__ == "__main__":
    main()
