"""Launching coil's Triton kernels: pick a launch config, compute the grid, call the kernel.

The candidate configs (XBLOCK, RBLOCK, num_warps) of each kernel are decided by the compiler and
written into output_code.py; this module only chooses among them. On a GPU, the first call of a
kernel with more than one candidate benchmarks them all (CUDA events, an L2-sized buffer zeroed
before each launch, on copies of the buffers the kernel writes, so in-place kernels are not run
twice on live data) and keeps the fastest; the winner is cached in a JSON file beside the kernel
source in coil's cache directory (the cache_dir option), so later processes skip the benchmark. Under Triton's interpreter
(TRITON_INTERPRET=1, tensors on the CPU) the first candidate is used as is.

`libdevice()` gives the module generated kernels call for math Triton's core language lacks
(tanh, log1p, pow, ...): triton.language.extra.libdevice when compiling for a GPU, and a NumPy
stand-in under the interpreter, whose libdevice calls are not implemented.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import sys
import types

import numpy as np
import triton
import triton.language as tl

from coil import config
from coil.runtime import KernelFailure


def interpreting() -> bool:
    """True when Triton runs kernels with its interpreter (TRITON_INTERPRET=1)."""
    return bool(triton.knobs.runtime.interpret)


class Launcher:
    """One kernel of output_code.py and its candidate launch configs.

    `dtypes` (one per tensor argument) and `sizes` (xnumel, and rnumel or ynumel) let `precompile`
    build every config before the first call. After a config is chosen, calls go straight to the
    compiled kernel's launcher (`_Bound`), skipping the JIT's per-call argument specialization."""

    def __init__(self, fn, kind: str, configs: list[dict], written: list[int],
                 dtypes: list | None = None, sizes: dict | None = None,
                 size_hints: list | None = None):
        self.fn = fn
        self.kind = kind  # "pointwise", "tiled", "reduction", "persistent_reduction"
        self.configs = configs
        self.written = written  # positions of the tensor arguments the kernel stores to
        self.dtypes = dtypes or []
        self.sizes = sizes or {}  # for compiling ahead: the traced sizes (hints when dynamic)
        self.size_hints = size_hints or []  # the traced values of the kernel's size arguments
        self.chosen: dict[tuple, dict] = {}  # size bucket (see _bucket) -> config
        self.bound: dict[tuple, _Bound | bool] = {}  # exact sizes -> direct launch
        self.__name__ = getattr(fn, "__name__", "triton_kernel")
        # The options of the function this kernel was compiled for (its module loads under
        # config.active): tuning at the first call uses its cache folder and logs.
        self.options = config.options

    def run(self, *tensors, xnumel: int, rnumel: int | None = None, ynumel: int | None = None,
            size_args: tuple = ()):
        key = (xnumel, rnumel, ynumel, size_args)
        bound = self.bound.get(key)
        if bound and bound.accepts(tensors):
            bound(tensors)
            return
        # Configs are tuned once per bucket of sizes, not per size: a dynamic kernel called at
        # every sequence length tunes a handful of times, not on every new length.
        bucket = _bucket(xnumel, rnumel, ynumel)
        try:
            cfg = self.chosen.get(bucket)
            if cfg is None:
                cfg = self._choose(tensors, xnumel, rnumel, ynumel, size_args)
                self.chosen[bucket] = cfg
            try:
                kernel = self._launch(cfg, tensors, xnumel, rnumel, ynumel, size_args)
            except TypeError as e:
                if ("arguments" not in str(e) or interpreting()
                        or not hasattr(self.fn, "device_caches")):
                    raise
                # A C launcher that parsed another kernel's argument list ("takes exactly 22
                # arguments (17 given)": crossvit_9_240 on the H100, 2026-12-05, once, not
                # reproduced with fresh caches). Raised before anything ran: the kernel's
                # compiled forms are dropped and loaded again, their launchers built anew on
                # this thread, once, before the graph falls back.
                print(f"[coil] {self.__name__}: launch rejected its arguments ({e}); "
                      "reloading the kernel", file=sys.stderr)
                self.fn.device_caches.clear()
                kernel = self._launch(cfg, tensors, xnumel, rnumel, ynumel, size_args)
        except Exception as e:  # noqa: BLE001 - what it was goes into the KernelFailure
            # (The first launch at these sizes compiles the kernel: a compile error, or a launch
            # the GPU refuses, is the compiler's fault; the graph's call falls back.)
            raise KernelFailure(self.__name__, e) from e
        if kernel is not None and bound is None and not interpreting():
            if len(self.bound) >= _MAX_BOUND:
                self.bound.clear()  # many distinct sizes: keep the table small
            # False: this call site cannot take the direct path (it is not retried).
            self.bound[key] = _Bound.make(kernel, self._grid(cfg, xnumel, ynumel),
                                          self._scalars(cfg, xnumel, rnumel, ynumel, size_args),
                                          tensors) or False

    def _grid(self, cfg: dict, xnumel: int, ynumel: int | None) -> int:
        n = triton.cdiv(xnumel, cfg["XBLOCK"])
        if ynumel is not None:
            n *= triton.cdiv(ynumel, cfg["YBLOCK"])
        return n

    def _scalars(self, cfg: dict, xnumel: int, rnumel: int | None, ynumel: int | None,
                 size_args: tuple = ()) -> tuple:
        # The kernel's non-tensor parameters in order: size symbols, numels, then block sizes
        # (constexpr).
        if ynumel is not None:
            return (*size_args, ynumel, xnumel, cfg["YBLOCK"], cfg["XBLOCK"])
        if rnumel is None:
            return (*size_args, xnumel, cfg["XBLOCK"])
        return (*size_args, xnumel, rnumel, cfg["XBLOCK"], cfg["RBLOCK"])

    def _launch(self, cfg: dict, tensors, xnumel: int, rnumel: int | None,
                ynumel: int | None = None, size_args: tuple = ()):
        grid = (self._grid(cfg, xnumel, ynumel),)
        if grid[0] == 0:
            return None
        sizes = [n for n in (ynumel, xnumel, rnumel) if n is not None]
        return self.fn[grid](*tensors, *size_args, *sizes, **cfg)

    # ---- compiling ahead of the first call ----

    def compile_jobs(self):
        """Thunks that compile each candidate without launching it (its config in .config)."""
        if not self.dtypes or "xnumel" not in self.sizes:
            return []
        sizes = [self.sizes[k] for k in ("ynumel", "xnumel", "rnumel") if k in self.sizes]
        configs = self.configs
        if len(configs) > 1:
            # A winner tuned by an earlier process for these sizes: only it will run.
            path = self._cache_path(_current_device_name(),
                                    *_bucket(self.sizes["xnumel"], self.sizes.get("rnumel"),
                                             self.sizes.get("ynumel")))
            cached = _read_json(path)
            if cached and cached.get("config") in configs:
                configs = [cached["config"]]
        jobs = []
        for cfg in configs:
            def job(cfg=cfg):
                kernel = self.fn.warmup(*self.dtypes, *self.size_hints, *sizes, grid=(1,), **cfg)
                kernel._init_handles()  # loads the binary; builds the C launcher if new
            job.config = cfg
            jobs.append(job)
        return jobs

    # ---- choosing a config ----

    def _choose(self, tensors, xnumel: int, rnumel: int | None, ynumel: int | None,
                size_args: tuple = ()) -> dict:
        if interpreting():  # the first candidate, or the one triton_interp_check asks for
            from coil import triton_interp_check

            cfg = self.configs[triton_interp_check.config_index() % len(self.configs)]
            if triton_interp_check.tuning_runs():  # as the GPU's tuner runs it: on copies
                self._launch(cfg, scratch_args(tensors, self.written), xnumel, rnumel, ynumel,
                             size_args)
            return cfg
        if len(self.configs) == 1:
            return self.configs[0]
        path = self._cache_path(_device_name(tensors), *_bucket(xnumel, rnumel, ynumel))
        cached = _read_json(path)
        if cached and cached.get("config") in self.configs:
            return cached["config"]
        timings = self._benchmark(tensors, xnumel, rnumel, ynumel, size_args)
        best = min(range(len(self.configs)), key=lambda i: timings[i])
        _write_json(
            path,
            {
                "kernel": self.__name__,
                "xnumel": xnumel,
                "rnumel": rnumel,
                "ynumel": ynumel,
                "config": self.configs[best],
                "timings_ms": [{"config": c, "ms": t} for c, t in zip(self.configs, timings)],
            },
        )
        src_path = path[: -len(".best_config.json")] + ".py"
        if not os.path.exists(src_path):
            _write_text(src_path, getattr(self.fn, "src", ""))
        if "perf" in self.options.logs:
            print(
                f"[coil] tuned {self.__name__}: {self.configs[best]} "
                f"({timings[best]:.4f} ms; {len(self.configs)} candidates)",
                file=sys.stderr,
            )
        return self.configs[best]

    def _benchmark(self, tensors, xnumel: int, rnumel: int | None,
                   ynumel: int | None, size_args: tuple = ()) -> list[float]:
        # Written buffers are replaced by copies: a kernel that updates a buffer in place must not
        # see its own output as input on the next repetition of the live call.
        import torch

        args = scratch_args(tensors, self.written)
        device = next((t.device for t in tensors if getattr(t, "is_cuda", False)), None)
        flush = _l2_flush_buffer(device)
        timings = []
        for cfg in self.configs:
            try:
                ms = _time_ms(
                    lambda cfg=cfg: self._launch(cfg, args, xnumel, rnumel, ynumel, size_args),
                    flush)
            except Exception as e:  # noqa: BLE001 - e.g. out of shared memory or registers
                if "perf" in self.options.logs:
                    print(f"[coil] {self.__name__}: config {cfg} failed: {e}", file=sys.stderr)
                ms = float("inf")
            timings.append(ms)
        del flush, args
        if device is not None:
            torch.cuda.synchronize(device)
        return timings

    def _cache_path(self, device: str, xnumel: int, rnumel: int | None,
                    ynumel: int | None) -> str:
        h = hashlib.sha256()
        for part in (getattr(self.fn, "src", self.__name__), json.dumps(self.configs), device,
                     triton.__version__, str(xnumel), str(rnumel), str(ynumel)):
            h.update(part.encode())
            h.update(b"\0")
        folder = os.path.join(self.options.cache_dir, "triton")
        return os.path.join(folder, f"{self.__name__}-{h.hexdigest()[:20]}.best_config.json")


_MAX_BOUND = 64  # direct launches kept per kernel (one per distinct size)


def scratch_args(tensors, written) -> list:
    """The arguments of a tuning launch: the tensors a kernel writes replaced by copies with the
    same strides (padded rows and all), each over the whole extent its strides reach, so that
    every address the kernel computes from them stays inside the copy. (tensor.clone() made a
    padded buffer dense: timm's cait, efficientvit and halonet wrote past the copy's end while
    tuning and faulted on an H100, or silently overwrote a neighbour.) The extent, not the rest
    of the storage: a view of one slot of a large cache copies the slot."""
    import torch

    args = list(tensors)
    for i in written:
        t = args[i]
        extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else 0
        base = torch.empty(max(extent, 1), dtype=t.dtype, device=t.device)
        copy = base.as_strided(t.shape, t.stride())
        copy.copy_(t)
        args[i] = copy
    return args


def _l2_flush_buffer(device):
    """A buffer the size of the GPU's L2 cache, zeroed before each timed launch so that every
    config starts from a cold cache. triton.testing.do_bench allocates 256 MB for this, on top of
    the graph's buffers at its first call: the zoo's first-call peaks were about 200 MB above
    Inductor's (H100, 2026-12-05), whose benchmarker sizes it by the L2 as here."""
    import torch

    if device is None:
        return None
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
    return torch.empty(l2 // 4, dtype=torch.int32, device=device)


def _time_ms(fn, flush, warmup_ms: float = 5.0, rep_ms: float = 25.0) -> float:
    """The median time of fn in milliseconds (CUDA events), the L2 flushed before each launch."""
    import statistics

    import torch

    def clear():
        if flush is not None:
            flush.zero_()

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        clear()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-4)
    for _ in range(max(1, min(int(warmup_ms / estimate), 200))):
        fn()
    n = max(1, min(int(rep_ms / estimate), 1000))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        clear()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _bucket(xnumel: int, rnumel: int | None, ynumel: int | None) -> tuple:
    """The sizes a tuned config is kept for: each rounded up to a power of two (a static kernel
    has one bucket; a dynamic one a few, whatever the number of distinct sizes)."""

    def up(n):
        return None if n is None else 1 << max(int(n) - 1, 0).bit_length()

    return (up(xnumel), up(rnumel), up(ynumel))


def _device_name(tensors) -> str:
    """The GPU's name, part of a tuned config's cache key ("" for CPU tensors)."""
    for t in tensors:
        if getattr(t, "is_cuda", False):
            import torch

            return torch.cuda.get_device_name(t.device)
    return ""


def _current_device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""


class _Bound:
    """A compiled kernel with its grid and scalar arguments fixed: a call is one call into the
    kernel's C launcher. Valid while every tensor argument is 16-byte aligned, as the tensors were
    when the kernel was specialized (Triton assumes the alignment it saw)."""

    __slots__ = ("kernel_run", "launch", "prefix", "grid", "stream", "function", "metadata",
                 "scalars", "direct")

    @staticmethod
    def make(kernel, grid: int, scalars: tuple, tensors):
        if _hooked(triton.knobs.runtime.launch_enter_hook) or _hooked(
                triton.knobs.runtime.launch_exit_hook):
            return None  # a profiler hook wants the JIT's full launch path
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        if any(t.data_ptr() % 16 for t in tensors):
            return None
        import torch

        b = _Bound()
        b.kernel_run = kernel.run
        b.function = kernel.function
        b.metadata = kernel.packed_metadata
        b.grid = grid
        device = tensors[0].device.index if tensors else torch.cuda.current_device()
        b.stream = functools.partial(torch._C._cuda_getCurrentRawStream, device)
        b.scalars = scalars
        # The launcher's C entry point, when it needs no scratch memory: one call less per launch
        # (Triton 3.x's CudaLauncher; checked on the first call, else the launcher object is used).
        run = b.kernel_run
        b.launch = getattr(run, "launch", None)
        b.direct = (b.launch is not None and getattr(run, "global_scratch_size", 1) == 0
                    and getattr(run, "profile_scratch_size", 1) == 0
                    and getattr(run, "num_ctas", 1) == 1)
        if b.direct:
            b.prefix = (run.launch_cooperative_grid, run.launch_pdl, None, None, b.metadata,
                        None, None, None)
        return b

    def accepts(self, tensors) -> bool:
        for t in tensors:
            if t.data_ptr() & 15:
                return False
        return True

    def __call__(self, tensors):
        if self.direct:
            try:
                self.launch(self.grid, 1, 1, self.stream(), self.function, *self.prefix,
                            *tensors, *self.scalars)
                return
            except TypeError:  # a launcher with another calling convention
                self.direct = False
        self.kernel_run(self.grid, 1, 1, self.stream(), self.function, self.metadata, None, None,
                        None, *tensors, *self.scalars)


def _hooked(hook) -> bool:
    # Triton 3.6 keeps hooks in a HookChain (never None); older versions use None or a callable.
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else True


def precompile(launchers, workers: int | None = None) -> None:
    """Compile every candidate config of every kernel before the first call (only the winner,
    where an earlier process tuned the kernel for these sizes and cached it), several at a time
    on a thread pool: Triton's compiler spends much of its time in ptxas and in building C
    launchers, separate processes that run in parallel.

    A config that fails to compile or load (too much shared memory for this GPU, say) is dropped
    from its kernel's candidates; a kernel none of whose configs compiles raises KernelFailure,
    so the graph falls back when it is compiled (backend.py), never inside the user's call."""
    if interpreting():
        return
    jobs = [(launcher, job) for launcher in launchers for job in launcher.compile_jobs()]
    if not jobs:
        return
    from concurrent.futures import ThreadPoolExecutor

    failed: dict = {}  # launcher -> [(config, exception)]

    def guarded(item):
        launcher, job = item
        try:
            job()
        except Exception as e:  # noqa: BLE001 - judged per kernel below
            failed.setdefault(launcher, []).append((job.config, e))

    # The first job runs alone: it fills the per-process state every compile reads (Triton's own
    # hash of its sources and its 500 MB library, the driver and the backend), which Triton caches
    # without a lock, so jobs started together would each compute it (GPT-2's warm start spent
    # over a second in ten concurrent hashes of libtriton).
    guarded(jobs[0])
    if len(jobs) > 1:
        workers = workers or min(len(jobs) - 1, max(2, os.cpu_count() or 2), 16)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(guarded, jobs[1:]))
    for launcher, failures in failed.items():
        bad = [cfg for cfg, _ in failures]
        kept = [cfg for cfg in launcher.configs if cfg not in bad]
        if not kept:
            raise KernelFailure(launcher.__name__, failures[0][1]) from failures[0][1]
        if "perf" in launcher.options.logs:
            for cfg, e in failures:
                print(f"[coil] {launcher.__name__}: config {cfg} dropped ({type(e).__name__}: "
                      f"{e})", file=sys.stderr)
        launcher.configs = kept


def _read_json(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_text(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # atomic: concurrent processes never read half a file


def _write_json(path: str, data) -> None:
    _write_text(path, json.dumps(data, indent=2) + "\n")


# ---- libdevice ----


def libdevice():
    """The libdevice module generated kernels call (see the module docstring)."""
    if not interpreting():
        from triton.language.extra import libdevice as lib

        return lib
    return _interpreter_libdevice()


_BOOL_RESULTS = (np.greater, np.less, np.greater_equal, np.less_equal, np.equal, np.not_equal)
_BOOL_KEEPING = (np.bitwise_and, np.bitwise_or, np.bitwise_xor)


@functools.cache
def _interpreter_bool_types() -> None:
    """Triton's interpreter types a comparison's result, and a bitwise op of two booleans, with
    its left operand's dtype, and converts the data to it: a boolean scalar (from a scalar load)
    later broadcast came back as float32 and `&`/`|` with a mask failed (fuzzer --triton-check
    seeds 500033, 501133). On a GPU these are int1. The interpreter's results are typed int1."""
    from triton.runtime import interpreter

    binary_op = interpreter.InterpreterBuilder.binary_op

    def typed(self, lhs, rhs, op):
        if op in _BOOL_RESULTS or (op in _BOOL_KEEPING and lhs.data.dtype == np.bool_
                                   and rhs.data.dtype == np.bool_):
            return interpreter.TensorHandle(op(lhs.data, rhs.data), tl.int1)
        return binary_op(self, lhs, rhs, op)

    interpreter.InterpreterBuilder.binary_op = typed


def _interpreter_libdevice():
    from triton.runtime.interpreter import TensorHandle

    _interpreter_bool_types()

    def data_of(x):
        return x.handle.data if isinstance(x, tl.core.tensor) else np.asarray(x)

    def wrap(out, like):
        dtype = like.dtype.scalar
        out = np.asarray(out).astype(like.handle.data.dtype)
        ty = tl.block_type(dtype, list(out.shape)) if out.ndim else dtype
        return tl.core.tensor(TensorHandle(out, dtype), ty)

    def tensor_arg(args):
        return next(a for a in args if isinstance(a, tl.core.tensor))

    def elementwise(np_fn):
        def fn(*args):
            with np.errstate(all="ignore"):
                out = np_fn(*np.broadcast_arrays(*[data_of(a) for a in args]))
            return wrap(out, tensor_arg(args))

        return fn

    table = {
        "tanh": np.tanh, "log1p": np.log1p, "expm1": np.expm1, "tan": np.tan,
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
        "cosh": np.cosh, "atan2": np.arctan2, "pow": np.power, "fmod": np.fmod,
        "trunc": np.trunc, "nearbyint": np.rint, "rint": np.rint, "sqrt": np.sqrt,
        "exp": np.exp, "log": np.log, "erf": None, "floor": np.floor, "ceil": np.ceil,
        "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh, "log10": np.log10,
        "copysign": np.copysign, "hypot": np.hypot, "nextafter": np.nextafter,
        "ldexp": np.ldexp, "cyl_bessel_i0": np.i0,
        "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
        "lgamma": np.vectorize(_lgamma, otypes=[np.float64]),
    }
    table.update(_scipy_functions())
    ns = types.SimpleNamespace()
    for name, np_fn in table.items():
        if np_fn is not None:
            setattr(ns, name, elementwise(np_fn))
    ns.erf = tl.erf
    return ns


def _lgamma(x: float) -> float:
    # math.lgamma raises at the poles (0, -1, -2, ...), where libdevice returns +inf.
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _scipy_functions() -> dict:
    """The libdevice functions NumPy lacks, from SciPy when it is installed."""
    try:
        from scipy import special
    except ImportError:
        return {}
    return {
        "erfinv": special.erfinv, "erfcx": special.erfcx, "normcdfinv": special.ndtri,
        "cyl_bessel_i1": special.i1, "j0": special.j0, "j1": special.j1, "y0": special.y0,
        "y1": special.y1,
    }
