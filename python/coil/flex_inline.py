"""flex_attention's forward, written into the graph as the ATen ops of its math form, so that coil
lowers and fuses it like any other attention it is given written out.

flex_attention reaches coil as a higher-order op with its score_mod and mask_mod as subgraphs.
Run as one call of its eager implementation (opaque_calls.py), the math form applies score_mod
through four nested vmaps, op by op over the whole score matrix: 273 ms where Inductor's CPU
template takes 34 (2 cores, float32, batch 2, 4 heads, length 512, head dim 64, causal). This
pass traces that same implementation (torch's sdpa_dense for the op's CompositeExplicitAutograd
key: the scores' matmul, score_mod and mask_mod over index grids, the safe softmax, the values'
matmul, logsumexp and max for the backward) with make_fx over the node's traced values, under
coil's decomposition table, and splices the ATen graph in place of the node. coil then computes
score_mod, the mask and the softmax in one row kernel between the two matmuls; what the graph
does not use (logsumexp, max scores in inference) is removed by coil as dead.

The traced graph is the op's own eager function, so the values are eager's; the score matrix is
materialized once, as the math form does (the BlockMask's block sparsity is not used to skip
work). A node this pass cannot trace stays a higher-order op (and runs through its eager
implementation). flex_attention_backward is left alone.

Tests: tests/python/test_higher_order.py.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
from torch.utils import _pytree as pytree


def _is_flex(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.HigherOrderOperator)
        and node.target.name() == "flex_attention"
    )


def _subgraph(gm: torch.fx.GraphModule, node: torch.fx.Node):
    value = gm
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value


def _traced(gm: torch.fx.GraphModule, node: torch.fx.Node, decompositions: dict):
    """(the ATen graph of the node's math form, the FX nodes its placeholders stand for)."""
    from torch._higher_order_ops.flex_attention import sdpa_dense
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = pytree.tree_flatten((tuple(node.args), dict(node.kwargs)))
    passed, slots, constants = [], [], list(leaves)
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, torch.fx.Node):
            continue
        if leaf.op == "get_attr" and isinstance(_subgraph(gm, leaf), torch.fx.GraphModule):
            constants[i] = _subgraph(gm, leaf)
            continue
        val = leaf.meta.get("val")
        if not isinstance(val, (torch.Tensor, torch.SymInt, int)):
            return None
        passed.append(leaf)
        slots.append(i)

    def math_form(*values):
        filled = list(constants)
        for slot, value in zip(slots, values):
            filled[slot] = value
        args, kwargs = pytree.tree_unflatten(filled, spec)
        return tuple(sdpa_dense(*args, **kwargs))

    examples = [p.meta["val"] for p in passed]
    fake_mode = torch._guards.detect_fake_mode(examples)
    if fake_mode is None:
        return None
    # Functionalized, as AOTAutograd's graphs are (the math form copies its result into a tensor
    # with the query's strides: copy_ into a new tensor becomes a copy coil fuses).
    functional = torch.func.functionalize(math_form, remove="mutations")
    with fake_mode:
        traced = make_fx(functional, decomposition_table=decompositions)(*examples)
    if not _numbers_as_tensors_fixed(traced):
        return None
    return traced, passed


def _numbers_as_tensors_fixed(traced: torch.fx.GraphModule) -> bool:
    """vmap's batching of a score_mod's Python-number constants leaves `_to_copy(0.25)` in the
    trace (a wrapped number recorded as the number, where the op needs a tensor): each becomes
    the one-element tensor it makes. False where that tensor's metadata is missing."""
    for node in list(traced.graph.nodes):
        if node.target is not torch.ops.aten._to_copy.default or not node.args:
            continue
        if not isinstance(node.args[0], (int, float, bool)):
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return False
        with traced.graph.inserting_before(node):
            full = traced.graph.call_function(
                torch.ops.aten.full.default, ([], node.args[0]),
                {"dtype": val.dtype, "device": val.device, "pin_memory": False})
        full.meta = dict(node.meta)
        node.replace_all_uses_with(full)
        traced.graph.erase_node(node)
    traced.recompile()
    return True


def inline_flex_attention(gm: torch.fx.GraphModule, decompositions: dict) -> list[str]:
    """Replaces each flex_attention node of gm by its math form's ATen ops (in place); returns
    the names of the nodes replaced."""
    replaced = []
    for node in [n for n in gm.graph.nodes if _is_flex(n)]:
        if any(u.target is not operator.getitem for u in node.users):
            continue  # (AOTAutograd's graphs read a tuple result through getitem only)
        try:
            found = _traced(gm, node, decompositions)
        except Exception:  # noqa: BLE001 - not traceable: stays a higher-order op
            found = None
        if found is None:
            continue
        traced, passed = found
        env = {}
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        for ph, value in zip(placeholders, passed):
            env[ph] = value
        results = None
        with gm.graph.inserting_before(node):
            for sub in traced.graph.nodes:
                if sub.op == "placeholder":
                    continue
                if sub.op == "output":
                    results = [env[r] if isinstance(r, torch.fx.Node) else r
                               for r in sub.args[0]]
                    continue
                if sub.op == "get_attr":
                    # A tensor the trace made (a constant): carried over as an attribute.
                    name = f"_flex_{node.name}_{sub.target}"
                    value = getattr(traced, sub.target)
                    if isinstance(value, torch.Tensor):
                        # (a buffer, so FX knows the attribute: no "get_attr Node with no
                        # underlying reference" warning at every compile)
                        gm.register_buffer(name, value, persistent=False)
                    else:
                        setattr(gm, name, value)
                    new = gm.graph.get_attr(name)
                else:
                    new = gm.graph.node_copy(sub, lambda n: env[n])
                new.meta = dict(sub.meta)
                new.meta.setdefault("stack_trace", node.meta.get("stack_trace"))
                env[sub] = new
        for user in list(node.users):
            user.replace_all_uses_with(results[user.args[1]])
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
        replaced.append(node.name)
    if replaced:
        for n in list(gm.graph.nodes):
            if n.op == "get_attr" and not n.users and isinstance(_subgraph(gm, n),
                                                                 torch.fx.GraphModule):
                gm.graph.erase_node(n)
        gm.graph.lint()
        gm.recompile()
    return replaced
