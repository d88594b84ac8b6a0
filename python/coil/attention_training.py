"""Written-out attention in training graphs: one scaled_dot_product_attention call before
AOTAutograd differentiates the graph.

In an inference graph coil replaces softmax(q @ k^T * c) @ v by one attention call while lowering
(cpp/coil/lower/attention_pattern.h). A training graph cannot be rewritten there: by then
AOTAutograd has differentiated the written form, and its forward saves the [B, H, S, L]
probabilities for the backward (at 8x1024 tokens and 16 heads, 512 MB in float32). Rewritten
before AOTAutograd, the autograd of the attention call is ATen's own (flash or memory-efficient
attention forward and backward), which saves q, k, v, the output and one row statistic instead.

The bridge: the graph Dynamo captured is traced once to ATen ops (make_fx under Dynamo's fake
tensors; the same ops AOTAutograd would see, before differentiation), handed to coil's C++
matcher (coil::lower::find_attention, the one the inference rewrite uses), and each match is
replaced by aten.scaled_dot_product_attention on the matched q, k, v. AOTAutograd then traces the
rewritten graph as it would have traced Dynamo's. Graphs without a match, or that the trace cannot
take, go to AOTAutograd as Dynamo gave them."""

from __future__ import annotations

import contextlib
import logging

import torch
from torch.fx import traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from coil import _C, fx_import

log = logging.getLogger("coil")

aten = torch.ops.aten

_PROVENANCE = ("stack_trace", "nn_module_stack", "source_fn_stack")


def _may_hold_attention(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """Cheap filters before tracing: a graph that is differentiated, calls a softmax and a matrix
    product, and holds no higher-order op."""
    if not torch.is_grad_enabled():
        return False
    if not any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        return False
    softmax = product = False
    for node in gm.graph.nodes:
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            return False  # a checkpointed region, a wrapped autocast...: left as the user wrote it
        if node.op not in ("call_function", "call_method"):
            continue
        name = getattr(node.target, "__name__", str(node.target))
        softmax |= name in ("softmax", "_softmax")  # (a loss's log_softmax is no attention)
        product |= name in ("matmul", "bmm", "einsum")
    return softmax and product


@contextlib.contextmanager
def _user_hooks_suspended():
    """The user's saved_tensors_hooks do not run while the graph is traced: autograd saves the
    trace's fake tensors (the written-out form's probabilities, its dropout mask), which a hook
    that counts, offloads or checkpoints must never see. (Dynamo's own tracing does the same.)"""
    set_tracing = getattr(torch._C._autograd, "_saved_tensors_hooks_set_tracing", None)
    if set_tracing is None:
        yield
        return
    prior = set_tracing(True)
    try:
        yield
    finally:
        set_tracing(prior)


def _trace(gm: torch.fx.GraphModule):
    """Dynamo's graph as ATen ops, on Dynamo's own fake inputs; None where it cannot be traced."""
    fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    tensors = [x for x in fakes if isinstance(x, torch.Tensor)]
    if any(x is None for x in fakes) or not tensors:
        return None, None
    mode = getattr(tensors[0], "fake_mode", None)
    if mode is None:
        return None, None
    with mode, fx_traceback.preserve_node_meta(), _user_hooks_suspended():
        traced = make_fx(torch.fx.Interpreter(gm).run, tracing_mode="real")(*fakes)
    traced.graph.eliminate_dead_code()  # the detaches autograd recorded while tracing
    return traced, fakes


def rewrite(gm: torch.fx.GraphModule, example_inputs,
            fallback_random: bool = False) -> torch.fx.GraphModule | None:
    """gm with every written-out attention replaced by one scaled_dot_product_attention call,
    as ATen ops; None where there is nothing to replace (AOTAutograd then takes gm itself).
    A dropout on the probabilities becomes the call's dropout_p in CUDA graphs (its mask then
    comes from the attention kernel's own random stream), except under fallback_random, where
    every random number must be eager's: such an attention stays written out, as it does on the
    CPU, where ATen's attention with dropout is the written-out form (its math path)."""
    if not _may_hold_attention(gm, example_inputs):
        return None
    try:
        traced, fakes = _trace(gm)
        if traced is None:
            return None
        # The dropout is the call's only where its fused kernels draw it (CUDA): on the CPU,
        # ATen's attention with dropout runs its math path, the written-out form itself.
        on_cuda = all(x.device.type == "cuda" for x in fakes if isinstance(x, torch.Tensor))
        matches = _C.attention_matches(fx_import.graph_to_json(traced, fakes),
                                       dropout=on_cuda and not fallback_random)
    except Exception as e:  # noqa: BLE001  (the graph stays as Dynamo gave it)
        log.info("coil: attention in training graphs: graph not traced (%s: %s)",
                 type(e).__name__, e)
        return None
    if not matches:
        return None
    nodes = {n.name: n for n in traced.graph.nodes}
    for m in matches:
        product = nodes[m["product"]]
        q, k, v = nodes[m["q"]], nodes[m["k"]], nodes[m["v"]]
        kwargs = {"scale": m["scale"]}
        if m["dropout"]:
            kwargs["dropout_p"] = m["dropout"]
        with traced.graph.inserting_before(product):
            if m["mask"] is not None:
                mask = nodes[m["mask"]]
                if m["mask_negated"]:  # the scores' -inf places: attn_mask keeps the others
                    mask = traced.graph.call_function(aten.logical_not.default, (mask,))
                kwargs["attn_mask"] = mask
            call = traced.graph.call_function(
                aten.scaled_dot_product_attention.default, (q, k, v), kwargs)
            flat = traced.graph.call_function(aten.flatten.using_ints, (call, 0, 1))
        for node in (call, flat):  # where it came from, for the kernels' provenance
            node.meta.update({key: product.meta[key] for key in _PROVENANCE if key in product.meta})
        product.replace_all_uses_with(flat)
        log.info("coil: attention ending in %s replaced by one scaled_dot_product_attention call "
                 "(scale %g, dropout %g) before differentiation", m["product"], m["scale"],
                 m["dropout"])
    traced.graph.eliminate_dead_code()
    traced.recompile()
    return traced
