"""coil.explain(fn, *args) (python/coil/explain_page.py): one HTML page per function, with each
graph's kernels, where they came from, the decisions that made them and their measured times;
Dynamo's graph breaks; ATen fallbacks; graphs coil ran eagerly and why."""

import html
import re

import pytest
import torch
from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's own page")

import coil  # noqa: E402  (after the skip: the module exists only under coil)


def _text(path) -> str:
    return html.unescape(open(path).read())


def test_page_shows_kernels_decisions_times_breaks_and_fallbacks(tmp_path):
    def fn(x):
        y = torch.softmax(x * 2, dim=-1)  # one fused kernel: its decisions
        torch._dynamo.graph_break()
        return torch.searchsorted(torch.arange(8.0), y.cos()) + 1  # an ATen fallback

    path = coil.explain(fn, torch.randn(16, 32), out=str(tmp_path), repeats=3)
    assert path == str(tmp_path / "fn.html")
    page = _text(path)
    records = coil.compiled_graphs()[-2:]
    assert [r.kind for r in records] == ["inference", "inference"]
    for r in records:
        assert f"graph {r.graph_id} (inference)" in page
        assert r.debug_dir.startswith(str(tmp_path / "debug"))
        for kernel in r.kernel_names:
            # each kernel: a row with its measured time and its share of the graph's
            row = re.search(rf"<code>{kernel}</code></td><td>([\d.]+) ms \((\d+)%\)", page)
            assert row, f"{kernel} has no time"
    assert "decision: " in page, "the kernels' header decisions"
    assert "round 1: " in page, "fusion verdicts"
    assert "y = torch.softmax(x * 2, dim=-1)" in page, "the kernel's source line"
    assert "graph_break" in page.split("Graph breaks")[1].split("graph ")[0], "Dynamo's reason"
    assert re.search(r"ATen fallbacks:</b> aten\.searchsorted", page)
    assert re.search(r"eager [\d.]+ ms, coil [\d.]+ ms per call", page)


def test_page_says_why_a_graph_ran_eagerly(tmp_path):
    with coil.config.patch(inject_build_failure=True):
        path = coil.explain(lambda x: x.exp() + 1, torch.randn(8), out=str(tmp_path), repeats=1)
    page = _text(path)
    assert "ran eagerly because:</b> BuildError" in page, page[:3000]
    assert "coil's warnings" in page and "runs eagerly" in page
    assert "measured: graph not compiled by coil" in page
