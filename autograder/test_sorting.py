"""Hidden checks of assignment 03-sorting: the Transformer, the schedule, teacher forcing, greedy
decoding, and a trained model that must sort.

Greedy decoding is checked on stand-in models built so that its usual bugs show (one that prefers
BOS, one whose answer can only be read at the last position, one that counts encoder calls). The
training check uses the student's parts throughout: the course's recipe cell trains the student's
Transformer with the student's schedule and teacher forcing, and the student's greedy decoding is
scored on sequences drawn after training from a seed no submission can know.
"""
import functools
import math
import re
import secrets

import torch

from tfcourse.sandbox.session import StudentError
from tfcourse.submission.framework import (Fail, Handle, as_tensor, close, dtype_kind,
                                           expect_kind, expect_like, expect_number, expect_shape,
                                           expect_varies, first_match, largest_gap,
                                           parameter_shapes, unmoved)
from tfcourse.submission.reference import recipe_source
from . import standins

BOS, V = 10, 11
LAYERS_ACT = ("the encoder's and the decoder's layers must compute them (attention with the masks, "
              "then the feed-forward block), as model.values checks")
SMALL = dict(vocab_size=13, d_model=12, num_heads=3, num_layers=2, d_ff=20, dropout=0.2)


def _output_layer_extras(handle, expected_names, vocab: int = V, width: int = 32) -> list[str]:
    """Names of the tensors that no name of the contract reaches and that are shaped like an
    output layer of their own ([V, d], [d, V], a bias [V]): a separate, untied output layer.
    model.tied reports it; the other checks fill it with the embedding matrix (a tied output
    layer in all but name), so that the one bug costs model.tied's point only."""
    _, unexpected, _ = handle.compare({name: [0] for name in expected_names})
    shapes = handle.parameters
    return [name for name in unexpected if shapes[name] in ([vocab, width], [width, vocab],
                                                            [vocab])]


def _as_tied(state: dict, handle, extras: list[str]) -> dict:
    """`state` plus, for each separate output-layer tensor, the embedding matrix in its place."""
    embedding = state["embedding.weight"]
    filled = dict(state)
    for name in extras:
        shape = handle.parameters[name]
        filled[name] = (embedding if shape == list(embedding.shape) else embedding.T.contiguous()
                        if len(shape) == 2 else torch.zeros(shape))
    return filled


def _loaded(ctx, seed, strict=True, **options):
    """The student's Transformer and the reference's, with the reference's weights in both. With
    strict=False (a check of behaviour), the weights are loaded in their order when the names do
    not match."""
    options = {**SMALL, **options}
    vocab = options.pop("vocab_size")
    reference = ctx.reference_module("Transformer", vocab, seed=seed, **options)
    student = ctx.new("Transformer", vocab, seed=seed, **options)
    state = reference.state_dict()
    extras = _output_layer_extras(student, [name for name, _ in reference.named_parameters()],
                                  vocab, options["d_model"])
    student.load_reference(
        reference, state=_as_tied(state, student, extras), strict=strict,
        unmatched=Fail("the Transformer's behaviour cannot be checked: its parameters are not "
                       "like the assignment's (see model.params)"),
        by_name=lambda missing, unexpected: Fail(
            "cannot load the reference's weights into Transformer by name (your model has no "
            "{unexpected}; the reference has no {missing})",
            missing=", ".join(missing) or "other", unexpected=", ".join(unexpected) or "other"))
    return reference, student


# -- the model -------------------------------------------------------------------------------------
# The model returns logits, and the contract takes them up to a constant per row: log-probabilities
# (the Annotated Transformer's Generator, log_softmax(h E^T)) are the same scores to cross-entropy,
# to argmax and to greedy decoding, so the checks compare log_softmax of both sides.
PROBABILITIES = ("these are probabilities, the softmax of the logits: return the logits "
                 "themselves (or their log_softmax), which F.cross_entropy takes")


def _expect_logits(ctx, got, expected: torch.Tensor, what: str, hint: str = "") -> None:
    """`got` is the `expected` logits up to a constant per row (shape, dtype kind and finite values
    first, as any reply)."""
    got = expect_like(got, expected, what)
    if close(got, expected.double().softmax(-1), ctx.atol, ctx.rtol):
        hint = PROBABILITIES
    ctx.expect_close(got.double().log_softmax(-1), expected.double().log_softmax(-1), what,
                     hint=hint)


def _probabilities(output: torch.Tensor) -> bool:
    """Whether a model's output is probabilities (a softmax over the vocabulary), not scores."""
    output = output.double()
    return bool((output > 0).all() and (output <= 1).all()) and bool(torch.allclose(
        output.sum(-1), torch.ones(output.shape[:-1], dtype=torch.float64), atol=1e-4))


# A model that raises on the checks' inputs is tried, with the reference's weights, on inputs where
# a known mistake runs, and the mistake is named only when the model gives there exactly what the
# mistake gives (its signature, computed here from the reference).
POSITIONS_COLUMNS = ("the positions are sliced on the wrong axis: self.positions[:, :T] takes the "
                     "first T columns (features) of the table, and on tokens [2, 1], where that "
                     "runs, embed gives exactly embedding * sqrt(d_model) + self.positions[:, :1]; "
                     "the rows are the positions: self.positions[:T]")
MASKS_SWAPPED = ("the decoder layers get the masks swapped (with tgt_in as long as the memory, "
                 "where that runs, the logits are exactly those of layer(y, memory, memory_mask, "
                 "causal_mask)): the causal mask is the layers' self_mask and memory_mask their "
                 "memory_mask, layer(y, memory, causal_mask, memory_mask)")
CAUSAL_FROM_MEMORY = ("the causal mask is built from the memory's length (with tgt_in as long as "
                      "the memory the logits are right, and with a memory of one position the "
                      "decoder sees the future): build it from tgt_in's, "
                      "causal_mask(tgt_in.shape[1])")
LOGITS_NOT_TRANSPOSED = ("the logits are y @ E without transposing the embedding matrix E "
                         "[vocab_size, d_model] (on a model with vocab_size = d_model, where that "
                         "runs, the logits are exactly y @ E): the logits are "
                         "y @ self.embedding.weight.T, [B, T, vocab_size]")


def _decoding_as(reference, tgt_in, memory, self_mask, memory_mask,
                 transposed=True) -> torch.Tensor:
    """The reference's decode with the masks given to its layers as they are (a wrong wiring, to
    name it), and its logits y @ E^T (or y @ E, where that runs)."""
    with torch.no_grad():
        y = reference.embed(tgt_in)
        for layer in reference.decoder:
            y = layer(y, memory, self_mask, memory_mask)
        weight = reference.embedding.weight
        return y @ (weight.T if transposed else weight)


def _same_logits(ctx, got, expected) -> bool:
    """Whether `got` is `expected` up to a constant per row (what the checks accept)."""
    return isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(expected.shape) and \
        dtype_kind(got) == "floating" and close(got.double().log_softmax(-1),
                                                expected.double().log_softmax(-1), ctx.atol,
                                                ctx.rtol)


def _attempt(run):
    """run()'s reply, or None when the student's code raises there too."""
    try:
        return run()
    except StudentError:
        return None


def _model_crash_cause(ctx) -> str:
    """Why the student's Transformer raised, when a known mistake's signature says it (see above);
    "" otherwise. Its own model, with the reference's weights, is built for this."""
    try:
        reference, student = _loaded(ctx, seed=120, strict=False)
    except (StudentError, Fail):
        return ""
    generator = torch.Generator().manual_seed(121)
    tokens = torch.randint(0, 13, (2, 1), generator=generator)
    with torch.no_grad():
        columns = reference.embedding(tokens) * math.sqrt(reference.d_model) + \
            reference.positions[:, :1]
    if close(_attempt(lambda: student.run(tokens, method="embed")), columns, ctx.atol, ctx.rtol):
        return POSITIONS_COLUMNS
    tgt_in = torch.randint(0, 13, (2, 4), generator=generator)
    memory = torch.randn(2, 4, SMALL["d_model"], generator=generator)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    got = _attempt(lambda: student.run(tgt_in, memory, method="decode"))
    if got is not None:
        if _same_logits(ctx, got, _decoding_as(reference, tgt_in, memory, None, causal)):
            return MASKS_SWAPPED
        short = memory[:, :1]
        if _same_logits(ctx, got, _decoding_as(reference, tgt_in, memory, causal, None)) and \
                _same_logits(ctx, _attempt(lambda: student.run(tgt_in, short, method="decode")),
                             _decoding_as(reference, tgt_in, short, None, None)):
            return CAUSAL_FROM_MEMORY
    try:
        reference, student = _loaded(ctx, seed=122, strict=False, vocab_size=SMALL["d_model"])
    except (StudentError, Fail):
        return ""
    got = _attempt(lambda: student.run(tgt_in, memory, method="decode"))
    if _same_logits(ctx, got, _decoding_as(reference, tgt_in, memory, causal, None,
                                           transposed=False)):
        return LOGITS_NOT_TRANSPOSED
    return ""


def _crash_named(check):
    """A check of the model whose message names the mistake when the student's code raises and a
    known mistake's signature says why (_model_crash_cause)."""
    @functools.wraps(check)
    def named(ctx):
        try:
            return check(ctx)
        except StudentError as error:
            cause = _model_crash_cause(ctx)
            if cause:
                raise Fail("your Transformer raised {kind} on the check's inputs: {cause}",
                           kind=error.type, cause=cause) from None
            raise
    return named


def test_model_params(ctx):
    handle = ctx.new("Transformer", V)
    contract = [name for name, _ in ctx.reference_module("Transformer", V).named_parameters()]
    extras = set(_output_layer_extras(handle, contract))
    # One layer object at two depths shows as the same parameter under two indices; sharing
    # otherwise (a helper module holding the embedding, a tied output layer) is fine.
    first_name: dict[int, str] = {}
    reused = []
    for name, identity in handle.identity.items():
        earlier = first_name.setdefault(identity, name)
        if earlier != name and re.sub(r"\.\d+\.", ".", earlier) == re.sub(r"\.\d+\.", ".", name):
            reused.append((name, earlier))
    if reused:
        raise Fail("some layers share their parameters ({pairs}): each depth needs its own layer",
                   pairs=", ".join(f"{a} = {b}" for a, b in reused[:3]))
    stacks = [prefix for prefix in ("encoder", "decoder")
              if not any(name.startswith(prefix + ".") for name in handle.parameters)]
    if stacks:
        raise Fail("the model has no parameters under {stacks}: keep the layers in nn.ModuleLists "
                   "named encoder and decoder (a Python list hides them from the model, its "
                   "optimizer and its state_dict)", stacks=" and ".join(stacks))
    count = handle.count([name for name in handle.parameters if name not in extras])
    if count != 59744:
        raise Fail("Transformer(11) should have 59,744 parameters, not {n:,}: two encoder layers "
                   "(12,704 each), two decoder layers (16,992 each) and the embedding (352), "
                   "registered once", n=count)
    if handle.parameters.get("embedding.weight") != [V, 32]:
        raise Fail("model.embedding should be nn.Embedding(11, 32): 352 numbers")
    handle.expect_trainable(contract)
    options = {k: v for k, v in SMALL.items() if k != "vocab_size"}
    small = ctx.new("Transformer", 13, **{**options, "num_layers": 3})
    expected = parameter_shapes(ctx.reference_module("Transformer", 13,
                                                     **{**options, "num_layers": 3}))
    missing, unexpected, _ = small.compare(expected)
    unexpected = [name for name in unexpected
                  if name not in _output_layer_extras(small, list(expected), 13, 12)]
    if missing or unexpected:
        raise Fail("with num_layers=3 the parameters do not match the assignment (missing: "
                   "{missing}; unexpected: {unexpected}); keep the layers in nn.ModuleLists "
                   "named encoder and decoder, one new layer per depth",
                   missing=missing[:6] or "none", unexpected=unexpected[:6] or "none")


@_crash_named
def test_model_tied(ctx):
    handle = ctx.new("Transformer", V)
    contract = [name for name, _ in ctx.reference_module("Transformer", V).named_parameters()]
    extra = _output_layer_extras(handle, contract)
    if extra:
        raise Fail("the output layer must be the embedding matrix, transposed (logits = h E^T); "
                   "you have a separate output layer ({names}: {n:,} extra parameters)",
                   names=", ".join(extra), n=handle.count(extra))
    # Tokens 7 to 10 are not in the input, so their rows of the embedding matrix reach the logits
    # only through the output layer. Changing those rows must change exactly their logits, and by
    # what the model's own features give: a property of the wiring alone, measured here.
    reference, student = _loaded(ctx, seed=80)
    vocab, width = SMALL["vocab_size"], SMALL["d_model"]
    ctx.seed(81)
    src, tgt_in = ctx.randint(0, 7, 2, 6), ctx.randint(0, 7, 2, 4)
    what = "the logits for tgt_in [2, 4]"
    before = expect_kind(expect_shape(student.run(src, tgt_in), (2, 4, vocab), what),
                         "floating", what)
    state = reference.state_dict()
    changed = state["embedding.weight"].clone()
    changed[7:] = ctx.randn(vocab - 7, width)
    student.load({**state, "embedding.weight": changed})
    after = expect_kind(expect_shape(student.run(src, tgt_in), (2, 4, vocab), what),
                        "floating", what)
    if close(before[..., 7:], after[..., 7:], ctx.atol, ctx.rtol):
        raise Fail("the output layer does not use the embedding matrix: changing the embedding "
                   "of tokens that are not in the input did not change their logits. Use "
                   "self.embedding.weight itself for the output (no copy made at start)")
    # The gradient says whether the output layer is the matrix itself (no .detach(), no .data).
    # It comes from the student's process, so it is held to the model's own logits: for a tied
    # output, the logits z_j of a token j not in the input are h . E_j, so row j of the gradient of
    # sum(w * z) satisfies (E'_j - E_j) . grad_j = sum(w_j * (z'_j - z_j)) when E_j became E'_j.
    # The weights sum to zero over the vocabulary, so that sum(w * output) is the same function of
    # the weights for logits and for log-probabilities (a constant per row adds nothing to it), and
    # the change z'_j - z_j is read from the outputs relative to the tokens 0 to 6, whose logits
    # the change leaves as they were: both hold up to a constant per row. A model that returns
    # probabilities (softmax: model.values says so) is read through their log, with weights w / p,
    # whose gradient through the softmax is w again: its output layer is judged on its tying only.
    weights = ctx.randn(2, 4, vocab)
    weights = weights - weights.mean(-1, keepdim=True)
    probabilities = _probabilities(before) and _probabilities(after)
    asked = weights / after.double() if probabilities else weights
    gradient = student.grad(src, tgt_in, weights=asked.float()).get("embedding.weight")
    usable = isinstance(gradient, torch.Tensor) and tuple(gradient.shape) == (vocab, width) \
        and dtype_kind(gradient) == "floating" and bool(torch.isfinite(gradient).all())
    if not usable:
        gradient = torch.zeros(vocab, width)
    if probabilities:
        before, after = before.double().log(), after.double().log()
    moved = after.double() - before.double()
    moved = moved - moved[..., :7].mean(-1, keepdim=True)
    projected = ((changed[7:].double() - state["embedding.weight"][7:].double())
                 * gradient[7:].double()).sum(-1)
    implied = (weights[..., 7:].double() * moved[..., 7:]).sum((0, 1))
    if not torch.allclose(projected, implied, atol=1e-3, rtol=1e-3):
        raise Fail("the output layer does not pass gradients to the embedding matrix: rows of "
                   "tokens that are not in the input got {what}. Use self.embedding.weight "
                   "itself for the output (no .detach(), no .data)",
                   what="no gradient" if not bool(gradient[7:].abs().sum()) else
                   "a gradient that does not match the logits")


@_crash_named
def test_model_embed(ctx):
    ctx.seed(83)
    reference, student = _loaded(ctx, seed=84)
    tokens = ctx.randint(0, 13, 2, 9)
    got = student.run(tokens, method="embed")
    with torch.no_grad():
        expected = reference.embed(tokens)
        table = reference.embedding.weight[tokens]
        positions = expected - table * math.sqrt(12)
        shifted = table * math.sqrt(12) + reference.positions[1:tokens.shape[1] + 1]
    hints = [(table + positions, "the embeddings are not multiplied by sqrt(d_model)"),
             (table * math.sqrt(12), "the positional encoding is not added"),
             (shifted, "the positions are off by one: token t gets the positional encoding of "
                       "position t + 1; the first token's is row 0 of the table, "
                       "self.positions[:T]"),
             (table, "multiply by sqrt(d_model) and add the positional encoding")]
    hint = first_match(got, hints, ctx.atol, ctx.rtol)
    ctx.expect_close(got, expected, "embed(tokens [2, 9]) in eval mode", hint=hint)
    # The model is built without max_len: the signature's default (64) must cover 64 tokens.
    tokens = ctx.randint(0, 13, 1, 64)
    try:
        got = student.run(tokens, method="embed")
    except StudentError as error:
        raise Fail("embed(tokens [1, 64]) raised {kind} on a model built without max_len: the "
                   "default max_len=64 must give positions for sequences of 64 tokens",
                   kind=error.info.get("type") or "Error") from None
    with torch.no_grad():
        expected = reference.embed(tokens)
    ctx.expect_close(got, expected, "embed(tokens [1, 64]) on a model built without max_len",
                     hint="the positional encoding must cover max_len=64 positions by default")


def _encoder_variants(reference, src, src_mask=None) -> list[tuple[torch.Tensor, str]]:
    """The common wrong encoders, from the reference's layers, each with the words that name it."""
    with torch.no_grad():
        embedded = reference.embed(src)
        last_only = reference.encoder[-1](embedded, src_mask)
    return [(last_only, "each encoder layer reads the embedding, so only the last one counts: "
                        "each layer takes the previous layer's output, x = layer(x, src_mask)")]


@_crash_named
def test_model_values(ctx):
    ctx.seed(85)
    reference, student = _loaded(ctx, seed=86)
    src, tgt_in = ctx.randint(0, 13, 2, 7), ctx.randint(0, 13, 2, 5)
    with torch.no_grad():
        memory = reference.encode(src)
        logits = reference.decode(tgt_in, memory)
    got = student.run(src, method="encode")
    ctx.expect_close(got, memory, "encode(src [2, 7])",
                     hint=first_match(got, _encoder_variants(reference, src), ctx.atol, ctx.rtol))
    _expect_logits(ctx, student.run(tgt_in, memory, method="decode"), logits,
                   "decode(tgt_in [2, 5], memory)", hint="logits are the decoder's output times "
                   "the embedding matrix transposed, with no bias and no final LayerNorm")
    _expect_logits(ctx, student.run(src, tgt_in), logits, "forward(src, tgt_in)")


@_crash_named
def test_model_causal(ctx):
    ctx.seed(87)
    reference, student = _loaded(ctx, seed=88, strict=False)
    src, tgt_in = ctx.randint(0, 13, 2, 7), ctx.randint(0, 13, 2, 6)
    before = expect_shape(student.run(src, tgt_in), (2, 6, 13), "the logits for tgt_in [2, 6]")
    if before.is_floating_point() and not torch.isfinite(before).all():
        raise Fail("the logits contain NaN or infinity: does the causal mask block a position "
                   "from seeing itself?")
    ctx.expect_uses(student, lambda: student.run(src, tgt_in), "the logits")
    for position in (3, 5):
        changed = tgt_in.clone()
        changed[:, position] = (changed[:, position] + 5) % 13
        after = expect_like(student.run(src, changed), before, "the logits")
        for earlier in range(position):
            if not close(before[:, earlier], after[:, earlier], ctx.atol, ctx.rtol):
                raise Fail("position {p} changed when target token {t} changed: the decoder can "
                           "see the future", p=earlier, t=position)
        if close(before[:, position], after[:, position], ctx.atol, ctx.rtol):
            raise Fail("position {t} did not change when its own token changed: the causal mask "
                       "must let a position see itself", t=position)
        if position + 1 < before.shape[1] and close(before[:, position + 1:],
                                                    after[:, position + 1:], ctx.atol, ctx.rtol):
            raise Fail("positions after {t} did not change when target token {t} changed: the "
                       "decoder's self-attention must let each position see the earlier ones",
                       t=position)
    # Causal by construction (no position mixed with another, a running mean) is not the point:
    # the logits must be the decoder layers' own, with the causal mask, as the reference gives.
    with torch.no_grad():
        expected = reference(src, tgt_in)
    _expect_logits(ctx, before, expected,
                   "the logits for tgt_in [2, 6] (with the reference's weights)", hint=LAYERS_ACT)


@_crash_named
def test_model_padding(ctx):
    ctx.seed(89)
    reference, student = _loaded(ctx, seed=90, strict=False)
    src = ctx.randint(1, 13, 2, 7)
    src_mask = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    src_mask[0, ..., 5:] = True
    noisy = src.clone()
    noisy[0, 5:] = (noisy[0, 5:] + 3) % 13
    ctx.expect_uses(student, lambda: student.run(src, src_mask, method="encode"), "the memory")
    with torch.no_grad():
        shape = tuple(reference.encode(src, src_mask).shape)
    first = expect_kind(expect_shape(student.run(src, src_mask, method="encode"), shape,
                                     "the memory"), "floating", "the memory")
    second = expect_like(student.run(noisy, src_mask, method="encode"), first, "the memory")
    mixed = src.clone()
    mixed[:, 1] = mixed[:, 1] % 12 + 1              # a real token, not padding
    expect_varies(first[:, 0], expect_like(student.run(mixed, src_mask, method="encode"), first,
                                           "the memory")[:, 0],
                  "the memory at position 0", "the source token at position 1 changed")
    if not close(first[0, :5], second[0, :5], ctx.atol, ctx.rtol) or not close(
            first[1], second[1], ctx.atol, ctx.rtol):
        raise Fail("changing masked source tokens changed the memory elsewhere: encode must pass "
                   "src_mask to every encoder layer")
    tgt_in = ctx.randint(0, 13, 2, 4)
    memory = ctx.randn(2, 7, 12)
    other = memory.clone()
    other[0, 5:] += 2.0
    a = expect_kind(student.run(tgt_in, memory, src_mask, method="decode"), "floating", "the logits")
    b = expect_kind(student.run(tgt_in, other, src_mask, method="decode"), "floating", "the logits")
    kept = memory.clone()
    kept[:, 1] += 2.0                               # a position the mask keeps
    expect_varies(a, as_tensor(student.run(tgt_in, kept, src_mask, method="decode"), "the logits"),
                  "the logits", "a memory position that is not masked changed")
    if not close(a, b, ctx.atol, ctx.rtol):
        raise Fail("changing masked memory positions changed the logits: decode must pass "
                   "memory_mask to every decoder layer")
    # Masked by construction (a masked mean instead of attention) is not the point: the memory and
    # the logits must be the layers' own, with the masks, as the reference gives.
    with torch.no_grad():
        expected_memory = reference.encode(src, src_mask)
        expected_logits = reference.decode(tgt_in, memory, src_mask)
    chained = first_match(first, _encoder_variants(reference, src, src_mask), ctx.atol, ctx.rtol)
    ctx.expect_close(first, expected_memory, "encode(src [2, 7], src_mask) (with the reference's "
                     "weights)", hint=chained or LAYERS_ACT)
    _expect_logits(ctx, a, expected_logits, "decode(tgt_in [2, 4], memory, memory_mask) (with the "
                   "reference's weights)", hint=LAYERS_ACT)


# -- schedule and teacher forcing --------------------------------------------------------------
def _number(value, what):
    """A finite real number: a Python int or float, or a one-element int or float tensor (see
    framework.expect_number, which names whatever else came back)."""
    return expect_number(value, what)


def test_schedule_noam(ctx):
    rate = ctx.ref["noam_rate"]
    for d_model, warmup in ((32, 100), (512, 4000)):
        steps = (1, 10, warmup // 2, warmup - 1, warmup, warmup + 1, 4 * warmup, 25 * warmup)
        rates = {step: _number(ctx.call("noam_rate", step, d_model, warmup), "noam_rate")
                 for step in steps}
        for step, got in rates.items():
            expected = rate(step, d_model, warmup)
            if not math.isclose(got, expected, rel_tol=1e-6):
                if all(math.isclose(value, rate(at, warmup, d_model), rel_tol=1e-6)
                       for at, value in rates.items()):
                    raise Fail("noam_rate({step}, {d}, {w}) is {got:.6g}, expected {expected:.6g}: "
                               "d_model and warmup are swapped (at every step the rate is that of "
                               "noam_rate(step, warmup, d_model)); the rate is d_model^-0.5 * "
                               "min(step^-0.5, step * warmup^-1.5), for noam_rate(step, d_model, "
                               "warmup)", step=step, d=d_model, w=warmup, got=got,
                               expected=expected)
                ratio = got / expected if expected else math.inf
                phase = ("during warm-up" if step < warmup else "at the peak" if step == warmup
                         else "after warm-up")
                if math.isclose(ratio, math.sqrt(d_model), rel_tol=1e-3):
                    raise Fail("noam_rate({step}, {d}, {w}) is {got:.6g}, expected {expected:.6g}: "
                               "the factor d_model^-0.5 is missing", step=step, d=d_model,
                               w=warmup, got=got, expected=expected)
                raise Fail("noam_rate({step}, {d}, {w}) is {got:.6g}, expected {expected:.6g} "
                           "({phase}; ratio {ratio:.3g})", step=step, d=d_model, w=warmup,
                           got=got, expected=expected, phase=phase, ratio=ratio)


def test_teacher_shift(ctx):
    ctx.seed(91)
    for bos in (BOS, 0):
        y = ctx.randint(1, 10, 3, 6)
        got = expect_kind(ctx.call("shift_right", y, bos), "integer", "shift_right(y [3, 6], bos)")
        expected = ctx.ref["shift_right"](y, bos)
        if torch.equal(got.long(), y):
            raise Fail("shift_right returned y unchanged: the decoder's input is BOS followed by "
                       "y without its last token")
        expect_shape(got, tuple(expected.shape), "shift_right(y [3, 6], bos)")
        if not torch.equal(got.long(), expected):
            raise Fail("shift_right(y, bos={bos}) should be [bos, y_0, ..., y_(T-2)] for each row",
                       bos=bos)


def test_teacher_floor(ctx):
    for eps, vocab in ((0.1, 11), (0.25, 4), (0.05, 100), (0.0, 11)):
        got = _number(ctx.call("smoothing_floor", eps, vocab), "smoothing_floor")
        expected = ctx.ref["smoothing_floor"](eps, vocab)
        if not math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-9):
            right, other = 1 - eps, eps / vocab
            forgot = -(right * math.log(right) + (vocab - 1) * other * math.log(other)) if eps \
                else 0.0
            if math.isclose(got, forgot, rel_tol=1e-5):
                raise Fail("smoothing_floor({eps}, {vocab}) is {got:.5f}, expected {expected:.5f}: "
                           "the right token gets 1 - eps + eps / vocab_size (label smoothing "
                           "spreads eps over every token, the right token included)", eps=eps,
                           vocab=vocab, got=got, expected=expected)
            if expected and math.isclose(got, -expected, rel_tol=1e-5):
                raise Fail("smoothing_floor({eps}, {vocab}) is {got:.5f}, expected {expected:.5f}: "
                           "the sign is wrong: the floor is the entropy of the smoothed target, "
                           "-sum(p log p), which is positive", eps=eps, vocab=vocab, got=got,
                           expected=expected)
            spread = _floor_spread_over_others(eps, vocab, got)
            if spread:
                raise Fail("smoothing_floor({eps}, {vocab}) is {got:.5f}, expected {expected:.5f}: "
                           "eps is spread over {others} tokens, the right one left out (the "
                           "convention of fairseq and of the Annotated Transformer); "
                           "F.cross_entropy's label_smoothing spreads eps over all vocab_size "
                           "tokens, the right one included: it gets 1 - eps + eps / vocab_size, "
                           "each other token eps / vocab_size", eps=eps, vocab=vocab, got=got,
                           expected=expected, others=spread)
            raise Fail("smoothing_floor({eps}, {vocab}) is {got:.5f}, expected {expected:.5f}: "
                       "the entropy of the smoothed target", eps=eps, vocab=vocab, got=got,
                       expected=expected)


def _floor_spread_over_others(eps: float, vocab: int, got: float) -> str:
    """"vocab_size - 1" or "vocab_size - 2" when `got` is the entropy of a target that gives the
    right token 1 - eps and spreads eps over that many others (fairseq's label smoothing, and the
    Annotated Transformer's, which leaves out the padding token too); "" otherwise."""
    if not 0 < eps < 1:
        return ""
    for left_out in (1, 2):
        if vocab - left_out < 1:
            continue
        other = eps / (vocab - left_out)
        for count in {vocab - 1, vocab - left_out}:
            entropy = -((1 - eps) * math.log(1 - eps) + count * other * math.log(other))
            if math.isclose(got, entropy, rel_tol=1e-5):
                return f"vocab_size - {left_out}"
    return ""


# -- greedy decoding -------------------------------------------------------------------------------
def _greedy(ctx, variant, src, length=None, seed=7):
    """Greedy decoding by the student's function on a stand-in model whose every encode and
    decode is computed (and counted) here: (the counts, its answer, the expected answer)."""
    options = dict(vocab_size=V, variant=variant, seed=seed)
    handle, counts = ctx.remote_probe("seq2seq", **options)
    args = (handle.ref(), src, BOS) if length is None else (handle.ref(), src, BOS, length)
    got = ctx.call("greedy_decode", *args)
    expected = ctx.ref["greedy_decode"](standins.probe("seq2seq", **options), src, BOS, length)
    rows, columns = src.shape
    if length is None and rows != columns and isinstance(got, torch.Tensor) and \
            tuple(got.shape) == (rows, rows) and dtype_kind(got) == "integer" and torch.equal(
                got.long(), ctx.ref["greedy_decode"](standins.probe("seq2seq", **options), src,
                                                     BOS, rows).long()):
        raise Fail("greedy_decode on src {shape} wrote {rows} tokens a row, the batch size: by "
                   "default it writes as many tokens as the source is long, src.shape[1] (src is "
                   "[B, T])", shape=list(src.shape), rows=rows)
    return counts, got, expected


def _tokens(value, shape, what) -> torch.Tensor:
    """Token ids: an integer tensor of `shape` (one column more, all BOS first, is named)."""
    if isinstance(value, torch.Tensor) and tuple(value.shape) == (shape[0], shape[1] + 1) and \
            dtype_kind(value) == "integer" and bool((value[:, 0] == BOS).all()):
        raise Fail("{what}: BOS came back as the first column; return the tokens after it",
                   what=what)
    return expect_kind(expect_shape(value, shape, what), "integer", what)


def _same(got, expected, what):
    return torch.equal(_tokens(got, tuple(expected.shape), what).long(), expected.long())


def test_greedy_no_bos(ctx):
    ctx.seed(101)
    src = ctx.randint(0, 10, 4, 6)
    _, got, expected = _greedy(ctx, "bos", src)
    got = _tokens(got, tuple(expected.shape), "greedy_decode on src [4, 6]")
    if (got == BOS).any():
        raise Fail("greedy_decode emitted BOS on a model that rates BOS highest: BOS only starts "
                   "the decoder's input, so exclude it from the choice")
    if not torch.equal(got.long(), expected):
        wrong = [row for row in range(len(expected)) if not torch.equal(got[row].long(),
                                                                         expected[row])]
        if (got == got[:1]).all() and not (expected == expected[:1]).all():
            raise Fail("greedy_decode left BOS out, but wrote the same tokens for every source: "
                       "each row's tokens come from model.decode with that row's memory")
        raise Fail("greedy_decode left BOS out, but wrote {got} instead of {expected} (row "
                   "{row}; {n} of {rows} rows differ): at each step, write each row's most "
                   "likely token other than BOS, from the logits of its last position",
                   got=got[wrong[0]].tolist(), expected=expected[wrong[0]].tolist(),
                   row=wrong[0], n=len(wrong), rows=len(expected))


def test_greedy_last_position(ctx):
    """On the "count" stand-in, whose first token the memory decides: two sources, each answer
    the reference's (an answer that does not depend on src cannot be both)."""
    ctx.seed(102)
    answers = []
    for _ in range(2):
        src = ctx.randint(0, 10, 3, 7)
        _, got, expected = _greedy(ctx, "count", src)
        answers.append((_tokens(got, tuple(expected.shape), "greedy_decode on src [3, 7]").long(),
                        expected))
    (first, first_expected), (second, second_expected) = answers
    if torch.equal(first, second) and (first == first[:1]).all() and not torch.equal(
            first_expected, second_expected):
        raise Fail("greedy_decode wrote the same tokens for every source: the tokens must come "
                   "from model.decode, with the memory that model.encode gives for src")
    for got, expected in answers:
        if not torch.equal(got, expected):
            raise Fail("on a model whose next token is the last token plus 3, greedy_decode "
                       "wrote {got} instead of {expected}: read the logits of the last position "
                       "only", got=got[0].tolist(), expected=expected[0].tolist())


def test_greedy_encoder_once(ctx):
    ctx.seed(103)
    src = ctx.randint(0, 10, 3, 8)
    counts, got, expected = _greedy(ctx, "mixed", src)
    got = _tokens(got, tuple(expected.shape), "greedy_decode on src [3, 8]")
    if counts["encode"] != 1:
        raise Fail("greedy_decode ran the encoder {n} times for one call: run model.encode once "
                   "and reuse the memory", n=counts["encode"])
    length = expected.shape[1]
    if counts["decode"] < length:       # counted here, by the grader: the decoding happened
        raise Fail("greedy_decode called model.decode {n} times to write {length} tokens: decode "
                   "once per token written, with the tokens chosen so far", n=counts["decode"],
                   length=length)
    written = _decoded(counts["decoded"], src.shape[0])
    if not torch.equal(got.long(), written[:, :length]):
        raise Fail("greedy_decode did not return the tokens its decoding chose: return the "
                   "argmax of each step, in order, without BOS")


def _decoded(calls, batch: int) -> torch.Tensor:
    """The tokens chosen by the decode calls (recorded here, with the logits answered), after
    checking that each call's input starts with BOS then the tokens chosen so far: each call's
    prefix is the previous one with the argmax (other than BOS) of the logits at the previous
    prefix's last position appended."""
    prefix = torch.full((batch, 1), BOS, dtype=torch.long)
    for number, (tokens, logits) in enumerate(calls, start=1):
        # A call may also hold positions after the prefix (a buffer of fixed shape, decoded
        # whole at each step): the causal mask hides them, and the next token is read at the
        # prefix's last position.
        known = prefix.shape[1]
        if tokens.shape[0] != batch or tokens.shape[1] < known or \
                not torch.equal(tokens[:, :known], prefix):
            raise Fail("decode call {n} got tgt_in {got} (first row) instead of BOS and the "
                       "tokens chosen so far, {expected}: each step decodes the previous input "
                       "with the argmax of its last position appended", n=number,
                       got=tokens[0, :12].tolist(), expected=prefix[0].tolist())
        scores = logits[:, known - 1].clone()
        scores[:, BOS] = -math.inf
        prefix = torch.cat([prefix, scores.argmax(dim=-1, keepdim=True)], dim=1)
    return prefix[:, 1:]


def test_greedy_reference(ctx):
    ctx.seed(104)
    src = ctx.randint(0, 10, 16, 8)
    _, got, expected = _greedy(ctx, "mixed", src, seed=11)
    if not _same(got, expected, "greedy_decode on src [16, 8]"):
        rows = int((as_tensor(got, "") != expected).any(1).sum())
        raise Fail("greedy_decode differs from the expected output on {rows} of 16 sequences: "
                   "take the argmax (no sampling) of the last position at every step, appending "
                   "each choice to the decoder's input", rows=rows)


def test_greedy_length(ctx):
    ctx.seed(105)
    src = ctx.randint(0, 10, 5, 8)
    _, got, expected = _greedy(ctx, "mixed", src, length=5, seed=13)
    if not _same(got, expected, "greedy_decode(model, src [5, 8], bos, length=5)"):
        rows = int((as_tensor(got, "") != expected).any(1).sum())
        raise Fail("greedy_decode with length=5 returned 5 tokens a row, but {rows} of 5 rows are "
                   "not the ones greedy decoding writes: each token is the argmax, other than "
                   "BOS, of the last position, whatever the length", rows=rows)
    _, got, expected = _greedy(ctx, "mixed", src, seed=13)
    got = expect_kind(got, "integer", "greedy_decode")
    if tuple(got.shape) == (5, 9):
        raise Fail("greedy_decode returned BOS as its first column: return the tokens after it")
    if not _same(got, expected, "greedy_decode(model, src [5, 8], bos)"):
        raise Fail("by default greedy_decode should write as many tokens as the source has")


# -- the trained model -----------------------------------------------------------------------------
def _trained_weights(ctx, state, model: torch.nn.Module) -> None:
    """Load what the student's process sent as its trained weights into the reference `model`,
    by the contract's names, after checking each tensor: data from the student's side."""
    if not isinstance(state, dict):
        raise Fail("the trained model's weights could not be read (they came back as {kind})",
                   kind=type(state).__name__)
    weights = {}
    for name, expected in model.state_dict().items():
        if name not in state:
            raise Fail("the trained model has no parameter {name}: keep the assignment's names "
                       "(see model.params)", name=name)
        weights[name] = expect_kind(expect_shape(state[name], tuple(expected.shape),
                                                 f"the trained {name}"), "floating",
                                    f"the trained {name}").to(expected.dtype)
    model.load_state_dict(weights, strict=True)


def _expect_moved(init: dict, model: torch.nn.Module) -> None:
    """Training changed every parameter: a model whose output does not depend on its weights
    (a forward that multiplies them by 0) leaves them where the grader started them."""
    still = unmoved(init, model)
    if still:
        raise Fail("training left {name} exactly at the weights the grader started it from: the "
                   "model's output does not depend on it (the points are for the model you wrote, "
                   "trained)", name=still[0])


def _expect_own_forward(ctx, model: torch.nn.Module, vocab: int) -> None:
    """The student's own forward, on its trained weights, computes what the assignment's
    Transformer computes on them, on inputs drawn now: the weights judged are the student's
    model's. Compared as log-probabilities (logits up to a per-row constant, which neither the
    loss nor greedy decoding sees)."""
    generator = torch.Generator().manual_seed(secrets.randbits(62))
    src = torch.randint(0, 10, (8, 10), generator=generator)
    tgt_in = torch.randint(0, vocab, (8, 10), generator=generator)
    got = expect_kind(expect_shape(Handle(ctx, "trained").run(src, tgt_in), (8, 10, vocab),
                                   "the trained model's logits"), "floating",
                      "the trained model's logits")
    with torch.no_grad():
        expected = model(src, tgt_in).log_softmax(-1)
    got = got.to(expected.dtype).log_softmax(-1)
    if not close(got, expected, 1e-3, 1e-3):
        raise Fail("the trained model's own forward does not compute the assignment's Transformer "
                   "on its trained weights (largest difference {gap:.2g} in log-probabilities, on "
                   "sequences drawn after training): the points are for the model you wrote, "
                   "trained", gap=largest_gap(got, expected))


def _expect_schedule_shape(ctx) -> None:
    """The recipe uses noam_rate(s) / noam_rate(warmup), so only the shape of the student's
    schedule reaches the training: a constant would train too, on another schedule. The points
    are for training with eq. 3, so its shape is checked here (its values are schedule.noam's)."""
    rate = ctx.ref["noam_rate"]
    d_model, warmup = 32, 100
    peak = _number(ctx.call("noam_rate", warmup, d_model, warmup), "noam_rate")
    for step in (1, 50, 200, 900):
        got = _number(ctx.call("noam_rate", step, d_model, warmup), "noam_rate")
        if not peak or not math.isclose(got / peak, rate(step, d_model, warmup) /
                                        rate(warmup, d_model, warmup), rel_tol=1e-4):
            raise Fail("the model was not trained with eq. 3: noam_rate's shape (rising until the "
                       "warm-up ends, then falling as 1/sqrt(step)) is not the paper's, and the "
                       "recipe uses that shape (see schedule.noam)")


def test_trained_accuracy(ctx):
    """Train in the student's process with the course's recipe; judge the weights here.

    The student's code trains its Transformer with its own schedule and teacher forcing. Then only
    its weights come out, and they are judged in this process, in the reference architecture with
    the reference's greedy decoding, on sequences drawn after training from a seed nobody can
    know. No student code runs while the model is judged, so it cannot tell an evaluation from
    anything else, nor answer in the model's place."""
    training = ctx.course.parameter("training")
    limit = ctx.course.limit("training_seconds")
    recipe = recipe_source(ctx.course, ctx.assignment.id)
    _expect_schedule_shape(ctx)
    scope = dict(ctx.ref)                       # the recipe's settings (course code, trusted)
    exec(compile(recipe, "<recipe>", "exec"), scope)
    settings = scope["RECIPE"]

    def reference_model():
        torch.manual_seed(training.seed)        # as the recipe seeds the student's model
        return ctx.ref["Transformer"](scope["VOCAB_SIZE"], d_model=settings["d_model"],
                                      dropout=settings["dropout"])

    # The training starts from the grader's weights (the reference's under the recipe's seed),
    # loaded by the harness with torch's own functions: weights pasted into __init__ are gone.
    init = {name: p.detach().clone() for name, p in reference_model().named_parameters()}
    result = ctx.request("train", timeout=limit, recipe=recipe, entry="train_sorter",
                         kwargs={"seed": training.seed, "progress": False},
                         handle="trained", init=init)
    losses = result.get("losses") if isinstance(result, dict) else None
    if isinstance(losses, list) and losses and isinstance(losses[-1], (int, float)) and \
            math.isfinite(losses[-1]):
        ctx.extra["final_loss"] = round(float(losses[-1]), 4)
    if isinstance(result, dict) and isinstance(result.get("seconds"), (int, float)):
        ctx.extra["training_seconds"] = round(float(result["seconds"]), 2)
    model = reference_model()
    _trained_weights(ctx, ctx.request("state", handle="trained"), model)
    model.eval()
    # A cause named first (a weight that never trained), then the measured accuracy, then whether
    # the weights judged are the student's model's (see test_regressor_trained)
    _expect_moved(init, model)

    eval_seed = secrets.randbits(62)              # drawn now, after training: nobody can know it
    ctx.extra["eval_seed"] = eval_seed
    count, length = training.eval_sequences, training.eval_length
    generator = torch.Generator().manual_seed(eval_seed)
    src = torch.randint(0, 10, (count, length), generator=generator)
    with torch.no_grad():
        predicted = ctx.ref["greedy_decode"](model, src, scope["BOS"])
    accuracy = float((predicted == src.sort(dim=1).values).all(1).float().mean())
    ctx.extra["greedy_accuracy"] = accuracy
    threshold = training.threshold
    if accuracy <= threshold:
        raise Fail("after training with the course's recipe, the model's weights sorted {acc:.1%} "
                   "of {n:,} fresh sequences (judged by the grader with the assignment's "
                   "architecture and greedy decoding); more than {goal:.0%} is needed",
                   acc=accuracy, n=count, goal=threshold)
    _expect_own_forward(ctx, model, scope["VOCAB_SIZE"])
