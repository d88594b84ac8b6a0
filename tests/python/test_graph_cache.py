"""The warm-start graph cache (python/coil/graph_cache.py): an inference graph compiled before
compiles again from coil's cached graph, skipping AOTAutograd's trace; graphs whose AOTAutograd
call does more than run the graph (training, input mutations, outputs aliasing inputs, symbolic
sizes) are never cached; a changed input, option or ambient state is a miss; a corrupt entry is a
miss and is rewritten; an entry that no longer compiles is removed."""

import glob
import json
import os

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's own cache")

import coil  # noqa: E402  (after the skip: the module exists only under coil)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                               torch.nn.LayerNorm(32)).eval()


def _compile_and_run(fn, *args, cache, grad=False, **options):
    """A fresh Dynamo compile of fn (as a new process would make), its result and records."""
    reset_compiler()
    with torch.set_grad_enabled(grad):
        out = torch.compile(fn, backend="coil",
                            options={"cache_dir": str(cache), **options})(*args)
    return out, coil_records()


def _entries(cache):
    return sorted(glob.glob(os.path.join(str(cache), "graphs", "*.json")))


def test_second_compile_skips_the_trace_and_matches_eager(tmp_path):
    m, x = _mlp(), torch.randn(4, 16)
    out, records = _compile_and_run(m, x, cache=tmp_path)
    assert [r.from_graph_cache for r in records] == [False]
    assert len(_entries(tmp_path)) == 1
    out2, records = _compile_and_run(m, x, cache=tmp_path)
    assert [r.from_graph_cache for r in records] == [True]
    assert records[0].kernel_names and not records[0].eager_fallback
    with torch.no_grad():
        torch.testing.assert_close(out, m(x))
        torch.testing.assert_close(out2, m(x))
    # The cached graph reads the parameters as they are now, not as they were when cached.
    with torch.no_grad():
        m[0].weight.mul_(2)
    out3, records = _compile_and_run(m, x, cache=tmp_path)
    assert records[0].from_graph_cache
    with torch.no_grad():
        torch.testing.assert_close(out3, m(x))


@pytest.mark.parametrize("change", ["shape", "dtype", "option", "autocast", "layout"])
def test_a_changed_input_option_or_state_is_a_miss(tmp_path, change):
    m, x = _mlp(), torch.randn(4, 16)
    _compile_and_run(m, x, cache=tmp_path)
    options, run = {}, lambda: _compile_and_run(m, x2, cache=tmp_path, **options)
    x2 = x
    if change == "shape":
        x2 = torch.randn(6, 16)
    elif change == "dtype":
        m, x2 = _mlp().double(), x.double()
    elif change == "option":
        options = {"gemm_padding": "on"}
    elif change == "layout":
        x2 = torch.randn(16, 4).t()
    if change == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, records = run()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = m(x2)
    else:
        out, records = run()
        with torch.no_grad():
            want = m(x2)
    assert [r.from_graph_cache for r in records] == [False]
    assert len(_entries(tmp_path)) == 2
    torch.testing.assert_close(out, want)


def _mutates(x):
    x.add_(1)
    return x * 2


def _aliases(x):
    return x.view(-1), x.sin()


def _requires_grad_step(w, x):
    return (x @ w).relu().sum()


@pytest.mark.parametrize("case", ["training", "mutation", "alias", "dynamic"])
def test_graphs_whose_call_does_more_are_not_cached(tmp_path, case):
    if case == "training":
        w = torch.randn(16, 8, requires_grad=True)
        args, fn, grad = (w, torch.randn(4, 16)), _requires_grad_step, True
    elif case == "mutation":
        args, fn, grad = (torch.randn(4, 16),), _mutates, False
    elif case == "alias":
        args, fn, grad = (torch.randn(4, 16),), _aliases, False
    else:
        args, fn, grad = (torch.randn(4, 16),), lambda x: (x * 2).sum(0), False
    for _ in range(2):
        call_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        want_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        if case == "dynamic":
            torch._dynamo.mark_dynamic(call_args[0], 0)
        out, records = _compile_and_run(fn, *call_args, cache=tmp_path, grad=grad)
        with torch.set_grad_enabled(grad):
            want = fn(*want_args)
        torch.testing.assert_close(out, want)
        for got, ref in zip(call_args, want_args):
            torch.testing.assert_close(got, ref)  # the mutation happened, once
        assert not any(r.from_graph_cache for r in records)
    assert _entries(tmp_path) == []


def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path):
    m, x = _mlp(), torch.randn(4, 16)
    _compile_and_run(m, x, cache=tmp_path)
    (path,) = _entries(tmp_path)
    with open(path, "w") as f:
        f.write('{"version": 1, "key": "trunc')
    out, records = _compile_and_run(m, x, cache=tmp_path)
    assert not records[0].from_graph_cache
    with torch.no_grad():
        torch.testing.assert_close(out, m(x))
    with open(path) as f:
        assert json.load(f)["graph"]  # rewritten whole
    _, records = _compile_and_run(m, x, cache=tmp_path)
    assert records[0].from_graph_cache


def test_an_entry_that_no_longer_compiles_is_removed(tmp_path):
    import hashlib

    m, x = _mlp(), torch.randn(4, 16)
    _compile_and_run(m, x, cache=tmp_path)
    (path,) = _entries(tmp_path)
    with open(path) as f:
        entry = json.load(f)
    entry["graph"] = '{"nodes": "not a graph"}'  # well-formed entry, a graph the core rejects
    entry["sha256"] = hashlib.sha256(entry["graph"].encode()).hexdigest()
    with open(path, "w") as f:
        json.dump(entry, f)
    out, records = _compile_and_run(m, x, cache=tmp_path)
    assert [r.from_graph_cache for r in records] == [False]
    assert [r.eager_fallback for r in records] == [False]
    with torch.no_grad():
        torch.testing.assert_close(out, m(x))
    with open(path) as f:
        assert json.load(f)["graph"] != entry["graph"]  # removed, then written anew


def test_off_writes_nothing(tmp_path):
    m, x = _mlp(), torch.randn(4, 16)
    _compile_and_run(m, x, cache=tmp_path, graph_cache=False)
    _, records = _compile_and_run(m, x, cache=tmp_path, graph_cache=False)
    assert not records[0].from_graph_cache
    assert _entries(tmp_path) == []


def test_a_hit_warns_as_a_compile_would(tmp_path, monkeypatch):
    # A hit compiles coil's graph again, and what that compile says reaches the user: here, that
    # vector C++ kernels do not build (the warning was once swallowed with the miss warnings).
    from coil import backend, runtime

    m, x = _mlp(), torch.randn(4, 16)
    _compile_and_run(m, x, cache=tmp_path)
    monkeypatch.setattr(runtime, "vec_flags", lambda: None)
    monkeypatch.setattr(backend, "_vec_warned", False)
    with pytest.warns(coil.CoilWarning, match="do not build"):
        out, records = _compile_and_run(m, x, cache=tmp_path)
    assert [r.from_graph_cache for r in records] == [True]
    with torch.no_grad():
        torch.testing.assert_close(out, m(x))
