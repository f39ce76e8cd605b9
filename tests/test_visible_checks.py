"""The visible checks catch the common wrong architectures of a layer and say which, and check
greedy decoding before the student's Transformer exists (they run in the student's kernel: here
they are called directly on the course's solution and on wrong versions of it)."""
import math

import pytest
import torch
from torch import nn

from conftest import ROOT, replace_in, solution_cells
from tfcourse.student import checks


@pytest.fixture(scope="module")
def parts():
    """The names the course's solution of 01 and 02 defines, as a notebook has them."""
    namespace = {"torch": torch, "nn": nn, "math": math, "F": torch.nn.functional}
    for assignment in ("01-attention", "02-layers"):
        code = "\n\n".join(solution_cells(assignment).values())
        exec(compile(code, f"<{assignment}>", "exec"), namespace)
    return namespace


DEC = {
    "post": None,
    "pre": ("y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
            "        y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))\n"
            "        return self.norm3(y + self.dropout(self.ffn(y)))",
            "y = y + self.dropout(self.self_attn(self.norm1(y), self.norm1(y), self_mask))\n"
            "        y = y + self.dropout(self.cross_attn(self.norm2(y), memory, memory_mask))\n"
            "        return y + self.dropout(self.ffn(self.norm3(y)))"),
    "no_cross_residual": ("y = self.norm2(y + self.dropout(self.cross_attn(",
                          "y = self.norm2(self.dropout(self.cross_attn("),
    "norms_swapped": ("y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
                      "        y = self.norm2(",
                      "y = self.norm2(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
                      "        y = self.norm1("),
}
SAYS = {"pre": "pre-norm", "no_cross_residual": "cross_attn has no residual connection",
        "norms_swapped": "LayerNorms are in each other's places"}


@pytest.mark.parametrize("variant", list(DEC))
def test_the_decoder_layer_check_names_the_wiring(parts, variant, capsys):
    code = solution_cells("02-layers")["decoder-code"]
    if DEC[variant]:
        code = replace_in(code, *DEC[variant])
    namespace = dict(parts)
    exec(code, namespace)
    if variant == "post":
        checks.decoder_layer(namespace["DecoderLayer"])
        assert "post-norm wiring" in capsys.readouterr().out
    else:
        with pytest.raises(checks.CheckFailed, match=SAYS[variant]):
            checks.decoder_layer(namespace["DecoderLayer"])


def test_the_encoder_layer_check_names_pre_norm(parts):
    code = replace_in(solution_cells("02-layers")["encoder-code"],
                      "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))\n"
                      "        return self.norm2(x + self.dropout(self.ffn(x)))",
                      "x = x + self.dropout(self.self_attn(self.norm1(x), self.norm1(x), mask))\n"
                      "        return x + self.dropout(self.ffn(self.norm2(x)))")
    namespace = dict(parts)
    exec(code, namespace)
    with pytest.raises(checks.CheckFailed, match="pre-norm"):
        checks.encoder_layer(namespace["EncoderLayer"])


def test_greedy_is_checked_on_a_stand_in_model_before_the_transformer_exists(capsys):
    namespace = {"torch": torch}
    exec(solution_cells("03-sorting")["greedy-code"], namespace)
    checks.greedy(namespace["greedy_decode"])             # no Transformer needed
    assert "never BOS" in capsys.readouterr().out
    every_step = replace_in(solution_cells("03-sorting")["greedy-code"],
                            "model.decode(out, memory)", "model.decode(out, model.encode(src))")
    exec(every_step, namespace)
    with pytest.raises(checks.CheckFailed, match="ran the encoder 7 times"):
        checks.greedy(namespace["greedy_decode"])


def test_the_notebook_calls_the_greedy_check_without_a_model():
    text = (ROOT / "source" / "03-sorting" / "sorting.ipynb").read_text()
    assert "check.greedy(greedy_decode)" in text and "check.greedy(greedy_decode, Transformer" \
        not in text
