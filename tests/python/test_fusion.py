"""Fusion decisions, checked from coil.compiled_graphs() (never from logs): softmax over the last
dim, LayerNorm forward and a chain of pointwise ops each compile to exactly one kernel.

The numerics part of each test runs under any backend; the kernel-count assertions only under
coil (skipped otherwise)."""

import torch
from conftest import check, make_tensor, requires_coil
from torch import nn


def _single_kernel_records():
    coil = requires_coil()
    records = coil.compiled_graphs()
    assert len(records) == 1, f"expected one compiled graph, got {len(records)}"
    rec = records[0]
    assert not rec.eager_fallback
    assert all(isinstance(k, str) and k for k in rec.kernel_names), rec.kernel_names
    return rec


def _assert_one_kernel(rec, what):
    assert len(rec.kernel_names) == 1, (
        f"{what}: expected exactly one fused kernel, got {len(rec.kernel_names)}: "
        f"{rec.kernel_names}"
    )
    assert not rec.fallback_ops, f"{what}: unexpected ATen fallbacks {rec.fallback_ops}"
    assert not rec.extern_ops, f"{what}: unexpected extern calls {rec.extern_ops}"


def test_softmax_last_dim_is_one_kernel():
    check(lambda x: torch.softmax(x, dim=-1), make_tensor((8, 64)))
    _assert_one_kernel(_single_kernel_records(), "softmax(dim=-1)")


def test_log_softmax_last_dim_is_one_kernel():
    check(lambda x: torch.log_softmax(x, dim=-1), make_tensor((8, 64)))
    _assert_one_kernel(_single_kernel_records(), "log_softmax(dim=-1)")


def test_layer_norm_is_one_kernel():
    ln = nn.LayerNorm(64).eval()
    with torch.no_grad():
        ln.weight.copy_(torch.randn(64))
        ln.bias.copy_(torch.randn(64))
        check(ln, make_tensor((4, 6, 64)), atol=1e-5, rtol=1e-5)
    _assert_one_kernel(_single_kernel_records(), "nn.LayerNorm forward")


def test_pointwise_chain_is_one_kernel():
    check(
        lambda x: ((x * 2 + 1).exp().relu() - 3).sigmoid(), make_tensor((4, 8)), check_strides=True
    )
    _assert_one_kernel(_single_kernel_records(), "((x*2+1).exp().relu()-3).sigmoid()")


def test_pointwise_chain_two_inputs_broadcast_is_one_kernel():
    check(
        lambda x, y: (x * y + 1).tanh().neg().exp().abs(), make_tensor((4, 8)), make_tensor((1, 8))
    )
    _assert_one_kernel(_single_kernel_records(), "broadcast pointwise chain")
