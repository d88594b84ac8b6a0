"""coil.triton_launcher without a GPU: which candidate configs are compiled ahead of the first
call. A fake kernel records what it was asked to compile."""

import json
import os

import pytest
from conftest import requires_coil

pytest.importorskip("triton")

CONFIGS = [{"XBLOCK": 1024, "num_warps": 4}, {"XBLOCK": 2048, "num_warps": 8}]


class FakeKernel:
    src = "def triton_poi_fused_exp_0(in_ptr0, out_ptr0, xnumel, XBLOCK): ..."

    def __init__(self):
        self.compiled = []

    def warmup(self, *args, grid, **cfg):
        self.compiled.append(cfg)
        return self

    def _init_handles(self):
        pass


@pytest.fixture
def launcher(tmp_path):
    coil = requires_coil()
    from coil import triton_launcher

    with coil.config.patch(cache_dir=str(tmp_path)):
        fn = FakeKernel()
        yield triton_launcher.Launcher(fn, "pointwise", CONFIGS, written=[1],
                                       dtypes=["fp32", "fp32"], sizes={"xnumel": 1 << 20})


def _compile(launcher):
    for job in launcher.compile_jobs():
        job()
    return launcher.fn.compiled


def test_every_candidate_is_compiled_before_any_tuning(launcher):
    assert _compile(launcher) == CONFIGS


def test_a_cached_winner_is_the_only_config_compiled(launcher):
    from coil import triton_launcher

    # What _choose writes after benchmarking, for the sizes the launcher declares.
    path = launcher._cache_path(triton_launcher._current_device_name(), 1 << 20, None, None)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"config": CONFIGS[1]}, f)
    assert _compile(launcher) == [CONFIGS[1]]


def test_a_stale_winner_is_ignored(launcher):
    from coil import triton_launcher

    path = launcher._cache_path(triton_launcher._current_device_name(), 1 << 20, None, None)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"config": {"XBLOCK": 64, "num_warps": 1}}, f)  # not a candidate any more
    assert _compile(launcher) == CONFIGS
