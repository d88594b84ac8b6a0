"""Is a memory-bound bench case bound by memory or by its arithmetic on this CPU?

    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824 \\
        python scripts/cpu_compute_floor.py [--cases softmax,log_softmax,pointwise_chain]

(the allocator settings of the bench's CPU command in docs/benchmarks.md.) For each case, coil
compiles the bench's function at the bench's shape, and its one C++ kernel (kernels.cpp in a debug
folder) is built twice with coil's own compiler flags:

  memory   the kernel as coil emitted it, its data streamed from memory
  cache    the same kernel with every row index folded into a window of rows private to each of
           the two threads' halves (8 rows of a row-group kernel, 16384 elements of a pointwise
           one: well inside a core's L2) and its software prefetches removed: the same
           instructions over the same number of elements, without memory traffic

Both run interleaved round by round with dst.copy_(src) of the case's own bytes (what the bench's
% of copy is against; medians). A case whose copy takes under 80% of its cache time cannot reach
80% of the copy bandwidth however its memory traffic is scheduled: its arithmetic is its floor.
Nothing here asserts a speed.
"""

import argparse
import ctypes
import glob
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import torch

WINDOW_ROWS = 8  # per thread, a row-group kernel
WINDOW_ELEMENTS = 16384  # per thread, a pointwise kernel


def _kernel_source(fn, inputs):
    import coil

    torch._dynamo.reset()
    debug = tempfile.mkdtemp(prefix="coil_floor_")
    old = coil.config.options.debug_dir
    coil.config.options.debug_dir = debug
    try:
        with torch.no_grad():
            torch.compile(fn, backend="coil")(*inputs)
    finally:
        coil.config.options.debug_dir = old
    found = glob.glob(f"{debug}/*/kernels.cpp")
    src = open(found[0]).read() if len(found) == 1 else None
    shutil.rmtree(debug, ignore_errors=True)
    if src is None or len(re.findall(r'extern "C" void (cpp_fused\w+)\(', src)) != 1:
        raise SystemExit("expected one graph of one C++ kernel")
    # The kernel's pointers must be the graph's inputs in order, then its outputs.
    names = re.findall(r"\(ptrs\[\d+\]\);  // (\w+)", src)
    n_in = len(inputs)
    if names[:n_in] != [f"arg{i}_1" for i in range(n_in)] or any(
        not n.startswith("buf") for n in names[n_in:]
    ):
        raise SystemExit(f"kernel arguments {names}: not the inputs then the outputs")
    return src


def _cache_resident(src, outer):
    """src with each row index folded into a per-thread window; prefetches removed."""
    body_at = src.index('extern "C"')
    head, body = src[:body_at], src[body_at:]
    rows = re.findall(r"(\d+)\*x0_g(\d)", body)
    if rows:
        half = outer // 2
        body = re.sub(
            r"(\d+)\*x0_g(\d)",
            lambda m: f"{m.group(1)}*((x0_g{m.group(2)} & {WINDOW_ROWS - 1}) + "
            f"(x0_g{m.group(2)} >= {half} ? {WINDOW_ROWS} : 0))",
            body,
        )
    elif "(x0)" in body:
        half = outer // 2
        body = body.replace(
            "(x0)", f"((x0 & {WINDOW_ELEMENTS - 1}) + (x0 >= {half} ? {WINDOW_ELEMENTS} : 0))"
        )
    else:
        raise SystemExit("neither a row-group nor a flat pointwise kernel: no window to fold into")
    body = "\n".join(l for l in body.split("\n") if not l.strip().startswith("coil_prefetch("))
    return head + body


def _build(src, workdir, tag):
    from coil import runtime

    path = os.path.join(workdir, f"{tag}.cpp")
    open(path, "w").write(src)
    so = path[:-4] + ".so"
    subprocess.check_call(["g++", *runtime.vec_flags(), path, "-o", so])
    name = re.search(r'extern "C" void (cpp_fused\w+)\(', src).group(1)
    return getattr(ctypes.CDLL(so), name)


def main():
    from coil.bench import cases
    from coil.bench.timing import _copy_step

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="softmax,log_softmax,pointwise_chain")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    registry = {c.name: c for c in cases.MICRO}
    work = tempfile.mkdtemp(prefix="coil_floor_build_")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':<16} {'memory ms':>10} {'cache ms':>9} {'copy ms':>8}   % of copy: memory  cache")
    for name in a.cases.split(","):
        built = registry[name].build("cpu", "cpu")
        if isinstance(built.fn, torch.nn.Module):
            print(f"{name:<16} (a module: its parameters are graph inputs too; not supported)")
            continue
        src = _kernel_source(built.fn, built.inputs)
        with torch.no_grad():
            ref = built.fn(*built.inputs)
        outs = list(ref) if isinstance(ref, tuple) else [ref]
        outs = [torch.empty_like(o) for o in outs]
        tensors = [*built.inputs, *outs]
        ptrs = (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])
        ints = (ctypes.c_int64 * 8)()
        outer = built.inputs[0].shape[0]
        kernels = {
            "memory": _build(src, work, name),
            "cache": _build(_cache_resident(src, outer), work, name + "_cache"),
        }
        copy = _copy_step(built.min_bytes, "cpu")
        steps = {k: (lambda f=f: f(ptrs, ints)) for k, f in kernels.items()}
        steps["copy"] = copy
        for step in steps.values():
            step()
        ts = {k: [] for k in steps}
        order = list(steps)
        for r in range(a.rounds):
            for k in order[r % 3 :] + order[: r % 3]:
                t = time.perf_counter()
                steps[k]()
                ts[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in ts.items()}
        print(
            f"{name:<16} {med['memory']:>10.3f} {med['cache']:>9.3f} {med['copy']:>8.3f}"
            f"   {100 * med['copy'] / med['memory']:>16.0f}% {100 * med['copy'] / med['cache']:>5.0f}%",
            flush=True,
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
