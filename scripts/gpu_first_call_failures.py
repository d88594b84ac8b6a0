"""A model's first call, several times, each in a fresh process with empty coil and Triton caches:
prints the full traceback of every kernel failure the safety net caught (the CoilWarning names
only the kernel), to chase failures that come and go with parallel compilation.

    python scripts/gpu_first_call_failures.py crossvit_9_240 --runs 3
"""

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, traceback, warnings
import torch, coil
from coil import backend
sys.path.insert(0, {scripts!r})
from gpu_models_check import build

original = backend._eager
def logged(*a, **k):
    exc = sys.exc_info()[1]
    print("KERNEL FAILURE:", a[2], flush=True)
    if exc is not None:
        traceback.print_exception(exc)
    return original(*a, **k)
backend._eager = logged
model, inputs = build({name!r}, torch.bfloat16, "cuda")
with torch.no_grad():
    out = torch.compile(model, backend="coil")(*inputs)
torch.cuda.synchronize()
print("first call done; eager graphs:", [r.eager_reason for r in coil.compiled_graphs() if r.eager_fallback])
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    scripts = os.path.dirname(os.path.abspath(__file__))
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as coil_cache, tempfile.TemporaryDirectory() as tcache:
            env = dict(os.environ, COIL_CACHE_DIR=coil_cache, TRITON_CACHE_DIR=tcache)
            print(f"=== run {run}", flush=True)
            code = CHILD.format(scripts=scripts, name=args.model)
            subprocess.run([sys.executable, "-c", code], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
