"""Dynamic shapes: graphs with symbolic sizes compile once and run at every size.

Each op family runs under torch.compile(dynamic=True) at three or more sizes (the sizes cross
coil's size-dependent choices: one block vs several, short rows vs long ones, loops the C++
kernels split across threads), compared with eager at each, with exactly one compiled graph that
is dynamic and never runs eagerly. Then mark_dynamic, automatic dynamic (a second shape makes
Dynamo recompile with symbols), forward and backward, and modules (MLP, transformer block, GPT-2
at several lengths, a CNN at several batch sizes).

The op families also run with Triton kernels under Triton's interpreter (at small sizes), in a
child process with TRITON_INTERPRET=1 (test_in_interpreter_process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import BACKEND, assert_same, requires_coil

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's dynamic shapes")

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"

# (function, input shapes as functions of n). Sizes are drawn by _sizes.
OPS = {
    "pointwise": (lambda x: torch.sigmoid(x) * x.exp() - 1, ["n,m"]),
    "sum_rows": (lambda x: x.sum(-1), ["n,m"]),
    "sum_cols": (lambda x: x.sum(0), ["n,m"]),
    "mean_all": (lambda x: x.mean(), ["n,m"]),
    "amax": (lambda x: x.amax(1), ["n,m"]),
    "argmax": (lambda x: x.argmax(1), ["n,m"]),
    "var": (lambda x: x.var(1), ["n,m"]),
    "softmax": (lambda x: torch.softmax(x, -1), ["n,m"]),
    "log_softmax_dim0": (lambda x: torch.log_softmax(x, 0), ["n,m"]),
    "layer_norm": (lambda x: F.layer_norm(x, x.shape[-1:]), ["n,m"]),
    "view_flat": (lambda x: x.view(-1) * 2, ["n,m"]),
    "reshape_pairs": (lambda x: x.reshape(-1, 2).sum(1), ["n,2m"]),
    "transpose_add": (lambda x: x.t() + 1, ["n,m"]),
    "permute3": (lambda x: x.permute(2, 0, 1).contiguous() * 2, ["3,n,m"]),
    "slice": (lambda x: x[:, 1:-1] * 2, ["n,m"]),
    "slice_step": (lambda x: x[::2] + 1, ["n,m"]),
    "select_last": (lambda x: x[:, -1:] + x[0], ["n,m"]),
    "narrow": (lambda x: x.narrow(1, 1, 2) * 3, ["n,m"]),
    "cat": (lambda x, y: torch.cat([x, y], 0) * 2, ["n,m", "3,m"]),
    "outer": (lambda x, y: x[:, None] + y[None], ["n", "m"]),
    "broadcast": (lambda x, y: x + y, ["n,m", "m"]),
    "size_as_number": (lambda x: x * x.shape[0] + x.shape[1], ["n,m"]),
    "arange": (lambda x: x + torch.arange(x.shape[-1]), ["n,m"]),
    "full_like": (lambda x: x + torch.full_like(x, 2.0), ["n,m"]),
    "zeros": (lambda x: torch.zeros(x.shape[0], 3) + x[:, :3], ["n,m"]),
    "mm": (lambda x, y: (x @ y).relu(), ["n,m", "m,4"]),
    "linear": (lambda x, w: F.linear(x, w).tanh(), ["n,m", "6,m"]),
    "bmm": (lambda x, y: torch.bmm(x, y) * 2, ["2,n,m", "2,m,4"]),
    "embedding": (lambda w, i: F.embedding(i, w) * 2, ["m,4", "index n<m"]),
    "gather": (lambda x: x.gather(1, torch.zeros(x.shape[0], 2, dtype=torch.long)), ["n,m"]),
    "where": (lambda x: torch.where(x > 0, x, 0.5 * x), ["n,m"]),
    "pad": (lambda x: F.pad(x, (1, 2)), ["n,m"]),
    "flip": (lambda x: x.flip(1) + 1, ["n,m"]),
    "repeat": (lambda x: x.repeat(2, 1), ["n,m"]),
    "max_pool": (lambda x: F.max_pool2d(x, 2), ["2,3,2n,2m"]),
    "adaptive_avg_pool": (lambda x: F.adaptive_avg_pool2d(x, 1), ["n,3,m,m"]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1).relu(), ["n,4,m,m", "5,4,3,3"]),
}

# (n, m) per call: small and equal, odd and wider, then rows long enough that reductions loop and
# C++ loops split across threads. The interpreter runs the small ones only.
SIZES = [(5, 7), (9, 130), (33, 1100)]
INTERPRETER_SIZES = [(5, 7), (7, 9), (10, 17)]


def _sizes():
    return INTERPRETER_SIZES if INTERPRETING else SIZES


def _make(spec: str, n: int, m: int) -> torch.Tensor:
    if spec.startswith("index"):
        return torch.randint(0, m, (n,))
    dims = []
    if spec.count(",") >= 2:
        # Images and batches of matrices: distinct small sizes (a 1100x1100 image is not needed).
        n, m = 2 + n % 11, 3 + m % 23
    for d in spec.split(","):
        dims.append(eval(d, {}, {"n": n, "m": m}))  # noqa: S307 - "2n" style shapes below
    return torch.randn(*dims)


def _shape_env(spec: str) -> str:
    return spec.replace("2n", "2*n").replace("2m", "2*m")


def _records():
    return requires_coil().compiled_graphs()


def _reset():
    torch._dynamo.reset()
    requires_coil().reset()


@pytest.fixture(autouse=True)
def _backend(request):
    if request.node.name == "test_in_interpreter_process":
        yield
        return
    coil = requires_coil()
    if INTERPRETING:
        if not request.node.get_closest_marker("interpreter"):
            pytest.skip("not among the interpreter's cases")
        with coil.config.patch(cpu_backend="triton"):
            yield
    else:
        yield


@pytest.mark.skipif(INTERPRETING, reason="this process already runs the tests themselves")
def test_in_interpreter_process():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", COIL_CPU_BACKEND="triton")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900,
                       cwd=os.path.dirname(__file__))
    assert r.returncode == 0, f"{r.stdout[-8000:]}\n{r.stderr[-4000:]}"


def _run_at_sizes(fn, specs, sizes, dynamic=True, mark=None):
    """Compiles fn once and calls it at each size; every result must match eager's."""
    _reset()
    compiled = torch.compile(fn, backend="coil", dynamic=dynamic)
    for n, m in sizes:
        torch.manual_seed(n * 1000 + m)
        inputs = [_make(_shape_env(s), n, m) for s in specs]
        if mark:
            mark(inputs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = compiled(*inputs)
        coil_warnings = [str(w.message) for w in caught if w.category.__name__ == "CoilWarning"]
        assert not coil_warnings, coil_warnings
        assert_same(actual, fn(*inputs), atol=1e-4, rtol=1e-4, check_strides=True)
    return _records()


@pytest.mark.interpreter
@pytest.mark.parametrize("name", list(OPS))
def test_op_family_at_every_size(name):
    fn, specs = OPS[name]
    records = _run_at_sizes(fn, specs, _sizes())
    assert len(records) == 1, f"expected one graph for every size, got {len(records)}"
    r = records[0]
    assert not r.eager_fallback, r.eager_reason
    assert r.dynamic and r.symbols, "the graph should have size symbols"
    if r.fallback_ops:
        # Only ops that fall back with static shapes too (ATen's attention, ...): none here.
        pytest.fail(f"dynamic sizes made ops fall back: {r.fallback_ops}")


def test_mark_dynamic_batch_dim():
    def fn(x, w):
        return F.layer_norm(x @ w, (w.shape[1],)).relu()

    def mark(inputs):
        torch._dynamo.mark_dynamic(inputs[0], 0)

    records = _run_at_sizes(fn, ["n,16", "16,8"], [(3, 0), (11, 0), (64, 0)], dynamic=None,
                            mark=mark)
    assert len(records) == 1 and records[0].dynamic and not records[0].eager_fallback
    assert len(records[0].symbols) == 1, records[0].symbols  # the batch dim only


def test_a_reshaped_input_returned_as_a_view_is_one():
    # Merging dims of a symbolic size is a view (new strides, no copy): the graph compiles, and
    # its outputs are views of x as in eager (it ran eagerly while the reshape went through floor
    # division and modulo that the simplifier could not fold).
    def fn(x):
        a, b, s, d = x.shape
        flat = x.reshape(a * b, s, d)
        return flat.permute(0, 2, 1), x.unsqueeze(1).flatten(2, 3), flat * 2

    for shape in [(2, 3, 8, 4), (3, 5, 7, 2)]:
        _reset()
        x = torch.randn(*shape)
        got = torch.compile(fn, backend="coil", dynamic=True)(x)
        want = fn(x)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.stride() == w.stride()
            torch.testing.assert_close(g, w)
        assert got[0].data_ptr() == x.data_ptr() and got[1].data_ptr() == x.data_ptr()
        records = _records()
        assert records and all(r.dynamic and not r.eager_fallback for r in records)


def test_automatic_dynamic_after_a_second_shape():
    # Dynamo compiles the first shape statically and recompiles with symbols at the second; later
    # shapes reuse the dynamic graph. coil records both, and why Dynamo recompiled.
    fn, specs = OPS["softmax"]
    records = _run_at_sizes(fn, specs, [(4, 8), (6, 8), (9, 8), (17, 8)], dynamic=None)
    assert [r.dynamic for r in records] == [False, True], [r.symbols for r in records]
    assert not any(r.eager_fallback for r in records)
    assert records[1].compile_id.endswith("/1"), records[1].compile_id
    assert "size mismatch" in records[1].recompile_reason, records[1].recompile_reason
    assert "dynamic" in requires_coil().backend.describe(records[1])


@pytest.mark.interpreter
def test_forward_and_backward_at_every_size():
    model = nn.Sequential(nn.Linear(12, 24), nn.GELU(), nn.LayerNorm(24), nn.Linear(24, 5))
    _reset()
    compiled = torch.compile(model, backend="coil", dynamic=True)
    for n in (3, 7, 20):
        x = torch.randn(n, 12)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        model.zero_grad()
        (model(x1).softmax(-1) * torch.arange(5.0)).sum().backward()
        expected = [p.grad.clone() for p in model.parameters()] + [x1.grad]
        model.zero_grad()
        (compiled(x2).softmax(-1) * torch.arange(5.0)).sum().backward()
        actual = [p.grad.clone() for p in model.parameters()] + [x2.grad]
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)
    records = _records()
    kinds = sorted(r.kind for r in records)
    assert kinds == ["backward", "forward"], kinds
    assert all(r.dynamic and not r.eager_fallback for r in records)


class _Block(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False, is_causal=False)[0]
        return x + self.mlp(self.ln2(x))


def _check_module(model, make, sizes, atol=1e-4):
    _reset()
    compiled = torch.compile(model, backend="coil", dynamic=True)
    with torch.no_grad():
        for n in sizes:
            x = make(n)
            assert_same(compiled(x), model(x), atol=atol, rtol=1e-4)
    records = _records()
    assert records and not any(r.eager_fallback for r in records), [
        r.eager_reason for r in records
    ]
    assert len(records) == 1, "one graph should serve every size"
    assert records[0].dynamic
    return records


def test_mlp_module():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    _check_module(model, lambda n: torch.randn(n, 16), [2, 5, 77])


def test_transformer_block_varying_length():
    _check_module(_Block().eval(), lambda n: torch.randn(2, n, 32), [5, 12, 31])


def test_cnn_varying_batch():
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4),
    ).eval()
    _check_module(model, lambda n: torch.randn(n, 3, 16, 16), [2, 5, 9])


def test_gpt2_varying_length():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=101, n_positions=64)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.config.use_cache = False
    _reset()
    compiled = torch.compile(model, backend="coil", dynamic=True)
    with torch.no_grad():
        for n in (7, 19, 40):
            ids = torch.randint(0, 101, (2, n))
            torch.testing.assert_close(compiled(ids).logits, model(ids).logits, atol=1e-4,
                                       rtol=1e-4)
    records = _records()
    assert records and not any(r.eager_fallback for r in records)
    assert all(r.dynamic for r in records)
    assert len(records) == 1, [r.recompile_reason for r in records]


def test_kernels_take_sizes_and_the_wrapper_binds_them(tmp_path):
    coil = requires_coil()
    _reset()
    with coil.config.patch(debug_dir=str(tmp_path)):
        f = torch.compile(lambda x: (x * 2).sum(1), backend="coil", dynamic=True)
        for n in (3, 8):
            torch.testing.assert_close(f(torch.ones(n, 5)), torch.full((n,), 10.0))
    (record,) = coil.compiled_graphs()
    code = open(os.path.join(record.debug_dir, "output_code.py")).read()
    assert "const int64_t s" in code and "= ints[" in code, code  # kernels read size arguments
    names = [s.split(" ")[0] for s in record.symbols]
    for name in names:
        assert f"    {name} = " in code, (name, code)  # bound from the inputs at call time
    graph = open(os.path.join(record.debug_dir, "graph.txt")).read()
    assert graph.startswith("# size symbol "), graph


def test_a_symbolic_slice_start_falls_back_per_op_not_per_graph():
    # x[:, k:] with k a SymInt of unknown sign cannot be planned: that op runs in ATen, the rest
    # of the graph stays compiled.
    def fn(x, k):
        return x[:, x.shape[0] - k:].exp() + 1

    _reset()
    compiled = torch.compile(fn, backend="coil", dynamic=True)
    for n, k in ((4, 2), (6, 3), (9, 1)):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x, k), fn(x, k))
    records = _records()
    assert records and not any(r.eager_fallback for r in records)
    assert all("aten.slice.Tensor" in r.fallback_ops for r in records), [
        r.fallback_ops for r in records
    ]
    assert all(r.kernel_names for r in records), "exp and add should still be coil kernels"


def test_symbolic_numbers_are_read_as_numbers():
    # Dynamo makes Python ints dynamic too: var's correction arrived as a SymInt and was read as 0
    # (fuzzer seed 5125, var divided by N instead of N - 1). Numbers are read through checked
    # accessors: a SymInt stays symbolic (the kernel reads it) or the op falls back.
    def fn(x, c):
        return x.var(0, correction=c) * 2

    _reset()
    compiled = torch.compile(fn, backend="coil", dynamic=True)
    for n, c in ((4, 1), (9, 2), (7, 3)):
        x = torch.randn(n, 3, dtype=torch.float64)
        torch.testing.assert_close(compiled(x, c), fn(x, c))
    assert not any(r.eager_fallback for r in _records())
