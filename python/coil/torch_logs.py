"""coil in PyTorch's own logging: what coil made of each graph shows under TORCH_LOGS and in a
TORCH_TRACE folder (read with tlparse), beside Dynamo's and AOTAutograd's logs.

TORCH_LOGS names (torch's, except `coil`, which coil registers as a log when it is imported):
  coil / +coil    INFO: one line per graph (its kernels, extern calls, ATen fallbacks, phase
                  times) and each graph coil runs eagerly, with why; +coil (DEBUG) adds the graph
                  coil received, its fusion verdicts and its schedule
  graph_code      the ATen graph coil received (graph.txt), after Dynamo's own graph code
  output_code     the program coil generated, with its kernels' source (output_code.py)
  kernel_code     each kernel's source, one record per kernel
  ir_pre_fusion, ir_post_fusion, fusion, schedule: coil's loop IR, its fusion verdicts (every
                  pair of kernels considered) and its schedule (loops, memory plan)
  perf_hints      ATen fallback ops, a C++ wrapper that could not be used, and why
  graph_breaks    graphs coil runs eagerly (Dynamo's graph breaks are Dynamo's own records)
  recompiles      which coil graph a Dynamo recompile made, with Dynamo's reason

TORCH_TRACE=folder: each compiled graph adds structured-trace artifacts named
coil_<kind>_<graph id>_<what> (what: graph, ir_pre_fusion, ir_post_fusion, fusion, schedule,
output_code (with the kernels), provenance, compile), in the compile (Dynamo's frame and compile id) that
made the graph; `tlparse folder` shows them with Dynamo's. `compile` is a JSON summary: kernels,
extern calls, fallback ops, phase times in seconds; a graph coil runs eagerly adds
coil_<kind>_<graph id>_eager with the reason.

Only torch._logging's public functions and its registry (stable since torch 2.1) are used; a
torch without one of them gets coil's COIL_LOGS output only. No compiler decision is made here:
everything logged comes from the C++ compile's result (its artifacts) and the graph's record.
"""

from __future__ import annotations

import json
import logging

import torch

log = logging.getLogger("coil")

# TORCH_LOGS artifact name -> the compile artifacts it prints (torch registers every one of
# these names for Inductor; coil logs its own under them).
_ARTIFACT_FILES = {
    "graph_code": ("graph.txt",),
    "ir_pre_fusion": ("ir_pre_fusion.txt",),
    "ir_post_fusion": ("ir_post_fusion.txt",),
    "fusion": ("fusion.txt",),
    "schedule": ("schedule.txt",),
    "output_code": ("output_code.py",),  # (the kernels' and a C++ wrapper's source inside)
}
# What +coil (the coil log at DEBUG) prints when the artifact itself is not named.
_DEBUG_FILES = ("fusion.txt", "schedule.txt")
# Structured-trace artifacts: name suffix -> (file, encoding).
_TRACE_FILES = {
    "graph": ("graph.txt", "string"),
    "ir_pre_fusion": ("ir_pre_fusion.txt", "string"),
    "ir_post_fusion": ("ir_post_fusion.txt", "string"),
    "fusion": ("fusion.txt", "string"),
    "schedule": ("schedule.txt", "string"),
    "output_code": ("output_code.py", "string"),
    "provenance": ("provenance.json", "json"),
}

_loggers: dict[str, logging.Logger] = {}


def register() -> None:
    """Makes `coil` a TORCH_LOGS log name (torch.compile's own logs get theirs at torch's import,
    coil's when coil is imported) and gives its logger torch's handlers."""
    internal = getattr(torch._logging, "_internal", None)
    registry = getattr(internal, "log_registry", None)
    if registry is None or not hasattr(internal, "register_log"):
        return
    if registry.is_log("coil"):
        return  # TORCH_LOGS named the coil module itself, or coil was imported before
    internal.register_log("coil", "coil")
    # torch sets up the handlers of every registered log in _init_logs. While torch itself is
    # being imported (TORCH_LOGS="+coil" imports coil to find the module), its own _init_logs
    # is the caller and does that next; calling it again here would double every handler.
    if getattr(internal, "LOG_TRACE_HANDLER", None) is not None:
        torch._logging._init_logs()


def _artifact_log(name: str) -> logging.Logger | None:
    """coil's logger for a torch artifact name (coil.__<name>), or None on a torch without it."""
    if name not in _loggers:
        try:
            _loggers[name] = torch._logging.getArtifactLogger("coil", name)
        except (ValueError, AttributeError):  # an artifact this torch does not register
            _loggers[name] = None
    return _loggers[name]


def _named(name: str) -> bool:
    """Whether TORCH_LOGS (or torch._logging.set_logs) named this artifact."""
    state = getattr(getattr(torch._logging, "_internal", None), "log_state", None)
    return bool(state is not None and state.is_artifact_enabled(name))


def _artifact(name: str, text: str, *args) -> None:
    logger = _artifact_log(name)
    if logger is not None:
        logger.debug(text, *args)


def _trace(name: str, payload, encoding: str = "string") -> None:
    """One structured-trace artifact (TORCH_TRACE); costs nothing when no trace is written."""
    try:
        torch._logging.trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": name, "encoding": encoding},
            payload_fn=lambda: payload,
        )
    except Exception:  # noqa: BLE001 - a trace must never stop a compile
        log.debug("coil: structured trace artifact %s not written", name, exc_info=True)


def _where(record) -> str:
    what = f"graph {record.graph_id} ({record.kind}"
    what += f", Dynamo {record.compile_id}" if record.compile_id else ""
    what += f", {record.frame}" if record.frame else ""
    return what + ")"


def _times(seconds: dict) -> str:
    return ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in seconds.items())


def summary(record) -> dict:
    """The JSON summary of one compiled graph (the coil_<kind>_<id>_compile trace artifact)."""
    return {
        "graph_id": record.graph_id,
        "kind": record.kind,
        "compile_id": record.compile_id,
        "frame": record.frame,
        "backend": record.backend,
        "wrapper": record.wrapper,
        "kernels": list(record.kernel_names),
        "extern_ops": list(record.extern_ops),
        "fallback_ops": list(record.fallback_ops),
        "dynamic": record.dynamic,
        "symbols": list(record.symbols),
        "layout": record.layout,
        "recompile_reason": record.recompile_reason,
        "seconds": dict(record.seconds),
        "debug_dir": record.debug_dir,
    }


def graph_compiled(record, artifacts: dict) -> None:
    """Logs one graph coil compiled: TORCH_LOGS records and TORCH_TRACE artifacts."""
    where = _where(record)
    externs = ", ".join(record.extern_ops) or "none"
    fallbacks = ", ".join(record.fallback_ops) or "none"
    kernels = ", ".join(record.kernel_names) or "none"
    log.info("coil %s: kernels: %s; extern calls: %s; ATen fallbacks: %s; %s", where, kernels,
             externs, fallbacks, _times(record.seconds))
    for name, files in _ARTIFACT_FILES.items():
        for f in files:
            if f in artifacts:
                _artifact(name, "coil %s %s:\n%s", where, f, artifacts[f])
    for kernel in record.kernel_names:
        for ext in (".cpp", ".py"):
            if kernel + ext in artifacts:
                _artifact("kernel_code", "coil %s kernel %s:\n%s", where, kernel,
                          artifacts[kernel + ext])
    if log.isEnabledFor(logging.DEBUG):
        for f in _DEBUG_FILES:
            if f in artifacts and not _named(f.split(".")[0]):
                log.debug("coil %s %s:\n%s", where, f, artifacts[f])
    for op in record.fallback_ops:
        _artifact("perf_hints", "coil %s: %s runs as an ATen fallback (coil does not lower it)",
                  where, op)
    if record.cpp_wrapper_blocker:
        _artifact("perf_hints", "coil %s: no C++ wrapper (%s)", where, record.cpp_wrapper_blocker)
    if record.recompile_reason:
        _artifact("recompiles", "coil %s compiled for Dynamo's recompile: %s", where,
                  record.recompile_reason)
    prefix = f"coil_{record.kind}_{record.graph_id}"
    for what, (f, encoding) in _TRACE_FILES.items():
        if f in artifacts:
            _trace(f"{prefix}_{what}", artifacts[f], encoding)
    _trace(f"{prefix}_compile", json.dumps(summary(record)), "json")


def graph_eager(record, why: str) -> None:
    """Logs a graph coil runs eagerly (its CoilWarning says the same)."""
    where = _where(record)
    log.info("coil %s runs eagerly: %s", where, why)
    _artifact("graph_breaks", "coil %s runs eagerly (not coil's kernels): %s", where, why)
    payload = {"graph_id": record.graph_id, "kind": record.kind, "reason": why,
               "compile_id": record.compile_id, "frame": record.frame}
    _trace(f"coil_{record.kind}_{record.graph_id}_eager", json.dumps(payload), "json")
