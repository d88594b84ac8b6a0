"""Ahead-of-time packages (python/coil/aot.py): torch.export -> coil.aot_compile -> coil.aot_load in
a fresh process, matching eager at two batch sizes; the input checks the package's library makes
(a size outside the exported range, another dtype, a non-contiguous input); damaged packages and
other versions refused with a clear error; programs coil cannot package refused at compile."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import coil
from coil import _C


class Block(torch.nn.Module):
    """Linear + LayerNorm + GELU + residual, and a convolution branch: library calls (addmm,
    convolution with lists and an optional bias) next to coil's own kernels."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.conv = torch.nn.Conv1d(4, 4, 3, padding=1)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 32))

    def forward(self, x, y):
        h = torch.nn.functional.gelu(self.norm(self.fc(x))) * self.scale + x
        return h.softmax(-1), {"conv": self.conv(y).relu(), "sum": h.sum(0)}


def _export(model, batch=8):
    b = torch.export.Dim("b", min=2, max=64)
    x, y = torch.randn(batch, 32), torch.randn(batch, 4, 16)
    return torch.export.export(model, (x, y), dynamic_shapes={"x": {0: b}, "y": {0: b}})


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    torch.manual_seed(0)
    model = Block().eval()
    path = str(tmp_path_factory.mktemp("aot") / "block.coil")
    with torch.no_grad():
        assert coil.aot_compile(_export(model), path) == path
    return model, path


def test_matches_eager_in_a_fresh_process(package, tmp_path):
    model, path = package
    torch.manual_seed(1)
    cases = [(torch.randn(b, 32), torch.randn(b, 4, 16)) for b in (3, 17)]
    with torch.no_grad():
        expected = [model(*c) for c in cases]
    torch.save(cases, tmp_path / "inputs.pt")
    script = textwrap.dedent(f"""
        import torch, coil
        model = coil.aot_load({path!r})
        cases = torch.load({str(tmp_path / 'inputs.pt')!r})
        torch.save([model(*c) for c in cases], {str(tmp_path / 'outputs.pt')!r})
    """)
    # A process that never saw the model's code: only the package.
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)
    got = torch.load(tmp_path / "outputs.pt")
    for (soft, rest), (esoft, erest) in zip(got, expected):
        torch.testing.assert_close(soft, esoft)
        torch.testing.assert_close(rest["conv"], erest["conv"])
        torch.testing.assert_close(rest["sum"], erest["sum"])


def test_inputs_checked(package):
    _, path = package
    model = coil.aot_load(path)
    with pytest.raises(coil.AotError, match=r"size s\w+ = 65 is outside the range \[2, 64\]"):
        model(torch.randn(65, 32), torch.randn(65, 4, 16))
    with pytest.raises(coil.AotError, match=r"expected float32, got double"):
        model(torch.randn(4, 32, dtype=torch.float64), torch.randn(4, 4, 16))
    with pytest.raises(coil.AotError, match=r"\(x\) dim \d: stride"):
        model(torch.randn(32, 4).t(), torch.randn(4, 4, 16))
    with pytest.raises(coil.AotError, match=r"dim 0: size 5, expected 4"):
        model(torch.randn(4, 32), torch.randn(5, 4, 16))
    with pytest.raises(coil.AotError, match=r"takes inputs structured as"):
        model(torch.randn(4, 32))


def test_damaged_or_foreign_packages_refused(package, tmp_path):
    _, path = package
    data = bytearray(open(path, "rb").read())
    truncated = tmp_path / "truncated.coil"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(coil.AotError, match="truncated"):
        coil.aot_load(str(truncated))
    flipped = tmp_path / "flipped.coil"
    data[-10] ^= 0xFF
    flipped.write_bytes(data)
    with pytest.raises(coil.AotError, match="corrupt"):
        coil.aot_load(str(flipped))
    entries = _C.read_package(path)
    meta = json.loads(entries["metadata.json"])
    for key, value, message in [("torch_version", "1.0.0", "made by torch 1.0.0"),
                                ("coil_version", "0.0.1", "made by coil 0.0.1"),
                                ("device", "cuda", "compiled for device 'cuda'")]:
        other = dict(entries)
        other["metadata.json"] = json.dumps({**meta, key: value}).encode()
        p = tmp_path / f"{key}.coil"
        _C.write_package(str(p), other)
        with pytest.raises(coil.AotError, match=message):
            coil.aot_load(str(p))


def test_unpackageable_program_refused(tmp_path):
    class NumberOut(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x > 0)  # a size that depends on the data

    ep = torch.export.export(NumberOut(), (torch.randn(8),))
    with pytest.raises(coil.AotError, match="cannot be packaged"):
        coil.aot_compile(ep, str(tmp_path / "x.coil"))
    assert not os.path.exists(tmp_path / "x.coil")
