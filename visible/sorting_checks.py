"""The visible checks of 03-sorting: the whole Transformer, the learning rate schedule, teacher
forcing, greedy decoding and the trained model (checks.py gathers every check)."""
from __future__ import annotations

import math

import torch

from tfcourse.student import examples
from tfcourse.student.checking import (_call, _checked, _close, _count, _differs, _example, _fail,
                                       _module, _ok, _shape, _values)

from .layer_checks import _pads, _scaled_embedding

BOS = 10            # the start token of 03-sorting: the digits are 0-9


# -- 03: sorting ---------------------------------------------------------------------------------
@_checked
def transformer(Transformer):
    model = _call("Transformer(11)", Transformer, 11)
    if _count(model) != 59744:
        _fail("Transformer(11) should have 59,744 parameters, has {n}", n=f"{_count(model):,}")
    embedding = getattr(model, "embedding", None)
    if not isinstance(embedding, torch.nn.Embedding) or embedding.weight.numel() != 352:
        _fail("model.embedding should be nn.Embedding(11, 32): 352 numbers")
    _ok("59,744 parameters, 352 of them in the embedding")
    model.eval()
    src, tgt_in = torch.randint(0, 10, (2, 10)), torch.randint(0, 11, (2, 8))
    logits = _call("Transformer", model, src, tgt_in)
    _shape(logits, (2, 8, 11), "the logits for src [2, 10] and tgt_in [2, 8]")
    changed = tgt_in.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 10
    if not torch.allclose(logits[:, :7], _call("Transformer", model, src, changed)[:, :7],
                          atol=1e-5):
        _fail("changing target token 7 changed earlier logits: decode needs its causal mask")
    _ok("logits [2, 8, 11], and no position sees the future")
    _expect_layers_chained(model, src)
    got = _example("transformer", Transformer)
    if _differs("transformer", got, ["logits"]) and "sqrt_d_model" in got and not _differs(
            "transformer", {"logits": got["sqrt_d_model"]}, ["logits"]):
        _fail("the embeddings are not multiplied by sqrt(d_model) in embed: with that factor "
              "your model gives the solution's numbers")
    if not _differs("transformer", got, ["logits"]) and _differs("transformer", got, ["grad"]):
        _fail("the logits are right but the embedding's gradient is not: the output layer must "
              "use the embedding's weight itself, tied (not detached, not a copy)")
    if _differs("transformer", got, ["encoded"]) and not _differs(
            "transformer", got, ["encoded_plain"]) and _close(got["encoded"],
                                                          got["encoded_plain"]):
        _fail("encode(src, src_mask) gave the same memory with a padding mask as without: pass "
              "src_mask on to every encoder layer")
    _values("transformer", got=got,
            hint="embed: embedding times sqrt(d_model) plus the positions; encode with src_mask; "
                 "decode with the causal mask inside; the logits from the embedding's weight")


def _expect_layers_chained(model, src):
    """Each encoder layer reads the previous one's output: with the first layer's output changed
    (a forward hook), the memory changes. Judged only where the hook ran (a model that calls its
    layers another way is left to the other checks)."""
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, torch.nn.ModuleList) or len(encoder) < 2:
        return
    ran = []

    def shift(module, inputs, output):
        if not isinstance(output, torch.Tensor) or not output.is_floating_point():
            return None
        ran.append(True)
        wave = torch.cos(torch.arange(output.numel(), dtype=output.dtype)).reshape(output.shape)
        return output + 0.5 * wave

    with torch.no_grad():
        memory = _call("Transformer.encode", getattr(model, "encode"), src)
        hook = encoder[0].register_forward_hook(shift)
        try:
            shifted = _call("Transformer.encode", getattr(model, "encode"), src)
        finally:
            hook.remove()
    if ran and isinstance(memory, torch.Tensor) and isinstance(shifted, torch.Tensor) and \
            memory.shape == shifted.shape and torch.allclose(memory, shifted, atol=1e-6):
        _fail("changing the first encoder layer's output did not change encode's memory: each "
              "encoder layer reads the embedding, so only the last one counts; each layer must "
              "read the previous layer's output (x = layer(x, src_mask))")
    _ok("each encoder layer reads the previous layer's output")


@examples.example("transformer")
def _transformer_example(Transformer, names=None) -> dict:
    model, names = _module("Transformer(11, 8, 2, 1, 16)", Transformer, 11, d_model=8,
                           num_heads=2, num_layers=1, d_ff=16, dropout=0.1, names=names)
    src = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 0, 0]])
    tgt_in = torch.tensor([[10, 1, 1, 3, 4], [10, 0, 0, 2, 3]])
    pads = _pads(6, 4, total=6)
    out = {"names": names}
    # Logits count up to a constant per row (log-probabilities are fine too): the example keeps
    # their log_softmax, and its gradient weights sum to zero over the vocabulary, so that a
    # constant per row changes neither.
    logits = _call("Transformer", model, src, tgt_in)
    if isinstance(logits, torch.Tensor) and logits.requires_grad:
        model.zero_grad()
        pattern = examples.pattern("grad", *logits.shape)
        (logits * (pattern - pattern.mean(-1, keepdim=True))).sum().backward()
        grad = model.embedding.weight.grad if isinstance(
            getattr(model, "embedding", None), torch.nn.Embedding) else None
        out["grad"] = grad.clone() if grad is not None else torch.zeros(0)
    with torch.no_grad():
        out["logits"] = _log_probs(_call("Transformer", model, src, tgt_in))
        out["encoded"] = _call("Transformer.encode", getattr(model, "encode"), src, pads)
        out["encoded_plain"] = _call("Transformer.encode", getattr(model, "encode"), src)
        scaled = _scaled_embedding(model, math.sqrt(8))
        if scaled is not None:
            with scaled:
                out["sqrt_d_model"] = _log_probs(_call("Transformer", model, src, tgt_in))
    return out


def _log_probs(logits):
    """log_softmax over the vocabulary of what the model returned (anything else as it is)."""
    if isinstance(logits, torch.Tensor) and logits.is_floating_point() and logits.dim() > 0:
        return logits.log_softmax(-1)
    return logits


@_checked
def noam(noam_rate):
    rates = [_call("noam_rate", noam_rate, step, 32, 100) for step in (1, 50, 100, 200, 400)]
    peak = 32 ** -0.5 * 100 ** -0.5
    if not math.isclose(rates[2], peak, rel_tol=1e-4):
        _fail("at step = warmup the rate should be d_model^-0.5 * warmup^-0.5 = {peak:.6f}, "
              "not {got:.6f}", peak=peak, got=rates[2])
    if not rates[0] < rates[1] < rates[2] > rates[3] > rates[4]:
        _fail("the rate should rise until step = warmup, then fall")
    _ok("the rate rises to {peak:.5f} at step 100 and then decays", peak=peak)
    _values("noam", noam_rate, hint="d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)")


@examples.example("noam")
def _noam_example(noam_rate, names=None) -> dict:
    return {"rates": [float(_call("noam_rate", noam_rate, step, 16, 40))
                      for step in (1, 7, 39, 40, 41, 300, 5000)]}


@_checked
def teacher(shift_right, smoothing_floor):
    got = _call("shift_right", shift_right, torch.tensor([[3, 1, 4], [1, 5, 9]]), BOS)
    if not isinstance(got, torch.Tensor) or not torch.equal(
            got, torch.tensor([[10, 3, 1], [10, 1, 5]])):
        _fail("shift_right([[3, 1, 4], [1, 5, 9]], bos=10) should be [[10, 3, 1], [10, 1, 5]]")
    _ok("shift_right puts BOS first and drops the last token")
    floor = _call("smoothing_floor", smoothing_floor, 0.1, 11)
    if not math.isclose(floor, 0.5140, abs_tol=5e-4):
        _fail("smoothing_floor(0.1, 11) should be about 0.514, not {got:.4f}", got=floor)
    _ok("smoothing_floor(0.1, 11) = {floor:.3f}", floor=floor)


class _CountingModel(torch.nn.Module):
    """A stand-in encoder-decoder (no Transformer needed): after BOS it writes the first source
    token, then each next token is the last one plus 3 (mod 10); BOS always scores highest."""

    def __init__(self):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
        self.encodes = 0

    def encode(self, src, src_mask=None, *args, **kwargs):
        self.encodes += 1
        return torch.nn.functional.one_hot(src, 11).float()

    def decode(self, tgt_in, memory, memory_mask=None, *args, **kwargs):
        first = memory[:, :1].argmax(-1).expand_as(tgt_in)
        following = torch.where(tgt_in >= 10, first, (tgt_in + 3) % 10)
        logits = torch.nn.functional.one_hot(following, 11).float() * 1.5
        logits[..., BOS] = 9.0
        return logits

    def forward(self, src, tgt_in, *args, **kwargs):
        return self.decode(tgt_in, self.encode(src))


@_checked
def greedy(greedy_decode, model=None):
    """Greedy decoding on a small stand-in model (`model` is not needed: the check brings its
    own, so it runs before your Transformer is written)."""
    stand_in = _CountingModel().eval()
    src = torch.tensor([[4, 1, 7, 7, 0, 2], [9, 9, 3, 0, 5, 6]])
    out = _call("greedy_decode", greedy_decode, stand_in, src, BOS)
    _shape(out, (2, 6), "greedy_decode on src [2, 6]")
    if (out == BOS).any():
        _fail("greedy_decode emitted BOS, which this model rates highest: BOS only starts the "
              "decoder's input, so leave it out of the choice")
    expected = torch.tensor([[4, 7, 0, 3, 6, 9], [9, 2, 5, 8, 1, 4]])
    if not torch.equal(out.long(), expected):
        _fail("on a model whose next token is the last one plus 3, greedy_decode wrote {got} "
              "instead of {expected}: take the argmax of the last position at each step and "
              "append it", got=out.tolist(), expected=expected.tolist())
    if stand_in.encodes != 1:
        _fail("greedy_decode ran the encoder {n} times: run model.encode once and reuse the "
              "memory", n=stand_in.encodes)
    _shape(_call("greedy_decode", greedy_decode, stand_in, src, BOS, 3), (2, 3),
           "greedy_decode(..., length=3)")
    _ok("one token per position from the last position's argmax, never BOS, the encoder run "
        "once, and `length` respected")


@_checked
def trained(accuracy: float, threshold: float = 0.99):
    if accuracy <= threshold:
        _fail("greedy decoding sorted {acc:.1%} of the sequences; the goal is more than "
              "{goal:.0%}", acc=accuracy, goal=threshold)
    _ok("greedy decoding sorts {acc:.1%} of fresh sequences", acc=accuracy)
