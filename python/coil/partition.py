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


def min_cut_partition(joint_module, joint_inputs, **kwargs):
    """AOTAutograd's partition_fn: the min-cut partitioner, told which nodes coil would not fuse."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    mark_fallbacks_saved(joint_module.graph)
    return min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
