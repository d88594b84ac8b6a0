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


def test_a_view_of_an_input_with_symbolic_start_and_length_stays_a_view():
    """An output that is a view of a graph input comes back as that view (AOTAutograd rebuilds
    it from the input with the returned tensor's storage offset): narrow with a symbolic start
    and a length of 1 (a symbol in [0, 1]) once came back as a copy, read as x[0]."""
    coil = requires_coil()
    import torch._dynamo

    def run():
        x = torch.arange(10)
        cases = [(7, 1), (3, 1), (4, 3)]

        def f(x, start, length):
            return x.narrow(0, start, length), x.narrow(0, start, 2) * 1

        compiled = torch.compile(f, backend="coil", dynamic=True)
        for start, length in cases:
            actual, expected = compiled(x, start, length), f(x, start, length)
            for a, e in zip(actual, expected):
                assert torch.equal(a, e), (start, length, a, e)
            assert actual[0].storage_offset() == start
            assert actual[0].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        assert not any(g.eager_fallback for g in coil.compiled_graphs())

    torch._dynamo.reset()
    with torch._dynamo.config.patch(specialize_int=False):
        run()
