"""Memory and value checks of coil's Triton kernels under Triton's interpreter: every access
checked against the launch's tensors (coil.triton_interp_check), tuning launches on copies of
padded buffers, and values where Triton's semantics differ from eager's (zero signs, integer
constants, scans of a constant). Run like test_triton_interpret.py: in a child process with
TRITON_INTERPRET=1 (test_in_interpreter_process), or directly when it is set."""

import os

import pytest
import torch

from conftest import BACKEND, make_tensor, requires_coil
from test_triton_interpret import (  # noqa: F401 (_triton_interpreter: the autouse fixture)
    _triton_interpreter,
    check_triton,
    run_in_interpreter,
)

pytest.importorskip("triton")

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="tests coil's Triton kernels")

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


@pytest.mark.skipif(INTERPRETING, reason="this process already runs the tests themselves")
def test_in_interpreter_process():
    run_in_interpreter(__file__, timeout=900)


def test_out_of_bounds_accesses_are_caught():
    # The checker itself (coil.triton_interp_check): a load one element past its tensor fails,
    # whatever the data there; the same kernel within bounds runs.
    import triton
    import triton.language as tl

    from coil.triton_interp_check import OutOfBounds

    @triton.jit
    def copy(x, y, n, B: tl.constexpr):
        i = tl.arange(0, B)
        tl.store(y + i, tl.load(x + i, i < n + 1), i < n)

    x, y = torch.randn(10), torch.empty(10)
    with pytest.raises(Exception, match="copy: load of 1 lane") as e:
        copy[(1,)](x, y, 10, B=16)
    assert isinstance(e.value.__cause__, OutOfBounds) or "OutOfBounds" in str(e.value)
    copy[(1,)](x, y, 9, B=16)
    assert torch.equal(y[:9], x[:9])


def test_scans_of_a_constant():
    # timm's edgenext: (~zeros(B, H, W, bool)).cumsum(1, dtype=float32), positions counted along
    # H and W. The scanned value is the same in every lane (a one-lane block, tl.full([1], ...))
    # and was broadcast with tl.broadcast_to, which refuses a rank change: a CompilationError at
    # the first launch (the graph ran eagerly). Row (persistent and looped) and column forms.
    def f(x):
        m = torch.zeros(x.shape[0], x.shape[1], x.shape[2], dtype=torch.bool)
        return (x + (~m).cumsum(1, dtype=torch.float32) + (~m).cumsum(2, dtype=torch.float32),
                torch.ones_like(x[0]).cumsum(0))

    check_triton(f, make_tensor((2, 40, 40)))
    check_triton(lambda t: torch.ones_like(t).cumsum(1) * t, make_tensor((2, 1100)))


def test_integer_constants_take_their_dtype():
    # eager converts a scalar operand to the tensor's dtype as C++ does: clamp(uint8, -10, 10)
    # compares with 246 (fuzzer --triton-check seeds 500204, 500243: Triton compared with -10).
    x = torch.randint(0, 8, (3, 8), dtype=torch.uint8)
    check_triton(lambda t: torch.sin(t.clamp(-10, 10)), x)
    check_triton(lambda t: (t.to(torch.int8).clamp(-10, 10) * 3, t.clamp(max=5) + 250), x)


def test_negated_zeros_keep_their_sign():
    # Triton's unary minus is 0 - x: -(0.0) came out +0.0 where eager gives -0.0 (fuzzer
    # --triton-check seed 501212). Scalar loads compared and combined (seed 501133: an
    # interpreter typing quirk, coil.triton_launcher._interpreter_bool_types).
    x = torch.tensor([0.0, -0.0, 1.5, float("inf"), float("nan"), -2.0])
    out = check_triton(lambda t: (-t).flip(0) * 1, x)
    ref = (-x).flip(0)
    real = ~ref.isnan()  # (a NaN's sign is not part of eager's contract)
    assert torch.equal(torch.signbit(out)[real], torch.signbit(ref)[real])
    m = torch.tensor([0.5, -1.0])
    check_triton(lambda a, b: ((a[0] > 0) | (a[1] > 0)) & (b > 0), m, make_tensor((9,)))
    # relu(-0.0) and floor_divide(-0.0, y) are -0.0 in eager, as in coil's C++ kernels (seed
    # 503583: tl.maximum(0.0, -0.0) is +0.0; a zero quotient took no sign)
    z = torch.tensor([-0.0, 0.0, -0.3, 0.3, -2.5, float("nan")])
    for fn in (lambda t: torch.relu(t * 1), lambda t: torch.floor_divide(t, t.abs() + 1),
               lambda t: torch.minimum(t, torch.zeros_like(t)),
               lambda t: torch.maximum(t, -t) + torch.minimum(torch.zeros_like(t), t)):
        out, ref = check_triton(fn, z), fn(z)
        real = ~ref.isnan()
        assert torch.equal(torch.signbit(out)[real], torch.signbit(ref)[real]), (out, ref)


def test_tuning_launches_stay_inside_padded_buffers():
    # On a GPU the first launch of a kernel with several configs times each one on copies of the
    # buffers it writes. tensor.clone() made a padded buffer (rows of 17 in rows of 20, as GEMM
    # padding lays out attention's operands) dense, and the kernel, indexing with the padded
    # strides, wrote past the copy's end: timm's cait_xxs24_224, efficientvit_b0 and halonet_h1
    # faulted on an H100 (2026-12-05). Here the tuning launch runs under the interpreter's
    # address checks (coil.triton_interp_check, tuning=True), with every candidate config.
    from coil import triton_interp_check
    from coil.triton_launcher import scratch_args

    coil = requires_coil()

    def f(a, b):
        return torch.relu(a) @ (torch.relu(b) * 2).transpose(1, 2)

    a, b = make_tensor((4, 49, 17)), make_tensor((4, 49, 17))
    try:
        for config in range(3):
            triton_interp_check.enable(config=config, tuning=True)
            coil.reset()
            torch._dynamo.reset()
            with coil.config.patch(gemm_padding="on"):
                check_triton(f, a, b, atol=1e-5, rtol=1e-5)
    finally:
        triton_interp_check.enable(tuning=False)
    # the copies keep the strides and cover the whole extent they reach (not more: a view of
    # one slot of a large storage copies the slot)
    padded = torch.empty_strided((4, 49, 17), (1000, 20, 1)).normal_()
    view = torch.empty(50000)[7:].as_strided((4, 49, 17), (1000, 20, 1)).normal_()
    for t in (padded, view):
        (c,) = scratch_args([t], [0])
        assert c.stride() == t.stride() and c.data_ptr() != t.data_ptr() and torch.equal(c, t)
        room = c.untyped_storage().nbytes() // 4 - c.storage_offset()
        assert 1 + 3 * 1000 + 48 * 20 + 16 <= room < 5000
