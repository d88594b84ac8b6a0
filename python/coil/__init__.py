"""coil: a compiler backend for torch.compile whose core is C++.

    torch.compile(model, backend="coil")

Introspection: coil.compiled_graphs() (per graph: kernels, fallbacks, dynamic sizes, recompile
reasons), coil.graph_breaks(), coil.reset(); coil.explain(fn, *args): one HTML page on a
function's graphs and kernels; options: coil.config.patch(...);
replay a saved graph: coil.repro("graph.json") or `python -m coil repro graph.json`.
Ahead of time: coil.aot_compile(torch.export.export(...), "model.coil"), coil.aot_load(path)
(python/coil/aot.py; from C++: coil::Package, cpp/coil/package.h).
"""

from coil import config
from coil._C import BuildError, GraphError
from coil.aot import AotError, AotModel, aot_compile, aot_load
from coil.backend import (
    CoilWarning,
    CompiledGraph,
    coil_backend,
    compiled_graphs,
    graph_breaks,
    reset,
)
from coil.explain_page import explain
from coil.option_check import install as _install_option_check
from coil.repro import repro
from coil.torch_logs import register as _register_torch_logs

_register_torch_logs()  # TORCH_LOGS="+coil" (python/coil/torch_logs.py)
_install_option_check()  # options= checked at torch.compile (python/coil/option_check.py)

__all__ = [
    "AotError",
    "AotModel",
    "BuildError",
    "CoilWarning",
    "CompiledGraph",
    "GraphError",
    "aot_compile",
    "aot_load",
    "coil_backend",
    "compiled_graphs",
    "config",
    "explain",
    "graph_breaks",
    "repro",
    "reset",
]
