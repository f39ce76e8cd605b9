"""Hidden checks of assignment 02-layers: positions, feed-forward, encoder and decoder layers, classifier.

The layers are checked with stand-ins in place of their attention and feed-forward sublayers (the
stand-ins record what they receive), so a layer's own wiring (residuals, post-norm, masks, memory) is
what is graded, and a bug in FeedForward costs FeedForward's points only.
"""
import math

import torch

from ..framework import Fail, as_tensor, check, close, expect_shape, swapped
from ..sandbox import standins

A = "02-layers"
D, H, FF = 12, 3, 20


# -- positional encoding -------------------------------------------------------------------------
def _pe_variants(T, d):
    position = torch.arange(T, dtype=torch.float64)[:, None]
    def table(rate, first=torch.sin, second=torch.cos):
        out = torch.zeros(T, d, dtype=torch.float64)
        out[:, 0::2], out[:, 1::2] = first(position * rate), second(position * rate)
        return out
    even = torch.arange(0, d, 2, dtype=torch.float64)
    paper = 10000 ** (-even / d)
    return [
        (table(paper, torch.cos, torch.sin), "sin and cos are swapped: sin goes on the even columns"),
        (table(10000 ** (-torch.arange(d // 2, dtype=torch.float64) / d)),
         "the frequencies are off: column pair i turns at 1/10000^(2i/d_model)"),
        (table(10000 ** (-even)), "the frequencies are off: divide the exponent by d_model"),
        (table(1000 ** (-even / d)), "the base of the frequencies should be 10000"),
    ]


@check(A, "positions.shape")
def positions_shape(ctx):
    for T, d in ((9, 14), (1, 6), (40, 32)):
        expect_shape(ctx.call("positional_encoding", T, d), (T, d), f"positional_encoding({T}, {d})")


@check(A, "positions.values")
def positions_values(ctx):
    for T, d in ((50, 16), (9, 14)):
        got = expect_shape(ctx.call("positional_encoding", T, d), (T, d),
                           f"positional_encoding({T}, {d})")
        expected = ctx.ref["positional_encoding"](T, d)
        if not close(got, expected, 1e-4, 1e-4):
            for variant, hint in _pe_variants(T, d):
                if close(got, variant, 1e-4, 1e-4):
                    raise Fail("positional_encoding({T}, {d}) is not the paper's table: {hint}",
                               T=T, d=d, hint=hint)
            ctx.expect_close(got, expected, f"positional_encoding({T}, {d})")


# -- feed-forward ----------------------------------------------------------------------------------
def _outside(names, skipped):
    """The names that do not lie under one of the `skipped` submodule paths."""
    return {name: value for name, value in names.items()
            if not any(name == path or name.startswith(path + ".") for path in skipped)}


def _names_and_shapes(ctx, handle, reference, what, skipped=()):
    """The parameters' names and shapes match the reference's, outside the `skipped` submodules
    (the parts graded on their own, which a layer only has to contain)."""
    expected = _outside({name: list(p.shape) for name, p in reference.named_parameters()}, skipped)
    got = _outside(handle.parameters, skipped)
    if got != expected:
        missing = sorted(set(expected) - set(got))
        unexpected = sorted(set(got) - set(expected))
        wrong = sorted(n for n in set(got) & set(expected) if got[n] != expected[n])
        raise Fail("{what}'s parameters do not match the assignment (missing: {missing}; "
                   "unexpected: {unexpected}; wrong shape: {wrong})", what=what,
                   missing=missing or "none", unexpected=unexpected or "none",
                   wrong=wrong or "none")


def _load(student, reference, cls, skipped=(), strict=True) -> bool:
    """The reference's weights into the student's module, outside the `skipped` submodules.

    Whether they loaded; when the names do not match, a strict load fails the check, while a
    check of behaviour only (strict=False) goes on with the student's own weights."""
    missing, unexpected = student.load(_outside(reference.state_dict(), skipped))
    missing = list(_outside(dict.fromkeys(missing), skipped))
    if (missing or unexpected) and not strict:
        return False
    if missing or unexpected:
        raise Fail("cannot load the reference's weights into {cls} by name (missing: {missing}; "
                   "unexpected: {unexpected})", cls=cls, missing=missing or "none",
                   unexpected=unexpected or "none")
    return True


def _loaded(ctx, cls, *args, seed=0, **kwargs):
    """The student's module and the reference's, with the reference's weights in both."""
    reference = ctx.reference_module(cls, *args, seed=seed, **kwargs)
    student = ctx.new(cls, *args, seed=seed, **kwargs)
    _load(student, reference, cls)
    return reference, student


@check(A, "ffn.structure")
def ffn_structure(ctx):
    handle = ctx.new("FeedForward", D, FF)
    _names_and_shapes(ctx, handle, ctx.reference_module("FeedForward", D, FF), "FeedForward(12, 20)")


@check(A, "ffn.values")
def ffn_values(ctx):
    ctx.seed(31)
    reference, student = _loaded(ctx, "FeedForward", D, FF, seed=32)
    x = ctx.randn(2, 5, D)
    with torch.no_grad():
        expected = reference(x)
        relu_last = reference.linear2(reference.linear1(x)).relu()
    got = student.run(x)
    if close(as_tensor(got, "the output"), relu_last, ctx.atol, ctx.rtol):
        raise Fail("the ReLU goes between linear1 and linear2, not after linear2")
    ctx.expect_close(got, expected, "FeedForward on x [2, 5, 12]")


# -- encoder and decoder layers ------------------------------------------------------------------
# A layer is built with a stand-in in place of the student's FeedForward class, and checked with
# stand-ins in place of its sublayers, so that a bug in FeedForward costs FeedForward's points only.
STAND_IN_FFN = {"FeedForward": "FeedForwardFactory"}


def _with_probes(ctx, cls, paths, seed, dropout=0.3, strict=True):
    """Student and reference layers with reference weights, their sublayers replaced by stand-ins.

    With strict=False (checks of behaviour), the student's layer keeps its own weights when the
    reference's cannot be loaded by name; then `reference` is None."""
    reference = ctx.reference_module(cls, D, H, FF, dropout, seed=seed)
    student = ctx.new(cls, D, H, FF, dropout, seed=seed, swap_globals=STAND_IN_FFN)
    probes = {}
    for offset, path in enumerate(paths):
        kind = "feed_forward" if path == "ffn" else "attention"
        handle, twin = ctx.probe(kind, d_model=D, seed=100 + 10 * offset)
        student.swap(path, handle)
        setattr(reference, path, twin)
        probes[path] = handle
    if not _load(student, reference, cls, skipped=paths, strict=strict):
        reference = None
    return reference, student, probes


def _layer_params(ctx, cls, count, own):
    """The layer's parameters, leaving its FeedForward aside (FeedForward is graded on its own)."""
    handle = ctx.new(cls, 32, 4, 128, 0.1, swap_globals=STAND_IN_FFN)
    if not any(name == "ffn" for name, _, _ in handle.info.get("children", [])):
        raise Fail("{cls} has no submodule named ffn: keep its FeedForward(d_model, d_ff) in "
                   "self.ffn", cls=cls)
    reference = ctx.reference_module(cls, 32, 4, 128, 0.1)
    got = sum(math.prod(shape) for shape in _outside(handle.parameters, ["ffn"]).values())
    if got != own:
        raise Fail("{cls}(32, 4, 128) should have {count:,} parameters: {own:,} of its own (the "
                   "attention and the LayerNorms) and its FeedForward's; it has {n:,} of its own",
                   cls=cls, count=count, own=own, n=got)
    _names_and_shapes(ctx, handle, reference, cls, skipped=["ffn"])


def _encoder_variants(reference, x, mask):
    attn, ffn, n1, n2 = reference.self_attn, reference.ffn, reference.norm1, reference.norm2
    with torch.no_grad():
        pre = x + attn(n1(x), n1(x), mask)
        pre = pre + ffn(n2(pre))
        no_residual = n2(ffn(n1(attn(x, x, mask))))
        first_only = n1(x + attn(x, x, mask))
        first_only = n2(ffn(first_only))
    return [(pre, "this is pre-norm (norm, sublayer, add); the paper's layer is post-norm: "
                  "norm(x + dropout(sublayer(x)))"),
            (no_residual, "the residual connections are missing: add each sublayer's input to its "
                          "output before the norm"),
            (first_only, "the feed-forward sublayer has no residual connection")]


def _match_hint(got, variants, ctx):
    for candidate, hint in variants:
        if isinstance(got, torch.Tensor) and close(got, candidate, ctx.atol, ctx.rtol):
            return hint
    return ""


def _same_mask(given, mask: torch.Tensor, weights_shape) -> bool:
    """Whether `given` blocks what `mask` blocks in attention weights of `weights_shape` [B, h, Tq,
    Tk]: a mask passed on as it was, or reshaped or expanded to the same effect."""
    if not isinstance(given, torch.Tensor):
        return False
    try:        # (torch.broadcast_shapes would be simpler, but its first call takes seconds)
        given, mask, _ = torch.broadcast_tensors(given.bool(), mask.bool(),
                                                 torch.empty(weights_shape, dtype=torch.bool))
    except RuntimeError:
        return False
    return given.dim() == len(weights_shape) and torch.equal(given, mask)


@check(A, "encoder.params")
def encoder_params(ctx):
    _layer_params(ctx, "EncoderLayer", 12704, 12704 - 8352)


@check(A, "encoder.values")
def encoder_values(ctx):
    ctx.seed(41)
    reference, student, _ = _with_probes(ctx, "EncoderLayer", ("self_attn", "ffn"), seed=42)
    x = ctx.randn(2, 5, D)
    got = student.run(x)
    with torch.no_grad():
        expected = reference(x)
    ctx.expect_close(got, expected, "EncoderLayer on x [2, 5, 12] (eval mode)",
                     hint=_match_hint(got, _encoder_variants(reference, x, None), ctx))


@check(A, "encoder.mask")
def encoder_mask(ctx):
    ctx.seed(43)
    reference, student, probes = _with_probes(ctx, "EncoderLayer", ("self_attn", "ffn"), seed=44,
                                              strict=False)
    x = ctx.randn(2, 6, D)
    mask = torch.zeros(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 4:] = True
    got = student.run(x, mask)
    calls = probes["self_attn"].calls()
    if not calls:
        raise Fail("the layer never called self_attn")
    given = calls[-1].get("mask")
    if given is None:
        raise Fail("the layer ignores its mask: self_attn was called without it")
    if not _same_mask(given, mask, (2, 1, 6, 6)):
        raise Fail("self_attn did not receive the layer's mask as it was given")
    if reference is not None:
        with torch.no_grad():
            expected = reference(x, mask)
        ctx.expect_close(got, expected, "EncoderLayer with a padding mask")


def _dropout_check(ctx, cls, paths, args, extra=()):
    reference, student, _ = _with_probes(ctx, cls, paths, seed=51, dropout=0.5)
    with torch.no_grad():
        expected = reference(*args, *extra)
    first = as_tensor(student.run(*args, *extra, seed=1), "the output")
    second = as_tensor(student.run(*args, *extra, seed=2), "the output")
    if not close(first, second, ctx.atol, ctx.rtol):
        raise Fail("in eval mode the layer gives different outputs for the same input: dropout "
                   "must be off in eval mode (use nn.Dropout, or F.dropout with "
                   "training=self.training)")
    ctx.expect_close(first, expected, "the layer's output in eval mode with dropout 0.5")
    trained = as_tensor(student.run(*args, *extra, train=True, seed=3), "the output")
    if close(trained, first, ctx.atol, ctx.rtol):
        raise Fail("in training mode with dropout 0.5 the output equals the eval output: the "
                   "sublayers' outputs should go through dropout")


@check(A, "encoder.dropout")
def encoder_dropout(ctx):
    ctx.seed(45)
    _dropout_check(ctx, "EncoderLayer", ("self_attn", "ffn"), (ctx.randn(2, 5, D),))


@check(A, "decoder.params")
def decoder_params(ctx):
    _layer_params(ctx, "DecoderLayer", 16992, 16992 - 8352)


def _decoder_inputs(ctx):
    y, memory = ctx.randn(2, 5, D), ctx.randn(2, 7, D)
    self_mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    memory_mask = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    memory_mask[1, ..., 5:] = True
    return y, memory, self_mask, memory_mask


PATHS = ("self_attn", "cross_attn", "ffn")


@check(A, "decoder.values")
def decoder_values(ctx):
    ctx.seed(61)
    reference, student, _ = _with_probes(ctx, "DecoderLayer", PATHS, seed=62)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    got = student.run(y, memory, self_mask, memory_mask)
    with torch.no_grad():
        expected = reference(y, memory, self_mask, memory_mask)
        n1, n2, n3 = reference.norm1, reference.norm2, reference.norm3
        sa, ca, ffn = reference.self_attn, reference.cross_attn, reference.ffn
        pre = y + sa(n1(y), n1(y), self_mask)
        pre = pre + ca(n2(pre), memory, memory_mask)
        pre = pre + ffn(n3(pre))
        no_residual = n3(ffn(n2(ca(n1(sa(y, y, self_mask)), memory, memory_mask))))
    hint = _match_hint(got, [(pre, "this is pre-norm; the paper's layer is post-norm: "
                                   "norm(x + dropout(sublayer(x)))"),
                             (no_residual, "the residual connections are missing")], ctx)
    ctx.expect_close(got, expected, "DecoderLayer on y [2, 5, 12], memory [2, 7, 12] (eval mode)",
                     hint=hint)


@check(A, "decoder.masks")
def decoder_masks(ctx):
    ctx.seed(63)
    _, student, probes = _with_probes(ctx, "DecoderLayer", PATHS, seed=64, strict=False)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    student.run(y, memory, self_mask, memory_mask)
    for path, mask, name in (("self_attn", self_mask, "self_mask"),
                             ("cross_attn", memory_mask, "memory_mask")):
        calls = probes[path].calls()
        if not calls:
            raise Fail("the layer never called {path}", path=path)
        given = calls[-1].get("mask")
        if given is None:
            raise Fail("{path} was called without a mask; it should get {name}", path=path,
                       name=name)
        other = memory_mask if name == "self_mask" else self_mask
        if isinstance(given, torch.Tensor) and given.shape == other.shape and torch.equal(
                given.bool(), other):
            raise Fail("{path} received the wrong mask: self_mask goes to self-attention and "
                       "memory_mask to cross-attention", path=path)
        keys = memory.shape[1] if path == "cross_attn" else y.shape[1]
        if not _same_mask(given, mask, (2, 1, y.shape[1], keys)):
            raise Fail("{path} did not receive {name} as it was given", path=path, name=name)


@check(A, "decoder.memory")
def decoder_memory(ctx):
    ctx.seed(65)
    _, student, probes = _with_probes(ctx, "DecoderLayer", PATHS, seed=66, strict=False)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    student.run(y, memory, self_mask, memory_mask)
    calls = probes["cross_attn"].calls()
    if not calls:
        raise Fail("the layer never called cross_attn")
    keys = calls[-1].get("x_kv")
    if not isinstance(keys, torch.Tensor) or keys.shape != memory.shape or not torch.equal(
            keys, memory):
        raise Fail("cross-attention must take its keys and values from the memory (the encoder's "
                   "output); it got {what}", what="the decoder's own input" if
                   isinstance(keys, torch.Tensor) and keys.shape[1] == y.shape[1] else
                   "something else")
    own = probes["self_attn"].calls()
    if not own:
        raise Fail("the layer never called self_attn")
    queries, keys = own[-1].get("x_q"), own[-1].get("x_kv")
    if not isinstance(keys, torch.Tensor) or not isinstance(queries, torch.Tensor) or \
            keys.shape != queries.shape or not torch.equal(keys, queries):
        raise Fail("self-attention must take its keys and values from the decoder's own input, "
                   "the same tensor as its queries")


@check(A, "decoder.dropout")
def decoder_dropout(ctx):
    ctx.seed(67)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    _dropout_check(ctx, "DecoderLayer", PATHS, (y, memory), (self_mask, memory_mask))


# -- the classifier ------------------------------------------------------------------------------
CLASSIFIER = dict(vocab_size=13, num_classes=3, d_model=D, num_heads=H, num_layers=2, d_ff=FF,
                  dropout=0.2, pad_id=0)


# The classifier is built with stand-ins in place of the student's EncoderLayer class and of
# positional_encoding, and run with the stand-in positions, so that a bug in either costs its own
# points only. A classifier that makes its positions another way is compared with the real table.
POSITIONS = {"positional_encoding": "PositionalTable"}
STAND_INS = {**POSITIONS, "EncoderLayer": "EncoderLayerFactory"}


def _classifier_with_probes(ctx, seed):
    """`run(tokens)` -> (the student's output, the reference's): the student's classifier with
    its encoder layers replaced by stand-ins and the reference's other weights loaded, and the
    reference around the same stand-ins."""
    student = ctx.new("EncoderClassifier", seed=seed, swap_globals=STAND_INS, **CLASSIFIER)
    positions_at_init = bool(ctx.global_calls("positional_encoding"))
    with swapped(ctx.ref, "positional_encoding", standins.PositionalTable()):
        with_table = ctx.reference_module("EncoderClassifier", seed=seed, **CLASSIFIER)
    references = {True: with_table,
                  False: ctx.reference_module("EncoderClassifier", seed=seed, **CLASSIFIER)}
    paths = [f"layers.{index}" for index in range(CLASSIFIER["num_layers"])]
    for index, path in enumerate(paths):
        handle, twin = ctx.probe("encoder_layer", d_model=D, seed=200 + index)
        student.swap(path, handle)
        for reference in references.values():
            reference.layers[index] = twin
    _load(student, with_table, "EncoderClassifier", skipped=["layers"])

    def run(tokens):
        got = as_tensor(student.run(tokens, swap_globals=POSITIONS), "the output")
        used = positions_at_init or bool(ctx.global_calls("positional_encoding"))
        with torch.no_grad():
            return got, references[used](tokens)
    return run


def _tokens(ctx):
    tokens = ctx.randint(1, 13, 3, 7)
    tokens[0, 4:] = 0
    tokens[1, 2:] = 0
    return tokens


@check(A, "classifier.structure")
def classifier_structure(ctx):
    handle = ctx.new("EncoderClassifier", swap_globals=STAND_INS, **CLASSIFIER)
    _names_and_shapes(ctx, handle, ctx.reference_module("EncoderClassifier", **CLASSIFIER),
                      "EncoderClassifier", skipped=["layers"])
    children = {name: identity for name, _, identity in handle.info.get("children", [])}
    count = CLASSIFIER["num_layers"]
    layers = [children.get(f"layers.{index}") for index in range(count)]
    if None in layers or f"layers.{count}" in children:
        raise Fail("EncoderClassifier(num_layers=2) should hold 2 encoder layers registered as "
                   "submodules: keep them in an nn.ModuleList named layers")
    if len(set(layers)) < count:
        raise Fail("the encoder layers share parameters: build a new layer for each position in "
                   "the stack")


@check(A, "classifier.logprobs")
def classifier_logprobs(ctx):
    ctx.seed(71)
    run = _classifier_with_probes(ctx, seed=72)
    out, _ = run(_tokens(ctx))
    out = expect_shape(out, (3, 3), "the output for tokens [3, 7], 3 classes")
    total = out.double().exp().sum(-1)
    if not torch.allclose(total, torch.ones_like(total), atol=1e-4):
        raise Fail("the output should be log-probabilities (log_softmax over the classes): "
                   "exp(output) sums to {lo:.3f}-{hi:.3f}, not 1", lo=float(total.min()),
                   hi=float(total.max()))


@check(A, "classifier.padding")
def classifier_padding(ctx):
    ctx.seed(73)
    run = _classifier_with_probes(ctx, seed=74)
    tokens = _tokens(ctx)
    longer = torch.cat([tokens, torch.zeros(3, 3, dtype=tokens.dtype)], dim=1)
    short, _ = run(tokens)
    long, _ = run(longer)
    if not close(short, long, ctx.atol, ctx.rtol):
        raise Fail("adding padding changed the prediction: pads must be masked as keys (pass "
                   "padding_mask to every layer) and left out of the mean")


@check(A, "classifier.values")
def classifier_values(ctx):
    ctx.seed(75)
    run = _classifier_with_probes(ctx, seed=76)
    got, expected = run(_tokens(ctx))
    ctx.expect_close(got, expected, "EncoderClassifier on tokens [3, 7] with padding (eval mode)",
                     hint="embed as embedding * sqrt(d_model) + positions, then the layers with "
                          "the padding mask, the mean over real tokens, the head, log_softmax")
