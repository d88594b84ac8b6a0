"""Loading what the compiler generated: kernel libraries (through the C++ build cache) and the
wrapper module of each graph."""

from __future__ import annotations

import atexit
import functools
import linecache
import math
import os
import shutil
import sys
import threading
import types

import torch

from coil import _C, config, opaque_calls

# Fast paths for what every generated call() does many times (about 1 us each instead of 2-3):
# views of buffers and allocations on the current device. Older torch versions lack them.
_guards = getattr(torch._C._dynamo, "guards", None)
_reinterpret = getattr(_guards, "_reinterpret_tensor", None)


def _reinterpret_tensor(t, size, stride, offset_increment):
    return torch.as_strided(t, size, stride, t.storage_offset() + offset_increment)


# reinterpret_tensor(t, size, stride, k): a view of t's storage starting k elements after t's own
# storage offset (generated code passes offsets relative to each buffer's layout offset).
reinterpret_tensor = _reinterpret or _reinterpret_tensor
_empty_cpu = getattr(_guards, "_empty_strided_cpu", None)
_empty_cuda = getattr(_guards, "_empty_strided_cuda", None)


def _empty_strided_cpu(size, stride, dtype):
    return torch.empty_strided(size, stride, dtype=dtype, device="cpu")


def _empty_strided_cuda(size, stride, dtype):
    return torch.empty_strided(size, stride, dtype=dtype, device="cuda")


empty_strided_cpu = _empty_cpu or _empty_strided_cpu


def _huge_pages_on_advice() -> bool:
    """Whether the kernel serves transparent huge pages where madvise asks for them (its
    setting `[madvise]`; under `[always]` it already does, under `[never]` it will not)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[madvise]" in f.read()
    except OSError:
        return False


_advise_huge_pages = _C.advise_huge_pages if _huge_pages_on_advice() else None


def empty_strided_cpu_large(size, stride, dtype):
    """empty_strided_cpu for a buffer of many megabytes (the wrapper's choice): fresh memory
    that its first writer would fault in 4 KiB at a time is asked to come in 2 MiB pages
    (runtime/memory.h says why and what it saves)."""
    t = empty_strided_cpu(size, stride, dtype)
    if _advise_huge_pages is not None:
        _advise_huge_pages(t.data_ptr(), t.untyped_storage().nbytes())
    return t

# On the current CUDA device: generated code runs under a device guard for its graph's GPU.
empty_strided_cuda = _empty_cuda or _empty_strided_cuda


# ATen ops whose Python binding (torch.convolution, torch.mm, ...) is the op itself for the
# wrapper's calls: each has one overload the binding can resolve to for positional arguments of
# that overload's schema (others take an out= tensor or more arguments). The binding parses its
# arguments in generated C++; the torch.ops overload boxes them through the schema: 8.7 against
# 18.2 us a call for a small convolution on a CPU (2026-12-03), 62 of them a MobileNetV3 call.
_PYTHON_BINDINGS = {
    "aten.convolution.default": "convolution",
    "aten.mm.default": "mm",
    "aten.addmm.default": "addmm",
    "aten.bmm.default": "bmm",
    "aten.baddbmm.default": "baddbmm",
    "aten.addmv.default": "addmv",
    "aten._scaled_dot_product_efficient_attention.default": "_scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_cudnn_attention.default": "_scaled_dot_product_cudnn_attention",
}


def extern_op(name: str):
    """The callable the wrapper uses for the ATen op `name` ("aten.convolution.default"): its
    Python binding where that is the same op (_PYTHON_BINDINGS), else the torch.ops overload."""
    if name.startswith(opaque_calls.PREFIX):  # a higher-order op's eager call
        return opaque_calls.lookup(name)
    binding = _PYTHON_BINDINGS.get(name)
    if binding is not None and hasattr(torch._C._VariableFunctions, binding):
        return getattr(torch._C._VariableFunctions, binding)
    return functools.reduce(getattr, name.split("."), torch.ops)


def require_strides(t, strides):
    """t itself when it has `strides` (size-1 dims ignored), else a copy laid out that way: the
    wrapper's check on a library call whose output layout coil assumed. None (an optional result
    the op did not make) and numbers pass through."""
    if not isinstance(t, torch.Tensor):  # None, or a number in a tuple of results
        return t
    have = t.stride()
    if have == strides:
        return t
    if all(s1 == s2 or n == 1 for s1, s2, n in zip(have, strides, t.shape)):
        return t
    out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


class KernelFailure(RuntimeError):
    """A generated kernel failed to build, load or launch (a Triton compile error, a config the
    GPU cannot run, an error launching it): a compiler bug, never the user's. The graph's call
    (backend.py) catches it and runs that graph's fallback instead."""

    def __init__(self, kernel: str, cause: BaseException):
        super().__init__(f"kernel {kernel} failed: {type(cause).__name__}: {cause}")
        self.kernel = kernel
        self.cause = cause


class IndexOutOfBoundsError(IndexError, RuntimeError):
    """An index tensor named a position outside the tensor it indexes (gather, x[idx], scatter,
    embedding, ...). Both an IndexError and a RuntimeError, as eager raises either, by op."""


def _mm_row_groups(a, b, bias, align: int):
    """a @ b (+ bias) for an [M, K] `a` and a [K, N] `b` whose N is not a multiple of `align`
    elements (16 bytes), written straight into eager's contiguous [M, N] output by products that
    cuBLAS runs with its aligned kernels (lower/extern.cpp, decisions.md "GEMM padding"). Row r of
    the output starts r * N elements in: g = align / gcd(N, align) rows apart, rows start equally
    far from a 16-byte boundary, so the rows r = j, j + g, j + 2g, ... form a matrix whose leading
    dimension g * N is aligned. Its columns from the first aligned address on, a multiple of
    `align` of them, are one aligned product of a's rows j::g; the fewer than `align` columns at
    either end of every row are two small products over all rows, made first. No scratch block,
    no copy and no padded copy of b: the output is the only buffer the op makes (GPT-2's logits:
    one 785 MB tensor). A bias of M rows is sliced with a's rows, one of N columns with b's."""
    m, n = a.shape[0], b.shape[1]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n <= align:
        return _mm_plain(a, b, bias, out)
    per_row = bias is not None and bias.dim() == 2 and bias.shape[0] == m and m > 1
    per_column = bias is not None and bias.dim() >= 1 and bias.shape[-1] == n and n > 1

    def product(rows, columns, into):
        block, cols = a[rows], b[:, columns]
        if bias is None:
            return torch.mm(block, cols, out=into)
        c = bias[rows] if per_row else bias
        c = c[..., columns] if per_column else c
        return torch.addmm(c, block, cols, out=into)

    edge = min(align, n)
    product(slice(None), slice(0, edge), out[:, :edge])
    product(slice(None), slice(n - edge, n), out[:, n - edge:])
    groups = align // math.gcd(n, align)
    for j in range(min(groups, m)):
        skip = -(j * n) % align  # columns before row j's first aligned address
        width = (n - skip) // align * align
        if width == 0:
            continue
        rows = len(range(j, m, groups))
        into = out.as_strided((rows, width), (groups * n, 1), j * n + skip)
        product(slice(j, None, groups), slice(skip, skip + width), into)
    return out


def _mm_plain(a, b, bias, out):
    if bias is None:
        return torch.mm(a, b, out=out)
    return torch.addmm(bias, a, b, out=out)


_library = torch.library.Library("coil", "DEF")
_library.define("mm_row_groups(Tensor a, Tensor b, Tensor? bias, int align) -> Tensor")
_library.impl("mm_row_groups", _mm_row_groups, "CompositeExplicitAutograd")


def _max_pool2d_offsets(x, kernel_size, stride, padding, dilation, ceil_mode):
    """max_pool2d_with_indices whose second result is each window's winning slot (kh * KW + kw,
    int8) rather than its flat input index: what a training graph saves for the backward, 1 byte
    an element instead of 8 (decompositions.py turns the offsets back into indices). coil lowers
    it into its pooling kernel; this ATen version is its fallback and meta function."""
    values, indices = torch.ops.aten.max_pool2d_with_indices(
        x, kernel_size, stride, padding, dilation, ceil_mode)
    width = x.shape[-1]
    oh = torch.arange(indices.shape[-2], device=x.device).view(-1, 1)
    ow = torch.arange(indices.shape[-1], device=x.device).view(1, -1)
    h = torch.div(indices, width, rounding_mode="floor")
    kh = (h - (oh * stride[0] - padding[0])) // dilation[0]
    kw = (indices % width - (ow * stride[1] - padding[1])) // dilation[1]
    return values, (kh * kernel_size[1] + kw).to(torch.int8)


_library.define("max_pool2d_offsets(Tensor self, int[2] kernel_size, int[2] stride, "
                "int[2] padding, int[2] dilation, bool ceil_mode) -> (Tensor, Tensor)")
_library.impl("max_pool2d_offsets", _max_pool2d_offsets, "CompositeExplicitAutograd")


def _max_pool2d_grad(grad, indices, input_size, input_stride, kernel_size, stride, padding,
                     dilation, ceil_mode):
    """max_pool2d_with_indices_backward without its `self` argument, which it reads for the
    sizes and memory format only (given here): as an argument it would keep the pool's input
    alive for the backward. coil lowers it as a gather; this is its fallback and meta function."""
    shape = torch.empty_strided(input_size, input_stride, dtype=grad.dtype, device=grad.device)
    return torch.ops.aten.max_pool2d_with_indices_backward(
        grad, shape, kernel_size, stride, padding, dilation, ceil_mode, indices)


_library.define("max_pool2d_grad(Tensor grad_output, Tensor indices, SymInt[] input_size, "
                "SymInt[] input_stride, int[2] kernel_size, int[2] stride, int[2] padding, "
                "int[2] dilation, bool ceil_mode) -> Tensor")
_library.impl("max_pool2d_grad", _max_pool2d_grad, "CompositeExplicitAutograd")


_index_errors: dict = {}  # device -> (its index error buffer, the buffer's ok slot)


def index_error_buffer(device: str) -> torch.Tensor:
    """A GPU's report of a bad indirect index: (flag, index, size, ok), which Triton kernels write
    only for a bad index (coil_index). One per device for the process, never cleared: the
    device-side assert that reports it ends the CUDA context, as eager's does. Allocated once,
    it costs a graph's call nothing (a buffer allocated and filled per call cost small index
    programs about 10 us each, H200 2026-12-05)."""
    entry = _index_errors.get(device)
    if entry is None:
        buf = torch.tensor([0, 0, 0, 1], dtype=torch.int64, device=device)
        entry = _index_errors[device] = _index_errors[str(buf.device)] = (buf, buf[3])
    return entry[0]


def check_indices(error: torch.Tensor) -> None:
    """Raises for a bad indirect index a kernel reported in `error` (flag, index, size[, ok]). On
    the CPU the kernels have finished, so this reads the flag; on a GPU it asserts the ok slot on
    the device (one launch) instead of waiting for it: the error then surfaces at the next
    synchronization, as eager's does."""
    if error.device.type != "cpu":
        entry = _index_errors.get(str(error.device))
        ok = entry[1] if entry is not None and entry[0] is error else error[3]
        torch._assert_async(ok, "coil: an index is out of bounds")
        return
    flag, index, size = error.tolist()[:3]
    if flag:
        raise IndexOutOfBoundsError(
            f"index {index} is out of bounds for dimension with size {size}"
        )


@functools.cache
def aten_header_flags() -> tuple:
    """Compiler flags for kernel files that include ATen's scalar math (<ATen/native/Math.h>):
    coil's defaults, torch's include directories, and torch's version, so that the build cache
    never reuses a kernel built against another torch's headers at the same path."""
    from torch.utils.cpp_extension import include_paths

    flags = list(_C.default_kernel_flags())
    flags += [f"-I{path}" for path in include_paths()]
    flags.append(f"-DCOIL_TORCH_VERSION={torch.__version__}")
    return tuple(flags)


# A kernel file with one vector loop of each kind of call vector kernels make (SLEEF through
# torch's library, at::vec's own polynomials, 16-bit conversions): built once per machine (the
# build cache keeps it) to learn whether vector kernels build here at all.
_VEC_PROBE = """
extern "C" void coil_vec_probe(float* p, const void* h, int64_t n) {
  VecF v = VecF::loadu(p, n);
  (v.tanh() + v.exp_u20() + v.erf() + coil_vload_half<c10::BFloat16>(h, n)).store(p, n);
}
"""


def _vec_base_flags() -> list:
    cap = torch.backends.cpu.get_cpu_capability()
    flags = list(aten_header_flags())
    if cap in ("AVX512", "AVX2"):
        flags += [f"-DCPU_CAPABILITY={cap}", f"-DCPU_CAPABILITY_{cap}"]
    else:
        flags += ["-DCPU_CAPABILITY=DEFAULT"]
    return flags + _torch_library_flags()


_vec_lock = threading.Lock()
_vec_warmer: threading.Thread | None = None


def vec_flags() -> tuple | None:
    """_vec_flags, found once per process; a caller while another thread finds them (the
    warm-up of prepare_vec_flags) waits for that one's answer."""
    with _vec_lock:
        return _vec_flags()


def prepare_vec_flags() -> None:
    """Finds vec_flags on a daemon thread, once per process: the first time in a cache that
    precompiles at::vec's headers (about 4 s) and later checks the 100 MB header, while Dynamo
    and AOTAutograd trace the graph whose kernels will need it (the compiler runs without the
    GIL). The backend calls it on its first CPU graph."""
    global _vec_warmer
    if _vec_warmer is not None:
        return

    _vec_warmer = threading.Thread(target=lambda: _quietly(vec_flags), name="coil-vec-flags",
                                   daemon=True)
    _vec_warmer.start()
    # A process that exits first waits for it: a daemon thread killed mid-build would leave the
    # compiler's 100 MB temporary header in the cache.
    atexit.register(_vec_warmer.join)


@functools.cache
def _vec_flags() -> tuple | None:
    """Compiler flags for kernel files with vector loops (ATen's at::vec, prelude.h kVecPrelude):
    torch's headers, at::vec built for the CPU capability torch dispatches its own kernels to
    (AVX512, AVX2, or the portable DEFAULT), and torch's CPU library, whose SLEEF math functions
    the vectors call; gold links them where it can (it reads libtorch_cpu's symbols in a third of
    ld.bfd's time). None where no vector kernel builds (a compiler without the libraries torch's
    need, headers that do not parse): C++ kernels are then scalar (backend.py warns once)."""
    base = _vec_base_flags()
    candidates = ([base + ["-fuse-ld=gold"]] if shutil.which("ld.gold") else []) + [base]
    source = _C.CPP_PRELUDE + _C.VEC_PRELUDE + _VEC_PROBE
    opts = config.options
    for flags in candidates:
        try:
            _C.build_shared_library(source, cache_dir=opts.cache_dir, compiler=opts.compiler,
                                    flags=flags, precompiled_header=_C.VEC_HEADERS)
        except RuntimeError:
            continue
        return tuple(flags)
    return None


def _torch_library_flags() -> list:
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    return [f"-L{lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}"]


_shim_lock = threading.Lock()


@functools.cache
def _aten_shim():
    """The library of coil's ATen shim (runtime/aten_shim.h) that graphs with a C++ wrapper run
    on: built from coil._C.ATEN_SHIM_SOURCE against this torch, once per build cache (about 8 s;
    the cache keys it by torch's version and headers)."""
    opts = config.options
    flags = list(aten_header_flags()) + _torch_library_flags()
    built = _C.build_shared_library(_C.ATEN_SHIM_SOURCE, cache_dir=opts.cache_dir,
                                    compiler=opts.compiler, flags=flags)
    return _C.KernelLibrary(built["so_path"])


def aten_shim():
    """_aten_shim, built once per process (callers on other threads wait for the first)."""
    with _shim_lock:
        return _aten_shim()


_shim_warmer: threading.Thread | None = None


def prepare_aten_shim() -> None:
    """Builds (or finds) the ATen shim on a daemon thread, once per process, while a graph is
    still being traced: the backend calls it for CPU graphs when C++ wrappers are on."""
    global _shim_warmer
    if _shim_warmer is not None:
        return
    _shim_warmer = threading.Thread(target=lambda: _quietly(aten_shim), name="coil-aten-shim",
                                    daemon=True)
    _shim_warmer.start()
    atexit.register(_shim_warmer.join)  # not killed mid-build, leaving a temporary file


def _quietly(fn) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001  (the compile's own call does it again and reports)
        pass


def load_cpp(source: str, aten_headers: bool = False, vec: bool = False):
    """Builds (or finds in the cache) the shared library for `source` and loads it.
    aten_headers: the source includes ATen's headers (kernels calling its special functions).
    vec: the source has vector loops (at::vec). A C++ wrapper in it needs no flag of its own."""
    return _C.KernelLibrary(build_cpp(source, aten_headers, vec))


def build_cpp(source: str, aten_headers: bool = False, vec: bool = False) -> str:
    """load_cpp's build: the path of the shared library for `source` in the build cache."""
    opts = config.options
    # A C++ wrapper needs no flags of its own: it includes only coil's ATen shim.
    flags = ((vec_flags() or _vec_base_flags()) if vec
             else aten_header_flags() if aten_headers else None)
    built = _C.build_shared_library(
        source,
        cache_dir=opts.cache_dir,
        compiler=opts.compiler,
        flags=list(flags) if flags else None,
        inject_build_failure=opts.inject_build_failure,
        # at::vec's headers take a second to parse: precompiled once, in the cache.
        precompiled_header=_C.VEC_HEADERS if vec else "",
    )
    if "perf" in opts.logs:
        state = "cache hit" if built["cache_hit"] else f"built in {built['seconds']:.2f} s"
        print(f"[coil] kernels: {built['so_path']} ({state})", file=sys.stderr)
    return built["so_path"]


_to_handles = torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors
_from_handles = torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs


def GraphEntry(lib, tensors: list, scalars: list, outputs: int):
    """call(args) of a graph whose wrapper is C++ (runtime/graph_abi.h), as one C++ function
    (_C.GraphCall): the tensor inputs cross as AtenTensorHandles (new references the graph
    releases after their last use), the int inputs as int64s, and the outputs come back as
    handles, stolen into tensors. args is cleared, as the Python wrappers' call clears it."""
    return _C.GraphCall(lib.graph_run(aten_shim()), tensors, scalars, outputs, _to_handles,
                        _from_handles, IndexOutOfBoundsError)


def load_module(source: str, name: str, path: str | None = None) -> types.ModuleType:
    """Executes a generated output_code.py source as a module."""
    module = types.ModuleType(name)
    module.__file__ = path or f"<coil {name}>"
    # Triton's @triton.jit reads each kernel's source through inspect/linecache: register the text
    # so that works without a file on disk.
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
    code = compile(source, module.__file__, "exec")
    exec(code, module.__dict__)
    return module
