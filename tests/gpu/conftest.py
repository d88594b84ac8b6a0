"""Shared by the GPU tests: every test starts from a fresh coil (no records, Dynamo reset), a
fixed seed and its own cache directory, so tuned configs and built kernels never leak between
tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _fresh(tmp_path):
    import coil

    torch.manual_seed(0)
    coil.reset()
    with coil.config.patch(cache_dir=str(tmp_path / "cache")):
        yield
    coil.reset()
