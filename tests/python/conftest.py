"""Shared helpers for coil's Python correctness tests.

Every numerics test compares a function run eagerly with the same function compiled by
``torch.compile(fn, backend=BACKEND)``. BACKEND is read from the environment variable
COIL_TEST_BACKEND (default "coil"). Running the suite with COIL_TEST_BACKEND=eager or
COIL_TEST_BACKEND=inductor validates the tests themselves: every test must pass (or skip, for
the tests that inspect coil's own records and artifacts) against a correct backend.

Helpers (import them with ``from conftest import ...``):

- ``check(fn, *inputs, atol=None, rtol=None, check_strides=False)``: eager vs compiled, values,
  dtypes, shapes (and strides on request); also checks that the compiled call leaves its inputs
  unchanged and, under coil, that no graph silently fell back to eager.
- ``make_tensor(shape, dtype, domain)`` / ``make_input(kind, shape, dtype, domain)`` /
  ``input_kinds(shape, dtype, domain)``: random inputs of each layout kind (KINDS).
- ``requires_coil()``: skip unless BACKEND == "coil", else return the ``coil`` module.
- ``compile_fn(fn, **kw)`` / ``graph_count()``: compile and count the graphs handed to the
  backend (coil's records under coil, a counting wrapper under other backends).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

BACKEND = os.environ.get("COIL_TEST_BACKEND", "coil")

# Dynamo times each new guard set once after flushing the CPU caches, for a log line only
# (guards.py, "This cache flush is expensive"): about 40 ms of every compile on a 2-core machine,
# a few minutes over the suite's thousands of compiles. The guards themselves are still built and
# checked; only that measurement is skipped.
import torch._dynamo.guards as _dynamo_guards  # noqa: E402

if hasattr(_dynamo_guards, "profile_guard_manager"):
    _dynamo_guards.profile_guard_manager = lambda *args, **kwargs: 0.0

FLOAT_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
ALL_DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16)

# Layout kinds of an input tensor; see make_input.
KINDS = ("contiguous", "transposed", "broadcast", "strided", "offset", "scalar", "size1")
# Kinds whose tensors are contiguous: for these, pointwise outputs must have eager's strides.
CONTIGUOUS_KINDS = ("contiguous", "scalar", "size1", "offset")

# Default tolerances of torch.testing.assert_close for bfloat16 (used after upcasting to float).
BF16_TOL = {"atol": 1e-5, "rtol": 1.6e-2}


def dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# --------------------------------------------------------------------------------------------
# coil access
# --------------------------------------------------------------------------------------------


def requires_coil():
    """Skip the calling test unless the suite targets coil; return the ``coil`` module."""
    if BACKEND != "coil":
        pytest.skip(f"inspects coil's own records/artifacts; COIL_TEST_BACKEND={BACKEND!r}")
    import coil

    return coil


def _coil_or_none():
    if BACKEND != "coil":
        return None
    try:
        import coil
    except ImportError:
        return None
    return coil


def reset_compiler() -> None:
    """Forget every compiled graph: Dynamo's caches and, under coil, coil's records."""
    coil = _coil_or_none()
    if coil is not None:
        coil.reset()
    torch._dynamo.reset()


def coil_records() -> list:
    """coil.compiled_graphs() under coil; [] under other backends."""
    coil = _coil_or_none()
    return list(coil.compiled_graphs()) if coil is not None else []


_COUNTED_GRAPHS: list = []


def compile_fn(fn, **kwargs):
    """torch.compile(fn) with BACKEND; under non-coil backends the graphs are counted."""
    if BACKEND == "coil":
        return torch.compile(fn, backend="coil", **kwargs)
    inner = torch._dynamo.lookup_backend(BACKEND)

    def counting_backend(gm, example_inputs):
        _COUNTED_GRAPHS.append(gm)
        return inner(gm, example_inputs)

    return torch.compile(fn, backend=counting_backend, **kwargs)


def graph_count() -> int:
    """Graphs compiled since the last reset (coil's records, or compile_fn's counter)."""
    if BACKEND == "coil":
        return len(requires_coil().compiled_graphs())
    return len(_COUNTED_GRAPHS)


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    torch.manual_seed(0)
    _COUNTED_GRAPHS.clear()
    reset_compiler()
    yield
    reset_compiler()
    _COUNTED_GRAPHS.clear()


@pytest.fixture
def coil_mod():
    return requires_coil()


@pytest.fixture
def vectorize(monkeypatch):
    """Every C++ kernel in vector form (the default, "auto", keeps small kernels scalar)."""
    import coil

    monkeypatch.setattr(coil.config.options, "cpp_vectorize", "on")


@pytest.fixture
def debug(monkeypatch, tmp_path):
    """The compiled graphs' debug folders under tmp_path (returned): kernel_text(debug) reads
    their kernels."""
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    return tmp_path


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------


def make_tensor(shape, dtype=torch.float32, domain: str = "any", scale: float = 1.0):
    """A fresh contiguous random tensor.

    domain: "any" (randn / small ints / random bools), "positive" (> 0, at least 0.1 for floats,
    1..5 for ints), "nonzero" (|x| >= 0.1 for floats, nonzero ints), "unit" (floats in (-0.9, 0.9)).
    """
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        if domain == "positive":
            t = torch.randint(1, 6, shape)
        elif domain == "nonzero":
            t = torch.randint(1, 6, shape) * (torch.randint(0, 2, shape) * 2 - 1)
        else:
            t = torch.randint(-5, 6, shape)
        return t.to(dtype)
    t = torch.randn(shape, dtype=torch.float64) * scale
    if domain == "positive":
        t = t.abs() + 0.1
    elif domain == "nonzero":
        t = torch.where(t >= 0, t + 0.1, t - 0.1)
    elif domain == "unit":
        t = torch.rand(shape, dtype=torch.float64) * 1.8 - 0.9
    elif domain != "any":
        raise ValueError(f"unknown domain {domain!r}")
    return t.to(dtype)


def make_input(kind: str, shape=(4, 8), dtype=torch.float32, domain: str = "any", scale=1.0):
    """A random input of the given layout kind whose logical shape is ``shape`` (len >= 2).

    contiguous: plain; transposed: a permuted (reversed dims) view, non-contiguous;
    broadcast: a size-1 first dim expanded (stride 0); strided: x[..., ::2] of a wider tensor;
    offset: contiguous but with storage offset 3 (misaligned); scalar: a 0-d tensor (shape ());
    size1: shape with size-1 dims inserted, e.g. (4, 8) -> (1, 4, 1, 8).
    """
    shape = tuple(shape)
    assert len(shape) >= 2, "layout kinds need at least 2 dims"
    mk = lambda s: make_tensor(s, dtype, domain, scale)
    if kind == "contiguous":
        t = mk(shape)
    elif kind == "transposed":
        perm = tuple(reversed(range(len(shape))))
        t = mk(tuple(shape[p] for p in perm)).permute(perm)
    elif kind == "broadcast":
        t = mk((1,) + shape[1:]).expand(shape)
    elif kind == "strided":
        t = mk(shape[:-1] + (2 * shape[-1],))[..., ::2]
    elif kind == "offset":
        numel = 1
        for s in shape:
            numel *= s
        t = mk((numel + 3,))[3:].view(shape)
    elif kind == "scalar":
        return mk(())
    elif kind == "size1":
        t = mk((1,) + shape[:1] + (1,) + shape[1:])
    else:
        raise ValueError(f"unknown input kind {kind!r}")
    if kind != "size1":
        assert t.shape == shape, (kind, t.shape, shape)
    return t


def input_kinds(shape=(4, 8), dtype=torch.float32, domain: str = "any"):
    """Yield (kind, tensor) for every layout kind in KINDS."""
    for kind in KINDS:
        yield kind, make_input(kind, shape, dtype, domain)


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------


def _strides_match(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0:
        return True
    return all(sa == sb for sa, sb, n in zip(a.stride(), b.stride(), a.shape) if n > 1)


def assert_same(
    actual, expected, *, atol=None, rtol=None, check_strides=False, equal_nan=True, path="output"
):
    """Compare (nested) outputs: type, dtype, shape, device, values (and strides on request)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.device == expected.device, f"{path}: device {actual.device}"
        if check_strides:
            assert _strides_match(actual, expected), (
                f"{path}: strides {actual.stride()} != eager {expected.stride()} "
                f"(shape {tuple(expected.shape)})"
            )
        a, e = actual.detach(), expected.detach()
        tol = {}
        if atol is not None or rtol is not None:
            tol = {
                "atol": atol if atol is not None else 0.0,
                "rtol": rtol if rtol is not None else 0.0,
            }
        if e.dtype in (torch.bfloat16, torch.float16):
            a, e = a.float(), e.float()
            tol = tol or dict(BF16_TOL)
        torch.testing.assert_close(
            a, e, equal_nan=equal_nan, check_stride=False, msg=lambda m: f"{path}: {m}", **tol
        )
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{path}: {len(actual)} outputs != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(
                a,
                e,
                atol=atol,
                rtol=rtol,
                check_strides=check_strides,
                equal_nan=equal_nan,
                path=f"{path}[{i}]",
            )
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), path
        for k in expected:
            assert_same(
                actual[k],
                expected[k],
                atol=atol,
                rtol=rtol,
                check_strides=check_strides,
                equal_nan=equal_nan,
                path=f"{path}[{k!r}]",
            )
    elif hasattr(expected, "to_tuple"):  # transformers ModelOutput
        assert_same(
            actual.to_tuple(),
            expected.to_tuple(),
            atol=atol,
            rtol=rtol,
            check_strides=check_strides,
            equal_nan=equal_nan,
            path=path,
        )
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _snapshot(inputs):
    return [t.detach().clone() if isinstance(t, torch.Tensor) else None for t in inputs]


def assert_no_eager_fallback() -> None:
    """Under coil: at least one graph was compiled and none of them fell back to eager."""
    if BACKEND != "coil":
        return
    records = coil_records()
    assert records, "coil compiled no graph for this function"
    bad = [i for i, r in enumerate(records) if r.eager_fallback]
    assert not bad, f"graphs {bad} failed to build and ran eagerly (eager_fallback=True)"


def kernel_text(debug_dir) -> str:
    """Every kernels.cpp the compiled graphs wrote to debug_dir (the debug_dir option)."""
    texts = []
    for root, _, files in os.walk(debug_dir):
        texts += [open(os.path.join(root, f)).read() for f in files if f == "kernels.cpp"]
    return "\n".join(texts)


def check(
    fn,
    *inputs,
    atol=None,
    rtol=None,
    check_strides=False,
    equal_nan=True,
    dynamic=False,
    expect_graph=True,
):
    """Run ``fn`` eagerly and compiled with BACKEND on the same inputs and compare the results.

    Compares values (assert_close; default tolerances unless given; bfloat16 compared in float
    with bfloat16's default tolerances), dtypes, shapes, and with check_strides the strides of
    dims of size > 1. The compiled function is called twice (first call compiles; the second
    runs the cached code) and must leave its inputs unchanged. Under coil, every graph must have
    been compiled and built (no eager_fallback). Returns the compiled output.
    """
    reset_compiler()
    expected = fn(*inputs)
    before = _snapshot(inputs)
    compiled = torch.compile(fn, backend=BACKEND, dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = compiled(*inputs)
        again = compiled(*inputs)
    coil_warnings = [str(w.message) for w in caught if w.category.__name__ == "CoilWarning"]
    if expect_graph:
        if BACKEND == "coil" and any(r.eager_fallback for r in coil_records()):
            raise AssertionError(f"coil fell back to eager; warnings: {coil_warnings}")
        assert_no_eager_fallback()
    assert_same(
        actual, expected, atol=atol, rtol=rtol, check_strides=check_strides, equal_nan=equal_nan
    )
    assert_same(
        again,
        expected,
        atol=atol,
        rtol=rtol,
        check_strides=check_strides,
        equal_nan=equal_nan,
        path="output (second call)",
    )
    for i, (t, b) in enumerate(zip(inputs, before)):
        if b is not None:
            assert torch.equal(t.detach(), b) or (
                t.is_floating_point()
                and torch.equal(t.isnan(), b.isnan())
                and torch.equal(t.nan_to_num(), b.nan_to_num())
            ), f"input {i} was modified"
    return actual


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "interpreter: also run under Triton's interpreter (test_dynamic.py's child process)"
    )
