"""Memory checks for coil's Triton kernels under Triton's interpreter (TRITON_INTERPRET=1).

A GPU kernel that loads or stores outside its buffers faults only when the address leaves the
allocator's mapped memory, which depends on the allocation's place in its segment and on the
launch config the autotuner picked (timm's cait_xxs24_224, efficientvit_b0 and halonet_h1 faulted
on an H100 only when other models ran beside them, 2026-12-05). Under the interpreter every lane's
address is a host address, so each masked load, store and atomic can be checked against the
storages of the launch's tensor arguments: an access outside all of them raises OutOfBounds, naming
the kernel, the operation and the address, whatever the data.

    from coil import triton_interp_check
    triton_interp_check.enable(config=1)   # check accesses; run each kernel's second config
    triton_interp_check.enable(tuning=True)  # and each first launch's tuning run on copies

`config` picks which of a kernel's candidate configs the interpreter runs (modulo their count;
on a GPU the fastest is chosen, so every one must be right). Tests enable it for the whole
interpreter suite (tests/python/conftest.py).
"""

from __future__ import annotations

import numpy as np

_state = {"enabled": False, "config": 0, "tuning": False, "ranges": None, "kernel": None}


class OutOfBounds(RuntimeError):
    """A kernel lane read or wrote memory outside every tensor argument of its launch."""


def config_index() -> int:
    """Which candidate config the interpreter runs (coil.triton_launcher asks)."""
    return _state["config"]


def tuning_runs() -> bool:
    """Whether a kernel's first launch at new sizes first runs once as the GPU's tuner runs it,
    on copies of the tensors it writes (coil.triton_launcher.scratch_args)."""
    return _state["tuning"]


def enabled() -> bool:
    return _state["enabled"]


def enable(config: int = 0, tuning: bool = False) -> None:
    """Check every access of every kernel launched under the interpreter from now on; run the
    config-th candidate config of each kernel; with tuning, also its tuning launch."""
    _state["config"] = int(config)
    _state["tuning"] = bool(tuning)
    if _state["enabled"]:
        return
    from triton.runtime import interpreter

    executor_call = interpreter.GridExecutor.__call__
    builder = interpreter.InterpreterBuilder

    def call(self, *args, **kwargs):
        outer = _state["ranges"], _state["kernel"]
        _state["ranges"] = _ranges(list(args) + list(kwargs.values()))
        _state["kernel"] = getattr(self.fn, "__name__", "kernel")
        try:
            return executor_call(self, *args, **kwargs)
        finally:
            _state["ranges"], _state["kernel"] = outer

    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def masked_load(self, ptrs, mask, other, *rest):
        _check("load", ptrs, mask)
        return load(self, ptrs, mask, other, *rest)

    def masked_store(self, ptrs, value, mask, *rest):
        _check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    def atomic_rmw(self, op, ptr, val, mask, *rest):
        _check("atomic", ptr, mask)
        return rmw(self, op, ptr, val, mask, *rest)

    def atomic_cas(self, ptr, cmp, val, *rest):
        _check("atomic_cas", ptr, None)
        return cas(self, ptr, cmp, val, *rest)

    interpreter.GridExecutor.__call__ = call
    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    builder.create_atomic_rmw = atomic_rmw
    builder.create_atomic_cas = atomic_cas
    _state["enabled"] = True


def _ranges(args) -> list[tuple[int, int]]:
    """[start, end) byte ranges of the storages of the tensors among args (tuples searched)."""
    out = []
    for a in args:
        if isinstance(a, (tuple, list)):
            out += _ranges(a)
        elif hasattr(a, "untyped_storage"):
            s = a.untyped_storage()
            out.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return out


def _check(kind: str, ptrs, mask) -> None:
    ranges = _state["ranges"]
    if ranges is None:
        return
    addr = np.asarray(ptrs.data).astype(np.uint64)
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)
        addr = addr[m]
    else:
        addr = addr.reshape(-1)
    if addr.size == 0:
        return
    width = max(ptrs.get_element_ty().primitive_bitwidth // 8, 1)
    inside = np.zeros(addr.shape, dtype=bool)
    for lo, hi in ranges:
        inside |= (addr >= np.uint64(lo)) & (addr + np.uint64(width) <= np.uint64(hi))
    if inside.all():
        return
    bad = addr[~inside]
    first = int(bad[0])
    near = min(ranges, key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
    raise OutOfBounds(
        f"{_state['kernel']}: {kind} of {bad.size} lane(s) outside every tensor argument; first "
        f"at byte {first - near[0]} of the nearest argument's storage of {near[1] - near[0]} bytes "
        f"(config {_state['config']})")
