"""Where a model's GPU time goes under coil and under Inductor: per-kernel CUDA time from
torch.profiler, side by side, plus wall time per call and the first call's time.

    python scripts/gpu_profile.py --model gpt2 [--batch 8 --seq 512] [--top 25]
    python scripts/gpu_profile.py --model resnet50 --batch 64 --backends "inductor;coil;coil:channels_last=off"

    python scripts/gpu_profile.py --case vit_b_16_train [--backends inductor,coil]

--case takes any coil.bench case at the bench's CUDA size (a training case times its whole step:
forward under its autocast, an MSE loss, backward; gradients dropped between calls).
Models: gpt2, gpt2_lm (with the LM head), resnet18/resnet50/mobilenet_v3_large (coil.bench.vision).
A backend "coil:KEY=VALUE+..." runs coil under coil.config.patch(KEY=VALUE) ("true"/"false" are
booleans); separate backends with ";" when one has options.
"""

import argparse
import time

import torch


def build(model: str, batch: int, seq: int):
    if model in ("resnet18", "resnet50", "mobilenet_v3_large"):
        from coil.bench import vision

        m = vision.MODELS[model]().cuda().to(torch.bfloat16).eval()
        x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
        return m, (x,), lambda mod: mod
    if model in ("gpt2", "gpt2_lm"):
        from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        m = GPT2LMHeadModel(cfg) if model == "gpt2_lm" else GPT2Model(cfg)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
        fn = lambda mod: (lambda ids: mod(ids, use_cache=False)[0])  # noqa: E731
        return m.cuda().to(torch.bfloat16).eval(), (ids,), fn
    raise SystemExit(f"unknown model {model}")


def case_step(name: str):
    """A bench case's model, its inputs and a call maker: the forward, or a whole training step."""
    from coil.bench import cases

    built = cases.find(name).build("cuda", "cuda")
    if not name.endswith("_train"):
        return built.fn, tuple(built.inputs), lambda mod: mod
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=built.autocast):
        target = torch.randn_like(built.fn(*built.inputs).float())

    def make(mod):
        compiled = mod

        def step(*inputs):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=built.autocast):
                out = compiled(*inputs)
            (out.float() - target).square().mean().backward()
            built.fn.zero_grad(set_to_none=True)

        return step

    return built.fn, tuple(built.inputs), make


def profile(name, call, inputs, top, train=False):
    with torch.enable_grad() if train else torch.no_grad():
        torch.cuda.synchronize()
        t = time.perf_counter()
        call(*inputs)
        torch.cuda.synchronize()
        first = time.perf_counter() - t
        for _ in range(5):
            call(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t = time.perf_counter()
            call(*inputs)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        times.sort()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                call(*inputs)
            torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.self_device_time_total for e in kernels) / 5 / 1e3
    launches = sum(e.count for e in kernels) / 5
    print(f"\n=== {name}: first call {first:.2f} s, median {times[len(times)//2]*1e3:.3f} ms/call, "
          f"GPU kernel time {total:.3f} ms/call, {launches:.0f} kernels/call")
    kernels.sort(key=lambda e: -e.self_device_time_total)
    for e in kernels[:top]:
        print(f"  {e.self_device_time_total/5/1e3:8.3f} ms  x{e.count//5:<4d} {e.key[:110]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt2")
    p.add_argument("--case", default=None, help="a coil.bench case instead of --model")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--backends", default="eager,inductor,coil")
    a = p.parse_args()
    torch.manual_seed(0)
    train = bool(a.case and a.case.endswith("_train"))
    if a.case:
        model, inputs, make = case_step(a.case)
        fn = lambda mod: mod  # noqa: E731
    else:
        model, inputs, fn = build(a.model, a.batch, a.seq)
    import contextlib

    for backend in a.backends.split(";") if ";" in a.backends else a.backends.split(","):
        torch._dynamo.reset()
        name, _, patch = backend.partition(":")
        ctx = contextlib.nullcontext()
        if patch:
            import coil

            kw = dict(item.split("=") for item in patch.split("+"))
            kw = {k: {"true": True, "false": False}.get(v, v) for k, v in kw.items()}
            ctx = coil.config.patch(**kw)
        with ctx:
            call = fn(model) if name == "eager" else torch.compile(fn(model), backend=name)
            if a.case:
                call = make(call)
            profile(backend, call, inputs, a.top, train)
    try:
        import coil

        for g in coil.compiled_graphs():
            print("coil graph", g.graph_id, g.kind, len(g.kernel_names), "kernels; fallback ops:",
                  g.fallback_ops, "extern:", g.extern_ops, "eager_fallback:", g.eager_fallback,
                  {k: round(v, 4) for k, v in g.seconds.items()})
    except ImportError:
        pass


if __name__ == "__main__":
    main()
