"""Loading what the compiler generated: kernel libraries (through the C++ build cache) and the
wrapper module of each graph."""

from __future__ import annotations

import linecache
import sys
import types

import torch

from coil import _C, config


class IndexOutOfBoundsError(IndexError, RuntimeError):
    """An index tensor named a position outside the tensor it indexes (gather, x[idx], scatter,
    embedding, ...). Both an IndexError and a RuntimeError, as eager raises either, by op."""


def check_indices(error: torch.Tensor) -> None:
    """Raises for a bad indirect index a kernel reported in `error` (flag, index, size). On the CPU
    the kernels have finished, so this reads the flag; on a GPU it asserts on the device instead of
    waiting for it (the error then surfaces at the next synchronization, as eager's does)."""
    if error.device.type != "cpu":
        torch._assert_async(error[0] == 0, "coil: an index is out of bounds")
        return
    flag, index, size = error.tolist()
    if flag:
        raise IndexOutOfBoundsError(
            f"index {index} is out of bounds for dimension with size {size}"
        )


def load_cpp(source: str):
    """Builds (or finds in the cache) the shared library for `source` and loads it."""
    opts = config.options
    built = _C.build_shared_library(
        source,
        cache_dir=opts.cache_dir,
        compiler=opts.compiler,
        inject_build_failure=opts.inject_build_failure,
    )
    if "perf" in opts.logs:
        state = "cache hit" if built["cache_hit"] else f"built in {built['seconds']:.2f} s"
        print(f"[coil] kernels: {built['so_path']} ({state})", file=sys.stderr)
    return _C.KernelLibrary(built["so_path"])


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
