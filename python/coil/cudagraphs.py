"""CUDA graphs around coil's compiled calls (mode="reduce-overhead", options={"cudagraphs": True}).

Takes each graph AOTAutograd hands coil (inference, forward, backward) once coil has compiled it,
decides whether recording it in a CUDA graph is safe, and if so wraps the compiled call in
PyTorch's own CUDA-graph trees (torch._inductor.cudagraph_trees, what Inductor's reduce-overhead
uses): the first call at a size runs uncaptured as a warm-up, the next is recorded, later ones
replay. One memory pool per device serves every graph of the tree (a forward and its backward,
the graphs of a graph break); parameters and buffers are static inputs (read in place; a changed
address re-records), other tensor inputs are copied into the graph's own buffers; outputs live in
the pool and are overwritten by a later replay (torch.compiler.cudagraph_mark_step_begin; reading
an overwritten output is an error, as under Inductor).

A graph is not captured (it runs as coil compiled it, with one CoilWarning naming the reason) when:
it is not on exactly one CUDA device (a CPU tensor or op inside, several devices); it mutates an
input that is not a parameter or buffer, or rebinds an input's storage; it holds an op that waits
for the host (data-dependent sizes, ops tagged cudagraph-unsafe, coil's list of syncing ATen ops);
a tensor input is not a tensor or SymInt; coil ran it eagerly; or, for a backward graph, its
forward was not captured. A dynamic graph records one CUDA graph per distinct size up to
Options.cudagraph_max_recordings; further sizes run uncaptured. Each graph's CompiledGraph
record says whether it was captured and why not (`cudagraph`, `cudagraph_reason`), and the debug
folder gets `cudagraphs.txt`. Tests: tests/python/test_cudagraphs.py (the decisions, on the CPU),
tests/gpu/test_cudagraphs_gpu.py (capture and replay).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import warnings

import torch

# ATen ops that make the host wait for the device, or read a device value on the host, without
# showing it in the graph's sizes (data-dependent sizes are found through unbacked symbols).
HOST_SYNC_OPS = frozenset(
    {
        "aten._local_scalar_dense.default",
        "aten.item.default",
        "aten.equal.default",
        "aten.is_nonzero.default",
        "aten.allclose.default",
        "aten.nonzero.default",
        "aten.masked_select.default",
        "aten.unique_consecutive.default",
        "aten._unique2.default",
        "aten.unique_dim.default",
        "aten.bincount.default",
        "aten.repeat_interleave.Tensor",
    }
)


@dataclasses.dataclass
class Function:
    """What the graphs of one compiled function share (one coil_backend call: its inference, or
    its forward and backward graphs): the CUDA device of its forward and whether the forward is
    captured (a backward is captured only after a captured forward, as under Inductor), and
    whether the last forward call ran captured."""

    num_dynamo_inputs: int
    forward_captured: bool | None = None  # None until the forward graph compiles
    device_index: int | None = None
    last_forward_captured: bool = True
    # A kernel of its inference or forward graph failed at a call (backend._GuardedCall): later
    # calls run Dynamo's graph as captured (backend._switchable).
    fell_back: bool = False

    def kernel_failed(self, record) -> None:
        self.fell_back = True
        record.eager_reason += "; later calls run Dynamo's graph as captured"


def device_of(gm: torch.fx.GraphModule) -> tuple[list, dict]:
    """The devices of the graph's tensors (inputs, intermediates, outputs, constants), each with
    the first node that has one there: CPU ops and CPU inputs show up as a 'cpu' entry."""
    first: dict = {}
    for node in gm.graph.nodes:
        val = node.meta.get("val", node.meta.get("fake_result"))
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            if isinstance(v, torch.Tensor) and v.device.type != "meta":
                first.setdefault(v.device, node)
    return list(first), first


def _mutated_inputs(gm: torch.fx.GraphModule) -> set:
    from torch._dynamo.backends.cudagraphs import find_input_mutations

    return set(find_input_mutations(gm.graph))


def _storage_rebinds(gm: torch.fx.GraphModule) -> str | None:
    try:
        from torch._inductor.cudagraph_utils import (
            get_input_storage_mutation_info,
            get_input_storage_mutation_reason,
        )
    except ImportError:  # older torch: set_ on an input is rare; the tree checks addresses
        return None
    return get_input_storage_mutation_reason(get_input_storage_mutation_info(gm))


def static_input_idxs(gm: torch.fx.GraphModule, example_inputs, kind: str,
                      num_dynamo_inputs: int) -> list[int]:
    """The inputs at fixed addresses, as Inductor picks them (compile_fx: get_static_input_idxs,
    compile_fx_backward): for a forward or inference graph the parameters and buffers (AOTAutograd's
    static_input_indices when Dynamo inlines nn modules, else the lifted ones in front); for a
    backward graph everything before the tangents (saved values, outputs of the captured forward)."""
    from torch._inductor.utils import count_tangents, num_fw_fixed_arguments

    if kind == "backward":
        return list(range(count_tangents(gm)))
    fixed = list(range(max(0, num_fw_fixed_arguments(num_dynamo_inputs, len(example_inputs)))))
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context else None
    indices = getattr(metadata, "static_input_indices", None) if metadata else None
    return sorted(set(indices)) if indices is not None else fixed


def why_not(gm: torch.fx.GraphModule, example_inputs, static: list[int]) -> str | None:
    """Why recording this graph in a CUDA graph is not safe; None when it is."""
    devices, first = device_of(gm)
    cpu = torch.device("cpu")
    if not devices:
        return "no tensors on a CUDA device in the graph"
    if devices == [cpu]:
        return "graph on the CPU (CUDA graphs need a CUDA device)"
    if cpu in first:
        node = first[cpu]
        what = "CPU input" if node.op == "placeholder" else "CPU op"
        return f"{what} in a CUDA graph ({node.name}: {_target(node)})"
    if len(devices) > 1:
        return "graph on several devices: " + ", ".join(str(d) for d in devices)
    if devices[0].type != "cuda":
        return f"graph on {devices[0]}, not a CUDA device"
    if not all(isinstance(x, (torch.Tensor, int, torch.SymInt, torch.Generator))
               for x in example_inputs):
        kinds = sorted({type(x).__name__ for x in example_inputs
                        if not isinstance(x, (torch.Tensor, int, torch.SymInt))})
        return f"non-tensor inputs ({', '.join(kinds)})"
    if rebind := _storage_rebinds(gm):
        return rebind.split(".")[0]
    mutated = sorted(_mutated_inputs(gm) - set(static))
    if mutated:
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        listed = ", ".join(names[i] for i in mutated[:4]) + (", ..." if len(mutated) > 4 else "")
        return (f"mutates input(s) that are not parameters or buffers ({listed}): a replay "
                "would write to the graph's copy, not to the caller's tensor")
    if node := _host_sync_node(gm):
        return f"op that waits for the host ({node.name}: {_target(node)})"
    if allocator := _allocator_reason():
        return allocator
    return None


def _target(node: torch.fx.Node) -> str:
    return str(node.target) if node.op != "placeholder" else "input"


def _host_sync_node(gm: torch.fx.GraphModule):
    for node in gm.graph.nodes:
        if node.op == "call_function" and str(node.target) in HOST_SYNC_OPS:
            return node
    from torch._inductor.utils import get_first_incompatible_cudagraph_node

    return get_first_incompatible_cudagraph_node(gm)


def _allocator_reason() -> str | None:
    from torch._inductor import cudagraph_utils

    check = getattr(cudagraph_utils, "check_caching_allocator_for_cudagraphs", None)
    if check is None or not torch.cuda.is_available():
        return None
    reason = check()
    return "CUDA caching allocator disabled" if reason else None


@functools.cache
def _accepted_kwargs() -> frozenset:
    """The keyword arguments this torch's cudagraph_trees.cudagraphify takes (cudagraphify_impl
    passes its own on to it): the same call serves torch versions that lack some."""
    from torch._inductor import cudagraph_trees

    return frozenset(inspect.signature(cudagraph_trees.cudagraphify).parameters)


def _compile_id():
    current = getattr(torch._guards.CompileContext, "current_compile_id", None)
    return current() if current else None


def _stack_traces(gm: torch.fx.GraphModule) -> list:
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    args = out.args[0] if out.args else ()
    args = args if isinstance(args, (list, tuple)) else (args,)
    return [a.meta.get("stack_trace") if isinstance(a, torch.fx.Node) else None for a in args]


def _warn(record, why: str) -> None:
    from coil.backend import CoilWarning

    warnings.warn(
        f"coil: graph {record.graph_id} ({record.kind}) runs without CUDA graphs: {why}",
        CoilWarning,
        stacklevel=3,
    )


def write_debug(record) -> None:
    """cudagraphs.txt in the graph's debug folder: captured or not, and why."""
    if not record.debug_dir or not os.path.isdir(record.debug_dir):
        return
    lines = [f"captured: {'yes' if record.cudagraph else 'no'}"]
    if record.cudagraph_reason:
        lines.append(f"{'note' if record.cudagraph else 'reason'}: {record.cudagraph_reason}")
    if record.cudagraph:
        lines.append(f"static inputs (read in place): {record.cudagraph_static_inputs}")
        lines.append(f"sizes recorded: {record.cudagraph_sizes}")
    with open(os.path.join(record.debug_dir, "cudagraphs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def not_captured(call, record, function: Function, why: str, warn: bool = True):
    """call, run uncaptured; the record and debug folder say why. A backward graph whose forward
    was captured tells the tree that the backward is running (Inductor's
    maybe_handle_backward_generation), so the tree does not wait for it before a new step."""
    record.cudagraph = False
    record.cudagraph_reason = why
    write_debug(record)
    if warn:
        _warn(record, why)
    if record.kind == "forward":
        function.forward_captured = False
    if record.kind == "backward" and function.forward_captured:
        return uncaptured_backward(call, function)
    return call


def uncaptured_backward(call, function: Function):
    """A backward run outside CUDA graphs after a captured forward (see not_captured)."""
    from torch._inductor import cudagraph_trees

    def backward(args):
        manager = cudagraph_trees.get_manager(function.device_index or 0,
                                              create_if_none_exists=False)
        if manager is not None:
            manager.set_to_running_backward()
        return call(args)

    backward._boxed_call = True
    return backward


def wrap(call, gm: torch.fx.GraphModule, example_inputs, record, constants: list,
         function: Function, max_recordings: int):
    """The compiled boxed `call` of one graph, captured in CUDA graphs where safe (see the module
    docstring); records the decision in `record`."""
    kind = record.kind
    static = static_input_idxs(gm, example_inputs, kind, function.num_dynamo_inputs)
    why = why_not(gm, example_inputs, static)
    if kind == "backward" and not function.forward_captured:
        # Said once, for the forward graph.
        why = why or "its forward graph is not captured"
        return not_captured(call, record, function, why, warn=False)
    if why:
        return not_captured(call, record, function, why)
    if record.eager_fallback:  # coil's own warning said so
        return not_captured(call, record, function,
                            f"coil runs this graph eagerly ({record.eager_reason})", warn=False)
    from torch._inductor import cudagraph_trees
    from torch._inductor.cudagraph_utils import get_placeholder_info

    devices, _ = device_of(gm)
    device_index = devices[0].index if devices[0].index is not None else 0
    if kind == "forward":
        function.forward_captured = True
        function.device_index = device_index
    record.cudagraph = True
    record.cudagraph_static_inputs = static
    write_debug(record)
    kwargs = {
        "device_index": device_index,
        "is_backward": kind == "backward",
        "is_inference": kind == "inference",
        "stack_traces": _stack_traces(gm),
        "constants": tuple(t for t in constants if isinstance(t, torch.Tensor)),
        "placeholders": tuple(get_placeholder_info(gm.graph)),
        "mutated_input_idxs": tuple(sorted(_mutated_inputs(gm))),
        "compile_id": _compile_id(),
    }
    kwargs = {k: v for k, v in kwargs.items() if k in _accepted_kwargs()}
    # The size symbols' positions: each distinct tuple of their values is one recording.
    size_args = [i for i, x in enumerate(example_inputs) if isinstance(x, (int, torch.SymInt))]
    sizes: set = set()
    tree = None

    def run(args):
        nonlocal tree
        if kind == "backward" and not function.last_forward_captured:
            return backward_after_uncaptured_forward(args)
        key = tuple(args[i] for i in size_args)
        if key not in sizes:
            if len(sizes) >= max_recordings:
                return over_limit(args, key)
            sizes.add(key)
            record.cudagraph_sizes = len(sizes)
        if kind == "forward":
            function.last_forward_captured = True
        if tree is None:
            # Made at the first call, from real inputs: cudagraphify_impl finds the size
            # arguments by their being ints (SymInts at compile time).
            tree = cudagraph_trees.cudagraphify_impl(call, args, static, **kwargs)
        return tree(args)

    warned = []

    def over_limit(args, key):
        if not warned:
            warned.append(key)
            note = (f"{max_recordings} sizes recorded (cudagraph_max_recordings); further "
                    f"sizes run uncaptured, first {key}")
            record.cudagraph_reason = note
            write_debug(record)
            _warn(record, note)
        if kind == "forward":
            function.last_forward_captured = False
        if kind == "backward":
            return backward_after_uncaptured_forward(args)
        return call(args)

    backward_outside = uncaptured_backward(call, function) if kind == "backward" else None

    def backward_after_uncaptured_forward(args):
        # Its saved values are not the pool's: recording them as static inputs would re-record
        # at every step.
        return backward_outside(args)

    run._boxed_call = True
    return run
