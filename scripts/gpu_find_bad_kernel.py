"""On the GPU machine: find the coil kernel that faults (an illegal address) in a zoo model.

    python scripts/gpu_find_bad_kernel.py timm/cait_xxs24_224 [more models] --out DIR

Each model runs in a child process with CUDA_LAUNCH_BLOCKING=1 and every coil kernel launch
followed by a synchronize: the first launch that fails is printed with its kernel name, config and
argument shapes, and the graph's debug folder (COIL_DEBUG_DIR) is kept under DIR/<model>/."""

import argparse
import os
import subprocess
import sys

CHILD = r'''
import os, sys, traceback, torch
import coil.triton_launcher as tl_
from coil.bench import zoo_models

def describe(t):
    return f"{tuple(t.shape)}:{tuple(t.stride())}:{t.dtype}:off{t.storage_offset()}:nbytes{t.untyped_storage().nbytes()}" if isinstance(t, torch.Tensor) else repr(t)

orig_launch = tl_.Launcher._launch
def launch(self, cfg, tensors, xnumel, rnumel, ynumel=None, size_args=()):
    k = orig_launch(self, cfg, tensors, xnumel, rnumel, ynumel, size_args)
    try:
        torch.cuda.synchronize()
    except Exception:
        print("BAD KERNEL", self.__name__, cfg, "xnumel", xnumel, "rnumel", rnumel, "ynumel", ynumel,
              "size_args", size_args, flush=True)
        for t in tensors:
            print("   arg", describe(t), flush=True)
        raise
    return k
tl_.Launcher._launch = launch
orig_call = tl_._Bound.__call__
def bound_call(self, tensors):
    orig_call(self, tensors)
    try:
        torch.cuda.synchronize()
    except Exception:
        print("BAD KERNEL (bound)", self.function, "grid", self.grid, "scalars", self.scalars,
              "direct", self.direct, flush=True)
        for t in tensors:
            print("   arg", describe(t), flush=True)
        traceback.print_stack()
        raise
tl_._Bound.__call__ = bound_call
orig_run = tl_.Launcher.run
def run(self, *tensors, **kw):
    if os.environ.get("NO_BOUND"):
        self.bound.clear()
    try:
        return orig_run(self, *tensors, **kw)
    except Exception as e:
        print("LAUNCH ERROR in", self.__name__, type(e).__name__, str(e)[:500], flush=True)
        raise
tl_.Launcher.run = run

if os.environ.get("ZOO_FLOW"):
    from coil.bench import zoo
    settings = zoo.Settings(device="cuda", dtype="bfloat16", budget_s=1.0)
    rec = zoo.run_model(zoo_models.find(sys.argv[1]), settings)
    import json
    print("ZOO RECORD", rec["status"], json.dumps(rec.get("backends", {}).get("coil", {}), default=str)[:3000], rec.get("error"), rec.get("traceback", "")[-2000:], flush=True)
    sys.exit(0)
entry = zoo_models.find(sys.argv[1])
ex = entry.build("cuda", False, 0)
model = ex.model.to("cuda", torch.bfloat16).eval()
cast = lambda v: v.to("cuda", torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else (v.to("cuda") if isinstance(v, torch.Tensor) else v)
args = [cast(a) for a in ex.args]
kwargs = {k: cast(v) for k, v in ex.kwargs.items()}
with torch.no_grad():
    ref = model(*args, **kwargs)
    out = torch.compile(model, backend="coil")(*args, **kwargs)
    torch.cuda.synchronize()
import coil
print("OK no fault", "max diff", (out.float() - ref.float()).abs().max().item(),
      "eager graphs", [r.eager_reason[:300] for r in coil.compiled_graphs() if r.eager_fallback],
      flush=True)
'''


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    p.add_argument("--copies", type=int, default=1,
                   help="run each model this many times side by side (a loaded machine)")
    p.add_argument("--blocking", type=int, default=1, help="CUDA_LAUNCH_BLOCKING")
    args = p.parse_args()
    import tempfile

    from coil.bench.compile_time import cache_env

    procs = []
    for model in args.models:
        for copy in range(args.copies):
            folder = os.path.join(args.out, model.replace("/", "__") + f"_{copy}")
            os.makedirs(folder, exist_ok=True)
            env = dict(os.environ, CUDA_LAUNCH_BLOCKING=str(args.blocking),
                       COIL_DEBUG_DIR=os.path.join(folder, "debug"), HF_HUB_OFFLINE="1")
            env.update(cache_env(tempfile.mkdtemp(prefix="bad_kernel_caches_")))
            log = open(os.path.join(folder, "log.txt"), "w")
            procs.append((model, copy, folder, log,
                          subprocess.Popen([sys.executable, "-c", CHILD, model], env=env,
                                           stdout=log, stderr=subprocess.STDOUT)))
    for model, copy, folder, log, proc in procs:
        try:
            proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        text = open(os.path.join(folder, "log.txt"), errors="replace").read()
        print(f"== {model} #{copy}: exit {proc.returncode}", flush=True)
        keys = ("BAD KERNEL", "   arg", "OK no", "LAUNCH ERROR", "ZOO RECORD", "Error")
        lines = [l for l in text.splitlines() if any(k in l for k in keys)]
        print("\n".join(lines[:40]) or text[-3000:], flush=True)


if __name__ == "__main__":
    main()
