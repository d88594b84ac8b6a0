"""Ahead-of-time packages: a `torch.export.ExportedProgram` compiled by coil into one file that
runs without the model's code, from Python (`aot_load`) or from C++ (`coil::Package`,
cpp/coil/package.h; examples/run_package).

    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("b", max=64)}})
    path = coil.aot_compile(ep, "model.coil")
    model = coil.aot_load("model.coil")        # any process; model(x) -> what ep.module()(x) returns

A package is coil's container (runtime/package.h: named entries, each with its SHA-256):
  metadata.json  format, coil and torch versions, device, the graph's inputs (weights and the
                 user's inputs, in the order coil_graph_run takes them), the size symbols and their
                 ranges, the output count, the pytree specs of inputs and outputs, and the
                 compiler's decisions (schedule.txt)
  graph.so       the graph's kernels and its C++ wrapper (runtime/graph_abi.h); its entry checks
                 every input's dtype, device, rank, sizes, strides and each size's exported range
  weights/<i>    each parameter, buffer and tensor constant, contiguous, its raw bytes
Only this bridge is Python: the compile is coil's own (a graph of ATen ops through the C++ core,
with its C++ wrapper forced on); loading reads the container through the C++ reader.
"""

from __future__ import annotations

import json
import os
import tempfile

import torch
import torch.utils._pytree as pytree

from coil import _C, backend, config, fx_import, runtime

FORMAT = 1


class AotError(RuntimeError):
    """A program coil cannot package, or a package that does not run here (another coil or
    torch version, another device, damaged: the message says which)."""


def _torch_version() -> str:
    return torch.__version__.split("+")[0]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def aot_compile(exported: torch.export.ExportedProgram, path: str,
                options: dict | None = None) -> str:
    """Compiles `exported` (its dynamic dims from the export's Dims, their ranges checked at every
    call) into the package file `path`; returns `path`. `options`: coil options (config.Options
    names), as torch.compile's options= takes them."""
    opts = config.for_compile(None, dict(options or {}))
    ep = exported.run_decompositions(backend._decompositions(bool(opts.fallback_random)))
    gm = ep.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    if len(specs) != len(placeholders):
        raise AotError(f"the exported graph has {len(placeholders)} inputs, its signature "
                       f"{len(specs)}")
    for spec in ep.graph_signature.output_specs:
        if spec.kind != torch.export.graph_signature.OutputKind.USER_OUTPUT:
            raise AotError(f"the program mutates its state ({spec.kind.name} {spec.target}): "
                           f"export it in eval mode, without buffer updates")
    tensors = {**ep.state_dict, **ep.constants}
    graph_inputs, weights, user_inputs, examples = [], {}, [], []
    user_index = 0
    for node, spec in zip(placeholders, specs):
        val = node.meta.get("val")
        if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT:
            if not isinstance(val, torch.Tensor):
                raise AotError(f"input {node.name} is a {type(val).__name__}: packages take "
                               f"tensor inputs only")
            graph_inputs.append({"kind": "user", "index": user_index})
            user_inputs.append({"name": node.name, "dtype": _dtype_name(val.dtype),
                                "sizes": [str(s) if isinstance(s, torch.SymInt) else int(s)
                                          for s in val.shape]})
            user_index += 1
            examples.append(val)
            continue
        t = tensors.get(spec.target)
        if not isinstance(t, torch.Tensor):
            raise AotError(f"input {node.name} ({spec.kind.name} {spec.target}) has no tensor")
        t = t.detach()
        if not t.is_contiguous():
            raise AotError(f"weight {spec.target} is not contiguous: packages store weights "
                           f"contiguous")
        entry = f"weights/{len(weights)}"
        weights[entry] = t
        graph_inputs.append({"kind": "weight", "entry": entry, "name": spec.target,
                             "dtype": _dtype_name(t.dtype), "sizes": list(t.shape)})
        examples.append(val)

    with config.active(opts):
        try:
            imported = fx_import.import_graph(gm, examples)
        except fx_import.UnsupportedGraph as e:
            raise AotError(f"the program cannot be packaged: {e}") from None
        for t in imported.constants:  # tensor constants: inputs after the graph's own
            entry = f"weights/{len(weights)}"
            t = t.detach().contiguous()
            weights[entry] = t
            graph_inputs.append({"kind": "weight", "entry": entry, "name": "constant",
                                 "dtype": _dtype_name(t.dtype), "sizes": list(t.shape)})
        result = _C.compile_graph(imported.json, opts.debug_dir or "", "coil AOT package",
                                  cpu_backend="cpp", channels_last=opts.channels_last,
                                  gemm_padding=opts.gemm_padding, inference=True,
                                  fallback_random=bool(opts.fallback_random),
                                  cpp_vectorize=opts.cpp_vectorize,
                                  attention_rewrite=bool(opts.attention_rewrite),
                                  cpp_wrapper=True, cpp_wrapper_checks=True)
        if result["wrapper"] != "cpp":
            why = result["cpp_wrapper_blocker"] or f"{result['backend']} kernels"
            raise AotError(f"the program cannot be packaged: {why}")
        so_path = runtime.build_cpp(result["kernel_source"],
                                    aten_headers=bool(result["needs_aten_headers"]),
                                    vec=bool(result["vectorized"]))
    with open(so_path, "rb") as f:
        library = f.read()
    metadata = {
        "format": FORMAT,
        "coil_version": _C.COIL_VERSION,
        "torch_version": _torch_version(),
        "device": "cpu",
        "library": "graph.so",
        "graph_inputs": graph_inputs,
        "user_inputs": user_inputs,
        "num_outputs": len(ep.graph_signature.output_specs),
        "symbols": {row["name"]: {"min": row.get("lo"), "max": row.get("hi")}
                    for row in imported.symbols},
        "in_spec": pytree.treespec_dumps(ep.call_spec.in_spec),
        "out_spec": pytree.treespec_dumps(ep.call_spec.out_spec),
        "report": result["artifacts"].get("schedule.txt", ""),
    }
    entries = {"metadata.json": json.dumps(metadata, indent=1).encode(), "graph.so": library}
    for entry, t in weights.items():
        entries[entry] = t.cpu().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    _C.write_package(os.fspath(path), entries)
    return os.fspath(path)


class AotModel:
    """A loaded package: call it as the exported program's module is called."""

    def __init__(self, path: str):
        try:
            entries = _C.read_package(os.fspath(path))
        except _C.PackageError as e:
            raise AotError(str(e)) from None
        meta = json.loads(entries["metadata.json"])
        where = f"coil: package '{path}'"
        if meta.get("format") != FORMAT:
            raise AotError(f"{where}: metadata format {meta.get('format')}, this coil reads "
                           f"{FORMAT}")
        if meta.get("coil_version") != _C.COIL_VERSION:
            raise AotError(f"{where}: made by coil {meta.get('coil_version')}, this is coil "
                           f"{_C.COIL_VERSION}. Compile it again with this coil.")
        if meta.get("torch_version") != _torch_version():
            raise AotError(f"{where}: package made by torch {meta.get('torch_version')}, this is "
                           f"torch {_torch_version()}. Export it again with this torch.")
        if meta.get("device") != "cpu":
            raise AotError(f"{where}: compiled for device {meta.get('device')!r}; this coil "
                           f"loads CPU packages")
        self.metadata = meta
        self.path = os.fspath(path)
        # The library is loaded from a private file, removed once loaded.
        with tempfile.TemporaryDirectory(prefix="coil_package_") as folder:
            so = os.path.join(folder, "graph.so")
            with open(so, "wb") as f:
                f.write(entries[meta["library"]])
            self._lib = _C.KernelLibrary(so)
        try:
            self._run = self._lib.graph_run(runtime.aten_shim())
        except RuntimeError as e:
            raise AotError(f"{where}: {e}") from None
        signature = json.loads(self._run.signature)
        if signature["tensor_inputs"] != len(meta["graph_inputs"]) or signature["outputs"] != \
                meta["num_outputs"]:
            raise AotError(f"{where}: its library's signature {signature} does not match its "
                           f"metadata")
        dtypes = {_dtype_name(d): d for d in fx_import._DTYPES}
        self._weights = {}
        for item in meta["graph_inputs"]:
            if item["kind"] != "weight" or item["entry"] in self._weights:
                continue
            data = entries[item["entry"]]
            dtype = dtypes[item["dtype"]]
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
                torch.empty(0, dtype=torch.uint8)
            self._weights[item["entry"]] = t.view(dtype).reshape(item["sizes"])
        self._in_spec = pytree.treespec_loads(meta["in_spec"])
        self._out_spec = pytree.treespec_loads(meta["out_spec"])

    def __call__(self, *args, **kwargs):
        flat, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise AotError(f"coil: package '{self.path}' takes inputs structured as "
                           f"{self._in_spec}, got {spec}")
        inputs = []
        for item in self.metadata["graph_inputs"]:
            inputs.append(self._weights[item["entry"]] if item["kind"] == "weight"
                          else flat[item["index"]])
        handles = runtime._to_handles(inputs)
        del inputs
        code, out = self._run(handles, [], self.metadata["num_outputs"])
        if code == 2:
            raise runtime.IndexOutOfBoundsError(out)
        if code:
            raise AotError(f"coil: package '{self.path}': {out}")
        made = iter(runtime._from_handles([h for h in out if h is not None]))
        outputs = [None if h is None else next(made) for h in out]
        return pytree.tree_unflatten(outputs, self._out_spec)


def aot_load(path: str) -> AotModel:
    """The package at `path` as a callable (AotModel); raises AotError when it cannot run here."""
    return AotModel(path)
