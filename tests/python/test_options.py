"""torch.compile's mode= and options= under coil: every coil option can be set per compiled
function, for that function only (its backward graphs included, which compile later); unknown
names and values are errors that name what is valid; each mode means something documented
(config.MODES), and none is ignored silently."""

import logging
import os
import subprocess
import sys
import warnings

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's own options")

import coil  # noqa: E402  (after the skip: the module exists only under coil)


def _mm(a, b):
    return (a @ b).relu() + 1


def _inputs():
    return torch.randn(8, 12), torch.randn(12, 6)


def test_options_apply_to_that_function_only(tmp_path):
    reset_compiler()
    a, b = _inputs()
    saved = coil.config.options
    with_debug = torch.compile(_mm, backend="coil", options={"debug_dir": str(tmp_path)})
    torch.testing.assert_close(with_debug(a, b), _mm(a, b))
    plain = torch.compile(lambda x: x.sin() * 2, backend="coil")
    plain(a)
    assert coil.config.options is saved, "options= must not change the global options"
    first, second = coil_records()
    assert first.debug_dir and first.debug_dir.startswith(str(tmp_path))
    assert os.path.exists(os.path.join(first.debug_dir, "output_code.py"))
    assert first.options.debug_dir == str(tmp_path)
    assert second.debug_dir is None and second.options.debug_dir == saved.debug_dir


def test_options_reach_the_cpp_compile(tmp_path):
    # gemm_padding="on" pads a large product's odd sizes on the CPU too: the extern decision is
    # recorded in the schedule only when the C++ side received the option.
    reset_compiler()
    a, b = torch.randn(1024, 513), torch.randn(513, 1023)
    ref = _mm(a, b)
    for value in ("on", "off"):
        folder = tmp_path / value
        fn = torch.compile(_mm, backend="coil", options={"gemm_padding": value,
                                                         "debug_dir": str(folder)})
        torch.testing.assert_close(fn(a, b), ref, atol=1e-3, rtol=1e-4)
    on, off = coil_records()
    code_on = open(os.path.join(on.debug_dir, "output_code.py")).read()
    code_off = open(os.path.join(off.debug_dir, "output_code.py")).read()
    assert on.options.gemm_padding == "on" and off.options.gemm_padding == "off"
    assert code_on != code_off


def test_same_function_two_option_sets_compile_separately(tmp_path):
    # Dynamo keys its cache on the backend with its mode/options: each compiled function gets
    # graphs made under its own options, in either order of calls.
    reset_compiler()
    a, b = _inputs()
    strict = torch.compile(_mm, backend="coil", options={"allow_fallback": False})
    loose = torch.compile(_mm, backend="coil", options={"debug_dir": str(tmp_path)})
    for fn in (strict, loose, strict, loose):
        torch.testing.assert_close(fn(a, b), _mm(a, b))
    records = coil_records()
    assert [r.options.allow_fallback for r in records] == [False, True]
    assert records[1].debug_dir.startswith(str(tmp_path))


def test_allow_fallback_option_runs_that_graph_eagerly():
    reset_compiler()
    x = torch.randn(64)
    fn = torch.compile(lambda t: torch.sort(t).values * 2, backend="coil",
                       options={"allow_fallback": False})
    with pytest.warns(coil.CoilWarning, match="allow_fallback=False"):
        torch.testing.assert_close(fn(x), torch.sort(x).values * 2)
    (record,) = coil_records()
    assert record.eager_fallback


def test_backward_compiles_under_the_functions_options(tmp_path):
    reset_compiler()
    w = torch.randn(12, 6, requires_grad=True)
    fn = torch.compile(lambda x: (x @ w).tanh().sum(), backend="coil",
                       options={"debug_dir": str(tmp_path), "compile_backward": True})
    fn(torch.randn(8, 12)).backward()  # the backward graph compiles here, after torch.compile
    kinds = {r.kind: r for r in coil_records()}
    assert set(kinds) == {"forward", "backward"}
    assert kinds["backward"].debug_dir.startswith(str(tmp_path))

    reset_compiler()
    w.grad = None
    fn = torch.compile(lambda x: (x @ w).tanh().sum(), backend="coil",
                       options={"compile_backward": False})
    fn(torch.randn(8, 12)).backward()
    assert [r.kind for r in coil_records()] == ["forward"]
    assert w.grad is not None


@pytest.mark.parametrize(
    "options,match",
    [
        ({"gemm_pad": "on"}, r"unknown option\(s\) 'gemm_pad'; valid options: allow_fallback"),
        ({"channels_last": "sometimes"}, r"channels_last='sometimes'.*expected one of"),
        ({"cpu_backend": "cuda"}, r"cpu_backend='cuda'"),
        ({"compile_backward": "yes"}, r"compile_backward='yes' must be bool"),
        ({"triton.cudagraphs": True}, r"unknown option\(s\) 'triton.cudagraphs'"),
    ],
    ids=["unknown", "bad-choice", "bad-backend", "bad-type", "inductor-name"],
)
def test_bad_options_fail_at_torch_compile(options, match):
    reset_compiler()
    with pytest.raises(ValueError, match=match):
        torch.compile(_mm, backend="coil", options=options)  # not at the first call
    with pytest.raises(ValueError, match=match):  # fullgraph=True goes another way into Dynamo
        torch.compile(_mm, backend="coil", options=options, fullgraph=True)
    with pytest.raises(ValueError, match=match):  # the backend passed as a function
        torch.compile(_mm, backend=coil.coil_backend, options=options)
    assert not coil_records()


def test_bad_mode_fails_at_torch_compile():
    with pytest.raises(ValueError, match="unknown torch.compile mode 'fast'"):
        torch.compile(_mm, backend="coil", mode="fast")


def test_options_fail_at_torch_compile_without_import_coil():
    # The first torch.compile of a process that never imported coil imports it through the
    # backend's entry point, inside torch.compile: the check must already apply to that call.
    script = (
        "import sys, torch\n"
        "try:\n"
        "    torch.compile(lambda x: x + 1, backend='coil', options={'gemm_pad': 'on'})\n"
        "except ValueError as e:\n"
        "    print('raised:', e)\n"
        "assert 'coil' in sys.modules  # (imported by the lookup, not by this script)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}  # (+coil imports coil)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=env, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "raised: coil (torch.compile options=): unknown option(s) 'gemm_pad'" in out.stdout, (
        out.stdout + out.stderr[-3000:])


def test_other_backends_options_are_not_checked_by_coil():
    torch.compile(_mm, backend="eager", options={"gemm_pad": "on"})  # (not coil's to judge)


def test_options_error_lists_every_option():
    with pytest.raises(ValueError) as info:
        coil.config.for_compile(None, {"nope": 1})
    for name in ("debug_dir", "gemm_padding", "fallback_random", "partitioner", "cudagraphs"):
        assert name in str(info.value)


def test_logs_option_takes_names(capfd):
    reset_compiler()
    fn = torch.compile(lambda t: t.cos() + 1, backend="coil", options={"logs": "output_code"})
    fn(torch.randn(5))
    assert "output_code.py" in capfd.readouterr().err
    assert coil_records()[0].options.logs == frozenset({"output_code"})


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cudagraph_modes_warn_and_are_not_ignored(mode):
    reset_compiler()
    handler = _Records()
    logger = logging.getLogger("torch._dynamo.backends.common")
    logger.addHandler(handler)
    try:
        a, b = _inputs()
        fn = torch.compile(_mm, backend="coil", mode=mode)
        # on the CPU: compiled, and run without CUDA graphs, saying so
        with pytest.warns(coil.CoilWarning, match="runs without CUDA graphs: graph on the CPU"):
            out = fn(a, b)
        torch.testing.assert_close(out, _mm(a, b))
    finally:
        logger.removeHandler(handler)
    assert not [m for m in handler.messages if "ignoring extra kwargs" in m]
    (record,) = coil_records()
    assert record.options.cudagraphs and not record.eager_fallback
    assert not record.cudagraph and "CPU" in record.cudagraph_reason


@pytest.mark.parametrize("mode", ["default", "max-autotune-no-cudagraphs"])
def test_other_modes_compile_quietly(mode):
    reset_compiler()
    a, b = _inputs()
    fn = torch.compile(_mm, backend="coil", mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error", coil.CoilWarning)
        torch.testing.assert_close(fn(a, b), _mm(a, b))
    (record,) = coil_records()
    assert not record.options.cudagraphs


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="unknown torch.compile mode 'fast'"):
        coil.config.for_compile("fast", None)


def test_patch_checks_like_options():
    with pytest.raises(ValueError, match="unknown option"):
        with coil.config.patch(no_such_option=1):
            pass
    with pytest.raises(ValueError, match="partitioner='greedy'"):
        with coil.config.patch(partitioner="greedy"):
            pass
