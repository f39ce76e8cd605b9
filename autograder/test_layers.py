"""Hidden checks of assignment 02-layers: positions, feed-forward, encoder and decoder layers,
classifier and regressor.

The layers are checked with stand-ins in place of their attention and feed-forward sublayers (the
stand-ins record what they receive), so a layer's own wiring (residuals, post-norm, masks, memory) is
what is graded, and a bug in FeedForward costs FeedForward's points only. The classifier and the
regressor are checked, and the regressor trained, with stand-ins in place of their encoder layers.
"""
import itertools
import math
import secrets

import torch

from tfcourse.submission.framework import (Fail, as_tensor, close, expect_kind, expect_like,
                                           expect_shape, expect_varies, first_match, largest_gap,
                                           parameter_shapes, swapped, under, unmoved)
from tfcourse.submission.reference import recipe_source
from . import standins
from tfcourse.sandbox.session import StudentError

D, H, FF = 12, 3, 20


# -- positional encoding -------------------------------------------------------------------------
def _pe_variants(T, d):
    position = torch.arange(T, dtype=torch.float64)[:, None]
    def table(rate, first=torch.sin, second=torch.cos, start=0):
        out = torch.zeros(T, d, dtype=torch.float64)
        angle = (position + start) * rate
        out[:, 0::2], out[:, 1::2] = first(angle), second(angle)
        return out

    def halves(rate):
        angle = position * rate
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    even = torch.arange(0, d, 2, dtype=torch.float64)
    paper = 10000 ** (-even / d)
    return [
        (table(paper, start=1), "the positions are counted from 1: the first position is 0 "
                                "(torch.arange(T))"),
        (table(paper, torch.cos, torch.sin), "sin and cos are swapped: sin goes on the even columns"),
        (table(10000 ** (-torch.arange(d // 2, dtype=torch.float64) / d)),
         "the frequencies are off: column pair i turns at 1/10000^(2i/d_model)"),
        (table(10000 ** (-even)), "the frequencies are off: divide the exponent by d_model"),
        (table(1000 ** (-even / d)), "the base of the frequencies should be 10000"),
        (table(10000 ** (-even / T)), "the exponent is divided by T, the number of positions; "
                                      "divide it by d_model: 1/10000^(2i/d_model)"),
        (halves(paper), "sin and cos fill two halves of the table; they are interleaved: sin on "
                        "the even columns (0::2), cos on the odd ones (1::2), column pair i "
                        "sharing one frequency"),
    ]


def _pe_sign_dropped(got, T, d) -> str:
    """The words for a table whose exponent has lost its sign (frequencies 10000^(2i/d_model),
    faster with each pair), when `got` is that table. Its angles grow to about T * 10000, where
    float32 keeps no digit of a sine: it is compared where the angle is at most 200, which holds
    positions 1 and on of the first pairs (pair 0 turns at 1 either way)."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (T, d) or d < 4 or T < 2 or \
            not got.is_floating_point():
        return ""
    position = torch.arange(T, dtype=torch.float64)[:, None]
    angle = position * 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    wrong = torch.zeros(T, d, dtype=torch.float64)
    wrong[:, 0::2], wrong[:, 1::2] = torch.sin(angle), torch.cos(angle)
    small = torch.zeros(T, d, dtype=torch.bool)
    small[:, 0::2] = small[:, 1::2] = angle.abs() <= 200
    if not bool(small[1:, 2:].any()) or not bool(torch.isfinite(got).all()):
        return ""
    if close(got.double()[small], wrong[small], 1e-4, 1e-4):
        return ("the exponent has the wrong sign: column pair i turns at 1/10000^(2i/d_model), "
                "10000 ** (-2i / d_model), slower with each pair")
    return ""


def test_positions_shape(ctx):
    for T, d in ((9, 14), (1, 6), (40, 32)):
        got = expect_shape(ctx.call("positional_encoding", T, d), (T, d),
                           f"positional_encoding({T}, {d})")
        expect_kind(got, "floating", f"positional_encoding({T}, {d})")
        if T > 1:                       # the rows of two positions differ (zeros do not)
            expect_varies(got[0], got[1], f"positional_encoding({T}, {d})",
                          "the position went from 0 to 1")


def test_positions_values(ctx):
    for T, d in ((50, 16), (9, 14)):
        got = expect_shape(ctx.call("positional_encoding", T, d), (T, d),
                           f"positional_encoding({T}, {d})")
        expected = ctx.ref["positional_encoding"](T, d)
        if not close(got, expected, 1e-4, 1e-4):
            hint = first_match(got, _pe_variants(T, d), 1e-4, 1e-4) or _pe_sign_dropped(got, T, d)
            if hint:
                raise Fail("positional_encoding({T}, {d}) is not the paper's table: {hint}",
                           T=T, d=d, hint=hint)
            ctx.expect_close(got, expected, f"positional_encoding({T}, {d})")


# -- feed-forward ----------------------------------------------------------------------------------
def _names_and_shapes(ctx, handle, reference, what, skipped=()):
    """The parameters' names and shapes match the reference's, outside the `skipped` submodules
    (the parts graded on their own, which a layer only has to contain)."""
    handle.expect_parameters(parameter_shapes(reference, skipped),
                             "{what}'s parameters do not match the assignment (missing: {missing}; "
                             "unexpected: {unexpected}; wrong shape: {wrong})", skipped, what=what)


def _load(student, reference, cls, skipped=(), strict=True) -> None:
    """The reference's weights into the student's module, outside the `skipped` submodules, by
    name; with strict=False (a check of behaviour), in their order when the names do not match
    (see Handle.load_reference)."""
    student.load_reference(
        reference, skipped=skipped, strict=strict,
        unmatched=Fail("{cls}'s behaviour cannot be checked: it has no parameters like the "
                       "assignment's (see the params check)", cls=cls),
        by_name=lambda missing, unexpected: Fail(
            "cannot load the reference's weights into {cls} by name (missing: {missing}; "
            "unexpected: {unexpected})", cls=cls, missing=missing or "none",
            unexpected=unexpected or "none"))


def _loaded(ctx, cls, *args, seed=0, **kwargs):
    """The student's module and the reference's, with the reference's weights in both."""
    reference = ctx.reference_module(cls, *args, seed=seed, **kwargs)
    student = ctx.new(cls, *args, seed=seed, **kwargs)
    _load(student, reference, cls)
    return reference, student


def test_ffn_structure(ctx):
    handle = ctx.new("FeedForward", D, FF)
    _names_and_shapes(ctx, handle, ctx.reference_module("FeedForward", D, FF), "FeedForward(12, 20)")


def test_ffn_values(ctx):
    ctx.seed(31)
    reference, student = _loaded(ctx, "FeedForward", D, FF, seed=32)
    x = ctx.randn(2, 5, D)
    with torch.no_grad():
        expected = reference(x)
        relu_last = reference.linear2(reference.linear1(x)).relu()
        linear1, linear2 = reference.linear1, reference.linear2
        variants = [
            (linear2(linear1(x)), "there is no ReLU: FeedForward is linear2(relu(linear1(x))), "
                                  "the ReLU between linear1 and linear2"),
            (linear2(linear1(x.relu())), "the ReLU is applied to the input, before linear1; it "
                                         "goes between linear1 and linear2: "
                                         "linear2(relu(linear1(x)))"),
            (linear2(torch.nn.functional.gelu(linear1(x))),
             "the activation is GELU; the paper's FeedForward uses ReLU: "
             "linear2(relu(linear1(x)))"),
            (linear2(torch.nn.functional.gelu(linear1(x), approximate="tanh")),
             "the activation is GELU; the paper's FeedForward uses ReLU: "
             "linear2(relu(linear1(x)))"),
        ]
    got = student.run(x)
    if close(got, relu_last, ctx.atol, ctx.rtol):
        raise Fail("the ReLU goes between linear1 and linear2, not after linear2")
    if not close(got, expected, ctx.atol, ctx.rtol) and not close(got, student.run(x), ctx.atol,
                                                                   ctx.rtol):
        raise Fail("in eval mode FeedForward gave different outputs for the same input: something "
                   "random runs in eval mode (dropout left on, such as F.dropout without "
                   "training=self.training); FeedForward is linear2(relu(linear1(x))), with no "
                   "dropout of its own")
    ctx.expect_close(got, expected, "FeedForward on x [2, 5, 12]",
                     hint=first_match(got, variants, ctx.atol, ctx.rtol))


# -- encoder and decoder layers ------------------------------------------------------------------
# A layer is built with a stand-in in place of the student's FeedForward class, and checked with
# stand-ins in place of its sublayers, so that a bug in FeedForward costs FeedForward's points only.
STAND_IN_FFN = {"FeedForward": "FeedForwardFactory"}
EVAL_NOISE = ("in eval mode the layer gives different outputs for the same input: dropout must be "
              "off in eval mode (use nn.Dropout, or F.dropout with training=self.training)")


def _with_probes(ctx, cls, paths, seed, dropout=0.3, strict=True):
    """Student and reference layers with reference weights, their sublayers replaced by stand-ins.

    With strict=False (checks of behaviour), the reference's weights are loaded in their order
    when the names do not match (see `_load`)."""
    reference = ctx.reference_module(cls, D, H, FF, dropout, seed=seed)
    student = ctx.new(cls, D, H, FF, dropout, seed=seed, swap_globals=STAND_IN_FFN)
    probes = {}
    for offset, path in enumerate(paths):
        kind = "feed_forward" if path == "ffn" else "attention"
        handle, twin = ctx.probe(kind, d_model=D, seed=100 + 10 * offset)
        student.swap(path, handle)
        setattr(reference, path, twin)
        probes[path] = handle
    _distinct_norms(reference, seed)
    _load(student, reference, cls, skipped=paths, strict=strict)
    return reference, student, probes


def _distinct_norms(module: torch.nn.Module, seed: int) -> None:
    """Give each LayerNorm its own weights (they start as ones and zeros, all alike), so that a
    layer that puts a norm in another's place computes something else, and shows."""
    generator = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for part in module.modules():
            if isinstance(part, torch.nn.LayerNorm) and part.weight is not None:
                part.weight.copy_(1 + 0.3 * torch.randn(part.weight.shape, generator=generator))
                part.bias.copy_(0.2 * torch.randn(part.bias.shape, generator=generator))


# How each of a layer's own sublayers is built, to name it in a message.
SUBLAYERS = {"MultiHeadAttention": "MultiHeadAttention(d_model, num_heads)",
             "LayerNorm": "nn.LayerNorm(d_model)"}


def _layer_params(ctx, cls, count, own):
    """The layer's parameters, leaving its FeedForward aside (FeedForward is graded on its own)."""
    handle = ctx.new(cls, 32, 4, 128, 0.1, swap_globals=STAND_IN_FFN)
    if not any(name == "ffn" for name, _, _ in handle.info.get("children", [])):
        raise Fail("{cls} has no submodule named ffn: keep its FeedForward(d_model, d_ff) in "
                   "self.ffn", cls=cls)
    reference = ctx.reference_module(cls, 32, 4, 128, 0.1)
    _expect_ffn_built(ctx, handle, reference, cls, d_model=32, d_ff=128, num_heads=4)
    contract = [name for name, _ in reference.named_parameters() if not name.startswith("ffn.")]
    shared = handle.shared(contract)           # two of the contract's names, one tensor
    if shared:
        module, other = shared[0]
        try:
            kind = type(reference.get_submodule(module)).__name__
        except AttributeError:                  # a parameter tied to another of another name
            kind = "nn.Module"
        raise Fail("{module} is the same module as {other}: each sublayer needs a module of its "
                   "own (self.{module} = {build})", module=module, other=other,
                   build=SUBLAYERS.get(kind, kind + "(...)"))
    in_ffn = {handle.identity[name] for name in handle.parameters if name.startswith("ffn.")}
    got = handle.count([name for name in handle.parameters
                        if handle.identity[name] not in in_ffn])
    if got != own:
        raise Fail("{cls}(32, 4, 128) should have {count:,} parameters: {own:,} of its own (the "
                   "attention and the LayerNorms) and its FeedForward's; it has {n:,} of its own",
                   cls=cls, count=count, own=own, n=got)
    _names_and_shapes(ctx, handle, reference, cls, skipped=["ffn"])


def _ffn_arguments(call) -> tuple | None:
    """(d_model, d_ff) a FeedForward was built with, from the stand-in factory's record (data from
    the student's process: a number, or None where it is not one); None when the record is not
    one the factory writes."""
    if not isinstance(call, dict) or not isinstance(call.get("args"), list) or \
            not isinstance(call.get("kwargs"), dict):
        return None
    args, kwargs = call["args"], call["kwargs"]
    d_ff = args[0] if args else kwargs.get("d_ff")
    number = (lambda value: value if isinstance(value, int) and not isinstance(value, bool)
              else None)
    return number(call.get("d_model")), number(d_ff)


def _expect_ffn_built(ctx, handle, reference, cls, **sizes) -> None:
    """The layer builds its FeedForward as the contract does, FeedForward(d_model, d_ff): read from
    the stand-in factory's record (the stand-in runs whatever it was built with, so the checks of
    values cannot see it). A layer that makes its feed-forward block without the class has its
    ffn's parameters compared with the reference's, in their order (linear1's, then linear2's)."""
    calls = ctx.global_calls("FeedForward")
    calls = calls if isinstance(calls, list) else []
    names = {value: name for name, value in sizes.items()}
    wanted = (sizes["d_model"], sizes["d_ff"])
    for call in calls:
        given = _ffn_arguments(call)
        if given is None or given == wanted:
            continue
        words = ", ".join(names.get(value, str(value)) if value is not None else "?"
                          for value in (given if given[1] is not None else given[:1]))
        raise Fail("{cls} builds its FeedForward with ({given}): the arguments are "
                   "FeedForward(d_model, d_ff), so that linear1 goes from d_model to d_ff and "
                   "linear2 back", cls=cls, given=words)
    if calls:
        return
    own, seen = [], set()
    for name, shape in handle.parameters.items():
        if under(name, ["ffn"]) and handle.identity[name] not in seen:
            seen.add(handle.identity[name])
            own.append(shape)
    expected = [list(p.shape) for p in reference.ffn.parameters()]
    if own and own != expected:
        raise Fail("{cls}'s ffn has parameters of shapes {got}, not those of FeedForward(d_model, "
                   "d_ff) ({expected}): linear1 goes from d_model to d_ff, linear2 back",
                   cls=cls, got=own, expected=expected)


def _wired(x, sublayers, norms, pre=False, residual=None, order=None, unnormed=None,
           fed_input=None) -> torch.Tensor:
    """A layer's output when wired as asked: post-norm, norm(h + sublayer(h)), or pre-norm,
    h + sublayer(norm(h)); `residual[i]` False drops sublayer i's residual; `order` picks which
    norm goes with which sublayer; sublayer `unnormed` has no norm after it; sublayer `fed_input`
    reads the layer's input x instead of the previous step's output (its residual is still h)."""
    residual = residual or [True] * len(sublayers)
    order = order or range(len(sublayers))
    h = x
    with torch.no_grad():
        for position, (sublayer, keep, index) in enumerate(zip(sublayers, residual, order)):
            norm = (lambda t: t) if position == unnormed else norms[index]
            base = h if keep else 0
            read = x if position == fed_input else h
            h = base + sublayer(norm(h)) if pre else norm(base + sublayer(read))
    return h


NO_RESIDUAL = {"self-attention": "the self-attention sublayer has no residual connection",
               "cross-attention": "the cross-attention sublayer has no residual connection",
               "feed-forward": "the feed-forward sublayer has no residual connection"}
NO_NORM = {"self-attention": "the self-attention sublayer has no LayerNorm after it: each "
                             "sublayer is norm(x + dropout(sublayer(x))), norm1 after the first",
           "cross-attention": "the cross-attention sublayer has no LayerNorm after it: each "
                              "sublayer is norm(y + dropout(sublayer(y))), norm2 after the second",
           "feed-forward": "the feed-forward sublayer has no LayerNorm after it: each sublayer is "
                           "norm(x + dropout(sublayer(x))), the last norm after the feed-forward"}
FED_INPUT = {"cross-attention": "cross-attention reads the layer's input y, not the output of the "
                                "self-attention step: each sublayer reads the previous step's "
                                "output",
             "feed-forward": "the feed-forward sublayer reads the layer's input, not the output "
                             "of the step before it: each sublayer reads the previous step's "
                             "output, h = norm1(x + ...), then norm2(h + dropout(ffn(h)))"}
NORMS_SWAPPED = {2: "the LayerNorms are in each other's places: norm1 goes after the first "
                    "sublayer, norm2 after the second",
                 3: "the LayerNorms are in each other's places: norm1 goes after the first "
                    "sublayer, norm2 after the second, norm3 after the third"}


def _layer_variants(x, sublayers, norms, names) -> list[tuple[torch.Tensor, str]]:
    """The common wrong wirings of a layer, each with the words that name it."""
    count = len(sublayers)
    variants = [(_wired(x, sublayers, norms, pre=True),
                 "this is pre-norm (x + sublayer(norm(x))); the assignment's layer is post-norm: "
                 "norm(x + dropout(sublayer(x)))"),
                (_wired(x, sublayers, norms, residual=[False] * count),
                 "the residual connections are missing: add each sublayer's input to its output "
                 "before the norm")]
    for index, name in enumerate(names):
        residual = [position != index for position in range(count)]
        variants.append((_wired(x, sublayers, norms, residual=residual), NO_RESIDUAL[name]))
    for order in itertools.permutations(range(count)):
        if list(order) != list(range(count)):
            variants.append((_wired(x, sublayers, norms, order=order), NORMS_SWAPPED[count]))
    for index, name in enumerate(names):
        variants.append((_wired(x, sublayers, norms, unnormed=index), NO_NORM[name]))
        if index:
            variants.append((_wired(x, sublayers, norms, fed_input=index), FED_INPUT[name]))
    return variants


def _encoder_variants(reference, x, mask):
    attn, ffn = reference.self_attn, reference.ffn
    return _layer_variants(x, [lambda h: attn(h, h, mask), ffn],
                           [reference.norm1, reference.norm2], ["self-attention", "feed-forward"])


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


def _expect_deterministic(ctx, got, expected, run) -> None:
    """When a layer's output is not the expected one, whether that is because it changes from one
    run to the next in eval mode (dropout left on): asked only then, at the cost of a second run."""
    if not close(got, expected, ctx.atol, ctx.rtol) and not close(got, run(), ctx.atol, ctx.rtol):
        raise Fail(EVAL_NOISE)


def test_encoder_params(ctx):
    _layer_params(ctx, "EncoderLayer", 12704, 12704 - 8352)


def test_encoder_values(ctx):
    ctx.seed(41)
    reference, student, _ = _with_probes(ctx, "EncoderLayer", ("self_attn", "ffn"), seed=42)
    x = ctx.randn(2, 5, D)
    got = student.run(x)
    with torch.no_grad():
        expected = reference(x)
    _expect_deterministic(ctx, got, expected, lambda: student.run(x))
    ctx.expect_close(got, expected, "EncoderLayer on x [2, 5, 12] (eval mode)",
                     hint=first_match(got, _encoder_variants(reference, x, None), ctx.atol,
                                      ctx.rtol))


MASK_CAUSES = {
    "self_attn": ("the layer never called self_attn", "self_attn was called without the mask",
                  "self_attn did not receive the mask as it was given"),
    "cross_attn": ("the layer never called cross_attn", "cross_attn was called without the mask",
                   "cross_attn did not receive the mask as it was given"),
}


def _mask_cause(calls, mask, weights_shape, path="self_attn") -> str:
    """Why a layer's output saw what its mask blocks, from what the stand-in in its `path` recorded.
    Only words come from it: the student's process keeps the record, so it decides no point."""
    never, without, changed = MASK_CAUSES[path]
    given = calls[-1].get("mask") if calls else None
    if not calls:
        return never
    if given is None:
        return without
    if not _same_mask(given, mask, weights_shape):
        return changed
    return "the mask was passed on, but something else mixes the positions"


def test_encoder_mask(ctx):
    ctx.seed(43)
    reference, student, probes = _with_probes(ctx, "EncoderLayer", ("self_attn", "ffn"), seed=44,
                                              strict=False)
    x = ctx.randn(2, 6, D)
    mask = torch.zeros(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 4:] = True
    got = expect_kind(expect_shape(student.run(x, mask), (2, 6, D), "EncoderLayer on x [2, 6, 12]"),
                      "floating", "EncoderLayer on x [2, 6, 12]")
    calls = probes["self_attn"].calls()
    seen = x.clone()
    seen[0, 1] += ctx.randn(D)            # not a uniform shift, which a LayerNorm removes
    again = expect_shape(student.run(seen, mask), (2, 6, D), "the output")
    expect_varies(got[0, 0], again[0, 0], "the layer's output at position 0",
                  "the token at position 1 (not masked) changed")
    hidden = x.clone()
    hidden[0, 4:] = ctx.randn(2, D) * 3
    moved = expect_like(student.run(hidden, mask), got, "the layer's output")
    if not (close(got[0, :4], moved[0, :4], ctx.atol, ctx.rtol) and
            close(got[1], moved[1], ctx.atol, ctx.rtol)):
        if not close(got, student.run(x, mask), ctx.atol, ctx.rtol):
            raise Fail(EVAL_NOISE)
        raise Fail("changing masked positions changed the output at positions the mask keeps: "
                   "{cause}; pass the layer's mask to self_attn as it is",
                   cause=_mask_cause(calls, mask, (2, 1, 6, 6)))
    _expect_mixed_by_attention(ctx, student, probes, ("self_attn",), (x, mask))
    with torch.no_grad():
        expected = reference(x, mask)
    if not close(got, expected, ctx.atol, ctx.rtol) and (
            not calls or not _same_mask(calls[-1].get("mask"), mask, (2, 1, 6, 6))):
        raise Fail("EncoderLayer with a padding mask does not give the expected values: {cause}; "
                   "pass the layer's mask to self_attn as it is (masking the inputs instead "
                   "still lets the masked positions take attention weight)",
                   cause=_mask_cause(calls, mask, (2, 1, 6, 6)))
    ctx.expect_close(got, expected, "EncoderLayer with a padding mask",
                     hint=first_match(got, _encoder_variants(reference, x, mask), ctx.atol,
                                      ctx.rtol))


def _expect_mixed_by_attention(ctx, student, probes, paths, args) -> None:
    """The layer's positions see each other through its attention sublayers only: with the
    stand-ins at `paths` made to mix nothing (each position's output from its own query alone),
    changing the input at position 1 changes the output there and nowhere else. A layer that mixes
    its positions some other way (a running mean, a masked mean) shows here."""
    for path in paths:                          # the stand-ins' mixing weights, zeroed
        probes[path].load({"b": torch.zeros(D, D)})
    moved = args[0].clone()
    moved[:, 1] += ctx.randn(moved.shape[0], D)
    before = _run_layer(student, probes, args)
    after = _run_layer(student, probes, (moved, *args[1:]))
    others = [position for position in range(moved.shape[1]) if position != 1]
    if not close(before[:, others], after[:, others], ctx.atol, ctx.rtol):
        raise Fail("with {blind} made to mix no positions, the output at other positions changed "
                   "when only the input at position 1 changed: the positions must see each other "
                   "through attention only, {call}", blind=", ".join(paths),
                   call="self_attn(x, x, mask)" if len(paths) == 1 else
                   "self_attn(y, y, self_mask)")


# Dropout is checked where it acts. In training mode, around stand-in sublayers, each post-norm
# step of a layer must give norm(h + m * sublayer(h) / (1 - p)) for a keep-mask m of 0s and 1s:
# the stand-ins compute sublayer(h) here, and the reference's norms are the layer's. The input of
# each step after the first is the output of the one before; the stand-in of the next sublayer
# records it, and it counts only as a witness: each step is verified here, so a record that lies
# cannot pass.
P = 0.25            # 1/(1-p) and 1/p differ, as p and 1-p do: keeping with probability p shows


def _keep_masks(width: int) -> torch.Tensor:
    """Every keep-mask of one row of `width` values: [2**width, width] of 0s and 1s (4,096 rows
    for d_model 12; this search is for small layers only)."""
    bits = torch.arange(2 ** width)[:, None] >> torch.arange(width)
    return (bits & 1).double()


def _best_mask(norm, base, delta, target, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """For each row, the keep-mask m that brings norm(base + m * delta * scale) closest to
    `target`: (the masks [rows, d], each row's largest difference)."""
    width = base.shape[-1]
    base, delta, target = (t.double().reshape(-1, 1, width) for t in (base, delta, target))
    masks = _keep_masks(width)
    weight, bias = norm.weight.detach().double(), norm.bias.detach().double()
    normed = torch.nn.functional.layer_norm(base + masks * delta * scale, (width,), weight, bias,
                                            norm.eps)
    gaps = (normed - target).abs().amax(dim=-1)              # [rows, 2**width]
    best = gaps.argmin(dim=-1)
    return masks[best], gaps.gather(1, best[:, None])[:, 0]


def _no_dropout_gaps(norm, base, delta, target) -> torch.Tensor:
    """Each row's largest difference between norm(base + delta) (no dropout) and `target`."""
    width = base.shape[-1]
    base, delta, target = (t.double().reshape(-1, width) for t in (base, delta, target))
    normed = torch.nn.functional.layer_norm(base + delta, (width,), norm.weight.detach().double(),
                                            norm.bias.detach().double(), norm.eps)
    return (normed - target).abs().amax(dim=-1)


def _fits(ctx, gaps, target) -> bool:
    return bool((gaps <= ctx.atol + ctx.rtol * target.abs().amax()).all())


DROPOUT_WRONG = [   # (base, delta, scale) from (h, sublayer(h)), and the words that name it
    (lambda h, s: (h, s, 1.0), "dropout does not scale the values it keeps by 1/(1-p)"),
    (lambda h, s: (h, s, 1 / P), "dropout drops each value with probability 1 - p: p is the "
                                 "probability of dropping it, as in nn.Dropout(p)"),
    (lambda h, s: (torch.zeros_like(h), h + s, 1 / (1 - P)),
     "dropout is applied after the residual add; it goes on the sublayer's output, before the "
     "residual add: norm(x + dropout(sublayer(x)))"),
]


def _expect_dropout_steps(ctx, steps, noisy: bool) -> None:
    """Each step (name, norm, h, sublayer(h), output) is a post-norm step with dropout P, whose
    keep-mask varies over the positions of each sequence and between the sequences (dropout draws
    one for each value: a fixed mask for every position is not dropout); about a share P of the
    sublayers' values are dropped, over all the steps."""
    kept = []
    for name, norm, h, sub, out in steps:
        masks, gaps = _best_mask(norm, h, sub, out, 1 / (1 - P))
        if not _fits(ctx, gaps, out):
            if _fits(ctx, _no_dropout_gaps(norm, h, sub, out), out):
                raise Fail("in training mode, the {name} sublayer's output reached the residual "
                           "add without dropout: every sublayer's output goes through dropout, "
                           "norm(x + dropout(sublayer(x)))", name=name)
            for variant, words in DROPOUT_WRONG:
                base, delta, scale = variant(h.double(), sub.double())
                if _fits(ctx, _best_mask(norm, base, delta, out, scale)[1], out):
                    raise Fail("in training mode, at the {name} sublayer: {words}",
                               name=name, words=words)
            if noisy:
                raise Fail("with dropout=0, the layer's output in training mode is not its output "
                           "in eval mode: something other than dropout (random noise?) changes "
                           "it in training mode")
            raise Fail("in training mode, the {name} sublayer's output did not go through "
                       "dropout: no dropout mask gives the layer's output (largest difference "
                       "{gap:.2g}). Dropout zeroes each value of the sublayer's output with "
                       "probability p and scales the others by 1/(1-p), before the residual add: "
                       "norm(x + dropout(sublayer(x)))", name=name, gap=float(gaps.max()))
        kept.append((name, masks.reshape(h.shape)))
    dropped = 1 - float(torch.cat([masks.flatten() for _, masks in kept]).mean())
    if abs(dropped - P) > 0.15:
        raise Fail("in training mode with dropout={p}, dropout zeroed {share:.0%} of the "
                   "sublayers' outputs; it should zero about {p:.0%} of them", p=P, share=dropped)
    for name, masks in kept:
        _expect_masks_vary(masks, name)


def _expect_masks_vary(masks: torch.Tensor, name: str) -> None:
    """The keep-masks [B, T, d] of one step differ between the positions of every sequence, and
    between the sequences. (Drawn as dropout draws them, the 5 positions of a sequence share one
    mask with odds below 1 in 10**7, and two sequences of 5 positions with odds below 10**-12.)"""
    alike_in_a_sequence = any(bool((row == row[0]).all()) for row in masks)
    if alike_in_a_sequence or bool((masks == masks[0]).all()):
        raise Fail("in training mode, at the {name} sublayer, dropout zeroed the same features at "
                   "every position of a sequence, or in every sequence of the batch: dropout "
                   "draws its keep-mask at random for each value (as nn.Dropout does), not one "
                   "mask shared by the positions or the sequences", name=name)


def _witness(probes, path: str, like: torch.Tensor) -> torch.Tensor:
    """The input the stand-in at `path` last received (the previous step's output), as data."""
    calls = probes[path].calls()
    key = "x" if path == "ffn" else "x_q"
    given = calls[-1].get(key) if calls and isinstance(calls[-1], dict) else None
    what = f"the input of {path} in training mode"
    return expect_kind(expect_shape(given, tuple(like.shape), what), "floating", what)


def _dropout_steps(reference, probes, args, out) -> list:
    """The layer's post-norm steps in its last run, as _expect_dropout_steps takes them."""
    with torch.no_grad():
        if "cross_attn" not in probes:                          # an encoder layer
            x = args[0]
            h1 = _witness(probes, "ffn", x)
            return [("self-attention", reference.norm1, x, reference.self_attn(x, x, None), h1),
                    ("feed-forward", reference.norm2, h1, reference.ffn(h1), out)]
        y, memory, self_mask, memory_mask = args
        h1 = _witness(probes, "cross_attn", y)
        h2 = _witness(probes, "ffn", y)
        return [("self-attention", reference.norm1, y, reference.self_attn(y, y, self_mask), h1),
                ("cross-attention", reference.norm2, h1,
                 reference.cross_attn(h1, memory, memory_mask), h2),
                ("feed-forward", reference.norm3, h2, reference.ffn(h2), out)]


def _run_layer(student, probes, args, **options) -> torch.Tensor:
    """The layer's output, a floating tensor shaped like its first input. When a decoder layer's
    code raises, the stand-ins' records may name the wiring at fault (words only)."""
    try:
        out = student.run(*args, **options)
    except StudentError:
        if "cross_attn" in probes:
            cause = _decoder_wiring(probes, args[0].shape[1], args[1].shape[1])
            if cause:
                raise Fail("{cause} (your code raised an error when the grader ran it)",
                           cause=cause) from None
        raise
    return expect_kind(expect_shape(out, tuple(args[0].shape), "the layer's output"), "floating",
                       "the layer's output")


FIXED_DROPOUT = ("in training mode, two calls with different random seeds gave the same output: "
                 "dropout must draw a new random keep-mask at each call (nn.Dropout, or "
                 "F.dropout with training=self.training), not a fixed one")


def _dropout_check(ctx, cls, paths, args):
    """Dropout where the paper puts it, in training mode only. The exact check of each step runs on
    a layer wired as asked (its eval output is the reference's); a layer wired otherwise (pre-norm,
    say) is not blamed here for it, and is only asked to be random in training mode and not with
    dropout 0."""
    reference, student, probes = _with_probes(ctx, cls, paths, seed=51, dropout=P, strict=False)
    ctx.expect_uses(student, lambda: _run_layer(student, probes, args), "the layer's output")
    first = _run_layer(student, probes, args, seed=1)
    if not close(first, _run_layer(student, probes, args, seed=2), ctx.atol, ctx.rtol):
        raise Fail(EVAL_NOISE)
    trained = _run_layer(student, probes, args, train=True, seed=3)
    if close(trained, first, ctx.atol, ctx.rtol):
        raise Fail("in training mode with dropout {p} the output equals the eval output: the "
                   "sublayers' outputs should go through dropout", p=P)
    with torch.no_grad():
        wired_as_asked = close(first, reference(*args), ctx.atol, ctx.rtol)
    steps = _dropout_steps(reference, probes, args, trained) if wired_as_asked else []
    if close(trained, _run_layer(student, probes, args, train=True, seed=5), ctx.atol, ctx.rtol):
        raise Fail(FIXED_DROPOUT)
    _, still, still_probes = _with_probes(ctx, cls, paths, seed=52, dropout=0.0, strict=False)
    noisy = not close(_run_layer(still, still_probes, args, train=True, seed=4),
                      _run_layer(still, still_probes, args), ctx.atol, ctx.rtol)
    if wired_as_asked:
        _expect_dropout_steps(ctx, steps, noisy)
    elif noisy:
        raise Fail("with dropout=0, the layer's output in training mode is not its output in eval "
                   "mode: something other than dropout (random noise?) changes it in training "
                   "mode")


def test_encoder_dropout(ctx):
    ctx.seed(45)
    _dropout_check(ctx, "EncoderLayer", ("self_attn", "ffn"), (ctx.randn(2, 5, D),))


def test_decoder_params(ctx):
    _layer_params(ctx, "DecoderLayer", 16992, 16992 - 8352)


def _decoder_inputs(ctx):
    y, memory = ctx.randn(2, 5, D), ctx.randn(2, 7, D)
    self_mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    memory_mask = torch.zeros(2, 1, 1, 7, dtype=torch.bool)
    memory_mask[1, ..., 5:] = True
    return y, memory, self_mask, memory_mask


PATHS = ("self_attn", "cross_attn", "ffn")


def test_decoder_values(ctx):
    ctx.seed(61)
    reference, student, probes = _with_probes(ctx, "DecoderLayer", PATHS, seed=62)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    got = _run_layer(student, probes, (y, memory, self_mask, memory_mask))
    with torch.no_grad():
        expected = reference(y, memory, self_mask, memory_mask)
    sa, ca = reference.self_attn, reference.cross_attn
    variants = _layer_variants(
        y, [lambda h: sa(h, h, self_mask), lambda h: ca(h, memory, memory_mask), reference.ffn],
        [reference.norm1, reference.norm2, reference.norm3],
        ["self-attention", "cross-attention", "feed-forward"])
    hint = first_match(got, variants, ctx.atol, ctx.rtol)
    _expect_deterministic(ctx, got, expected,
                          lambda: student.run(y, memory, self_mask, memory_mask))
    ctx.expect_close(got, expected, "DecoderLayer on y [2, 5, 12], memory [2, 7, 12] (eval mode)",
                     hint=hint)


def _decoder_output(student, y, memory, self_mask, memory_mask, probes=None) -> torch.Tensor:
    """The layer's output; when its code raises, what the stand-ins recorded may name the wiring
    at fault (words only: the check is lost either way)."""
    what = "DecoderLayer on y [2, 5, 12], memory [2, 7, 12]"
    try:
        out = student.run(y, memory, self_mask, memory_mask)
    except StudentError:
        cause = _decoder_wiring(probes, y.shape[1], memory.shape[1]) if probes else None
        if cause:
            raise Fail("{cause} (your code raised an error when the grader ran it)",
                       cause=cause) from None
        raise
    return expect_kind(expect_shape(out, (2, 5, D), what), "floating", what)


def _decoder_wiring(probes, target: int, source: int) -> str | None:
    """The wiring mistake that the stand-ins' last calls show, if one does."""
    def last(path):
        calls = probes[path].calls()
        return calls[-1] if calls and isinstance(calls[-1], dict) else {}

    def length(value, axis=1):
        return value.shape[axis] if isinstance(value, torch.Tensor) and value.dim() > axis else None

    own, cross = last("self_attn"), last("cross_attn")
    if length(own.get("mask"), -1) == source or length(cross.get("mask"), -1) == target:
        return ("the masks are swapped: self_mask goes to self-attention and memory_mask to "
                "cross-attention")
    if length(cross.get("x_q")) == source:
        return ("cross-attention's queries must come from the decoder's own input; only its keys "
                "and values come from the memory")
    if cross and length(cross.get("x_kv")) == target:
        return ("cross-attention took its keys and values from the decoder's own input; they "
                "must come from the memory")
    if length(own.get("x_kv")) == source:
        return ("self-attention must take its keys and values from the decoder's own input, the "
                "same tensor as its queries, not from the memory")
    return None


def test_decoder_masks(ctx):
    ctx.seed(63)
    _, student, probes = _with_probes(ctx, "DecoderLayer", PATHS, seed=64, strict=False)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    out = _decoder_output(student, y, memory, self_mask, memory_mask, probes)
    ctx.expect_uses(student, lambda: student.run(y, memory, self_mask, memory_mask),
                    "the layer's output")
    recorded = {path: probes[path].calls() for path in ("self_attn", "cross_attn")}
    later = y.clone()
    later[:, 3] += ctx.randn(2, D)          # not a uniform shift, which a LayerNorm removes
    after = _decoder_output(student, later, memory, self_mask, memory_mask)
    expect_varies(out[:, 3], after[:, 3], "the output at position 3", "target token 3 changed")
    if not close(out[:, :3], after[:, :3], ctx.atol, ctx.rtol):
        if not close(out, _decoder_output(student, y, memory, self_mask, memory_mask), ctx.atol,
                     ctx.rtol):
            raise Fail(EVAL_NOISE)
        raise Fail("positions 0-2 changed when target token 3 changed: self-attention must get "
                   "self_mask ({cause})",
                   cause=_mask_cause(recorded["self_attn"], self_mask, (2, 1, 5, 5)))
    earlier = y.clone()
    earlier[:, 1] += ctx.randn(2, D)
    if close(out[:, 2:], _decoder_output(student, earlier, memory, self_mask, memory_mask)[:, 2:],
             ctx.atol, ctx.rtol):
        raise Fail("positions 2-4 did not change when target token 1 changed: self-attention "
                   "must let each position see the earlier ones (self_mask blocks only the "
                   "future)")
    padded = memory.clone()
    padded[1, 5:] = ctx.randn(2, D) * 3
    if not close(out, _decoder_output(student, y, padded, self_mask, memory_mask), ctx.atol,
                 ctx.rtol):
        raise Fail("changing masked memory positions changed the output: cross-attention must get "
                   "memory_mask ({cause})",
                   cause=_mask_cause(recorded["cross_attn"], memory_mask, (2, 1, 5, 7),
                                     "cross_attn"))
    _expect_mixed_by_attention(ctx, student, probes, ("self_attn", "cross_attn"),
                               (y, memory, self_mask, memory_mask))


def _rewired_decoder(reference, y, self_kv, self_mask, cross_kv, cross_mask) -> torch.Tensor:
    """The reference decoder layer (eval mode) with its attention taking keys and values from
    `self_kv` and `cross_kv`: the wrong wirings, to name them."""
    with torch.no_grad():
        h = reference.norm1(y + reference.self_attn(y, self_kv, self_mask))
        h = reference.norm2(h + reference.cross_attn(h, cross_kv, cross_mask))
        return reference.norm3(h + reference.ffn(h))


def test_decoder_memory(ctx):
    ctx.seed(65)
    reference, student, probes = _with_probes(ctx, "DecoderLayer", PATHS, seed=66, strict=False)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    out = _decoder_output(student, y, memory, self_mask, memory_mask, probes)
    ctx.expect_uses(student, lambda: student.run(y, memory, self_mask, memory_mask),
                    "the layer's output")
    calls = probes["cross_attn"].calls()
    keys = calls[-1].get("x_kv") if calls else None
    took_y = isinstance(keys, torch.Tensor) and keys.shape == y.shape
    other = memory.clone()
    other[:, :2] += ctx.randn(2, 2, D)     # not a uniform shift, which a LayerNorm removes
    if close(out, _decoder_output(student, y, other, self_mask, memory_mask), ctx.atol, ctx.rtol):
        raise Fail("the output does not depend on the memory: cross-attention must take its keys "
                   "and values from the memory (the encoder's output); it got {what}",
                   what="the decoder's own input" if took_y else "something else")
    if reference is not None:
        crossed_y = _rewired_decoder(reference, y, y, self_mask, y, self_mask)
        self_on_memory = _rewired_decoder(reference, y, memory, memory_mask, memory, memory_mask)
        if close(out, crossed_y, ctx.atol, ctx.rtol):
            raise Fail("cross-attention took its keys and values from the decoder's own input; "
                       "they must come from the memory")
        if close(out, self_on_memory, ctx.atol, ctx.rtol):
            raise Fail("self-attention must take its keys and values from the decoder's own "
                       "input, the same tensor as its queries, not from the memory")
    _expect_memory_as_reference(ctx, reference, student, (y, memory, self_mask, memory_mask),
                                out)
    _expect_memory_through_cross_attention(ctx, student, probes,
                                           (y, memory, self_mask, memory_mask))


def _memory_changed(ctx, memory: torch.Tensor) -> torch.Tensor:
    """`memory` [2, 7, d] with new values at three random positions among the first five (which
    no memory_mask of _decoder_inputs blocks)."""
    changed = memory.clone()
    where = ctx.randint(0, 5, 3)
    changed[:, where] += ctx.randn(2, len(where), D)
    return changed


def _expect_memory_as_reference(ctx, reference, student, args, out) -> None:
    """A layer that gives the reference's output gives it again with the memory changed at random
    positions: it reads the memory it is given, as cross-attention reads it."""
    y, memory, self_mask, memory_mask = args
    with torch.no_grad():
        if not close(out, reference(*args), ctx.atol, ctx.rtol):
            return                      # wired otherwise: decoder.values says how
        changed = _memory_changed(ctx, memory)
        expected = reference(y, changed, self_mask, memory_mask)
    if not close(_decoder_output(student, y, changed, self_mask, memory_mask), expected, ctx.atol,
                 ctx.rtol):
        raise Fail("with the memory changed at some positions, the output is not what "
                   "cross-attention gives: the memory must reach the output through "
                   "cross_attn(y, memory, memory_mask), read anew at each call")


def _expect_memory_through_cross_attention(ctx, student, probes, args) -> None:
    """With the cross-attention stand-in made blind to its keys and values (its output from its
    queries alone), the output does not change with the memory: the memory reaches the output
    through cross-attention only, however the rest of the layer is wired."""
    y, memory, self_mask, memory_mask = args
    probes["cross_attn"].load({"b": torch.zeros(D, D)})
    before = _decoder_output(student, y, memory, self_mask, memory_mask)
    after = _decoder_output(student, y, _memory_changed(ctx, memory), self_mask, memory_mask)
    if not close(before, after, ctx.atol, ctx.rtol):
        raise Fail("with cross_attn made blind to its keys and values, the output still changed "
                   "with the memory: the memory reaches the output another way; it must enter "
                   "the layer only through cross-attention, cross_attn(y, memory, memory_mask)")


def test_decoder_dropout(ctx):
    ctx.seed(67)
    y, memory, self_mask, memory_mask = _decoder_inputs(ctx)
    _dropout_check(ctx, "DecoderLayer", PATHS, (y, memory, self_mask, memory_mask))


# -- the classifier ------------------------------------------------------------------------------
# The checks pad with another id than 0, and not the smallest (real tokens 0 to 2 sit below it),
# so that a pad id hard-coded as 0, or "a pad" taken as "an id at most pad_id", shows; the values
# checks then build the model once more with the signature's defaults (see _expect_defaults).
PAD_ID = 3
CLASSIFIER = dict(vocab_size=13, num_classes=3, d_model=D, num_heads=H, num_layers=2, d_ff=FF,
                  dropout=0.2, pad_id=PAD_ID)

# The padding checks put a different number of pads at the end of each row: none in the first (no
# column is padding in every row, so dropping such columns first changes nothing), a single real
# token in the fourth.
REAL_LENGTHS = (8, 6, 3, 1, 7)

# The classifier is built with stand-ins in place of the student's EncoderLayer class and of
# positional_encoding, and run with the stand-in positions, so that a bug in either costs its own
# points only. A classifier that makes its positions another way is compared with the real table.
POSITIONS = {"positional_encoding": "PositionalTable"}
STAND_INS = {**POSITIONS, "EncoderLayer": "EncoderLayerFactory"}


def _load_own(student, reference, cls) -> None:
    """The reference's weights into the student's classifier or regressor by name, outside its
    encoder layers. A tensor of the student's own that the reference has not (a frozen position
    table kept as a parameter) keeps its value: it may cost the structure point, not the checks
    of behaviour, which compare what the model computes."""
    state = {name: tensor for name, tensor in reference.state_dict().items()
             if not under(name, ["layers"])}
    _, unexpected = student.load(state)
    if unexpected:                      # a name of the assignment's is not there: say which
        _load(student, reference, cls, skipped=["layers"])


def _with_probe_layers(ctx, cls, options, seed):
    """(the student's module, `run(tokens)` -> (its output, the reference modules)): the student's
    `cls` (the classifier or the regressor) with its encoder layers replaced by stand-ins and the
    reference's other weights loaded, and the reference around the same stand-ins. The reference
    modules are a list: with the stand-in positions, and with the real table (for a model that
    makes its positions another way); the one the stand-in's record points to comes first."""
    student = ctx.new(cls, seed=seed, swap_globals=STAND_INS, **options)
    positions_at_init = bool(ctx.global_calls("positional_encoding"))
    with swapped(ctx.ref, "positional_encoding", standins.PositionalTable()):
        with_table = ctx.reference_module(cls, seed=seed, **options)
    references = {True: with_table, False: ctx.reference_module(cls, seed=seed, **options)}
    paths = [f"layers.{index}" for index in range(options["num_layers"])]
    handles = []
    for index, path in enumerate(paths):
        handle, twin = ctx.probe("encoder_layer", d_model=options["d_model"], seed=200 + index,
                                 num_heads=options["num_heads"])
        student.swap(path, handle)
        handles.append(handle)
        for reference in references.values():
            reference.layers[index] = twin
    _load_own(student, with_table, cls)

    def run(tokens):
        try:
            got = as_tensor(student.run(tokens, swap_globals=POSITIONS), "the output")
        except StudentError:
            _expect_contract_mask(handles, tuple(tokens.shape), options["num_heads"])
            raise
        used = positions_at_init or bool(ctx.global_calls("positional_encoding"))
        return got, [references[used], references[not used]]
    return student, run


# The stand-in encoder layers refuse a mask the real layer's attention cannot read as meant (see
# standins.mask_problem); when one did, the grader names it from the stand-in's record.
MASK_CONVENTIONS = {
    "dtype": "the mask given to the encoder layers is {dtype}, not a bool tensor: the layers take "
             "True at the keys to block, as padding_mask(tokens, pad_id) gives; an additive float "
             "mask (0 to keep, -10000 or -inf to block, as BERT's) is another convention (the "
             "grader's stand-in layers refused it, as the real attention does)",
    "heads": "the mask given to the encoder layers has shape {shape}: with three axes, its first "
             "lines up with the attention's heads, not with the batch (the Annotated "
             "Transformer's [B, 1, T]); give the layers a mask of shape [B, 1, 1, T], as "
             "padding_mask(tokens, pad_id) makes (the grader's stand-in layers refused it)",
    "shape": "the mask given to the encoder layers has shape {shape}, which does not broadcast to "
             "the attention weights' [B, num_heads, T, T] = {target}; give the layers a mask of "
             "shape [B, 1, 1, T], as padding_mask(tokens, pad_id) makes (the grader's stand-in "
             "layers refused it)",
}


def _expect_contract_mask(handles, tokens_shape, heads: int) -> None:
    """When the student's model raised, whether a stand-in encoder layer refused its mask: the
    mask's convention or shape, named from the stand-in's record (words only; the points are lost
    either way)."""
    batch, steps = tokens_shape
    _name_refused_mask(handles, lambda given: (batch, heads, steps, steps))


def _expect_refused_mask(handles, heads: int) -> None:
    """The same, in training, where the batch's shape is the recipe's: it is read from the record
    (the quiet stand-ins record a mask they refuse, and nothing else)."""
    def target(given):
        shape = list(getattr(given, "shape", [])) or [1, 1]
        return (shape[0], heads, shape[-1], shape[-1])
    _name_refused_mask(handles, target)


def _name_refused_mask(handles, target_of) -> None:
    for handle in handles:
        calls = handle.calls()
        given = calls[-1].get("mask") if calls and isinstance(calls[-1], dict) else None
        if given is None:
            continue
        target = target_of(given)
        problem = standins.mask_problem(given, target)
        if problem:
            raise Fail(MASK_CONVENTIONS[problem],
                       dtype=str(getattr(given, "dtype", type(given).__name__)),
                       shape=list(getattr(given, "shape", [])), target=list(target))


def _expected(references, tokens) -> list[torch.Tensor]:
    with torch.no_grad():
        return [reference(tokens) for reference in references]


def _real_tokens(ctx, rows: int, columns: int) -> torch.Tensor:
    """Token ids of 0 to 12 but PAD_ID, a 0 and a 1 (ids below the pad's) in the first row."""
    tokens = ctx.randint(0, 12, rows, columns)
    tokens[tokens >= PAD_ID] += 1
    tokens[0, :2] = torch.tensor([0, 1])
    return tokens


def _tokens(ctx):
    """Tokens [3, 7]: 2, 1 and 7 real tokens, then pads (PAD_ID)."""
    tokens = _real_tokens(ctx, 3, 7)
    tokens[0, 2:] = PAD_ID
    tokens[1, 1:] = PAD_ID
    return tokens


def _padded_tokens(ctx, vocab_size: int) -> torch.Tensor:
    """Tokens [5, 8] padded with PAD_ID after REAL_LENGTHS real tokens a row; a 0 among the real
    ones (a real token here)."""
    tokens = ctx.randint(0, vocab_size - 1, len(REAL_LENGTHS), max(REAL_LENGTHS))
    tokens[tokens >= PAD_ID] += 1                   # real tokens: any id but the pad's
    tokens[0, 2] = 0
    for row, length in enumerate(REAL_LENGTHS):
        tokens[row, length:] = PAD_ID
    return tokens


def _last_real_token_changed(tokens, pad_id: int):
    """`tokens` (pads last) with the last real token of every row that has two or more changed to
    another real token (1 or 2, never a pad here): an output that reads the first position only, a
    trivial way to ignore the pads, does not change."""
    changed = tokens.clone()
    for row, length in enumerate((tokens != pad_id).sum(1).tolist()):
        if length >= 2:
            changed[row, length - 1] = 2 if int(tokens[row, length - 1]) == 1 else 1
    return changed


# The common wrong classifiers and regressors, each with the words that name it.
MEAN_WITH_PADS = ("the mean includes the padding positions: average the output vectors over the "
                  "real tokens only")
LAYERS_WITHOUT_MASK = ("the encoder layers ran without the padding mask: pass padding_mask(tokens, "
                       "pad_id) to every layer")
NEITHER_MASKED = ("the pads are neither masked in the layers nor left out of the mean: pass "
                  "padding_mask(tokens, pad_id) to every layer, and average over the real tokens "
                  "only")
PADDED_LENGTH = ("the sum over the real tokens is divided by the padded length: divide by the "
                 "number of real tokens in each sequence")
LAST_POSITION = ("only the last position reaches the head (with padding, a pad): pool with the "
                 "mean over all the real tokens")
INVERTED_MASK = ("the padding mask given to the layers is inverted (True on the real tokens): True "
                 "must mean a pad, a key to block, as padding_mask(tokens, pad_id) gives")
NO_POSITIONS = ("no positional encoding is added: embed as embedding * sqrt(d_model) + "
                "positional_encoding(T, d_model)")
POSITIONS_OFF_BY_ONE = ("the positions are off by one: token t gets the positional encoding of "
                        "position t + 1; the first token's is row 0 of the table, "
                        "self.positions[:T]")
PAD_ZERO = ("the pads were taken to be the tokens equal to 0, not those equal to pad_id: use the "
            "pad_id the model was built with")
BELOW_PAD = ("the tokens with ids below pad_id were left out of the mean: the real tokens are "
             "those not equal to pad_id (tokens != pad_id), whatever their ids")
PADS_NOT_IGNORED = ("pads must be masked as keys (pass padding_mask to every layer) and left out "
                    "of the mean")


def _head_output(reference, pooled):
    """What the classifier (log-probabilities) or the regressor (one number a sequence) makes of
    the pooled vectors."""
    out = reference.head(pooled)
    return out.squeeze(-1) if type(reference).__name__ == "EncoderRegressor" else \
        out.log_softmax(-1)


def _wrong_models(ctx, reference, tokens) -> list[tuple[torch.Tensor, str]]:
    """The outputs of the common wrong classifiers or regressors (as `reference` is one or the
    other), around the reference's stand-ins and with its weights, each with the words that name
    it: pooling, masks and embeddings gone wrong."""
    pad = reference.pad_id
    with torch.no_grad():
        embedded = reference.embedding(tokens)
        positions = reference.positions[:tokens.shape[1]]
        scaled = embedded * math.sqrt(reference.d_model)
        x = scaled + positions

        def encode(x, pad_id=pad, masked=True, inverted=False):
            mask = ctx.ref["padding_mask"](tokens, pad_id) if masked else None
            for layer in reference.layers:
                x = layer(x, ~mask if inverted else mask)
            return x

        def mean(x, pad_id=pad):
            real = (tokens != pad_id).unsqueeze(-1).float()
            return (x * real).sum(1) / real.sum(1).clamp(min=1)

        def out(pooled):
            return _head_output(reference, pooled)

        hidden = encode(x)
        real = (tokens != pad).unsqueeze(-1).float()
        variants = [
            (out(hidden.mean(1)), MEAN_WITH_PADS),
            (out(mean(encode(x, masked=False))), LAYERS_WITHOUT_MASK),
            (out(encode(x, masked=False).mean(1)), NEITHER_MASKED),
            (out((hidden * real).sum(1) / tokens.shape[1]), PADDED_LENGTH),
            (out((hidden * real).sum(1)), "this is the sum of the output vectors over the real "
                                          "tokens, not their mean: divide by how many there are"),
            (out(hidden[:, 0]), "only the first position reaches the head: pool with the mean "
                                "over all the real tokens"),
            (out(hidden[:, -1]), LAST_POSITION),
            (out(mean(encode(x, inverted=True))), INVERTED_MASK),
            (out(mean(encode(embedded + positions))),
             "the embeddings are not multiplied by sqrt(d_model)"),
            (out(mean(encode(scaled))), NO_POSITIONS),
            (out(mean(encode(scaled + reference.positions[1:tokens.shape[1] + 1]))),
             POSITIONS_OFF_BY_ONE),
        ]
        if pad != 0:
            variants.append((out(mean(encode(x, pad_id=0), pad_id=0)), PAD_ZERO))
        above = (tokens > pad).unsqueeze(-1).float()
        if bool((tokens < pad).any()):
            variants.append((out((hidden * above).sum(1) / above.sum(1).clamp(min=1)), BELOW_PAD))
    return variants


def _expect_repeatable(run, tokens, first: torch.Tensor, what: str) -> None:
    """In eval mode the output is a function of the tokens: a second call on the same tokens gives
    the same numbers. Dropout left on (F.dropout(x, p) without training=self.training) does not."""
    again = as_tensor(run(tokens)[0], what)
    if tuple(again.shape) != tuple(first.shape) or not bool(torch.allclose(
            again.double(), first.double(), atol=1e-6, rtol=1e-5, equal_nan=True)):
        raise Fail("{what} changed from one call to the next on the same tokens in eval mode: "
                   "dropout is left on in evaluation; use nn.Dropout, or F.dropout(x, p, "
                   "self.training), which eval() turns off", what=what)


def _alone(ctx, run, tokens) -> list:
    """Each sequence of the padded batch `tokens` (REAL_LENGTHS) without its pads, in a batch of
    two copies of it (no check but the regressor's values asks for a batch of one): (the student's
    outputs, the reference's). Its positions are the same, since the pads come last."""
    outputs = []
    for row, length in enumerate(REAL_LENGTHS):
        alone = tokens[row:row + 1, :length].repeat(2, 1)
        got, references = run(alone)
        outputs.append((as_tensor(got, "the output"), _expected(references, alone)))
    return outputs


def _right_alone(ctx, alone) -> bool:
    """Whether the student's output for every sequence alone (no pads) is the reference's."""
    return all(tuple(got.shape) == tuple(expected[0].shape) and
               any(close(got, each, ctx.atol, ctx.rtol) for each in expected)
               for got, expected in alone)


def _same_alone(ctx, alone, got: torch.Tensor) -> bool:
    """Whether each sequence of the padded batch got the output it got alone."""
    if got.dim() == 0 or got.shape[0] != len(alone):
        return False
    return all(each.dim() > 0 and each.shape[0] == 2 and close(got[row], each[0], ctx.atol,
                                                                ctx.rtol)
               for row, (each, _) in enumerate(alone))


def _expect_padding_ignored(ctx, run, vocab_size: int, what: str) -> None:
    """The padding check of the classifier or the regressor, on batches of _padded_tokens.

    The output must depend on the real tokens (expect_varies), then be the reference's around the
    same stand-ins, for rows with different numbers of pads, one with none and one with a single
    real token. Where it is not, padding is to blame unless the model is wrong without pads too:
    other sequences, new to it, are run alone first (so that no record of what it answered padded
    can answer them), and a model that gets them right loses this point. A model wrong alone too
    (wrong in another way) is left to the values checks if each of these sequences then gets the
    same output padded as alone: it ignores its pads. The message names the cause where a common
    wrong model gives the same numbers."""
    tokens = _padded_tokens(ctx, vocab_size)
    got, references = run(tokens)
    got = expect_kind(got, "floating", what)
    expect_varies(got, run(_last_real_token_changed(tokens, PAD_ID))[0], what,
                  "a token that is not padding changed")
    if any(close(got, expected, ctx.atol, ctx.rtol) for expected in _expected(references, tokens)):
        return
    _expect_repeatable(run, tokens, got, what)
    others = _padded_tokens(ctx, vocab_size)
    alone = _alone(ctx, run, others)
    if not _right_alone(ctx, alone) and _same_alone(ctx, alone, as_tensor(run(others)[0], what)):
        return
    cause = first_match(got, _wrong_models(ctx, references[0], tokens), ctx.atol, ctx.rtol)
    raise Fail("padding changed the prediction of a sequence: {cause}",
               cause=cause or PADS_NOT_IGNORED)


def _expect_encoder_stack(ctx, cls: str, options: dict) -> None:
    """The structure of an encoder-only model (the classifier, the regressor): its own parameters
    by name and shape, and its encoder layers, one object each, in an nn.ModuleList `layers`."""
    handle = ctx.new(cls, swap_globals=STAND_INS, **options)
    reference = ctx.reference_module(cls, **options)
    missing, unexpected, wrong = handle.compare(parameter_shapes(reference, ["layers"]), ["layers"])
    if unexpected and not missing and not wrong:
        raise Fail("{cls} has parameters the assignment does not list: {unexpected}; keep only "
                   "embedding, layers and head (a fixed table, such as the positions, belongs in "
                   "a buffer: register_buffer, not a parameter)", cls=cls, unexpected=unexpected)
    _names_and_shapes(ctx, handle, reference, cls, skipped=["layers"])
    children = {name: identity for name, _, identity in handle.info.get("children", [])}
    count = options["num_layers"]
    layers = [children.get(f"layers.{index}") for index in range(count)]
    if None in layers or f"layers.{count}" in children:
        raise Fail("{cls}(num_layers={count}) should hold {count} encoder layers registered as "
                   "submodules: keep them in an nn.ModuleList named layers", cls=cls, count=count)
    if len(set(layers)) < count:
        raise Fail("the encoder layers share parameters: build a new layer for each position in "
                   "the stack")


def test_classifier_structure(ctx):
    _expect_encoder_stack(ctx, "EncoderClassifier", CLASSIFIER)


def test_classifier_logprobs(ctx):
    """Log-probabilities [B, num_classes] that depend on the tokens and on the weights: an output
    of the right form that ignores either (log_softmax of zeros, say) is no classifier."""
    ctx.seed(71)
    student, run = _with_probe_layers(ctx, "EncoderClassifier", CLASSIFIER, seed=72)
    tokens = _tokens(ctx)
    what = "the output for tokens [3, 7], 3 classes"
    out, _ = run(tokens)
    out = expect_kind(expect_shape(out, (3, 3), what), "floating", what)
    total = out.double().exp().sum(-1)
    if not torch.allclose(total, torch.ones_like(total), atol=1e-4):
        raise Fail("the output should be log-probabilities (log_softmax over the classes): "
                   "exp(output) sums to {lo:.3f}-{hi:.3f}, not 1", lo=float(total.min()),
                   hi=float(total.max()))
    expect_varies(out, run(_last_real_token_changed(tokens, CLASSIFIER["pad_id"]))[0], what,
                  "a token that is not padding changed")
    ctx.expect_uses(student, lambda: run(tokens)[0], what)


def test_classifier_padding(ctx):
    ctx.seed(73)
    _, run = _with_probe_layers(ctx, "EncoderClassifier", {**CLASSIFIER, "pad_id": PAD_ID},
                                seed=74)
    _expect_padding_ignored(ctx, run, CLASSIFIER["vocab_size"], "the classifier's output")


def test_classifier_values(ctx):
    """The reference's log-probabilities on a padded batch, then built with the signature's
    defaults (see _expect_defaults)."""
    ctx.seed(75)
    _, run = _with_probe_layers(ctx, "EncoderClassifier", CLASSIFIER, seed=76)
    tokens = _tokens(ctx)
    what = "EncoderClassifier on tokens [3, 7] with padding (eval mode)"
    got, references = run(tokens)
    candidates = _expected(references, tokens)
    if not any(close(got, expected, ctx.atol, ctx.rtol) for expected in candidates):
        got = expect_kind(expect_shape(got, tuple(candidates[0].shape), what), "floating", what)
        _expect_repeatable(run, tokens, got, what)
        hint = first_match(got, _wrong_models(ctx, references[0], tokens), ctx.atol, ctx.rtol)
        ctx.expect_close(got, candidates[0], what,
                         hint=hint or "embed as embedding * sqrt(d_model) + positions, then the "
                                      "layers with the padding mask, the mean over real tokens, "
                                      "the head, log_softmax")
    _expect_defaults(ctx, "EncoderClassifier", CLASSIFIER, seed=77)


# The signature's defaults are part of the contract: a model built without dropout, pad_id and
# max_len masks the pads of id 0, runs on max_len = 64 tokens, and gives its layers dropout 0.1.
DEFAULTS = dict(dropout=0.1, pad_id=0, max_len=64)
KEEP_DEFAULTS = "keep the defaults of the given signature (dropout=0.1, pad_id=0, max_len=64)"
WITH_DEFAULTS = {
    "EncoderClassifier": "EncoderClassifier built with the signature's defaults, on tokens [2, 64] "
                         "padded with 0 (eval mode)",
    "EncoderRegressor": "EncoderRegressor built with the signature's defaults, on tokens [2, 64] "
                        "padded with 0 (eval mode)"}


def _expect_defaults(ctx, cls: str, options: dict, seed: int) -> None:
    """`cls` built with the signature's defaults (only the arguments without one given), around
    stand-in layers: on tokens [2, 64] (the default max_len), the second row padded with 0 (the
    default pad id), its output is the reference's; its encoder layers were built with dropout
    0.1 (from the stand-in factory's record: it can only cost the point)."""
    required = {name: value for name, value in options.items() if name not in DEFAULTS}
    tokens = ctx.randint(1, options["vocab_size"], 2, DEFAULTS["max_len"])
    tokens[1, 40:] = DEFAULTS["pad_id"]
    what = WITH_DEFAULTS[cls]
    try:
        _, run = _with_probe_layers(ctx, cls, required, seed)
        built = ctx.global_calls("EncoderLayer")
        got, references = run(tokens)
    except StudentError as error:
        raise Fail("{cls} built with the signature's defaults could not run on tokens [2, 64]: "
                   "your code raised {kind}: {message}; {keep}", cls=cls, kind=error.type,
                   message=str(error.info.get("message", ""))[:300], keep=KEEP_DEFAULTS) from None
    for call in built if isinstance(built, list) else []:
        dropout = call.get("dropout") if isinstance(call, dict) else None
        if isinstance(dropout, (int, float)) and not math.isclose(dropout, DEFAULTS["dropout"]):
            raise Fail("{cls} built with the signature's defaults gave its encoder layers "
                       "dropout={p}; {keep}", cls=cls, p=float(dropout), keep=KEEP_DEFAULTS)
    if cls == "EncoderRegressor":
        got = _prediction(got, 2, what)
    candidates = _expected(references, tokens)
    if not any(close(got, expected, ctx.atol, ctx.rtol) for expected in candidates):
        ctx.expect_close(got, candidates[0], what, hint=KEEP_DEFAULTS)


# -- the regressor -------------------------------------------------------------------------------
# Built, checked and trained like the classifier, with stand-ins in place of the student's
# EncoderLayer class and of positional_encoding, so that a bug in either costs its own points only.
REGRESSOR = dict(vocab_size=13, d_model=D, num_heads=H, num_layers=2, d_ff=FF, dropout=0.2,
                 pad_id=PAD_ID)

# regressor.trained: the student's regressor, around stand-in encoder layers (which do not learn), is
# trained in the student's process by the notebook's recipe cell (`fit_regressor`) from a fixed seed;
# only its weights come back. They are judged here, in the reference architecture around the same
# stand-ins, by the mean absolute error on fresh sequences drawn after training from
# a seed nobody can know. The seed, the sequences and the bar are course.yaml's
# `parameters.regression` (declared in parameters.py)
# (bench/regression.py measured the bar); the catalogue's wrong regressors are off by 0.39 (the
# mean over the pads) to 4.4 (a sigmoid on the output). The embedding must have learned too: its
# gradient flows through the layers and the pooling, which a frozen encoder cuts.
TRAINED_LAYER_SEED = 500          # the stand-in encoder layers' seeds: 500, 501, ...


def _regressor_tokens(ctx):
    """Tokens [4, 7]: 4, 1, 7 and 5 real tokens, then pads (PAD_ID)."""
    tokens = _real_tokens(ctx, 4, 7)
    tokens[0, 4:] = PAD_ID
    tokens[1, 1:] = PAD_ID
    tokens[3, 5:] = PAD_ID
    return tokens


def _prediction(value, batch: int, what: str) -> torch.Tensor:
    """The regressor's reply as predictions [batch], floating and finite."""
    tensor = as_tensor(value, what)
    if tuple(tensor.shape) == (batch, 1):
        raise Fail("{what}: shape [{batch}, 1]; the regressor returns one number per sequence, "
                   "shape [{batch}]: drop the head's last axis (squeeze(-1))", what=what,
                   batch=batch)
    if batch == 1 and tensor.dim() == 0:
        raise Fail("{what}: shape [], a number with no axis; for a batch of one sequence the "
                   "regressor returns shape [1]: squeeze(-1) drops the head's axis only, squeeze() "
                   "drops the batch's too", what=what)
    return expect_kind(expect_shape(tensor, (batch,), what), "floating", what)


def _regressor_variants(ctx, reference, tokens) -> list[tuple[torch.Tensor, str]]:
    """The common wrong regressors, around the reference's stand-ins and weights, each with the
    words that name it: those of _wrong_models, and an activation after the head."""
    with torch.no_grad():
        out = reference(tokens)
    return [*_wrong_models(ctx, reference, tokens),
            (out.relu(), "there is a ReLU after the head: the head's output is the prediction, "
                         "with no activation"),
            (out.sigmoid(), "there is a sigmoid after the head: the head's output is the "
                            "prediction, with no activation"),
            (out.tanh(), "there is a tanh after the head: the head's output is the prediction, "
                         "with no activation")]


def test_regressor_structure(ctx):
    _expect_encoder_stack(ctx, "EncoderRegressor", REGRESSOR)


def test_regressor_values(ctx):
    """The reference's predictions on a padded batch, then on a batch of one sequence (shape
    [1]: a squeeze() that drops the batch's axis too shows there), then built with the signature's
    defaults (see _expect_defaults)."""
    ctx.seed(81)
    _, run = _with_probe_layers(ctx, "EncoderRegressor", REGRESSOR, seed=82)
    tokens = _regressor_tokens(ctx)
    what = "EncoderRegressor on tokens [4, 7] with padding (eval mode)"
    got, references = run(tokens)
    got = _prediction(got, 4, what)
    candidates = _expected(references, tokens)
    if not any(close(got, expected, ctx.atol, ctx.rtol) for expected in candidates):
        _expect_repeatable(run, tokens, got, what)
        hint = first_match(got, _regressor_variants(ctx, references[0], tokens), ctx.atol,
                           ctx.rtol)
        ctx.expect_close(got, candidates[0], what,
                         hint=hint or "embed as embedding * sqrt(d_model) + positions, then the "
                                      "layers with the padding mask, the mean over real tokens, "
                                      "the head, and no activation")
    one = tokens[1:2]
    what = "EncoderRegressor on a batch of one sequence, tokens [1, 7] (eval mode)"
    got, references = run(one)
    got = _prediction(got, 1, what)
    candidates = _expected(references, one)
    if not any(close(got, expected, ctx.atol, ctx.rtol) for expected in candidates):
        ctx.expect_close(got, candidates[0], what)
    _expect_defaults(ctx, "EncoderRegressor", REGRESSOR, seed=85)


def test_regressor_padding(ctx):
    ctx.seed(83)
    _, run = _with_probe_layers(ctx, "EncoderRegressor", {**REGRESSOR, "pad_id": PAD_ID},
                                seed=84)
    _expect_padding_ignored(ctx, run, REGRESSOR["vocab_size"], "the regressor's output")


def _trained_regressor_weights(state, model: torch.nn.Module) -> None:
    """Load what the student's process sent as its trained weights into the reference `model`,
    by the contract's names (its own parameters: the encoder layers are stand-ins), after checking
    each tensor: data from the student's side."""
    if not isinstance(state, dict):
        raise Fail("the trained model's weights could not be read (they came back as {kind})",
                   kind=type(state).__name__)
    with torch.no_grad():
        for name, expected in model.named_parameters():
            if under(name, ["layers"]):
                continue
            if name not in state:
                raise Fail("the trained regressor has no parameter {name}: keep the assignment's "
                           "names (see regressor.structure)", name=name)
            weight = expect_kind(expect_shape(state[name], tuple(expected.shape),
                                              f"the trained {name}"), "floating",
                                 f"the trained {name}")
            expected.copy_(weight.to(expected.dtype))


def _expect_embedding_trained(before, after) -> None:
    """The embedding's weights after training differ from those before: its gradient flows from
    the loss through the head, the pooling and the encoder layers, so a regressor that runs its
    layers under torch.no_grad() or detaches its pooled vector trains its head only. (Weights
    missing or of the wrong form are left to _trained_regressor_weights, which says so.)"""
    name = "embedding.weight"
    if not isinstance(before, dict) or not isinstance(after, dict):
        return
    first, last = before.get(name), after.get(name)
    if isinstance(first, torch.Tensor) and close(first, last, 0.0, 0.0):
        raise Fail("after training with the course's recipe, the embedding has not changed: no "
                   "gradient reached it. The loss's gradient must flow through the head, the "
                   "pooling and the encoder layers to the embedding: do not run the layers under "
                   "torch.no_grad(), nor detach the pooled vector")


def _expect_regressor_moved(init: dict, model: torch.nn.Module) -> None:
    """Training changed each of the student's own parameters from the grader's start: a
    regressor whose output does not depend on a weight leaves it where it started."""
    still = unmoved(init, model)
    if still:
        raise Fail("training left {name} exactly at the weights the grader started it from: the "
                   "regressor's output does not depend on it (the points are for the model you "
                   "wrote, trained)", name=still[0])


def _expect_own_regressor(ctx, student, model: torch.nn.Module, mean_batch) -> None:
    """The student's own forward, on its trained weights, predicts what the assignment's
    regressor predicts on them, on sequences drawn now: the weights judged are its model's."""
    tokens, _ = mean_batch(16, generator=torch.Generator().manual_seed(secrets.randbits(62)))
    got = expect_kind(expect_shape(student.run(tokens, swap_globals=POSITIONS), (16,),
                                   "the trained regressor's predictions"), "floating",
                      "the trained regressor's predictions")
    with torch.no_grad():
        expected = model(tokens)
    if not close(got.to(expected.dtype), expected, 1e-4, 1e-4):
        raise Fail("the trained regressor's own forward does not compute the assignment's "
                   "regressor on its trained weights (largest difference {gap:.2g}, on sequences "
                   "drawn after training): the points are for the model you wrote, trained",
                   gap=largest_gap(got.to(expected.dtype), expected))


def test_regressor_trained(ctx):
    """Train in the student's process with the notebook's recipe; judge the weights here.

    The student's regressor is built around stand-in encoder layers and positions (so a bug in
    EncoderLayer or positional_encoding costs their own points, not these) and trained by the
    recipe's fit_regressor. Only its weights come out: the embedding's must have changed, and they
    are loaded into the reference architecture around the same stand-ins and judged here, on
    sequences drawn after training from a seed nobody can know, so no student code runs while the
    model is judged."""
    recipe = recipe_source(ctx.course, ctx.assignment.id)
    scope = dict(ctx.ref)                       # the recipe's settings (course code, trusted)
    exec(compile(recipe, "<recipe>", "exec"), scope)
    settings = scope["RECIPE"]
    options = dict(vocab_size=scope["VOCAB_SIZE"], d_model=settings["d_model"],
                   num_heads=settings["num_heads"], num_layers=settings["num_layers"],
                   d_ff=settings["d_ff"], dropout=settings["dropout"], pad_id=scope["PAD"])
    regression = ctx.course.parameter("regression")
    student = ctx.new("EncoderRegressor", seed=regression.seed, swap_globals=STAND_INS, **options)
    positions_at_init = bool(ctx.global_calls("positional_encoding"))
    twins, handles = [], []
    for index in range(options["num_layers"]):
        handle, twin = ctx.probe("quiet_encoder_layer", d_model=options["d_model"],
                                 seed=TRAINED_LAYER_SEED + index, num_heads=options["num_heads"])
        student.swap(f"layers.{index}", handle)
        twins.append(twin)
        handles.append(handle)
    # Training starts from the grader's weights (the reference's), loaded by the harness with
    # torch's own functions: weights pasted into __init__ are gone; and the optimiser gets the
    # parameters torch registered, whatever the class's parameters() says.
    init = {name: weight.detach().clone() for name, weight in ctx.reference_module(
        "EncoderRegressor", seed=regression.seed, **options).named_parameters()
        if not under(name, ["layers"])}
    loaded = ctx.request("load", handle=student.name, state=init)
    missing = [name for name in init if name in loaded.get("unexpected", [])] \
        if isinstance(loaded, dict) else []
    if missing:
        raise Fail("the regressor has no parameter {name}: keep the assignment's names (see "
                   "regressor.structure)", name=missing[0])
    before = ctx.request("state", handle=student.name)
    ctx.request("exec", label="recipe", source=recipe)
    try:
        losses = ctx.request("call", timeout=ctx.course.limit("training_seconds"),
                             fn="fit_regressor", args=[student.ref()],
                             kwargs={"seed": regression.seed, "progress": False,
                                     "parameters": {"$parameters": student.name}},
                             swap_globals=POSITIONS, seed=None, grad=True)  # gradients on: it trains
    except StudentError:
        _expect_refused_mask(handles, options["num_heads"])
        raise
    if isinstance(losses, list) and losses and isinstance(losses[-1], (int, float)) and \
            math.isfinite(losses[-1]):
        ctx.extra["regressor_final_loss"] = round(float(losses[-1]), 4)
    used = positions_at_init or bool(ctx.global_calls("positional_encoding"))
    if used:
        with swapped(ctx.ref, "positional_encoding", standins.PositionalTable()):
            model = ctx.reference_module("EncoderRegressor", **options)
    else:                                       # positions made another way: the real table
        model = ctx.reference_module("EncoderRegressor", **options)
    for index, twin in enumerate(twins):
        model.layers[index] = twin
    state = ctx.request("state", handle=student.name)
    _expect_embedding_trained(before, state)
    _trained_regressor_weights(state, model)
    model.eval()
    # A cause named first (a weight that never trained), then the measured error, then whether
    # the weights judged are the student's model's: a regressor of another architecture (an
    # output squashed by a sigmoid) is told its error, which says more than "another forward".
    _expect_regressor_moved(init, model)

    eval_seed = secrets.randbits(62)              # drawn now, after training: nobody can know it
    ctx.extra["regressor_eval_seed"] = eval_seed
    tokens, targets = scope["mean_batch"](regression.eval_sequences,
                                          generator=torch.Generator().manual_seed(eval_seed))
    with torch.no_grad():
        error = float((model(tokens) - targets).abs().mean())
    ctx.extra["regressor_error"] = round(error, 4)
    if not error < regression.max_error:
        raise Fail("after training with the course's recipe, the regressor's predictions are off by "
                   "{error:.3f} on average on {n:,} fresh sequences (judged by the grader in the "
                   "assignment's architecture, around its stand-in encoder layers); below {bar:.2f} "
                   "is needed (always answering the mean is off by about 0.96)",
                   error=error, n=regression.eval_sequences, bar=regression.max_error)
    _expect_own_regressor(ctx, student, model, scope["mean_batch"])
