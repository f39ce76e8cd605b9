"""The course's visible checks: quick tests a student runs in the notebook, with messages in plain
words. `check.X(...)` in a notebook is the function X of this module (layer_checks.py and
sorting_checks.py hold the later assignments' checks; this module gathers them).

These are course content, not part of tfcourse: `tfcourse build` writes this folder's modules and
their messages (locale/) into every released notebook's metadata and into the visible_checks.json
beside it, where `from tfcourse.student import check` finds them (tfcourse/student/visible.py).
Students get them: nothing here may know a hidden test or a solution.

Each check first applies the course's rule against torch's ready-made attention to the code the
student ran, as the grader does; then it prints a line per property that holds and stops at the
first one that does not, with a red message that says what is wrong and, where it helps, where to
look. A failing check does not stop the notebook: its message is the cell's error output (what
nbgrader's Validate and `tfcourse check` read), and Run All goes on to the next cell.

Besides properties, each check compares its stub's output on a fixed small example (fixed inputs
and weights, made by a formula: tfcourse.student.examples) with the numbers the course's solution
gives, which `tfcourse build` writes beside them. The hidden graders test more inputs, sizes and
invariances; the visible checks reveal none of those inputs. A check whose numbers or rule are
missing says that it could not run, never that it passed.
"""
from __future__ import annotations

import math

import torch

from tfcourse.student import examples
from tfcourse.student.checking import (CheckFailed, _call, _checked, _close, _count, _differs,
                                       _example, _fail, _fixed, _module, _ok, _shape, _values,
                                       current_language, describe_outputs, failures, raising,
                                       use_language, use_sources)

from .layer_checks import classifier, decoder_layer, encoder_layer, ffn, positions, regressor
from .sorting_checks import BOS, greedy, noam, teacher, trained, transformer

__all__ = ["BOS", "CheckFailed", "current_language", "failures", "raising", "use_language",
           "use_sources", "sdpa", "mha", "masks", "positions", "ffn", "encoder_layer",
           "decoder_layer", "classifier", "regressor", "transformer", "noam", "teacher", "greedy",
           "trained"]

# Outputs of the fixed examples named in words, where the key alone reads as code (`self`).
describe_outputs({"self": "the output of self-attention",
                  "self_own": "the output of self-attention",
                  "cross": "the output of cross-attention",
                  "masked_self": "the output of masked self-attention",
                  "padded_cross": "the output of cross-attention with a padding mask"})


# -- 01: attention -------------------------------------------------------------------------------
@_checked
def sdpa(scaled_dot_product_attention):
    """Shapes, weights that sum to one, the 1/sqrt(d_k) scale and the mask's meaning."""
    q, k, v = _fixed(0, 2, 3, 5, 4), _fixed(1, 2, 3, 7, 4), _fixed(2, 2, 3, 7, 6)
    result = _call("scaled_dot_product_attention", scaled_dot_product_attention, q, k, v)
    if not isinstance(result, tuple) or len(result) != 2:
        _fail("scaled_dot_product_attention should return a pair (output, weights)")
    out, weights = result
    _shape(out, (2, 3, 5, 6), "the output for q [2, 3, 5, 4], k [2, 3, 7, 4], v [2, 3, 7, 6]")
    _shape(weights, (2, 3, 5, 7), "the weights for those inputs")
    _ok("shapes: output [2, 3, 5, 6] and weights [2, 3, 5, 7]")
    sums = weights.sum(-1)
    scores = q @ k.transpose(-2, -1)
    if any(_close(weights, candidate) for candidate in (scores, scores / math.sqrt(4))):
        _fail("the weights you return are the scores themselves, not their softmax: "
              "scores.softmax(dim=-1) returns a new tensor and leaves scores as they were: keep "
              "its result")
    if (weights < -1e-6).any() or not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        _fail("your weights do not sum to 1 over the keys (row sums from {lo:.3f} to {hi:.3f}): "
              "take the softmax over the last axis", lo=sums.min().item(), hi=sums.max().item())
    _ok("each query's weights are positive and sum to 1 over the keys")
    q1 = torch.tensor([[1.0, 0.0]])
    k1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    v1 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    _, w1 = _call("scaled_dot_product_attention", scaled_dot_product_attention, q1, k1, v1)
    expected = torch.softmax(torch.tensor([[1 / math.sqrt(2), 0.0]]), -1)
    if not _close(w1, expected):
        _fail("for q = [1, 0] and keys [1, 0], [0, 1] the weights should be {expected}, not "
              "{got}: divide the scores by sqrt(d_k)", expected=_round(expected), got=_round(w1))
    _ok("the scores are scaled by 1/sqrt(d_k)")
    mask = torch.ones(5, 7, dtype=torch.bool).triu(1)
    _, masked = _call("scaled_dot_product_attention", scaled_dot_product_attention, q, k, v, mask)
    if masked[..., mask].abs().max() > 1e-6 and _close(masked, weights):
        _fail("the weights with the mask are those without it: the mask had no effect. "
              "masked_fill returns a new tensor and leaves scores as they were: keep its result "
              "(scores = scores.masked_fill(mask, ...)) or use masked_fill_")
    if masked[..., mask].abs().max() > 1e-6:
        _fail("where the mask is True the weight must be 0 (True means blocked); "
              "fill those scores with -inf before the softmax")
    if masked[..., ~mask].min() <= 0:
        _fail("a position the mask allows got weight 0: is your mask inverted?")
    kept = masked.sum(-1)
    if not torch.allclose(kept, torch.ones_like(kept), atol=1e-4):
        _fail("with a mask, the weights of the keys left should sum to 1 (they sum to {lo:.3f} "
              "to {hi:.3f}): mask the scores before the softmax, not the weights after it",
              lo=kept.min().item(), hi=kept.max().item())
    _ok("the mask blocks exactly the positions where it is True")
    _values("sdpa", scaled_dot_product_attention)


@examples.example("sdpa")
def _sdpa_example(scaled_dot_product_attention, names=None) -> dict:
    q, k = examples.pattern("q", 1, 2, 3, 4, scale=1.5), examples.pattern("k", 1, 2, 5, 4)
    v = examples.pattern("v", 1, 2, 5, 3)
    mask = torch.ones(3, 5, dtype=torch.bool).triu(2)
    out, weights = _pair(_call("scaled_dot_product_attention", scaled_dot_product_attention,
                               q, k, v))
    masked_out, masked_weights = _pair(_call("scaled_dot_product_attention",
                                             scaled_dot_product_attention, q, k, v, mask))
    return {"output": out, "weights": weights, "masked_output": masked_out,
            "masked_weights": masked_weights}


def _pair(result):
    if not isinstance(result, tuple) or len(result) != 2:
        _fail("scaled_dot_product_attention should return a pair (output, weights)")
    return result


def _round(tensor):
    return [round(x, 3) for x in tensor.reshape(-1).tolist()]


@_checked
def mha(MultiHeadAttention):
    """Parameter names and count, shapes, the mask, and values on a fixed example (with a simple
    stand-in in place of scaled_dot_product_attention, so that only this class counts)."""
    attention = _call("MultiHeadAttention(12, 3)", MultiHeadAttention, 12, 3)
    state = attention.state_dict(keep_vars=True)        # names and aliases (w_q = linears[0])
    expected = sorted(f"w_{x}.{p}" for x in "qkvo" for p in ("weight", "bias"))
    names = sorted(name for name, _ in attention.named_parameters())
    if not set(expected) <= set(state) or len(names) != len(expected):
        _fail("the parameters should be {expected}, found {names}", expected=expected, names=names)
    if _count(attention) != 4 * (12 * 12 + 12):
        _fail("MultiHeadAttention(12, 3) should have {n} parameters, has {got}",
              n=f"{4 * (12 * 12 + 12):,}", got=f"{_count(attention):,}")
    _ok("four projections w_q, w_k, w_v, w_o: {n} parameters", n=f"{_count(attention):,}")
    attention.eval()
    x, memory = _fixed(3, 2, 5, 12), _fixed(4, 2, 7, 12)
    with _stand_in(MultiHeadAttention):
        out = _call("self-attention", attention, x, x)
        _shape(out, (2, 5, 12), "self-attention on x [2, 5, 12]")
        out = _call("cross-attention", attention, x, memory)
        _shape(out, (2, 5, 12), "cross-attention from x [2, 5, 12] to memory [2, 7, 12]")
        _ok("self- and cross-attention keep the queries' shape [2, 5, 12]")
        kept = getattr(attention, "attention_weights", None)
        if not isinstance(kept, torch.Tensor) or tuple(kept.shape) != (2, 3, 5, 7):
            _fail("after cross-attention from x [2, 5, 12] to memory [2, 7, 12], "
                  "self.attention_weights should hold every head's weights, shape [2, 3, 5, 7] "
                  "(B, num_heads, Tq, Tk), not {got}: keep the weights that "
                  "scaled_dot_product_attention returned, without averaging over the heads",
                  got=list(kept.shape) if isinstance(kept, torch.Tensor) else type(kept).__name__)
        _ok("self.attention_weights keeps every head's weights [2, 3, 5, 7]")
    got = _example("mha", MultiHeadAttention)
    called = got.pop("called")
    if called and _differs("mha", got, ["self"]):
        _values("mha", got={"self": got["self"]}, hint=_MHA_HINT)
    if called and _differs("mha", got, ["cross"]) and \
            not _differs("mha", {"self": got["cross"]}, ["self"]):
        _fail("cross-attention gave the self-attention of x_q: take the keys and values from "
              "x_kv (the second argument)")
    with _stand_in(MultiHeadAttention):
        causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
        changed = x.clone()
        changed[:, 4] += 1.0
        before = _call("masked self-attention", attention, x, x, causal)
        after = _call("masked self-attention", attention, changed, changed, causal)
    if not torch.allclose(before[:, :4], after[:, :4], atol=1e-5):
        _fail("with a causal mask, changing token 4 changed the outputs of tokens 0-3: pass the "
              "mask on to scaled_dot_product_attention (the mask does not reach the attention)")
    _ok("with a causal mask, earlier tokens do not see later ones")
    if not called:
        _values("mha", got={"self_own": got["self_own"]}, hint=_MHA_HINT)
        return
    _values("mha", got={k: v for k, v in got.items() if k != "self_own"}, hint=_MHA_HINT)


_MHA_HINT = ("check how the heads are split (view as [B, T, h, d_k], then transpose(1, 2)) and "
             "merged (transpose back, then reshape), and that w_o is applied last")


class _CountingStandIn:
    def __init__(self):
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return stand_in_attention(*args, **kwargs)


def stand_in_attention(q, k, v, mask=None, *extra, **options):
    """In place of scaled_dot_product_attention inside a module under check: something simple
    and unlike attention (a sigmoid of the scores), so that only the module's own wiring counts."""
    weights = torch.sigmoid(q @ k.transpose(-2, -1))
    if mask is not None:
        weights = weights.masked_fill(torch.as_tensor(mask, dtype=torch.bool), 0.0)
    return weights @ v / 4.0, weights


def _stand_in(MultiHeadAttention, stand_in=None):
    forward = getattr(MultiHeadAttention, "forward", None)
    return examples.global_swapped(forward, "scaled_dot_product_attention",
                                   stand_in or _CountingStandIn())


@examples.example("mha")
def _mha_example(MultiHeadAttention, names=None) -> dict:
    """MultiHeadAttention(6, 2) with fixed weights, around the stand-in attention; and as it is
    (`self_own`), for a class that does not call scaled_dot_product_attention by that name."""
    module, names = _module("MultiHeadAttention(6, 2)", MultiHeadAttention, 6, 2, names=names)
    x, memory = examples.pattern("x", 2, 4, 6), examples.pattern("memory", 2, 5, 6)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    pads = torch.tensor([[False] * 4 + [True], [False] * 3 + [True] * 2])[:, None, None, :]
    stand_in = _CountingStandIn()
    with torch.no_grad():
        with _stand_in(MultiHeadAttention, stand_in):
            out = {"self": _call("self-attention", module, x, x),
                   "cross": _call("cross-attention", module, x, memory),
                   "masked_self": _call("masked self-attention", module, x, x, causal),
                   "padded_cross": _call("cross-attention", module, x, memory, pads)}
        out["self_own"] = _call("self-attention", module, x, x)
    return {**out, "called": stand_in.calls > 0, "names": names}


@_checked
def masks(causal_mask, padding_mask):
    """The two masks on small examples."""
    got = _call("causal_mask(4)", causal_mask, 4)
    expected = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]).bool()
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        _fail("causal_mask should return a bool tensor")
    if got.shape == expected.shape and torch.equal(got, torch.ones(4, 4, dtype=torch.bool).triu()):
        _fail("causal_mask also blocks the diagonal: a position must see itself (triu with "
              "diagonal=1)")
    if got.shape == expected.shape and torch.equal(got, ~expected):
        _fail("causal_mask is inverted: True must mean blocked (the future)")
    if got.shape != expected.shape or not torch.equal(got, expected):
        _fail("causal_mask(4) should be True above the diagonal only:\n{expected}\ngot\n{got}",
              expected=expected.int(), got=got.int())
    _ok("causal_mask(4) is True above the diagonal")
    tokens = torch.tensor([[5, 7, 0, 0], [3, 0, 0, 0]])
    got = _call("padding_mask", padding_mask, tokens, 0)
    expected = (tokens == 0)[:, None, None, :]
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 1, 4, 1):
        _fail("padding_mask is laid out on the query axis [B, 1, T, 1]; it must block keys: "
              "[B, 1, 1, T]")
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (2, 1, 1, 4):
        _fail("padding_mask(tokens [2, 4], pad_id) should have shape [2, 1, 1, 4] "
              "(batch, heads, queries, keys)")
    if torch.equal(got.bool(), ~expected):
        _fail("padding_mask is inverted: True must mean padding (a key to block)")
    if not torch.equal(got.bool(), expected):
        _fail("padding_mask should be True exactly at the pad tokens")
    _ok("padding_mask is [B, 1, 1, T] and True at the pads")
