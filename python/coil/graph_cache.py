"""The warm-start graph cache: a process that compiles a graph an earlier process compiled skips
AOTAutograd's trace and coil's FX import, and goes straight from Dynamo's graph to coil's cached
graph (whose kernels are then build-cache hits).

AOTAutograd's trace of an inference graph (fake tensors, functionalization, decompositions) is
most of what a warm start costs once coil's own work is cached: GPT-2 small spends over a second
in it. Inductor skips it through AOTAutograd's cache, which serves only Inductor's own compiled
artifacts. This cache keeps what coil makes of the trace, coil's graph JSON, keyed by everything
the trace depends on:
- Dynamo's graph (its generated code) and, per input, sizes, strides, storage offset, dtype,
  device, requires_grad, and which inputs share storage;
- the ambient state AOTAutograd traces under: grad mode, autocast, the default dtype,
  deterministic algorithms;
- coil's options, coil's Python sources (its decompositions and FX import), and the versions of
  torch and Triton.

Only graphs for which AOTAutograd's runtime wrapper does nothing are cached, so that the cached
call is the whole of what AOTAutograd would return: inference graphs (no input requires grad
under grad mode) of plain tensors with static sizes, no parameters or constants held by the graph
module, and, as the trace found (checked before writing an entry), no input mutation, no output
that aliases an input or another output, no effect tokens, no random-number functionalization.
Anything else compiles as before. An unreadable or corrupt entry is a miss (and is rewritten); an
entry whose compile fails is removed and the graph compiles the ordinary way.

Entries live under <cache_dir>/graphs/. Option graph_cache=False turns the cache off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

import torch

_VERSION = 1  # of the entry format and of the eligibility rules


@functools.lru_cache(maxsize=1)
def _coil_sources_hash() -> str:
    """coil's Python sources: its decompositions, partitioner and FX import shape the graph."""
    h = hashlib.sha256()
    root = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


def _versions() -> str:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "-"
    return f"torch {torch.__version__} triton {triton_version} coil {_coil_sources_hash()}"


def _ambient() -> str:
    parts = [
        f"grad={torch.is_grad_enabled()}",
        f"default_dtype={torch.get_default_dtype()}",
        f"deterministic={torch.are_deterministic_algorithms_enabled()}",
    ]
    for device in ("cpu", "cuda"):
        try:
            parts.append(f"autocast_{device}={torch.is_autocast_enabled(device)}:"
                         f"{torch.get_autocast_dtype(device)}")
        except (AttributeError, RuntimeError, TypeError):
            parts.append(f"autocast_{device}=?")
    return " ".join(parts)


def _options_text(opts) -> str:
    import dataclasses

    skip = {"debug_dir", "logs", "cache_dir"}
    return repr({k: v for k, v in dataclasses.asdict(opts).items() if k not in skip})


def key_for(gm: torch.fx.GraphModule, example_inputs, opts) -> str | None:
    """The entry's key, or None when the graph is not one this cache serves."""
    if not getattr(opts, "graph_cache", True) or opts.cudagraphs:
        return None
    if any(n.op in ("get_attr", "call_module") for n in gm.graph.nodes):
        return None
    if next(iter(gm.parameters()), None) is not None or next(iter(gm.buffers()), None) is not None:
        return None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    grad = torch.is_grad_enabled()
    rows, storages = [], {}
    for t in example_inputs:
        if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.layout != torch.strided:
            return None
        if grad and t.requires_grad:
            return None  # a training graph: AOTAutograd's joint trace and runtime wrapper
        sizes, strides = tuple(t.shape), tuple(t.stride())
        if not all(type(s) is int for s in (*sizes, *strides)):
            return None  # symbolic sizes: not served (and not specialized by looking at them)
        ptr = (t.device, t.untyped_storage().data_ptr())
        shares = storages.setdefault(ptr, len(storages))
        rows.append(f"{sizes} {strides} {t.storage_offset()} {t.dtype} {t.device} "
                    f"{t.requires_grad} storage{shares}")
    h = hashlib.sha256()
    for part in (f"v{_VERSION}", _versions(), _ambient(), _options_text(opts), gm.code, *rows):
        h.update(part.encode() + b"\n")
    return h.hexdigest()


def _path(opts, key: str) -> str:
    return os.path.join(opts.cache_dir, "graphs", key + ".json")


def load(opts, key: str) -> str | None:
    """The cached graph JSON, or None (a miss; an unreadable entry is one too)."""
    try:
        with open(_path(opts, key)) as f:
            entry = json.load(f)
        if entry.get("version") != _VERSION or entry.get("key") != key:
            return None
        graph = entry["graph"]
        if hashlib.sha256(graph.encode()).hexdigest() != entry["sha256"]:
            return None
        return graph
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove(opts, key: str) -> None:
    try:
        os.remove(_path(opts, key))
    except OSError:
        pass


def trace_is_plain(num_inputs: int, graph_inputs: int) -> bool:
    """Whether AOTAutograd's runtime wrapper adds nothing to the compiled call of the graph being
    traced now: every input of the traced graph is one of Dynamo's, and its metadata shows no
    mutation, aliasing, token or random-number state to restore."""
    if graph_inputs != num_inputs:
        return False
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    if meta is None:
        return False
    try:
        from torch._functorch._aot_autograd.schemas import OutputType

        if any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
            return False
        if any(o.output_type != OutputType.non_alias for o in meta.output_info):
            return False
        if meta.num_intermediate_bases or getattr(meta, "tokens", None):
            return False
        if getattr(meta, "is_rng_op_functionalized", False):
            return False
        from torch._functorch._aot_autograd import schemas

        subclass = getattr(schemas, "SubclassCreationMeta", ())
        for m in (*(getattr(meta, "subclass_inp_meta", None) or ()),
                  *(getattr(meta, "subclass_fw_graph_out_meta", None) or ())):
            if subclass and isinstance(m, subclass):
                return False
    except Exception:  # noqa: BLE001 - an unfamiliar AOTAutograd: do not cache
        return False
    return True


def store(opts, key: str, graph_json: str) -> None:
    """Writes an entry (atomically: a reader sees the old entry, none, or this one)."""
    if '"target": "opaque.' in graph_json:
        return  # its opaque calls are registered by the import a cached entry skips
    path = _path(opts, key)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        entry = {"version": _VERSION, "key": key, "graph": graph_json,
                 "sha256": hashlib.sha256(graph_json.encode()).hexdigest()}
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache folder: nothing is cached
