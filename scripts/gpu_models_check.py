"""The models the population issue names (torchvision swin_t, timm crossvit_9_240, ...), each
compiled by coil and Inductor in one process on the GPU: its first call (no exception may reach
the caller), agreement with eager, graphs coil ran eagerly and why, and steady times side by side
(CUDA events, interleaved rounds, medians). Prints one line per model; --json writes them.

    python scripts/gpu_models_check.py swin_t crossvit_9_240 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import warnings


def build(name: str, dtype, device: str):
    import torch

    try:
        import torchvision

        if name in torchvision.models.list_models():
            model = torchvision.models.get_model(name, weights=None)
            return model.eval().to(device, dtype), (torch.randn(8, 3, 224, 224, device=device,
                                                                dtype=dtype),)
    except ImportError:
        pass
    import timm

    model = timm.create_model(name, pretrained=False)
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    return model.eval().to(device, dtype), (torch.randn(8, *size, device=device, dtype=dtype),)


def time_round_robin(fns: dict, args, reps: int = 20) -> dict:
    import torch

    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(3):
                f(*args)
            end.record()
            torch.cuda.synchronize()
            times[k].append(start.elapsed_time(end) / 3)
    return {k: statistics.median(v) for k, v in times.items()}


def check(name: str, dtype, device: str) -> dict:
    import torch

    import coil

    row = {"model": name}
    torch._dynamo.reset()
    coil.reset()
    model, args = build(name, dtype, device)
    with torch.no_grad():
        ref = model(*args)
        fns = {"eager": model}
        for backend in ("inductor", "coil"):
            compiled = torch.compile(model, backend=backend)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                start = time.perf_counter()
                try:
                    out = compiled(*args)
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - the crash is the finding
                    row[f"{backend}_crash"] = f"{type(e).__name__}: {e}"[:500]
                    traceback.print_exc()
                    continue
            row[f"{backend}_first_s"] = round(time.perf_counter() - start, 2)
            out = out[0] if isinstance(out, (tuple, list)) else out
            r = ref[0] if isinstance(ref, (tuple, list)) else ref
            row[f"{backend}_max_err"] = float((out.float() - r.float()).abs().max())
            if backend == "coil":
                row["coil_warnings"] = [str(w.message)[:300] for w in caught
                                        if "coil" in str(w.message)]
                row["coil_eager_graphs"] = [g.eager_reason[:300] for g in coil.compiled_graphs()
                                            if g.eager_fallback]
            fns[backend] = compiled
        row.update({f"{k}_ms": round(v, 3) for k, v in time_round_robin(fns, args).items()})
    if "coil_ms" in row and "inductor_ms" in row:
        row["coil_vs_inductor"] = round(row["inductor_ms"] / row["coil_ms"], 3)
    return row


def main() -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    dtype = getattr(torch, a.dtype)
    rows = []
    for name in a.models:
        try:
            row = check(name, dtype, "cuda")
        except Exception as e:  # noqa: BLE001
            row = {"model": name, "error": f"{type(e).__name__}: {e}"[:500]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
