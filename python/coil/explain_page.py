"""coil.explain(fn, *args): one HTML page on what coil made of one function.

The function is compiled by coil (a debug folder of its own) and run once on the arguments; the
page then shows, per graph Dynamo handed over: where it came from (Dynamo's compile id, the
user's frame, why Dynamo recompiled), whether it ran eagerly and why, its compile phase times,
its extern calls and ATen fallbacks, and every kernel with its graph nodes and source lines
(provenance.json), the decisions in its header comment, the fusion verdicts that involved its
buffers (fusion.txt), its step in the schedule (schedule.txt), its source, and its measured time.
Above the graphs: eager's and coil's time for the whole call, and Dynamo's graph breaks with
their reasons.

Kernel times come from the graph's own output_code.py loaded again from the debug folder, each
kernel wrapped in a timer, run on its make_inputs() (random inputs of the traced sizes): the
median of `repeats` calls. A graph run through a C++ wrapper (option cpp_wrapper) is timed through
the Python form of its program the compiler writes beside it (output_code_python.py). Everything shown comes from coil's records and debug artifacts: nothing here decides.
Tests: tests/python/test_explain_page.py.
"""

from __future__ import annotations

import html
import importlib.util
import itertools
import json
import os
import re
import statistics
import tempfile
import time
import warnings

import torch

from coil import backend

_names = itertools.count()


def explain(fn, *args, out: str | None = None, repeats: int = 20, **kwargs) -> str:
    """Compiles `fn` with coil, runs it on `args`/`kwargs`, and writes one HTML page on what coil
    made of it to the folder `out` (default: a new temporary folder; the debug artifacts go to
    its `debug/`). Returns the page's path. fn runs 2 + repeats times compiled and 1 + repeats
    times eagerly (the timings), each kernel 1 + repeats times more."""
    folder = os.path.abspath(out or tempfile.mkdtemp(prefix="coil_explain_"))
    os.makedirs(folder, exist_ok=True)
    first = len(backend.compiled_graphs())
    breaks_before = backend.graph_breaks()
    compiled = torch.compile(fn, backend="coil", options={"debug_dir": os.path.join(folder, "debug")})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", backend.CoilWarning)
        compiled(*args, **kwargs)
    records = backend.compiled_graphs()[first:]
    breaks = {reason: n - breaks_before.get(reason, 0)
              for reason, n in backend.graph_breaks().items() if n > breaks_before.get(reason, 0)}
    timing = {"eager": _median(lambda: fn(*args, **kwargs), repeats),
              "coil": _median(lambda: compiled(*args, **kwargs), repeats)}
    name = getattr(fn, "__name__", type(fn).__name__)
    page = _page(name, records, breaks, timing, [str(w.message) for w in caught], repeats)
    path = os.path.join(folder, re.sub(r"[^\w.-]", "_", name) + ".html")
    with open(path, "w") as f:
        f.write(page)
    return path


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _median(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(max(1, repeats)):
        _sync()
        start = time.perf_counter()
        call()
        _sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class _Timed:
    """A kernel of a loaded output_code module, timed at each call (C++: called; Triton: .run)."""

    def __init__(self, kernel, samples: list):
        self.kernel = kernel
        self.samples = samples

    def _time(self, target, args, kwargs):
        _sync()
        start = time.perf_counter()
        result = target(*args, **kwargs)
        _sync()
        self.samples.append(time.perf_counter() - start)
        return result

    def __call__(self, *args, **kwargs):
        return self._time(self.kernel, args, kwargs)

    def run(self, *args, **kwargs):
        return self._time(self.kernel.run, args, kwargs)


def _measure(record, repeats: int) -> tuple[dict, float | None, str]:
    """({kernel: median seconds}, the graph's median seconds, "" or why it was not measured)."""
    path = os.path.join(record.debug_dir or "", "output_code.py")
    python_form = os.path.join(record.debug_dir or "", "output_code_python.py")
    if os.path.exists(python_form):  # a C++ wrapper's graph: time it kernel by kernel from Python
        path = python_form
    if record.eager_fallback or not os.path.exists(path):
        return {}, None, "not compiled by coil" if record.eager_fallback else "no output_code.py"
    try:
        spec = importlib.util.spec_from_file_location(f"coil_explain_{next(_names)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        samples = {}
        for kernel in record.kernel_names:
            if getattr(module, kernel, None) is not None:
                samples[kernel] = []
                setattr(module, kernel, _Timed(getattr(module, kernel), samples[kernel]))
        inputs = module.make_inputs()
        whole = _median(lambda: module.call(list(inputs)), repeats)
        per_call = {k: v[-max(1, repeats):] for k, v in samples.items() if v}
        return {k: statistics.median(v) for k, v in per_call.items()}, whole, ""
    except Exception as e:  # noqa: BLE001 - the page says why instead
        return {}, None, f"{type(e).__name__}: {e}"


def _read(folder: str | None, name: str) -> str:
    path = os.path.join(folder or "", name)
    if not folder or not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def _schedule_step(schedule: str, kernel_id: str) -> str:
    """The schedule's lines for `step N: kernel <id> ...` up to the next step."""
    out, inside = [], False
    for line in schedule.splitlines():
        if line.startswith(("step ", "memory:")):
            inside = bool(re.match(rf"step \d+: kernel {kernel_id} ", line))
        if inside:
            out.append(line)
    return "\n".join(out)


def _fusion_verdicts(fusion: str, buffers: set) -> str:
    """fusion.txt's verdicts on groups that hold one of the kernel's buffers."""
    keep = []
    for line in fusion.splitlines():
        groups = set(re.findall(r"buf\d+", line.split(":")[1] if ":" in line else ""))
        if groups & buffers:
            keep.append(line)
    return "\n".join(keep)


def _esc(text) -> str:
    return html.escape(str(text))


def _pre(title: str, text: str, open_: bool = False) -> str:
    if not text:
        return ""
    return (f"<details{' open' if open_ else ''}><summary>{_esc(title)}</summary>"
            f"<pre>{_esc(text)}</pre></details>")


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.3f} ms"


def _kernel_row(name: str, record, prov: dict, fusion: str, schedule: str, times: dict,
                total: float) -> str:
    ext = ".py" if record.backend == "triton" else ".cpp"
    source = _read(record.debug_dir, name + ext)
    header = "\n".join(line for line in itertools.takewhile(
        lambda s: s.startswith(("//", "#")), source.splitlines()))
    buffers = set()
    for line in header.splitlines():
        if "buffers:" in line:
            buffers |= set(re.findall(r"buf\d+", line))
    info = prov.get(name, {})
    nodes = ", ".join(f"{n} ({o})" for n, o in zip(info.get("nodes", []), info.get("ops", [])))
    share = f" ({times[name] / total:.0%})" if name in times and total else ""
    kernel_id = name.rsplit("_", 1)[-1]
    return (
        f"<tr><td><code>{_esc(name)}</code></td><td>{_esc(_ms(times.get(name)))}{share}</td>"
        f"<td>{_esc(nodes)}</td><td>"
        + _pre("source lines", "\n".join(info.get("source_lines", [])), open_=True)
        + _pre("decisions (the kernel's header)", header, open_=True)
        + _pre("fusion verdicts on its buffers", _fusion_verdicts(fusion, buffers))
        + _pre("its schedule step", _schedule_step(schedule, kernel_id))
        + _pre("source", source)
        + "</td></tr>"
    )


def _graph_section(record, repeats: int) -> str:
    parts = [f"<h2>graph {record.graph_id} ({_esc(record.kind)})</h2><ul>"]
    facts = [("Dynamo compile", record.compile_id), ("user's frame", record.frame),
             ("recompiled because", record.recompile_reason),
             ("ran eagerly because", record.eager_reason if record.eager_fallback else ""),
             ("renderer", record.backend), ("wrapper", record.wrapper),
             ("compile phases", ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in record.seconds.items())),
             ("extern calls", ", ".join(record.extern_ops)),
             ("ATen fallbacks", ", ".join(record.fallback_ops)),
             ("size symbols", "; ".join(record.symbols)), ("layout", record.layout),
             ("debug folder", record.debug_dir)]
    parts += [f"<li><b>{_esc(k)}:</b> {_esc(v)}</li>" for k, v in facts if v]
    parts.append("</ul>")
    times, whole, why = _measure(record, repeats)
    parts.append(f"<p>measured: graph {_esc(_ms(whole) or why)}"
                 f"{'' if times or not whole else ' (kernels not timed one by one)'}</p>")
    if record.kernel_names:
        prov = json.loads(_read(record.debug_dir, "provenance.json") or "{}").get("kernels", {})
        fusion = _read(record.debug_dir, "fusion.txt")
        schedule = _read(record.debug_dir, "schedule.txt")
        total = sum(times.values())
        parts.append("<table><tr><th>kernel</th><th>time</th><th>graph nodes</th>"
                     "<th>where from, and why</th></tr>")
        parts += [_kernel_row(k, record, prov, fusion, schedule, times, total)
                  for k in record.kernel_names]
        parts.append("</table>")
    parts.append(_pre("graph.txt (what coil received)", _read(record.debug_dir, "graph.txt")))
    parts.append(_pre("fusion.txt", _read(record.debug_dir, "fusion.txt")))
    parts.append(_pre("schedule.txt", _read(record.debug_dir, "schedule.txt")))
    parts.append(_pre("opaque calls", _read(record.debug_dir, "opaque_calls.txt")))
    return "\n".join(parts)


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:110em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em;vertical-align:top}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}summary{cursor:pointer}"""


def _page(name: str, records, breaks: dict, timing: dict, messages: list, repeats: int) -> str:
    head = (f"<!doctype html><html><head><meta charset='utf-8'><title>coil: {_esc(name)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>coil: {_esc(name)}</h1>")
    summary = (f"<p>eager {_esc(_ms(timing['eager']))}, coil {_esc(_ms(timing['coil']))} per "
               f"call (median of {repeats}); {len(records)} graphs compiled.</p>")
    parts = [head, summary, "<h2>Graph breaks (Dynamo's reasons)</h2>"]
    if breaks:
        parts.append("<ul>" + "".join(f"<li>{_esc(reason)} ({n}x)</li>"
                                      for reason, n in breaks.items()) + "</ul>")
    else:
        parts.append("<p>none: one graph per frame</p>")
    if messages:
        parts.append("<h2>coil's warnings</h2><ul>"
                     + "".join(f"<li>{_esc(m)}</li>" for m in messages) + "</ul>")
    parts += [_graph_section(r, repeats) for r in records]
    parts.append("</body></html>")
    return "\n".join(parts)
