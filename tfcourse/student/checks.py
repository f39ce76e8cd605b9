"""Visible checks: quick tests a student runs in the notebook, with messages in plain words.

Each check first applies the course's rule against torch's ready-made attention to the code the
student ran, as the grader does; then it prints a line per property that holds and stops at the
first one that does not, with a red message that says what is wrong and, where it helps, where to
look. A failing check does not stop the notebook: its message is the cell's error output (what
nbgrader's Validate and `tfcourse check` read), and Run All goes on to the next cell.

Besides properties, each check compares its stub's output on a fixed small example (fixed inputs
and weights, made by a formula in examples.py) with the numbers the course's solution gives, which
`tfcourse build` writes into expected.json. The hidden graders test more inputs, sizes and
invariances; the visible checks reveal none of those inputs.
"""
from __future__ import annotations

import contextlib
import itertools
import math

import torch

from ..i18n import render
from . import examples

_settings = {"lang": "en"}
BOS = 10


def use_language(lang: str) -> None:
    """The language of the checks' messages (the notebook's edition sets it)."""
    _settings["lang"] = lang


def current_language() -> str:
    return _settings["lang"]


def _say(template: str, **params) -> str:
    return render(template, params, _settings["lang"])


def _ok(template: str, **params) -> None:
    print("✓ " + _say(template, **params))


class _Problem(Exception):
    pass


def _fail(template: str, **params):
    raise _Problem(_say(template, **params))


class CheckFailed(AssertionError):
    """A visible check that failed, where failing checks raise (see `raising`). Jupyter shows
    only its message, in red: the traceback would point into this file, not to the problem."""

    def _render_traceback_(self):          # IPython's hook for an exception's own display
        return [_red(str(self))]


def _red(message: str) -> str:
    return f"\x1b[1;31m✗ {message}\x1b[0m"


@contextlib.contextmanager
def raising():
    """Failing checks raise CheckFailed in here (tests, scripts) instead of reporting and going on."""
    before = _settings.get("raise", False)
    _settings["raise"] = True
    try:
        yield
    finally:
        _settings["raise"] = before


def use_sources(cells) -> None:
    """The code the rule check reads, where no notebook kernel keeps it: a list of cell sources in
    the order they ran (None: the kernel's own history, as in a notebook)."""
    _settings["sources"] = None if cells is None else list(cells)


def _report_failure(message: str) -> None:
    """A failing check: red in the notebook, and recorded as the cell's error (what nbgrader's
    Validate and `tfcourse check` read), without stopping Run All at this cell."""
    _settings.setdefault("failures", []).append(message)
    if _settings.get("raise"):
        raise CheckFailed(message)
    shell = _shell()
    if shell is not None and hasattr(shell, "_showtraceback"):
        try:            # an error output in the cell; the cell itself ends normally
            shell._showtraceback(CheckFailed, message, [_red(message)])
            return
        except Exception:      # noqa: BLE001 - any shell: printing below is enough
            pass
    print(_red(message), flush=True)


def failures() -> list[str]:
    """The messages of the checks that failed so far in this process."""
    return list(_settings.get("failures", []))


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and "ZMQ" in type(shell).__name__ else None


def _checked(function):
    """A check as the notebook calls it: the course's rule first, then the check; a problem is
    reported (see _report_failure) with just its message, and the notebook goes on."""
    def run(*args, **kwargs):
        message = None
        try:
            _rule(args)
            function(*args, **kwargs)
        except _Problem as problem:
            message = str(problem)
        except Exception as error:     # noqa: BLE001 - a value the check did not foresee
            message = _say("the check could not finish ({kind}: {message}): look at what your "
                           "code returns", kind=type(error).__name__, message=error)
        if message is not None:
            _report_failure(message)
    run.__name__, run.__doc__ = function.__name__, function.__doc__
    return run


# -- the course's rule, as the grader applies it ---------------------------------------------------
def _history() -> list[tuple[str, str]]:
    """The code the student ran, oldest first, as (label, source): a cell run again, or replaced
    by a later cell that binds the same top-level names, counts once, as it last ran."""
    given = _settings.get("sources")
    if given is not None:
        ran = [(str(index + 1), text) for index, text in enumerate(given)]
    else:
        shell = _shell()
        if shell is None:
            return []
        ran = [(f"[{index}]", text) for index, text in enumerate(shell.user_ns.get("In", []))
               if index and isinstance(text, str) and text.strip()]
    kept, bound, seen = [], set(), set()
    for label, text in reversed(ran):
        names = _top_level_names(text)
        if text in seen or (names and names <= bound):
            continue
        seen.add(text)
        bound |= names
        kept.append((label, text))
    return kept[::-1]


def _top_level_names(text: str) -> set[str]:
    import ast
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def _rule(stubs) -> None:
    """Fail as the grader would give no points: a stub that reaches torch's ready-made attention
    (course.yaml `rules`), read from the code the student ran in this kernel."""
    names = [getattr(stub, "__name__", None) for stub in stubs if callable(stub)]
    rules = examples.expected().get("rules")
    cells = _history()
    if not names or not rules or not cells:
        return
    from ..submission import rules as reading
    found = reading.check(cells, rules["forbidden"], stubs=set(rules["stubs"]) | set(names),
                          known_modules=rules["known_modules"])
    broken = found.messages(names)
    if broken:
        shown = "; ".join(broken[:3]) + (f"; and {len(broken) - 3} more" * (len(broken) > 3))
        _fail("{reasons}; the course's rules do not allow this here, so write the attention "
              "yourself", reasons=shown)


# -- fixed examples -----------------------------------------------------------------------------
def _example(name: str, *stubs) -> dict:
    """Run example `name` on the student's stubs; what came out, by key."""
    wanted = examples.expected().get("examples", {}).get(name, {})
    return examples.EXAMPLES[name](*stubs, names=wanted.get("names"))


def _differs(name: str, got: dict, keys=None) -> list[tuple[str, float]]:
    """The keys of example `name` whose values differ from the solution's, with the largest gap
    (nothing when expected.json has no such example)."""
    wanted = examples.expected().get("examples", {}).get(name)
    if not wanted:
        return []
    out = []
    for key in keys or [k for k in wanted["values"] if k in got]:
        expected = examples.from_data(wanted["values"][key])
        value = got.get(key)
        if isinstance(expected, torch.Tensor):
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(expected.shape):
                out.append((key, math.inf))
            elif not _close(value.detach(), expected):
                out.append((key, float((value.detach().double() - expected).abs().max())))
        elif isinstance(expected, list):
            if not isinstance(value, list) or len(value) != len(expected) or not all(
                    math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-7)
                    for a, b in zip(value, expected)):
                out.append((key, math.inf))
    return out


def _expected(name: str, key: str):
    """The solution's value of `key` in example `name` (None when expected.json lacks it)."""
    data = examples.expected().get("examples", {}).get(name, {}).get("values", {}).get(key)
    return None if data is None else examples.from_data(data)


def _module(what: str, cls, *args, names=None, **kwargs):
    """The student's module, its weights set by name to the example's fixed values, in eval mode;
    and the names set. `names` (the solution's, from expected.json): fail when one is missing."""
    module = _call(what, cls, *args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        _fail("{what} should be an nn.Module, not {kind}", what=what, kind=type(module).__name__)
    wanted = names if names is not None else examples.parameter_names(module)
    state = module.state_dict(keep_vars=True)
    owners = {}
    for name in wanted:
        tensor = state.get(name)
        if tensor is not None and id(tensor) in owners:
            _fail("{first} and {second} are the same parameter: each layer needs its own "
                  "weights (is one layer reused, or shared across a list?)",
                  first=owners[id(tensor)], second=name)
        if tensor is not None:
            owners[id(tensor)] = name
    missing = examples.fill(module, wanted)
    if missing:
        _fail("{what}: the check cannot set the weights of its fixed example by name: {missing} "
              "missing (the names the assignment gives; a list of layers must be an "
              "nn.ModuleList)", what=what, missing=", ".join(missing[:4]))
    module.eval()
    return module, wanted


def _values(name: str, *stubs, hint: str = "", got: dict | None = None) -> None:
    """Compare example `name` run on `stubs` (or its outputs `got`) with the solution's numbers."""
    got = _example(name, *stubs) if got is None else got
    wrong = _differs(name, got)
    if wrong:
        key, gap = wrong[0]
        _fail("on the check's fixed example, `{key}` is not what the course's solution gives "
              "({gap}){hint}", key=key,
              gap=_say("a different shape or type") if gap == math.inf else
              _say("largest difference {gap:.3g}", gap=gap),
              hint=(": " + _say(hint)) if hint else "")
    if examples.expected().get("examples", {}).get(name):
        _ok("its values on a fixed example match the course's solution")


def _call(what: str, function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except NotImplementedError:
        _fail("{what} is not written yet: replace `raise NotImplementedError()` with your code",
              what=what)
    except _Problem:
        raise
    except Exception as error:                     # the student's code broke: say where
        _fail("{what} raised {kind}: {message}", what=what, kind=type(error).__name__,
              message=error)


def _shape(tensor, expected, what: str):
    if not isinstance(tensor, torch.Tensor):
        _fail("{what} should be a tensor, not {kind}", what=what, kind=type(tensor).__name__)
    if tuple(tensor.shape) != tuple(expected):
        _fail("{what}: shape {got}, expected {expected}", what=what,
              got=list(tensor.shape), expected=list(expected))


def _close(got, expected, atol=1e-4):
    return got.shape == expected.shape and torch.allclose(got.double(), expected.double(),
                                                          atol=atol, rtol=1e-3)


def _count(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _fixed(seed: int, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


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
        return examples.stand_in_attention(*args, **kwargs)


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

            def wired(pre=False, residual=None, order=None):
                h = x
                for index in range(len(names)):
                    norm = norms[(order or range(len(names)))[index]]
                    keep = residual is None or residual[index]
                    base = h if keep else 0
                    h = base + vectors[index].expand_as(h) if pre else norm(
                        base + vectors[index].expand_as(h))
                return h

            expected = wired()
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


@examples.example("transformer")
def _transformer_example(Transformer, names=None) -> dict:
    model, names = _module("Transformer(11, 8, 2, 1, 16)", Transformer, 11, d_model=8,
                           num_heads=2, num_layers=1, d_ff=16, dropout=0.1, names=names)
    src = torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 0, 0]])
    tgt_in = torch.tensor([[10, 1, 1, 3, 4], [10, 0, 0, 2, 3]])
    pads = _pads(6, 4, total=6)
    out = {"names": names}
    logits = _call("Transformer", model, src, tgt_in)
    if isinstance(logits, torch.Tensor) and logits.requires_grad:
        model.zero_grad()
        (logits * examples.pattern("grad", *logits.shape)).sum().backward()
        grad = model.embedding.weight.grad if isinstance(
            getattr(model, "embedding", None), torch.nn.Embedding) else None
        out["grad"] = grad.clone() if grad is not None else torch.zeros(0)
    with torch.no_grad():
        out["logits"] = _call("Transformer", model, src, tgt_in)
        out["encoded"] = _call("Transformer.encode", getattr(model, "encode"), src, pads)
        out["encoded_plain"] = _call("Transformer.encode", getattr(model, "encode"), src)
        scaled = _scaled_embedding(model, math.sqrt(8))
        if scaled is not None:
            with scaled:
                out["sqrt_d_model"] = _call("Transformer", model, src, tgt_in)
    return out


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
