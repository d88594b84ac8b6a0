"""Host time per call of a one-kernel graph (roll + add of a 4096x33 tensor), coil beside Inductor
and eager, calls back to back, then cProfile of coil's calls: where a small program's time goes
when the host is the bottleneck. python scripts/gpu_small_overhead.py [--device cuda]"""
import argparse
import cProfile
import pstats
import time
import warnings

import torch

import coil  # noqa: F401


def per_call_us(fn, x, dev, calls=2000):
    for _ in range(50):
        fn(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    dev = args.device
    x = torch.randn(4096, 33, device=dev)

    def f(x):
        return torch.roll(x, 3, 1) + 1

    runs = {"eager": f, "inductor": torch.compile(f, backend="inductor"),
            "coil": torch.compile(f, backend="coil")}
    for _ in range(3):
        print("  ".join(f"{k} {per_call_us(fn, x, dev):.1f} us" for k, fn in runs.items()), flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        runs["coil"](x)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
