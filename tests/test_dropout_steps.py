"""The dropout checks' search (autograder/test_layers.py), on post-norm steps made here: dropout as
the paper has it passes, in any style that draws a 0/1 mask and rescales by 1/(1-p); noise, a
missing rescale, p taken as the probability to keep, dropout after the residual add and a wrong
rate fail, each named. The end-to-end checks are in the catalogue (tests/catalogue/layers.py)."""
from types import SimpleNamespace

import pytest
import torch

import autograder.test_layers as layers
from tfcourse.submission.framework import Fail

P = layers.P
CTX = SimpleNamespace(atol=1e-5, rtol=1e-4)


def steps(drop, count=2, seed=0):
    """`count` post-norm steps norm(h + drop(sublayer(h))) on x [2, 5, 12], as the check takes
    them: (name, norm, h, sublayer(h), output)."""
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(2, 5, 12, generator=generator)
    out = []
    for index in range(count):
        norm = torch.nn.LayerNorm(12)
        with torch.no_grad():
            norm.weight.copy_(1 + 0.3 * torch.randn(12, generator=generator))
            norm.bias.copy_(0.2 * torch.randn(12, generator=generator))
            sub = torch.tanh(h @ torch.randn(12, 12, generator=generator) / 3)
            following = norm(h + drop(sub, h))
        out.append((f"step {index}", norm, h, sub, following))
        h = following
    return out


def keep(like):
    return (torch.rand(like.shape) >= P).float()


CORRECT = {
    "nn.Dropout": lambda s, h: torch.nn.functional.dropout(s, P, training=True),
    "by hand": lambda s, h: s * keep(s) / (1 - P),
}
WRONG = {
    "noise": (lambda s, h: s + 0.05 * torch.randn_like(s), "did not go through dropout"),
    "no rescale": (lambda s, h: s * keep(s), "1/(1-p)"),
    "p kept": (lambda s, h: torch.nn.functional.dropout(s, 1 - P, training=True), "probability"),
    "after the add": (lambda s, h: torch.nn.functional.dropout(h + s, P, training=True) - h,
                      "after the residual add"),
    "no zeros": (lambda s, h: s / (1 - P), "should zero about"),
}


@pytest.mark.parametrize("name", CORRECT)
def test_dropout_as_the_paper_has_it_passes(name):
    torch.manual_seed(1)
    layers._expect_dropout_steps(CTX, steps(CORRECT[name]), noisy=False)


@pytest.mark.parametrize("name", WRONG)
def test_what_is_not_dropout_fails_and_is_named(name):
    torch.manual_seed(1)
    drop, words = WRONG[name]
    with pytest.raises(Fail, match=words.replace("(", r"\(").replace(")", r"\)")):
        layers._expect_dropout_steps(CTX, steps(drop), noisy=False)


def test_noise_seen_with_dropout_0_is_named():
    torch.manual_seed(1)
    with pytest.raises(Fail, match="random noise"):
        layers._expect_dropout_steps(CTX, steps(WRONG["noise"][0]), noisy=True)
