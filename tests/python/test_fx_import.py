"""The FX-graph import (python/coil/fx_import.py) on what AOTAutograd graphs hold besides ATen
calls on tensor inputs: tensor constants (get_attr nodes), ops with side effects threaded by
effect tokens (with_effects), and Python numbers read from tensors (.item()). Each compiled
function is compared with eager; the tests of coil's own records skip under other backends."""

import json

import pytest
import torch
from conftest import BACKEND, check, coil_records, make_tensor, requires_coil, reset_compiler
from torch._dynamo.backends.common import aot_autograd

# --------------------------------------------------------------------------------------------
# tensor constants
# --------------------------------------------------------------------------------------------


def _aot_graph(fn, *inputs):
    """The ATen graph AOTAutograd makes of fn (with coil's decompositions), and its inputs."""
    from coil import backend

    captured = []

    def compiler(gm, example_inputs):
        captured.append((gm, list(example_inputs)))
        return gm.forward

    aot = aot_autograd(
        fw_compiler=compiler, inference_compiler=compiler, decompositions=backend._decompositions()
    )
    torch._dynamo.reset()
    torch.compile(fn, backend=aot, fullgraph=True)(*inputs)
    assert len(captured) == 1, f"expected one graph, got {len(captured)}"
    return captured[0]


def test_constants_import_as_literals_and_inputs():
    requires_coil()
    from coil import fx_import

    def fn(x):
        return x * torch.tensor([1.5, 2.0, -3.0]) + torch.tensor(0.1, dtype=torch.float64)

    gm, inputs = _aot_graph(fn, torch.ones(2, 3))
    assert any(n.op == "get_attr" for n in gm.graph.nodes), "torch no longer makes get_attr nodes"
    imported = fx_import.import_graph(gm, inputs)
    nodes = json.loads(imported.json)["nodes"]
    kinds = [n["kind"] for n in nodes]
    # placeholders first: the real input, then the three-element constant
    assert kinds[:2] == ["placeholder", "placeholder"] and "placeholder" not in kinds[2:], kinds
    assert nodes[1]["meta"][0]["sizes"] == [3]
    assert len(imported.constants) == 1
    assert torch.equal(imported.constants[0], torch.tensor([1.5, 2.0, -3.0]))
    # the one-element constant is aten.full of its exact value
    fulls = [n for n in nodes if n.get("target") == "aten.full.default"]
    assert len(fulls) == 1, fulls
    assert fulls[0]["args"] == [{"list": []}, {"float": 0.1}]
    assert fulls[0]["kwargs"]["dtype"] == {"dtype": "float64"}


def test_graph_to_json_refuses_graphs_with_tensor_constants():
    requires_coil()
    from coil import fx_import

    gm, inputs = _aot_graph(lambda x: x + torch.tensor([1.0, 2.0]), torch.ones(2))
    with pytest.raises(fx_import.UnsupportedGraph, match="get_attr"):
        fx_import.graph_to_json(gm, inputs)  # no list to return the constant in


def test_get_attr_of_a_module_is_unsupported():
    requires_coil()
    from coil import fx_import

    root = torch.nn.Module()
    root.sub = torch.nn.Linear(2, 2)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    sub = graph.get_attr("sub")
    graph.output((x, sub))
    gm = torch.fx.GraphModule(root, graph)
    with pytest.raises(fx_import.UnsupportedGraph, match="get_attr \\(sub\\) of type Linear"):
        fx_import.import_graph(gm, [torch.ones(2)])


def test_module_attributes_stay_inputs():
    # A one-element parameter or buffer held as an attribute is passed (the same tensor object,
    # so in-place updates between calls are seen), not written into the graph as a value.
    requires_coil()
    from coil import fx_import

    root = torch.nn.Module()
    root.register_buffer("scale", torch.tensor(2.0))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    scale = graph.get_attr("scale")
    graph.output((graph.call_function(torch.ops.aten.mul.Tensor, (x, scale)),))
    gm = torch.fx.GraphModule(root, graph)
    for node in gm.graph.nodes:
        node.meta["val"] = torch.ones(3) if node.op != "output" else None
    imported = fx_import.import_graph(gm, [torch.ones(3)])
    assert len(imported.constants) == 1 and imported.constants[0] is root.scale
    assert "aten.full.default" not in imported.json


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16]
)
def test_list_constants(dtype):
    def fn(x):
        c = torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=dtype)
        return x * c, c.sum(0) + x[0]

    x = make_tensor((2, 3), dtype)
    check(fn, x)


def test_scalar_constants_are_exact():
    # Values that a float32 or a printed decimal would change: a 64-bit integer beyond 2**53,
    # the most negative int64, 0.1 in float64, a bfloat16 value, nan and -inf.
    def fn(i, f, b, h):
        return (
            i + torch.tensor(2**53 + 1),
            torch.maximum(i, torch.tensor(-(2**63))),
            f * torch.tensor(0.1, dtype=torch.float64),
            b + torch.tensor(1.0078125, dtype=torch.bfloat16),
            torch.where(f > 0, torch.tensor(float("nan"), dtype=torch.float64), f),
            torch.minimum(h, torch.tensor(float("-inf"))),
            i > torch.tensor(True),
        )

    i = torch.tensor([1, -3, 7])
    f = torch.tensor([0.3, -1.0, 3.0], dtype=torch.float64)
    b = make_tensor((3,), torch.bfloat16)
    h = make_tensor((3,))
    check(fn, i, f, b, h, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_masked_reductions(dtype):
    x = make_tensor((4, 6), dtype)
    mask = make_tensor((4, 6), torch.bool)

    def fn(x, mask):
        return (
            torch.masked._ops.sum(x, 1, mask=mask),
            torch.masked._ops.amax(x if dtype != torch.bool else x.long(), 0, mask=mask),
            torch.masked._ops.prod(x, 1, mask=mask),
        )

    check(fn, x, mask)


def test_masked_var_and_unravel_index():
    x = make_tensor((5, 7), torch.float64)
    mask = make_tensor((5, 7), torch.bool)
    idx = torch.tensor([0, 5, 13, 34])
    check(lambda x, mask: torch.masked._ops.var(x, 1, mask=mask), x, mask)
    check(lambda i: torch.unravel_index(i, (5, 7)), idx)


def test_constant_used_by_a_fallback_op():
    # The constant reaches an op coil runs through ATen (searchsorted) as a wrapper input.
    seq = torch.sort(make_tensor((4, 8)), dim=-1).values
    check(lambda s: torch.searchsorted(s, torch.tensor([[-0.5], [0.0], [0.5], [1.0]])), seq)


def test_constants_on_the_disk_cache(tmp_path, capsys):
    """Compiling the same code again hits the kernel cache and still gets its constants; other
    constant values give other results (passed at call time, or, for one-element constants,
    written into kernels whose source, and so cache key, differs)."""
    coil = requires_coil()

    def with_list(values):
        return lambda x: x * torch.tensor(values)

    def with_scalar(value):
        return lambda x: x * torch.tensor(value)

    x = make_tensor((3,))

    def run(fn):
        reset_compiler()
        out = torch.compile(fn, backend="coil")(x)
        assert not any(r.eager_fallback for r in coil_records())
        torch.testing.assert_close(out, fn(x), atol=0, rtol=0)
        return capsys.readouterr().err

    with coil.config.patch(cache_dir=str(tmp_path / "cache"), logs={"perf"}):
        assert "cache hit" not in run(with_list([1.0, 2.0, 3.0]))
        assert "cache hit" in run(with_list([1.0, 2.0, 3.0]))
        # same kernel, other constant values: they are inputs, so the cache entry is shared
        assert "cache hit" in run(with_list([-4.0, 5.0, 0.5]))
        assert "cache hit" not in run(with_scalar(2.0))
        assert "cache hit" in run(with_scalar(2.0))
        assert "cache hit" not in run(with_scalar(-7.0))


# --------------------------------------------------------------------------------------------
# ops with side effects (with_effects)
# --------------------------------------------------------------------------------------------


def _well_conditioned(n, dtype=torch.float64):
    return make_tensor((n, n), dtype) + n * torch.eye(n, dtype=dtype)


def test_linalg_ops_with_error_checks():
    # torch.linalg.inv checks its info output through an effectful op (_linalg_check_errors).
    a = _well_conditioned(4)
    b = make_tensor((4, 2), torch.float64)
    check(lambda a: torch.linalg.inv(a) * 2, a)
    check(lambda a, b: torch.linalg.solve(a, b) + 1, a, b)


def test_linalg_error_check_runs():
    # The check is an op whose result nobody reads: it must still run (and raise, as eager does).
    compiled = torch.compile(lambda a: torch.linalg.inv(a) + 1, backend=BACKEND)
    compiled(_well_conditioned(3))
    singular = torch.ones(3, 3, dtype=torch.float64)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.inv(singular)
    with pytest.raises(torch.linalg.LinAlgError):
        compiled(singular)


_LOG: list = []


@torch.library.custom_op("coil_test::log_sum", mutates_args=())
def _log_sum(x: torch.Tensor, tag: int) -> None:
    _LOG.append((tag, float(x.sum())))


@_log_sum.register_fake
def _(x, tag):
    return None


def _register_effect():
    effects = pytest.importorskip("torch._higher_order_ops.effects")
    effect_type = getattr(effects, "_EffectType", None)
    if effect_type is None or not hasattr(effects, "_register_effectful_op"):
        pytest.skip("this torch has no effectful-op registration")
    try:
        effects._register_effectful_op(torch.ops.coil_test.log_sum.default, effect_type.ORDERED)
    except Exception as e:  # already registered (a second run in one process)
        if "already" not in str(e).lower():
            raise


def test_effectful_custom_ops_run_in_order():
    _register_effect()

    # The second call could run first (it reads only the input): the effect order forbids it.
    def fn(x):
        y = torch.mm(x, x)
        torch.ops.coil_test.log_sum(y, 1)
        torch.ops.coil_test.log_sum(x, 2)
        torch.ops.coil_test.log_sum(x * 3, 3)
        return y + 1

    x = make_tensor((4, 4), torch.float64)
    _LOG.clear()
    expected = fn(x)
    eager_log = list(_LOG)
    _LOG.clear()
    out = torch.compile(fn, backend=BACKEND, fullgraph=True)(x)
    torch.testing.assert_close(out, expected)
    assert [tag for tag, _ in _LOG] == [1, 2, 3], _LOG
    torch.testing.assert_close([v for _, v in _LOG], [v for _, v in eager_log])
    if BACKEND == "coil":
        records = coil_records()
        assert records and not any(r.eager_fallback for r in records), records
        ops = [op for r in records for op in r.fallback_ops]
        assert ops.count("coil_test.log_sum.default") == 3, ops


# --------------------------------------------------------------------------------------------
# Python numbers read from tensors (.item())
# --------------------------------------------------------------------------------------------


@pytest.fixture
def capture_scalars():
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        yield


@pytest.mark.usefixtures("capture_scalars")
def test_item_used_by_tensor_ops():
    # (numbers are compared exactly: the sum is of integers, whose order does not matter)
    x = make_tensor((3, 4), torch.float64)
    k = torch.tensor([3, -2, 7])
    check(lambda x, k: (x * k[0].item(), k.sum().item() + 1), x, k)


@pytest.mark.usefixtures("capture_scalars")
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float32])
def test_item_returned(dtype):
    x = make_tensor((3,), dtype)
    out = check(lambda x: x[1].item(), x)
    assert type(out) is type(x[1].item())


@pytest.mark.usefixtures("capture_scalars")
def test_item_in_a_runtime_check():
    # torch._check on a number read from a tensor becomes aten._assert_scalar: it must run.
    def fn(x):
        n = x.max().item()
        torch._check(n >= 0)
        return x * 2

    compiled = torch.compile(fn, backend=BACKEND, fullgraph=True)
    x = torch.tensor([1, 5, 2])
    assert torch.equal(compiled(x), fn(x))
    if BACKEND == "coil":
        assert not any(r.eager_fallback for r in coil_records()), coil_records()
    with pytest.raises(RuntimeError):
        compiled(torch.tensor([-1, -5, -2]))


# --------------------------------------------------------------------------------------------
# uint64 and the other wide unsigned types: ATen computes them
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(torch, "hash_tensor"), reason="torch.hash_tensor is newer")
def test_hash_tensor_returns_uint64():
    x = make_tensor((4, 5))
    out = check(lambda x: (torch.hash_tensor(x + 1), torch.hash_tensor(x, dim=1)), x)
    assert out[0].dtype == torch.uint64


# ---- sizes that depend on data (unbacked symbols) ----

DATA_DEPENDENT = {
    "nonzero": lambda x: torch.nonzero(x > 0),
    "masked_index": lambda x: x[x > 0] * 2 + 1,
    "unique": lambda x: torch.unique(x.round()),
    "reduced_again": lambda x: torch.nonzero(x > 0).sum() + x.sum(),
}


@pytest.mark.parametrize("name", list(DATA_DEPENDENT))
def test_data_dependent_sizes_run_their_ops_in_aten(name):
    # Ops that make or read a tensor whose size depends on its data run as ATen fallbacks; the
    # rest of the graph is still compiled.
    coil = requires_coil()
    fn = DATA_DEPENDENT[name]
    x = make_tensor((6, 7))
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        check(fn, x)
        check(fn, -x)  # another data-dependent size, same compiled code
    records = coil.compiled_graphs()
    assert records and not any(r.eager_fallback for r in records)
    assert any(r.fallback_ops for r in records)
    if name == "reduced_again":
        assert any(r.kernel_names for r in records), "x.sum() should still be a coil kernel"


def test_backed_symbolic_sizes_compile():
    # Dynamic shapes (backed symbols s0, ...) compile: the graph records its size symbols, and one
    # build serves every size.
    coil = requires_coil()
    reset_compiler()
    f = torch.compile(lambda x: x * 2, backend=BACKEND, dynamic=True)
    for n in (5, 9, 130):
        torch.testing.assert_close(f(torch.ones(n)), torch.ones(n) * 2)
    records = coil.compiled_graphs()
    assert len(records) == 1 and not records[0].eager_fallback
