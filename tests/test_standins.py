"""The stand-in encoder layers of the heads' checks (autograder/standins.py) are as strict as the
contract: they take the masks the real attention reads as meant, refuse those it refuses or
misreads, and expose what a real EncoderLayer exposes (a self_attn with attention_weights)."""
import importlib.util

import pytest
import torch

from autograder import standins
from conftest import ROOT

B, H, T, D = 3, 3, 7, 12


def real_attention():
    """The course's MultiHeadAttention, as 02-layers imports it (release/02-layers)."""
    spec = importlib.util.spec_from_file_location(
        "attention_parts", ROOT / "release" / "02-layers" / "attention_parts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MultiHeadAttention(D, H).eval()


def tokens():
    out = torch.randint(1, 9, (B, T), generator=torch.Generator().manual_seed(0))
    out[0, 4:] = 0
    out[1, 1:] = 0
    return out


PADS = tokens() == 0
CONTRACT = [PADS[:, None, None, :], torch.ones(T, T, dtype=torch.bool).triu(1), None]
OTHERS = [  # (a mask of another convention, what keeps it from the contract's)
    (PADS.unsqueeze(-2), "heads"),                          # the Annotated Transformer's [B, 1, T]
    (PADS[:, None, None, :].float() * -10000.0, "dtype"),   # BERT's additive float mask
    (PADS, "shape"),                                        # a flat [B, T]
]


@pytest.mark.parametrize("mask", CONTRACT, ids=["padding", "causal", "none"])
def test_the_contracts_masks_are_taken(mask):
    layer = standins.probe("encoder_layer", d_model=D, seed=1, num_heads=H)
    assert layer(torch.randn(B, T, D), mask).shape == (B, T, D)
    if mask is not None:
        assert standins.mask_problem(mask, (B, H, T, T)) is None


@pytest.mark.parametrize("mask,problem", OTHERS, ids=[why for _, why in OTHERS])
def test_other_conventions_are_refused_as_the_real_attention_refuses_or_misreads_them(mask,
                                                                                       problem):
    """The stand-in raises; the real attention raises too, or gives other numbers than with the
    contract's mask (B == num_heads here: the [B, 1, T] mask lines its batch up with the heads)."""
    assert standins.mask_problem(mask, (B, H, T, T)) == problem
    for kind in ("encoder_layer", "quiet_encoder_layer"):
        layer = standins.probe(kind, d_model=D, seed=1, num_heads=H)
        with pytest.raises(ValueError):
            layer(torch.randn(B, T, D), mask)
    attention, x = real_attention(), torch.randn(B, T, D)
    with torch.no_grad():
        right = attention(x, x, CONTRACT[0])
        try:
            wrong = attention(x, x, mask)
        except RuntimeError:
            return
    assert not torch.allclose(wrong[0, :4], right[0, :4], atol=1e-5)


def test_a_refused_mask_is_recorded_by_the_quiet_layer_for_the_message():
    layer = standins.probe("quiet_encoder_layer", d_model=D, seed=1, num_heads=H)
    with pytest.raises(ValueError):
        layer(torch.randn(B, T, D), PADS.unsqueeze(-2))
    assert layer.recorder.calls[-1]["mask"].shape == (B, 1, T)


def test_the_stand_in_layer_keeps_attention_weights_as_a_real_one():
    """d2l's encoder reads each block's self_attn.attention_weights: [B, num_heads, T, T], zero
    at the masked keys, the same numbers with and without records."""
    x = torch.randn(B, T, D)
    for kind in ("encoder_layer", "quiet_encoder_layer"):
        layer = standins.probe(kind, d_model=D, seed=1, num_heads=H)
        layer(x, CONTRACT[0])
        weights = layer.self_attn.attention_weights
        assert weights.shape == (B, H, T, T)
        assert bool((weights[0, :, :, 4:] == 0).all()) and bool((weights[0, :, :, :4] > 0).all())


def test_the_factory_records_the_arguments_the_layers_were_built_with():
    factory = standins.EncoderLayerFactory()
    factory(D, H, 20, 0.1)
    factory(D, H, 20, dropout=0.3)
    assert [call["dropout"] for call in factory.calls] == [0.1, 0.3]
    assert factory.calls[0]["num_heads"] == H
