"""Zoo models through coil's Triton kernels under Triton's interpreter, every access checked.

    TRITON_INTERPRET=1 python scripts/triton_check_models.py --family hf --limit 20 [--config K]

Each model of coil.bench.zoo_models (small random configs) is compiled with cpu_backend="triton",
GEMM operands padded as on CUDA, and coil.triton_interp_check on (every masked load, store and
atomic checked against the launch's tensors, each kernel's tuning launch on copies included, the
K-th candidate config run); its output is compared with eager's. A GPU fault or a tuning launch
that writes past its copies shows up here as an OutOfBounds, without a GPU."""

import argparse
import os
import sys
import time
import traceback

import torch


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--family", default="hf")
    p.add_argument("--models", default="")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--config", type=int, default=0)
    args = p.parse_args()
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("set TRITON_INTERPRET=1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import coil
    from coil import triton_interp_check
    from coil.bench import zoo_models

    triton_interp_check.enable(config=args.config, tuning=True)
    entries = zoo_models.population(tuple(args.family.split(",")))
    if args.models:
        wanted = set(args.models.split(","))
        entries = [e for e in entries if e.name in wanted or e.name.split("/", 1)[1] in wanted]
    entries = entries[args.skip:]
    entries = entries[: args.limit] if args.limit else entries
    failed = 0
    for e in entries:
        start = time.time()
        try:
            ex = e.build("cpu", False, 0)
            model = ex.model.eval()
            torch._dynamo.reset()
            coil.reset()
            with torch.no_grad():
                ref = model(*ex.args, **ex.kwargs)
                with coil.config.patch(cpu_backend="triton", gemm_padding="on"):
                    out = torch.compile(model, backend="coil")(*ex.args, **ex.kwargs)
            from coil.bench.zoo import flatten

            eager_graphs = [r.eager_reason[:300] for r in coil.compiled_graphs() if r.eager_fallback]
            diffs = [float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
                     for a, b in zip(flatten(ref), flatten(out)) if a.is_floating_point()]
            bad = eager_graphs or any(d > 1e-3 or d != d for d in diffs)
            failed += bool(bad)
            print(f"{e.name}: {'FAIL' if bad else 'ok'} max diff {max(diffs, default=0):.2e} "
                  f"{eager_graphs} ({time.time() - start:.0f} s)", flush=True)
        except Exception as exc:  # noqa: BLE001 - reported, the sweep goes on
            failed += 1
            print(f"{e.name}: ERROR {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            traceback.print_exc(limit=3)
    print(f"{len(entries)} models, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
