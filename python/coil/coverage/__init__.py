"""OpInfo coverage: every op of PyTorch's OpInfo database, compiled and compared with eager.

    python -m coil.coverage --out docs/coverage.md  # coil and Inductor, both modes (the report)
    python -m coil.coverage --backends coil --dtypes float32 --ops add,sum -v
    python -m coil.coverage --backends coil --modes normal \\
        --write-expected tests/python/opinfo_expected.txt

A case is one (op, dtype) on CPU: the op's first sample input (every sample for reductions and
indexing ops), compiled with torch.compile(fn, backend=..., fullgraph=True, dynamic=False) and
compared with eager under the OpInfo's tolerances (a bfloat16 result that differs from eager's
passes when it is no further from the op computed in float64 than eager's). A case passes only
when its graph went through
the backend's own compiler: coil running a graph eagerly (its CoilWarning path) is a failure.
Cases where eager itself raises or the op has no sample for the dtype are skipped by construction
(not counted). Random ops are compared by shape, dtype and finiteness, ops returning uninitialized
memory (empty*) by shape and dtype.

Two modes: "normal" (ATen fallback ops allowed) and "lowered" (a graph that needs one fails:
coil's allow_fallback=False; for Inductor, creating a FallbackKernel). A case passing in both went
through lowering; passing only in the normal mode, through a fallback.

Files: cases.py (cases, samples, comparison), runners.py (one group of cases as one graph, per
backend), sweep.py (batching and splitting), report.py (expected-failure file, Markdown), cli.py.
Tests: tests/python/test_opinfo.py.
"""

from coil.coverage.cases import DTYPES, dtype_name, op_db, op_name
from coil.coverage.report import read_expected, write_expected
from coil.coverage.sweep import Outcome, SweepResult, sweep

__all__ = [
    "DTYPES",
    "Outcome",
    "SweepResult",
    "dtype_name",
    "op_db",
    "op_name",
    "read_expected",
    "sweep",
    "write_expected",
]
