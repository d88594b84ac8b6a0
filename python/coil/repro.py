"""Replays a saved graph (graph.json from a debug folder) without Dynamo: compile it, run it on
random inputs of its shapes, return the outputs."""

from __future__ import annotations

from coil import _C, runtime
from coil._C import GraphError


def repro(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GraphError(f"cannot read graph file {path}: {e.strerror}") from None
    _C.graph_text(text)  # validates; raises GraphError with the position of the problem
    result = _C.compile_graph(text, "", f"coil repro of {path}")
    module = runtime.load_module(result["output_code"], "coil_repro")
    return list(module.call(module.make_inputs()))


def graph_summary(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return _C.graph_text(f.read())


__all__ = ["repro", "graph_summary"]
