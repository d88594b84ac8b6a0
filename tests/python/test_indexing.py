"""Data-dependent indexing compiled by coil vs eager: reads (x[idx], index_select, gather, take,
embedding), writes (index_put, scatter, scatter_add, scatter_reduce, index_add/copy/fill) and
out-of-bounds indices, which must raise instead of touching memory outside a tensor."""

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, check, coil_records, compile_fn, dtype_id, make_input, make_tensor

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool)
INDEXING_OPS = (
    "aten.index.Tensor",
    "aten.index_select.default",
    "aten.gather.default",
    "aten.embedding.default",
    "aten.index_put.default",
    "aten.scatter.src",
    "aten.scatter.value",
    "aten.scatter_add.default",
    "aten.scatter_reduce.two",
)


def check_lowered(fn, *inputs, **kw):
    """check(), and under coil: no indexing op ran as an ATen fallback."""
    out = check(fn, *inputs, **kw)
    fallbacks = [op for r in coil_records() for op in r.fallback_ops if op in INDEXING_OPS]
    assert not fallbacks, f"fell back to ATen: {fallbacks}"
    return out


def kernel_count() -> int:
    return sum(len(r.kernel_names) for r in coil_records())


def index(n, size, *, negative=True, unique=False):
    """n indices into a dim of `size` (some negative, when allowed)."""
    if unique:
        i = torch.randperm(size)[:n]
    else:
        i = torch.randint(0, size, (n,))
    if negative:
        i = torch.where(torch.rand(n) < 0.5, i - size, i)
    return i


# ---- reads ----


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_index_rows_with_negative_indices(dtype):
    x = make_tensor((6, 5), dtype)
    check_lowered(lambda x, i: x[i], x, index(9, 6))


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "strided", "offset"])
def test_index_non_contiguous_input(kind):
    x = make_input(kind, (6, 8))
    check_lowered(lambda x, i: x[i] * 2, x, index(4, 6))


def test_index_broadcasting_index_tensors():
    x = make_tensor((5, 7))
    i = torch.randint(-5, 5, (3, 1))
    j = torch.randint(-7, 7, (4,))
    check_lowered(lambda x, i, j: x[i, j], x, i, j)


def test_index_none_entries_and_slices():
    x = make_tensor((4, 5, 6))
    i, j = index(3, 5), index(3, 6)
    check_lowered(lambda x, i: x[:, i], x, i)
    check_lowered(lambda x, i: x[..., i], x, j)
    check_lowered(lambda x, i: x[:, None, i], x, i)
    # Non-adjacent index tensors: the broadcast dims go first.
    check_lowered(lambda x, i, j: x[i % 4, :, j], x, i, j)


def test_index_int32_indices():
    x = make_tensor((6, 4))
    check_lowered(lambda x, i: x[i], x, index(5, 6).to(torch.int32))


def test_index_of_a_non_contiguous_index_tensor():
    x = make_tensor((6, 4))
    i = torch.randint(0, 6, (5, 8))[:, ::2]
    check_lowered(lambda x, i: x[i], x, i)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("kind", ["contiguous", "transposed", "strided"])
def test_index_select(dim, kind):
    x = make_input(kind, (6, 8))
    i = torch.randint(0, x.shape[dim], (5,))
    check_lowered(lambda x, i: torch.index_select(x, dim, i), x, i)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dim", [0, 1])
def test_gather(dtype, dim):
    x = make_tensor((5, 6), dtype)
    i = torch.randint(0, x.shape[dim], (4, 3))  # smaller than x in every dim
    check_lowered(lambda x, i: torch.gather(x, dim, i), x, i)


@pytest.mark.parametrize("kind", ["transposed", "broadcast", "offset"])
def test_gather_non_contiguous(kind):
    x = make_input(kind, (5, 6))
    i = torch.randint(0, 6, (6, 5)).t()
    check_lowered(lambda x, i: torch.gather(x, 1, i), x, i)


def test_take_and_take_along_dim():
    x = make_tensor((4, 5))
    check_lowered(lambda x, i: torch.take(x, i), x, torch.randint(-20, 20, (3, 2)))
    check_lowered(lambda x, i: torch.take_along_dim(x, i, 1), x, torch.randint(0, 5, (4, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_embedding(dtype):
    w = make_tensor((10, 8), dtype)
    ids = torch.randint(0, 10, (3, 4))
    check_lowered(lambda w, ids: F.embedding(ids, w), w, ids)
    check_lowered(lambda w, ids: F.embedding(ids, w, padding_idx=0) * 2, w, ids)


def test_embedding_in_a_small_model():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(50, 16)
            self.pos = torch.nn.Embedding(8, 16)
            self.norm = torch.nn.LayerNorm(16)
            self.head = torch.nn.Linear(16, 4)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1])
            h = self.tok(ids) + self.pos(pos)
            return self.head(F.gelu(self.norm(h)))

    model = Model().eval()
    ids = torch.randint(0, 50, (2, 8))
    with torch.no_grad():
        check_lowered(model, ids, atol=1e-5, rtol=1e-5)


def test_a_producer_is_computed_at_the_gathered_position():
    # exp(x) is never stored: the gather's kernel computes it for the rows it reads.
    def f(x, i):
        return torch.exp(x * 2)[i] + 1

    check_lowered(f, make_tensor((6, 5)), index(4, 6))
    if BACKEND == "coil":
        assert kernel_count() == 1, [r.kernel_names for r in coil_records()]


def test_the_index_tensor_may_be_computed():
    def f(x, w):
        return F.embedding(x.argmax(1), w) + torch.gather(w, 0, (x.abs() * 3).long() % 10)[:, :1]

    check_lowered(f, make_tensor((4, 10)), make_tensor((10, 10)))


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_is_one_kernel(mode):
    # Upsampling decomposes into index tensors computed from arange and an aten.index.
    kw = {} if mode == "nearest" else {"align_corners": False}
    check_lowered(
        lambda x: F.interpolate(x, scale_factor=2, mode=mode, **kw), make_tensor((2, 3, 5, 6))
    )
    if BACKEND == "coil":
        assert kernel_count() == 1, [r.kernel_names for r in coil_records()]


def test_embedding_forward_of_a_trained_model():
    emb = torch.nn.Embedding(20, 8)
    ids = torch.randint(0, 20, (4, 5))
    out = compile_fn(lambda ids: emb(ids).sum())(ids)
    torch.testing.assert_close(out, emb(ids).sum())
    out.backward()  # the backward graph runs eagerly
    assert emb.weight.grad is not None


# ---- writes ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=dtype_id)
def test_index_put(dtype):
    x = make_tensor((7, 4), dtype)
    v = make_tensor((3, 4), dtype)
    # Without accumulate, a duplicate index keeps "one of" the values: none here.
    check_lowered(lambda x, i, v: x.index_put((i,), v), x, index(3, 7, unique=True), v)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64], ids=dtype_id
)
def test_index_put_accumulate_with_duplicates(dtype):
    x = make_tensor((5, 4), dtype)
    i = torch.tensor([0, 3, -5, 3, 1, 3])
    v = make_tensor((6, 4), dtype)
    check_lowered(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, i, v)


def test_index_put_broadcast_values_and_two_index_tensors():
    x = make_tensor((5, 6))
    i = torch.tensor([0, 2, 4])
    j = torch.tensor([1, -1, 3])
    check_lowered(lambda x, i, j, v: x.index_put((i, j), v), x, i, j, torch.tensor(7.0))

    # y[:, i] += v: index_put with a None entry; v [5, 1] broadcasts to the indexed shape [5, 3].
    def add_columns(x, i, v):
        y = x.clone()
        y[:, i] += v
        return y

    check_lowered(add_columns, x, i, make_tensor((5, 1)))


def test_setitem_on_a_copy():
    def f(x, i, v):
        y = x.clone()
        y[i] = v * 2
        return y

    check_lowered(f, make_tensor((6, 3)), index(2, 6, unique=True), make_tensor((2, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=dtype_id)
def test_scatter_src_and_value(dtype):
    x = make_tensor((4, 5), dtype)
    src = make_tensor((4, 5), dtype)
    # Unique targets along dim 0 for every column (a duplicate keeps one of the values).
    i = torch.stack([torch.randperm(4)[:3] for _ in range(5)], 1)
    check_lowered(lambda x, i, s: x.scatter(0, i, s), x, i, src)
    check_lowered(lambda x, i: x.scatter(0, i, 3), x, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=dtype_id)
def test_scatter_add_with_duplicates(dtype):
    x = make_tensor((4, 6), dtype)
    i = torch.randint(0, 6, (4, 9))
    src = make_tensor((4, 9), dtype)
    check_lowered(
        lambda x, i, s: x.scatter_add(1, i, s),
        x,
        i,
        src,
        atol=1e-2 if dtype == torch.bfloat16 else None,
        rtol=1e-2 if dtype == torch.bfloat16 else None,
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_id)
@pytest.mark.parametrize("op", ["scatter_add", "index_put", "index_add", "scatter_reduce_sum"])
def test_many_duplicates_combine_in_float32(op, dtype):
    """Hundreds of updates into each element of a 16-bit tensor (perf fuzzer seed 1006: a
    scatter_add of 4096 rows into 7) are summed in float32 and rounded once, as eager's are
    nearly: added one by one in bfloat16, coil's came out 5.5 from the exact sum where eager's
    was 0.25 off."""
    torch.manual_seed(0)
    x = torch.randn(7, 5, 9).to(dtype)
    i = torch.randint(0, 7, (600, 5, 9))
    src = torch.randn(600, 5, 9).to(dtype)
    rows = torch.randint(0, 7, (600,))
    fns = {
        "scatter_add": lambda x, s: x.scatter_add(0, i, s),
        "index_put": lambda x, s: x.index_put((rows,), s, accumulate=True),
        "index_add": lambda x, s: x.index_add(0, rows, s),
        "scatter_reduce_sum": lambda x, s: x.scatter_reduce(0, i, s, "sum"),
    }
    fn = fns[op]
    exact = fn(x.double(), src.double())
    eager_error = (fn(x, src).double() - exact).abs().max()
    out = compile_fn(fn)(x, src)
    assert out.dtype == dtype
    coil_error = (out.double() - exact).abs().max()
    # (float32 sums rounded once: within a 16-bit rounding of the exact sum, at most eager's.)
    assert coil_error <= max(eager_error, exact.abs().max() * 2**-8), (coil_error, eager_error)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=dtype_id)
def test_scatter_reduce(reduce, include_self, dtype):
    x = make_tensor((5, 3), dtype)
    i = torch.randint(0, 5, (7, 3))
    src = make_tensor((7, 3), dtype)
    check_lowered(
        lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=include_self), x, i, src
    )


def test_scatter_amax_propagates_nan():
    x = make_tensor((4, 3))
    src = make_tensor((4, 3))
    src[1, 2] = float("nan")
    i = torch.randint(0, 4, (4, 3))
    check_lowered(lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), x, i, src)


def test_index_add_copy_fill():
    x = make_tensor((6, 4))
    dup = torch.tensor([0, 5, 0, 2])
    check_lowered(lambda x, i, s: x.index_add(0, i, s, alpha=2), x, dup, make_tensor((4, 4)))
    check_lowered(lambda x, i, s: x.index_add(1, i % 4, s), x, dup, make_tensor((6, 4)))
    check_lowered(
        lambda x, i, s: x.index_copy(0, i, s), x, torch.tensor([4, 1]), make_tensor((2, 4))
    )
    check_lowered(lambda x, i: x.index_fill(1, i, -1.5), x, torch.tensor([3, 0]))


def test_non_contiguous_scatter_operands():
    x = make_input("transposed", (5, 6))
    src = make_input("strided", (5, 6))
    i = torch.randint(0, 5, (6, 5)).t()
    check_lowered(lambda x, i, s: x.scatter_add(0, i, s), x, i, src)


# ---- what still falls back ----


def test_boolean_masks_fall_back_and_stay_correct():
    x = make_tensor((5, 4))
    check(lambda x: x[x > 0] * 2, x)  # (Dynamo breaks the graph at the data-dependent shape)
    # Values in mask order (one per selected element): where they go depends on the data.
    m = torch.tensor([True, False, True, False, False])
    check(lambda x, m, v: x.index_put((m,), v), x, m, make_tensor((2, 4)))
    if BACKEND == "coil":
        assert "aten.index_put.default" in [op for r in coil_records() for op in r.fallback_ops]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("accumulate", [False, True])
def test_a_mask_filled_with_one_value_is_pointwise(accumulate, dtype):
    """x[mask] = v where v does not depend on which element it goes to (one number, or a row
    over the dims after the mask's): where(mask, v, x) (Longformer's x[mask] = finfo.max)."""
    x = make_tensor((4, 6, 5), dtype=dtype)
    x[0, 0, 0] = -0.0  # unselected elements keep their bits
    for mask_shape, values in (((4, 6, 5), torch.tensor(7.5)), ((4, 6), torch.tensor([2.0])),
                               ((4, 6), make_tensor((5,))), ((4,), make_tensor((1, 6, 5)))):
        values = values.to(dtype)  # (16-bit sums in float32, rounded once, as eager's)
        mask = torch.rand(mask_shape) > 0.5
        mask.view(-1)[0] = False
        check_lowered(lambda x, m, v: x.index_put((m,), v, accumulate=accumulate) * 2,
                      x, mask, values)


# ---- out-of-bounds indices ----

BAD_CASES = {
    "index": (lambda x, i: x[i], lambda: (make_tensor((5, 3)), torch.tensor([0, 5]))),
    "index_negative": (lambda x, i: x[i], lambda: (make_tensor((5, 3)), torch.tensor([-6]))),
    "index_select": (
        lambda x, i: torch.index_select(x, 0, i),
        lambda: (make_tensor((5, 3)), torch.tensor([-1])),
    ),
    "gather": (
        lambda x, i: torch.gather(x, 1, i),
        lambda: (make_tensor((5, 3)), torch.tensor([[0], [3]])),
    ),
    "embedding": (
        lambda w, i: F.embedding(i, w),
        lambda: (make_tensor((5, 3)), torch.tensor([[1, 9]])),
    ),
    "index_put": (
        lambda x, i: x.index_put((i,), torch.ones(2, 3), accumulate=True),
        lambda: (make_tensor((5, 3)), torch.tensor([1, 7])),
    ),
    "scatter": (
        lambda x, i: x.scatter(0, i, 1.0),
        lambda: (make_tensor((5, 3)), torch.tensor([[0, 5, 1]])),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_out_of_bounds_index_raises(case):
    fn, make = BAD_CASES[case]
    good_inputs = make()
    bad = good_inputs[1]
    good = bad.clamp(0, 0)
    compiled = compile_fn(fn)
    x = good_inputs[0]
    torch.testing.assert_close(compiled(x, good), fn(x, good))
    with pytest.raises((IndexError, RuntimeError)) as eager_error:
        fn(x, bad)
    with pytest.raises((IndexError, RuntimeError)) as error:
        compiled(x, bad)
    if BACKEND == "coil":
        assert "out of bounds" in str(error.value), (str(error.value), str(eager_error.value))
        assert not any(r.eager_fallback for r in coil_records())
    # The compiled function still works after the error.
    torch.testing.assert_close(compiled(x, good), fn(x, good))


# A scatter along an inner dim (cpp_scatter.cpp): each point of the outermost loop owns its
# targets, so its thread updates them in index order without atomics; duplicates within a slice
# combine in eager's order (float sums bit for bit).
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "mean"])
@pytest.mark.parametrize("dim", [1, 2])
def test_scatter_owned_by_the_outer_loop(dim, reduce, dtype):
    x = torch.randn(16, 9, 12).to(dtype)
    src_shape = [16, 9, 12]
    src_shape[dim] = 20  # more sources than targets: duplicates in every slice
    size = x.shape[dim]
    idx = torch.randint(0, size, src_shape)
    src = torch.randn(src_shape).to(dtype)
    f = lambda x, i, s: x.scatter_reduce(dim, i, s, reduce)
    out = torch.compile(f, backend="coil")(x, idx, src)
    ref = f(x, idx, src)
    if reduce == "sum" and dtype == torch.float32:
        assert torch.equal(out, ref)
    else:
        torch.testing.assert_close(out, ref)


# Scatters whose innermost loop moves the target by one element with a term of its own (an
# index_put along dim 0 storing whole rows, an owned scatter-add along dim 1 of contiguous rows)
# run that loop in vector form: a vector store, or a vector read-add-store.
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("accumulate", [False, True])
def test_scatter_rows_in_vector_form(accumulate, dtype, debug):
    x = torch.randn(64, 32, 161).to(dtype)  # (32 x 161 updates per row: enough for a region)
    idx = torch.randperm(64)[:23]  # unique rows: a store's result is defined
    v = torch.randn(23, 32, 161).to(dtype)
    f = lambda x, i, v: x.index_put((i,), v, accumulate=accumulate)
    out = torch.compile(f, backend="coil")(x, idx, v)
    torch.testing.assert_close(out, f(x, idx, v), rtol=0, atol=0)
    from conftest import kernel_text

    kernels = kernel_text(debug).split("// coil: kernel")
    assert any("decision: scatter" in k and "vectorized (at::vec" in k for k in kernels)
