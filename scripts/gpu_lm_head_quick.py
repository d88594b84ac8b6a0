"""The LM head under coil alone on a GPU (a quick check of coil.mm_row_blocked): values against
eager, time per call and peak, beside the aligned product alone (the floor)."""
import statistics
import torch
import coil

def timed(fn, reps=20):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated(); out = fn()
    return statistics.median(ts), (torch.cuda.max_memory_allocated() - before) / 2**20

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
