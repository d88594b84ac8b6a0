"""The warm-start graph cache (python/coil/graph_cache.py) on a CUDA GPU: a bf16 attention block
compiled a second time (after Dynamo forgets it, as a new process would) comes from the cache,
runs coil's Triton kernels and matches eager; under reduce-overhead (CUDA graphs) the cache stays
out of the way. Skipped where torch.cuda.is_available() is False."""

import pytest
import torch

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import coil

DEVICE = "cuda"


class _Block(torch.nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(),
                                       torch.nn.Linear(2 * d, d))

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v
        return x + attn + self.mlp(x + attn)


def _block():
    torch.manual_seed(0)
    return _Block().to(DEVICE).to(torch.bfloat16).eval()


def _compile(m, x, cache, **options):
    coil.reset()
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(m, backend="coil", options={"cache_dir": str(cache), **options})(x)
    return out, coil.compiled_graphs()


def test_second_compile_comes_from_the_cache(tmp_path):
    m = _block()
    x = torch.randn(4, 32, 64, device=DEVICE, dtype=torch.bfloat16)
    first, records = _compile(m, x, tmp_path)
    assert records and not any(r.from_graph_cache for r in records)
    second, records = _compile(m, x, tmp_path)
    assert records and all(r.from_graph_cache for r in records)
    assert all(r.backend == "triton" and r.kernel_names for r in records)
    with torch.no_grad():
        want = m(x)
    torch.testing.assert_close(second, want, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(second, first, atol=0, rtol=0)


def test_cudagraphs_do_not_use_the_cache(tmp_path):
    m = _block()
    x = torch.randn(4, 32, 64, device=DEVICE, dtype=torch.bfloat16)
    for _ in range(2):
        _, records = _compile(m, x, tmp_path, cudagraphs=True)
        assert not any(r.from_graph_cache for r in records)
