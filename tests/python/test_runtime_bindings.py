"""The wrapper's extern calls go through coil.runtime.extern_op: an op's Python binding where it
is the same op (faster argument parsing), else the torch.ops overload. Each binding must compute
exactly what the overload computes for the arguments the wrapper passes."""

import torch

from coil.runtime import _PYTHON_BINDINGS, extern_op


def _cases():
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    x, w, b = r(2, 3, 8, 8), r(4, 3, 3, 3), r(4)
    a, m = r(5, 6), r(6, 7)
    yield "aten.convolution.default", (x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}
    yield "aten.convolution.default", (x, w, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1), {}
    yield "aten.mm.default", (a, m), {}
    yield "aten.addmm.default", (r(7), a, m), {"beta": 0.5, "alpha": 2.0}
    yield "aten.bmm.default", (r(3, 5, 6), r(3, 6, 7)), {}
    yield "aten.baddbmm.default", (r(3, 5, 7), r(3, 5, 6), r(3, 6, 7)), {"alpha": 0.25}
    yield "aten.addmv.default", (r(5), a, r(6)), {"beta": 2.0}


def test_bindings_compute_what_the_overloads_compute():
    seen = set()
    for name, args, kwargs in _cases():
        fast = extern_op(name)
        assert fast is getattr(torch._C._VariableFunctions, _PYTHON_BINDINGS[name])
        ns, op, overload = name.split(".")
        slow = getattr(getattr(getattr(torch.ops, ns), op), overload)
        expected = slow(*args, **kwargs)
        actual = fast(*args, **kwargs)
        assert torch.equal(actual, expected) and actual.stride() == expected.stride(), name
        seen.add(name)
    # Every binding of the table runs here except the CUDA-only attention ops.
    assert {n for n in _PYTHON_BINDINGS if "attention" not in n} <= seen


def test_other_ops_are_their_overloads():
    assert extern_op("aten.convolution_backward.default") is torch.ops.aten.convolution_backward.default
    assert extern_op("aten.cumsum.default") is torch.ops.aten.cumsum.default
    for name in _PYTHON_BINDINGS:  # (every binding exists in this torch)
        assert extern_op(name) is getattr(torch._C._VariableFunctions, _PYTHON_BINDINGS[name])
