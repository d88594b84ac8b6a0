"""Walks an FX graph once and writes it in coil's graph JSON (see cpp/coil/graph/serialize.h),
which the C++ graph builder reads. No decisions are made here: only translation.

Besides ATen calls, graphs hold: effectful ops threaded by effect tokens (`with_effects`, kept as
such: coil runs the op in order), Python numbers read from tensors (`.item()`: a call with a
scalar_type and no tensor metadata) and Python functions of them (`operator.ge`, `torch.sym_ite`).

Tensor constants (get_attr nodes: AOTAutograd keeps `torch.tensor([1, 2])` written inside the
compiled code, and the masked reductions' identity values, as attributes of the graph module)
are imported two ways:
  - a constant of one element made while tracing becomes `aten.full` of its value: the value is
    then part of the graph (and of graph.json), kernels read it as a literal, and the kernel cache
    key, which hashes the kernel source, tells different values apart;
  - any other constant becomes an extra graph input, after the real ones. import_graph returns
    these tensors; the compiled callable appends them to the arguments of every call (see
    backend.compile_fx_graph), so the generated code and the cached kernels never hold values.

Tests: tests/python/test_fx_import.py.
"""

from __future__ import annotations

import dataclasses
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
}
# torch's barebones unsigned types (few ops take them: coil leaves those to ATen).
for _name in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _name


_EMPTY_META = {"dtype": "float32", "device": "cpu", "sizes": [0], "strides": [1], "offset": 0}


class UnsupportedGraph(Exception):
    """The graph holds something coil cannot represent (the graph then runs eagerly)."""


def _int(v, what: str):
    if isinstance(v, torch.SymInt):
        return _unbacked_expr(v, what)
    return int(v)


def _unbacked_expr(v: torch.SymInt, what: str):
    """A size that depends on data (an unbacked symbol u0 from nonzero, unique, .item(), ...) as a
    symbolic expression; the ops that make or read such tensors run in ATen. Sizes with backed
    symbols (dynamic shapes, s0) are not supported yet: the graph runs eagerly."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    expr = v.node.expr
    if not expr.free_symbols or free_unbacked_symbols(expr) != expr.free_symbols:
        raise UnsupportedGraph(f"symbolic size in {what} (dynamic shapes are not supported yet)")
    return _sympy_json(expr, what)


def _sympy_json(e, what: str):
    import sympy

    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return {"sym": str(e)}
    kind = {sympy.Add: "add", sympy.Mul: "mul", sympy.Max: "max", sympy.Min: "min"}.get(type(e))
    if kind is None:
        name = type(e).__name__
        kind = {"FloorDiv": "floordiv", "Mod": "mod", "PythonMod": "mod"}.get(name)
    if kind is None:
        raise UnsupportedGraph(f"symbolic size {e} in {what}")
    return {kind: [_sympy_json(a, what) for a in e.args]}


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
        return [
            tensor_meta(v, what) if isinstance(v, torch.Tensor) else dict(_EMPTY_META) for v in val
        ]
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
        return {"sym": _unbacked_expr(a, what)}
    raise UnsupportedGraph(f"argument of type {type(a).__name__} in {what}")


def _python_function(t) -> str | None:
    """The name of a Python function of numbers ("operator.ge", "math.floor", "torch.sym_ite"),
    as graphs that compute with the value of .item() call them; None for anything else."""
    name = getattr(t, "__name__", None)
    if not isinstance(name, str):
        return None
    if getattr(operator, name, None) is t:
        return f"operator.{name}"
    if getattr(math, name, None) is t:
        return f"math.{name}"
    if name.startswith(("sym_", "_sym_")) and getattr(torch, name, None) is t:
        return f"torch.{name}"
    return None


def _target(node: torch.fx.Node) -> str:
    t = node.target
    if t is operator.getitem:
        return "getitem"
    if isinstance(t, torch._ops.OpOverload):
        return str(t)  # "aten.add.Tensor"
    if _is_with_effects(t):
        return "with_effects"
    function = _python_function(t)
    if function is not None and _scalar_type(node.meta.get("val")):
        return function
    raise UnsupportedGraph(f"call to {t} in node {node.name}")


def _is_with_effects(t) -> bool:
    return isinstance(t, torch._ops.HigherOrderOperator) and t.name() == "with_effects"


def _scalar_type(val) -> str:
    """The kind of Python number a node produces ("" for anything else): .item() of a tensor
    (an unbacked SymInt/SymFloat/SymBool while tracing), and numbers computed from it."""
    if isinstance(val, (bool, torch.SymBool)):
        return "bool"
    if isinstance(val, (int, torch.SymInt)):
        return "int"
    if isinstance(val, (float, torch.SymFloat)):
        return "float"
    return ""


def _call_node(node: torch.fx.Node) -> dict:
    target = _target(node)
    args = list(node.args)
    val = node.meta.get("val")
    if target == "with_effects":
        # with_effects(token, op, *args, **kwargs) -> (new token, op's results...)
        op = args[1]
        if not isinstance(op, torch._ops.OpOverload):
            raise UnsupportedGraph(f"with_effects of {op} in node {node.name} (not an ATen op)")
        args[1] = str(op)
        if not op._schema.returns and isinstance(val, (tuple, list)):
            val = val[:1]  # (token, None): the op returns nothing
    return {
        "name": node.name,
        "kind": "call",
        "target": target,
        "args": [_arg(a, node.name) for a in args],
        "kwargs": {k: _arg(v, node.name) for k, v in node.kwargs.items()},
        "meta": _metas(val, node.name),
        "scalar_type": _scalar_type(val),
        "stack_trace": node.meta.get("stack_trace") or "",
    }


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


def _constant_value(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.Tensor:
    value = gm
    for part in str(node.target).split("."):
        value = getattr(value, part, None)
    if not isinstance(value, torch.Tensor):
        raise UnsupportedGraph(
            f"FX node kind get_attr ({node.name}) of type {type(value).__name__}, not a tensor"
        )
    return value


def _is_literal(node: torch.fx.Node, value: torch.Tensor) -> bool:
    """Whether a constant may be written into the graph as its value: one element, and made while
    tracing (FX names those "_tensor_constant<N>"; nothing outside the graph can change them). A
    module's parameter or buffer held as an attribute stays an input, so that in-place updates
    between calls are seen."""
    return (
        str(node.target).startswith("_tensor_constant")
        and not isinstance(value, torch.nn.Parameter)
        and value.numel() == 1
        and value.layout == torch.strided
        and value.dtype in _DTYPES
    )


def _full_node(name: str, value: torch.Tensor) -> dict:
    """A one-element constant as aten.full of its value (exact: item() is the value widened to a
    Python int, float or bool)."""
    meta = tensor_meta(value, name)
    # The backend runs under AOTAutograd's fake-tensor mode; the constant is a real tensor.
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        number = value.item()
    kwargs = {
        "dtype": _arg(value.dtype, name),
        "layout": _arg(torch.strided, name),
        "device": _arg(value.device, name),
        "pin_memory": {"bool": False},
    }
    return {
        "name": name,
        "kind": "call",
        "target": "aten.full.default",
        "args": [_arg(list(value.shape), name), _arg(number, name)],
        "kwargs": kwargs,
        "meta": [meta],
        "stack_trace": "",
    }


@dataclasses.dataclass
class ImportedGraph:
    """What coil's C++ core receives (`json`), and the tensor constants that became graph inputs
    after the real ones (`constants`, in input order): every call must pass them."""

    json: str
    constants: list


def graph_to_dict(gm: torch.fx.GraphModule, example_inputs, constants: list | None = None) -> dict:
    """The graph in coil's JSON form. Tensor constants of more than one element become graph
    inputs after the real ones; their values are appended to `constants` (a list must be given
    when the graph has such constants)."""
    placeholders = []
    nodes = []
    placeholder_index = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            example = (
                example_inputs[placeholder_index]
                if placeholder_index < len(example_inputs)
                else None
            )
            placeholder_index += 1
            meta, scalar = _placeholder_meta(node, example)
            placeholders.append(
                {"name": node.name, "kind": "placeholder", "meta": meta, "scalar_type": scalar}
            )
        elif node.op == "get_attr":
            value = _constant_value(gm, node)
            if _is_literal(node, value):
                nodes.append(_full_node(node.name, value))
                continue
            if constants is None:
                raise UnsupportedGraph(
                    f"FX node kind get_attr ({node.name}): no place for constants"
                )
            meta = [tensor_meta(value, node.name)]
            constants.append(value)
            nodes.append(
                {"name": node.name, "kind": "placeholder", "meta": meta, "scalar_type": ""}
            )
        elif node.op == "call_function":
            nodes.append(_call_node(node))
        elif node.op == "output":
            outs = node.args[0]
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            nodes.append(
                {"name": node.name, "kind": "output", "args": [_arg(a, "output") for a in outs]}
            )
        else:
            raise UnsupportedGraph(f"FX node kind {node.op} ({node.name})")
    # Placeholders come first in coil's graph: constant inputs follow the real ones.
    constant_inputs = [n for n in nodes if n["kind"] == "placeholder"]
    calls = [n for n in nodes if n["kind"] != "placeholder"]
    return {"format": "coil.graph", "version": 1, "nodes": placeholders + constant_inputs + calls}


def import_graph(gm: torch.fx.GraphModule, example_inputs) -> ImportedGraph:
    constants: list = []
    doc = graph_to_dict(gm, example_inputs, constants)
    return ImportedGraph(json.dumps(doc), constants)


def graph_to_json(gm: torch.fx.GraphModule, example_inputs) -> str:
    """The JSON of a graph without multi-element tensor constants (UnsupportedGraph otherwise)."""
    return json.dumps(graph_to_dict(gm, example_inputs))
