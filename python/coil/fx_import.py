"""Walks an FX graph once and writes it in coil's graph JSON (see cpp/coil/graph/serialize.h),
which the C++ graph builder reads. No decisions are made here: only translation."""

from __future__ import annotations

import json
import math
import operator

import torch
import torch.fx

_DTYPES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    # Opaque to coil: only ATen ops (fallbacks) make and read tensors of these.
    torch.complex64: "complex64",
    torch.complex128: "complex128",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
}


_EMPTY_META = {"dtype": "float32", "device": "cpu", "sizes": [0], "strides": [1], "offset": 0}


class UnsupportedGraph(Exception):
    """The graph holds something coil cannot represent (the graph then runs eagerly)."""


def _int(v, what: str) -> int:
    if isinstance(v, torch.SymInt):
        raise UnsupportedGraph(f"symbolic size in {what} (dynamic shapes are not supported yet)")
    return int(v)


def tensor_meta(t: torch.Tensor, what: str) -> dict:
    if t.dtype not in _DTYPES:
        raise UnsupportedGraph(f"dtype {t.dtype} of {what}")
    if t.layout != torch.strided:
        raise UnsupportedGraph(f"layout {t.layout} of {what}")
    return {
        "dtype": _DTYPES[t.dtype],
        "device": str(t.device),
        "sizes": [_int(s, what) for s in t.shape],
        "strides": [_int(s, what) for s in t.stride()],
        "offset": _int(t.storage_offset(), what),
    }


def _metas(val, what: str) -> list:
    if isinstance(val, torch.Tensor):
        return [tensor_meta(val, what)]
    if isinstance(val, (tuple, list)):
        # Non-tensor elements (attention kernels return seeds and sizes next to tensors) keep
        # their tuple position as an empty float tensor; only a fallback op produces such tuples,
        # and coil never reuses a fallback's outputs.
        return [tensor_meta(v, what) if isinstance(v, torch.Tensor) else dict(_EMPTY_META) for v in val]
    return []


def _arg(a, what: str):
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None:
        return None
    if isinstance(a, bool):
        return {"bool": a}
    if isinstance(a, int):
        return {"int": a}
    if isinstance(a, float):
        if math.isnan(a):
            return {"float": "nan"}
        if math.isinf(a):
            return {"float": "inf" if a > 0 else "-inf"}
        return {"float": a}
    if isinstance(a, str):
        return {"str": a}
    if isinstance(a, torch.dtype):
        if a not in _DTYPES:
            raise UnsupportedGraph(f"dtype {a} in {what}")
        return {"dtype": _DTYPES[a]}
    if isinstance(a, torch.device):
        return {"enum": f"device:{a}"}
    if isinstance(a, (torch.layout, torch.memory_format)):
        return {"enum": str(a)}
    if isinstance(a, (list, tuple)):
        return {"list": [_arg(x, what) for x in a]}
    if isinstance(a, torch.SymInt):
        raise UnsupportedGraph(f"symbolic integer in {what}")
    raise UnsupportedGraph(f"argument of type {type(a).__name__} in {what}")


def _target(node: torch.fx.Node) -> str:
    t = node.target
    if t is operator.getitem:
        return "getitem"
    if isinstance(t, torch._ops.OpOverload):
        return str(t)  # "aten.add.Tensor"
    raise UnsupportedGraph(f"call to {t} in node {node.name}")


def _placeholder_meta(node: torch.fx.Node, example) -> tuple[list, str]:
    val = node.meta.get("val", example)
    if isinstance(val, torch.Tensor):
        return [tensor_meta(val, node.name)], ""
    if isinstance(val, bool) or val is None:
        raise UnsupportedGraph(f"input {node.name} is not a tensor")
    if isinstance(val, int):
        return [], "int"
    if isinstance(val, float):
        return [], "float"
    raise UnsupportedGraph(f"input {node.name} of type {type(val).__name__}")


def graph_to_dict(gm: torch.fx.GraphModule, example_inputs) -> dict:
    nodes = []
    placeholder_index = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            example = example_inputs[placeholder_index] if placeholder_index < len(example_inputs) else None
            placeholder_index += 1
            meta, scalar = _placeholder_meta(node, example)
            nodes.append({"name": node.name, "kind": "placeholder", "meta": meta, "scalar_type": scalar})
        elif node.op == "call_function":
            target = _target(node)
            nodes.append(
                {
                    "name": node.name,
                    "kind": "call",
                    "target": target,
                    "args": [_arg(a, node.name) for a in node.args],
                    "kwargs": {k: _arg(v, node.name) for k, v in node.kwargs.items()},
                    "meta": _metas(node.meta.get("val"), node.name),
                    "stack_trace": node.meta.get("stack_trace") or "",
                }
            )
        elif node.op == "output":
            outs = node.args[0]
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            nodes.append({"name": node.name, "kind": "output", "args": [_arg(a, "output") for a in outs]})
        else:
            raise UnsupportedGraph(f"FX node kind {node.op} ({node.name})")
    return {"format": "coil.graph", "version": 1, "nodes": nodes}


def graph_to_json(gm: torch.fx.GraphModule, example_inputs) -> str:
    return json.dumps(graph_to_dict(gm, example_inputs))
