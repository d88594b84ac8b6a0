"""CUDA graphs under mode="reduce-overhead" (python/coil/cudagraphs.py) on a CUDA GPU: graphs are
recorded into PyTorch's CUDA-graph trees and replayed with eager's numbers; new input values are
copied in; a new size records a new graph (up to cudagraph_max_recordings); parameters are read
in place; a replay writes over the previous replay's outputs, and reading freed output memory is
an error, as under Inductor; a training step (forward and backward graphs) replays step after
step with eager's losses and gradients; graphs that are not safe (a CPU op, a mutated input) run
uncaptured with a warning. Skipped where torch.cuda.is_available() is False."""

import warnings

import pytest
import torch
from torch import nn

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import coil

CALLS = 4  # warm-up, recording, then replays


def _tree_nodes() -> list:
    """Every CUDA graph recorded in device 0's tree."""
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_manager(0, create_if_none_exists=False)
    if manager is None:
        return []
    todo, found = list(manager.get_roots()), []
    while todo:
        node = todo.pop()
        found.append(node)
        for children in node.children.values():
            todo.extend(children)
    return found


def _coil_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, coil.CoilWarning)]


class MLP(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def _inference_model():
    return MLP().cuda().eval().requires_grad_(False)


def test_captured_replays_match_eager():
    model = _inference_model()
    fn = torch.compile(model, backend="coil", mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(CALLS):
            x = torch.randn(8, 64, device="cuda") + i
            out = fn(x)
            torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    assert not _coil_warnings(caught)
    (record,) = coil.compiled_graphs()
    assert record.cudagraph and record.cudagraph_reason == "" and record.cudagraph_sizes == 1
    assert record.kernel_names and record.backend == "triton"
    assert len(_tree_nodes()) == 1


def test_replay_after_input_change_reads_the_new_values():
    model = _inference_model()
    fn = torch.compile(model, backend="coil", mode="reduce-overhead")
    x = torch.randn(8, 64, device="cuda")
    for _ in range(CALLS):
        fn(x)
    x.mul_(3).add_(1)  # same tensor, new values
    torch.testing.assert_close(fn(x), model(x), atol=1e-4, rtol=1e-4)
    y = torch.randn(8, 64, device="cuda")  # another tensor
    torch.testing.assert_close(fn(y), model(y), atol=1e-4, rtol=1e-4)
    assert len(_tree_nodes()) == 1, "a new input address must not re-record"


def test_new_size_records_a_new_graph():
    model = _inference_model()
    fn = torch.compile(model, backend="coil", mode="reduce-overhead", dynamic=True)
    for n in (8, 16, 8, 16, 8):
        for _ in range(3):
            x = torch.randn(n, 64, device="cuda")
            torch.testing.assert_close(fn(x), model(x), atol=1e-4, rtol=1e-4)
    (record,) = coil.compiled_graphs()
    assert record.dynamic and record.cudagraph and record.cudagraph_sizes == 2
    assert len(_tree_nodes()) == 2


def test_sizes_past_the_limit_run_uncaptured():
    model = _inference_model()
    fn = torch.compile(model, backend="coil", dynamic=True,
                       options={"cudagraphs": True, "cudagraph_max_recordings": 1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (8, 8, 8, 16, 16, 24):
            x = torch.randn(n, 64, device="cuda")
            torch.testing.assert_close(fn(x), model(x), atol=1e-4, rtol=1e-4)
    (record,) = coil.compiled_graphs()
    assert record.cudagraph and record.cudagraph_sizes == 1
    assert "1 sizes recorded (cudagraph_max_recordings)" in record.cudagraph_reason
    assert len([m for m in _coil_warnings(caught) if "cudagraph_max_recordings" in m]) == 1
    assert len(_tree_nodes()) == 1


def test_parameters_are_static_inputs_not_copied():
    model = _inference_model()
    fn = torch.compile(model, backend="coil", mode="reduce-overhead")
    x = torch.randn(8, 64, device="cuda")
    for _ in range(CALLS):
        fn(x)
    (record,) = coil.compiled_graphs()
    n_params = len(list(model.parameters()))
    assert len(record.cudagraph_static_inputs) == n_params
    (node,) = _tree_nodes()
    assert sorted(node.wrapped_function.static_input_idxs) == record.cudagraph_static_inputs
    # only x is copied into the graph at each replay
    assert len(node.non_static_input_idx) == 1
    # a parameter updated in place is read in place by the next replay, without re-recording
    with torch.no_grad():
        model.fc2.weight.mul_(-1)
    torch.testing.assert_close(fn(x), model(x), atol=1e-4, rtol=1e-4)
    assert len(_tree_nodes()) == 1


def test_output_overwritten_by_the_next_replay():
    # As under Inductor: a replay returns the same output tensors as the replay before, with new
    # values; memory of an earlier warm-up or recording that the tree freed is an error to read.
    model = _inference_model()
    fn = torch.compile(model, backend="coil", mode="reduce-overhead")
    x1, x2 = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    warm = fn(x1)  # the warm-up call
    fn(x1)  # the recording
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        print(warm)
    first = fn(x1)  # a replay
    kept = first.clone()
    second = fn(x2)  # the next replay writes over first
    torch.testing.assert_close(second, model(x2), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(first, second)
    torch.testing.assert_close(kept, model(x1), atol=1e-4, rtol=1e-4)
    assert not torch.equal(kept, second)
    torch.compiler.cudagraph_mark_step_begin()  # what the docs say to call before a new step
    torch.testing.assert_close(fn(x1), model(x1), atol=1e-4, rtol=1e-4)


def test_training_steps_match_eager():
    torch.manual_seed(0)
    eager = MLP().cuda()
    compiled_model = MLP().cuda()
    compiled_model.load_state_dict(eager.state_dict())
    fn = torch.compile(compiled_model, backend="coil", mode="reduce-overhead")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(compiled_model.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            x = torch.randn(16, 64, device="cuda")
            target = torch.randn(16, 64, device="cuda")
            losses = []
            for model, opt, run in ((eager, opt_e, eager), (compiled_model, opt_c, fn)):
                opt.zero_grad(set_to_none=True)
                loss = (run(x) - target).square().mean()
                loss.backward()
                losses.append(loss.detach().clone())
                opt.step()
            torch.testing.assert_close(losses[1], losses[0], atol=1e-4, rtol=1e-4)
            for pc, pe in zip(compiled_model.parameters(), eager.parameters()):
                torch.testing.assert_close(pc, pe, atol=1e-4, rtol=1e-4)
    assert not _coil_warnings(caught)
    kinds = {r.kind: r for r in coil.compiled_graphs()}
    assert set(kinds) == {"forward", "backward"}
    assert kinds["forward"].cudagraph and kinds["backward"].cudagraph
    assert kinds["backward"].cudagraph_static_inputs, "saved values are read in place"
    assert len(_tree_nodes()) == 2  # the forward and, below it, the backward


def test_cpu_op_runs_uncaptured_with_a_warning():
    def f(x):
        return (x.cpu() * 2).to("cuda") + x

    fn = torch.compile(f, backend="coil", mode="reduce-overhead")
    x = torch.randn(32, device="cuda")
    with pytest.warns(coil.CoilWarning, match="runs without CUDA graphs: CPU op in a CUDA graph"):
        out = fn(x)
    for _ in range(CALLS):
        torch.testing.assert_close(fn(x), f(x))
    torch.testing.assert_close(out, f(x))
    (record,) = coil.compiled_graphs()
    assert not record.cudagraph and record.cudagraph_reason.startswith("CPU op")
    assert not _tree_nodes()


def test_mutated_input_runs_uncaptured_with_a_warning():
    def f(x):
        x.add_(1)
        return x * 2

    fn = torch.compile(f, backend="coil", mode="reduce-overhead")
    x = torch.zeros(32, device="cuda")
    with pytest.warns(coil.CoilWarning, match="mutates input"):
        fn(x)
    for _ in range(CALLS):
        out = fn(x)
    torch.testing.assert_close(x, torch.full_like(x, 1.0 + CALLS))
    torch.testing.assert_close(out, 2 * x)
    (record,) = coil.compiled_graphs()
    assert not record.cudagraph
