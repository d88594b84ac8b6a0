"""flex_attention forward side by side in one process (eager, Inductor, coil, and SDPA's causal
kernel as the floor): batch 4, 16 heads, head dim 128, causal score_mod, bf16 on CUDA (float32 on
the CPU). Medians of interleaved rounds.

    python scripts/flex_bench.py --device cuda --lengths 1024,4096
"""

import argparse
import statistics
import time

import torch
from torch.nn.attention.flex_attention import flex_attention


def causal(score, b, h, q, kv):
    return torch.where(q >= kv, score, -float("inf"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--lengths", default="1024,4096")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    import coil  # noqa: F401  (registers the backend)

    dev = a.device
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for n in map(int, a.lengths.split(",")):
        q, k, v = (torch.randn(a.batch, a.heads, n, a.dim, device=dev, dtype=dtype)
                   for _ in range(3))
        fn = lambda q, k, v: flex_attention(q, k, v, score_mod=causal)  # noqa: E731
        fns = {
            "eager": fn,
            "inductor": torch.compile(fn, backend="inductor"),
            "coil": torch.compile(fn, backend="coil"),
            "sdpa causal": lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True),
        }
        ref = fns["sdpa causal"](q, k, v).float()
        errs = {}
        for name, f in fns.items():
            out = f(q, k, v)
            errs[name] = (out.float() - ref).abs().max().item()
        times = {name: [] for name in fns}
        for r in range(a.rounds):
            for name in list(fns)[r % 4:] + list(fns)[:r % 4]:
                sync()
                start = time.perf_counter()
                for _ in range(3):
                    fns[name](q, k, v)
                sync()
                times[name].append((time.perf_counter() - start) / 3 * 1e3)
        med = {name: statistics.median(t) for name, t in times.items()}
        print(f"length {n}: " + ", ".join(f"{k} {v:.3f} ms (max err {errs[k]:.3g})"
                                          for k, v in med.items()))
        print(f"  coil/inductor time {med['coil'] / med['inductor']:.2f}")


if __name__ == "__main__":
    main()
