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


def test_equal_outputs_of_distinct_nodes_do_not_share_storage():
    # Values extern calls take are stored once when equal (Lowering::realize_shared); graph
    # outputs never are: eager returns distinct tensors, and writing one must not change another.
    requires_coil()
    w = torch.randn(4, 4)

    def f(t):
        e1, e2 = t.abs() + 1, t.abs() + 1
        return e1, e2, e1 @ w, e2 @ w

    x = torch.randn(4, 4)
    with torch.no_grad():
        a, b, c, d = torch.compile(f, backend="coil")(x)
    torch.testing.assert_close(c, d)
    assert a.data_ptr() != b.data_ptr()
    a.add_(1)
    torch.testing.assert_close(b, x.abs() + 1)
