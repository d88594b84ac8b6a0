"""Scans (cumsum, cumprod) over every dim, coil vs Inductor vs eager, timed interleaved in one
process: python scripts/scan_bench.py [--device cuda] [--quick]. Prints one row per case, then the
geometric mean and the worst coil/Inductor ratio."""
import argparse
import math
import statistics
import warnings

import torch

import coil  # noqa: F401  (registers the backend)
from coil.bench.timing import time_call

CASES = [  # (op, shape, dim, dtype)
    ("cumsum", (64, 128, 256), 0, torch.float32),
    ("cumsum", (64, 128, 256), 1, torch.float32),
    ("cumsum", (64, 128, 256), 2, torch.float32),
    ("cumsum", (128, 7, 256, 256), 0, torch.bfloat16),
    ("cumprod", (1021, 33, 1024), 1, torch.float32),
    ("cumsum", (1024, 2048), 0, torch.float32),
    ("cumsum", (1024, 2048), 1, torch.float32),
    ("cumsum", (8, 32768), 1, torch.float32),
    ("cumsum", (32768, 8), 0, torch.float32),
    ("cumsum", (4096, 4096), 1, torch.bfloat16),
    ("cumsum", (256, 4096), 0, torch.bfloat16),
    ("cumprod", (512, 3, 1024), 1, torch.float32),
    ("cumsum", (64, 12, 1024), 2, torch.float32),
    ("cummax", (1024, 128, 256), 2, torch.float32),
    ("cummax", (256, 512, 64), 1, torch.float32),
    ("cummin", (4096, 1024), 0, torch.bfloat16),
]


def fn_for(op, dim):
    if op == "cumsum":
        return lambda x: torch.cumsum(x, dim)
    if op in ("cummax", "cummin"):
        return lambda x: getattr(torch, op)(x * 1.5 - 0.25, dim)
    return lambda x: torch.cumprod(1 + x / 64, dim)


def _values(out):
    return (out[0] if isinstance(out, tuple) else out).double()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="run the cases whose op contains this")
    args = p.parse_args()
    dev = args.device
    warnings.simplefilter("ignore")
    ratios = []
    print(f"{'case':44s} {'coil ms':>8s} {'ind ms':>8s} {'eager ms':>9s} {'coil/ind':>9s}")
    for op, shape, dim, dtype in CASES[:6] if args.quick else CASES:
        if args.only not in op:
            continue
        x = torch.randn(*shape, device=dev).to(dtype)
        fn = fn_for(op, dim)
        torch._dynamo.reset()
        runs = {"eager": fn, "coil": torch.compile(fn, backend="coil"),
                "inductor": torch.compile(fn, backend="inductor")}
        ref = _values(fn(x.double()))
        # (Eager's 16-bit scans on CUDA round every partial sum: only the compilers are held to
        # the float64 result; eager's error is printed.)
        for name in ("coil", "inductor"):
            torch.testing.assert_close(_values(runs[name](x)), ref, rtol=2e-2, atol=5e-2)
        eager_err = (_values(fn(x)) - ref).abs().max().item()
        calls = 10 if dev == "cuda" else 1
        times = {k: [] for k in runs}
        for _ in range(15):
            for name, f in runs.items():
                times[name].append(time_call(lambda: f(x), dev, calls))  # noqa: B023
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        r = med["coil"] / med["inductor"]
        ratios.append(r)
        case = f"{op} {'x'.join(map(str, shape))} dim{dim} {str(dtype)[6:]}"
        print(f"{case:44s} {med['coil']:8.3f} {med['inductor']:8.3f} {med['eager']:9.3f} {r:9.2f}x"
              f"   (eager's max error {eager_err:.3g})", flush=True)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geomean coil/Inductor {geo:.2f}x over {len(ratios)} cases; worst {max(ratios):.2f}x")


if __name__ == "__main__":
    main()
