"""coil::Package (cpp/coil/package.h) run from C++ through examples/run_package.

The example is built once per session with CMake (coil_package and coil's runtime, not the
compiler: about 40 s on 2 cores). The packages are made by hand: a small graph library
implementing runtime/graph_abi.h through torch's C shim (out0 = x * w + 1, out1 = w * 2, for a
float32 weight w of 4 and a user input x of [s0, 4]), written with _C.write_package next to a
metadata.json of the schema coil.aot_compile writes. Correctness: the outputs against torch's.
Errors (must fail cleanly, exit 1, with a message naming what is wrong): damaged files, another
torch or coil version, a device this process lacks, the wrong inputs.

Needs cmake, ninja (scripts/install_deps.sh installs both) and a C++ compiler.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from coil import _C
from filelock import FileLock
from torch.utils import cpp_extension

REPO = Path(__file__).resolve().parents[2]
COMPILER = os.environ.get("CXX", "g++")

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which(COMPILER) is None,
    reason="needs cmake and a C++ compiler",
)

# The graph's library: only the C shim, as coil's generated wrappers use it.
GRAPH_SOURCE = r"""
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <cstdint>
#include <string>

namespace {

thread_local std::string g_error;

// Deletes the inputs (the call owns them, on failure too) and records the error.
int32_t fail(int32_t code, const std::string& message, void* const* inputs) {
  for (int i = 0; i < 2; ++i) aoti_torch_delete_tensor_object((AtenTensorHandle)inputs[i]);
  g_error = message;
  return code;
}

}  // namespace

extern "C" int32_t coil_graph_run(void* const* inputs, const int64_t*, void** outputs) {
  AtenTensorHandle w = (AtenTensorHandle)inputs[0];
  AtenTensorHandle x = (AtenTensorHandle)inputs[1];
  int64_t dim = 0;
  int32_t dtype = 0;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  aoti_torch_get_dim(x, &dim);
  aoti_torch_get_dtype(x, &dtype);
  if (dim != 2 || dtype != aoti_torch_dtype_float32()) {
    return fail(3, "input 0 (x): expected a float32 tensor of 2 dims", inputs);
  }
  aoti_torch_get_sizes(x, &sizes);
  aoti_torch_get_strides(x, &strides);
  const int64_t n = sizes[0];
  if (sizes[1] != 4) {
    return fail(3, "input 0 (x) dim 1: expected 4, got " + std::to_string(sizes[1]), inputs);
  }
  if (n < 2 || n > 1024) {
    return fail(3, "input 0 (x) dim 0: s0 = " + std::to_string(n) + " is outside [2, 1024]",
                inputs);
  }
  AtenTensorHandle out0 = nullptr, out1 = nullptr;
  const int64_t out0_sizes[] = {n, 4}, out0_strides[] = {4, 1}, out1_sizes[] = {4}, one[] = {1};
  const int32_t f32 = aoti_torch_dtype_float32(), cpu = aoti_torch_device_type_cpu();
  if (aoti_torch_empty_strided(2, out0_sizes, out0_strides, f32, cpu, 0, &out0) != 0 ||
      aoti_torch_empty_strided(1, out1_sizes, one, f32, cpu, 0, &out1) != 0) {
    return fail(1, "allocation failed", inputs);
  }
  void *pw = nullptr, *px = nullptr, *p0 = nullptr, *p1 = nullptr;
  aoti_torch_get_data_ptr(w, &pw);
  aoti_torch_get_data_ptr(x, &px);
  aoti_torch_get_data_ptr(out0, &p0);
  aoti_torch_get_data_ptr(out1, &p1);
  const float* wf = static_cast<const float*>(pw);
  const float* xf = static_cast<const float*>(px);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      static_cast<float*>(p0)[i * 4 + j] = xf[i * strides[0] + j * strides[1]] * wf[j] + 1.0f;
    }
  }
  for (int64_t j = 0; j < 4; ++j) static_cast<float*>(p1)[j] = wf[j] * 2.0f;
  aoti_torch_delete_tensor_object(w);
  aoti_torch_delete_tensor_object(x);
  outputs[0] = out0;
  outputs[1] = out1;
  return 0;
}

extern "C" const char* coil_graph_error() { return g_error.c_str(); }

// coil's ATen shim is handed over first; this graph uses torch's C shim instead, but checks that
// what it is given is a CoilAtenShim of the version it knows (its first field).
extern "C" int32_t coil_graph_bind(const void* shim) {
  return shim && *static_cast<const int32_t*>(shim) == 1 ? 0 : 1;
}

extern "C" const char* coil_graph_signature() {
  return "{\"tensor_inputs\": 2, \"scalar_inputs\": 0, \"outputs\": 2, \"checks_inputs\": true}";
}
"""

WEIGHT = torch.tensor([0.5, -1.0, 2.0, 3.25])


def metadata(**changes) -> dict:
    meta = {
        "format": 1,
        "coil_version": _C.COIL_VERSION,
        "torch_version": torch.__version__.split("+")[0],
        "device": "cpu",
        "library": "graph.so",
        "graph_inputs": [
            {"kind": "weight", "entry": "weights/0", "name": "w", "dtype": "float32", "sizes": [4]},
            {"kind": "user", "index": 0},
        ],
        "user_inputs": [{"name": "x", "dtype": "float32", "sizes": ["s0", 4]}],
        "num_outputs": 2,
        "symbols": {"s0": {"min": 2, "max": 1024}},
        "report": "made by hand in tests/python/test_package_cpp.py",
    }
    meta.update(changes)
    return meta


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, **kw)


def run_with_tmpdir(cmd: list, tmpdir: Path) -> subprocess.CompletedProcess:
    """Runs cmd with TMPDIR=tmpdir, and checks that it leaves nothing there."""
    tmpdir.mkdir()
    r = run(cmd, env={**os.environ, "TMPDIR": str(tmpdir)})
    assert list(tmpdir.iterdir()) == []
    return r


@pytest.fixture(scope="module")
def run_package(tmp_path_factory) -> Path:
    """examples/run_package, built with CMake once per session (xdist workers share it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this session's, shared by its workers
    build = root / "run_package_build"
    with FileLock(str(root / "run_package_build.lock")):
        if not (build / "run_package").exists():
            build_run_package(build)
    return build / "run_package"


def build_run_package(build: Path) -> None:
    configure = [
        "cmake",
        "-S",
        REPO / "examples" / "run_package",
        "-B",
        build,
        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
        f"-DCMAKE_CXX_COMPILER={COMPILER}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    start = time.perf_counter()
    for cmd in (configure, ["cmake", "--build", build, "-j", "2"]):
        r = run(cmd)
        assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
    print(f"run_package built in {time.perf_counter() - start:.1f} s", file=sys.stderr)


@pytest.fixture(scope="module")
def graph_so(tmp_path_factory) -> bytes:
    """The graph's shared library, built against torch's C shim."""
    folder = tmp_path_factory.mktemp("graph")
    (folder / "graph.cpp").write_text(GRAPH_SOURCE)
    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    lib = cpp_extension.library_paths()[0]
    r = run(
        [
            COMPILER,
            "-O1",
            "-std=c++17",
            "-shared",
            "-fPIC",
            *includes,
            folder / "graph.cpp",
            "-o",
            folder / "graph.so",
            f"-L{lib}",
            "-ltorch_cpu",
            "-lc10",
            f"-Wl,-rpath,{lib}",
        ]
    )
    assert r.returncode == 0, r.stderr
    return (folder / "graph.so").read_bytes()


def write_package(path: Path, graph_so: bytes, meta: dict | None = None) -> Path:
    meta = metadata() if meta is None else meta
    _C.write_package(
        str(path),
        {
            "metadata.json": json.dumps(meta).encode(),
            "graph.so": graph_so,
            "weights/0": WEIGHT.numpy().tobytes(),
        },
    )
    return path


def save_inputs(path: Path, *tensors: torch.Tensor) -> Path:
    torch.save(list(tensors), path)
    return path


def expect_failure(run_package: Path, package: Path, inputs: Path, message: str) -> None:
    r = run([run_package, package, inputs])
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert r.stderr.startswith(f"run_package: coil: package '{package}': "), r.stderr


# --------------------------------------------------------------------------------------------
# correctness
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [2, 7, 1024])
def test_outputs_match_torch(run_package, graph_so, tmp_path, rows):
    package = write_package(tmp_path / "model.coil", graph_so)
    x = torch.randn(rows, 4)
    inputs = save_inputs(tmp_path / "in.pt", x)
    r = run_with_tmpdir([run_package, package, inputs, tmp_path / "out.pt"], tmp_path / "tmp")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(f"output 0: Float [{rows}, 4]:"), r.stdout
    assert r.stdout.splitlines()[1] == "output 1: Float [4]: 1 -2 4 6.5", r.stdout
    out = torch.load(tmp_path / "out.pt")
    assert isinstance(out, tuple) and len(out) == 2
    torch.testing.assert_close(out[0], x * WEIGHT + 1)
    torch.testing.assert_close(out[1], WEIGHT * 2)


def test_non_contiguous_input(run_package, graph_so, tmp_path):
    package = write_package(tmp_path / "model.coil", graph_so)
    x = torch.randn(4, 6).t()  # [6, 4], strides (1, 6)
    r = run([run_package, package, save_inputs(tmp_path / "in.pt", x), tmp_path / "out.pt"])
    assert r.returncode == 0, r.stderr
    torch.testing.assert_close(torch.load(tmp_path / "out.pt")[0], x * WEIGHT + 1)


def test_torch_local_version_suffix_is_ignored(run_package, graph_so, tmp_path):
    meta = metadata(torch_version=torch.__version__.split("+")[0] + "+cu126")
    package = write_package(tmp_path / "model.coil", graph_so, meta)
    r = run([run_package, package, save_inputs(tmp_path / "in.pt", torch.randn(3, 4))])
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------------------------
# errors: exit 1 with a message naming the package and what is wrong
# --------------------------------------------------------------------------------------------


def test_truncated(run_package, graph_so, tmp_path):
    package = write_package(tmp_path / "model.coil", graph_so)
    data = package.read_bytes()
    package.write_bytes(data[: len(data) - 10])
    expect_failure(
        run_package,
        package,
        save_inputs(tmp_path / "in.pt", torch.randn(3, 4)),
        "truncated: entry ",
    )


def test_flipped_byte_in_library(run_package, graph_so, tmp_path):
    package = write_package(tmp_path / "model.coil", graph_so)
    data = bytearray(package.read_bytes())
    data[data.index(b"\x7fELF") + 200] ^= 0x01
    package.write_bytes(bytes(data))
    expect_failure(
        run_package,
        package,
        save_inputs(tmp_path / "in.pt", torch.randn(3, 4)),
        "entry 'graph.so' is corrupt (checksum mismatch)",
    )


def test_not_a_package(run_package, tmp_path):
    inputs = save_inputs(tmp_path / "in.pt", torch.randn(3, 4))
    expect_failure(run_package, inputs, inputs, "not a coil package")


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("torch_version", "2.11.0", "package made by torch 2.11.0, this is torch "),
        ("coil_version", "0.0.1", f"package made by coil 0.0.1, this is coil {_C.COIL_VERSION}"),
        ("format", 2, "metadata format 2, this coil reads 1"),
        ("device", "tpu", "package made for device 'tpu'"),
        ("num_outputs", 3, "its library takes 2 tensors and 0 ints and gives 2 outputs"),
    ],
)
def test_metadata_mismatch(run_package, graph_so, tmp_path, field, value, message):
    package = write_package(tmp_path / "model.coil", graph_so, metadata(**{field: value}))
    expect_failure(
        run_package, package, save_inputs(tmp_path / "in.pt", torch.randn(3, 4)), message
    )


def test_library_folder_removed_after_a_failure(run_package, graph_so, tmp_path):
    # num_outputs disagrees with the library's signature: found after the library is loaded.
    package = write_package(tmp_path / "model.coil", graph_so, metadata(num_outputs=3))
    inputs = save_inputs(tmp_path / "in.pt", torch.randn(3, 4))
    assert run_with_tmpdir([run_package, package, inputs], tmp_path / "tmp").returncode == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests a process without CUDA")
def test_cuda_package_without_cuda(run_package, graph_so, tmp_path):
    package = write_package(tmp_path / "model.coil", graph_so, metadata(device="cuda"))
    expect_failure(
        run_package,
        package,
        save_inputs(tmp_path / "in.pt", torch.randn(3, 4)),
        "package made for cuda, but this process has no CUDA device",
    )


def test_weight_of_the_wrong_size(run_package, graph_so, tmp_path):
    meta = metadata()
    meta["graph_inputs"][0]["sizes"] = [5]
    package = write_package(tmp_path / "model.coil", graph_so, meta)
    expect_failure(
        run_package, package, save_inputs(tmp_path / "in.pt", torch.randn(3, 4)), "weights/0"
    )


@pytest.mark.parametrize(
    "inputs,message",
    [
        ((torch.randn(3, 4), torch.randn(3, 4)), "takes 1 input (x), got 2"),
        ((), "takes 1 input (x), got 0"),
        ((torch.randn(3, 5),), "input 0 (x) dim 1: expected 4, got 5"),
        ((torch.randn(1, 4),), "input 0 (x) dim 0: s0 = 1 is outside [2, 1024]"),
    ],
)
def test_wrong_inputs(run_package, graph_so, tmp_path, inputs, message):
    package = write_package(tmp_path / "model.coil", graph_so)
    expect_failure(run_package, package, save_inputs(tmp_path / "in.pt", *inputs), message)


# --------------------------------------------------------------------------------------------
# the container from Python (no build needed)
# --------------------------------------------------------------------------------------------


def test_container_round_trip_and_errors(tmp_path):
    path = str(tmp_path / "p.coil")
    entries = {"b": bytes(range(256)) * 10, "a": b"", "metadata.json": b"{}"}
    _C.write_package(path, entries)
    assert _C.read_package(path) == entries
    data = bytearray(Path(path).read_bytes())
    data[data.index(bytes(range(256))) + 5] ^= 0x01
    Path(path).write_bytes(bytes(data))
    with pytest.raises(_C.PackageError, match="entry 'b' is corrupt"):
        _C.read_package(path)
    assert issubclass(_C.PackageError, RuntimeError)
    with pytest.raises(_C.PackageError, match="No such file"):
        _C.read_package(str(tmp_path / "absent.coil"))


def test_coil_version_is_pyprojects():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'\nversion = "{_C.COIL_VERSION}"\n' in pyproject


# --------------------------------------------------------------------------------------------
# a package made by coil.aot_compile, run from C++
# --------------------------------------------------------------------------------------------


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        return self.fc2(h).log_softmax(-1), h.amax(0)


def test_aot_package_from_cpp(run_package, tmp_path):
    """export -> coil.aot_compile -> the C++ example (no Python in the run), at two batch sizes,
    matching eager; a batch outside the exported range fails with the range in the message."""
    import coil

    torch.manual_seed(0)
    model = _MLP().eval()
    b = torch.export.Dim("b", min=2, max=128)
    ep = torch.export.export(model, (torch.randn(4, 16),), dynamic_shapes={"x": {0: b}})
    package = Path(coil.aot_compile(ep, str(tmp_path / "mlp.coil")))
    for batch in (3, 100):
        x = torch.randn(batch, 16)
        out = tmp_path / f"out{batch}.pt"
        r = run_with_tmpdir([run_package, package, save_inputs(tmp_path / "in.pt", x), out],
                            tmp_path / f"tmp{batch}")
        assert r.returncode == 0, r.stderr
        got = torch.load(out)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(got[0], expected[0])
        torch.testing.assert_close(got[1], expected[1])
    r = run([run_package, package, save_inputs(tmp_path / "big.pt", torch.randn(129, 16))])
    assert r.returncode == 1 and "is outside the range [2, 128]" in r.stderr, r.stderr
