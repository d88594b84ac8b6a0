"""Graph outputs: fresh tensors never alias inputs; genuine views still do (as in eager)."""

import torch

from conftest import requires_coil


def test_clone_of_input_does_not_alias():
    requires_coil()
    x = torch.randn(4, 4)
    out = torch.compile(lambda t: t.clone(), backend="coil")(x)
    torch.testing.assert_close(out, x)
    out.add_(1)
    assert not torch.equal(out, x), "clone(x) returned x's memory"


def test_view_of_input_aliases_like_eager():
    requires_coil()
    x = torch.randn(4, 4)
    v = torch.compile(lambda t: t.view(16), backend="coil")(x)
    v[0] = 100.0
    assert x[0, 0].item() == 100.0


def test_same_tensor_returned_twice():
    requires_coil()
    x = torch.randn(4, 4)
    a, b = torch.compile(lambda t: (t.exp(),) * 2, backend="coil")(x)
    torch.testing.assert_close(a, x.exp())
    torch.testing.assert_close(b, x.exp())
