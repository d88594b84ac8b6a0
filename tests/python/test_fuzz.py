"""The differential fuzzer on a fixed budget: 120 random programs (fixed seeds, so a failure here
is reproduced by `python -m coil.fuzz --seed N --count 1`)."""

import pytest
from conftest import requires_coil

FIRST_SEED = 424242
COUNT = 120


def test_generator_is_deterministic():
    from coil.fuzz import generate

    a, xa = generate(FIRST_SEED)
    b, xb = generate(FIRST_SEED)
    assert a.describe() == b.describe()
    assert all((x == y).all() or (x.isnan() & y.isnan()).all() for x, y in zip(xa, xb))


@pytest.mark.parametrize("block", range(4))
def test_random_programs_match_eager(block, tmp_path):
    requires_coil()
    from coil.fuzz import check_seed

    per_block = COUNT // 4
    failures = []
    for seed in range(FIRST_SEED + block * per_block, FIRST_SEED + (block + 1) * per_block):
        result = check_seed(seed, str(tmp_path))
        if not result.ok:
            failures.append(f"seed {seed} (graph in {result.folder}):\n{result.message}")
    print(
        f"fuzz seeds {FIRST_SEED + block * per_block}..{FIRST_SEED + (block + 1) * per_block - 1}"
    )
    assert not failures, "\n\n".join(failures)
