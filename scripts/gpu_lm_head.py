"""The LM head's product on a GPU, side by side: eager (cuBLAS on an unaligned N), Inductor, coil,
and by hand the ways coil could compute a padded product into eager's contiguous output (one
padded product and a copy; row blocks of several heights). Prints time per call (median of CUDA
event timings) and the peak above the inputs, and the strides Inductor returns.

    python scripts/gpu_lm_head.py [M K N]
"""

import statistics
import sys

import torch


def timed(fn, reps=40):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = fn()
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20
    del out
    return statistics.median(times), peak


def main():
    m, k, n = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (4096, 768, 50257)
    np_ = (n + 7) // 8 * 8
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    wp = torch.zeros(np_, k, device="cuda", dtype=torch.bfloat16)
    wp[:n] = w
    wpt = wp.t()
    head = lambda x: torch.nn.functional.linear(x, w)  # noqa: E731
    expected = head(x)
    print(f"M {m} K {k} N {n} (padded {np_}); output {expected.numel() * 2 / 2**20:.1f} MB")

    def padded_copy(x):
        return torch.mm(x, wpt)[:, :n].contiguous()

    def blocks(rows):
        def run(x):
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for r in range(0, m, rows):
                out[r:r + rows].copy_(torch.mm(x[r:r + rows], wpt)[:, :n])
            return out
        return run

    import triton
    import triton.language as tl

    @triton.jit
    def copy_rows(src, dst, n, src_stride, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n
        tl.store(dst + row * n + cols, tl.load(src + row * src_stride + cols, mask=mask), mask=mask)

    @triton.jit
    def copy_flat(src, dst, total, n, src_stride, BLOCK: tl.constexpr):
        f = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = f < total
        tl.store(dst + f, tl.load(src + (f // n) * src_stride + f % n, mask=mask), mask=mask)

    def tcopy(dst, src, flat=False):
        rows = src.shape[0]
        if flat:
            grid = (triton.cdiv(rows * n, 2048),)
            copy_flat[grid](src, dst, rows * n, n, src.stride(0), BLOCK=2048)
        else:
            copy_rows[(rows, triton.cdiv(n, 4096))](src, dst, n, src.stride(0), BLOCK=4096)

    def mm_only(x):
        return torch.mm(x, wpt)

    def blocks_t(rows, flat=False):
        def run(x):
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for r in range(0, m, rows):
                tcopy(out[r:r + rows], torch.mm(x[r:r + rows], wpt), flat)
            return out
        return run

    def strided(rows, inplace):
        # The product written at the padded leading dimension into one scratch block (no padded
        # weight): addmm_ in place, or mm(out=) (which ATen may route through a temporary).
        def run(x):
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            scratch = torch.empty(rows, np_, device="cuda", dtype=torch.bfloat16)
            for r in range(0, m, rows):
                product = scratch[:min(rows, m - r), :n]
                if inplace:
                    product.addmm_(x[r:r + rows], w.t(), beta=0)
                else:
                    torch.mm(x[r:r + rows], w.t(), out=product)
                tcopy(out[r:r + rows], product)
            return out
        return run

    side = torch.cuda.Stream()

    def blocks_overlap(rows, triton_copy):
        def run(x):
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            main = torch.cuda.current_stream()
            for r in range(0, m, rows):
                product = torch.mm(x[r:r + rows], wpt)
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    if triton_copy:
                        tcopy(out[r:r + rows], product)
                    else:
                        out[r:r + rows].copy_(product[:, :n])
                product.record_stream(side)
                del product
            main.wait_stream(side)
            return out
        return run

    rows_out = []
    with torch.no_grad():
        import coil  # noqa: F401

        inductor = torch.compile(head, backend="inductor")
        got = inductor(x)
        print("inductor output strides", got.stride(), "eager", expected.stride())
        coil_fn = torch.compile(head, backend="coil")
        coil_fn(x)
        import coil as c

        print("coil externs", [r.extern_ops for r in c.compiled_graphs()])
        cases = [("eager", head), ("inductor", inductor), ("coil", coil_fn),
                 ("padded+copy", padded_copy)]
        cases += [("mm only", mm_only)]
        cases += [(f"tblocks {rows}", blocks_t(rows)) for rows in (640, 1024)]
        cases += [(f"addmm_ {rows}", strided(rows, True)) for rows in (640, 1024)]
        cases += [(f"mm out= {rows}", strided(rows, False)) for rows in (640,)]
        for name, fn in cases:
            if name != "mm only":
                torch.testing.assert_close(fn(x), expected, atol=3e-2, rtol=3e-2)
            ms, peak = timed(lambda: fn(x))
            rows_out.append((name, ms, peak))
    for name, ms, peak in rows_out:
        print(f"{name:14s} {ms:8.3f} ms  peak {peak:8.1f} MB")


if __name__ == "__main__":
    main()
