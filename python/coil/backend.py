"""The torch.compile backend: Dynamo hands over a graph, AOTAutograd traces it to ATen, and each
forward/inference graph is compiled by coil's C++ core. Registered through the
`torch_dynamo_backends` entry point, so `torch.compile(model, backend="coil")` needs no import.

torch.compile's `mode=` and `options=` arrive as keyword arguments of coil_backend (Dynamo's
_TorchCompileWrapper passes them on each graph it captures): they resolve, once per graph, to the
config.Options that every AOTAutograd graph of it (forward, backward, inference) compiles under
(option_check.py has torch.compile check them when it is called). What each graph became is
logged through PyTorch's logging as well as COIL_LOGS (torch_logs.py)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import re
import sys
import tempfile
import time
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from coil import (
    _C,
    attention_training,
    config,
    cudagraphs,
    flex_inline,
    fx_import,
    graph_cache,
    opaque_calls,
    partition,
    runtime,
    torch_logs,
    triton_check,
)


class CoilWarning(UserWarning):
    """A graph (or part of one) did not run through coil's own kernels."""


@dataclasses.dataclass
class CompiledGraph:
    """What coil made of one graph (see coil.compiled_graphs())."""

    graph_id: int
    kind: str  # "inference", "forward", "backward", "subgraph" (a control-flow op's branch or body)
    backend: str = ""  # "cpp" or "triton": which renderer made the kernels
    # "cpp": the graph runs through a C++ wrapper in its kernel library (option cpp_wrapper);
    # "python": through its generated Python module. cpp_wrapper_blocker: why not C++ when asked.
    wrapper: str = "python"
    cpp_wrapper_blocker: str = ""
    kernel_names: list = dataclasses.field(default_factory=list)
    fallback_ops: list = dataclasses.field(default_factory=list)
    extern_ops: list = dataclasses.field(default_factory=list)
    debug_dir: str | None = None
    eager_fallback: bool = False
    eager_reason: str = ""  # why the graph runs eagerly (when eager_fallback)
    seconds: dict = dataclasses.field(default_factory=dict)  # per compile phase (PHASES)
    layout: str = ""  # the layout decision for conv graphs ("channels-last (NHWC) ...: why")
    # Dynamic shapes: whether the graph has symbolic sizes, and each size symbol as
    # "s0 in [2, inf], hint 8" (one build serves every value in the range).
    dynamic: bool = False
    symbols: list = dataclasses.field(default_factory=list)
    # Where Dynamo was when it made this graph: "0/1" is frame 0's second compile (a recompile),
    # frame the user's function ("forward at model.py:12"), and why Dynamo recompiled it (the
    # guard that failed, in the user's terms), when it did.
    compile_id: str = ""
    frame: str = ""
    recompile_reason: str = ""
    options: config.Options | None = None  # what the graph compiled under
    # Whether the graph came from the warm-start graph cache (python/coil/graph_cache.py), which
    # skips AOTAutograd's trace.
    from_graph_cache: bool = False
    # CUDA graphs (options cudagraphs=True, mode="reduce-overhead"; python/coil/cudagraphs.py):
    # whether calls are recorded and replayed, why not (or, when captured, a later change such as
    # the size limit reached), the inputs read in place (parameters, buffers), and how many
    # distinct sizes have been recorded.
    cudagraph: bool = False
    cudagraph_reason: str = ""
    cudagraph_static_inputs: list = dataclasses.field(default_factory=list)
    cudagraph_sizes: int = 0


_records: list[CompiledGraph] = []
_ids = itertools.count()


def compiled_graphs() -> list[CompiledGraph]:
    return list(_records)


def graph_breaks() -> dict:
    """Dynamo's graph breaks so far, as {reason: count} in the user's terms (each break splits a
    function into several graphs, each compiled by coil; see compiled_graphs())."""
    return dict(torch._dynamo.utils.counters.get("graph_break", {}))


def reset() -> None:
    _records.clear()
    opaque_calls.clear()  # (modules loaded before keep the callables they bound)
    torch._dynamo.reset()


def _symbol_text(row: dict) -> str:
    lo = row.get("lo", "-inf")
    hi = row.get("hi", "inf")
    return f"{row['name']} in [{lo}, {hi}], hint {row['hint']}"


def _dynamo_context(gm: torch.fx.GraphModule, record: CompiledGraph) -> None:
    """Fills in where Dynamo is: the compile id, the user's code, and the recompile reason.
    Read from Dynamo's compile context while the backend runs (best effort: fields stay empty
    where a torch version keeps them elsewhere)."""
    try:
        cid = torch._guards.CompileContext.current_compile_id()
        record.compile_id = "" if cid is None else str(cid)
        ctx = torch._dynamo.utils.get_metrics_context()
        metrics = getattr(ctx, "_metrics", {}) or {}
        record.recompile_reason = metrics.get("recompile_reason") or ""
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace") or ""
        found = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', trace)
        if found:
            file, line, name = found[-1]
            record.frame = f"{name} at {file}:{line}"
            break


@functools.cache
def _decompositions(fallback_random: bool = False) -> dict:
    """Core ATen decompositions, and torch's own for the ops coil asks for besides
    (coil::lower::extra_decompositions: training-mode batch norm), minus the ops coil takes whole
    (coil::lower::keeps_op_whole: the ops it lowers, attention, and under fallback_random every
    random op)."""
    from torch._decomp import core_aten_decompositions

    from torch._decomp import decomposition_table

    def name(op) -> str:  # "aten._native_batch_norm_legit.no_stats", as coil names targets
        return op.name().replace("::", ".")

    from coil import decompositions, runtime  # noqa: F401  (runtime defines coil's ops)

    extra = set(_C.extra_decompositions())
    candidates = dict(core_aten_decompositions())
    for op, fn in list(decomposition_table.items()) + list(decompositions.OWN.items()):
        base = ".".join(name(op).split(".")[:2])
        if base in extra:  # coil's own (OWN, listed last) over torch's
            candidates[op] = decompositions.where_it_applies(base, fn)
    table = {}
    for op, fn in candidates.items():
        random = torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())
        if _C.keeps_op_whole(name(op), random, fallback_random):
            continue
        table[op] = fn
    return table


def _log(opts, artifacts: dict, fallback_ops: list, record: CompiledGraph) -> None:
    wanted = {
        "graph": ["graph.txt"],
        "ir": ["ir_pre_fusion.txt", "ir_post_fusion.txt"],
        "fusion": ["fusion.txt"],
        "schedule": ["schedule.txt"],
        "output_code": ["output_code.py"],
    }
    for key, files in wanted.items():
        if key in opts.logs:
            for f in files:
                print(f"[coil] graph {record.graph_id} {f}:\n{artifacts.get(f, '')}", file=sys.stderr)
    if "fallback" in opts.logs and fallback_ops:
        print(f"[coil] graph {record.graph_id} fallback ops: {', '.join(fallback_ops)}", file=sys.stderr)
    if "perf" in opts.logs:
        times = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in record.seconds.items())
        print(f"[coil] graph {record.graph_id} compile: {times}", file=sys.stderr)
    if "dynamic" in opts.logs:
        print(f"[coil] {describe(record)}", file=sys.stderr)


def describe(record: CompiledGraph) -> str:
    """One line on a graph's shapes and why Dynamo compiled it (COIL_LOGS=dynamic)."""
    what = f"graph {record.graph_id} ({record.kind}"
    what += f", Dynamo {record.compile_id}" if record.compile_id else ""
    what += f", {record.frame}" if record.frame else ""
    what += "): "
    what += ("dynamic, " + "; ".join(record.symbols)) if record.dynamic else "static shapes"
    if record.recompile_reason:
        what += f"; recompiled because {record.recompile_reason}"
    return what


# A graph's compile phases, in the order they run (CompiledGraph.seconds): FX import, the C++
# core's lower/schedule/codegen, the kernels' build (or build-cache hit) and load.
PHASES = ("import", "lower", "schedule", "codegen", "build")


def _in_phase_order(seconds: dict) -> dict:
    order = {name: i for i, name in enumerate(PHASES)}
    return {k: seconds[k] for k in sorted(seconds, key=lambda k: order.get(k, len(PHASES)))}


def _debug_dir(opts, record: CompiledGraph) -> str | None:
    if not opts.debug_dir:
        return None
    return os.path.join(opts.debug_dir, f"graph_{record.graph_id}_{record.kind}")


def compile_fx_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "inference",
                     opts: config.Options | None = None):
    """Compiles one ATen-level FX graph under `opts` (default: config.for_compile()); returns a
    boxed callable. Never raises for a graph coil cannot handle: that graph runs eagerly, with a
    CoilWarning naming the debug folder."""
    opts = opts or config.for_compile()
    return _compile_graph(gm, example_inputs, kind, opts)[0]


_vec_warned = False


def _cpp_vectorize(opts: config.Options, example_inputs) -> str:
    """opts.cpp_vectorize, or "off" where vector kernels do not build on this machine (checked
    once, for graphs that get C++ kernels: those without CUDA tensors), with one warning."""
    global _vec_warned
    if opts.cpp_vectorize == "off" or opts.cpu_backend != "cpp":
        return opts.cpp_vectorize
    if any(isinstance(t, torch.Tensor) and t.is_cuda for t in example_inputs):
        return opts.cpp_vectorize
    if runtime.vec_flags() is not None:
        return opts.cpp_vectorize
    if not _vec_warned:
        _vec_warned = True
        warnings.warn(
            "coil: C++ kernels with at::vec vector loops do not build with "
            f"{opts.compiler!r} here (a probe kernel failed; see its build.log in "
            f"{opts.cache_dir}); C++ kernels are scalar (cpp_vectorize='off')",
            CoilWarning,
            stacklevel=2,
        )
    return "off"


def _compile_graph(gm: torch.fx.GraphModule, example_inputs, kind: str, opts: config.Options):
    """(boxed call, its CompiledGraph record, the tensor constants the call appends, coil's graph
    JSON: "" when the graph runs eagerly)."""
    with config.active(opts):
        return _compile(gm, example_inputs, kind, opts)


def _new_record(gm: torch.fx.GraphModule, kind: str, opts: config.Options) -> CompiledGraph:
    record = CompiledGraph(graph_id=next(_ids), kind=kind, options=opts)
    _records.append(record)
    record.debug_dir = _debug_dir(opts, record)
    _dynamo_context(gm, record)
    return record


def _compile_subgraph(sub: torch.fx.GraphModule, opts: config.Options, compiled: dict):
    """A control-flow op's branch or loop body, or a region invoke_subgraph calls, compiled as a
    graph of its own (opaque_calls.py); its example inputs are its placeholders' traced values.
    `compiled`: the parent graph's subgraphs compiled so far (a region called twice is compiled
    once)."""
    if id(sub) not in compiled:
        examples = [n.meta.get("val") for n in sub.graph.nodes if n.op == "placeholder"]
        compiled[id(sub)] = (sub, _compile(sub, examples, "subgraph", opts)[0])
    return compiled[id(sub)][1]


def _donated_inputs() -> list[int]:
    """The backward graph's inputs AOTAutograd donates (torch._functorch.config.donated_buffer):
    saved activations that no output, input or view outside the backward shares, which its
    memory plan may then write in place once read for the last time (as Inductor's does)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    return list(getattr(metadata, "bw_donated_idxs", None) or [])


def _compile(gm: torch.fx.GraphModule, example_inputs, kind: str, opts: config.Options):
    record = _new_record(gm, kind, opts)
    try:
        if kind != "backward":
            flex_inline.inline_flex_attention(gm, _decompositions(bool(opts.fallback_random)))
        start = time.perf_counter()
        imported = fx_import.import_graph(
            gm, example_inputs, functools.partial(_compile_subgraph, opts=opts, compiled={}),
            donated=_donated_inputs() if kind == "backward" else ())
        record.seconds["import"] = time.perf_counter() - start
        record.symbols = [_symbol_text(row) for row in imported.symbols]
        record.dynamic = bool(record.symbols)
    except fx_import.UnsupportedGraph as e:
        return (*_eager(gm, record, f"graph not supported: {e}", None), "")
    except Exception as e:  # noqa: BLE001 - a bug in the import must not stop the user's program
        return (*_eager(gm, record, f"graph import failed: {type(e).__name__}: {e}", None), "")
    call, record, constants = _compile_json(gm, imported.json, imported.constants, record, kind,
                                            opts, example_inputs)
    return call, record, constants, "" if record.eager_fallback else imported.json


def _compile_json(gm, graph_json: str, constants: list, record: CompiledGraph, kind: str,
                  opts: config.Options, example_inputs, probe: bool = False):
    """coil's graph (JSON) through the C++ core and into a loaded module; gm runs eagerly if that
    fails. probe: a warm-start cache entry tried, whose failure is a miss (not logged)."""
    try:
        result = _C.compile_graph(
            graph_json,
            record.debug_dir or "",
            f"coil graph {record.graph_id} ({kind})",
            cpu_backend=opts.cpu_backend,
            channels_last=opts.channels_last,
            gemm_padding=opts.gemm_padding,
            inference=kind in ("inference", "subgraph"),
            fallback_random=bool(opts.fallback_random),
            cpp_vectorize=_cpp_vectorize(opts, example_inputs),
            attention_rewrite=bool(opts.attention_rewrite),
            # A backward graph's inputs (saved activations, gradients) free as the wrapper drops
            # them: the launch order counts that memory (sched/launch_order.cpp).
            inputs_freed=kind == "backward",
            triton_gpu_source=bool(opts.triton_check_target),
            cpp_wrapper=bool(opts.cpp_wrapper),
        )
        record.wrapper = result["wrapper"]
        record.cpp_wrapper_blocker = result["cpp_wrapper_blocker"]
        record.backend = result["backend"]
        record.kernel_names = list(result["kernel_names"])
        record.fallback_ops = list(result["fallback_ops"])
        record.extern_ops = list(result["extern_ops"])
        record.seconds.update(result["seconds"])  # after "import": lower, schedule, codegen
        first = result["artifacts"].get("schedule.txt", "").split("\n", 1)[0]
        record.layout = first[len("layout: ") :] if first.startswith("layout: ") else ""
        if record.fallback_ops and not opts.allow_fallback:
            ops = ", ".join(sorted(set(record.fallback_ops)))
            why = f"ATen fallback ops not allowed (allow_fallback=False): {ops}"
            return _eager(gm, record, why, record.debug_dir, quiet=probe)
        path = os.path.join(record.debug_dir, "output_code.py") if record.debug_dir else None
        start = time.perf_counter()
        module = runtime.load_module(result["output_code"], f"coil_graph_{record.graph_id}", path)
        # The kernels built by the C++ compiler (or found in the build cache) and loaded.
        record.seconds["build"] = time.perf_counter() - start
        record.seconds = _in_phase_order(record.seconds)
        if opts.triton_check_target and record.backend == "triton":
            # Every kernel compiled for that GPU (triton_check.py): one that does not compile
            # fails the graph's compile here, whatever the interpreter made of it.
            triton_check.check_module(module, opts.triton_check_target,
                                      result["triton_gpu_source"] or None)
    except Exception as e:  # noqa: BLE001 - any failure must leave the user's program running
        folder = record.debug_dir or _failure_dir(graph_json, record)
        return _eager(gm, record, f"{type(e).__name__}: {e}", folder, quiet=probe)
    _log(opts, result["artifacts"], record.fallback_ops, record)
    torch_logs.graph_compiled(record, result["artifacts"])
    opaque = opaque_calls.describe(record.fallback_ops)
    if opaque and record.debug_dir:
        with open(os.path.join(record.debug_dir, "opaque_calls.txt"), "w") as f:
            f.write(opaque)
    call = _GuardedCall(_with_constants(module.call, constants), gm, record, folder=record.debug_dir,
                        keep_inputs=kind != "backward")
    return call, record, constants


class _GuardedCall:
    """A compiled graph's call that survives its own kernels: a kernel that fails to build or
    launch at its first call for some sizes (runtime.KernelFailure: a Triton compile error at
    first launch, a config the GPU refuses) sends the graph to its fallback (the ATen graph it
    was compiled from, run eagerly) for that call and every later one, with a CoilWarning naming
    the kernel and the debug folder, instead of raising into the user's program.

    A failing call is run again by the fallback from its inputs, which it keeps for the length of
    the call (keep_inputs). A backward graph's call frees its inputs (saved activations) as it
    goes, so it does not keep them: its kernels were all compiled before it was returned
    (triton_launcher.precompile), and a failure there is raised as it is."""

    def __init__(self, call, gm, record: CompiledGraph, folder: str | None, keep_inputs: bool):
        # An attribute of the instance, not the class: AOTAutograd wraps a backward in
        # torch._dynamo.disable, whose functools.wraps copies the instance's __dict__ only, and
        # calls what it wrapped with its inputs unpacked unless it sees _boxed_call.
        self._boxed_call = True
        self.call = call
        self.gm = gm
        self.record = record
        self.folder = folder
        self.keep_inputs = keep_inputs
        self.fallback = None
        # Called once the graph has fallen back (coil_backend: the function's later calls then
        # run Dynamo's graph as captured, see _Switchable).
        self.on_failure = None

    def __call__(self, args):
        if self.fallback is not None:
            return self.fallback(args)
        if not self.keep_inputs:
            return self.call(args)
        inputs = list(args)
        try:
            return self.call(args)
        except runtime.KernelFailure as e:
            self.fallback = _eager(self.gm, self.record, str(e), self.folder)[0]
            if self.on_failure is not None:
                self.on_failure(self.record)
            return self.fallback(inputs)


def _with_constants(call, constants: list):
    """The generated call(args), given the graph's tensor constants as its last inputs (see
    fx_import): the compiled graph holds on to them, the generated code and kernels do not."""
    if not constants:
        return call
    constants = tuple(constants)

    def call_with_constants(args):
        args.extend(constants)
        return call(args)

    return call_with_constants


def _failure_dir(graph_json: str, record: CompiledGraph) -> str | None:
    """Writes the failing graph's artifacts somewhere the user can find them."""
    folder = tempfile.mkdtemp(prefix=f"coil_failed_graph_{record.graph_id}_")
    try:
        _C.compile_graph(
            graph_json,
            folder,
            f"coil graph {record.graph_id} (failed)",
            cpu_backend=config.options.cpu_backend,
        )
    except Exception:  # noqa: BLE001 - the graph itself may be what fails
        with open(os.path.join(folder, "graph.json"), "w") as f:
            f.write(graph_json)
    return folder


def _eager(gm, record: CompiledGraph, why: str, folder: str | None, quiet: bool = False):
    """gm run eagerly for `record`'s graph, with a CoilWarning and a log record (not when quiet:
    a warm-start cache probe whose failure only means the graph compiles the ordinary way)."""
    record.eager_fallback = True
    record.eager_reason = why
    where = f" Debug folder: {folder}" if folder else " Set COIL_DEBUG=1 to keep the graph's artifacts."
    if not quiet:
        torch_logs.graph_eager(record, why)
    warnings.warn(f"coil: graph {record.graph_id} runs eagerly ({why}).{where}", CoilWarning, stacklevel=2)
    return make_boxed_func(gm.forward), record, []


def _from_graph_cache(gm, example_inputs, opts: config.Options, key: str):
    """Dynamo's graph compiled from coil's cached graph of its AOTAutograd trace (graph_cache.py),
    or None (a miss, or an entry that no longer compiles: removed, and the graph compiles the
    ordinary way). Dynamo calls the result with its inputs unpacked, as it calls AOTAutograd's."""
    graph_json = graph_cache.load(opts, key)
    if graph_json is None:
        return None
    with config.active(opts), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoilWarning)
        record = _new_record(gm, "inference", opts)
        call, record, _ = _compile_json(gm, graph_json, [], record, "inference", opts,
                                        example_inputs, probe=True)
    if record.eager_fallback:  # only a miss: its warnings are dropped
        _records.remove(record)
        graph_cache.remove(opts, key)
        return None
    for w in caught:  # a hit says what a compile would have said (e.g. scalar C++ kernels)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    record.from_graph_cache = True
    if isinstance(call, _GuardedCall):  # (its fallback is Dynamo's graph itself)
        call.on_failure = cudagraphs.Function(num_dynamo_inputs=len(example_inputs)).kernel_failed

    def run(*args):
        return call(list(args))

    return run


def _compilers(opts: config.Options, function: cudagraphs.Function,
               warm_key: str | None = None) -> dict:
    """AOTAutograd's compilers for one function, bound to its options (a backward graph compiles
    at the first backward call, after torch.compile has returned) and, under cudagraphs, to what
    its graphs share in CUDA graphs (`function`)."""

    def compile_one(gm, example_inputs, kind):
        call, record, constants, graph_json = _compile_graph(gm, example_inputs, kind, opts)
        if isinstance(call, _GuardedCall) and kind in ("inference", "forward"):
            call.on_failure = function.kernel_failed
        if warm_key and kind == "inference" and graph_json and not constants and not record.dynamic:
            graph_inputs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
            if graph_cache.trace_is_plain(function.num_dynamo_inputs, graph_inputs):
                graph_cache.store(opts, warm_key, graph_json)
        if not opts.cudagraphs:
            return call
        return cudagraphs.wrap(call, gm, example_inputs, record, constants, function,
                               opts.cudagraph_max_recordings)

    def inference_compiler(gm, example_inputs):
        return compile_one(gm, example_inputs, "inference")

    def forward_compiler(gm, example_inputs):
        return compile_one(gm, example_inputs, "forward")

    def backward_compiler(gm, example_inputs):
        if not opts.compile_backward:
            call = make_boxed_func(gm.forward)
            if opts.cudagraphs and function.forward_captured:
                return cudagraphs.uncaptured_backward(call, function)
            return call
        return compile_one(gm, example_inputs, "backward")

    return {
        "fw_compiler": forward_compiler,
        "bw_compiler": backward_compiler,
        "inference_compiler": inference_compiler,
    }


def coil_backend(gm: torch.fx.GraphModule, example_inputs, mode: str | None = None,
                 options: dict | None = None):
    """The Dynamo backend: AOTAutograd with coil as the forward/backward/inference compiler.
    mode/options: torch.compile's (see config.for_compile and config.MODES)."""
    opts = config.for_compile(mode, options)
    if opts.cpu_backend == "cpp" and opts.cpp_vectorize != "off" and not all(
        isinstance(t, torch.Tensor) and t.is_cuda for t in example_inputs
    ):
        runtime.prepare_vec_flags()  # C++ kernels ahead: their flags found while Dynamo traces
        if opts.cpp_wrapper:
            runtime.prepare_aten_shim()
    function = cudagraphs.Function(num_dynamo_inputs=len(example_inputs))
    warm_key = graph_cache.key_for(gm, example_inputs, opts)
    if warm_key:
        cached = _from_graph_cache(gm, example_inputs, opts, warm_key)
        if cached is not None:
            return cached
    extra = {}
    if opts.partitioner == "min_cut":
        extra["partition_fn"] = partition.min_cut_partition
    aot = aot_autograd(
        **_compilers(opts, function, warm_key),
        decompositions=_decompositions(bool(opts.fallback_random)),
        keep_inference_input_mutations=True,
        **extra,
    )
    first = len(_records)
    if opts.attention_rewrite:
        rewritten = attention_training.rewrite(gm, example_inputs, bool(opts.fallback_random))
        if rewritten is not None:
            try:
                return _dynamo_graph_if_eager(aot(rewritten, example_inputs), gm, first, function)
            except torch._dynamo.exc.TorchDynamoException:
                raise  # Dynamo's own control flow (a restart of its analysis)
            except Exception as e:  # noqa: BLE001  (Dynamo's graph as it was, below)
                warnings.warn(f"coil: the graph with its attention rewritten did not trace "
                              f"({type(e).__name__}: {e}); compiling it as written",
                              CoilWarning, stacklevel=2)
    try:
        compiled = aot(gm, example_inputs)
    except torch._dynamo.exc.TorchDynamoException:
        raise
    except Exception as e:  # noqa: BLE001 - AOTAutograd's trace failed: the user's graph runs
        record = _new_record(gm, "inference", opts)
        _eager(gm, record, f"AOTAutograd did not trace the graph ({type(e).__name__}: {e})", None)
        return gm.forward
    return _dynamo_graph_if_eager(compiled, gm, first, function)


def _dynamo_graph_if_eager(compiled, gm: torch.fx.GraphModule, first: int,
                           function: cudagraphs.Function):
    """`compiled`, or Dynamo's own graph `gm` where coil sent the AOTAutograd graph it compiled
    (the inference graph, or a training graph's forward) to eager: run as Dynamo captured it,
    with torch's own composite ops and autograd, the graph costs what the user's eager program
    does. AOTAutograd's graph has those ops decomposed into many smaller ones (a layer norm
    into its means and variances), slower than eager when run eagerly (crossvit_9_240 on the
    H200: 18.6 ms against eager's 13.3). `first`: where this function's records begin."""
    eager = [r for r in _records[first:] if r.eager_fallback and r.kind in ("inference", "forward")]
    if not eager:
        return _switchable(compiled, gm, function)
    for r in eager:
        r.eager_reason += "; Dynamo's graph runs as captured"
    return gm.forward


def _switchable(compiled, gm: torch.fx.GraphModule, function: cudagraphs.Function):
    """`compiled`, until a kernel of its inference or forward graph fails at a call (a Triton
    compile error at first launch: _GuardedCall runs that call's decomposed graph eagerly); from
    then on Dynamo's graph `gm` as captured, which costs what the user's eager program does (see
    _dynamo_graph_if_eager). A backward's failure is raised: its kernels compile before it runs."""

    def run(*args):
        if function.fell_back:
            return gm.forward(*args)
        return compiled(*args)

    # What AOTAutograd hangs on its function (zero_grad, named_parameters, serialize) stays.
    run.__dict__.update(getattr(compiled, "__dict__", {}))
    return run
