"""coil with its Python wrapper, coil with its C++ wrapper (option cpp_wrapper), Inductor and
eager, side by side in one process on the CPU (interleaved rounds, medians): a transformer
encoder (4 layers, d=128, batch 4x16: host overhead matters) and a tiny pointwise graph (the
per-call cost of an almost empty graph).

    python scripts/cpu_wrapper_bench.py [--threads 2] [--rounds 30]
"""

import argparse
import statistics
import time

import torch

import coil


def encoder():
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()
    return model, (torch.randn(4, 16, 128),)


def tiny():
    return (lambda x: (x * 2 + 1).relu()), (torch.randn(64),)


def measure(name, fn, args, rounds):
    fns = {
        "eager": fn,
        "inductor": torch.compile(fn, backend="inductor"),
        "coil (python wrapper)": torch.compile(fn, backend="coil", options={"cpp_wrapper": False}),
        "coil (C++ wrapper)": torch.compile(fn, backend="coil", options={"cpp_wrapper": True}),
    }
    with torch.no_grad():
        ref = fn(*args)
        for k, f in fns.items():
            out = f(*args)
            torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        times = {k: [] for k in fns}
        reps = 50
        for r in range(rounds):
            order = list(fns)[r % 4:] + list(fns)[: r % 4]
            for k in order:
                start = time.perf_counter()
                for _ in range(reps):
                    fns[k](*args)
                times[k].append((time.perf_counter() - start) / reps * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{name}: " + ", ".join(f"{k} {v:.1f} us" for k, v in med.items()))
    print(f"  C++ wrapper / python wrapper time {med['coil (C++ wrapper)'] / med['coil (python wrapper)']:.3f}, "
          f"/ inductor {med['coil (C++ wrapper)'] / med['inductor']:.3f}, / eager {med['coil (C++ wrapper)'] / med['eager']:.3f}")
    wrappers = [g.wrapper for g in coil.compiled_graphs()][-2:]
    print(f"  wrappers of the last two coil graphs: {wrappers}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for name, make in (("transformer encoder 4x d128 b4x16", encoder), ("tiny pointwise (64)", tiny)):
        fn, args = make()
        measure(name, fn, args, a.rounds)


if __name__ == "__main__":
    main()
