"""Masks in vector loops (cpp_vec_gather.cpp: index_comparison; cpp_reduction_loops.cpp: any and
all): comparisons of index values along the loop (a causal mask, tril/triu, a sliding window:
arange lanes compared into a mask), any/all reductions of masks, logical_not of masks. These kept
flex attention's row kernel scalar (its causal score_mod compares q and kv positions; its safe
softmax asks whether any score of the row is finite): 2 cores, b2 h4 s512 d64, 20.1 ms -> 5.7
(Inductor 8.7)."""

import re

import pytest
import torch
from conftest import BACKEND, check, kernel_text, make_tensor

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

N = 37  # a masked vector tail in every row


def _loops(debug) -> list[str]:
    return re.findall(r"// decision: loop [rx]\d+ .*", kernel_text(debug))


def _causal_softmax(x):
    n = x.shape[-1]
    q = torch.arange(n).view(n, 1)
    kv = torch.arange(n)
    return torch.softmax(torch.where(q >= kv, x, -float("inf")), -1)


def _window_sum(x):
    n = x.shape[-1]
    q = torch.arange(n).view(n, 1) * 2 + 1
    kv = torch.arange(n)
    near = ((q - kv * 2).abs() <= 9) | (kv == 0)
    return torch.where(near, x.exp(), 0.0).sum(-1)


CASES = {
    "causal_softmax": _causal_softmax,
    "tril": lambda x: torch.tril(x, -2).sum(-1) + torch.triu(x, 3).amax(-1),
    "sliding_window_sum": _window_sum,
    "any_all": lambda x: torch.stack([(x > 0.5).any(-1), (x > -1.5).all(-1)]).float() + x.amax(-1),
    "not_all_masked": lambda x: torch.where(~(x == -float("inf")).any(-1, keepdim=True),
                                            x.sum(-1, keepdim=True), x.amin(-1, keepdim=True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_masks_in_vector_loops_match_eager(case, dtype, vectorize, debug):
    x = make_tensor((3, N, N), dtype)
    if case == "not_all_masked":
        x[0, 4] = -float("inf")  # one row wholly masked
        x[1, :, 5] = -float("inf")
    check(CASES[case], x)
    loops = [line for line in _loops(debug) if "loop r0" in line]  # (a bool result's own
    assert loops and all("vectorized" in line for line in loops), loops  # loads stay scalar)


def test_any_and_all_see_nan_and_every_lane():
    # A NaN is not equal to anything: x != x marks it; a row's only true lane in the masked tail.
    x = make_tensor((4, N))
    x[1, N - 1] = float("nan")
    x[2, 0] = float("nan")
    check(lambda x: torch.stack([(x != x).any(-1), (x == x).all(-1), (x > 1e9).any(-1)]), x)


def test_flex_attention_row_kernel_is_vector_code(debug):
    """flex attention with a causal score_mod (python/coil/flex_inline.py): every loop over a row
    of scores is a vector loop at the default cpp_vectorize."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")

    def causal(score, b, h, q, kv):
        return torch.where(q >= kv, score, -float("inf"))

    q, k, v = (make_tensor((1, 2, 128, 16)) for _ in range(3))
    check(lambda q, k, v: flex.flex_attention(q, k, v, score_mod=causal), q, k, v,
          atol=1e-5, rtol=1e-5)
    loops = [line for line in _loops(debug) if "loop r0" in line]
    assert loops and all("vectorized" in line for line in loops), loops


def test_index_values_beyond_float_integers_stay_scalar(vectorize, debug):
    # Positions past 2^24 are not exact in float32 lanes: the comparison keeps the loop scalar
    # (an offset index into a long row, compared with a position that large).
    x = make_tensor((2, N))
    big = 1 << 25
    check(lambda x: torch.where(torch.arange(N) + big >= big + 7, x, 0.0).sum(-1), x)
    assert any("scalar" in line for line in _loops(debug)), _loops(debug)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_positions_cast_to_narrow_integers_wrap_as_eager(dtype, vectorize, debug):
    # (arange - 3) as uint8 is 253, 254, 255, 0, ...: a comparison of the wrapped values, which
    # the exact integers of the positions would get wrong (such loops stay scalar).
    x = make_tensor((2, N))
    check(lambda x: torch.where((torch.arange(N) - 3).to(dtype) >= 100, x, 0.0).sum(-1), x)
    check(lambda x: torch.where((torch.arange(N) * 9).to(dtype) < 20, x, 1.0).amax(-1), x)
