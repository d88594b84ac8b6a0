"""Every coil option in one place. Environment variables are read here, once, at import.

Three ways to set an option, each scoped differently:
- the environment (below): the defaults of the whole process;
- `coil.config.patch(name=value)`: for what compiles inside the `with` block;
- `torch.compile(fn, backend="coil", options={"name": value})`: for that compiled function only
  (every graph of it, its backward graphs included, whenever they compile). Unknown names and
  values outside `CHOICES` are errors, raised by torch.compile itself (option_check.py).
  `mode=` picks a set of options (`MODES`).

COIL_DEBUG=1            write each compiled graph's artifacts under ./coil_debug/run_<time>_<pid>/
COIL_DEBUG_DIR=path     write them under path instead
COIL_CACHE_DIR=path     where built kernels are cached (default: a private folder in the temp dir)
COIL_LOGS=a,b,...       print artifacts to stderr: graph, ir, fusion, schedule, output_code,
                        fallback, perf (phase timings, Triton launch tuning), dynamic (per graph:
                        its size symbols, Dynamo's compile id and why it recompiled; with
                        TORCH_LOGS=recompiles,graph_breaks Dynamo says more)
COIL_COMPILE_BACKWARD=0 run training graphs' backward passes eagerly (default: coil compiles them)
COIL_GRAPH_CACHE=0      no warm-start graph cache (graph_cache option; python/coil/graph_cache.py)
COIL_CHANNELS_LAST=v    the channels_last option: "auto" (default: CUDA inference graphs with
                        bf16/fp16 2-D convolutions run channels-last), "on"/1 or "off"/0
COIL_CPU_BACKEND=name   kernels for CPU tensors: "cpp" (default) or "triton" (Triton kernels run by
                        Triton's interpreter; needs TRITON_INTERPRET=1; slow, for testing).
                        Graphs on CUDA devices always get Triton kernels.
COIL_ALLOW_FALLBACK=0   a graph that needs an ATen fallback op (an op coil does not lower, run
                        through torch) is not compiled: it runs eagerly with a CoilWarning, as any
                        graph coil cannot compile. Extern calls (mm, conv) are still allowed.
                        Used to measure what coil lowers itself (python -m coil.coverage).
COIL_FALLBACK_RANDOM=1  random ops run as ATen ops, drawing eager's random numbers (default: follow
                        torch._inductor.config.fallback_random when a function compiles)
COIL_TRITON_CHECK=sm_90 every module coil loads with Triton kernels also compiles them for that
                        CUDA architecture, without a GPU (python/coil/triton_check.py): a kernel
                        that does not compile fails the graph's compile. For testing, with
                        COIL_CPU_BACKEND=triton TRITON_INTERPRET=1, whose interpreter compiles
                        nothing.
COIL_CPP_WRAPPER=1      CPU graphs run through a C++ wrapper built with their kernels (cpp_wrapper
                        option): one call per graph call, no Python per kernel
COIL_PARTITIONER=name   how training graphs split into forward and backward: "min_cut" (default;
                        recomputes cheap ops in the backward instead of saving them) or "default"
                        (AOTAutograd's default partitioner: saves what the backward reads)
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import os
import re
import tempfile
import time


def _default_cache_dir() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = str(os.getuid())
    return os.path.join(tempfile.gettempdir(), f"coil_{user}")


@dataclasses.dataclass
class Options:
    debug_dir: str | None = None  # the run's debug folder; each graph gets a subfolder
    cache_dir: str = dataclasses.field(default_factory=_default_cache_dir)
    logs: frozenset = frozenset()
    compiler: str = "g++"
    inject_build_failure: bool = False  # testing only: break the generated source
    cpu_backend: str = "cpp"  # "cpp" or "triton": kernels for graphs on the CPU
    compile_backward: bool = True  # False: AOTAutograd's backward graphs run eagerly
    # Conv graphs' 4-D tensors channels-last (NHWC): "auto" (CUDA inference graphs with 16-bit
    # convolutions), "on" (every conv graph, any device), "off".
    channels_last: str = "auto"
    allow_fallback: bool = True  # False: graphs needing ATen fallback ops run eagerly instead
    # Matrix products with leading dimensions padded to 16/128 bytes (cuBLAS's aligned kernels):
    # "auto" (CUDA only), "on" (every device: how the CPU tests check it), "off".
    gemm_padding: str = "auto"
    # Random ops run as the ATen op, drawing from torch's generator exactly as eager does
    # (Inductor's fallback_random). None: torch._inductor.config.fallback_random's value when a
    # function compiles (for_compile resolves it), so tools that set that get eager's streams.
    fallback_random: bool | None = None
    # AOTAutograd's partitioner for training graphs: "min_cut" (min_cut_rematerialization_partition:
    # saves less, recomputes cheap fusible ops inside the backward's kernels) or "default".
    partitioner: str = "min_cut"
    # C++ kernels' innermost loops in vector form through ATen's at::vec, where every value that
    # varies along them has one: "auto" (kernels of 4096 elements or more: a vector kernel file
    # builds about 0.3 s slower), "on" (every kernel), "off" (scalar loops, left to the compiler).
    cpp_vectorize: str = "auto"
    # Attention written out as matmuls and a softmax (every step read only by the next) replaced
    # by one scaled_dot_product_attention call, which never stores the scores (Inductor's
    # fuse_attention; cpp/coil/lower/attention_pattern.h).
    attention_rewrite: bool = True
    # CUDA graphs around each compiled call (mode="reduce-overhead", python/coil/cudagraphs.py):
    # graphs on one CUDA device are recorded into PyTorch's CUDA-graph trees and replayed; the
    # others run uncaptured, with a CoilWarning saying why.
    cudagraphs: bool = False
    # Distinct sizes (values of a dynamic graph's size symbols) recorded per compiled graph;
    # calls at further sizes run uncaptured. Inductor records every size and warns past 8
    # (torch._inductor.config.triton.cudagraph_dynamic_shape_warn_limit); coil stops there.
    cudagraph_max_recordings: int = 8
    # The warm-start graph cache (python/coil/graph_cache.py): an inference graph compiled by an
    # earlier process skips AOTAutograd's trace and coil's FX import (entries in cache_dir/graphs).
    graph_cache: bool = True
    # A CUDA architecture ("sm_90") every Triton kernel is also compiled for when its module loads
    # (python/coil/triton_check.py); None: no such check.
    triton_check_target: str | None = None
    # The program that runs each CPU graph (allocations, kernel calls, library calls) as C++ built
    # into its kernel library, called once per graph call (codegen/wrapper/cpp_wrapper.h), where
    # the graph allows it; otherwise, and for GPU graphs, the generated Python module runs it.
    cpp_wrapper: bool = False


def _from_env() -> Options:
    opts = Options()
    if os.environ.get("COIL_DEBUG_DIR"):
        opts.debug_dir = os.environ["COIL_DEBUG_DIR"]
    elif os.environ.get("COIL_DEBUG", "0") not in ("", "0"):
        stamp = time.strftime("%Y%m%d_%H%M%S")
        opts.debug_dir = os.path.join(os.getcwd(), "coil_debug", f"run_{stamp}_pid{os.getpid()}")
    if os.environ.get("COIL_CACHE_DIR"):
        opts.cache_dir = os.environ["COIL_CACHE_DIR"]
    logs = os.environ.get("COIL_LOGS", "")
    opts.logs = frozenset(x.strip() for x in logs.split(",") if x.strip())
    if os.environ.get("COIL_CPU_BACKEND"):
        opts.cpu_backend = os.environ["COIL_CPU_BACKEND"]
    if os.environ.get("COIL_COMPILE_BACKWARD", "1") in ("0", ""):
        opts.compile_backward = False
    if os.environ.get("COIL_CHANNELS_LAST"):
        v = os.environ["COIL_CHANNELS_LAST"]
        opts.channels_last = {"1": "on", "0": "off"}.get(v, v)
    if os.environ.get("COIL_GEMM_PADDING"):
        opts.gemm_padding = os.environ["COIL_GEMM_PADDING"]
    if os.environ.get("COIL_ALLOW_FALLBACK", "1") in ("0", "false", "False"):
        opts.allow_fallback = False
    if os.environ.get("COIL_FALLBACK_RANDOM"):
        opts.fallback_random = os.environ["COIL_FALLBACK_RANDOM"] not in ("0", "false", "False")
    if os.environ.get("COIL_PARTITIONER"):
        opts.partitioner = os.environ["COIL_PARTITIONER"]
    if os.environ.get("COIL_GRAPH_CACHE", "1") in ("0", "false", "False"):
        opts.graph_cache = False
    if os.environ.get("COIL_CPP_VECTORIZE"):
        v = os.environ["COIL_CPP_VECTORIZE"]
        opts.cpp_vectorize = {"1": "on", "0": "off"}.get(v, v)
    if os.environ.get("COIL_TRITON_CHECK", "0") not in ("", "0"):
        opts.triton_check_target = os.environ["COIL_TRITON_CHECK"]
    if os.environ.get("COIL_CPP_WRAPPER"):
        opts.cpp_wrapper = os.environ["COIL_CPP_WRAPPER"] not in ("0", "false", "False")
    if os.environ.get("CXX"):
        opts.compiler = os.environ["CXX"]
    _check_choices(dataclasses.asdict(opts), "environment")
    return opts


# Options that take one of a few words (the C++ side checks its own again).
CHOICES = {
    "channels_last": ("auto", "on", "off"),
    "cpp_vectorize": ("auto", "on", "off"),
    "gemm_padding": ("auto", "on", "off"),
    "cpu_backend": ("cpp", "triton"),
    "partitioner": ("min_cut", "default"),
}

# What each torch.compile mode means under coil: the options it sets (before options=, which
# torch.compile does not allow together with mode=).
# - "default": coil's defaults.
# - "reduce-overhead": CUDA graphs (python/coil/cudagraphs.py).
# - "max-autotune": CUDA graphs, as for Inductor. coil has no GEMM templates to search (matrix
#   products are library calls in every mode), and its Triton kernels' launch configs are
#   benchmarked on the first call in every mode already.
# - "max-autotune-no-cudagraphs": the same without CUDA graphs, which is coil's default.
MODES = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"cudagraphs": True},
    "max-autotune-no-cudagraphs": {},
}


def _check_choices(values: dict, where: str) -> None:
    for name, allowed in CHOICES.items():
        if name in values and values[name] not in allowed:
            raise ValueError(
                f"coil option {name}={values[name]!r} ({where}): expected one of {allowed}"
            )
    target = values.get("triton_check_target")
    if target is not None and not re.fullmatch(r"sm_\d+", str(target)):
        raise ValueError(
            f"coil option triton_check_target={target!r} ({where}): expected a CUDA "
            f"architecture such as 'sm_90', or None"
        )


def _checked(changes: dict, where: str) -> dict:
    """`changes` validated against Options: known names, values of the field's type (logs: a set
    or list of names, or one comma-separated string), words from CHOICES."""
    fields = {f.name: f for f in dataclasses.fields(Options)}
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise ValueError(
            f"coil ({where}): unknown option(s) {', '.join(map(repr, unknown))}; "
            f"valid options: {', '.join(sorted(fields))}"
        )
    out = {}
    for name, value in changes.items():
        if name == "logs":
            if isinstance(value, str):
                value = [x.strip() for x in value.split(",") if x.strip()]
            if not all(isinstance(x, str) for x in value):
                raise ValueError(f"coil ({where}): logs must be names, not {value!r}")
            value = frozenset(value)
        else:
            _check_type(name, value, fields[name].type, where)
        out[name] = value
    _check_choices(out, where)
    return out


_TYPES = {"bool": (bool,), "str": (str,), "str | None": (str, type(None)),
          "bool | None": (bool, type(None)), "int": (int,)}


def _check_type(name: str, value, annotation: str, where: str) -> None:
    allowed = _TYPES.get(str(annotation))
    if allowed == (int,) and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(
            f"coil ({where}): option {name}={value!r} must be an int >= 0"
        )
    if allowed and not isinstance(value, allowed):
        raise ValueError(
            f"coil ({where}): option {name}={value!r} must be {annotation}, not "
            f"{type(value).__name__}"
        )


options = _from_env()


def for_compile(mode: str | None = None, changes: dict | None = None) -> Options:
    """The options one torch.compile'd function compiles under: the current options, then what
    `mode` sets, then `changes` (torch.compile's options=), with fallback_random resolved. The
    global options are not touched."""
    merged = {}
    if mode is not None:
        if mode not in MODES:
            raise ValueError(
                f"coil: unknown torch.compile mode {mode!r}; expected one of {sorted(MODES)}"
            )
        merged.update(MODES[mode])
    if changes:
        merged.update(_checked(dict(changes), "torch.compile options="))
    opts = dataclasses.replace(options, **merged)
    if opts.fallback_random is None:
        import torch._inductor.config as inductor_config

        opts = dataclasses.replace(opts, fallback_random=bool(inductor_config.fallback_random))
    return opts


@contextlib.contextmanager
def patch(**changes):
    """Temporarily change options: `with coil.config.patch(debug_dir=path): ...`."""
    global options
    changes = _checked(changes, "coil.config.patch")
    saved = options
    options = dataclasses.replace(options, **changes)
    try:
        yield options
    finally:
        options = saved


@contextlib.contextmanager
def active(opts: Options):
    """Makes `opts` the current options while one graph compiles and loads (the runtime reads
    them: the build cache folder, the compiler, logs), whatever the global options are."""
    global options
    saved = options
    options = opts
    try:
        yield opts
    finally:
        options = saved
