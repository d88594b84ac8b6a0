"""Correctness: views (view, reshape, permute, transpose, t, expand, squeeze, unsqueeze, slicing,
select, narrow, as_strided, flatten, unflatten, contiguous) and cat, on inputs and on
intermediates, compared with eager including output strides."""

import pytest
import torch
from conftest import check, dtype_id, make_input, make_tensor

F32, F64, I64, BOOL, BF16 = torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16

# Views of a (3, 4, 8) tensor. Each is checked on the input itself (an alias of the input) and
# on an intermediate ((x * 2 + 1) then the view), and composed with a pointwise op.
VIEW_FNS = {
    "view": lambda x: x.view(12, 8),
    "view_infer": lambda x: x.view(-1, 4, 2),
    "view_flat": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(4, 24),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_neg": lambda x: x.transpose(-1, -2),
    "expand": lambda x: x[:, :1].expand(3, 5, 8),
    "expand_new_dim": lambda x: x[0].expand(2, 4, 8),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "unsqueeze_last": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x[:, 1:2].squeeze(1),
    "squeeze_all": lambda x: x[:1, :, :1].squeeze(),
    "slice_step": lambda x: x[:, ::2, 1::3],
    "slice_neg": lambda x: x[-2:, :-1, -5:-1],
    "slice_neg_step": lambda x: x[..., -7::2],
    "select": lambda x: x[1],
    "select_neg": lambda x: x[:, -1],
    "select_mid": lambda x: x.select(2, 3),
    "narrow": lambda x: x.narrow(2, 2, 4),
    "narrow_dim0": lambda x: x.narrow(0, 1, 2),
    "flatten": lambda x: x.flatten(),
    "flatten_range": lambda x: x.flatten(1),
    "unflatten": lambda x: x.unflatten(2, (2, 4)),
    "unflatten_infer": lambda x: x.unflatten(-1, (-1, 2)),
    "index_none": lambda x: x[None, :, None, 1:],
    "t_of_select": lambda x: x[0].t(),
    "diagonal": lambda x: x.diagonal(0, 1, 2),
    "unbind": lambda x: x.unbind(1),
    "split": lambda x: x.split(3, dim=-1),
    "chunk": lambda x: x.chunk(2, dim=1),
}


@pytest.mark.parametrize("name", list(VIEW_FNS))
def test_view_of_input(name):
    check(VIEW_FNS[name], make_tensor((3, 4, 8)), check_strides=True)


@pytest.mark.parametrize("name", list(VIEW_FNS))
def test_view_of_intermediate(name):
    f = VIEW_FNS[name]
    check(lambda x: f(x * 2 + 1), make_tensor((3, 4, 8)), check_strides=True)


@pytest.mark.parametrize(
    "name",
    [
        "view",
        "permute",
        "expand",
        "slice_step",
        "slice_neg",
        "select_neg",
        "narrow",
        "unflatten",
        "diagonal",
        "index_none",
    ],
)
def test_pointwise_on_view(name):
    f = VIEW_FNS[name]
    check(
        lambda x, y: (f(x).exp() * 2, f(x) + f(y).sigmoid()),
        make_tensor((3, 4, 8)),
        make_tensor((3, 4, 8)),
    )


def test_t():
    x = make_tensor((4, 8))
    check(lambda t: t.t(), x, check_strides=True)
    check(lambda t: (t.t() + 1).t(), x, check_strides=True)
    check(lambda t: t.t() @ t, x)
    check(lambda t: t[0].t(), x)  # t() of a 1-d tensor is the identity view


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset", "broadcast"])
def test_reshape_of_noncontiguous(kind):
    x = make_input(kind, (4, 8))
    check(lambda t: t.reshape(-1), x, check_strides=True)
    check(lambda t: t.reshape(2, 16) * 3, x, check_strides=True)
    check(lambda t: t.flatten() + t.contiguous().view(-1), x)


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset", "broadcast", "size1"])
def test_contiguous(kind):
    x = make_input(kind, (4, 8))
    check(lambda t: t.contiguous(), x, check_strides=True)
    check(lambda t: (t + 1).contiguous(), x, check_strides=True)
    check(lambda t: t.transpose(0, -1).contiguous().view(-1), x, check_strides=True)


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset", "broadcast"])
def test_views_of_noncontiguous_inputs(kind):
    x = make_input(kind, (4, 8))
    check(
        lambda t: (t.t(), t[1:, ::3], t.unsqueeze(0), t[:, -1], t.narrow(1, 2, 3)),
        x,
        check_strides=True,
    )
    check(lambda t: t.t()[::2] * t[:, ::2].sum(0).unsqueeze(-1), x)


AS_STRIDED = {
    "transpose_like": lambda x: x.as_strided((8, 4), (1, 8)),
    "overlapping_windows": lambda x: x.as_strided((5, 4), (4, 1)),
    "with_offset": lambda x: x.as_strided((3, 3), (8, 2), 5),
    "broadcast_stride0": lambda x: x.as_strided((4, 3), (0, 1)),
    "intermediate": lambda x: (x * 2).as_strided((4, 4), (8, 2), 1),
    "intermediate_plus": lambda x: (x + 1).as_strided((2, 8), (16, 1)) - 1,
}


@pytest.mark.parametrize("name", list(AS_STRIDED))
def test_as_strided(name):
    check(AS_STRIDED[name], make_tensor((4, 8)), check_strides=True)


@pytest.mark.parametrize("dtype", [F64, I64, BOOL, BF16], ids=dtype_id)
def test_views_dtypes(dtype):
    x = make_tensor((3, 4, 8), dtype)
    check(
        lambda t: (t.permute(1, 2, 0).reshape(4, -1), t[:, ::2, -3:], t.select(1, 2).t()),
        x,
        check_strides=True,
    )


def test_view_chain():
    x = make_tensor((2, 3, 4, 5))
    check(
        lambda t: (
            t.permute(3, 1, 0, 2).reshape(5, 3, 8)[:, ::2].transpose(0, 1).flatten(1).unsqueeze(0)
            * 2
        ),
        x,
    )
    check(lambda t: t.view(6, 20).t()[3:17:3].unflatten(1, (3, 2)).squeeze(), x)


def test_size1_views():
    x = make_tensor((1, 4, 1, 8))
    check(
        lambda t: (t.squeeze(0), t.squeeze(2), t.squeeze((0, 2)), t.expand(3, 4, 5, 8)),
        x,
        check_strides=True,
    )


# --------------------------------------------------------------------------------------------
# cat
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_three_inputs(dim):
    shapes = {
        0: [(2, 5, 7), (3, 5, 7), (1, 5, 7)],
        1: [(3, 1, 7), (3, 4, 7), (3, 2, 7)],
        -1: [(3, 5, 2), (3, 5, 7), (3, 5, 3)],
    }[dim]
    ins = [make_tensor(s) for s in shapes]
    check(lambda a, b, c: torch.cat([a, b, c], dim=dim), *ins, check_strides=True)
    check(lambda a, b, c: torch.cat([a * 2, b.exp(), c + 1], dim=dim).relu(), *ins)


def test_cat_promotes_dtypes():
    a, b, c = make_tensor((2, 4), I64), make_tensor((3, 4), F32), make_tensor((1, 4), BF16)
    check(lambda x, y: torch.cat([x, y]), a, b)
    check(lambda x, z: torch.cat([x, z]), a, c)
    check(lambda y, z: torch.cat([y, z], 0), b, c)
    check(lambda x, y, z: torch.cat([x, y, z], 0), a, b, c)
    d = make_tensor((2, 4), BOOL)
    check(lambda x, w: torch.cat([w, x]), a, d)
    check(lambda y, w: torch.cat([y, w.to(F64)]), b, d)


@pytest.mark.parametrize("kind", ["transposed", "strided", "offset", "broadcast"])
def test_cat_noncontiguous_inputs(kind):
    a, b = make_input(kind, (4, 8)), make_input(kind, (4, 8))
    check(lambda x, y: torch.cat([x, y, x], dim=1), a, b)
    check(lambda x, y: torch.cat([x, y.t().t()], dim=0), a, b)


def test_cat_with_empty_and_many_inputs():
    x = make_tensor((4, 8))
    check(lambda t: torch.cat([t, t[:0], t * 2], 0), x)
    check(lambda t: torch.cat([t[i : i + 1] * i for i in range(4)] + [t.t()[:, :1].t()], 0), x)
    check(lambda t: torch.cat(list(t.unbind(0)) * 3), x)


def test_cat_then_reduce_and_stack():
    x, y = make_tensor((4, 8)), make_tensor((4, 8))
    check(lambda a, b: torch.cat([a, b], -1).sum(-1), x, y)
    check(lambda a, b: torch.stack([a, b, a + b], dim=1), x, y, check_strides=True)
    check(lambda a, b: torch.stack([a.t(), b.t()]), x, y)
