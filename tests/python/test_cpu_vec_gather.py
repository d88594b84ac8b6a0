"""Gathers in the vector form of C++ kernels (codegen/cpp/cpp_vec_gather.cpp): loops that read an
index tensor along the vectorized loop and load through its elements (a relative-position-bias
table inside a softmax, an index_select along the row) run in vector form, each lane's index
bounds-checked as the scalar loop checks it; compared with eager in float32 and bfloat16, with
int64 and int32 indices, inside row reductions and pointwise loops; bad indices still raise.
(A file of its own beside test_cpu_vec.py, which covers the other vector forms.)"""

import re

import pytest
import torch
from conftest import BACKEND, check, coil_records, kernel_text, make_tensor

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

GATHERED = "indirect loads gathered lane by lane"
H, N, T = 3, 37, 11  # 37: a masked vector tail in every row


def _biased(x, t, idx):
    """x [B, H, N] plus sigmoid of a table t [H, T] gathered along the row by idx [N]."""
    return x * 2 + torch.sigmoid(t[:, idx]).to(x.dtype)


OPS = {
    "pointwise": lambda y: y * 3,
    "sum": lambda y: y.sum(-1),
    "amax": lambda y: y.amax(-1),
    "softmax": lambda y: torch.softmax(y, -1),
}


def _inputs(dtype, index_dtype):
    x = make_tensor((4, H, N), dtype)
    t = make_tensor((H, T), dtype)
    idx = torch.randint(-T, T, (N,), dtype=index_dtype)  # negative ones count from the end
    return x, t, idx


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_gathers_along_the_vector_loop(op, dtype, index_dtype, vectorize, debug):
    fn = OPS[op]
    check(lambda x, t, i: fn(_biased(x, t, i)), *_inputs(dtype, index_dtype))
    text = kernel_text(debug)
    assert GATHERED in text, text
    assert "scalar (omp simd)" not in text, text


def test_gathers_in_row_groups(vectorize, debug):
    # 8 rows per x point's innermost dim: the kernel reads 4 rows at a time, each replica with
    # its own lanes' indices.
    x, t, idx = make_tensor((2, 8, N)), make_tensor((8, T)), torch.randint(-T, T, (N,))
    check(lambda x, t, i: torch.softmax(_biased(x, t, i), -1), x, t, idx)
    text = kernel_text(debug)
    assert "row groups of 4" in text and GATHERED in text, text


def test_gathers_with_dynamic_sizes(vectorize, debug):
    check(lambda x, t, i: torch.softmax(_biased(x, t, i), -1), *_inputs(torch.float32, torch.int64),
          dynamic=True)
    assert GATHERED in kernel_text(debug)


def _swin_bias(x, scale, t, idx):
    n = x.shape[-1]
    bias = t[idx].view(n, n, -1).permute(2, 0, 1).contiguous()
    return x * torch.clamp(scale, max=4.6).exp() + 16 * torch.sigmoid(bias)


def _swin_inputs(dtype=torch.float32, n=49, heads=4, table=169):
    x = make_tensor((8, heads, n, n), dtype)
    scale = make_tensor((heads, 1, 1), dtype)
    t = make_tensor((table, heads), dtype)
    idx = torch.randint(0, table, (n * n,))
    return x, scale, t, idx


def test_swinv2_attention_softmax_is_a_vector_loop(debug):
    """Swin V2's softmax over its scores plus a relative-position bias gathered by an int64 index
    (transformers' Swinv2SelfAttention), at the default cpp_vectorize: its row loops were scalar
    ("int64 values vary"), running sigmoid's and exp's vector code on one lane per element."""
    check(lambda *a: torch.softmax(_swin_bias(*a), -1), *_swin_inputs())
    text = kernel_text(debug)
    loops = re.findall(r"// decision: loop r0 .*", text)
    assert loops and all("vectorized" in line for line in loops), loops
    assert GATHERED in text, text
    # exp(clamp(logit_scale)), the same for the whole row, is computed once per row, before the
    # loops (it was computed at every step of both loops that read it).
    assert text.count("coil_min<float>(4.6f") == 1, text


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swinv2_style_softmax_with_16_bit_floats_and_sizes_with_tails(dtype, vectorize, debug):
    check(lambda *a: torch.softmax(_swin_bias(*a), -1), *_swin_inputs(dtype, n=7, heads=2, table=13))
    assert GATHERED in kernel_text(debug)


def test_index_arithmetic_before_the_gather(vectorize, debug):
    # (idx * 3 + 1) % T: integer values computed per lane before the load they index.
    x, t, idx = _inputs(torch.float32, torch.int64)
    check(lambda x, t, i: torch.softmax(x + t[:, (i * 3 + 1) % T].exp(), -1), x, t, idx.abs())
    assert GATHERED in kernel_text(debug)


def test_gather_of_a_broadcast_table_still_checks_each_index(vectorize, debug):
    # Every element of an expanded row is the same: the load reads it whatever the index (a
    # guard keeps the index's bounds check), each lane checked.
    x, _, idx = _inputs(torch.float32, torch.int64)
    t = make_tensor((H, 1)).expand(H, T)
    fn = lambda x, t, i: torch.softmax(x + t[:, i], -1)  # noqa: E731
    check(fn, x, t, idx)
    assert "indirect indices checked lane by lane" in kernel_text(debug)
    bad = idx.clone()
    bad[N - 1] = T  # in the masked tail
    with pytest.raises((IndexError, RuntimeError)) as error:
        torch.compile(fn, backend="coil")(x, t, bad)
    assert "out of bounds" in str(error.value)


def test_gathered_integers_used_as_values_are_built_lane_by_lane(vectorize, debug):
    # An integer table's elements used as numbers: each lane's integer read and converted by the
    # lane loop (coil_vlanes), everything after it vector math.
    x, _, idx = _inputs(torch.float32, torch.int64)
    t = torch.randint(-4, 5, (H, T))
    check(lambda x, t, i: (x * t[:, i]).sum(-1), x, t, idx)
    text = kernel_text(debug)
    assert "scalar (omp simd)" not in text and "coil_vlanes<VecF>" in text, text


def test_integer_and_bool_masks_read_along_the_loop(vectorize, debug):
    # transformers' masks: an int64 (or bool) padding mask read at [batch, kv] (through aranges:
    # direct loads) and made a bool, inside softmax's row loops: masks built lane by lane.
    x = make_tensor((2, 4, 8, 24))
    for mask in (torch.randint(0, 2, (2, 24)), torch.rand(2, 24) > 0.3):
        mask[:, 0] = 1

        def fn(x, m):
            b = torch.arange(2)[:, None, None, None]
            kv = torch.arange(24)[None, None, None, :]
            keep = m[b, kv].bool() & (kv <= torch.arange(8)[None, None, :, None] + 16)
            return torch.softmax(x.masked_fill(~keep, float("-inf")), -1)

        check(fn, x, mask)
        text = kernel_text(debug)
        assert "scalar (omp simd)" not in text and "coil_vmask_lanes<VecF>" in text, text
        assert "= coil_index(" not in text, text  # aranges index directly: nothing to check


def test_index_values_used_as_numbers_are_built_lane_by_lane(vectorize, debug):
    # (arange(N) - 3) * 2 as a number: integers computed from the loop's index, lane by lane.
    x = make_tensor((4, N))
    check(lambda x: (x + (torch.arange(N) - 3) * 2).amax(-1), x)
    text = kernel_text(debug)
    assert "scalar (omp simd)" not in text and "coil_vlanes<VecF>" in text, text


def test_gather_inside_a_concatenation(vectorize):
    x, t, idx = _inputs(torch.float32, torch.int64)
    check(lambda x, t, i: torch.softmax(torch.cat([x, t[:, i].expand_as(x)], -1), -1), x, t, idx)


@pytest.mark.parametrize("where", ["first", "tail", "negative"])
@pytest.mark.parametrize("op", ["softmax", "pointwise"])
def test_bad_index_raises_in_vector_form(where, op, vectorize, debug):
    fn = lambda x, t, i: OPS[op](_biased(x, t, i))  # noqa: E731
    x, t, idx = _inputs(torch.float32, torch.int64)
    compiled = torch.compile(fn, backend="coil")
    torch.testing.assert_close(compiled(x, t, idx), fn(x, t, idx))
    assert GATHERED in kernel_text(debug)
    bad = idx.clone()
    bad[{"first": 0, "tail": N - 1, "negative": N // 2}[where]] = -T - 1 if where == "negative" else T
    with pytest.raises((IndexError, RuntimeError)):
        fn(x, t, bad)
    with pytest.raises((IndexError, RuntimeError)) as error:
        compiled(x, t, bad)
    assert "out of bounds" in str(error.value), str(error.value)
    assert not any(r.eager_fallback for r in coil_records())
    torch.testing.assert_close(compiled(x, t, idx), fn(x, t, idx))
