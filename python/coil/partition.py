"""The partitioner of training graphs: which forward values the backward gets saved and which it
recomputes. AOTAutograd's own min-cut rematerializing partitioner
(torch._functorch.partitioners.min_cut_rematerialization_partition) does the choosing; coil tells
it what it knows about the cost of recomputing.

The min-cut partitioner recomputes only ops on its own allowlist (cheap pointwise ops, views,
small reductions), assuming each recomputed op fuses into the backward kernel that reads it.
Under coil that holds for ops coil lowers into its own kernels; an op that runs in ATen (a
fallback) would be a separate ATen call in the backward, with its own reads and writes. Those
nodes are marked MUST_SAVE (the partitioner's own annotation, as activation checkpointing uses)
so it never recomputes them. Which op is which is coil's decision, in C++
(coil::lower::recomputes_in_kernels). Graphs the user annotated (torch.utils.checkpoint) are
left as the user marked them."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import CheckpointPolicy

from coil import _C


def _target_name(node) -> str | None:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    return f"aten.{target._opname}.{target._overloadname}"  # as coil's graphs name it


def mark_fallbacks_saved(graph: torch.fx.Graph) -> list[str]:
    """Marks MUST_SAVE every aten node coil would run in ATen rather than in its kernels (unless
    the graph carries the user's checkpoint annotations); returns the marked nodes' names."""
    nodes = [n for n in graph.nodes if n.op == "call_function"]
    if any("recompute" in n.meta for n in nodes):
        return []
    marked = []
    for node in nodes:
        name = _target_name(node)
        if name is None or _C.recomputes_in_kernels(name):
            continue
        node.meta["recompute"] = CheckpointPolicy.MUST_SAVE
        marked.append(node.name)
    return marked


def _fake(op, *args, **kwargs):
    """The node's value (meta["val"]): op run on its arguments' fake values."""
    def val(a):
        return a.meta["val"] if isinstance(a, torch.fx.Node) else a
    return op(*[val(a) for a in args], **{k: val(v) for k, v in kwargs.items()})


def split_log_softmax(graph: torch.fx.Graph) -> int:
    """Writes every aten._log_softmax of a joint graph as its parts, shifted - log(sum(exp(
    shifted))) with shifted = x - amax(x), computed in float32 for 16-bit x (the function coil's
    own lowering computes, in the same order). As one op, the partitioner can only save its
    full-size result for the backward (float32 when x was upcast: a loss over a vocabulary of
    30522 words saved twice the size of its bfloat16 logits); as parts, it saves the two per-row
    reductions and recomputes the rest from x, or from what x was cast from. Returns how many."""
    aten = torch.ops.aten
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten._log_softmax.default:
            continue
        x, dim, half_to_float = node.args
        out_dtype = node.meta["val"].dtype
        compute = torch.float64 if x.meta["val"].dtype == torch.float64 else torch.float32

        def emit(op, *args, **kwargs):
            new = graph.call_function(op, args, kwargs)
            new.meta.update({k: v for k, v in node.meta.items() if k != "val"})
            new.meta["val"] = _fake(op, *args, **kwargs)
            return new

        with graph.inserting_before(node):
            xc = x if x.meta["val"].dtype == compute else emit(aten._to_copy.default, x,
                                                                dtype=compute)
            peak = emit(aten.amax.default, xc, [dim], True)
            shifted = emit(aten.sub.Tensor, xc, peak)
            total = emit(aten.sum.dim_IntList, emit(aten.exp.default, shifted), [dim], True)
            out = emit(aten.sub.Tensor, shifted, emit(aten.log.default, total))
            if out_dtype != compute:
                out = emit(aten._to_copy.default, out, dtype=out_dtype)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        count += 1
    return count


def min_cut_partition(joint_module, joint_inputs, **kwargs):
    """AOTAutograd's partition_fn: the min-cut partitioner, told which nodes coil would not fuse."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    if split_log_softmax(joint_module.graph):
        joint_module.recompile()
    mark_fallbacks_saved(joint_module.graph)
    return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
