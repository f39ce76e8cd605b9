"""Hidden checks of assignment 01-attention: scaled dot-product attention, multi-head attention, masks.

Every size is distinct (B=2, heads=3, Tq=5, Tk=7, d_k=4, d_v=6, d_model=12) so a swapped axis cannot
pass by accident. Multi-head attention is checked with a stand-in under it wherever it calls
`scaled_dot_product_attention`, so a bug in that function costs its own points only.
"""
import math

import torch

from ..framework import Fail, as_tensor, check, close, expect_shape, pair, swapped
from ..sandbox import standins

A = "01-attention"
SDPA = "scaled_dot_product_attention"


def _sdpa(ctx, q, k, v, mask=None):
    args = (q, k, v) if mask is None else (q, k, v, mask)
    out, weights = pair(ctx.call(SDPA, *args), SDPA)
    return as_tensor(out, "the output"), as_tensor(weights, "the weights")


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


def _hint(got, variants, ctx):
    for candidate, hint in variants:
        if candidate.shape == got.shape and close(got, candidate, ctx.atol, ctx.rtol):
            return hint
    return ""


@check(A, "sdpa.shapes")
def sdpa_shapes(ctx):
    ctx.seed(11)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    out, weights = _sdpa(ctx, q, k, v)
    expect_shape(out, (2, 3, 5, 6), "the output for q [2, 3, 5, 4], k [2, 3, 7, 4], v [2, 3, 7, 6]")
    expect_shape(weights, (2, 3, 5, 7), "the weights for q [2, 3, 5, 4], k [2, 3, 7, 4]")
    out, weights = _sdpa(ctx, q[0, 0], k[0, 0], v[0, 0])
    expect_shape(out, (5, 6), "the output for q [5, 4], k [7, 4], v [7, 6] (no batch axes)")
    expect_shape(weights, (5, 7), "the weights for q [5, 4], k [7, 4] (no batch axes)")


@check(A, "sdpa.softmax")
def sdpa_softmax(ctx):
    ctx.seed(12)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    _, weights = _sdpa(ctx, q, k, v)
    expect_shape(weights, (2, 3, 5, 7), "the weights")
    sums = weights.double().sum(-1)
    if (weights < -1e-6).any() or not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        raise Fail("the weights do not sum to 1 over the keys (row sums from {lo:.3f} to "
                   "{hi:.3f}): the softmax must run over the last axis",
                   lo=float(sums.min()), hi=float(sums.max()))


@check(A, "sdpa.values")
def sdpa_values(ctx):
    ctx.seed(13)
    q, k, v = ctx.randn(2, 3, 5, 4) * 2, ctx.randn(2, 3, 7, 4) * 2, ctx.randn(2, 3, 7, 6)
    out, weights = _sdpa(ctx, q, k, v)
    expected_out, expected_weights = ctx.ref[SDPA](q, k, v)
    ctx.expect_close(weights, expected_weights, "the weights",
                     hint=_hint(out, _variants(q, k, v), ctx))
    ctx.expect_close(out, expected_out, "the output",
                     hint="the weights are right, so look at how they combine the values")


@check(A, "sdpa.mask")
def sdpa_mask(ctx):
    ctx.seed(14)
    q, k, v = ctx.randn(2, 3, 5, 4), ctx.randn(2, 3, 7, 4), ctx.randn(2, 3, 7, 6)
    causal = torch.ones(5, 7, dtype=torch.bool).triu(1)
    padding = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    padding[0, ..., 5:] = True
    padding[1, ..., 3:] = True
    scattered = torch.rand(2, 3, 5, 7, generator=ctx.generator) < 0.4
    scattered[..., 0] = False                          # every query keeps one key
    cases = ((causal, "a causal mask [5, 7]", "the weights with a causal mask [5, 7]",
              "the output with a causal mask [5, 7]"),
             (padding, "a padding mask [2, 1, 1, 7]", "the weights with a padding mask [2, 1, 1, 7]",
              "the output with a padding mask [2, 1, 1, 7]"),
             (scattered, "a full mask [2, 3, 5, 7]", "the weights with a full mask [2, 3, 5, 7]",
              "the output with a full mask [2, 3, 5, 7]"))
    for mask, name, weights_what, output_what in cases:
        out, weights = _sdpa(ctx, q, k, v, mask)
        expected_out, expected_weights = ctx.ref[SDPA](q, k, v, mask)
        expect_shape(weights, (2, 3, 5, 7), weights_what)
        blocked = weights.double()[mask.expand(2, 3, 5, 7)]
        if blocked.numel() and blocked.abs().max() > 1e-6:
            allowed = weights.double()[~mask.expand(2, 3, 5, 7)]
            if allowed.numel() and allowed.abs().max() <= 1e-6:
                raise Fail("with {name}, the weights are 0 where the mask is False: True means "
                           "blocked, so the mask is inverted", name=name)
            raise Fail("with {name}, a blocked key (mask True) got weight up to {w:.3f}; it "
                       "must get 0", name=name, w=float(blocked.abs().max()))
        ctx.expect_close(weights, expected_weights, weights_what)
        ctx.expect_close(out, expected_out, output_what)


# -- multi-head attention ------------------------------------------------------------------------
D, H = 12, 3


def _expected_mha(ctx, module, x_q, x_kv, mask, stand_in_used: bool):
    with torch.no_grad():
        if not stand_in_used:
            return module(x_q, x_kv, mask)
        with swapped(module.forward.__globals__, SDPA, standins.AttentionFunction()):
            return module(x_q, x_kv, mask)


def _student_mha(ctx, seed=21, strict=True):
    """The student's MultiHeadAttention with the reference's weights loaded. With strict=False (a
    check of behaviour) it keeps its own weights when the names do not match: reference is None."""
    reference = ctx.reference_module("MultiHeadAttention", D, H, seed=seed)
    student = ctx.new("MultiHeadAttention", D, H, seed=seed)
    missing, unexpected = student.load(reference.state_dict())
    if (missing or unexpected) and not strict:
        return None, student
    if missing or unexpected:
        raise Fail("cannot load the reference's weights by name (missing: {missing}; "
                   "unexpected: {unexpected}); the parameters must be w_q, w_k, w_v, w_o",
                   missing=missing or "none", unexpected=unexpected or "none")
    return reference, student


def _run_mha(ctx, student, x_q, x_kv, mask=None):
    args = (x_q, x_kv) if mask is None else (x_q, x_kv, mask)
    out = student.run(*args, swap_globals={SDPA: "AttentionFunction"})
    used = bool(ctx.global_calls(SDPA))
    return out, used


@check(A, "mha.structure")
def mha_structure(ctx):
    student = ctx.new("MultiHeadAttention", D, H)
    expected = {f"w_{x}.{p}": ([D, D] if p == "weight" else [D]) for x in "qkvo"
                for p in ("weight", "bias")}
    got = student.parameters
    if got != expected:
        missing = sorted(set(expected) - set(got))
        unexpected = sorted(set(got) - set(expected))
        wrong = sorted(n for n in set(got) & set(expected) if got[n] != expected[n])
        raise Fail("MultiHeadAttention(12, 3) should have exactly four nn.Linear(12, 12) with bias "
                   "named w_q, w_k, w_v, w_o (missing: {missing}; unexpected: {unexpected}; wrong "
                   "shape: {wrong})", missing=missing or "none", unexpected=unexpected or "none",
                   wrong=wrong or "none")


@check(A, "mha.self")
def mha_self(ctx):
    ctx.seed(22)
    reference, student = _student_mha(ctx)
    x = ctx.randn(2, 5, D)
    out, used = _run_mha(ctx, student, x, x)
    expected = _expected_mha(ctx, reference, x, x, None, used)
    ctx.expect_close(out, expected, "self-attention on x [2, 5, 12] with 3 heads",
                     hint="check how the heads are split and merged (view, then transpose), and "
                          "that w_o is applied last")


@check(A, "mha.cross")
def mha_cross(ctx):
    ctx.seed(23)
    reference, student = _student_mha(ctx, seed=24)
    x, memory = ctx.randn(2, 5, D), ctx.randn(2, 7, D)
    out, used = _run_mha(ctx, student, x, memory)
    expected = _expected_mha(ctx, reference, x, memory, None, used)
    expect_shape(out, (2, 5, D), "cross-attention from x [2, 5, 12] to memory [2, 7, 12]")
    if not close(out, expected, ctx.atol, ctx.rtol):
        wrong = _expected_mha(ctx, reference, x, x, None, used)
        if close(out, wrong, ctx.atol, ctx.rtol):
            raise Fail("cross-attention took its keys and values from x_q; they must come from x_kv")
        ctx.expect_close(out, expected, "cross-attention from x [2, 5, 12] to memory [2, 7, 12]")


@check(A, "mha.mask")
def mha_mask(ctx):
    ctx.seed(25)
    reference, student = _student_mha(ctx, seed=26, strict=False)
    x = ctx.randn(2, 6, D)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    before, used = _run_mha(ctx, student, x, x, causal)
    changed = x.clone()
    changed[:, 4] += 1.5
    after, _ = _run_mha(ctx, student, changed, changed, causal)
    expect_shape(before, (2, 6, D), "masked self-attention on x [2, 6, 12]")
    expect_shape(after, (2, 6, D), "masked self-attention on x [2, 6, 12]")
    for position in range(4):
        if not close(before[:, position], after[:, position], ctx.atol, ctx.rtol):
            raise Fail("with a causal mask, position {p} changed when token 4 changed: the mask "
                       "does not reach the attention", p=position)
    if reference is not None:
        expected = _expected_mha(ctx, reference, x, x, causal, used)
        ctx.expect_close(before, expected, "masked self-attention")
    memory = ctx.randn(2, 7, D)
    pads = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    pads[:, ..., 5:] = True
    before, _ = _run_mha(ctx, student, x, memory, pads)
    noisy = memory.clone()
    noisy[:, 5:] = ctx.randn(2, 2, D) * 3
    after, _ = _run_mha(ctx, student, x, noisy, pads)
    if not close(as_tensor(before, "the output"), as_tensor(after, "the output"), ctx.atol,
                 ctx.rtol):
        raise Fail("changing the padded keys changed the output: the padding mask [B, 1, 1, Tk] "
                   "must block them for every head and query")


# -- masks ---------------------------------------------------------------------------------------
@check(A, "masks.causal")
def masks_causal(ctx):
    for size in (1, 4, 7):
        got = as_tensor(ctx.call("causal_mask", size), f"causal_mask({size})")
        expected = torch.ones(size, size, dtype=torch.bool).triu(1)
        if got.dtype != torch.bool:
            raise Fail("causal_mask should return a bool tensor, not {dtype}", dtype=got.dtype)
        expect_shape(got, (size, size), f"causal_mask({size})")
        if not torch.equal(got, expected):
            if torch.equal(got, ~expected):
                raise Fail("causal_mask is inverted: True must mean blocked (the future)")
            if torch.equal(got, torch.ones(size, size, dtype=torch.bool).triu(0)):
                raise Fail("causal_mask also blocks the diagonal: a position must see itself")
            raise Fail("causal_mask({size}) should be True exactly above the diagonal",
                       size=size)


@check(A, "masks.padding")
def masks_padding(ctx):
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
            raise Fail("padding_mask should return a bool tensor, not {dtype}", dtype=got.dtype)
        if not torch.equal(got, expected):
            raise Fail("padding_mask(tokens, pad_id={pad_id}) should be True exactly where the "
                       "token is pad_id", pad_id=pad_id)
