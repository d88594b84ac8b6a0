"""coil demo: compile a small model, check it against eager, and show where everything went.

    bash scripts/demo.sh        (or, once installed: python examples/demo.py)
"""

import os
import tempfile
import time

import torch

import coil


class Block(torch.nn.Module):
    """A pre-norm MLP block with a softmax head: LayerNorm, Linear, GELU, Linear, residual."""

    def __init__(self, dim=64, hidden=256, classes=10):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, x):
        x = x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return torch.softmax(self.head(x), dim=-1)


def main():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(32, 64)
    debug_dir = os.environ.get("COIL_DEBUG_DIR") or tempfile.mkdtemp(prefix="coil_demo_")
    with coil.config.patch(debug_dir=debug_dir), torch.no_grad():
        compiled = torch.compile(model, backend="coil")
        start = time.perf_counter()
        out = compiled(x)
        first_call = time.perf_counter() - start
        ref = model(x)
    torch.testing.assert_close(out, ref)
    print(f"coil output matches eager (max abs diff {(out - ref).abs().max().item():.2e})")
    # The first call of a process is mostly PyTorch: Dynamo's and AOTAutograd's traces (imports
    # included). coil's part is its compile phases below; in a fresh build cache (COIL_CACHE_DIR)
    # also, once, at::vec's precompiled header (a few seconds). A second run finds the kernels
    # and the header in the cache.
    print(f"first call: {first_call:.2f} s (Dynamo and AOTAutograd trace, coil compiles and "
          "builds; the first time in a build cache, at::vec's header is precompiled once)\n")
    for g in coil.compiled_graphs():
        print(f"graph {g.graph_id} ({g.kind}): {len(g.kernel_names)} coil kernels, "
              f"extern calls {g.extern_ops}, fallbacks {g.fallback_ops}")
        for name in g.kernel_names:
            print(f"  kernel {name}")
        # (import: FX graph to coil's; lower, schedule, codegen: the C++ core; build: the C++
        # compiler building the kernels, or the build cache finding them, and their loading)
        print("  compile phases: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in g.seconds.items()))
        print(f"  debug folder: {g.debug_dir}")
        for f in ("graph.txt", "fusion.txt", "schedule.txt", "output_code.py", "kernels.cpp"):
            print(f"    {os.path.join(g.debug_dir, f)}")
        if g.kernel_names:
            first = os.path.join(g.debug_dir, g.kernel_names[-1] + ".cpp")
            with open(first) as fh:
                header = [line for line in fh.read().splitlines() if line.startswith("//")]
            print(f"\n  the header of {g.kernel_names[-1]} says where it came from and why:")
            for line in header:
                print(f"    {line}")


if __name__ == "__main__":
    main()
