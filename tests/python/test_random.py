"""Random ops (rand, randn, randint, bernoulli, uniform, exponential, cauchy, log_normal,
geometric, dropout): compiled without ATen fallbacks, they follow eager's distributions (checked
by moments on large samples, with bounds far outside sampling error), are reproducible under
torch.manual_seed, draw new numbers on every call, and stay consistent between a dropout's output
and its mask. coil's random stream differs from eager's (docs/decisions.md), so values are never
compared with eager's."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, coil_records, reset_compiler

pytestmark = pytest.mark.skipif(BACKEND != "coil", reason="coil's random stream")

N = 200_000


def compiled(fn):
    reset_compiler()
    return torch.compile(fn, backend=BACKEND, fullgraph=True, dynamic=False)


def assert_lowered():
    fallbacks = [op for r in coil_records() for op in r.fallback_ops]
    assert not fallbacks, fallbacks
    assert not any(r.eager_fallback for r in coil_records())


def moments(t):
    t = t.double().flatten()
    return t.mean().item(), t.std().item()


# (name, fn of a float32 tensor of N ones, expected mean, expected std, support check)
DISTRIBUTIONS = [
    ("rand_like", lambda x: torch.rand_like(x), 0.5, math.sqrt(1 / 12), lambda t: (t >= 0) & (t < 1)),
    ("randn_like", lambda x: torch.randn_like(x), 0.0, 1.0, torch.isfinite),
    ("rand", lambda x: torch.rand(N, dtype=torch.float64) + 0 * x.sum(), 0.5, math.sqrt(1 / 12),
     lambda t: (t >= 0) & (t < 1)),
    ("randn", lambda x: torch.randn(N) * 2 + 1 + 0 * x.sum(), 1.0, 2.0, torch.isfinite),
    ("randint", lambda x: torch.randint(3, 10, (N,)) + 0 * x.sum().long(), 6.0, 2.0,
     lambda t: (t >= 3) & (t <= 9) & (t == t.round())),
    ("bernoulli", lambda x: torch.bernoulli(x * 0.3), 0.3, math.sqrt(0.21),
     lambda t: (t == 0) | (t == 1)),
    ("uniform", lambda x: x.clone().uniform_(-2, 3), 0.5, 5 / math.sqrt(12),
     lambda t: (t >= -2) & (t < 3)),
    ("exponential", lambda x: x.clone().exponential_(2.0), 0.5, 0.5, lambda t: t >= 0),
    ("log_normal", lambda x: x.clone().log_normal_(0.0, 0.25), math.exp(0.25**2 / 2),
     math.sqrt((math.exp(0.25**2) - 1) * math.exp(0.25**2)), lambda t: t > 0),
    ("geometric", lambda x: x.clone().geometric_(0.25), 4.0, math.sqrt(0.75) / 0.25,
     lambda t: (t >= 1) & (t == t.round())),
]


@pytest.mark.parametrize(
    "name,fn,mean,std,support", DISTRIBUTIONS, ids=[d[0] for d in DISTRIBUTIONS]
)
def test_distribution(name, fn, mean, std, support):
    torch.manual_seed(0)
    t = compiled(fn)(torch.ones(N))
    assert_lowered()
    assert bool(support(t).all()), f"{name}: values outside the support"
    m, s = moments(t)
    # The sample mean's standard error is std / sqrt(N) (~0.2% of std here): 10x that is a bound
    # a correct generator essentially never crosses, and a wrong distribution does.
    assert abs(m - mean) < 10 * std / math.sqrt(N), (name, m, mean)
    assert abs(s - std) < 0.02 * std, (name, s, std)


def test_cauchy_median_and_quartiles():
    torch.manual_seed(0)
    t = compiled(lambda x: x.clone().cauchy_(1.0, 2.0))(torch.ones(N))
    assert_lowered()
    q = torch.quantile(t[:100_000].double(), torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    # median 1, quartiles at median -/+ sigma
    torch.testing.assert_close(q, torch.tensor([-1.0, 1.0, 3.0], dtype=torch.float64), atol=0.06, rtol=0)


def test_draws_are_independent_of_position():
    # Neighbouring elements must not be correlated (a counter-based generator with a bad mix
    # would show it first here).
    torch.manual_seed(0)
    t = compiled(lambda x: torch.rand_like(x) - 0.5)(torch.ones(N)).double()
    corr = (t[1:] * t[:-1]).mean() / t.var()
    assert abs(corr.item()) < 0.01


def test_reproducible_under_manual_seed_and_new_each_call():
    f = compiled(lambda x: (torch.rand_like(x), torch.randn_like(x)))
    x = torch.ones(1000)
    torch.manual_seed(7)
    a = f(x)
    b = f(x)
    torch.manual_seed(7)
    c = f(x)
    assert torch.equal(a[0], c[0]) and torch.equal(a[1], c[1]), "same seed, different numbers"
    assert not torch.equal(a[0], b[0]), "two calls drew the same numbers"
    assert not torch.equal(a[0], a[1]), "two random ops of one graph share their numbers"


def test_two_rand_calls_in_one_graph_differ():
    f = compiled(lambda x: torch.rand_like(x) - torch.rand_like(x))
    out = f(torch.ones(1000))
    assert (out != 0).float().mean() > 0.99


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_dropout_output_matches_its_mask(dtype):
    p = 0.3
    x = torch.randn(64, 257, dtype=dtype)
    out, mask = compiled(lambda x: torch.ops.aten.native_dropout(x, p, True))(x)
    assert_lowered()
    assert mask.dtype == torch.bool
    expected = (x.float() * mask / (1 - p)).to(dtype)
    torch.testing.assert_close(out, expected)
    assert abs(mask.float().mean().item() - (1 - p)) < 0.02


def test_dropout_in_eval_is_the_identity():
    x = torch.randn(8, 16)
    out = compiled(lambda x: F.dropout(x, 0.5, training=False) * 2)(x)
    torch.testing.assert_close(out, x * 2)


def test_dropout_training_step_gradients_follow_the_mask():
    # Forward and backward compiled: the gradient of sum(dropout(x)) is mask / (1 - p).
    p = 0.25
    x = torch.randn(32, 64, requires_grad=True)
    reset_compiler()
    f = torch.compile(lambda x: F.dropout(x, p, training=True), backend=BACKEND)
    out = f(x)
    out.sum().backward()
    mask = out != 0
    torch.testing.assert_close(x.grad, mask.float() / (1 - p))
    torch.testing.assert_close(out, x.detach() * mask / (1 - p))


def test_normal_with_tensor_and_number_parameters():
    torch.manual_seed(0)
    mean = torch.linspace(-3, 3, 6).repeat_interleave(N // 6)
    t = compiled(lambda m: torch.normal(m, 0.5))(mean)
    assert_lowered()
    resid = (t - mean).double()
    assert abs(resid.mean().item()) < 0.01 and abs(resid.std().item() - 0.5) < 0.01
    t = compiled(lambda x: x.clone().normal_(2.0, 3.0))(torch.ones(N))
    assert_lowered()
    m, s = moments(t)
    assert abs(m - 2.0) < 0.07 and abs(s - 3.0) < 0.06
