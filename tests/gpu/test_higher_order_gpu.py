"""Higher-order ops on the GPU: flex attention forward and backward, torch.cond, a user's own
Triton kernel inside a compiled function; each graph compiled around the op (never eager)."""

import pytest
import torch

import coil

flex = pytest.importorskip("torch.nn.attention.flex_attention")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _no_graph_eager() -> None:
    graphs = coil.compiled_graphs()
    assert graphs and not any(g.eager_fallback for g in graphs)


def _causal(score, b, h, q, kv):
    return torch.where(q >= kv, score, -float("inf"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_flex_attention_forward_and_backward(dtype):
    q, k, v = (torch.randn(2, 4, 256, 64, device="cuda", dtype=dtype, requires_grad=True)
               for _ in range(3))

    def fn(q, k, v):
        return (flex.flex_attention(q.tanh(), k, v, score_mod=_causal).float() ** 2).sum()

    expected = fn(q, k, v)
    expected_grads = torch.autograd.grad(expected, (q, k, v))
    got = torch.compile(fn, backend="coil")(q, k, v)
    grads = torch.autograd.grad(got, (q, k, v))
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-3, "rtol": 1e-3}
    torch.testing.assert_close(got, expected, **tol)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g.float(), e.float(), **tol)
    _no_graph_eager()


def test_cond_on_gpu():
    def fn(x):
        y = x * 2
        return torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (y,)) + x

    compiled = torch.compile(fn, backend="coil")
    for sign in (1.0, -1.0):
        x = torch.rand(64, 64, device="cuda") * sign
        torch.testing.assert_close(compiled(x), fn(x))
    _no_graph_eager()


@triton.jit
def _add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)


def test_user_triton_kernel_inside_a_compiled_function():
    def fn(x):
        y = x.sin()
        out = torch.empty_like(y)
        n = y.numel()
        _add_one_kernel[(triton.cdiv(n, 256),)](y, out, n, BLOCK=256)
        return out * 2

    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(torch.compile(fn, backend="coil")(x), fn(x))
    _no_graph_eager()
