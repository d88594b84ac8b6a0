"""Where the host time of a compiled model call goes, coil beside Inductor: wall time per call
with calls back to back (the host's rate when it is the bottleneck), cProfile over repeated calls,
and which of coil's Triton kernels launch through the direct path.

    python scripts/gpu_overhead.py [--model gpt2|gpt2_lm|resnet18|resnet50|mobilenet_v3_large]
        [--batch 8 --seq 512] [--backends inductor,coil] [--top 30]
"""

import argparse
import cProfile
import gc
import pstats
import time

import torch


def wall(fn, inputs, calls=30):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    host = time.perf_counter() - t
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e3, host / calls * 1e3


def main():
    import triton

    from gpu_profile import build

    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt2")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--backends", default="inductor,coil")
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    model, inputs, wrap = build(a.model, a.batch, a.seq)
    for backend in a.backends.split(","):
        torch._dynamo.reset()
        fn = torch.compile(wrap(model), backend=backend)
        with torch.no_grad():
            for _ in range(3):
                fn(*inputs)
            ms, host = wall(fn, inputs)
            print(f"=== {backend}: {ms:.3f} ms/call back to back, host {host:.3f} ms/call issuing")
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                fn(*inputs)
            torch.cuda.synchronize()
            prof.disable()
        st = pstats.Stats(prof)
        st.sort_stats("tottime").print_stats(a.top)
        st.sort_stats("cumtime").print_stats(a.top)
        if backend != "coil":
            continue
        from coil import triton_launcher

        states = {}
        for o in gc.get_objects():
            try:
                if isinstance(o, triton_launcher.Launcher):
                    for _key, b in o.bound.items():
                        name = type(b).__name__ if b else "no direct path"
                        states.setdefault(name, []).append(o.__name__)
            except ReferenceError:
                pass
        print("launch paths:", {k: len(v) for k, v in states.items()})
        print("no direct path:", states.get("no direct path", [])[:10])
        print("launch_enter_hook:", triton.knobs.runtime.launch_enter_hook)


if __name__ == "__main__":
    main()
