"""Memory of one call or training step, per backend: the peak of memory allocated above what was
allocated when the step started, and (training steps) the tensors the forward saved for the
backward.

Peak: on CUDA, torch.cuda.max_memory_allocated() after reset_peak_memory_stats(), less the memory
allocated at the start. On the CPU, which keeps no allocation statistics, the step runs once under
torch.profiler with profile_memory=True, and the peak is the most memory the step's own
allocations held at once (the highest running sum of the allocations it records and the frees of
those same blocks; a free of memory allocated before the step, such as the previous step's
gradients under zero_grad(set_to_none=True), is not subtracted). The same measure for every
backend, so the figures compare.

Saved tensors: the step runs under torch.autograd.graph.saved_tensors_hooks, whose pack hook sees
every tensor autograd keeps for the backward (eager's autograd nodes, AOTAutograd's
save_for_backward); counted once per storage, parameters' storages excluded."""

from __future__ import annotations

import json
import os
import tempfile

import torch


def peak_bytes(step, device: str) -> int:
    """Bytes allocated at the step's peak above what was allocated when it started."""
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    # Device Type 0: the CPU allocator's. The profiler tracks addresses across sessions (and a
    # free of a block allocated before any session would be charged a stale size): only frees of
    # blocks this step allocated count.
    memory = [e for e in events if e.get("name") == "[memory]"]
    memory = sorted((e for e in memory if e["args"].get("Device Type", 0) == 0),
                    key=lambda e: e["ts"])
    live: dict[int, int] = {}
    running = peak = 0
    for e in memory:
        nbytes, addr = e["args"]["Bytes"], e["args"].get("Addr")
        if nbytes > 0:
            live[addr] = live.get(addr, 0) + nbytes
            running += nbytes
        elif addr in live:
            running -= live.pop(addr)
        peak = max(peak, running)
    return peak


def saved_tensors(step, module) -> dict:
    """{"count", "bytes"} of the distinct storages a training step saves for its backward,
    parameters excluded."""
    params = set()
    if isinstance(module, torch.nn.Module):
        params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in params and ptr not in seen:
                seen[ptr] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return {"count": len(seen), "bytes": sum(seen.values())}


def measure(step, module, device: str, train: bool) -> dict:
    """What the benchmark records per backend: peak_mb, and for training steps saved_count and
    saved_mb."""
    out = {"peak_mb": peak_bytes(step, device) / 2**20}
    if train:
        saved = saved_tensors(step, module)
        out["saved_count"] = saved["count"]
        out["saved_mb"] = saved["bytes"] / 2**20
    return out
