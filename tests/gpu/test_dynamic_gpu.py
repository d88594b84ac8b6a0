"""Dynamic shapes on the GPU: Triton kernels that take their sizes as arguments, compiled once
and run at every size (compare tests/python/test_dynamic.py, which runs them on the CPU and under
Triton's interpreter)."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

OPS = {
    "pointwise": lambda x: torch.sigmoid(x) * x.exp() - 1,
    "sum_rows": lambda x: x.sum(-1),
    "sum_cols": lambda x: x.sum(0),
    "amax": lambda x: x.amax(1),
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax_dim0": lambda x: torch.log_softmax(x, 0),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "transpose_add": lambda x: x.t() + 1,
    "slice": lambda x: x[:, 1:-1] * 2,
    "size_as_number": lambda x: x * x.shape[0],
    "var_mean": lambda x: torch.var_mean(x, 1)[0],
}
SIZES = [(5, 7), (33, 130), (257, 1100), (64, 4099), (3, 40000)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(OPS))
def test_op_at_every_size(name, dtype):
    import coil

    fn = OPS[name]
    compiled = torch.compile(fn, backend="coil", dynamic=True)
    for n, m in SIZES:
        x = torch.randn(n, m, device="cuda", dtype=dtype)
        expected = fn(x.float()).to(dtype) if dtype != torch.float32 else fn(x)
        tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else dict(atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(compiled(x), expected, **tol)
    records = coil.compiled_graphs()
    assert len(records) == 1 and records[0].dynamic and not records[0].eager_fallback
    assert records[0].backend == "triton"


def test_gpt2_varying_length():
    transformers = pytest.importorskip("transformers")
    import coil

    cfg = transformers.GPT2Config(n_layer=2, use_cache=False)
    model = transformers.GPT2Model(cfg).eval().cuda()
    compiled = torch.compile(model, backend="coil", dynamic=True)
    with torch.no_grad():
        for n in (7, 96, 300, 512):
            ids = torch.randint(0, cfg.vocab_size, (2, n), device="cuda")
            torch.testing.assert_close(compiled(ids)[0], model(ids)[0], atol=2e-3, rtol=2e-3)
    records = coil.compiled_graphs()
    assert len(records) == 1 and records[0].dynamic and not records[0].eager_fallback
