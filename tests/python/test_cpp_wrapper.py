"""C++ wrappers (option cpp_wrapper, codegen/wrapper/cpp_wrapper.cpp): each family of graph runs
through one call into its kernel library and matches eager, values and strides; a graph the C++
wrapper cannot run keeps its Python wrapper and says why. (The whole op suites also run under
COIL_CPP_WRAPPER=1.)"""

import pytest
import torch

import coil

OPTS = {"cpp_wrapper": True}


def check(fn, *args, wrapper="cpp", **tol):
    coil.reset()
    compiled = torch.compile(fn, backend="coil", options=OPTS)
    got, want = compiled(*args), fn(*args)
    flat_got, _ = torch.utils._pytree.tree_flatten(got)
    flat_want, _ = torch.utils._pytree.tree_flatten(want)
    for g, w in zip(flat_got, flat_want):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, **tol)
            assert g.stride() == w.stride() or g.numel() <= 1, (g.stride(), w.stride())
        else:
            assert g == w
    records = [r for r in coil.compiled_graphs() if not r.eager_fallback]
    assert records, [r.eager_reason for r in coil.compiled_graphs()]
    assert {r.wrapper for r in records} == {wrapper}, [r.cpp_wrapper_blocker for r in records]
    return records


def test_pointwise_reductions_views_and_library_calls():
    x, w, b = torch.randn(16, 32), torch.randn(24, 32), torch.randn(24)

    def f(x, w, b):
        y = torch.nn.functional.linear(x, w, b)
        z = torch.softmax(y * 2, -1)
        return z.sum(0), y.t(), z[:, :3], None, x  # views, a None and an input as outputs

    check(f, x, w, b)


def test_convolution_with_lists_and_optional_bias():
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1).eval()
    conv2 = torch.nn.Conv2d(8, 4, 1, bias=False).eval()
    x = torch.randn(2, 3, 17, 17)
    with torch.no_grad():
        check(lambda x: conv2(torch.relu(conv(x))), x)


def test_fallback_ops_with_scalars_strings_and_several_results():
    x = torch.randn(6, 40)
    idx = torch.tensor([[0, 3], [5, 1]])

    def f(x, idx):
        values, indices = torch.topk(x, 5, dim=1, largest=False)
        s, order = torch.sort(x, dim=0, descending=True, stable=True)
        h = torch.histc(x, bins=7, min=-2.0, max=2.0)  # Scalar arguments
        r = torch.searchsorted(s[:, 0].flip(0).contiguous(), x[0], side="right")  # a string
        return values * 2, indices, order, h, r, x.index_put((idx[0], idx[1]), torch.ones(2))

    check(f, x, idx)


def test_dynamic_sizes_bound_from_inputs():
    coil.reset()
    compiled = torch.compile(lambda x, y: (x @ y).relu().sum(-1) + x.shape[0], backend="coil",
                             options=OPTS, dynamic=True)
    for n in (5, 9, 33):
        x, y = torch.randn(n, 7), torch.randn(7, n + 1)
        torch.testing.assert_close(compiled(x, y), (x @ y).relu().sum(-1) + n)
    records = [r for r in coil.compiled_graphs() if not r.eager_fallback]
    assert records and all(r.dynamic and r.wrapper == "cpp" for r in records), \
        [(r.dynamic, r.cpp_wrapper_blocker) for r in records]


def test_bad_index_raises_like_eager():
    coil.reset()
    compiled = torch.compile(lambda x, i: x[i] * 2, backend="coil", options=OPTS)
    x = torch.randn(10, 4)
    torch.testing.assert_close(compiled(x, torch.tensor([1, 9])), x[torch.tensor([1, 9])] * 2)
    assert coil.compiled_graphs()[-1].wrapper == "cpp"
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(x, torch.tensor([1, 10]))


def test_training_forward_and_backward():
    coil.reset()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())
    x = torch.randn(8, 16)
    compiled = torch.compile(model, backend="coil", options=OPTS)
    compiled(x).square().mean().backward()
    ref(x).square().mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    kinds = {(r.kind, r.wrapper) for r in coil.compiled_graphs() if not r.eager_fallback}
    assert kinds == {("forward", "cpp"), ("backward", "cpp")}, kinds


def test_a_graph_it_cannot_run_keeps_the_python_wrapper():
    # torch.cond runs as one call of its eager implementation (a Python callable; its branches
    # are compiled graphs of their own, each with a C++ wrapper): the graph holding it keeps
    # the Python wrapper, and says why.
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x * 2,)) + 1

    coil.reset()
    compiled = torch.compile(f, backend="coil", options=OPTS)
    for x in (torch.ones(8), -torch.ones(8)):
        torch.testing.assert_close(compiled(x), f(x))
    outer = [r for r in coil.compiled_graphs() if r.kind != "subgraph"]
    branches = [r for r in coil.compiled_graphs() if r.kind == "subgraph"]
    assert [r.wrapper for r in outer] == ["python"], [r.cpp_wrapper_blocker for r in outer]
    assert "not an ATen op" in outer[0].cpp_wrapper_blocker
    assert branches and all(r.wrapper == "cpp" for r in branches)


def test_wrapper_includes_no_torch_header_and_refuses_another_shim(tmp_path):
    """A wrapper compiles against coil's ATen shim alone (runtime/aten_shim.h); a library that
    refuses the shim it is handed (another COIL_SHIM_ABI_VERSION) is an error, not a crash."""
    from coil import _C, config, runtime

    with config.patch(debug_dir=str(tmp_path / "debug")):
        records = check(lambda x: (x * 2).sum(0), torch.randn(8, 8))
    with open(f"{records[0].debug_dir}/output_code.py") as f:
        wrapper = f.read().split("// coil: wrapper\n", 1)[1]
    assert "#include <ATen" not in wrapper and "#include <torch" not in wrapper
    assert "COIL_SHIM_ABI_VERSION" in wrapper

    source = r"""
#include <cstdint>
extern "C" int32_t coil_graph_run(void* const*, const int64_t*, void**) { return 1; }
extern "C" const char* coil_graph_error() { return ""; }
extern "C" const char* coil_graph_signature() { return "{}"; }
extern "C" int32_t coil_graph_bind(const void*) { return 1; }
"""
    built = _C.build_shared_library(source, cache_dir=config.options.cache_dir)
    with pytest.raises(RuntimeError, match="refused coil's ATen shim"):
        _C.KernelLibrary(built["so_path"]).graph_run(runtime.aten_shim())
