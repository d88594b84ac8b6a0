"""Higher-order ops that coil does not lower yet, run as one call of their eager implementation
inside an otherwise compiled graph.

A higher-order op (torch.cond, flex_attention, auto_functionalized_v2 around a custom op that
mutates its input, a user's Triton kernel, invoke_subgraph, ...) reaches coil as an FX node whose
arguments mix tensors, numbers, nested tuples and subgraphs (get_attr nodes naming GraphModules).
coil's graph holds tensors and numbers only, so the importer cuts the node in two:
  - what changes from call to call (every FX node among its arguments: tensors, sizes) becomes the
    arguments of an extern call in coil's graph, in pytree order;
  - everything else (the op, its subgraphs, its constant arguments and the structure that holds
    them) goes into an OpaqueCall, a Python callable kept here under a name derived from its
    content ("opaque.cond_3f2a..."). The wrapper binds that name like any ATen op it calls
    (runtime.extern_op), and the C++ core treats the call as a fallback op: its inputs in eager's
    layouts, its results in the buffers their metadata describe, every other node of the graph
    lowered, fused and scheduled as usual.

The name hashes the op, the constant arguments and the code of every subgraph, so a graph whose
generated module is found in the kernel cache binds an equivalent callable; the callable itself
always comes from the graph being compiled now (the import registers it before the module loads).
Graphs holding such calls are not kept by the warm-start graph cache (graph_cache.store), which
skips the import that registers them.

The branches of cond, the condition and body of while_loop, the bodies of map and scan and the
region of invoke_subgraph (torch.compiler.nested_compile_region: compiled once however often it
is called) are compiled by coil as graphs of their own (COMPILED_SUBGRAPHS; the backend passes
the compile function in; records of kind "subgraph"), and the op's eager implementation calls
the compiled ones.

Tests: tests/python/test_higher_order.py, tests/gpu/test_higher_order_gpu.py.
"""

from __future__ import annotations

import hashlib
import operator
import re

import torch
import torch.fx
from torch.utils import _pytree as pytree

PREFIX = "opaque."

_calls: dict[str, OpaqueCall] = {}


class OpaqueCall:
    """op(*args, **kwargs) with the FX nodes among args/kwargs replaced, in order, by the values
    the wrapper passes. A result that is a tuple of one value is returned as that value: the
    wrapper takes a call with one result as returning it bare, as ATen ops do."""

    def __init__(self, op, spec, leaves: list, slots: list[int], single: bool,
                 bases: list[int] | None = None):
        self.op = op
        # auto_functionalized_v2: the passed values that are the bases the custom op writes, in
        # _all_bases order (positions among the passed values).
        self.bases = bases or []
        self.spec = spec  # pytree spec of (args, kwargs)
        self.leaves = leaves  # constants and subgraphs; None where a value is passed
        self.slots = slots  # the leaf positions the passed values fill, in order
        # An op returning a dict (triton_kernel_wrapper_functional: {name: tensor}): its values
        # in this key order, as a tuple (fx_import turns getitem by key into getitem by index).
        self.keys: tuple | None = None
        # The positions of results that are tuples themselves (flex_attention_backward's
        # gradients of score_mod's captured tensors): each is returned as None in its place and
        # its elements after all the results, so the wrapper reads every tensor by one index
        # (fx_import.flat_index).
        self.nested: tuple[int, ...] = ()
        # flex_attention_backward: the captured tensors of score_mod whose gradients the graph
        # reads (positions among them), each passed as requiring grad (_wanted_grads).
        self.wanted_grads: tuple[int, ...] = ()
        self.single = single  # the op returns a tuple of one value

    def __call__(self, *values, _coil_write_in_place=()):
        leaves = list(self.leaves)
        for slot, value in zip(self.slots, values):
            leaves[slot] = value
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        if self.wanted_grads:
            args = _wanted_grads(args, self.wanted_grads)
        if self.bases:
            # The custom op writes the bases coil granted in place (sched/in_place_calls.cpp:
            # buffers computed for this call alone) and copies of the others, as the eager form
            # of auto_functionalized_v2 does for all of them.
            from torch._higher_order_ops.auto_functionalize import auto_functionalized_v2_dense

            clone = tuple(k for k, p in enumerate(self.bases) if p not in _coil_write_in_place)
            out = auto_functionalized_v2_dense(*args, _only_clone_these_bases=clone, **kwargs)
        else:
            out = self.op(*args, **kwargs)
        if self.keys is not None:
            out = tuple(out[k] for k in self.keys)
        if self.nested:
            out = tuple(None if i in self.nested else v for i, v in enumerate(out)) + tuple(
                x for i in self.nested for x in out[i])
        return out[0] if self.single else out


# flex_attention_backward's argument holding score_mod's captured tensors, and its result holding
# their gradients.
FLEX_BACKWARD_BUFFERS = 12
FLEX_BACKWARD_BUFFER_GRADS = 3


def _wanted_grads(args: tuple, wanted: tuple[int, ...]) -> tuple:
    """flex_attention_backward's arguments with the captured tensors in `wanted` requiring grad.
    Its eager implementation (sdpa_dense_backward) computes a captured tensor's gradient only
    where the tensor it is handed requires grad, and AOTAutograd hands the backward a captured
    leaf that is a view (x.t().requires_grad_()) without it: the gradient the graph reads was
    None (aot_eager loses it too; python -m coil.fuzz --flex --train, seed 603)."""
    if len(args) <= FLEX_BACKWARD_BUFFERS or not isinstance(args[FLEX_BACKWARD_BUFFERS], tuple):
        return args  # (a signature other than torch 2.13's, which this follows)
    buffers = list(args[FLEX_BACKWARD_BUFFERS])
    for j in wanted:
        if isinstance(buffers[j], torch.Tensor) and not buffers[j].requires_grad:
            buffers[j] = buffers[j].detach().requires_grad_()
    return (*args[:FLEX_BACKWARD_BUFFERS], tuple(buffers), *args[FLEX_BACKWARD_BUFFERS + 1:])


def _read_elements(node: torch.fx.Node, index: int) -> tuple[int, ...]:
    """The elements of node's result `index` (a tuple) that the graph reads, by position."""
    read = set()
    for user in node.users:
        if user.target is operator.getitem and user.args[1] == index:
            read.update(u.args[1] for u in user.users if u.target is operator.getitem)
    return tuple(sorted(read))


def is_higher_order(target) -> bool:
    return isinstance(target, torch._ops.HigherOrderOperator)


def _subgraph(gm: torch.fx.GraphModule, node: torch.fx.Node):
    value = gm
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value


def _fingerprint(h, value) -> None:
    """What of a constant leaf decides the call's behavior, into the hash."""
    if isinstance(value, torch.fx.GraphModule):
        h.update(b"graph\0" + value.code.encode())
        # What it is called with (a subgraph coil compiles is specialized to it).
        for n in value.graph.nodes:
            v = n.meta.get("val") if n.op == "placeholder" else None
            if isinstance(v, torch.Tensor):
                h.update(f"{v.dtype} {tuple(v.shape)} {v.stride()} {v.device}".encode())
        # Tensors the subgraph holds as attributes: their identity (a later graph with other
        # values gets another name; only a kernel-cache miss follows).
        for name, t in sorted({**dict(value.named_parameters()), **dict(value.named_buffers())}
                              .items()):
            h.update(f"{name} {id(t)}".encode())
        return
    h.update(repr(value).encode() + b"\0")


# Ops whose subgraphs are whole functions of tensors that the op calls as they are (branches,
# loop conditions and bodies, regions marked for reuse): coil compiles each such subgraph as a
# graph of its own (once per parent graph), and the op's eager implementation (the control flow)
# calls the compiled ones.
COMPILED_SUBGRAPHS = frozenset({"cond", "while_loop", "invoke_subgraph", "map_impl", "scan"})


class CompiledSubgraph:
    """A subgraph compiled by coil, called as the GraphModule it replaces is: positional
    arguments in, its results out (a tuple where the subgraph returns one)."""

    def __init__(self, boxed_call, returns_tuple: bool):
        self.boxed_call = boxed_call
        self.returns_tuple = returns_tuple

    def __call__(self, *args):
        out = self.boxed_call(list(args))
        return tuple(out) if self.returns_tuple else out[0]


def _returns_tuple(sub: torch.fx.GraphModule) -> bool:
    output = next(n for n in reversed(sub.graph.nodes) if n.op == "output")
    return isinstance(output.args[0], (tuple, list))


def register(gm: torch.fx.GraphModule, node: torch.fx.Node,
             compile_subgraph=None) -> tuple[str, list, list[int]]:
    """The name the wrapper calls for `node` (a call of a higher-order op), the arguments the
    call passes (the FX nodes among the op's arguments that are not subgraphs, in order), and
    the positions among them of tensors the call may write in place instead of copying (the
    bases of auto_functionalized_v2; granted or not by sched/in_place_calls.cpp).
    compile_subgraph(GraphModule) -> boxed call, when given, compiles the subgraphs of the ops in
    COMPILED_SUBGRAPHS (a subgraph it cannot compile runs eagerly, as the backend's graphs do)."""
    op = node.target
    leaves, spec = pytree.tree_flatten((tuple(node.args), dict(node.kwargs)))
    constants: list = []
    slots: list[int] = []
    passed: list = []
    h = hashlib.sha256(f"{op.name()} {spec}".encode())
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.fx.Node) and leaf.op == "get_attr":
            value = _subgraph(gm, leaf)
            if isinstance(value, torch.fx.GraphModule):
                _fingerprint(h, value)
                if compile_subgraph is not None and op.name() in COMPILED_SUBGRAPHS:
                    value = CompiledSubgraph(compile_subgraph(value), _returns_tuple(value))
                constants.append(value)
                continue
        if isinstance(leaf, torch.fx.Node):
            constants.append(None)
            slots.append(i)
            passed.append(leaf)
            h.update(f"slot {i}\0".encode())
            continue
        constants.append(leaf)
        _fingerprint(h, leaf)
    wanted = ()
    if op.name() == "flex_attention_backward" and len(node.args) > FLEX_BACKWARD_BUFFERS:
        wanted = _read_elements(node, FLEX_BACKWARD_BUFFER_GRADS)
        h.update(f"gradients wanted {wanted}".encode())  # (what the call computes)
    stem = re.sub(r"[^0-9a-zA-Z_]", "_", op.name())
    name = f"{PREFIX}{stem}_{h.hexdigest()[:16]}"
    val = node.meta.get("val")
    keys = tuple(val) if isinstance(val, dict) else None
    if keys is not None:
        val = tuple(val.values())
    single = isinstance(val, (tuple, list)) and len(val) == 1
    bases: list[int] = []
    if op.name() == "auto_functionalized_v2":
        for base in node.kwargs.get("_all_bases", ()):
            bases.append(passed.index(base) if isinstance(base, torch.fx.Node) else -1)
        if -1 in bases:
            bases = []
    _calls[name] = OpaqueCall(op, spec, constants, slots, single, bases)
    _calls[name].keys = keys
    if isinstance(val, (tuple, list)):
        _calls[name].nested = tuple(i for i, v in enumerate(val) if isinstance(v, (tuple, list)))
    _calls[name].wanted_grads = wanted
    return name, passed, [p for p in dict.fromkeys(bases)]


def describe(names) -> str:
    """The opaque calls among `names` (a graph's fallback ops), each with its op, what it was
    given and the code of its subgraphs (the debug folder's opaque_calls.txt)."""
    parts = []
    for name in dict.fromkeys(n for n in names if n.startswith(PREFIX)):
        call = _calls.get(name)
        if call is None:
            continue
        lines = [f"{name}: {call.op.name()}, called with {len(call.slots)} values from the graph"]
        for i, leaf in enumerate(call.leaves):
            if isinstance(leaf, CompiledSubgraph):
                lines.append(f"  argument {i}: a subgraph compiled by coil (a graph of kind "
                             "'subgraph')")
            elif isinstance(leaf, torch.fx.GraphModule):
                lines.append(f"  argument {i}: a subgraph run eagerly:\n" + "\n".join(
                    "    " + line for line in leaf.code.strip().splitlines()))
            elif i not in call.slots:
                lines.append(f"  argument {i}: {leaf!r}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + ("\n" if parts else "")


def clear() -> None:
    """Forgets every registered call (coil.reset())."""
    _calls.clear()


def lookup(name: str) -> OpaqueCall:
    call = _calls.get(name)
    if call is None:
        raise RuntimeError(
            f"coil: no opaque call {name!r} in this process (a module compiled for a graph with "
            "a higher-order op was loaded without importing that graph)"
        )
    return call
