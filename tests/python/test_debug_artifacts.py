"""Debug artifacts: with debug on, every compiled graph gets a folder holding graph.txt,
graph.json, ir_pre_fusion.txt, ir_post_fusion.txt, fusion.txt, schedule.txt, output_code.py and
the kernel sources; graph.json replays with coil.repro / `python -m coil repro`; the wrapper and
kernel sources name what they came from. All tests need backend coil (skipped otherwise)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import make_tensor, requires_coil

SUBPROCESS_TIMEOUT = 300
DEBUG_FILES = (
    "graph.txt",
    "graph.json",
    "ir_pre_fusion.txt",
    "ir_post_fusion.txt",
    "fusion.txt",
    "schedule.txt",
    "output_code.py",
)
SHAPE = (4, 8)


def _softmax(x):
    return torch.softmax(x, dim=-1)


def _subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    env.pop("COIL_DEBUG", None)
    env.pop("COIL_DEBUG_DIR", None)
    env.update(extra)
    return env


def _under(path, root) -> bool:
    return os.path.realpath(str(path)).startswith(os.path.realpath(str(root)) + os.sep)


@pytest.fixture
def softmax_debug(tmp_path):
    """Compile and run _softmax with debug_dir=tmp_path; return (record, graph folder)."""
    coil = requires_coil()
    x = make_tensor(SHAPE)
    with coil.config.patch(debug_dir=str(tmp_path)):
        out = torch.compile(_softmax, backend="coil")(x)
    torch.testing.assert_close(out, _softmax(x))
    records = coil.compiled_graphs()
    assert len(records) == 1, f"expected one graph, got {len(records)}"
    rec = records[0]
    assert not rec.eager_fallback
    assert rec.debug_dir is not None, "debug_dir was set: the record must name its folder"
    folder = Path(rec.debug_dir)
    assert folder.is_dir(), folder
    assert _under(folder, tmp_path), f"{folder} is not under {tmp_path}"
    return rec, folder


def _comments(source: str) -> str:
    """All C/C++ comments of a source file, joined."""
    return "\n".join(re.findall(r"//[^\n]*|/\*.*?\*/", source, flags=re.DOTALL))


def test_debug_folder_holds_every_artifact(softmax_debug):
    _, folder = softmax_debug
    missing = [f for f in DEBUG_FILES if not (folder / f).is_file()]
    assert not missing, f"missing in {folder}: {missing}; present: {sorted(os.listdir(folder))}"
    empty = [f for f in DEBUG_FILES if (folder / f).stat().st_size == 0]
    assert not empty, f"empty artifacts: {empty}"
    sources = sorted(folder.rglob("*.cpp"))
    assert sources, f"no kernel source (*.cpp) in {folder}"
    assert all(s.stat().st_size > 0 for s in sources)


def test_graph_json_replays_with_repro(softmax_debug):
    coil = requires_coil()
    _, folder = softmax_debug
    outs = coil.repro(str(folder / "graph.json"))
    if isinstance(outs, torch.Tensor):
        outs = [outs]
    outs = list(outs)
    expected = [_softmax(make_tensor(SHAPE))]
    assert len(outs) == len(expected)
    for got, exp in zip(outs, expected):
        assert isinstance(got, torch.Tensor)
        assert got.shape == exp.shape and got.dtype == exp.dtype, (got.shape, got.dtype)
        # whatever the random inputs, softmax rows are probabilities summing to one
        assert torch.all((got >= 0) & (got <= 1))
        torch.testing.assert_close(got.sum(-1), torch.ones(SHAPE[0]))


def test_cli_repro_replays_graph_json(softmax_debug):
    _, folder = softmax_debug
    proc = subprocess.run(
        [sys.executable, "-m", "coil", "repro", str(folder / "graph.json")],
        check=False,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        env=_subprocess_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


def test_output_code_names_the_kernels(softmax_debug):
    rec, folder = softmax_debug
    assert rec.kernel_names, "softmax must produce at least one coil kernel"
    code = (folder / "output_code.py").read_text()
    missing = [k for k in rec.kernel_names if k not in code]
    assert not missing, f"output_code.py does not mention kernels {missing}"


def test_every_kernel_has_a_source(softmax_debug):
    # each kernel name is findable among the sources: as a file name or inside a file
    rec, folder = softmax_debug
    sources = sorted(folder.rglob("*.cpp"))
    missing = [
        k for k in rec.kernel_names if not any(k in p.name or k in p.read_text() for p in sources)
    ]
    assert not missing, f"no kernel source for {missing}: {[p.name for p in sources]}"


def test_kernel_header_comment_names_graph_nodes(softmax_debug):
    _, folder = softmax_debug
    comments = [_comments(p.read_text()) for p in sorted(folder.rglob("*.cpp"))]
    assert any(comments), "kernel sources carry no header comment"
    # softmax's nodes: amax (row max), sub, exp, sum, div -- or the softmax node itself
    assert any("amax" in c or "softmax" in c for c in comments), (
        "no kernel header comment names the softmax graph nodes:\n" + "\n---\n".join(comments)
    )


def test_each_graph_gets_its_own_folder(tmp_path):
    coil = requires_coil()

    def fn(x):
        y = x.exp() * 2
        torch._dynamo.graph_break()
        return y.softmax(-1)

    x = make_tensor(SHAPE)
    with coil.config.patch(debug_dir=str(tmp_path)):
        out = torch.compile(fn, backend="coil")(x)
    torch.testing.assert_close(out, fn(x))
    records = coil.compiled_graphs()
    assert len(records) >= 2
    dirs = [r.debug_dir for r in records]
    assert None not in dirs and len(set(dirs)) == len(dirs), dirs
    for d in dirs:
        assert _under(d, tmp_path) and (Path(d) / "graph.json").is_file(), d


def test_no_debug_folder_by_default():
    coil = requires_coil()
    if os.environ.get("COIL_DEBUG") or os.environ.get("COIL_DEBUG_DIR"):
        pytest.skip("debug output is switched on in this environment")
    torch.compile(_softmax, backend="coil")(make_tensor(SHAPE))
    records = coil.compiled_graphs()
    assert records and all(r.debug_dir is None for r in records), [r.debug_dir for r in records]


ENV_SCRIPT = r"""
import torch
import coil

def fn(x):
    return torch.softmax(x, dim=-1)

x = torch.randn(4, 8)
torch.testing.assert_close(torch.compile(fn, backend="coil")(x), fn(x))
records = coil.compiled_graphs()
assert records and records[0].debug_dir, "COIL_DEBUG_DIR set but the record has no debug_dir"
print("DEBUG_DIR=" + records[0].debug_dir)
"""


def test_coil_debug_dir_env_var(tmp_path):
    requires_coil()
    root = tmp_path / "from_env"
    proc = subprocess.run(
        [sys.executable, "-c", ENV_SCRIPT],
        check=False,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        env=_subprocess_env(COIL_DEBUG_DIR=str(root)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    folders = sorted(p.parent for p in root.rglob("graph.json"))
    assert folders, f"COIL_DEBUG_DIR={root} produced no graph folder"
    for name in DEBUG_FILES:
        assert (folders[0] / name).is_file(), f"{name} missing in {folders[0]}"
    reported = proc.stdout.split("DEBUG_DIR=")[-1].strip()
    assert _under(reported, root), f"record's debug_dir {reported} is not under {root}"
