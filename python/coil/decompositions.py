"""coil's own decompositions, for ops coil asks AOTAutograd to decompose
(coil::lower::extra_decompositions, where the reasons are) and for which torch's decomposition
is not the one coil wants.

max_pool2d_with_indices: the values and each window's winning slot as int8
(coil.max_pool2d_offsets, which coil lowers into its pooling kernel), and the indices computed
back from the slots by pointwise ops. The min-cut partitioner then saves the 1-byte slots for the
backward and recomputes the 8-byte indices inside it (ResNet's first pool: 51 MB of int64 indices
at batch 32, saved by coil where Inductor, which does the same, saves 6.4 MB)."""

from __future__ import annotations

import torch

aten = torch.ops.aten


def _pair(v) -> list:
    v = [v] if isinstance(v, int) else list(v)
    return v * 2 if len(v) == 1 else v


def max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    p, d = _pair(padding), _pair(dilation)
    if k[0] * k[1] > torch.iinfo(torch.int8).max:
        return NotImplemented
    values, offsets = torch.ops.coil.max_pool2d_offsets(x, k, s, p, d, ceil_mode)
    return values, offsets_to_indices(offsets, k, x.shape[-1], s, p, d)


def offsets_to_indices(offsets, k, width, s, p, d):
    """The flat input index (h * W + w) of each window's slot kh * KW + kw."""
    slot = offsets.to(torch.int64)
    oh = torch.arange(offsets.shape[-2], device=offsets.device).view(-1, 1)
    ow = torch.arange(offsets.shape[-1], device=offsets.device).view(1, -1)
    h = oh * s[0] - p[0] + torch.div(slot, k[1], rounding_mode="floor") * d[0]
    w = ow * s[1] - p[1] + slot % k[1] * d[1]
    return h * width + w


def max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    """Without x, which the backward reads for its sizes and layout only: the partitioner would
    otherwise save the pool's input (ResNet's first ReLU) for it."""
    k = _pair(kernel_size)
    s = _pair(stride) if stride else k
    return torch.ops.coil.max_pool2d_grad(grad, indices, x.shape, x.stride(), k, s,
                                          _pair(padding), _pair(dilation), ceil_mode)


OWN = {
    aten.max_pool2d_with_indices.default: max_pool2d_with_indices,
    aten.max_pool2d_with_indices_backward.default: max_pool2d_with_indices_backward,
}


def where_it_applies(name: str, fn):
    """fn, which leaves the op whole (NotImplemented) for inputs where coil decides it stays whole
    (coil::lower::decomposes_here: by device and dtype)."""
    from coil import _C

    def decomposed(x, *args, **kwargs):
        low = x.dtype in (torch.bfloat16, torch.float16)
        if not _C.decomposes_here(name, x.device.type, low):
            return NotImplemented
        return fn(x, *args, **kwargs)

    decomposed.__name__ = getattr(fn, "__name__", "decomposed")
    return decomposed
