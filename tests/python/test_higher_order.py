"""Graphs holding higher-order ops (flex attention, torch.cond, while_loop, a custom op that
mutates its input, invoke_subgraph): never a whole graph eager. An op coil does not lower yet runs
as one call of its eager implementation inside the compiled graph (python/coil/opaque_calls.py);
every other node is compiled as usual. Forward and backward, static and dynamic sizes (flex
attention refuses inputs that require grad on the CPU, even eagerly: tests/gpu/
test_higher_order_gpu.py, and here with that check lifted as the flex fuzzer lifts it)."""

import pytest
import torch
from conftest import BACKEND, assert_same, check, coil_records, make_tensor, requires_coil

flex = pytest.importorskip("torch.nn.attention.flex_attention")


def _opaque(records) -> list[str]:
    return [op for r in records for op in r.fallback_ops if op.startswith("opaque.")]


def _compiled_around(records) -> bool:
    """Some graph both calls an opaque op and launches coil kernels of its own."""
    return any(
        r.kernel_names and any(op.startswith("opaque.") for op in r.fallback_ops) for r in records
    )


def _check_flex(fn, *inputs, atol=1e-5, rtol=1e-5):
    """flex_attention's forward is written into the graph as its math form's ATen ops
    (python/coil/flex_inline.py): no opaque call, and the scores' kernel is coil's."""
    check(fn, *inputs, atol=atol, rtol=rtol)
    if BACKEND == "coil":
        records = coil_records()
        assert not _opaque(records), _opaque(records)
        kernels = [k for r in records for k in r.kernel_names]
        assert any("softmax" in k for k in kernels), kernels


def _check_opaque(fn, *inputs, op: str, dynamic=False, atol=None, rtol=None):
    check(fn, *inputs, dynamic=dynamic, atol=atol, rtol=rtol)
    if BACKEND == "coil":
        records = coil_records()
        assert any(o.startswith(f"opaque.{op}_") for o in _opaque(records)), _opaque(records)
        assert _compiled_around(records), [(r.kernel_names, r.fallback_ops) for r in records]
        if op in ("cond", "while_loop", "map_impl", "scan"):
            # Branches and loop bodies are graphs coil compiled, each with kernels of its own.
            subgraphs = [r for r in records if r.kind == "subgraph"]
            least = 2 if op in ("cond", "while_loop") else 1
            assert len(subgraphs) >= least and all(r.kernel_names for r in subgraphs), subgraphs


# ------------------------------------------------------------------------------------------------
# flex attention
# ------------------------------------------------------------------------------------------------


def _causal(score, b, h, q, kv):
    return torch.where(q >= kv, score, -float("inf"))


def _alibi_softcap(score, b, h, q, kv):
    return 20.0 * torch.tanh((score - (h + 1) * 0.25 * (q - kv).abs()) / 20.0)


def _qkv(b=2, h=2, s=64, d=16, kv_heads=None):
    torch.manual_seed(0)
    q = make_tensor((b, h, s, d))
    k = make_tensor((b, kv_heads or h, s, d))
    v = make_tensor((b, kv_heads or h, s, d))
    return q, k, v


@pytest.mark.parametrize("mod", [_causal, _alibi_softcap], ids=["causal", "alibi_softcap"])
def test_flex_attention_score_mod(mod):
    requires_coil()

    def fn(q, k, v):
        return flex.flex_attention(q.sin(), k, v, score_mod=mod).cos() * 2 + 1

    _check_flex(fn, *_qkv())


def test_flex_attention_block_mask_sliding_window():
    requires_coil()

    def window(b, h, q, kv):
        return (q - kv).abs() <= 16

    mask = flex.create_block_mask(window, None, None, 128, 128, device="cpu", BLOCK_SIZE=32)

    def fn(q, k, v):
        return flex.flex_attention(q * 0.5, k, v, block_mask=mask).relu()

    _check_flex(fn, *_qkv(s=128))


def test_flex_attention_captured_bias_and_gqa():
    requires_coil()
    bias = make_tensor((64, 64))

    def with_bias(score, b, h, q, kv):
        return score + bias[q, kv]

    def fn(q, k, v):
        return flex.flex_attention(q, k.exp() * 0.1, v, score_mod=with_bias, enable_gqa=True) - 1

    _check_flex(fn, *_qkv(h=4, kv_heads=2))


def test_flex_attention_dynamic_lengths():
    requires_coil()

    def fn(q, k, v):
        return flex.flex_attention(q + 1, k, v, score_mod=_causal) * 3

    compiled = torch.compile(fn, backend=BACKEND, dynamic=True)
    for s in (32, 48, 80):
        q, k, v = _qkv(s=s)
        assert_same(compiled(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-5)
    records = coil_records()
    assert not any(r.eager_fallback for r in records)
    assert not _opaque(records)


@pytest.mark.parametrize("learned", ["constant", "learned", "learned_view"])
def test_flex_attention_backward_with_captured_tensors(learned):
    # flex_attention_backward returns the gradients of score_mod's captured tensors as a tuple
    # within its result tuple: coil's backward graph ran eagerly ("returns nested tuples";
    # python -m coil.fuzz --flex --train, seed 0). Its elements are now read by index after the
    # call's other results (opaque_calls.OpaqueCall.nested), read or not. A learned bias that is
    # a view (seed 603) reached the backward without requires_grad, and its gradient was None.
    requires_coil()
    from coil.fuzz_flex import _cpu_backward

    bias = make_tensor((53, 37)).t() if learned == "learned_view" else make_tensor((37, 53))
    bias.requires_grad_(learned != "constant")
    learned = learned != "constant"
    slopes = make_tensor((2,), domain="positive").requires_grad_(learned)

    def with_bias(score, b, h, q, kv):
        return score + slopes[h] * (q - kv) + bias[q, kv]

    def fn(q, k, v):
        return flex.flex_attention(q, k, v, score_mod=with_bias) * 2

    inputs = [make_tensor((1, 2, n, 16)) for n in (37, 53, 53)]
    weights = make_tensor((1, 2, 37, 16))
    grads = []
    with _cpu_backward(True):
        for f in (fn, torch.compile(fn, backend=BACKEND)):
            xs = [t.clone().requires_grad_() for t in inputs]
            bias.grad = slopes.grad = None
            (f(*xs) * weights).sum().backward()
            grads.append([x.grad for x in xs] + ([bias.grad, slopes.grad] if learned else []))
    assert_same(grads[1], grads[0], atol=1e-4, rtol=1e-4)
    records = coil_records()
    assert not any(r.eager_fallback for r in records), [r.eager_reason for r in records]
    if BACKEND == "coil":
        assert any(o.startswith("opaque.flex_attention_backward") for o in _opaque(records))


# ------------------------------------------------------------------------------------------------
# control flow
# ------------------------------------------------------------------------------------------------


def _cond_fn(x):
    y = x * 2
    out = torch.cond(y.sum() > 0, lambda t: t.sin() + 1, lambda t: t.cos() - 1, (y,))
    return out * 3 + x


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true_branch", "false_branch"])
def test_cond_either_branch(sign):
    requires_coil()
    x = make_tensor((8, 8)).abs() * sign
    _check_opaque(_cond_fn, x, op="cond")


def test_cond_dynamic_and_both_branches_in_one_compiled_function():
    requires_coil()
    compiled = torch.compile(_cond_fn, backend=BACKEND, dynamic=True)
    for n, sign in ((8, 1.0), (8, -1.0), (13, 1.0), (21, -1.0)):
        x = make_tensor((n, 5)).abs() * sign
        assert_same(compiled(x), _cond_fn(x))
    assert not any(r.eager_fallback for r in coil_records())


def test_cond_backward():
    requires_coil()
    x = make_tensor((6, 7)).requires_grad_()
    w = make_tensor((7,)).requires_grad_()

    def fn(x, w):
        h = x * w
        out = torch.cond(h.mean() > 0, lambda t: (t.exp() * 2,), lambda t: (t.sigmoid(),), (h,))
        return (out[0] + 1).pow(2).sum()

    for sign in (1.0, -1.0):
        with torch.no_grad():
            x.copy_(x.abs() * sign)
        expected = torch.autograd.grad(fn(x, w), (x, w))
        got = torch.autograd.grad(torch.compile(fn, backend=BACKEND)(x, w), (x, w))
        assert_same(got, expected, atol=1e-5, rtol=1e-5)
    assert not any(r.eager_fallback for r in coil_records())


def test_while_loop():
    requires_coil()
    from torch._higher_order_ops.while_loop import while_loop

    def fn(x, n):
        def cond(i, t):
            return i < n

        def body(i, t):
            return i + 1, t.sin() * 1.5

        _, out = while_loop(cond, body, (torch.zeros((), dtype=torch.int64), x * 2))
        return out + x

    _check_opaque(fn, make_tensor((4, 9)), torch.tensor(3), op="while_loop")


# ------------------------------------------------------------------------------------------------
# custom ops and subgraphs
# ------------------------------------------------------------------------------------------------


@torch.library.custom_op("coil_test_hop::scale_", mutates_args=("x",))
def _scale_(x: torch.Tensor, a: float) -> None:
    x.mul_(a)


@_scale_.register_fake
def _(x, a):
    return None


def test_custom_op_mutating_an_intermediate():
    requires_coil()

    def fn(x):
        y = x + 1
        _scale_(y, 2.5)
        return y.relu() - x

    _check_opaque(fn, make_tensor((8, 8)), op="auto_functionalized")


def test_custom_op_mutating_a_graph_input():
    requires_coil()

    def fn(x, y):
        _scale_(x, 3.0)
        return x * y + 1

    x, y = make_tensor((5, 7)), make_tensor((5, 7))
    x_eager = x.clone()
    expected = fn(x_eager, y)
    got = torch.compile(fn, backend=BACKEND)(x, y)
    assert_same(got, expected)
    assert_same(x, x_eager)  # the mutation reached the caller's tensor
    assert not any(r.eager_fallback for r in coil_records())


def test_invoke_subgraph_twice():
    requires_coil()
    region = getattr(torch.compiler, "nested_compile_region", None)
    if region is None:
        pytest.skip("torch.compiler.nested_compile_region is not in this torch")

    @region
    def block(x, w):
        return (x @ w).tanh() + x.sum(0)

    def fn(x, w):
        return block(block(x * 2, w) + 1, w).exp()

    check(fn, make_tensor((6, 6)) * 0.3, make_tensor((6, 6)), atol=1e-5, rtol=1e-5)
    records = coil_records()
    assert not any(r.eager_fallback for r in records)
    if BACKEND == "coil":
        # The region is compiled by coil once, and both calls run it.
        subgraphs = [r for r in records if r.kind == "subgraph"]
        assert len(subgraphs) == 1 and subgraphs[0].kernel_names, subgraphs
        assert sum(o.startswith("opaque.invoke_subgraph") for o in _opaque(records)) == 2


def test_graph_cache_keeps_no_graph_with_opaque_calls(tmp_path):
    requires_coil()
    from coil import config, graph_cache

    opts = config.Options(cache_dir=str(tmp_path))
    graph_cache.store(opts, "k1", '{"nodes": [{"target": "opaque.cond_00"}]}')
    graph_cache.store(opts, "k2", '{"nodes": [{"target": "aten.add.Tensor"}]}')
    assert graph_cache.load(opts, "k1") is None
    assert graph_cache.load(opts, "k2") is not None


def test_opaque_names_follow_content():
    """Two graphs with the same higher-order call get the same name (a kernel-cache hit binds an
    equivalent callable); a different subgraph gets another name."""
    requires_coil()
    from coil import opaque_calls

    compiled = []
    for fn in (lambda t: t.sin(), lambda t: t.sin(), lambda t: t.cos()):

        def f(x, fn=fn):
            return torch.cond(x.sum() > 0, fn, lambda t: t + 1, (x,)) * 2

        torch._dynamo.reset()
        before = len(coil_records())
        torch.compile(f, backend=BACKEND)(make_tensor((4, 4)))
        compiled.append(_opaque(coil_records()[before:]))
    assert compiled[0] == compiled[1] and compiled[0] != compiled[2], compiled
    assert all(name.startswith(opaque_calls.PREFIX) for names in compiled for name in names)


def test_nested_cond():
    requires_coil()

    def inner(t):
        return torch.cond(t.mean() > 0.5, lambda u: u * 4, lambda u: u - 4, (t,))

    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: inner(t.exp()), lambda t: t.abs() + 1, (x,)) + 1

    for sign in (1.0, -1.0):
        _check_opaque(fn, make_tensor((5, 6)).abs() * sign, op="cond")


def test_debug_folder_shows_each_opaque_call(tmp_path):
    requires_coil()
    import coil

    def fn(x):
        y = x + 1
        _scale_(y, 2.5)
        return y.relu()

    with coil.config.patch(debug_dir=str(tmp_path)):
        torch.compile(fn, backend=BACKEND)(make_tensor((4, 4)))
        torch.compile(_cond_fn, backend=BACKEND)(make_tensor((4, 4)))
    texts = [p.read_text() for p in tmp_path.rglob("opaque_calls.txt")]
    custom_text = next(t for t in texts if "auto_functionalized_v2" in t)
    assert "coil_test_hop.scale_" in custom_text, custom_text
    cond_text = next(t for t in texts if ": cond," in t)
    assert cond_text.count("a subgraph compiled by coil") == 2, cond_text


def _output_code(tmp_path) -> str:
    return "\n".join(p.read_text() for p in tmp_path.rglob("output_code.py"))


def test_custom_op_writes_a_buffer_computed_for_it_in_place(tmp_path):
    """auto_functionalized_v2's eager form copies what the op writes; coil lets the op write a
    buffer it computed for that call alone where it lies (sched/in_place_calls.cpp), and still
    copies a graph input, a value read again afterwards, and a graph output."""
    requires_coil()
    import coil

    def alone(x):
        y = x + 1
        _scale_(y, 2.5)
        return y.relu()

    def read_again(x):
        y = x.exp()
        w = y.sum(0)  # reads y's old value from its buffer
        _scale_(y, 2.0)
        return y * w

    def returned(x):
        y = x * 3
        out = y.clone()
        _scale_(y, 0.5)
        return out, y

    cases = [(alone, "_coil_write_in_place=[0]"), (read_again, "_coil_write_in_place=[]"),
             (returned, None)]
    for k, (fn, expected_text) in enumerate(cases):
        folder = tmp_path / str(k)
        x = make_tensor((6, 5))
        with coil.config.patch(debug_dir=str(folder)):
            torch._dynamo.reset()
            got = torch.compile(fn, backend=BACKEND)(x.clone())
        assert_same(got, fn(x.clone()))
        if expected_text:
            assert expected_text in _output_code(folder), _output_code(folder)
    assert not any(r.eager_fallback for r in coil_records())


def test_map_scan_and_associative_scan():
    """map's body and scan's combine function are compiled by coil (records of kind
    "subgraph") and looped over by the op's eager implementation; associative_scan reaches coil
    as ATen ops."""
    requires_coil()
    from torch._higher_order_ops.associative_scan import associative_scan
    from torch._higher_order_ops.map import map as hop_map
    from torch._higher_order_ops.scan import scan

    def f_map(xs, y):
        return hop_map(lambda x, y: (x * y).sin() + 1, xs * 2, y)

    def f_scan(init, xs):
        def step(c, x):
            n = c * 0.9 + x.tanh()
            return n, n * 2

        c, ys = scan(step, init, xs * 1.5)
        return c + 1, ys

    def f_associative_scan(x):
        return associative_scan(lambda a, b: a + b * 0.5, x.exp(), dim=1, combine_mode="generic")

    _check_opaque(f_map, make_tensor((4, 3, 5)), make_tensor((3, 5)), op="map_impl")
    _check_opaque(f_scan, make_tensor((3, 5)), make_tensor((7, 3, 5)), op="scan",
                  atol=1e-5, rtol=1e-5)
    check(f_associative_scan, make_tensor((3, 6)), atol=1e-5, rtol=1e-5)
