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
from collections.abc import Sequence

import torch
import torch.fx

from coil import opaque_calls

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


class _Symbols:
    """The size symbols a graph's metadata mentions, collected while it is walked: backed symbols
    (s0, s1, ...: sizes Dynamo made dynamic, each with a value range and the example value as its
    hint) and unbacked ones (u0, ...: sizes that depend on data, which only ATen ops touch)."""

    def __init__(self):
        self.shape_env = None
        self.names: set[str] = set()

    def note(self, v: torch.SymInt) -> None:
        if self.shape_env is None:
            self.shape_env = v.node.shape_env
        for s in v.node.expr.free_symbols:
            self.names.add(str(s))

    def table(self) -> list:
        """Graph JSON "symbols": the backed symbols with their ranges and hints."""
        import sympy

        env = self.shape_env
        if env is None:
            return []
        values = _var_to_val(env)
        by_name = {str(s): s for s in values}
        rows = []
        for name in sorted(self.names):
            s = by_name.get(name)
            if s is None:  # unbacked: no hint; stays out of the table (see lowering)
                continue
            vr = env.var_to_range.get(s)
            row = {"name": name, "hint": int(values[s])}
            if vr is not None:
                if isinstance(vr.lower, sympy.Integer):
                    row["lo"] = int(vr.lower)
                if isinstance(vr.upper, sympy.Integer):
                    row["hi"] = int(vr.upper)
            rows.append(row)
        return rows


_symbols: _Symbols | None = None  # set while graph_to_dict walks a graph


def _backed_symint(v) -> bool:
    """Whether v is a SymInt of backed symbols only (a function of the graph's dynamic sizes,
    which the wrapper binds from the inputs), as opposed to one that depends on data."""
    if not isinstance(v, torch.SymInt):
        return False
    values = _var_to_val(v.node.shape_env)
    return all(s in values for s in v.node.expr.free_symbols)


def _var_to_val(shape_env) -> dict:
    """The example values of the backed symbols (torch 2.13 renamed the field)."""
    values = getattr(shape_env, "backed_var_to_val", None)
    return shape_env.var_to_val if values is None else values


def _int(v, what: str):
    if isinstance(v, torch.SymInt):
        return _sym_expr(v, what)
    return int(v)


def _sym_expr(v: torch.SymInt, what: str):
    """A symbolic size as a coil expression (JSON). Backed symbols (dynamic shapes: s0, ...) are
    listed in the graph's symbol table with their ranges and hints; unbacked ones (data-dependent
    sizes: u0 from nonzero, unique, .item(), ...) are not, and the ops that touch them run in ATen."""
    expr = v.node.expr
    if _symbols is not None:
        _symbols.note(v)
    return _sympy_json(expr, what)


def _sympy_json(e, what: str):
    import sympy

    if isinstance(e, sympy.Integer) or (e.is_number and e.is_integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return {"sym": str(e)}
    name = type(e).__name__
    if isinstance(e, sympy.Pow) or name == "PowByNatural":
        base, exp = e.args
        if exp.is_Integer and int(exp) >= 1:
            return {"mul": [_sympy_json(base, what)] * int(exp)}
        raise UnsupportedGraph(f"symbolic size {e} in {what}")
    if name == "ModularIndexing":  # (x // div) % mod
        x, div, m = (_sympy_json(a, what) for a in e.args)
        return {"mod": [{"floordiv": [x, div]}, m]}
    if name == "CeilDiv":  # -(-a // b)
        a, b = (_sympy_json(x, what) for x in e.args)
        return {"mul": [{"floordiv": [{"mul": [a], "coeff": -1}, b]}], "coeff": -1}
    kind = {sympy.Add: "add", sympy.Mul: "mul", sympy.Max: "max", sympy.Min: "min"}.get(type(e))
    if kind is None:
        kind = {
            "FloorDiv": "floordiv",
            "CleanDiv": "floordiv",
            "Mod": "mod",
            "PythonMod": "mod",
            "Max": "max",
            "Min": "min",
        }.get(name)
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
        val = a.meta.get("val")
        if _backed_symint(val):
            # A size computed from the dynamic sizes (sym_size, s0 * 4, a SymInt input): its
            # expression, so that coil's sizes stay symbolic rather than opaque numbers.
            return {"sym": _sym_expr(val, what)}
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
        return {"sym": _sym_expr(a, what)}
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


def _c_type(t) -> str | None:
    """A schema type as a C++ wrapper passes it to ATen's dispatcher (graph::CArg::type), or None
    where it cannot yet (Generator, Storage, lists of bools or of Scalars, ...)."""
    kind = t.kind()
    if kind == "OptionalType":
        inner = _c_type(t.getElementType())
        return inner + "?" if inner and not inner.endswith("?") else None
    if kind == "ListType":
        inner = _c_type(t.getElementType())
        return inner + "[]" if inner in ("int", "float", "Tensor", "Tensor?") else None
    return {"TensorType": "Tensor", "IntType": "int", "SymIntType": "int", "FloatType": "float",
            "BoolType": "bool", "ScalarTypeType": "ScalarType", "NumberType": "Scalar",
            "StringType": "str", "DeviceObjType": "Device", "LayoutType": "Layout",
            "MemoryFormatType": "MemoryFormat"}.get(kind)


def _c_args(op, node: torch.fx.Node) -> list | None:
    """graph::Node::c_args: each schema argument as [name, type] or, where the node gives no
    value, [name, type, default]; None when the op takes or returns what a C++ wrapper cannot
    pass (it then leaves the graph to the Python one)."""
    schema = op._schema
    if not schema.returns or any(_c_type(r.real_type) != "Tensor" for r in schema.returns):
        return None
    out = []
    for i, a in enumerate(schema.arguments):
        c = _c_type(a.real_type)
        if c is None:
            return None
        if i < len(node.args) or a.name in node.kwargs:
            out.append([a.name, c])
        elif a.has_default_value():
            out.append([a.name, c, _arg(a.default_value, node.name)])
        else:
            return None
    return out


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
    out = {
        "name": node.name,
        "kind": "call",
        "target": target,
        "args": [_arg(a, node.name) for a in args],
        "kwargs": {k: _arg(v, node.name) for k, v in node.kwargs.items()},
        "meta": _metas(val, node.name),
        "scalar_type": _scalar_type(val),
        "stack_trace": node.meta.get("stack_trace") or "",
    }
    if isinstance(node.target, torch._ops.OpOverload):
        c_args = _c_args(node.target, node)
        if c_args:
            out["c_args"] = c_args
    return out


def _is_subgraph_of_higher_order_ops(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    value = gm
    for part in str(node.target).split("."):
        value = getattr(value, part, None)
    if not isinstance(value, torch.fx.GraphModule):
        return False
    for user in node.users:
        if user.op != "call_function" or not opaque_calls.is_higher_order(user.target):
            raise UnsupportedGraph(f"subgraph {node.name} read by {user.name}, not a higher-order op")
    return True


def _opaque_call_node(gm: torch.fx.GraphModule, node: torch.fx.Node, compile_subgraph) -> dict:
    """A higher-order op coil does not lower: one extern call of its eager implementation
    (opaque_calls.py), its tensors and sizes as arguments, its results as the node's results."""
    name, passed, may_write = opaque_calls.register(gm, node, compile_subgraph)
    val = node.meta.get("val")
    if isinstance(val, dict):  # by key order (opaque_calls.OpaqueCall.keys)
        val = tuple(val.values())
    if isinstance(val, (tuple, list)) and any(isinstance(v, (tuple, list)) for v in val):
        # A result that is a tuple (flex_attention_backward's gradients of score_mod's captured
        # tensors): its elements follow the other results (OpaqueCall.nested), one level deep.
        inner = [x for v in val if isinstance(v, (tuple, list)) for x in v]
        if any(isinstance(x, (tuple, list)) for x in inner):
            raise UnsupportedGraph(f"{node.target.name()} in node {node.name} returns tuples "
                                   "nested more than one level")
        val = [None if isinstance(v, (tuple, list)) else v for v in val] + inner
    return {
        "name": node.name,
        "kind": "call",
        "target": name,
        "args": [_arg(a, node.name) for a in passed],
        # Arguments the call may write in place (sched/in_place_calls.cpp decides).
        "kwargs": {"_coil_may_write": _arg(may_write, node.name)} if may_write else {},
        "meta": _metas(val, node.name),
        "scalar_type": "",
        "stack_trace": node.meta.get("stack_trace") or "",
    }


def _is_nested_result(node: torch.fx.Node, index) -> bool:
    """Whether node is an opaque call whose result `index` is a tuple itself."""
    val = node.meta.get("val")
    if isinstance(val, dict):
        val = tuple(val.values())
    return (node.op == "call_function" and opaque_calls.is_higher_order(node.target)
            and isinstance(val, (tuple, list)) and isinstance(index, int)
            and isinstance(val[index], (tuple, list)))


def flat_index(node: torch.fx.Node, index: int, inner: int) -> int:
    """The position of node's result [index][inner] among the opaque call's flat results (the
    results, then the elements of each that is a tuple: OpaqueCall.nested)."""
    val = node.meta["val"]
    if isinstance(val, dict):
        val = tuple(val.values())
    before = sum(len(v) for v in val[:index] if isinstance(v, (tuple, list)))
    return len(val) + before + inner


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
    if isinstance(val, torch.SymInt):
        return [], "symint"
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
    symbols: list = dataclasses.field(default_factory=list)  # the graph's size symbols (rows)


def graph_to_dict(gm: torch.fx.GraphModule, example_inputs, constants: list | None = None,
                  compile_subgraph=None) -> dict:
    """The graph in coil's JSON form. Tensor constants of more than one element become graph
    inputs after the real ones; their values are appended to `constants` (a list must be given
    when the graph has such constants). compile_subgraph: how subgraphs of control-flow ops are
    compiled (opaque_calls.register); they run eagerly without it."""
    global _symbols
    saved = _symbols  # a subgraph compiled while its parent is walked has its own table
    _symbols = _Symbols()
    try:
        doc = _graph_to_dict(gm, example_inputs, constants, compile_subgraph)
        symbols = _symbols.table()
    finally:
        _symbols = saved
    if symbols:
        doc["symbols"] = symbols
    return doc


def _graph_to_dict(gm: torch.fx.GraphModule, example_inputs, constants: list | None,
                   compile_subgraph) -> dict:
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
            entry = {"name": node.name, "kind": "placeholder", "meta": meta, "scalar_type": scalar}
            if scalar == "symint":
                entry["value"] = _sym_expr(node.meta.get("val", example), node.name)
            placeholders.append(entry)
        elif node.op == "get_attr":
            if _is_subgraph_of_higher_order_ops(gm, node):
                continue  # held by the opaque calls that read it (opaque_calls.py)
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
            if _backed_symint(node.meta.get("val")):
                continue  # every use reads its expression (see _arg)
            if opaque_calls.is_higher_order(node.target) and not _is_with_effects(node.target):
                nodes.append(_opaque_call_node(gm, node, compile_subgraph))
                continue
            source = node.args[0] if node.target is operator.getitem else None
            if isinstance(source, torch.fx.Node) and _is_nested_result(source, node.args[1]):
                continue  # read by index through its getitems (flat_index)
            call = _call_node(node)
            if isinstance(source, torch.fx.Node) and source.target is operator.getitem \
                    and _is_nested_result(source.args[0], source.args[1]):
                call["args"] = [_arg(source.args[0], node.name),
                                _arg(flat_index(source.args[0], source.args[1], node.args[1]),
                                     node.name)]
            if isinstance(source, torch.fx.Node) and isinstance(source.meta.get("val"), dict):
                # getitem by key of an opaque call's dict result: by its index in key order
                keys = list(source.meta["val"])
                call["args"][1] = _arg(keys.index(node.args[1]), node.name)
            nodes.append(call)
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


def import_graph(gm: torch.fx.GraphModule, example_inputs, compile_subgraph=None,
                 donated: Sequence[int] = ()) -> ImportedGraph:
    """donated: positions of placeholders whose memory the graph may take over once it has read
    them for the last time (AOTAutograd's donated buffers of a backward graph: saved activations
    nothing else holds; it refuses retain_graph=True for such a graph)."""
    constants: list = []
    doc = graph_to_dict(gm, example_inputs, constants, compile_subgraph)
    for i, entry in enumerate(n for n in doc["nodes"] if n["kind"] == "placeholder"):
        if i in donated and entry["meta"]:
            entry["donated"] = True
    return ImportedGraph(json.dumps(doc), constants, doc.get("symbols", []))


def graph_to_json(gm: torch.fx.GraphModule, example_inputs) -> str:
    """The JSON of a graph without multi-element tensor constants (UnsupportedGraph otherwise)."""
    return json.dumps(graph_to_dict(gm, example_inputs))
