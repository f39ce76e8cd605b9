"""The visible checks of 02-layers: positional encoding, feed-forward, encoder and decoder
layers, and the encoder models (checks.py gathers every check)."""
from __future__ import annotations

import itertools
import math

import torch

from tfcourse.student import examples
from tfcourse.student.checking import (_call, _checked, _close, _count, _differs, _example,
                                       _expected, _fail, _fixed, _module, _ok, _shape, _values)


# -- 02: layers ----------------------------------------------------------------------------------
@_checked
def positions(positional_encoding):
    pe = _call("positional_encoding(50, 16)", positional_encoding, 50, 16)
    _shape(pe, (50, 16), "positional_encoding(50, 16)")
    _ok("shape [50, 16]")
    first = torch.tensor([0.0, 1.0] * 8)
    if not _close(pe[0], first):
        _fail("position 0 should be [0, 1, 0, 1, ...] (sin 0 on even columns, cos 0 on odd)")
    if not _close(pe[1, :2], torch.tensor([math.sin(1.0), math.cos(1.0)])):
        _fail("columns 0 and 1 of position 1 should be sin(1) and cos(1)")
    rate = 10000 ** (-2 / 16)
    if not _close(pe[3, 2:4], torch.tensor([math.sin(3 * rate), math.cos(3 * rate)])):
        _fail("columns 2 and 3 should turn at 1/10000^(2/d_model) of the speed of columns 0 and 1")
    _ok("sin on even columns, cos on odd, with the paper's frequencies")
    _values("positions", positional_encoding,
            hint="column pair i turns at 1/10000^(2i/d_model): divide the exponent by d_model, "
                 "and step it by 2 per pair of columns")


@examples.example("positions")
def _positions_example(positional_encoding, names=None) -> dict:
    return {"table": _call("positional_encoding(7, 10)", positional_encoding, 7, 10)}


@_checked
def ffn(FeedForward):
    block = _call("FeedForward(32, 128)", FeedForward, 32, 128)
    if _count(block) != 8352:
        _fail("FeedForward(32, 128) should have 8,352 parameters, has {n}",
              n=f"{_count(block):,}")
    for name, shape in (("linear1", (128, 32)), ("linear2", (32, 128))):
        layer = getattr(block, name, None)
        if layer is None or tuple(layer.weight.shape) != shape:
            _fail("{name} should be nn.Linear with a weight of shape {shape}", name=name,
                  shape=list(shape))
    _ok("linear1 32 -> 128, linear2 128 -> 32: 8,352 parameters")
    _shape(_call("FeedForward", block, _fixed(0, 2, 5, 32)), (2, 5, 32), "its output")
    _ok("the output keeps the input's shape")
    got = _example("ffn", FeedForward)
    if bool((got["output"] >= 0).all()) and _differs("ffn", got):
        _fail("every output is >= 0: the ReLU goes between linear1 and linear2, not after "
              "linear2")
    _values("ffn", got=got, hint="linear1, then ReLU, then linear2 (both with their bias)")


@examples.example("ffn")
def _ffn_example(FeedForward, names=None) -> dict:
    block, names = _module("FeedForward(6, 10)", FeedForward, 6, 10, names=names)
    with torch.no_grad():
        return {"output": _call("FeedForward", block, examples.pattern("x", 2, 3, 6)),
                "names": names}


class _Adds(torch.nn.Module):
    """A stand-in sublayer: its output is one fixed vector at every position, whatever the input,
    so that what is left to see is the layer's own wiring (residuals, norms, their order)."""

    def __init__(self, vector):
        super().__init__()
        self.vector = vector

    def forward(self, x, *args, **kwargs):
        return self.vector.expand_as(x).clone()    # a layer may add to it in place


def _is_norm(module, width: int) -> bool:
    """An nn.LayerNorm, or a module of one's make with its weight and bias [width]."""
    weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
    return isinstance(module, torch.nn.Module) and all(
        isinstance(p, torch.Tensor) and tuple(p.shape) == (width,) for p in (weight, bias))


def _wiring(layer, names, run, x) -> None:
    """Check the layer is post-norm, norm_i(h + sublayer_i(h)) in order, with stand-ins in its
    sublayers (`names`, in order) and distinct LayerNorms; `run(layer)` gives its output."""
    norms = [getattr(layer, f"norm{i + 1}", None) for i in range(len(names))]
    if not all(_is_norm(norm, x.shape[-1]) for norm in norms):
        _fail("the layer should have LayerNorms named {names}",
              names=", ".join(f"norm{i + 1}" for i in range(len(names))))
    kept = {name: getattr(layer, name, None) for name in names}
    saved = [(norm.weight.detach().clone(), norm.bias.detach().clone()) for norm in norms]
    width = x.shape[-1]
    vectors = [_fixed(20 + i, width) * 2 for i in range(len(names))]
    try:
        with torch.no_grad():
            for index, norm in enumerate(norms):
                norm.weight.copy_(1 + 0.3 * _fixed(30 + index, width))
                norm.bias.copy_(0.2 * _fixed(40 + index, width))
            for name, vector in zip(names, vectors):
                setattr(layer, name, _Adds(vector))
            out = run(layer)
            expected, variants = _wirings(x, norms, vectors, names)
    finally:
        with torch.no_grad():
            for norm, (weight, bias) in zip(norms, saved):
                norm.weight.copy_(weight)
                norm.bias.copy_(bias)
        for name, module in kept.items():
            setattr(layer, name, module)
    if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
        _fail("the layer's output should have the shape of its input")
    if _close(out, expected, atol=1e-4):
        return
    for candidate, template, *name in variants:
        if _close(out, candidate, atol=1e-4):
            _fail(template, name=name[0] if name else "")
    _fail("the layer is not wired as norm(x + dropout(sublayer(x))) for each sublayer in turn "
          "(checked with simple stand-ins in place of its sublayers)")


def _wirings(x, norms, vectors, names) -> tuple:
    """What the layer gives on `x` when wired right (post-norm, each sublayer's output the fixed
    vector it adds), and the outputs of the usual wrong wirings, each with its message (and the
    sublayer it names)."""
    def wired(pre=False, residual=None, order=None):
        h = x
        for index in range(len(names)):
            norm = norms[(order or range(len(names)))[index]]
            keep = residual is None or residual[index]
            base = h if keep else 0
            h = base + vectors[index].expand_as(h) if pre else norm(
                base + vectors[index].expand_as(h))
        return h

    variants = [(wired(pre=True), "this is pre-norm (x + sublayer(norm(x))); the "
                                  "assignment's layer is post-norm: norm(x + "
                                  "dropout(sublayer(x)))"),
                (wired(residual=[False] * len(names)),
                 "the residual connections are missing: add each sublayer's input to its "
                 "output before the norm")]
    for index in range(len(names)):
        variants.append((wired(residual=[i != index for i in range(len(names))]),
                         "sublayer {name} has no residual connection", names[index]))
    for order in itertools.permutations(range(len(names))):
        if list(order) != list(range(len(names))):
            variants.append((wired(order=order), "the LayerNorms are in each other's "
                                                 "places: norm1 goes after the first "
                                                 "sublayer, norm2 after the second"))
    return wired(), variants


@_checked
def encoder_layer(EncoderLayer):
    layer = _call("EncoderLayer(32, 4, 128, 0.1)", EncoderLayer, 32, 4, 128, 0.1)
    if _count(layer) != 12704:
        _fail("EncoderLayer(32, 4, 128) should have 12,704 parameters, has {n}",
              n=f"{_count(layer):,}")
    _ok("12,704 parameters")
    layer.eval()
    x = _fixed(0, 2, 10, 32)
    out = _call("EncoderLayer", layer, x)
    _shape(out, (2, 10, 32), "the output for x [2, 10, 32]")
    if not torch.equal(out, _call("EncoderLayer", layer, x)):
        _fail("in eval mode the layer should give the same output twice: is dropout off in eval?")
    _ok("the output is [2, 10, 32], and repeatable in eval mode")
    _wiring(layer, ["self_attn", "ffn"], lambda module: module(x), x)
    _ok("post-norm wiring: norm1(x + self-attention), then norm2(x + feed-forward)")
    got = _example("encoder", EncoderLayer)
    if not _differs("encoder", got, ["output"]) and \
            not _differs("encoder", {"output": got["masked"]}, ["output"]):
        _fail("with a padding mask the output is the same as without it: the layer ran its "
              "self-attention without the mask (pass `mask` on to self_attn)")
    _values("encoder", got=got, hint="norm1(x + dropout(self_attn(x, x, mask))), then "
                                     "norm2(x + dropout(ffn(x)))")


def _pads(*lengths, total: int):
    """A padding mask [B, 1, 1, total] that blocks the keys after each sequence's length."""
    return torch.tensor([[i >= n for i in range(total)] for n in lengths])[:, None, None, :]


@examples.example("encoder")
def _encoder_example(EncoderLayer, names=None) -> dict:
    layer, names = _module("EncoderLayer(6, 2, 10, 0.1)", EncoderLayer, 6, 2, 10, 0.1,
                           names=names)
    x = examples.pattern("x", 2, 5, 6)
    with torch.no_grad():
        return {"output": _call("EncoderLayer", layer, x),
                "masked": _call("EncoderLayer", layer, x, _pads(4, 3, total=5)), "names": names}


@_checked
def decoder_layer(DecoderLayer):
    layer = _call("DecoderLayer(32, 4, 128, 0.1)", DecoderLayer, 32, 4, 128, 0.1)
    if _count(layer) != 16992:
        _fail("DecoderLayer(32, 4, 128) should have 16,992 parameters, has {n}",
              n=f"{_count(layer):,}")
    _ok("16,992 parameters")
    layer.eval()
    y, memory = _fixed(0, 2, 7, 32), _fixed(1, 2, 10, 32)
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
    out = _call("DecoderLayer", layer, y, memory, causal)
    _shape(out, (2, 7, 32), "the output for y [2, 7, 32] and memory [2, 10, 32]")
    changed = y.clone()
    changed[:, 6] += 1.0
    after = _call("DecoderLayer", layer, changed, memory, causal)
    if not torch.allclose(out[:, :6], after[:, :6], atol=1e-5):
        _fail("changing target token 6 changed earlier outputs: use self_mask in self-attention")
    other = _call("DecoderLayer", layer, y, memory + 1.0, causal)
    if torch.allclose(out, other, atol=1e-5):
        _fail("the output does not depend on the memory: cross-attention should take its keys "
              "and values from it")
    _ok("the output is [2, 7, 32], causal, and reads the memory")
    _wiring(layer, ["self_attn", "cross_attn", "ffn"], lambda module: module(y, memory, causal), y)
    _ok("post-norm wiring: norm1 after self-attention, norm2 after cross-attention, norm3 after "
        "the feed-forward block")
    got = _example("decoder", DecoderLayer)
    if not _differs("decoder", got, ["output"]) and \
            not _differs("decoder", {"output": got["masked"]}, ["output"]):
        _fail("with a memory_mask the output is the same as without it: pass memory_mask on to "
              "cross-attention")
    _values("decoder", got=got, hint="self-attention with self_mask, cross-attention to the "
                                     "memory with memory_mask, then the feed-forward block, each "
                                     "as norm(y + dropout(sublayer))")


@examples.example("decoder")
def _decoder_example(DecoderLayer, names=None) -> dict:
    layer, names = _module("DecoderLayer(6, 2, 10, 0.1)", DecoderLayer, 6, 2, 10, 0.1,
                           names=names)
    y, memory = examples.pattern("y", 2, 4, 6), examples.pattern("memory", 2, 5, 6)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    with torch.no_grad():
        return {"output": _call("DecoderLayer", layer, y, memory, causal),
                "masked": _call("DecoderLayer", layer, y, memory, causal, _pads(4, 2, total=5)),
                "names": names}


@_checked
def classifier(EncoderClassifier):
    got = _example("classifier", EncoderClassifier)      # first: its names, its layers
    model = _call("EncoderClassifier", EncoderClassifier, vocab_size=12, num_classes=3,
                  d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1, pad_id=0)
    model.eval()
    tokens = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    out = _call("EncoderClassifier", model, tokens)
    _shape(out, (2, 3), "the output for 2 sequences and 3 classes")
    if not torch.allclose(out.exp().sum(-1), torch.ones(2), atol=1e-4):
        _fail("the output should be log-probabilities: exp(output) sums to 1 over the classes")
    _ok("log-probabilities of shape [2, 3]")
    longer = torch.tensor([[4, 5, 6, 0, 0, 0, 0], [7, 8, 9, 10, 11, 0, 0]])
    if not torch.allclose(out, _call("EncoderClassifier", model, longer), atol=1e-5):
        _fail("adding padding changed the prediction: mask the pad keys and leave pads out of "
              "the pooling")
    _ok("extra padding does not change the prediction")
    _encoder_model_values("classifier", got,
                          hint="embed and multiply by sqrt(d_model), add the positions, run the "
                               "layers with the padding mask, average the real positions only, "
                               "then the head and log_softmax")


def _encoder_model_values(name: str, got: dict, hint: str) -> None:
    if _differs(name, got) and "sqrt_d_model" in got and not _differs(
            name, {"output": got["sqrt_d_model"]}, ["output"]):
        _fail("the embeddings are not multiplied by sqrt(d_model): with that factor your model "
              "gives the solution's numbers")
    _values(name, got=got, hint=hint)


def _scaled_embedding(model, factor: float):
    """The model's embedding made to return its vectors times `factor` (for a model that forgot
    a factor: with it, does it give the expected numbers?), or None."""
    embedding = getattr(model, "embedding", None)
    if not isinstance(embedding, torch.nn.Embedding):
        return None
    original = embedding.forward
    return examples.attribute_swapped(embedding, "forward",
                                      lambda tokens: original(tokens) * factor)


def _model_example(what, model_class, names, run, **kwargs) -> dict:
    model, names = _module(what, model_class, names=names, **kwargs)
    with torch.no_grad():
        out = {"output": run(model), "names": names}

        scaled = _scaled_embedding(model, math.sqrt(kwargs["d_model"]))
        if scaled is not None:
            with scaled:
                out["sqrt_d_model"] = run(model)
    return out


_TOKENS = [[4, 5, 6, 0, 0, 0], [7, 8, 9, 10, 11, 0]]


@examples.example("classifier")
def _classifier_example(EncoderClassifier, names=None) -> dict:
    return _model_example("EncoderClassifier", EncoderClassifier, names,
                          lambda model: _call("EncoderClassifier", model, torch.tensor(_TOKENS)),
                          vocab_size=12, num_classes=3, d_model=6, num_heads=2, num_layers=2,
                          d_ff=10, dropout=0.1, pad_id=0)


@_checked
def regressor(EncoderRegressor):
    got = _example("regressor", EncoderRegressor)        # first: its names, its layers
    model = _call("EncoderRegressor", EncoderRegressor, vocab_size=12, d_model=32, num_heads=4,
                  num_layers=2, d_ff=64, dropout=0.1, pad_id=0)
    head = getattr(model, "head", None)
    if not isinstance(head, torch.nn.Linear) or (head.in_features, head.out_features) != (32, 1):
        _fail("the head should be nn.Linear(d_model, 1): one output, the prediction")
    model.eval()
    tokens = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])
    out = _call("EncoderRegressor", model, tokens)
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (2, 1):
        _fail("the output should be one number per sequence, shape [2], not [2, 1]: drop the "
              "head's last axis (squeeze(-1))")
    _shape(out, (2,), "the output for 2 sequences")
    if not out.is_floating_point():
        _fail("the output should be a floating-point tensor of predictions")
    _ok("a linear head with one output; predictions of shape [2]")
    changed = tokens.clone()
    changed[:, 1] = 3
    if torch.allclose(out, _call("EncoderRegressor", model, changed), atol=1e-6):
        _fail("the prediction did not change when a real token changed: it must depend on the "
              "tokens")
    longer = torch.tensor([[4, 5, 6, 0, 0, 0, 0], [7, 8, 9, 10, 11, 0, 0]])
    if not torch.allclose(out, _call("EncoderRegressor", model, longer), atol=1e-5):
        _fail("adding padding changed the prediction: mask the pad keys and leave pads out of "
              "the pooling")
    _ok("the prediction depends on the tokens, and extra padding does not change it")
    right = _expected("regressor", "output")
    for activation, name in ((torch.relu, "ReLU"), (torch.sigmoid, "sigmoid")):
        output = got.get("output")
        if right is not None and isinstance(output, torch.Tensor) and \
                _differs("regressor", got) and _close(output, activation(right)):
            _fail("the prediction goes through a {name}: the head's output takes no activation, "
                  "since the target can be any number", name=name)
    _encoder_model_values("regressor", got,
                          hint="embed and multiply by sqrt(d_model), add the positions, run the "
                               "layers with the padding mask, average the real positions only "
                               "(not their sum, not the first position), then the head with no "
                               "activation")


@examples.example("regressor")
def _regressor_example(EncoderRegressor, names=None) -> dict:
    return _model_example("EncoderRegressor", EncoderRegressor, names,
                          lambda model: _call("EncoderRegressor", model, torch.tensor(_TOKENS)),
                          vocab_size=12, d_model=6, num_heads=2, num_layers=2, d_ff=10,
                          dropout=0.1, pad_id=0)
