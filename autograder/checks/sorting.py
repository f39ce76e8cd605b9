"""Hidden checks of assignment 03-sorting: the Transformer, the schedule, teacher forcing, greedy
decoding, and a trained model that must sort.

Greedy decoding is checked on stand-in models built so that its usual bugs show (one that prefers
BOS, one whose answer can only be read at the last position, one that counts encoder calls). The
training check uses the student's parts throughout: the course's recipe cell trains the student's
Transformer with the student's schedule and teacher forcing, and the student's greedy decoding is
scored on sequences drawn after training from a seed no submission can know.
"""
import math
import re
import secrets

import torch

from ..framework import Fail, as_tensor, check, close, expect_shape
from ..reference import recipe_source

A = "03-sorting"
BOS, V = 10, 11
SMALL = dict(vocab_size=13, d_model=12, num_heads=3, num_layers=2, d_ff=20, dropout=0.2)


def _loaded(ctx, seed, strict=True, **options):
    """The student's Transformer and the reference's, with the reference's weights in both. With
    strict=False (a check of behaviour), the student's keeps its own weights when the names do not
    match, and the reference returned is None."""
    options = {**SMALL, **options}
    vocab = options.pop("vocab_size")
    reference = ctx.reference_module("Transformer", vocab, seed=seed, **options)
    student = ctx.new("Transformer", vocab, seed=seed, **options)
    missing, unexpected = student.load(reference.state_dict())
    if (missing or unexpected) and not strict:
        return None, student
    if missing or unexpected:
        raise Fail("cannot load the reference's weights into Transformer by name (missing: "
                   "{missing}; unexpected: {unexpected})", missing=missing or "none",
                   unexpected=unexpected or "none")
    return reference, student


# -- the model -------------------------------------------------------------------------------------
@check(A, "model.params")
def model_params(ctx):
    handle = ctx.new("Transformer", V)
    if handle.count() != 59744:
        raise Fail("Transformer(11) should have 59,744 parameters, not {n:,}: two encoder layers "
                   "(12,704 each), two decoder layers (16,992 each) and the embedding (352), "
                   "registered once", n=handle.count())
    if handle.parameters.get("embedding.weight") != [V, 32]:
        raise Fail("model.embedding should be nn.Embedding(11, 32): 352 numbers")
    # One layer object at two depths shows as the same parameter under two indices; sharing
    # otherwise (a helper module holding the embedding, a tied output layer) is fine.
    reused = [(a, b) for a, b in handle.info.get("shared", [])
              if re.sub(r"\.\d+\.", ".", a) == re.sub(r"\.\d+\.", ".", b)]
    if reused:
        raise Fail("some layers share their parameters ({pairs}): each depth needs its own layer",
                   pairs=", ".join(f"{a} = {b}" for a, b in reused[:3]))
    options = {k: v for k, v in SMALL.items() if k != "vocab_size"}
    small = ctx.new("Transformer", 13, **{**options, "num_layers": 3})
    expected = {name: list(p.shape) for name, p in
                ctx.reference_module("Transformer", 13, **{**options, "num_layers": 3})
                .named_parameters()}
    if small.parameters != expected:
        missing = sorted(set(expected) - set(small.parameters))
        unexpected = sorted(set(small.parameters) - set(expected))
        raise Fail("with num_layers=3 the parameters do not match the assignment (missing: "
                   "{missing}; unexpected: {unexpected}); keep the layers in nn.ModuleLists "
                   "named encoder and decoder, one new layer per depth",
                   missing=missing[:6] or "none", unexpected=unexpected[:6] or "none")


@check(A, "model.tied")
def model_tied(ctx):
    handle = ctx.new("Transformer", V)
    extra = [name for name, shape in handle.parameters.items()
             if shape in ([V, 32], [32, V]) and name != "embedding.weight"]
    if extra:
        raise Fail("the output layer must reuse the embedding matrix (logits = h E^T), not a "
                   "matrix of its own ({names})", names=", ".join(extra))
    # Tokens 7 to 10 never appear in the input, so their rows of the embedding matrix get a
    # gradient only through the output layer: they do exactly when that layer is the matrix itself.
    # (A property of the wiring alone: a model that computes other logits still shows it.)
    ctx.seed(81)
    src, tgt_in = ctx.randint(0, 7, 2, 6), ctx.randint(0, 7, 2, 4)
    got = handle.grad(src, tgt_in, weights=ctx.randn(2, 4, V))
    gradient = got.get("embedding.weight")
    unused = gradient[7:] if isinstance(gradient, torch.Tensor) and gradient.shape == (V, 32) \
        else None
    if unused is None or not bool((unused != 0).any(-1).all()):
        raise Fail("the output layer does not reach the embedding matrix: rows of tokens that are "
                   "not in the input got no gradient. Use self.embedding.weight itself for the "
                   "output (no copy, no .data, no detach)")


@check(A, "model.embed")
def model_embed(ctx):
    ctx.seed(83)
    reference, student = _loaded(ctx, seed=84)
    tokens = ctx.randint(0, 13, 2, 9)
    got = student.run(tokens, method="embed")
    with torch.no_grad():
        expected = reference.embed(tokens)
        table = reference.embedding.weight[tokens]
        positions = expected - table * math.sqrt(12)
    hints = [(table + positions, "the embeddings are not multiplied by sqrt(d_model)"),
             (table * math.sqrt(12), "the positional encoding is not added"),
             (table, "multiply by sqrt(d_model) and add the positional encoding")]
    hint = ""
    for candidate, text in hints:
        if isinstance(got, torch.Tensor) and close(got, candidate, ctx.atol, ctx.rtol):
            hint = text
            break
    ctx.expect_close(got, expected, "embed(tokens [2, 9]) in eval mode", hint=hint)


@check(A, "model.values")
def model_values(ctx):
    ctx.seed(85)
    reference, student = _loaded(ctx, seed=86)
    src, tgt_in = ctx.randint(0, 13, 2, 7), ctx.randint(0, 13, 2, 5)
    with torch.no_grad():
        memory = reference.encode(src)
        logits = reference.decode(tgt_in, memory)
    ctx.expect_close(student.run(src, method="encode"), memory, "encode(src [2, 7])")
    ctx.expect_close(student.run(tgt_in, memory, method="decode"), logits,
                     "decode(tgt_in [2, 5], memory)", hint="logits are the decoder's output times "
                     "the embedding matrix transposed, with no bias and no final LayerNorm")
    ctx.expect_close(student.run(src, tgt_in), logits, "forward(src, tgt_in)")


@check(A, "model.causal")
def model_causal(ctx):
    ctx.seed(87)
    _, student = _loaded(ctx, seed=88, strict=False)
    src, tgt_in = ctx.randint(0, 13, 2, 7), ctx.randint(0, 13, 2, 6)
    before = expect_shape(student.run(src, tgt_in), (2, 6, 13), "the logits for tgt_in [2, 6]")
    if not torch.isfinite(before).all():
        raise Fail("the logits contain NaN or infinity: does the causal mask block a position "
                   "from seeing itself?")
    for position in (3, 5):
        changed = tgt_in.clone()
        changed[:, position] = (changed[:, position] + 5) % 13
        after = as_tensor(student.run(src, changed), "the logits")
        for earlier in range(position):
            if not close(before[:, earlier], after[:, earlier], ctx.atol, ctx.rtol):
                raise Fail("position {p} changed when target token {t} changed: the decoder can "
                           "see the future", p=earlier, t=position)
        if close(before[:, position], after[:, position], ctx.atol, ctx.rtol):
            raise Fail("position {t} did not change when its own token changed: the causal mask "
                       "must let a position see itself", t=position)


@check(A, "model.padding")
def model_padding(ctx):
    ctx.seed(89)
    _, student = _loaded(ctx, seed=90, strict=False)
    src = ctx.randint(1, 13, 2, 7)
    src_mask = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    src_mask[0, ..., 5:] = True
    noisy = src.clone()
    noisy[0, 5:] = (noisy[0, 5:] + 3) % 13
    first = as_tensor(student.run(src, src_mask, method="encode"), "the memory")
    second = as_tensor(student.run(noisy, src_mask, method="encode"), "the memory")
    if not close(first[0, :5], second[0, :5], ctx.atol, ctx.rtol) or not close(
            first[1], second[1], ctx.atol, ctx.rtol):
        raise Fail("changing masked source tokens changed the memory elsewhere: encode must pass "
                   "src_mask to every encoder layer")
    tgt_in = ctx.randint(0, 13, 2, 4)
    memory = ctx.randn(2, 7, 12)
    other = memory.clone()
    other[0, 5:] += 2.0
    a = as_tensor(student.run(tgt_in, memory, src_mask, method="decode"), "the logits")
    b = as_tensor(student.run(tgt_in, other, src_mask, method="decode"), "the logits")
    if not close(a, b, ctx.atol, ctx.rtol):
        raise Fail("changing masked memory positions changed the logits: decode must pass "
                   "memory_mask to every decoder layer")


# -- schedule and teacher forcing --------------------------------------------------------------
def _number(value, what):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Fail("{what} should return a number", what=what)


@check(A, "schedule.noam")
def schedule_noam(ctx):
    rate = ctx.ref["noam_rate"]
    for d_model, warmup in ((32, 100), (512, 4000)):
        for step in (1, 10, warmup // 2, warmup - 1, warmup, warmup + 1, 4 * warmup, 25 * warmup):
            got = _number(ctx.call("noam_rate", step, d_model, warmup), "noam_rate")
            expected = rate(step, d_model, warmup)
            if not math.isclose(got, expected, rel_tol=1e-6):
                ratio = got / expected if expected else math.inf
                phase = ("during warm-up" if step < warmup else "at the peak" if step == warmup
                         else "after warm-up")
                raise Fail("noam_rate({step}, {d}, {w}) is {got:.6g}, expected {expected:.6g} "
                           "({phase}; ratio {ratio:.3g})", step=step, d=d_model, w=warmup,
                           got=got, expected=expected, phase=phase, ratio=ratio)


@check(A, "teacher.shift")
def teacher_shift(ctx):
    ctx.seed(91)
    for bos in (BOS, 0):
        y = ctx.randint(1, 10, 3, 6)
        got = as_tensor(ctx.call("shift_right", y, bos), "shift_right")
        expected = ctx.ref["shift_right"](y, bos)
        if torch.equal(got, y):
            raise Fail("shift_right returned y unchanged: the decoder's input is BOS followed by "
                       "y without its last token")
        expect_shape(got, tuple(expected.shape), "shift_right(y [3, 6], bos)")
        if not torch.equal(got.long(), expected):
            raise Fail("shift_right(y, bos={bos}) should be [bos, y_0, ..., y_(T-2)] for each row",
                       bos=bos)


@check(A, "teacher.floor")
def teacher_floor(ctx):
    for eps, vocab in ((0.1, 11), (0.25, 4), (0.05, 100)):
        got = _number(ctx.call("smoothing_floor", eps, vocab), "smoothing_floor")
        expected = ctx.ref["smoothing_floor"](eps, vocab)
        if not math.isclose(got, expected, rel_tol=1e-5):
            raise Fail("smoothing_floor({eps}, {vocab}) is {got:.5f}, expected {expected:.5f}: "
                       "the entropy of the smoothed target", eps=eps, vocab=vocab, got=got,
                       expected=expected)


# -- greedy decoding -------------------------------------------------------------------------------
def _greedy(ctx, variant, src, length=None, seed=7):
    handle, twin = ctx.probe("seq2seq", vocab_size=V, variant=variant, seed=seed)
    args = (handle.ref(), src, BOS) if length is None else (handle.ref(), src, BOS, length)
    got = ctx.call("greedy_decode", *args)
    expected = ctx.ref["greedy_decode"](twin, src, BOS, length)
    return handle, got, expected


def _same(got, expected, what):
    got = expect_shape(got, tuple(expected.shape), what)
    return torch.equal(got.long(), expected.long())


@check(A, "greedy.no_bos")
def greedy_no_bos(ctx):
    ctx.seed(101)
    src = ctx.randint(0, 10, 4, 6)
    _, got, expected = _greedy(ctx, "bos", src)
    got = expect_shape(got, tuple(expected.shape), "greedy_decode on src [4, 6]")
    if (got == BOS).any():
        raise Fail("greedy_decode emitted BOS on a model that rates BOS highest: BOS only starts "
                   "the decoder's input, so exclude it from the choice")
    if not torch.equal(got.long(), expected):
        raise Fail("greedy_decode should pick the most likely token other than BOS")


@check(A, "greedy.last_position")
def greedy_last_position(ctx):
    ctx.seed(102)
    src = ctx.randint(0, 10, 3, 7)
    _, got, expected = _greedy(ctx, "count", src)
    if not _same(got, expected, "greedy_decode on src [3, 7]"):
        raise Fail("on a model whose next token is the last token plus 3, greedy_decode wrote "
                   "{got} instead of {expected}: read the logits of the last position only",
                   got=as_tensor(got, "")[0].tolist(), expected=expected[0].tolist())


@check(A, "greedy.encoder_once")
def greedy_encoder_once(ctx):
    ctx.seed(103)
    src = ctx.randint(0, 10, 3, 8)
    handle, got, _ = _greedy(ctx, "mixed", src)
    counts = ctx.request("counters", handle=handle.name)
    if counts.get("encode") != 1:
        raise Fail("greedy_decode ran the encoder {n} times for one call: run model.encode once "
                   "and reuse the memory", n=counts.get("encode"))


@check(A, "greedy.reference")
def greedy_reference(ctx):
    ctx.seed(104)
    src = ctx.randint(0, 10, 16, 8)
    _, got, expected = _greedy(ctx, "mixed", src, seed=11)
    if not _same(got, expected, "greedy_decode on src [16, 8]"):
        rows = int((as_tensor(got, "") != expected).any(1).sum())
        raise Fail("greedy_decode differs from the expected output on {rows} of 16 sequences: "
                   "take the argmax (no sampling) of the last position at every step, appending "
                   "each choice to the decoder's input", rows=rows)


@check(A, "greedy.length")
def greedy_length(ctx):
    ctx.seed(105)
    src = ctx.randint(0, 10, 5, 8)
    _, got, expected = _greedy(ctx, "mixed", src, length=5, seed=13)
    if not _same(got, expected, "greedy_decode(model, src [5, 8], bos, length=5)"):
        raise Fail("greedy_decode with length=5 should return the 5 tokens written, without BOS")
    _, got, expected = _greedy(ctx, "mixed", src, seed=13)
    got = as_tensor(got, "greedy_decode")
    if tuple(got.shape) == (5, 9):
        raise Fail("greedy_decode returned BOS as its first column: return the tokens after it")
    if not _same(got, expected, "greedy_decode(model, src [5, 8], bos)"):
        raise Fail("by default greedy_decode should write as many tokens as the source has")


# -- the trained model -----------------------------------------------------------------------------
@check(A, "trained.accuracy")
def trained_accuracy(ctx):
    training = ctx.course.training
    limit = ctx.course.limit("training_seconds")
    result = ctx.request("train", timeout=limit, recipe=recipe_source(ctx.course, A),
                         entry="train_sorter", kwargs={"seed": int(training["seed"]),
                                                       "progress": False}, handle="trained")
    ctx.extra["training_seconds"] = round(float(result["seconds"]), 2)
    ctx.extra["final_loss"] = round(float(result["losses"][-1]), 4) if result["losses"] else None
    eval_seed = secrets.randbits(62)              # drawn now, after training: nobody can know it
    ctx.extra["eval_seed"] = eval_seed
    count, length = int(training["eval_sequences"]), int(training["eval_length"])
    generator = torch.Generator().manual_seed(eval_seed)
    src = torch.randint(0, 10, (count, length), generator=generator)
    target = src.sort(dim=1).values
    model = {"$handle": "trained"}
    predicted = expect_shape(ctx.call("greedy_decode", model, src, BOS, timeout=120),
                             (count, length), "greedy_decode on the fresh sequences")
    accuracy = float((predicted.long() == target).all(1).float().mean())
    ctx.extra["greedy_accuracy"] = accuracy
    tgt_in = torch.cat([torch.full((count, 1), BOS), predicted.long()[:, :-1]], dim=1)
    logits = expect_shape(ctx.request("method", timeout=120, handle="trained", method="__call__",
                                      args=[src, tgt_in], kwargs={}, train=False, seed=None,
                                      swap_globals=None), (count, length, V), "the model's logits")
    logits = logits.double().clone()
    logits[..., BOS] = -math.inf
    consistent = float((logits.argmax(-1) == predicted.long()).all(1).float().mean())
    ctx.extra["teacher_forced_consistency"] = consistent
    threshold = float(training["threshold"])
    if accuracy <= threshold:
        raise Fail("after training with the course's recipe, greedy decoding sorted {acc:.1%} of "
                   "{n:,} fresh sequences; more than {goal:.0%} is needed", acc=accuracy, n=count,
                   goal=threshold)
    if consistent < threshold:
        raise Fail("greedy_decode's answers are not what the model predicts ({share:.1%} agree "
                   "with the model's own argmax): the answer must come from the model",
                   share=consistent)
    ctx.request("randomize", handle="trained", seed=eval_seed % 100000)
    control = expect_shape(ctx.call("greedy_decode", model, src[:200], BOS, timeout=60),
                           (200, length), "greedy_decode")
    chance = float((control.long() == target[:200]).all(1).float().mean())
    ctx.extra["control_accuracy"] = chance
    if chance >= float(training["control_threshold"]):
        raise Fail("with its weights replaced by random numbers the model still sorted {acc:.0%} "
                   "of the sequences: the answer does not come from the trained weights",
                   acc=chance)
