"""CPU kernels whose innermost loop is shorter than a vector (sched/short_loops.cpp): loops every
index sees as one merged, short trailing loops unrolled inside a longer vector loop (their stores
interleaved through a stage), compared with eager for innermost sizes 1..7 in float32 and
bfloat16; and column arg-reductions (argmax/argmin/max.dim over a non-innermost dim) in vector
form, with ties and NaN as eager handles them (the first position of the best value, the first
NaN)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, check, kernel_text, make_tensor

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

F32, BF16 = torch.float32, torch.bfloat16
SMALL = [1, 2, 3, 4, 5, 7]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("c", SMALL)
def test_channels_last_copy_of_few_channels(c, dtype, vectorize):
    x = make_tensor((3, c, 11, 5), dtype)
    check(lambda x: torch.relu(x).contiguous(memory_format=torch.channels_last), x,
          check_strides=True)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", SMALL)
@pytest.mark.parametrize("op", ["log_softmax", "softmax"])
def test_softmax_over_a_short_last_dim(op, n, dtype, vectorize):
    x = make_tensor((4, 5, 13, n), dtype)
    # (Eager's bfloat16 log_softmax over a short dim sums its exponentials in bfloat16: where one
    # element dominates its row, its result is 0 there and -exp(-d) here, up to 1/256 apart.)
    tol = {"atol": 1 / 128, "rtol": 0.016} if dtype == BF16 else {}
    check(lambda x: getattr(torch, op)(x * 1.5 - 0.25, 3), x, **tol)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("n", SMALL)
def test_permuted_copies_with_a_short_innermost_dim(n, dtype, vectorize):
    x = make_tensor((n, 6, 19), dtype)
    check(lambda x: x.permute(1, 2, 0).contiguous() * 2.0, x)
    check(lambda x: (x.permute(2, 0, 1) + 1).contiguous(), x)


@pytest.mark.parametrize("n", [2, 3, 6])
def test_two_short_trailing_dims_unrolled_together(n, vectorize, debug):
    # x + y over [40, n, 2], y broadcast along the 40s and the 2s: no two loops merge (y varies
    # along the n only), so 2n points are unrolled inside the loop over 40.
    x, y = make_tensor((40, n, 2)), make_tensor((n, 1))
    check(lambda x, y: torch.sigmoid(x) + y, x, y)
    text = kernel_text(debug)
    assert f"({2 * n} points) unrolled inside the loop over x0, the vector loop" in text, text
    assert f"coil_interleave<{2 * n}>(" in text, text


def test_a_transposed_read_gives_the_vector_loop(vectorize, debug):
    # [40, 3, 2] from a [3, 2, 40] input: the loop over 40, along which the input is contiguous,
    # becomes the vector loop, the 3 and the 2 unrolled inside it, and each vector's copies store
    # a whole run of 6 x 8 (AVX2) elements.
    x = make_tensor((3, 2, 40))
    check(lambda x: torch.sigmoid(x.permute(2, 0, 1)).contiguous(), x)
    text = kernel_text(debug)
    assert "short loops: loop order (1, 0, 2)" in text, text
    assert "x1, x2 (6 points) unrolled inside the loop over x0, the vector loop" in text, text
    assert "coil_interleave<6>(" in text and "loop x0 vectorized" in text, text


def test_unrolled_copies_share_what_does_not_depend_on_them(vectorize, debug):
    # log_softmax over 3 classes (unrolled into a pointwise body): one max, one sum of exps and
    # one log per vector of rows, shared by the 3 copies; 3 exps in all.
    x = make_tensor((64, 3))
    check(lambda x: F.log_softmax(x, -1), x)
    text = kernel_text(debug)
    assert "x1 (3 points) unrolled inside the loop over x0" in text, text
    body = text[text.index("for (int64_t x0 = 0; x0 < x0_whole"):]
    body = body[:body.index("// the tail")]
    assert body.count("coil_exp_u20(") == 3 and body.count(".log()") == 1, body


def test_merged_loops(debug):
    # exp over [300, 7, 3] contiguous: one loop of 6300 points, vectorized.
    x = make_tensor((300, 7, 3))
    check(torch.exp, x)
    text = kernel_text(debug)
    assert "short loops: [300, 7, 3] merged into [6300]" in text, text
    assert "loop x0 vectorized" in text, text


def test_a_broadcast_operand_keeps_its_loops_apart(vectorize):
    # The bias varies along the 5s but not along the 3s: the loops of 5 and 3 do not merge.
    x, b = make_tensor((30, 5, 3)), make_tensor((5, 1))
    check(lambda x, b: x * b + 1, x, b)


def test_dynamic_outer_size(vectorize):
    check(lambda x: F.log_softmax(x, -1) * 2, make_tensor((37, 3)), dynamic=True)
    check(lambda x: x.permute(0, 2, 1).contiguous() + 1, make_tensor((9, 3, 20)), dynamic=True)


# ---- column arg-reductions in vector form ----


def _ties_and_nans(shape, dtype):
    # Few distinct values (many ties), a NaN in some columns, two in one, and columns of all NaN.
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, shape, generator=g).to(dtype)
    x[1, 1, 5] = float("nan")
    x[2, 1, 5] = float("nan")
    x[0, 0, 0] = float("nan")
    x[:, 2, 7] = float("nan")
    x[1, 3, -1] = float("nan")  # a block's masked tail
    return x


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("shape", [(6, 5, 70), (7, 4, 9), (3, 4, 200)])
def test_column_arg_reductions_with_ties_and_nan(shape, dtype, vectorize, debug):
    x = _ties_and_nans(shape, dtype)
    check(lambda x: torch.argmax(x, 0), x)
    check(lambda x: torch.argmin(x, 0, keepdim=True), x)
    check(lambda x: torch.max(x, 0), x)
    check(lambda x: torch.min(x, 1), x)
    if shape[-1] >= 16:  # (a shorter last dim makes row kernels: sched choose_cpu_strategy)
        assert "coil_vcol_arg_step<true>(" in kernel_text(debug)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_column_argmax_of_random_values(dtype, vectorize):
    x = make_tensor((9, 33, 130), dtype)
    check(lambda x: torch.argmax(x * 2 - 1, 1), x)
    check(lambda x: torch.max(x, 0, keepdim=True), x)


def test_column_argmax_used_in_the_same_kernel(vectorize):
    # The positions feed a pointwise op of the same kernel: int64 lanes have no vector form, the
    # kernel stays correct (scalar).
    x = make_tensor((5, 8, 40))
    check(lambda x: torch.argmax(x, 0) * 2 + 1, x)


def test_column_argmax_of_float64_stays_scalar(vectorize, debug):
    check(lambda x: torch.argmax(x, 0), make_tensor((5, 40), torch.float64))
    assert "coil_vcol_arg_step" not in kernel_text(debug)
