"""Graph outputs: fresh tensors never alias inputs; genuine views still do (as in eager)."""

import pytest
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


@pytest.mark.parametrize("name", ["exp_amax", "tanh_amin", "sigmoid_max", "log1p_argmax"])
def test_a_returned_value_and_its_reductions_agree_bit_for_bit(name):
    # A value the graph returns and also reduces is computed once: its readers load it. They used
    # to compute it again in another kernel, where libmvec's exp (a vectorized loop) and libm's
    # (a scalar one) gave other bits, so the returned max was no element of the returned exp (18
    # of 20 draws, float64 [8, 1, 5]); in a training step, amax's backward then divided by a
    # count of zero (NaN gradients: fuzzer --train seeds 73274, 74708).
    requires_coil()
    fns = {
        "exp_amax": lambda x: (lambda y: (y, y.amax(-1, keepdim=True)))(torch.exp(x.clamp(max=10))),
        "tanh_amin": lambda x: (lambda y: (y, y.amin(0)))(torch.tanh(x * 3)),
        "sigmoid_max": lambda x: (lambda y: (y, y.max(-1).values))(torch.sigmoid(x) * 7),
        "log1p_argmax": lambda x: (lambda y: (y, y.argmax(-1)))(torch.log1p(x.abs())),
    }
    torch.manual_seed(0)
    for dtype, shape in ((torch.float64, (8, 1, 5)), (torch.float32, (16, 37))):
        x = torch.randn(shape, dtype=dtype) * 3
        torch._dynamo.reset()
        y, r = torch.compile(fns[name], backend="coil")(x)
        if name == "exp_amax":
            assert torch.equal(r, y.amax(-1, keepdim=True))
        elif name == "tanh_amin":
            assert torch.equal(r, y.amin(0))
        elif name == "sigmoid_max":
            assert torch.equal(r, y.max(-1).values)
        else:
            assert torch.equal(r, y.argmax(-1))


def test_large_outputs_are_advised_into_huge_pages(monkeypatch):
    # A buffer of 4 MiB or more is allocated by empty_strided_cpu_large, which asks the kernel for
    # 2 MiB pages (runtime/memory.h): each such output is advised once, whole, and computes what
    # eager does; small ones are not advised. The advice itself never changes memory.
    requires_coil()
    from coil import _C, runtime

    advised = []

    def record(address, nbytes):
        advised.append(nbytes)
        return _C.advise_huge_pages(address, nbytes)

    monkeypatch.setattr(runtime, "_advise_huge_pages", record)
    x = torch.randn(1024, 2048)
    # (The Python wrapper's allocation, which this records; the C++ wrapper's is tested below.)
    f = torch.compile(lambda t: (t * 2).softmax(-1), backend="coil",
                      options={"cpp_wrapper": False})
    torch.testing.assert_close(f(x), (x * 2).softmax(-1))
    assert advised == [x.numel() * 4]
    advised.clear()
    small = torch.randn(64, 64)
    torch.testing.assert_close(f(small), (small * 2).softmax(-1))
    assert advised == []
    t = torch.full((3 << 20,), 7.0)
    _C.advise_huge_pages(t.data_ptr(), t.numel() * 4)
    assert bool((t == 7.0).all())


def test_cpp_wrapper_allocates_large_outputs_in_huge_pages(tmp_path):
    # The C++ wrapper makes the same choice (empty_large: madvise over the whole 2 MiB pages).
    requires_coil()
    import coil

    x = torch.randn(1024, 2048)
    f = torch.compile(lambda t: (t * 2).softmax(-1), backend="coil",
                      options={"cpp_wrapper": True, "debug_dir": str(tmp_path)})
    torch.testing.assert_close(f(x), (x * 2).softmax(-1))
    record = coil.compiled_graphs()[-1]
    assert record.wrapper == "cpp", record.cpp_wrapper_blocker
    wrapper = open(f"{record.debug_dir}/wrapper.cpp").read()
    assert wrapper.count("= empty_large(") == 1, wrapper
