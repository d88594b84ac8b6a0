"""Errors and faults must be handled cleanly: ops without a lowering fall back to ATen, a failed
build falls back to eager with a CoilWarning naming the debug folder, a corrupted cached library
is detected and rebuilt, and malformed graph files raise coil.GraphError (CLI: one-line message,
non-zero exit, no traceback)."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import BACKEND, assert_same, check, coil_records, make_tensor, requires_coil

SUBPROCESS_TIMEOUT = 300


def _subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    env.update(extra)
    return env


# --------------------------------------------------------------------------------------------
# ops without a lowering run through the ATen fallback
# --------------------------------------------------------------------------------------------

UNLOWERED = {
    # name prefix expected in fallback_ops -> fn, inputs
    "aten.searchsorted": (
        lambda seq, v: torch.searchsorted(seq, v * 2) + 1,
        lambda: (torch.sort(make_tensor((4, 8)), dim=-1).values, make_tensor((4, 5))),
    ),
    "aten.kthvalue": (
        lambda x, y: torch.kthvalue(x.exp(), 3, dim=-1).values * 2 + y,
        lambda: (make_tensor((4, 8)), make_tensor((4,))),
    ),
}


@pytest.mark.parametrize("op", list(UNLOWERED))
def test_unlowered_op_uses_aten_fallback(op):
    fn, make_inputs = UNLOWERED[op]
    check(fn, *make_inputs())
    if BACKEND != "coil":
        pytest.skip("fallback_ops is coil's record")
    fallbacks = [f for r in coil_records() for f in r.fallback_ops]
    assert any(f.startswith(op + ".") for f in fallbacks), f"{op} not in fallback_ops {fallbacks}"


# --------------------------------------------------------------------------------------------
# a failed build falls back to eager, with a warning naming the debug folder
# --------------------------------------------------------------------------------------------


def _path_forms(p):
    return {str(p), os.path.realpath(str(p)), os.path.abspath(str(p))}


def test_build_failure_falls_back_to_eager_with_warning(tmp_path):
    coil = requires_coil()
    assert issubclass(coil.CoilWarning, UserWarning)

    def fn(x):
        return torch.softmax(x * 2, dim=-1) + x.exp()

    x = make_tensor((4, 8))
    with coil.config.patch(inject_build_failure=True, debug_dir=str(tmp_path)):
        compiled = torch.compile(fn, backend="coil")
        with pytest.warns(coil.CoilWarning) as caught:
            out = compiled(x)
        out_again = compiled(x)  # the cached (eager) fallback keeps working

    assert_same(out, fn(x))
    assert_same(out_again, fn(x))

    messages = [str(w.message) for w in caught if issubclass(w.category, coil.CoilWarning)]
    assert any(form in m for m in messages for form in _path_forms(tmp_path)), (
        f"no CoilWarning names the debug folder under {tmp_path}: {messages}"
    )

    records = coil.compiled_graphs()
    assert records, "the failed graph must still be recorded"
    assert all(r.eager_fallback for r in records), [r.eager_fallback for r in records]
    for r in records:
        assert r.debug_dir is not None, "debug_dir was set, the record must name its folder"
        assert os.path.isdir(r.debug_dir), r.debug_dir
        assert os.path.realpath(r.debug_dir).startswith(os.path.realpath(str(tmp_path))), (
            f"{r.debug_dir} is not under {tmp_path}"
        )
        assert any(r.debug_dir in m or os.path.realpath(r.debug_dir) in m for m in messages), (
            f"the warning does not name the graph's folder {r.debug_dir}: {messages}"
        )


def test_build_failure_is_per_compile(tmp_path):
    # after the patch is lifted, a fresh compile builds normally again
    coil = requires_coil()
    x = make_tensor((4, 8))
    with (
        coil.config.patch(inject_build_failure=True, debug_dir=str(tmp_path)),
        pytest.warns(coil.CoilWarning),
    ):
        torch.compile(lambda t: t.relu() * 2, backend="coil")(x)
    coil.reset()
    check(lambda t: t.relu() * 2, x)  # asserts no eager_fallback under coil


# --------------------------------------------------------------------------------------------
# a truncated cached library is detected and rebuilt
# --------------------------------------------------------------------------------------------

CACHE_SCRIPT = r"""
import sys
import torch
import coil

def fn(x):
    return (x * 2 + 1).exp().sum(-1) / 3 + x.amax(-1)

torch.manual_seed(0)
x = torch.randn(4, 8)
with coil.config.patch(cache_dir=sys.argv[1]):
    out = torch.compile(fn, backend="coil")(x)
torch.testing.assert_close(out, fn(x))
records = coil.compiled_graphs()
assert records, "no graph compiled"
assert not any(r.eager_fallback for r in records), "the graph ran eagerly"
print("COIL_CACHE_OK")
"""


def _run_cache_script(cache_dir):
    return subprocess.run(
        [sys.executable, "-c", CACHE_SCRIPT, str(cache_dir)],
        check=False,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        env=_subprocess_env(),
    )


def test_truncated_cached_library_is_rebuilt(tmp_path):
    coil = requires_coil()
    cache = tmp_path / "cache"
    cache.mkdir()

    first = _run_cache_script(cache)  # fills the cache (a fresh process: nothing stays mapped)
    assert first.returncode == 0 and "COIL_CACHE_OK" in first.stdout, first.stderr[-3000:]
    libs = sorted(cache.rglob("*.so"))
    assert libs, f"no *.so in the cache dir: {sorted(p.name for p in cache.rglob('*'))}"

    truncated = {}
    for lib in libs:
        size = lib.stat().st_size
        with open(lib, "r+b") as f:
            f.truncate(size // 2)
        truncated[lib] = size // 2

    torch._dynamo.reset()
    coil.reset()
    second = _run_cache_script(cache)  # a fresh process must detect the bad library
    assert second.returncode == 0 and "COIL_CACHE_OK" in second.stdout, second.stderr[-3000:]
    for lib, bad_size in truncated.items():
        assert not lib.exists() or lib.stat().st_size != bad_size, (
            f"the truncated library {lib} was left in the cache"
        )


# --------------------------------------------------------------------------------------------
# malformed graph files
# --------------------------------------------------------------------------------------------


@pytest.fixture
def valid_graph_json(tmp_path):
    coil = requires_coil()
    with coil.config.patch(debug_dir=str(tmp_path / "debug")):
        torch.compile(lambda x: torch.softmax(x, -1) * 2, backend="coil")(make_tensor((4, 8)))
    found = sorted((tmp_path / "debug").rglob("graph.json"))
    assert found, "debug_dir did not receive a graph.json"
    return found[0]


def _empty_nested_objects(doc):
    """Replace every object inside every list with {} (nodes without any field)."""
    if isinstance(doc, list):
        return [{} if isinstance(v, dict) else _empty_nested_objects(v) for v in doc]
    if isinstance(doc, dict):
        return {k: _empty_nested_objects(v) for k, v in doc.items()}
    return doc


def _drop_largest_field(doc):
    """Remove the top-level field with the most content (the graph's nodes, in practice)."""
    if not isinstance(doc, dict) or not doc:
        return doc
    key = max(doc, key=lambda k: len(json.dumps(doc[k])))
    return {k: v for k, v in doc.items() if k != key}


MALFORMED = {
    "truncated": lambda text: text[: len(text) // 2],
    "empty_file": lambda text: "",
    "not_json": lambda text: "this is not a graph\n",
    "empty_object": lambda text: "{}",
    "top_level_list": lambda text: "[]",
    "null": lambda text: "null",
    "nodes_without_fields": lambda text: json.dumps(_empty_nested_objects(json.loads(text))),
    "largest_field_missing": lambda text: json.dumps(_drop_largest_field(json.loads(text))),
}


def _malformed_file(valid_graph_json, tmp_path, case):
    text = valid_graph_json.read_text()
    bad_text = MALFORMED[case](text)
    if case in ("nodes_without_fields", "largest_field_missing") and (
        json.loads(bad_text) == json.loads(text)
    ):
        pytest.skip(f"{case}: graph.json has no such structure to break")
    bad = tmp_path / f"bad_{case}.json"
    bad.write_text(bad_text)
    return bad


@pytest.mark.parametrize("case", list(MALFORMED))
def test_repro_malformed_graph_raises_graph_error(valid_graph_json, tmp_path, case):
    coil = requires_coil()
    assert issubclass(coil.GraphError, Exception)
    bad = _malformed_file(valid_graph_json, tmp_path, case)
    with pytest.raises(coil.GraphError) as err:
        coil.repro(str(bad))
    assert str(err.value).strip(), "GraphError needs a message"


@pytest.mark.parametrize("case", ["truncated", "nodes_without_fields"])
def test_cli_repro_malformed_graph_one_line_error(valid_graph_json, tmp_path, case):
    requires_coil()
    bad = _malformed_file(valid_graph_json, tmp_path, case)
    proc = subprocess.run(
        [sys.executable, "-m", "coil", "repro", str(bad)],
        check=False,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        env=_subprocess_env(),
    )
    assert proc.returncode != 0, f"exit code 0 on a malformed graph; stdout: {proc.stdout[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error message, got:\n{proc.stderr[-3000:]}"
    assert lines[0].strip()


# --------------------------------------------------------------------------------------------
# a graph sent to eager runs as Dynamo captured it, never slower than eager
# --------------------------------------------------------------------------------------------


def _aten_ops(call) -> list:
    """The ATen ops `call()` runs, as the profiler names them ("aten::mish"): a dispatch mode
    would make Dynamo run the user's function instead of the compiled one."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        call()
    return [e.name for e in prof.events()]


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_failed_graph_runs_dynamos_graph(tmp_path, train):
    # AOTAutograd's graph has mish decomposed (x * tanh(softplus(x))): run eagerly, several ops
    # where eager runs one. A graph coil could not compile must run Dynamo's graph instead
    # (eager's own mish), forward and, in training, backward.
    coil = requires_coil()

    def fn(x):
        return torch.nn.functional.mish(x * 2) + 1

    x = make_tensor((4, 32)).requires_grad_(train)
    with (
        coil.config.patch(inject_build_failure=True, debug_dir=str(tmp_path)),
        torch.set_grad_enabled(train),
    ):
        compiled = torch.compile(fn, backend="coil")
        with pytest.warns(coil.CoilWarning):
            compiled(x)
        ops = _aten_ops(lambda: compiled(x))
        out = compiled(x)
    records = coil.compiled_graphs()
    assert [r.kind for r in records] == ["forward" if train else "inference"], records
    assert "Dynamo's graph runs as captured" in records[0].eager_reason, records[0].eager_reason
    assert "aten::mish" in ops, ops
    assert "aten::log1p" not in ops, ops
    assert_same(out, fn(x))
    if train:
        out.sum().backward()
        expected = x.grad.clone()
        x.grad = None
        fn(x).sum().backward()
        assert_same(expected, x.grad)
