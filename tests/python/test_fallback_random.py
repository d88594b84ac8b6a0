"""fallback_random: every random op runs as the ATen op, drawing from torch's generator exactly as
eager does, so a training step with dropout under torch.manual_seed gives eager's gradients. On
through options={"fallback_random": True}, or by torch._inductor.config.fallback_random (what
PyTorch's accuracy harness sets), whose value at compile time is the default."""

import copy

import pytest
import torch
from conftest import BACKEND, coil_records, reset_compiler
from torch import nn

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's random-number modes")

import coil  # noqa: E402

# Gradients of float32 models: the same masks leave only rounding differences (reduction order).
TOL = {"atol": 2e-6, "rtol": 1e-5}


class DropoutMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 16)
        self.d1, self.d2 = nn.Dropout(0.1), nn.Dropout(0.3)

    def forward(self, x):
        h = self.d1(torch.relu(self.a(x)))
        # rand_like and bernoulli too: every random op of the graph must draw eager's numbers,
        # in eager's order.
        noise = torch.rand_like(h[:, :16]) + torch.bernoulli(torch.full_like(x[:, :16], 0.4))
        return self.d2(self.b(h)) * noise


def _step(call, model, inputs):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1234)
    out = call(*inputs)
    loss = out.float().square().mean()
    loss.backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _compare(model_fn, inputs, **compile_kw):
    torch.manual_seed(0)
    ref = model_fn().train()
    model = copy.deepcopy(ref)
    expected = _step(ref, ref, inputs)
    reset_compiler()
    compiled = torch.compile(model, backend="coil", dynamic=False, **compile_kw)
    actual = _step(compiled, model, inputs)
    # A second step: each call draws new numbers, still eager's.
    expected2, actual2 = _step(ref, ref, inputs), _step(compiled, model, inputs)
    return (expected, expected2), (actual, actual2)


def _random_fallbacks():
    return sorted({op for r in coil_records() for op in r.fallback_ops
                   if "dropout" in op or "rand" in op or "bernoulli" in op})


def test_dropout_mlp_gradients_equal_eager_with_option():
    x = torch.randn(8, 32)
    expected, actual = _compare(DropoutMLP, (x,), options={"fallback_random": True})
    torch.testing.assert_close(actual, expected, **TOL)
    assert _random_fallbacks() == ["aten.bernoulli.default", "aten.native_dropout.default",
                                   "aten.rand_like.default"]
    assert all(r.options.fallback_random for r in coil_records())
    assert not any(r.eager_fallback for r in coil_records())


def test_inductor_config_alone_turns_it_on():
    x = torch.randn(8, 32)
    with torch._inductor.config.patch(fallback_random=True):
        torch.manual_seed(0)
        ref = DropoutMLP().train()
        model = copy.deepcopy(ref)
        expected = _step(ref, ref, (x,))
        reset_compiler()
        compiled = torch.compile(model, backend="coil", dynamic=False)
        # The forward compiles here, the backward at loss.backward(): both inside the patch.
        actual = _step(compiled, model, (x,))
    torch.testing.assert_close(actual, expected, **TOL)
    assert _random_fallbacks()
    # The value at compile time sticks: after the patch, the same compiled function still draws
    # eager's numbers.
    torch.testing.assert_close(_step(compiled, model, (x,)), _step(ref, ref, (x,)), **TOL)


def test_option_overrides_inductor_config():
    x = torch.randn(8, 32)
    with torch._inductor.config.patch(fallback_random=True):
        reset_compiler()
        fn = torch.compile(DropoutMLP().train(), backend="coil",
                           options={"fallback_random": False})
        fn(x)
    assert not _random_fallbacks()
    assert not any(r.options.fallback_random for r in coil_records())


def test_off_by_default_coil_draws_its_own_stream():
    x = torch.randn(8, 32)
    expected, actual = _compare(DropoutMLP, (x,))
    assert not _random_fallbacks()
    # Other masks: the outputs differ from eager's (each is a valid dropout of the same values).
    assert not torch.equal(actual[0][0], expected[0][0])


def test_decompositions_keep_random_ops_whole():
    from coil.backend import _decompositions

    def random_keys(table):
        return {op for op in table if torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())}

    assert random_keys(_decompositions(False))  # e.g. rrelu, RNNs (their dropout between layers)
    assert not random_keys(_decompositions(True))


def test_gpt2_dropout_training_step_equals_eager():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(
        vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=2, use_cache=False,
        resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
    )
    cfg._attn_implementation = "eager"
    ids = torch.randint(0, 128, (2, 16))

    def make():
        return transformers.GPT2Model(cfg)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = make()

        def forward(self, i):
            return self.m(input_ids=i, use_cache=False).last_hidden_state

    expected, actual = _compare(Wrap, (ids,), options={"fallback_random": True})
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    (loss_out, grads), _ = actual
    (ref_out, ref_grads), _ = expected
    worst = max((grads[n] - ref_grads[n]).abs().max().item() for n in grads)
    assert worst < 1e-5, worst
    kinds = {r.kind for r in coil_records() if not r.eager_fallback}
    assert {"forward", "backward"} <= kinds
    assert "aten.native_dropout.default" in _random_fallbacks()
