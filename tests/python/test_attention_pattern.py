"""Attention written out as matmuls and a softmax is compiled as one scaled_dot_product_attention
call (cpp/coil/lower/attention_pattern.h): the scores are never stored. Values match eager's
written-out form; training graphs, whose forward saves the probabilities, keep the written form;
attention_rewrite=False turns it off."""

import math

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="a coil graph rewrite")


def attention(q, k, v, scale_by="div"):
    s = q @ k.transpose(-2, -1)
    s = s / math.sqrt(q.shape[-1]) if scale_by == "div" else s * 0.3
    return torch.softmax(s, dim=-1) @ v


def _rewritten(records) -> bool:
    return any("aten.scaled_dot_product_attention.default" in r.fallback_ops for r in records)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale_by", ["div", "mul"])
def test_written_out_attention_is_one_call_and_matches_eager(dtype, scale_by):
    reset_compiler()
    q, k, v = (torch.randn(2, 3, 40, 16, dtype=dtype) for _ in range(3))
    out = torch.compile(lambda *t: attention(*t, scale_by=scale_by), backend="coil")(q, k, v)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    ref = attention(q.double(), k.double(), v.double(), scale_by).to(dtype)
    torch.testing.assert_close(out, ref, **tol)
    assert _rewritten(coil_records())


def test_a_block_with_projections_and_heads():
    # Heads split from one qkv product (strided views of it), merged again after.
    torch.manual_seed(0)
    qkv, proj = torch.nn.Linear(64, 192), torch.nn.Linear(64, 64)

    def block(x):
        b, s, _ = x.shape
        q, k, v = qkv(x).view(b, s, 3, 4, 16).permute(2, 0, 3, 1, 4)
        return proj(attention(q, k, v).transpose(1, 2).reshape(b, s, 64))

    reset_compiler()
    x = torch.randn(2, 24, 64)
    with torch.no_grad():
        out = torch.compile(block, backend="coil")(x)
        torch.testing.assert_close(out, block(x), atol=1e-5, rtol=1e-4)
    assert _rewritten(coil_records())


def test_training_keeps_the_written_form_and_eagers_gradients():
    # The forward saves the probabilities for the backward: not rewritten.
    reset_compiler()
    q, k, v = (torch.randn(2, 2, 12, 8, requires_grad=True) for _ in range(3))
    out = torch.compile(attention, backend="coil")(q, k, v)
    out.sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    attention(q, k, v).sum().backward()
    for g, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, t.grad)
    assert not _rewritten(coil_records())


def test_the_rewrite_can_be_turned_off():
    reset_compiler()
    q, k, v = (torch.randn(1, 2, 8, 8) for _ in range(3))
    out = torch.compile(attention, backend="coil", options={"attention_rewrite": False})(q, k, v)
    torch.testing.assert_close(out, attention(q, k, v))
    assert not _rewritten(coil_records())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_cross_attention_shapes(dtype):
    # Keys longer than the queries, values narrower than the keys.
    reset_compiler()
    q = torch.randn(1, 2, 5, 8, dtype=dtype)
    k, v = torch.randn(1, 2, 7, 8, dtype=dtype), torch.randn(1, 2, 7, 3, dtype=dtype)
    out = torch.compile(lambda *t: attention(*t, scale_by="mul"), backend="coil")(q, k, v)
    ref = attention(q.double(), k.double(), v.double(), "mul").to(dtype)
    torch.testing.assert_close(out, ref, **({"atol": 2e-3, "rtol": 2e-3} if dtype == torch.float16 else {}))
    assert _rewritten(coil_records())
