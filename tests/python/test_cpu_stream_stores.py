"""Streaming stores in C++ pointwise kernels (codegen/cpp: Emitter::plan_stream_stores): whole,
aligned float32/float64 vectors are written around the caches (coil_vstream), every other store
is an ordinary one, and each thread fences after each row, tile or chunk it streamed. Kernels
writing 32 MiB or more stream; cpp_vectorize="on" streams small kernels too, which is how most
of these tests reach the path. Every case is compared with eager, including rows that start on
unaligned addresses and tails shorter than a vector."""

import pytest
import torch
from conftest import BACKEND, check, kernel_text, make_tensor

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's C++ kernels")

STREAMED = "decision: streaming stores"


@pytest.fixture
def debug(monkeypatch, tmp_path):
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    monkeypatch.setattr(coil.config.options, "cpp_vectorize", "on")
    return tmp_path


@pytest.mark.parametrize("shape", [(37,), (1000,), (5, 37), (64, 1024), (3, 4, 9)],
                         ids=["flat_tail", "flat", "rows_tail", "rows", "3d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_pointwise_kernels_stream_their_stores(shape, dtype, debug):
    x, y = make_tensor(shape, dtype), make_tensor(shape, dtype)
    check(lambda x, y: (x * y + 1).exp() - x, x, y)
    text = kernel_text(debug)
    assert STREAMED in text and "coil_vstream(" in text and "coil_stream_fence();" in text, text


def test_a_flat_kernel_fences_after_each_chunk(debug):
    x = make_tensor((200003,))
    check(lambda x: x * 3 + 1, x)
    text = kernel_text(debug)
    assert "x0c += 65536" in text and "a fence after each chunk" in text, text


def test_transposed_tiles_stream_and_fence_per_tile(debug):
    x, y = make_tensor((300, 260)), make_tensor((260, 300))
    check(lambda x, y: x.t() + y, x, y, check_strides=True)
    text = kernel_text(debug)
    assert "a fence after each tile" in text, text


def test_several_outputs_and_sixteen_bit_ones(debug):
    # bf16 outputs are stored through at::vec's conversion (not streamed); float32 ones are.
    x = make_tensor((16, 40))
    check(lambda x: (x.exp(), (x * 2).to(torch.bfloat16), x - 1), x)
    text = kernel_text(debug)
    assert "coil_vstream(" in text and "coil_vstore_half<c10::BFloat16>(" in text, text


def test_rows_that_start_unaligned_fall_back_to_ordinary_stores(debug):
    # Rows of 37 float32 start 148 bytes apart: most rows' vectors are not 32-byte aligned, and
    # a transposed output's rows of 13 likewise.
    x = make_tensor((9, 37))
    check(lambda x: x.exp() * 2, x)
    check(lambda x: (x.t() * 3).contiguous()[:, :13] + 1, make_tensor((13, 40)))
    assert STREAMED in kernel_text(debug)


def test_in_place_output_over_its_own_input(debug):
    # The output takes the storage of a dead intermediate it reads in the same iteration.
    x = make_tensor((8, 1024))
    check(lambda x: ((x * 2).tanh() + 1) * x, x)


def test_symbolic_sizes(debug):
    for n in (33, 1000, 4099):
        check(lambda x: x.exp() * 2 - x, make_tensor((n, 24)), dynamic=True)
    assert STREAMED in kernel_text(debug)


def test_small_kernels_do_not_stream_by_default(monkeypatch, tmp_path):
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    check(lambda x: x * 2 + 1, make_tensor((256, 512)))
    assert STREAMED not in kernel_text(tmp_path)


def test_large_kernels_stream_by_default(monkeypatch, tmp_path):
    # 8M float32 elements written: 32 MiB.
    import coil

    monkeypatch.setattr(coil.config.options, "debug_dir", str(tmp_path))
    x = torch.randn(2048, 4096)
    out = torch.compile(lambda x: x * 2 + 1, backend="coil")(x)
    assert torch.equal(out, x * 2 + 1)
    text = kernel_text(tmp_path)
    assert STREAMED in text and "at least 32 MiB written" in text, text
