"""The LM head under coil alone on a GPU (a quick check of coil.mm_row_blocked): values against
eager, time per call and peak, beside the aligned product alone (the floor)."""
import torch

import coil
from gpu_lm_head import timed  # scripts/ is the script's directory: on sys.path

torch.manual_seed(0)
x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16) / 768**0.5
head = lambda x: torch.nn.functional.linear(x, w)
with torch.no_grad():
    compiled = torch.compile(head, backend="coil")
    torch.testing.assert_close(compiled(x), head(x), atol=3e-2, rtol=3e-2)
    print("externs", [r.extern_ops for r in coil.compiled_graphs()])
    for name, fn in [("eager", head), ("coil", compiled), ("aligned mm alone", lambda x: torch.mm(x, w[:50256].t()))]:
        ms, peak = timed(lambda: fn(x))
        print(f"{name:18s} {ms:.3f} ms  peak {peak:.1f} MB", flush=True)
