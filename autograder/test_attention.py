"""Hidden checks of assignment 01-attention: scaled dot-product attention, multi-head attention, masks.

Every size is distinct (B=2, heads=3, Tq=5, Tk=7, d_k=4, d_v=6, d_model=12) so a swapped axis cannot
pass by accident. Multi-head attention is checked with a stand-in under it wherever it calls
`scaled_dot_product_attention`, so a bug in that function costs its own points only.
"""
import copy
import math

import pytest
import torch

from tfcourse.submission.framework import (Fail, as_tensor, close, expect_kind, expect_like,
                                           expect_shape, expect_varies, first_match, largest_gap,
                                           pair, swapped)
from . import standins
from tfcourse.sandbox.session import StudentError

SDPA = "scaled_dot_product_attention"


def _sdpa(ctx, q, k, v, mask=None):
    args = (q, k, v) if mask is None else (q, k, v, mask)
    try:
        reply = ctx.call(SDPA, *args)
    except StudentError as error:
        cause = _sdpa_crash_cause(ctx, q, v)
        if cause:
            raise Fail("scaled_dot_product_attention raised {kind} on q {q}, k {k}: {cause}",
                       kind=error.type, q=list(q.shape), k=list(k.shape), cause=cause) from None
        raise
    out, weights = pair(reply, SDPA)
    return expect_kind(out, "floating", "the output"), expect_kind(weights, "floating", "the weights")


# Scores that only run when queries, keys and their width are of one size: the function is tried
# on such square inputs, and named only when it gives there what the wrong scores give.
SQUARE_SCORES = [
    (lambda q, k: q @ k,
     "the scores are q @ k, without transposing k (on inputs where Tq = Tk = d_k, where that "
     "runs, your function gives exactly the attention of those scores): the scores are "
     "q @ k.transpose(-2, -1), [..., Tq, Tk]"),
    (lambda q, k: k @ q.transpose(-2, -1),
     "the scores are k @ q.transpose(-2, -1), keys against queries, [..., Tk, Tq] (on inputs "
     "where Tq = Tk = d_k, where that runs, your function gives exactly the attention of those "
     "scores): the scores are q @ k.transpose(-2, -1), one row per query, [..., Tq, Tk]"),
]


def _sdpa_crash_cause(ctx, q, v) -> str:
    """Why the student's function raised on q and k of different lengths, when one of
    SQUARE_SCORES says it: the words of the one whose attention the function gives on square
    inputs (Tq = Tk = d_k); "" when it raises there too, or matches none."""
    size, lead = q.shape[-1], tuple(q.shape[:-2])
    generator = torch.Generator().manual_seed(1729)
    square = [torch.randn(*lead, size, size, generator=generator) for _ in range(2)]
    values = torch.randn(*lead, size, v.shape[-1], generator=generator)
    try:
        reply = ctx.call(SDPA, square[0], square[1], values)
    except StudentError:
        return ""
    if not isinstance(reply, (tuple, list)) or len(reply) != 2:
        return ""
    for scores, words in SQUARE_SCORES:
        weights = (scores(square[0].double(), square[1].double()) / math.sqrt(size)).softmax(-1)
        if close(reply[0], weights @ values.double(), ctx.atol, ctx.rtol) and \
                close(reply[1], weights, ctx.atol, ctx.rtol):
            return words
    return ""


def _variants(q, k, v, mask=None):
    """Common wrong answers, to name what went wrong."""
    def attend(scale, axis=-1):
        scores = q @ k.transpose(-2, -1) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(dim=axis)
        return weights @ v
    d_k, d_v = q.shape[-1], v.shape[-1]
    return [
        (attend(1.0), "the scores are not divided by sqrt(d_k)"),
        (attend(1.0 / d_k), "the scores are divided by d_k; divide by sqrt(d_k)"),
        (attend(1.0 / math.sqrt(d_v)), "the scores are divided by sqrt(d_v); use d_k, the size "
                                       "of queries and keys"),
        (attend(1.0 / math.sqrt(d_k), axis=-2), "the softmax runs over the queries; it must run "
                                                "over the keys (the last axis)"),
    ]


def test_sdpa_shapes(ctx):
    ctx.seed(11)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    try:
        out, weights = _sdpa(ctx, q, k, v)
    except StudentError as error:          # fine without batch axes: a transpose of all the axes
        try:
            _sdpa(ctx, q[0, 0], k[0, 0], v[0, 0])
        except (StudentError, Fail):
            raise error from None
        raise Fail("the function works on q [5, 4] but raised {kind} on q [2, 3, 5, 4]: transpose "
                   "only the last two axes of k (k.transpose(-2, -1)); k.T reverses all of them",
                   kind=error.type) from None
    expect_shape(out, (2, 3, 5, 6), "the output for q [2, 3, 5, 4], k [2, 3, 7, 4], v [2, 3, 7, 6]")
    expect_shape(weights, (2, 3, 5, 7), "the weights for q [2, 3, 5, 4], k [2, 3, 7, 4]")
    expect_varies(out[0, 0], out[1, 2], "the output",     # two batch entries, two inputs
                  "the queries, keys and values changed (batch entry [0, 0], then [1, 2])")
    out, weights = _sdpa(ctx, q[0, 0], k[0, 0], v[0, 0])
    expect_shape(out, (5, 6), "the output for q [5, 4], k [7, 4], v [7, 6] (no batch axes)")
    expect_shape(weights, (5, 7), "the weights for q [5, 4], k [7, 4] (no batch axes)")


def test_sdpa_softmax(ctx):
    ctx.seed(12)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    _, weights = _sdpa(ctx, q, k, v)
    expect_shape(weights, (2, 3, 5, 7), "the weights")
    sums = weights.double().sum(-1)
    scores = q.double() @ k.double().transpose(-2, -1)
    if any(close(weights, candidate, 1e-4, 1e-4) for candidate in (scores, scores / 2)):
        raise Fail("the second value returned is the scores, not the weights: return the "
                   "softmax of the scores (scores.softmax(dim=-1) returns a new tensor and "
                   "leaves scores as they were: keep its result)")
    _, sharper = _sdpa(ctx, q * 2, k, v)
    expect_varies(weights, sharper, "the weights", "the queries were doubled")
    if (weights < -1e-6).any() or not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise Fail("the weights do not sum to 1 over the keys (row sums from {lo:.3f} to "
                   "{hi:.3f}): the softmax must run over the last axis",
                   lo=float(sums.min()), hi=float(sums.max()))
    _expect_weights_follow_scores(ctx, weights, scores, q, k, v)


def _expect_weights_follow_scores(ctx, weights, scores, q, k, v):
    """The weights are a function of the scores: the same input gives the same weights, and each
    query's largest weight is on the key with its largest score q·k (whatever the scale, which
    is sdpa.values' to check). Queries whose two best keys nearly tie are left aside."""
    _, again = _sdpa(ctx, q, k, v)
    if not close(again, weights, 1e-6, 1e-5):
        raise Fail("the same q, k and v gave different weights: the weights must be the softmax "
                   "of the scores, with nothing random in them")
    top = scores.topk(2, dim=-1).values
    clear = (top[..., 0] - top[..., 1]) > 1e-3
    wrong = (weights.argmax(-1) != scores.argmax(-1)) & clear
    if wrong.any():
        raise Fail("the weights do not follow the scores: for {n} of {total} queries the largest "
                   "weight is not on the key with the largest score q·k",
                   n=int(wrong.sum()), total=int(clear.sum()))


def test_sdpa_values(ctx):
    ctx.seed(13)
    q, k, v = ctx.randn(2, 3, 5, 4) * 2, ctx.randn(2, 3, 7, 4) * 2, ctx.randn(2, 3, 7, 6)
    out, weights = _sdpa(ctx, q, k, v)
    expected_out, expected_weights = ctx.ref[SDPA](q, k, v)
    ctx.expect_close(weights, expected_weights, "the weights",
                     hint=first_match(out, _variants(q, k, v), ctx.atol, ctx.rtol))
    ctx.expect_close(out, expected_out, "the output",
                     hint="the weights are right, so look at how they combine the values")


def test_sdpa_mask(ctx):
    """Masking, apart from everything else: with a mask, the weights must be the function's own
    weights without it, zero where the mask blocks and renormalised over the keys it keeps. So a
    wrong scale (sdpa.values) does not cost these points too."""
    ctx.seed(14)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    causal = torch.ones(5, 7, dtype=torch.bool).triu(1)
    padding = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    padding[0, ..., 5:] = True
    padding[1, ..., 3:] = True
    scattered = torch.rand(2, 3, 5, 7, generator=ctx.generator) < 0.4
    scattered[..., 0] = False                          # every query keeps one key
    plain_out, plain = _sdpa(ctx, q, k, v)
    expect_shape(plain, (2, 3, 5, 7), "the weights without a mask")
    expect_varies(plain, _sdpa(ctx, q * 2, k, v)[1], "the weights", "the queries were doubled")
    sums = plain.double().sum(-1)
    if (plain < -1e-6).any() or not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise Fail("the weights are not a softmax over the keys (see the softmax check), so the "
                   "mask cannot be checked apart from that")
    combines = close(plain_out, plain.double() @ v.double(), 1e-4, 1e-4)
    cases = ((causal, "a causal mask [5, 7]", "the weights with a causal mask [5, 7]",
              "the output with a causal mask [5, 7]"),
             (padding, "a padding mask [2, 1, 1, 7]", "the weights with a padding mask [2, 1, 1, 7]",
              "the output with a padding mask [2, 1, 1, 7]"),
             (scattered, "a full mask [2, 3, 5, 7]", "the weights with a full mask [2, 3, 5, 7]",
              "the output with a full mask [2, 3, 5, 7]"))
    for mask, name, weights_what, output_what in cases:
        out, weights = _sdpa(ctx, q, k, v, mask)
        expect_shape(weights, (2, 3, 5, 7), weights_what)
        blocked_where = mask.expand(2, 3, 5, 7)
        blocked = weights.double()[blocked_where]
        if blocked.numel() and blocked.abs().max() > 1e-6:
            allowed = weights.double()[~blocked_where]
            if allowed.numel() and allowed.abs().max() <= 1e-6:
                raise Fail("with {name}, the weights are 0 where the mask is False: True means "
                           "blocked, so the mask is inverted", name=name)
            if close(weights, plain, 1e-5, 1e-5):   # the mask changed nothing at all
                raise Fail("with {name}, the weights are those without a mask: the mask had no "
                           "effect. masked_fill returns a new tensor and leaves scores as they "
                           "were: keep its result (scores = scores.masked_fill(mask, ...)) or "
                           "use masked_fill_", name=name)
            raise Fail("with {name}, a blocked key (mask True) got weight up to {w:.3f}; it "
                       "must get 0: fill the blocked scores with -inf (or a very negative number) "
                       "before the softmax", name=name, w=float(blocked.abs().max()))
        kept = plain.double().masked_fill(blocked_where, 0.0)
        expected = kept / kept.sum(-1, keepdim=True)
        ctx.expect_close(weights, expected, weights_what,
                         hint="mask the scores before the softmax, so that the weights of the "
                              "keys left sum to 1")
        if combines:                     # the function's own way of combining values, masked
            ctx.expect_close(out, expected @ v.double(), output_what)


# -- multi-head attention ------------------------------------------------------------------------
D, H = 12, 3


def _expected_mha(module, x_q, x_kv, mask) -> list[torch.Tensor]:
    """What the reference gives with the stand-in attention under it, and with real attention.
    A class that calls scaled_dot_product_attention by its name gets the stand-in; one that holds
    its own attention function may not: either is accepted, so that a bug in the student's own
    attention costs sdpa's points, not these (unless the class keeps its own copy of it)."""
    with torch.no_grad():
        with swapped(module.forward.__globals__, SDPA, standins.AttentionFunction()):
            around_stand_in = module(x_q, x_kv, mask)
        return [around_stand_in, module(x_q, x_kv, mask)]


def _scaled_twice(reference: torch.nn.Module) -> torch.nn.Module:
    """The reference with its queries divided by sqrt(d_k) before the attention function, which
    divides its scores by sqrt(d_k) again: a MultiHeadAttention that scales q (or k) itself."""
    twice = copy.deepcopy(reference)
    with torch.no_grad():
        twice.w_q.weight /= math.sqrt(D // H)
        twice.w_q.bias /= math.sqrt(D // H)
    return twice


def _projections_swapped(reference: torch.nn.Module) -> torch.nn.Module:
    """The reference with the weights of w_q and w_k exchanged: a MultiHeadAttention that projects
    the queries with w_k and the keys with w_q."""
    swapped_module = copy.deepcopy(reference)
    with torch.no_grad():
        for name in ("weight", "bias"):
            query, key = getattr(reference.w_q, name), getattr(reference.w_k, name)
            getattr(swapped_module.w_q, name).copy_(key)
            getattr(swapped_module.w_k, name).copy_(query)
    return swapped_module


def _expect_mha(ctx, out, reference, x_q, x_kv, mask, used: bool, what: str, hint: str = ""):
    """`out` must be one of the two expected outputs (see _expected_mha)."""
    candidates = _expected_mha(reference, x_q, x_kv, mask)
    out = expect_like(out, candidates[0], what)
    if any(close(out, expected, ctx.atol, ctx.rtol) for expected in candidates):
        return
    if any(close(out, twice, ctx.atol, ctx.rtol)
           for twice in _expected_mha(_scaled_twice(reference), x_q, x_kv, mask)):
        raise Fail("{what}: the scores are scaled twice: scaled_dot_product_attention divides "
                   "them by sqrt(d_k) already, so MultiHeadAttention must not scale q or k as "
                   "well", what=what)
    if any(close(out, crossed, ctx.atol, ctx.rtol)
           for crossed in _expected_mha(_projections_swapped(reference), x_q, x_kv, mask)):
        raise Fail("{what}: w_q and w_k are swapped: the queries are w_q(x_q) and the keys "
                   "w_k(x_kv), split into heads", what=what)
    if not used:
        raise Fail("{what}: not the expected values (largest difference {gap:.2g}). "
                   "MultiHeadAttention did not call scaled_dot_product_attention by that name, so "
                   "your own attention function ran inside it, and a bug there shows here too",
                   what=what, gap=largest_gap(out, candidates[1]))
    ctx.expect_close(out, candidates[0], what, hint=hint)


def _student_mha(ctx, seed=21, strict=True):
    """The student's MultiHeadAttention with the reference's weights loaded. With strict=False (a
    check of behaviour) they are loaded in their order when the names do not match."""
    reference = ctx.reference_module("MultiHeadAttention", D, H, seed=seed)
    student = ctx.new("MultiHeadAttention", D, H, seed=seed)
    student.load_reference(
        reference, strict=strict,
        unmatched=Fail("MultiHeadAttention's behaviour cannot be checked: it has no parameters "
                       "like the assignment's four nn.Linear(12, 12) (see the structure check)"),
        by_name=lambda missing, unexpected: Fail(
            "cannot load the reference's weights by name (missing: {missing}; unexpected: "
            "{unexpected}); the parameters must be w_q, w_k, w_v, w_o",
            missing=missing or "none", unexpected=unexpected or "none"))
    return reference, student


def _run_mha(ctx, student, x_q, x_kv, mask=None, reference=None):
    """(output, whether the stand-in attention was called: from the student's process, so it
    only words a message). When the student's code raises on cross-attention and `reference` is
    given, the message may name why (see _cross_crash_cause)."""
    args = (x_q, x_kv) if mask is None else (x_q, x_kv, mask)
    try:
        out = student.run(*args, swap_globals={SDPA: "AttentionFunction"})
    except StudentError as error:
        if reference is not None and x_q.shape[1] != x_kv.shape[1] and \
                _cross_crash_cause(ctx, student, reference, x_q):
            raise Fail("cross-attention from x_q {q} to x_kv {kv} raised {kind}: the values come "
                       "from x_q (with an x_kv as long as x_q, where that runs, your module gives "
                       "exactly the output of v = w_v(x_q)); the keys and the values both come "
                       "from x_kv: v = w_v(x_kv)", q=list(x_q.shape), kv=list(x_kv.shape),
                       kind=error.type) from None
        raise
    used = bool(ctx.global_calls(SDPA))
    return out, used


def _mha_from(module, x_q, x_k, x_v, attention) -> torch.Tensor:
    """The reference's multi-head attention with its queries, keys and values projected from the
    tensors given (a wrong wiring, to name it), around `attention`."""
    def split(x):
        return x.view(x.shape[0], x.shape[1], module.num_heads, module.d_k).transpose(1, 2)

    with torch.no_grad():
        out, _ = attention(split(module.w_q(x_q)), split(module.w_k(x_k)), split(module.w_v(x_v)))
        return module.w_o(out.transpose(1, 2).reshape(x_q.shape[0], x_q.shape[1], -1))


def _cross_crash_cause(ctx, student, reference, x_q) -> bool:
    """Whether the student's module, which raised on an x_kv of another length than x_q, takes its
    values from x_q: on an x_kv as long as x_q (where that runs) it gives exactly that output,
    around the stand-in attention or the reference's own."""
    generator = torch.Generator().manual_seed(1730)
    x_kv = torch.randn(x_q.shape, generator=generator)
    try:
        out = student.run(x_q, x_kv, swap_globals={SDPA: "AttentionFunction"})
    except StudentError:
        return False
    return any(close(out, _mha_from(reference, x_q, x_kv, x_q, attention), ctx.atol, ctx.rtol)
               for attention in (standins.AttentionFunction(), ctx.ref[SDPA]))


def test_mha_structure(ctx):
    student = ctx.new("MultiHeadAttention", D, H)
    expected = {f"w_{x}.{p}": ([D, D] if p == "weight" else [D]) for x in "qkvo"
                for p in ("weight", "bias")}
    student.expect_parameters(expected, "MultiHeadAttention(12, 3) should have exactly four "
                              "nn.Linear(12, 12) with bias named w_q, w_k, w_v, w_o (missing: "
                              "{missing}; unexpected: {unexpected}; wrong shape: {wrong})")
    shared = student.shared(expected)
    if shared:
        module, other = shared[0]
        raise Fail("{module} is the same module as {other}: each projection needs an nn.Linear "
                   "of its own (self.{module} = nn.Linear(d_model, d_model))",
                   module=module, other=other)
    # A second valid size, 4 heads of d_k 3: a check of divisibility that refuses it, or a head
    # count fixed in the code, shows here.
    try:
        other = ctx.new("MultiHeadAttention", D, 4)
    except StudentError as error:
        raise Fail("MultiHeadAttention(12, 4) could not be built ({kind}): 12 is a multiple of 4, "
                   "so 4 heads of d_k = 3 are valid; check that d_model % num_heads == 0",
                   kind=error.info.get("type") or "Error") from None
    other.expect_parameters(expected, "MultiHeadAttention(12, 4) should have exactly four "
                            "nn.Linear(12, 12) with bias named w_q, w_k, w_v, w_o (missing: "
                            "{missing}; unexpected: {unexpected}; wrong shape: {wrong})")


def test_mha_self(ctx):
    ctx.seed(22)
    reference, student = _student_mha(ctx)
    x = ctx.randn(2, 5, D)
    out, used = _run_mha(ctx, student, x, x)
    _expect_mha(ctx, out, reference, x, x, None, used, "self-attention on x [2, 5, 12] with 3 heads",
                hint="check how the heads are split and merged (view, then transpose), and that "
                     "w_o is applied last")


def test_mha_cross(ctx):
    ctx.seed(23)
    reference, student = _student_mha(ctx, seed=24)
    x, memory = ctx.randn(2, 5, D), ctx.randn(2, 7, D)
    out, used = _run_mha(ctx, student, x, memory, reference=reference)
    what = "cross-attention from x [2, 5, 12] to memory [2, 7, 12]"
    expect_shape(out, (2, 5, D), what)
    if any(close(out, wrong, ctx.atol, ctx.rtol) for wrong in _expected_mha(reference, x, x, None)):
        raise Fail("cross-attention took its keys and values from x_q; they must come from x_kv")
    _expect_mha(ctx, out, reference, x, memory, None, used, what)


def _run_masked(ctx, student, x_q, x_kv, mask, what: str, reference=None):
    """_run_mha with a mask; when the student's code raises with the mask and runs without it,
    the message names the masks' shape convention (the Annotated Transformer's MultiHeadedAttention
    adds a head axis with mask.unsqueeze(1): its masks are [B, 1, Tk], the course's are not)."""
    try:
        return _run_mha(ctx, student, x_q, x_kv, mask, reference=reference)
    except StudentError as error:
        try:
            _run_mha(ctx, student, x_q, x_kv)
        except (StudentError, Fail):
            raise error from None
        raise Fail("with {what}, your code raised {kind} ({message}), and without a mask it "
                   "runs: pass the mask on as it is. It is ready to broadcast against the weights "
                   "[B, num_heads, Tq, Tk]: a causal mask [Tq, Tk], a padding mask [B, 1, 1, Tk] "
                   "(its head and query axes are there already), so it needs no "
                   "mask.unsqueeze(1), which the Annotated Transformer adds to its own "
                   "[B, 1, Tk] masks", what=what, kind=error.type,
                   message=str(error.info.get("message", ""))[:200]) from None


def _expect_attention_weights(ctx, student, reference, x_q, x_kv, mask, what: str):
    """The contract's last sentence: after a call, self.attention_weights holds that call's
    weights [B, num_heads, Tq, Tk], those of the attention function it called (the stand-in's,
    or the reference's own when the class keeps its own attention), zero where the mask blocks."""
    expected = []
    with torch.no_grad():
        for stand_in in (True, False):
            reference.attention_weights = None
            if stand_in:
                with swapped(reference.forward.__globals__, SDPA, standins.AttentionFunction()):
                    reference(x_q, x_kv, mask)
            else:
                reference(x_q, x_kv, mask)
            expected.append(reference.attention_weights)
    _run_mha(ctx, student, x_q, x_kv, mask)
    kept = ctx.request("attribute", handle=student.name, name="attention_weights")
    if not isinstance(kept, dict) or not kept.get("present"):
        raise Fail("MultiHeadAttention does not keep its attention weights: after each call, "
                   "self.attention_weights must hold the weights [B, num_heads, Tq, Tk] that "
                   "scaled_dot_product_attention returned")
    name = "self.attention_weights"
    weights = expect_kind(expect_shape(kept.get("value"), tuple(expected[0].shape), name),
                          "floating", name)
    if not any(close(weights, each, ctx.atol, ctx.rtol) for each in expected):
        raise Fail("self.attention_weights after {what} are not the weights of that call "
                   "(largest difference {gap:.2g}): keep the weights that "
                   "scaled_dot_product_attention returned, all heads, [B, num_heads, Tq, Tk]",
                   what=what, gap=largest_gap(weights, expected[0]))


def test_mha_mask(ctx):
    ctx.seed(25)
    reference, student = _student_mha(ctx, seed=26, strict=False)
    x = ctx.randn(2, 6, D)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    before, used = _run_masked(ctx, student, x, x, causal, "a causal mask [6, 6]")
    changed = x.clone()
    changed[:, 4] += 1.5
    after, _ = _run_mha(ctx, student, changed, changed, causal)
    expect_shape(before, (2, 6, D), "masked self-attention on x [2, 6, 12]")
    expect_shape(after, (2, 6, D), "masked self-attention on x [2, 6, 12]")
    expect_varies(before[:, 4:], after[:, 4:], "masked self-attention at positions 4 and 5",
                  "token 4 changed")
    for position in range(4):
        if not close(before[:, position], after[:, position], ctx.atol, ctx.rtol):
            if not used:
                raise Fail("with a causal mask, position {p} changed when token 4 changed. "
                           "MultiHeadAttention did not call scaled_dot_product_attention by that "
                           "name, so your own attention function ran inside it: see the sdpa "
                           "checks", p=position)
            raise Fail("with a causal mask, position {p} changed when token 4 changed: the mask "
                       "does not reach the attention", p=position)
    _expect_mha(ctx, before, reference, x, x, causal, used, "masked self-attention")
    memory = ctx.randn(2, 7, D)
    pads = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    pads[:, ..., 5:] = True
    before, _ = _run_masked(ctx, student, x, memory, pads, "a padding mask [2, 1, 1, 7]",
                            reference=reference)
    noisy = memory.clone()
    noisy[:, 5:] = ctx.randn(2, 2, D) * 3
    after, _ = _run_mha(ctx, student, x, noisy, pads)
    kept = memory.clone()
    kept[:, :2] = ctx.randn(2, 2, D) * 3
    other, _ = _run_mha(ctx, student, x, kept, pads)
    expect_varies(before, other, "cross-attention with a padding mask [2, 1, 1, 7]",
                  "the keys that are not padding changed")
    if not close(before, after, ctx.atol, ctx.rtol):
        if not used:
            raise Fail("changing the padded keys changed the output. MultiHeadAttention did not "
                       "call scaled_dot_product_attention by that name, so your own attention "
                       "function ran inside it: see the sdpa checks")
        raise Fail("changing the padded keys changed the output: the padding mask [B, 1, 1, Tk] "
                   "must block them for every head and query")
    _expect_attention_weights(ctx, student, reference, x, memory, pads,
                              "cross-attention from x [2, 6, 12] to memory [2, 7, 12] with a "
                              "padding mask")


# -- masks ---------------------------------------------------------------------------------------
# A table of cases: the check earns its points when every size passes, and the student reads the
# first failing size's message. Size 1 comes last: there a mask that blocks the diagonal is also
# the inverse of the right one, and the message must name the real cause.
@pytest.mark.parametrize("size", (4, 7, 1))
def test_masks_causal(ctx, size):
    got = as_tensor(ctx.call("causal_mask", size), f"causal_mask({size})")
    expected = torch.ones(size, size, dtype=torch.bool).triu(1)
    if got.dtype != torch.bool:
        raise Fail("causal_mask should return a bool tensor, not {dtype}",
                   dtype=str(got.dtype).replace("torch.", ""))
    expect_shape(got, (size, size), f"causal_mask({size})")
    if not torch.equal(got, expected):
        if torch.equal(got, torch.ones(size, size, dtype=torch.bool).triu(0)):
            raise Fail("causal_mask also blocks the diagonal: a position must see itself")
        if torch.equal(got, ~expected):
            raise Fail("causal_mask is inverted: True must mean blocked (the future)")
        raise Fail("causal_mask({size}) should be True exactly above the diagonal", size=size)


def test_masks_padding(ctx):
    for pad_id in (0, 9):
        tokens = torch.tensor([[1, 2, 3, pad_id, pad_id, pad_id], [4, 5, 6, 7, 8, pad_id],
                               [3, 3, 3, 3, 3, 3]])
        got = as_tensor(ctx.call("padding_mask", tokens, pad_id), "padding_mask")
        expected = (tokens == pad_id)[:, None, None, :]
        if tuple(got.shape) == (3, 1, 6, 1):
            raise Fail("padding_mask is laid out on the query axis [B, 1, T, 1]; it must block "
                       "keys: [B, 1, 1, T]")
        expect_shape(got, (3, 1, 1, 6), f"padding_mask(tokens [3, 6], pad_id={pad_id})")
        if got.dtype != torch.bool:
            raise Fail("padding_mask should return a bool tensor, not {dtype}",
                       dtype=str(got.dtype).replace("torch.", ""))
        if torch.equal(got, ~expected):
            raise Fail("padding_mask is inverted: True must mean padding (a key to block)")
        if not torch.equal(got, expected):
            raise Fail("padding_mask(tokens, pad_id={pad_id}) should be True exactly where the "
                       "token is pad_id", pad_id=pad_id)
