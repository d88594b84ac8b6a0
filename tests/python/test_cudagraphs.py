"""CUDA graphs under mode="reduce-overhead" (python/coil/cudagraphs.py), on a machine without a GPU:
CPU graphs compile, run correctly and are recorded as not captured, with the reason, once per
graph, in the record and the debug folder; the safety decisions themselves, on graphs traced with
fake CUDA tensors (no GPU needed). Capture and replay are tested in tests/gpu/test_cudagraphs_gpu.py.
"""

import os
import warnings

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's own CUDA-graph records")

import coil  # after the skip: the module exists only under coil
from coil import cudagraphs

CPU_REASON = "graph on the CPU (CUDA graphs need a CUDA device)"


def _mlp(x, w):
    return (x @ w).relu() * 2


def _coil_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, coil.CoilWarning)]


@pytest.mark.parametrize("how", ["mode", "options"])
def test_cpu_graph_runs_uncaptured_and_says_why(how, tmp_path):
    reset_compiler()
    x, w = torch.randn(8, 12), torch.randn(12, 6)
    kwargs = ({"mode": "reduce-overhead"} if how == "mode"
              else {"options": {"cudagraphs": True, "debug_dir": str(tmp_path)}})
    fn = torch.compile(_mlp, backend="coil", **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(x, w)
        again = fn(x + 1, w)  # a second call: no second warning
    torch.testing.assert_close(out, _mlp(x, w))
    torch.testing.assert_close(again, _mlp(x + 1, w))
    (record,) = coil_records()
    assert record.options.cudagraphs and not record.eager_fallback
    assert not record.cudagraph and record.cudagraph_reason == CPU_REASON
    assert record.kernel_names, "the graph still runs coil's kernels"
    msgs = _coil_warnings(caught)
    assert msgs == [
        f"coil: graph {record.graph_id} (inference) runs without CUDA graphs: {CPU_REASON}"
    ]
    if how == "options":
        with open(os.path.join(record.debug_dir, "cudagraphs.txt")) as f:
            assert f.read() == f"captured: no\nreason: {CPU_REASON}\n"


def test_cpu_training_step_forward_and_backward_recorded():
    reset_compiler()
    w = torch.randn(12, 6, requires_grad=True)
    x = torch.randn(8, 12)
    fn = torch.compile(lambda t: (t @ w).tanh().sum(), backend="coil", mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(x).backward()
    grad = w.grad.clone()
    w.grad = None
    (x @ w).tanh().sum().backward()
    torch.testing.assert_close(grad, w.grad)
    kinds = {r.kind: r for r in coil_records()}
    assert set(kinds) == {"forward", "backward"}
    assert all(not r.cudagraph and r.cudagraph_reason == CPU_REASON for r in kinds.values())
    # one warning for the function: the backward's reason is its forward's
    assert len(_coil_warnings(caught)) == 1


def test_default_mode_records_no_cudagraphs(tmp_path):
    reset_compiler()
    fn = torch.compile(_mlp, backend="coil", options={"debug_dir": str(tmp_path)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", coil.CoilWarning)
        fn(torch.randn(8, 12), torch.randn(12, 6))
    (record,) = coil_records()
    assert not record.cudagraph and record.cudagraph_reason == ""
    assert not os.path.exists(os.path.join(record.debug_dir, "cudagraphs.txt"))


@pytest.mark.parametrize("value", [-1, True, "8", 2.0])
def test_max_recordings_must_be_a_count(value):
    with pytest.raises(ValueError, match="cudagraph_max_recordings"):
        coil.config.for_compile(None, {"cudagraph_max_recordings": value})


def test_max_recordings_option_is_taken():
    opts = coil.config.for_compile("reduce-overhead", None)
    assert opts.cudagraphs and opts.cudagraph_max_recordings == 8
    opts = coil.config.for_compile(None, {"cudagraphs": True, "cudagraph_max_recordings": 2})
    assert opts.cudagraph_max_recordings == 2


# ---- the decisions, on graphs traced with fake CUDA tensors ----


def _fake_graph(fn, *devices, shape=(4, 4)):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():
        inputs = [torch.empty(shape, device=d) for d in devices]
    return make_fx(fn, tracing_mode="fake")(*inputs), inputs


def test_safe_cuda_graph_is_captured():
    gm, inputs = _fake_graph(lambda a, b: (a @ b).softmax(-1), "cuda", "cuda")
    assert cudagraphs.why_not(gm, inputs, static=[1]) is None


def test_cpu_op_inside_a_cuda_graph():
    gm, inputs = _fake_graph(lambda a: (a.cpu() + 1).sum(), "cuda")
    why = cudagraphs.why_not(gm, inputs, static=[])
    assert why.startswith("CPU op in a CUDA graph (_to_copy: aten._to_copy.default)"), why


def test_cpu_input_of_a_cuda_graph():
    # a 0-d CPU tensor added to a CUDA one: fine eagerly, but a recording would keep its value
    gm, inputs = _fake_graph(lambda a, b: a + b, "cuda", "cpu", shape=())
    why = cudagraphs.why_not(gm, inputs, static=[])
    assert why.startswith("CPU input in a CUDA graph"), why


@pytest.mark.skipif(
    torch.cuda.is_available() and torch.cuda.device_count() < 2,
    reason="tracing on cuda:1 needs a second device where CUDA is real (fake devices on CPU-only)",
)
def test_several_devices():
    gm, inputs = _fake_graph(lambda a, b: (a + 1, b * 2), "cuda:0", "cuda:1")
    assert cudagraphs.why_not(gm, inputs, static=[]) == "graph on several devices: cuda:0, cuda:1"


def _mutating(a, b):
    a.add_(1)
    return a * b


def test_mutated_input_is_not_safe_unless_static():
    gm, inputs = _fake_graph(_mutating, "cuda", "cuda")
    why = cudagraphs.why_not(gm, inputs, static=[])
    assert why.startswith("mutates input(s) that are not parameters or buffers (a_1)"), why
    # a buffer updated in place (running statistics, a cache) is read and written in place
    assert cudagraphs.why_not(gm, inputs, static=[0]) is None


def test_host_sync_op():
    gm, inputs = _fake_graph(lambda a: a * 2, "cuda")
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(x):
        nz = gm.graph.call_function(torch.ops.aten.nonzero.default, (x,))
    nz.meta["val"] = x.meta["val"]
    why = cudagraphs.why_not(gm, inputs, static=[])
    assert why == f"op that waits for the host ({nz.name}: aten.nonzero.default)"


def test_non_tensor_input():
    gm, inputs = _fake_graph(lambda a: a * 2, "cuda")
    assert cudagraphs.why_not(gm, inputs + [object()], static=[]).startswith("non-tensor inputs")


# ---- the wrapper's bookkeeping, with the CUDA-graph tree replaced by a counting stand-in ----


def test_wrapper_records_each_size_up_to_the_limit(monkeypatch):
    from torch._inductor import cudagraph_trees

    made, replays = [], []

    def fake_cudagraphify_impl(model, inputs, static_input_idxs, **kwargs):
        made.append((list(static_input_idxs), sorted(kwargs)))

        def tree(args):
            replays.append(len(args))
            return model(args)

        return tree

    monkeypatch.setattr(cudagraphs, "why_not", lambda *args: None)  # as if on one GPU
    monkeypatch.setattr(cudagraph_trees, "cudagraphify_impl", fake_cudagraphify_impl)
    reset_compiler()
    lin = torch.nn.Linear(6, 3)
    fn = torch.compile(lambda x: lin(x).relu(), backend="coil", dynamic=True,
                       options={"cudagraphs": True, "cudagraph_max_recordings": 2})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            for n in (4, 4, 8, 16, 16, 4):
                x = torch.randn(n, 6)
                torch.testing.assert_close(fn(x), lin(x).relu())
    (record,) = coil_records()
    assert record.dynamic and record.cudagraph and record.cudagraph_sizes == 2
    assert record.cudagraph_reason.startswith("2 sizes recorded (cudagraph_max_recordings)")
    # one tree for the graph, made at the first call; the parameters are its static inputs
    ((static, kwargs),) = made
    assert len(static) == 2 and static == record.cudagraph_static_inputs
    assert {"device_index", "is_backward", "is_inference", "mutated_input_idxs"} <= set(kwargs)
    assert len(replays) == 4  # sizes 4, 4, 8, 4 went to the tree; both calls at 16 did not
    assert len([m for m in _coil_warnings(caught) if "cudagraph_max_recordings" in m]) == 1


def test_wrapper_gives_forward_and_backward_to_one_tree(monkeypatch):
    from torch._inductor import cudagraph_trees

    made = []

    def fake_cudagraphify_impl(model, inputs, static_input_idxs, **kwargs):
        made.append((list(static_input_idxs), kwargs))
        return model

    monkeypatch.setattr(cudagraphs, "why_not", lambda *args: None)
    monkeypatch.setattr(cudagraph_trees, "cudagraphify_impl", fake_cudagraphify_impl)
    reset_compiler()
    lin = torch.nn.Linear(6, 3)
    fn = torch.compile(lambda x: lin(x).tanh().sum(), backend="coil", mode="reduce-overhead")
    x = torch.randn(4, 6)
    for _ in range(2):
        lin.zero_grad()
        fn(x).backward()
    grad = lin.weight.grad.clone()
    lin.zero_grad()
    lin(x).tanh().sum().backward()
    torch.testing.assert_close(grad, lin.weight.grad)
    kinds = {r.kind: r for r in coil_records()}
    assert kinds["forward"].cudagraph and kinds["backward"].cudagraph
    (fw_static, fw), (bw_static, bw) = made
    assert not fw["is_backward"] and not fw["is_inference"] and bw["is_backward"]
    assert len(fw_static) == 2  # weight and bias
    assert bw_static, "the backward reads its saved values in place"
