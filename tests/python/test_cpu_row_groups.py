"""Row groups in C++ row reductions (codegen/cpp: Emitter::plan_row_group): a kernel whose loops
run over rows computes kRowGroup (4) rows per pass, each with its own x variable, accumulators
and per-row values. Every family of row kernel is compared with eager at row counts that group
(multiples of 4, at least 8) and at counts that do not, and the kernel text is checked for the
groups where they must be (or must not be). cpp_vectorize="on" groups small kernels too."""

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, check, kernel_text, make_tensor

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

GROUPED = "row groups of 4 x points"


@pytest.fixture
def debug(monkeypatch, tmp_path):
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    monkeypatch.setattr(coil.config.options, "cpp_vectorize", "on")
    return tmp_path


def _layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


def _rms_norm(x, w, b):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _centred_scaled(x, w, b):
    # A per-row value (the mean) read by a later loop, a broadcast weight, a second output.
    m = x.mean(-1, keepdim=True)
    return (x - m) * w + b, m


def _var_mean(x, w, b):
    v, m = torch.var_mean(x, -1)
    return v, m


FAMILIES = {
    "sum": lambda x, w, b: x.sum(-1),
    "amax": lambda x, w, b: x.amax(-1),
    "amin_plus": lambda x, w, b: x.amin(-1) + x.sum(-1),
    "mean": lambda x, w, b: x.mean(-1),
    "softmax": lambda x, w, b: torch.softmax(x, -1),
    "log_softmax": lambda x, w, b: torch.log_softmax(x * 2, -1),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "centred_scaled": _centred_scaled,
    "var_mean": _var_mean,
    "argmax": lambda x, w, b: x.argmax(-1),
}


@pytest.mark.parametrize("rows", [8, 12, 18], ids=["8", "12", "18"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_row_kernel_families(name, rows, debug):
    cols = 37  # a vector tail in every row
    x, w, b = make_tensor((rows, cols)), make_tensor((cols,)), make_tensor((cols,))
    check(FAMILIES[name], x, w, b)
    text = kernel_text(debug)
    if rows % 4:
        assert GROUPED not in text, text
    elif name not in ("argmax", "var_mean"):  # (no vector form: one row at a time)
        assert GROUPED in text, text
    # Kernels that loop over each row more than once fetch the next rows in their later loops
    # (the next group's, or the next row's); one loop over the row has nothing to overlap.
    if name in ("softmax", "log_softmax", "layer_norm", "rms_norm", "centred_scaled"):
        assert "row prefetch: loop" in text and "coil_prefetch(in_ptr" in text, text
    elif name in ("sum", "amax", "amin_plus", "mean"):
        assert "coil_prefetch(in_ptr" not in text, text


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=["f64", "bf16"])
@pytest.mark.parametrize("name", ["softmax", "layer_norm", "sum"])
def test_row_groups_in_other_dtypes(name, dtype, debug):
    x, w, b = (make_tensor(s, dtype) for s in ((16, 45), (45,), (45,)))
    check(FAMILIES[name], x, w, b)
    assert GROUPED in kernel_text(debug)


def test_long_rows_sum_in_chunks_per_row(debug):
    # Rows longer than a chunk of a float sum: each row's chunk accumulators are its own.
    # (Sums of 9001 float32 values of either sign: their rounding, grouped or not, is within 1e-3.)
    x = make_tensor((8, 9001))
    out = check(lambda x: x.sum(-1) + x.amax(-1), x, atol=1e-3, rtol=1e-4)
    assert out.shape == (8,)
    text = kernel_text(debug)
    assert GROUPED in text and "_g3_total" in text, text


def test_rows_of_a_3d_tensor_over_two_reduced_dims(debug):
    # Two r loops: the outer one scalar, the inner one in vector form, around the group.
    x = make_tensor((3, 8, 5, 19))
    check(lambda x: torch.softmax(x, -1).sum((-1, -2)), x)
    check(lambda x: x.sum((-1, -2)) * 2, x)
    assert GROUPED in kernel_text(debug)


def test_rows_of_a_transposed_input(debug):
    x = make_tensor((40, 16)).t()
    check(lambda x: torch.softmax(x, -1) * 3, x)


def test_softmax_writes_in_place_over_a_dead_product(debug):
    # The output writes over an operand read in an earlier loop, with row caches, per row.
    a, b = make_tensor((16, 24)), make_tensor((24, 40))
    check(lambda a, b: torch.softmax((a @ b) * 0.5, -1), a, b)
    assert GROUPED in kernel_text(debug)


def test_gathered_rows(debug):
    # An indirect row (an embedding) summed: each replica checks its own index.
    w = make_tensor((30, 48))
    idx = torch.randint(0, 30, (12,))
    check(lambda i, w: F.embedding(i, w).sum(-1) + 1, idx, w)


def test_row_groups_are_off_by_default_in_small_kernel_text(monkeypatch, tmp_path):
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    check(lambda x: torch.softmax(x, -1), make_tensor((8, 37)))
    assert GROUPED not in kernel_text(tmp_path)
    check(lambda x: torch.softmax(x, -1), make_tensor((256, 512)))
    assert GROUPED in kernel_text(tmp_path)


@pytest.mark.parametrize("name", ["sum", "softmax", "layer_norm", "rms_norm", "centred_scaled"])
def test_a_group_computes_each_row_bit_for_bit_as_one_row_at_a_time(name, debug):
    # 8 rows group; 9 rows do not: the first 8 rows of the 9 must be the same bits.
    x, w, b = make_tensor((9, 300)), make_tensor((300,)), make_tensor((300,))
    fn = FAMILIES[name]
    grouped = torch.compile(fn, backend="coil", dynamic=False)(x[:8].clone(), w, b)
    single = torch.compile(fn, backend="coil", dynamic=False)(x, w, b)
    grouped = grouped if isinstance(grouped, tuple) else (grouped,)
    single = single if isinstance(single, tuple) else (single,)
    for g, s in zip(grouped, single):
        assert torch.equal(g, s[:8]), (g - s[:8]).abs().max()
    text = kernel_text(debug)
    assert GROUPED in text and "for (int64_t x0 = 0; x0 < 9; ++x0)" in text, text
