"""Where the time of coil.mm_row_groups goes for GPT-2's head on a GPU: each part alone (the two
end-column products, one group's product, all groups) beside the aligned product of all rows,
and a profile of one call's kernels."""
import torch

import coil  # noqa: F401  (registers coil.mm_row_groups)
from gpu_lm_head import timed

torch.manual_seed(0)
m, k, n, g = 4096, 768, 50257, 8
x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
b = w.t()
out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def group(j):
    skip = -(j * n) % g
    width = (n - skip) // g * g
    rows = len(range(j, m, g))
    return torch.mm(x[j::g], b[:, skip:skip + width],
                    out=out.as_strided((rows, width), (g * n, 1), j * n + skip))


def groups():
    for j in range(g):
        group(j)


def edges():
    torch.mm(x, b[:, :g], out=out[:, :g])
    torch.mm(x, b[:, n - g:], out=out[:, n - g:])


contiguous_rows = x[:512].contiguous()
parts = {
    "row groups op": lambda: torch.ops.coil.mm_row_groups(x, b, None, g),
    "aligned mm alone": lambda: torch.mm(x, b[:, :50256]),
    "groups only": groups,
    "edges only": edges,
    "one group (rows 8 apart)": lambda: group(1),
    "512 contiguous rows, contiguous out": lambda: torch.mm(contiguous_rows, b[:, :50248]),
    "512 rows 8 apart, contiguous out": lambda: torch.mm(x[1::8], b[:, :50248]),
}
for name, fn in parts.items():
    ms, _ = timed(fn)
    print(f"{name:38s} {ms:.3f} ms", flush=True)

from torch.profiler import ProfilerActivity, profile

with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        torch.ops.coil.mm_row_groups(x, b, None, g)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=90))
