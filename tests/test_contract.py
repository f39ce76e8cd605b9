"""The reference solution meets the student-facing contract and reproduces the seed's figures."""
import math

import pytest
import torch
import torch.nn.functional as F

from tfcourse.submission.reference import reference


@pytest.fixture(scope="module")
def ref(course):
    return {**reference(course, "01-attention"), **reference(course, "02-layers"),
            **reference(course, "03-sorting")}


def count(module):
    return sum(p.numel() for p in module.parameters())


def test_parameter_counts(ref):
    assert count(ref["EncoderLayer"](32, 4, 128, 0.1)) == 12704
    assert count(ref["DecoderLayer"](32, 4, 128, 0.1)) == 16992
    model = ref["Transformer"](11)
    assert count(model) == 59744
    assert model.embedding.weight.numel() == 352
    assert count(ref["MultiHeadAttention"](32, 4)) == 4224
    assert count(ref["FeedForward"](32, 128)) == 8352


def test_parameter_names(ref):
    names = {n for n, _ in ref["MultiHeadAttention"](12, 3).named_parameters()}
    assert names == {f"w_{x}.{p}" for x in "qkvo" for p in ("weight", "bias")}
    encoder = {n.split(".")[0] for n, _ in ref["EncoderLayer"](32, 4, 128, 0.1).named_parameters()}
    assert encoder == {"self_attn", "ffn", "norm1", "norm2"}
    decoder = {n.split(".")[0] for n, _ in ref["DecoderLayer"](32, 4, 128, 0.1).named_parameters()}
    assert decoder == {"self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"}
    model = {n.split(".")[0] for n, _ in ref["Transformer"](11).named_parameters()}
    assert model == {"embedding", "encoder", "decoder"}
    assert isinstance(ref["Transformer"](11).encoder, torch.nn.ModuleList)


def test_masks_follow_the_convention(ref):
    assert torch.equal(ref["causal_mask"](3), torch.tensor([[0, 1, 1], [0, 0, 1], [0, 0, 0]]).bool())
    mask = ref["padding_mask"](torch.tensor([[4, 0]]), 0)
    assert mask.shape == (1, 1, 1, 2) and mask.dtype == torch.bool and mask[0, 0, 0, 1]


def test_attention_weights_are_a_softmax_over_keys(ref):
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 6)
    out, weights = ref["scaled_dot_product_attention"](q, k, v)
    assert out.shape == (2, 5, 6) and weights.shape == (2, 5, 7)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 5))


def test_positional_encoding_is_the_papers(ref):
    pe = ref["positional_encoding"](10, 8)
    assert pe.shape == (10, 8)
    assert math.isclose(pe[3, 2].item(), math.sin(3 / 10000 ** (2 / 8)), rel_tol=1e-5)
    assert math.isclose(pe[3, 3].item(), math.cos(3 / 10000 ** (2 / 8)), rel_tol=1e-5)


def test_loss_floor_is_the_least_smoothed_loss(ref):
    floor = ref["smoothing_floor"](0.1, 11)
    assert round(floor, 3) == 0.514
    target = torch.tensor([3])
    q = torch.full((1, 11), 0.1 / 11)
    q[0, 3] += 0.9
    assert math.isclose(F.cross_entropy(q.log(), target, label_smoothing=0.1).item(), floor,
                        rel_tol=1e-5)


def test_schedule_peaks_at_warmup(ref):
    rate = ref["noam_rate"]
    assert rate(100, 32, 100) == pytest.approx(32 ** -0.5 * 100 ** -0.5)
    assert rate(100, 32, 100) == pytest.approx(0.0177, abs=1e-4)
    assert rate(50, 32, 100) < rate(100, 32, 100) > rate(200, 32, 100)


def test_teacher_forcing_and_greedy(ref):
    y = torch.tensor([[1, 2, 3]])
    assert torch.equal(ref["shift_right"](y, 10), torch.tensor([[10, 1, 2]]))
    model = ref["Transformer"](11).eval()
    out = ref["greedy_decode"](model, torch.randint(0, 10, (3, 6)), 10)
    assert out.shape == (3, 6) and not (out == 10).any()
