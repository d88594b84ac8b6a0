"""Every coil option in one place. Environment variables are read here, once, at import.

COIL_DEBUG=1            write each compiled graph's artifacts under ./coil_debug/run_<time>_<pid>/
COIL_DEBUG_DIR=path     write them under path instead
COIL_CACHE_DIR=path     where built kernels are cached (default: a private folder in the temp dir)
COIL_LOGS=a,b,...       print artifacts to stderr: graph, ir, fusion, schedule, output_code,
                        fallback, perf (phase timings, Triton launch tuning), dynamic (per graph:
                        its size symbols, Dynamo's compile id and why it recompiled; with
                        TORCH_LOGS=recompiles,graph_breaks Dynamo says more)
COIL_COMPILE_BACKWARD=0 run training graphs' backward passes eagerly (default: coil compiles them)
COIL_CHANNELS_LAST=1    GPU graphs with bf16/fp16 convolutions keep 4-D tensors channels-last
                        (experimental; off by default)
COIL_CPU_BACKEND=name   kernels for CPU tensors: "cpp" (default) or "triton" (Triton kernels run by
                        Triton's interpreter; needs TRITON_INTERPRET=1; slow, for testing).
                        Graphs on CUDA devices always get Triton kernels.
COIL_ALLOW_FALLBACK=0   a graph that needs an ATen fallback op (an op coil does not lower, run
                        through torch) is not compiled: it runs eagerly with a CoilWarning, as any
                        graph coil cannot compile. Extern calls (mm, conv) are still allowed.
                        Used to measure what coil lowers itself (python -m coil.coverage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import os
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
    if os.environ.get("CXX"):
        opts.compiler = os.environ["CXX"]
    _check_choices(dataclasses.asdict(opts), "environment")
    return opts


# Options that take one of a few words (the C++ side checks them again).
CHOICES = {"channels_last": ("auto", "on", "off"), "gemm_padding": ("auto", "on", "off")}


def _check_choices(values: dict, where: str) -> None:
    for name, allowed in CHOICES.items():
        if name in values and values[name] not in allowed:
            raise ValueError(
                f"coil option {name}={values[name]!r} ({where}): expected one of {allowed}"
            )


options = _from_env()


@contextlib.contextmanager
def patch(**changes):
    """Temporarily change options: `with coil.config.patch(debug_dir=path): ...`."""
    global options
    unknown = set(changes) - {f.name for f in dataclasses.fields(Options)}
    if unknown:
        raise TypeError(f"coil.config.patch: unknown options {sorted(unknown)}")
    _check_choices(changes, "coil.config.patch")
    if "logs" in changes and not isinstance(changes["logs"], frozenset):
        changes["logs"] = frozenset(changes["logs"])
    saved = options
    options = dataclasses.replace(options, **changes)
    try:
        yield options
    finally:
        options = saved
