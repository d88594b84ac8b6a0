"""The cases of the OpInfo sweep: which (op, dtype) pairs, their sample inputs with eager's results,
and how a compiled result is compared with eager's."""

from __future__ import annotations

import dataclasses
import math
import random
import re
import warnings

import torch
from torch.utils import _pytree as pytree

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16)

# Ops compiled with every sample input (the others: the first sample only).
INDEXING_OPS = frozenset(
    {
        "__getitem__",
        "_unsafe_masked_index",
        "_unsafe_masked_index_put_accumulate",
        "gather",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "index_reduce",
        "index_select",
        "masked_fill",
        "masked_scatter",
        "masked_select",
        "nn.functional.embedding",
        "nn.functional.embedding_bag",
        "put",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "take",
        "take_along_dim",
    }
)

# Ops whose values are random: compared by shape, dtype and finiteness only (their OpInfos call
# the op through wrapper_set_seed, which Dynamo cannot trace and the sweep replaces).
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "cauchy",
        "exponential",
        "geometric",
        "log_normal",
        "multinomial",
        "nn.functional.alpha_dropout",
        "nn.functional.dropout",
        "nn.functional.dropout2d",
        "nn.functional.dropout3d",
        "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.rrelu",
        "normal",
        "normal.in_place",
        "normal.number_mean",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "uniform",
    }
)

# Ops returning uninitialized memory: compared by shape and dtype only.
UNINITIALIZED_OPS = frozenset(
    {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}
)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def op_name(op) -> str:
    """The OpInfo's name with its variant: "max.reduction_with_dim"."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_db() -> list:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return list(db)


# ------------------------------------------------------------------------------------------------
# Cases and their samples
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Sample:
    call: tuple  # (input, args, kwargs); every run gets clones of its tensors
    expected: object  # eager's result

    def fresh(self) -> tuple:
        return _clone_tree(self.call)


@dataclasses.dataclass
class Case:
    name: str
    dtype: torch.dtype
    op: object  # the OpInfo
    samples: list = dataclasses.field(default_factory=list)
    atol: float = 0.0  # the OpInfo's tolerance overrides for this dtype (0: none)
    rtol: float = 0.0

    @property
    def key(self) -> tuple:
        return (self.name, dtype_name(self.dtype))


def _noop_set_seed(op, *args, **kwargs):
    # OpInfos of random ops call them through wrapper_set_seed (freeze the RNG, seed 42), which
    # Dynamo cannot trace; their values are not compared, so the plain call is enough.
    return op(*args, **kwargs)


def patch_testing_harness() -> None:
    import torch.testing._internal.common_methods_invocations as cmi

    cmi.wrapper_set_seed = _noop_set_seed


def case_dtypes(op, dtypes=DTYPES) -> list:
    supported = op.supported_dtypes("cpu")
    return [d for d in dtypes if d in supported]


def _tolerance_overrides(op, dtype: torch.dtype) -> tuple[float, float]:
    """The OpInfo's own tolerances for the dtype: the largest of its toleranceOverride /
    precisionOverride decorators that apply on CPU; (0, 0) when it has none."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    atol = rtol = 0.0
    for info in getattr(op, "decorators", ()) or ():
        decorators = [info]
        if isinstance(info, DecorateInfo):
            if info.device_type not in (None, "cpu") or not info.active_if:
                continue
            if info.dtypes is not None and dtype not in info.dtypes:
                continue
            decorators = info.decorators
        for dec in decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                atol = max(atol, dec.d[dtype].atol)
                rtol = max(rtol, dec.d[dtype].rtol)
            elif isinstance(dec, precisionOverride) and dtype in dec.d:
                atol = max(atol, dec.d[dtype])
    return atol, rtol


def _clone_tree(x):
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def prepare(op, dtype: torch.dtype) -> Case | None:
    """The case's samples with eager's results; None when no sample runs eagerly."""
    name = op_name(op)
    # Some sample generators draw from Python's random (hinge_embedding_loss's margin) or
    # numpy's: seed all three so a case is the same on every machine and every run.
    torch.manual_seed(0)
    random.seed(0)
    _seed_numpy()
    every = op.name in INDEXING_OPS or _is_reduction(op)
    case = Case(name, dtype, op)
    case.atol, case.rtol = _tolerance_overrides(op, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # The generator itself, not op.sample_inputs(): that wrapper inspects the caller's
            # stack for test-specific skips on every call (a third of the sweep's sample time).
            samples = op.sample_inputs_func(op, "cpu", dtype, False)
            for s in samples:
                # A copy now: some generators change a tensor they yielded before (the masked
                # reductions write inf and nan into an earlier sample's input for the next).
                call = _clone_tree((s.input, tuple(s.args), dict(s.kwargs)))
                if _has_unsupported_tensor(call):
                    continue  # sparse inputs: not what a compiler backend is asked to handle
                try:
                    inp, args, kwargs = _clone_tree(call)
                    expected = op.op(inp, *args, **kwargs)
                except Exception:  # noqa: BLE001, S112 - eager raises: skipped by construction
                    continue
                if _has_unsupported_tensor(expected):
                    continue
                case.samples.append(Sample(call, expected))
                if not every:
                    break
        except Exception:  # noqa: BLE001, S110 - a sample generator that raises: no samples
            pass
    return case if case.samples else None


def _seed_numpy() -> None:
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(0)


def _is_reduction(op) -> bool:
    from torch.testing._internal.opinfo.core import ReductionOpInfo

    return isinstance(op, ReductionOpInfo)


def _has_unsupported_tensor(x) -> bool:
    """Complex or sparse tensors: outside what the sweep compiles and compares."""
    for leaf in pytree.tree_leaves(x):
        if isinstance(leaf, torch.Tensor) and (leaf.is_complex() or leaf.layout != torch.strided):
            return True
    return False


def all_cases(dtypes=DTYPES, only=None):
    """(op, dtype) pairs in op_db order (the OpInfo objects; samples are made later)."""
    for op in op_db():
        name = op_name(op)
        if only is not None and name not in only and op.name not in only:
            continue
        for dtype in case_dtypes(op, dtypes):
            yield op, dtype


# ------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------


def compare(case: Case, actual: list) -> str:
    """'' when every sample's result matches eager; otherwise what differs (first mismatch)."""
    values_differ = case.name in RANDOM_OPS or case.name in UNINITIALIZED_OPS
    for i, (sample, got) in enumerate(zip(case.samples, actual)):
        try:
            if values_differ:
                _compare_shapes_only(got, sample.expected, check_finite=case.name in RANDOM_OPS)
            else:
                _compare(got, sample.expected, case.atol, case.rtol)
        except Exception as e:  # noqa: BLE001 - any difference is a mismatch
            if not values_differ and _no_further_from_float64(case, sample, got):
                continue
            first = first_line(str(e))
            detail = _mismatch_detail(str(e))
            where = f"sample {i}: " if len(case.samples) > 1 else ""
            return f"numerics mismatch: {where}{first}{detail}"
    return ""


LOW_PRECISION = (torch.bfloat16, torch.float16)


def _no_further_from_float64(case: Case, sample: Sample, got) -> bool:
    """For a bfloat16/float16 case that differs from eager: True when every output of the
    compiled result is at least as close to the op computed in float64 as eager's own result is
    (largest absolute error, output by output). A compiler that accumulates in float32 where eager
    rounds after every step (index_put with accumulate) differs from eager by being more exact;
    PyTorch's benchmark harness judges accuracy against the same float64 reference."""
    if case.dtype not in LOW_PRECISION:
        return False

    def up(t):
        return t.double() if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION else t

    try:
        inp, args, kwargs = pytree.tree_map(up, sample.fresh())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = case.op.op(inp, *args, **kwargs)
    except Exception:  # noqa: BLE001 - no float64 form of the op: eager's result is the judge
        return False
    g_leaves, g_spec = pytree.tree_flatten(got)
    e_leaves, e_spec = pytree.tree_flatten(sample.expected)
    r_leaves, r_spec = pytree.tree_flatten(reference)
    if not (g_spec == e_spec == r_spec):
        return False
    for g, e, r in zip(g_leaves, e_leaves, r_leaves):
        if not isinstance(e, torch.Tensor):
            if g != e:
                return False
            continue
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            return False
        if not e.is_floating_point():
            if not torch.equal(g, e):
                return False
            continue
        if not isinstance(r, torch.Tensor) or r.shape != e.shape:
            return False
        g_err = (g.double() - r.double()).abs().nan_to_num(nan=math.inf)
        e_err = (e.double() - r.double()).abs().nan_to_num(nan=math.inf)
        same_nan = g.isnan() == e.isnan()
        if not bool(same_nan.all()) or g_err.numel() and g_err.max() > e_err.max():
            return False
    return True


def _compare(got, expected, atol: float, rtol: float) -> None:
    """Structure, then each leaf: tensors by assert_close with the defaults of the leaf's dtype,
    loosened by the OpInfo's overrides (keyed by the case's dtype; an int64 op may return
    float32); other values by equality."""
    from torch.testing._comparison import default_tolerances

    g_leaves, g_spec = pytree.tree_flatten(got)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if g_spec != e_spec:
        raise AssertionError(f"output structure {g_spec} != eager {e_spec}")
    for k, (g, e) in enumerate(zip(g_leaves, e_leaves)):
        if not isinstance(e, torch.Tensor):
            both_nan = (
                isinstance(e, float) and math.isnan(e) and isinstance(g, float) and math.isnan(g)
            )
            if not (g == e or both_nan):
                raise AssertionError(f"output {k}: {g!r} != eager {e!r}")
            continue
        if not isinstance(g, torch.Tensor):
            raise AssertionError(f"output {k}: {type(g).__name__} where eager has a tensor")  # noqa: TRY004
        d_rtol, d_atol = default_tolerances(e)
        torch.testing.assert_close(
            g,
            e,
            atol=max(atol, d_atol),
            rtol=max(rtol, d_rtol),
            equal_nan=True,
            check_stride=False,
        )


def _compare_shapes_only(got, expected, check_finite: bool) -> None:
    g_leaves, g_spec = pytree.tree_flatten(got)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if g_spec != e_spec:
        raise AssertionError(f"output structure {g_spec} != eager {e_spec}")
    for g, e in zip(g_leaves, e_leaves):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.dtype != e.dtype:
            raise AssertionError(f"{_describe(g)} != eager {_describe(e)}")
        if not (check_finite and e.is_floating_point()):
            continue
        if bool(e.isfinite().all()) and not bool(g.isfinite().all()):
            raise AssertionError("non-finite values where eager has none")


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{dtype_name(t.dtype)}{list(t.shape)}"
    return type(t).__name__


def first_line(msg: str) -> str:
    for line in msg.splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def _mismatch_detail(msg: str) -> str:
    m = re.search(r"Greatest absolute difference: ([^ ]+)", msg)
    return f" (max abs diff {m.group(1)})" if m else ""
