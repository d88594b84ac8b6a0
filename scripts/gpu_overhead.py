"""Where coil's host time goes on a model call: cProfile over repeated calls of a compiled GPT-2,
and which kernels launch through the direct path.

    python scripts/gpu_overhead.py [--batch 8 --seq 512]
"""

import argparse
import cProfile
import gc
import pstats
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--layers", type=int, default=12)
    a = p.parse_args()
    from transformers import GPT2Config, GPT2Model

    from coil import triton_launcher

    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                     n_layer=a.layers)
    model = GPT2Model(cfg).cuda().to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
    fn = torch.compile(lambda i: model(i, use_cache=False)[0], backend="coil")
    with torch.no_grad():
        for _ in range(3):
            fn(ids)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(20):
            fn(ids)
        torch.cuda.synchronize()
        print(f"wall {(time.perf_counter() - t) / 20 * 1e3:.3f} ms/call (20 calls, no sync between)")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20):
            fn(ids)
        torch.cuda.synchronize()
        prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumtime").print_stats(25)
    launchers = []
    for o in gc.get_objects():
        try:
            if isinstance(o, triton_launcher.Launcher):
                launchers.append(o)
        except ReferenceError:
            pass
    states = {}
    for ln in launchers:
        for key, b in ln.bound.items():
            states.setdefault(type(b).__name__ if b else "no direct path", []).append(ln.__name__)
    print("launch paths:", {k: len(v) for k, v in states.items()})
    print("no direct path:", states.get("no direct path", [])[:10])
    print("launch_enter_hook:", triton.knobs.runtime.launch_enter_hook)


if __name__ == "__main__":
    import triton

    main()
