"""What a check is written with.

A check is a pytest test function of the course's `autograder/` folder (`test_sdpa_values(ctx)`
grades course.yaml's `sdpa.values`; see plugin.py). It asks the student's process for outputs on
inputs it chose, through the `Context` it receives, computes what the reference gives in this
(trusted) process, and raises `Fail` with a message in the course's words when they differ. Student
errors, hangs and crashes become failures of that check only (`verdict`); the next check starts the
student's process again if it had to go.
"""
from __future__ import annotations

import contextlib
import math
import re

import torch

from .report import shown
from ..sandbox.session import ProcessEnded, StudentError, StudentSession, TimedOut

RECORDED_CALLS = 256        # decode calls of a remote stand-in whose input and answer are kept


class Fail(Exception):
    """A check failed; the message is an English template filled with `params`, as the student
    reads it (pytest shows it filled in)."""

    def __init__(self, template: str, **params):
        self.template, self.params = template, params
        try:
            message = template.format(**params)
        except (KeyError, IndexError, ValueError):
            message = template
        super().__init__(message)


# -- checking values -----------------------------------------------------------------------------
# Everything the student's process sends back is data to check before it is compared: its type, the
# kind of its dtype, its shape and, for floating point, that every value is finite. A reply of the
# wrong kind never compares equal (`torch.ones(..., dtype=torch.bool)` is not an attention output),
# and NaN or infinity never passes.
def dtype_kind(tensor: torch.Tensor) -> str:
    """"bool", "integer", "floating" or "complex": what comparisons may mix."""
    if tensor.dtype == torch.bool:
        return "bool"
    if tensor.is_complex():
        return "complex"
    return "floating" if tensor.is_floating_point() else "integer"


def kind_of(value) -> str:
    """What came back, in a word: its type's name, or for an object the student's process could
    not send, the name the worker gave it (checked: it is data too)."""
    if isinstance(value, dict) and "$unsendable" in value:
        kind = value["$unsendable"]
        if not isinstance(kind, str) or len(kind) > 60 or not kind.replace(".", "").isidentifier():
            kind = "dict"
        return kind
    return type(value).__name__


def as_tensor(value, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise Fail("{what} should be a tensor, not {kind}", what=what, kind=kind_of(value))
    return value


def _about(number: int) -> str:
    """A huge int as a person reads it: 10**400, -10**400, 3.14 * 10**400."""
    sign, size = "-" if number < 0 else "", abs(number)
    exponent = math.floor(math.log10(size))
    if size < 10 ** exponent:               # log10 rounded up (999...9)
        exponent -= 1
    if size == 10 ** exponent:
        return f"{sign}10**{exponent}"
    lead = size // 10 ** (exponent - 2) / 100
    return f"{sign}{lead:g} * 10**{exponent}"


FLOAT_MAX = 2 ** 1024             # the first int that float() cannot convert (OverflowError)


def _huge_int(value, depth: int = 0):
    """The first int in a reply (in its lists, tuples and dicts) that float() cannot convert:
    anything the student's process sends may be compared with a float, and such an int raises
    OverflowError wherever it is."""
    if isinstance(value, int):
        return value if not -FLOAT_MAX < value < FLOAT_MAX else None
    if depth > 40:                       # the channel refuses deeper messages
        return None
    items = value.values() if isinstance(value, dict) else \
        value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _huge_int(item, depth + 1)
        if found is not None:
            return found
    return None


def _replier(op: str, args: dict) -> str:
    """Who answered a request, as a message names it: the function, or the module's method."""
    if op == "call" and isinstance(args.get("fn"), str):
        return args["fn"]
    if op in ("method", "grad"):
        method = args.get("method")
        return "the module" if method in (None, "__call__", "forward") else \
            f"the module's {method}"
    return "your code"


def expect_number(value, what: str) -> float:
    """A finite real number from a reply: a Python int or float, or a one-element int or float
    tensor, as a float. Anything else is the student's failure, and the message names what came
    back: another type, a tensor of another kind or size, an int too large for a float (10**400),
    NaN or infinity. The one way a check turns a reply into a number."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or dtype_kind(value) not in ("integer", "floating"):
            raise Fail("{what} should return a number, not a {dtype} tensor of shape {shape}",
                       what=what, dtype=str(value.dtype).replace("torch.", ""),
                       shape=list(value.shape))
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Fail("{what} should return a number, not {kind}", what=what, kind=kind_of(value))
    if isinstance(value, int):
        try:
            value = float(value)
        except OverflowError:
            raise Fail("{what} returned an int too large for a float ({value})", what=what,
                       value=_about(value)) from None
    if not math.isfinite(value):
        raise Fail("{what} returned {value}, not a finite number", what=what, value=value)
    return value


def expect_mapping(value, what: str) -> dict:
    """A reply that must be a dict with string keys (a module's gradients by parameter name, a
    training result); its values are checked where they are used."""
    if not isinstance(value, dict) or "$unsendable" in value or \
            not all(isinstance(key, str) for key in value):
        raise Fail("{what} should be a dict of names, not {kind}", what=what,
                   kind=kind_of(value))
    return value


def expect_calls(value, what: str) -> list[dict]:
    """The record a stand-in kept of its calls, as the student's process sent it: a list of dicts
    of argument names (the stand-ins write nothing else). Anything else means the student's code
    changed the record."""
    if not isinstance(value, list) or not all(
            isinstance(call, dict) and "$unsendable" not in call and
            all(isinstance(key, str) for key in call) for call in value):
        raise Fail("the record of the calls to {what} came back as {kind}, not a list of calls: "
                   "leave the grader's stand-ins and their records as they are", what=what,
                   kind=kind_of(value) if not isinstance(value, list) else
                   "list[" + ", ".join(sorted({kind_of(call) for call in value})[:4]) + "]")
    return value


def expect_kind(value, kind: str, what: str) -> torch.Tensor:
    """`value` as a tensor whose dtype is of `kind` ("floating", "integer", "bool"); a floating
    tensor must hold only finite numbers."""
    tensor = as_tensor(value, what)
    got = dtype_kind(tensor)
    if got != kind:
        words = {"floating": "a floating-point tensor", "integer": "an integer tensor (token ids)",
                 "bool": "a bool tensor", "complex": "a complex tensor"}
        raise Fail("{what} should be {kind}, not {dtype}", what=what, kind=words[kind],
                   dtype=str(tensor.dtype).replace("torch.", ""))
    if kind == "floating" and not bool(torch.isfinite(tensor).all()):
        raise Fail("NaN or infinity in {what}", what=what)
    return tensor


def expect_shape(value, shape, what: str) -> torch.Tensor:
    tensor = as_tensor(value, what)
    if tuple(tensor.shape) != tuple(shape):
        raise Fail("{what}: shape {got}, expected {expected}", what=what,
                   got=list(tensor.shape), expected=list(shape))
    return tensor


def expect_like(value, expected: torch.Tensor, what: str) -> torch.Tensor:
    """`value` with the shape and dtype kind of `expected` (finite, when floating)."""
    expect_shape(value, tuple(expected.shape), what)
    return expect_kind(value, dtype_kind(expected), what)


def unmoved(start: dict, model: torch.nn.Module) -> list[str]:
    """The names of `start` (a parameter's weights before training) whose parameter in `model`
    (loaded with the trained weights) is exactly as it started: a trained check's sign that the
    output never depended on it."""
    trained = dict(model.named_parameters())
    return [name for name, weight in start.items() if torch.equal(trained[name].detach(), weight)]


def close(got, expected, atol: float, rtol: float) -> bool:
    """Whether `got` is `expected` within tolerance: a tensor of the same shape and dtype kind,
    finite where floating (NaN and infinity never pass), then the values."""
    if not isinstance(got, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return False
    if tuple(got.shape) != tuple(expected.shape) or dtype_kind(got) != dtype_kind(expected):
        return False
    if dtype_kind(got) in ("bool", "integer"):
        return torch.equal(got.long(), expected.long())
    if dtype_kind(got) == "complex":
        return False
    got, expected = got.double(), expected.double()
    if not bool(torch.isfinite(got).all()) or not bool(torch.isfinite(expected).all()):
        return False
    return bool(torch.allclose(got, expected, atol=atol, rtol=rtol))


def largest_gap(got: torch.Tensor, expected: torch.Tensor) -> float:
    try:
        return float((got.double() - expected.double()).abs().nan_to_num(math.inf).max())
    except (RuntimeError, TypeError):
        return math.inf


def expect_varies(first, second, what: str, change: str) -> None:
    """An invariance check means something only for an output that depends on its input: the
    outputs for two inputs that differ where they must matter (`change`) must differ. Constant
    and degenerate outputs (zeros, ones, a fixed tensor) fail here, before any invariance."""
    first = expect_kind(first, "floating", what)
    second = expect_kind(second, "floating", what)
    if tuple(first.shape) == tuple(second.shape) and bool(torch.allclose(
            first.double(), second.double(), atol=1e-6, rtol=1e-5)):
        raise Fail("{what} did not change when {change}: the output must depend on its input",
                   what=what, change=change)


def pair(value, what: str):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Fail("{what} should return a pair (output, weights)", what=what)
    return value


@contextlib.contextmanager
def swapped(namespace: dict, name: str, value):
    """Temporarily replace a global of the reference (to put a stand-in under it)."""
    missing = object()
    previous = namespace.get(name, missing)
    namespace[name] = value
    try:
        yield value
    finally:
        if previous is missing:
            namespace.pop(name, None)
        else:
            namespace[name] = previous


def first_match(got, variants, atol: float, rtol: float) -> str:
    """The words of the first of `variants`, (tensor, words) pairs of common wrong answers, that
    `got` matches within tolerance (same shape and dtype kind, see `close`); "" when none does."""
    for candidate, words in variants:
        if close(got, candidate, atol, rtol):
            return words
    return ""


# -- arguments changed in place ------------------------------------------------------------------
# The student's process answers a call that changed a tensor it was given with {"$value": ...,
# "$changed": [paths]} (sandbox/worker.py `_run`). The report is data from the untrusted side, and
# it can only cost the check: believing it is safe, and no verdict rests on its absence (a reply
# without it is just the value, checked as always).
IN_PLACE = "$changed"
_ARGUMENT_PATH = re.compile(r"[A-Za-z_]\w{0,39}(\[(\d{1,4}|'[\w -]{0,40}')\]){0,6}")
_NAME = re.compile(r"[A-Za-z_][\w.]{0,79}")


def unchanged_arguments(reply, what: str):
    """The value of a call's reply; a Fail when the student's process reports that the call changed
    one of its tensor arguments in place (`what` names the function or method)."""
    if not (isinstance(reply, dict) and set(reply) == {"$value", IN_PLACE}):
        return reply
    paths = reply[IN_PLACE]
    if isinstance(paths, list) and not paths:
        return reply["$value"]
    paths = [path for path in paths if isinstance(path, str) and _ARGUMENT_PATH.fullmatch(path)] \
        if isinstance(paths, list) else []
    if not paths:
        raise Fail("{what} changed one of its arguments in place: the caller's tensors must stay "
                   "as they were, so compute the result in a new tensor (clone an argument "
                   "before writing into it, or use torch.cat, masked_fill and x = x + ... "
                   "instead of x[...] = ..., masked_fill_ and +=)", what=what)
    name = re.match(r"[A-Za-z_]\w*", paths[0]).group(0)
    raise Fail("{what} changed its argument {names} in place ({name}[...] = ..., +=, or a method "
               "ending in _ such as masked_fill_): the caller's tensors must stay as they were, "
               "so compute the result in a new tensor ({name}.clone() before writing into it, or "
               "torch.cat, masked_fill, {name} + ...)", what=what, names=", ".join(paths[:4]),
               name=name)


# -- what a check works with ---------------------------------------------------------------------
def under(name: str, paths) -> bool:
    """Whether the parameter (or module) `name` lies under one of the submodule `paths`."""
    return any(name == path or name.startswith(path + ".") for path in paths)


def outside(names: dict, skipped) -> dict:
    """The entries of `names` that do not lie under one of the `skipped` submodule paths."""
    return {name: value for name, value in names.items() if not under(name, skipped)}


def parameter_shapes(module: torch.nn.Module, skipped=()) -> dict[str, list[int]]:
    """A module's parameters, name -> shape, outside the `skipped` submodules: the reference's
    are what the assignment asks of the student's module."""
    return outside({name: list(p.shape) for name, p in module.named_parameters()}, skipped)


def compare_parameters(got: dict[str, list[int]], identity: dict[str, int],
                       expected: dict[str, list[int]]) -> tuple[list, list, list]:
    """(missing, unexpected, wrong shape) between a module's parameters and the contract's.

    `got` has every name under which a parameter is reachable (aliases through containers, tied
    weights) and `identity` which tensor each name is. A name of the contract must be there with
    its shape; a tensor that no name of the contract reaches is unexpected (named once, by its
    first name); other names of a tensor the contract reaches are aliases, and fine."""
    missing = sorted(set(expected) - set(got))
    wrong = sorted(name for name in set(got) & set(expected) if got[name] != expected[name])
    reached = {identity.get(name, name) for name in set(got) & set(expected)}
    unexpected, seen = [], set()
    for name in got:
        key = identity.get(name, name)
        if key not in reached and key not in seen:
            unexpected.append(name)
            seen.add(key)
    return missing, sorted(unexpected), wrong


def _checked_description(info) -> dict:
    """A module's description as the student's process sent it, keeping only well-formed entries:
    params [name, shape, tensor id], children [name, type, id] and frozen (the names of the
    parameters that cannot learn). It is data, like any reply."""
    if not isinstance(info, dict):
        return {}

    def is_shape(value):
        return isinstance(value, list) and len(value) <= 8 and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 31 for n in value)

    params = [entry for entry in info.get("params", []) if isinstance(entry, list)
              and len(entry) == 3 and isinstance(entry[0], str) and is_shape(entry[1])
              and isinstance(entry[2], int)] if isinstance(info.get("params"), list) else []
    children = [entry for entry in info.get("children", []) if isinstance(entry, list)
                and len(entry) == 3 and all(isinstance(x, str) for x in entry[:2])
                and isinstance(entry[2], int)] if isinstance(info.get("children"), list) else []
    frozen = [name for name in info.get("frozen", []) if isinstance(name, str)] \
        if isinstance(info.get("frozen"), list) else []
    return {**{k: v for k, v in info.items() if k in ("module", "type")},
            "params": params, "children": children, "frozen": frozen}


class Handle:
    """A module living in the student's process, known here by name."""

    def __init__(self, context: "Context", name: str, info: dict | None = None):
        self.context, self.name, self.info = context, name, _checked_description(info)
        self.loaded: dict = {}              # the weights last loaded into it, by its own names

    @property
    def parameters(self) -> dict[str, list[int]]:
        """Every name under which a parameter is reachable -> its shape."""
        return {entry[0]: entry[1] for entry in self.info.get("params", [])}

    @property
    def identity(self) -> dict[str, int]:
        """Name -> which tensor it is: two names of one tensor have the same number."""
        return {entry[0]: entry[2] for entry in self.info.get("params", [])}

    def shared(self, names) -> list[tuple[str, str]]:
        """(module, other) for each of `names` (the contract's, one tensor each) that is the same
        tensor as an earlier one: the paths of the two modules, their common tail left off
        ("w_k", "w_q" for w_k.weight and w_q.weight; "cross_attn", "self_attn" for
        cross_attn.w_q.weight and self_attn.w_q.weight)."""
        identity, first_of, pairs = self.identity, {}, []
        for name in names:
            key = identity.get(name)
            if key is None:
                continue
            if key not in first_of:
                first_of[key] = name
                continue
            module, other = name.split("."), first_of[key].split(".")
            while len(module) > 1 and len(other) > 1 and module[-1] == other[-1]:
                module, other = module[:-1], other[:-1]
            pairs.append((".".join(module), ".".join(other)))
        return pairs

    def frozen(self, names, skipped=()) -> list[str]:
        """Those of `names` (the contract's) that the module has, outside the `skipped`
        submodules, and that cannot learn: requires_grad False, under any of their names."""
        identity = self.identity
        frozen = {identity[name] for name in self.info.get("frozen", []) if name in identity}
        return sorted(name for name in names if not under(name, skipped)
                      and identity.get(name, -1) in frozen)

    def expect_trainable(self, names, skipped=()) -> None:
        """Fail unless every one of `names` (the contract's parameters) that the module has,
        outside the `skipped` submodules, can learn: a frozen module (requires_grad_(False)) has
        the contract's parameters and trains none of them."""
        frozen = self.frozen(names, skipped)
        if frozen:
            raise Fail("the parameters {names} cannot learn (requires_grad is False): the "
                       "assignment's parameters must be trainable, so do not freeze them",
                       names=", ".join(frozen[:6]) + (", ..." if len(frozen) > 6 else ""))

    def count(self, names=None) -> int:
        """How many numbers the parameters hold, each tensor once however many names it has;
        only those under `names` when given."""
        sizes = {}
        for name, shape in self.parameters.items():
            if names is None or name in names:
                sizes[self.identity[name]] = math.prod(shape)
        return sum(sizes.values())

    def inside(self, skipped) -> set[int]:
        """The tensors inside the `skipped` submodules, whatever other names they have (a layer
        that keeps its sublayer as `attn` too, and the grader swapped `self_attn`)."""
        identity = self.identity
        return {identity[name] for name in self.parameters if under(name, skipped)}

    def compare(self, expected: dict[str, list[int]], skipped=()) -> tuple[list, list, list]:
        """(missing, unexpected, wrong shape) between the module's parameters and `expected`
        (see compare_parameters), leaving aside the `skipped` submodules (parts graded on their
        own, which the module only has to contain) and every name of a tensor inside them."""
        identity, inside = self.identity, self.inside(skipped)
        got = {name: shape for name, shape in self.parameters.items()
               if identity[name] not in inside}
        return compare_parameters(got, identity, outside(expected, skipped))

    def _missing_outside(self, missing: list[str], skipped) -> list[str]:
        """The names of `missing` that are not of a tensor inside the `skipped` submodules."""
        identity, inside = self.identity, self.inside(skipped)
        return [name for name in missing if not under(name, skipped)
                and identity.get(name) not in inside]

    def expect_parameters(self, expected: dict[str, list[int]], template: str, skipped=(),
                          **params) -> None:
        """Fail with `template` unless the module's parameters are `expected` (see `compare`).
        The template is filled with `params` and the names found `missing`, `unexpected` and of
        the `wrong` shape ("none" for each where there are none). Then they must be able to
        learn (see `expect_trainable`)."""
        missing, unexpected, wrong = self.compare(expected, skipped)
        if missing or unexpected or wrong:
            raise Fail(template, missing=missing or "none", unexpected=unexpected or "none",
                       wrong=wrong or "none", **params)
        self.expect_trainable(expected, skipped)

    def load(self, state: dict) -> tuple[list[str], list[str]]:
        """Load reference weights by name: (missing parameter names, unexpected names). A name
        that is only another name of a tensor that was loaded (an alias) is not missing."""
        result = self.context.request("load", handle=self.name, state=state)
        self.loaded = dict(state)
        if not isinstance(result, dict):
            result = {}
        names = {key: [name for name in result.get(key, []) if isinstance(name, str)]
                 if isinstance(result.get(key), list) else [] for key in ("missing", "unexpected")}
        identity = self.identity
        loaded = {identity[name] for name in state if name in identity}
        missing = [name for name in names["missing"]
                   if name in identity and identity[name] not in loaded]
        return missing, names["unexpected"]

    def load_by_position(self, reference: torch.nn.Module, skipped=()) -> bool:
        """For a check of behaviour on a module whose names differ from the contract's: load the
        reference's parameters in their order of registration into the module's own, when each
        has the same shape (a working module under other names). Whether that was possible; a
        module without parameters like the contract's (one that computes something trivial, say)
        cannot be checked for behaviour at all."""
        expected = [(name, tensor) for name, tensor in reference.named_parameters()
                    if not under(name, skipped)]
        skipped_ids = self.inside(skipped)
        own, seen = [], set()
        for name, shape in self.parameters.items():
            identity = self.identity[name]
            if identity not in seen and identity not in skipped_ids:
                seen.add(identity)
                own.append((name, shape))
        if not expected or len(own) != len(expected) or any(
                shape != list(tensor.shape) for (_, shape), (_, tensor) in zip(own, expected)):
            return False
        state = {name: tensor.detach() for (name, _), (_, tensor) in zip(own, expected)}
        missing, unexpected = self.load(state)
        return not unexpected and not self._missing_outside(missing, skipped)

    def load_reference(self, reference: torch.nn.Module, *, unmatched: Fail, by_name,
                       state: dict | None = None, skipped=(), strict: bool = True) -> None:
        """Load the reference's weights (`state`, by default its state_dict) into this module by
        name, outside the `skipped` submodules. When the names do not match, a strict load (a
        check of values) fails with `by_name(missing, unexpected)`, a Fail; a check of behaviour
        only (strict=False) loads them in their order into parameters of the same shapes (a
        working module under other names, see `load_by_position`), and fails with `unmatched`
        when the module has none like them."""
        state = reference.state_dict() if state is None else state
        missing, unexpected = self.load(outside(state, skipped))
        missing = self._missing_outside(missing, skipped)
        if not missing and not unexpected:
            return
        if not strict:
            if self.load_by_position(reference, skipped):
                return
            raise unmatched
        raise by_name(missing, unexpected)

    def run(self, *args, method: str = "__call__", train: bool = False, seed: int | None = None,
            swap_globals: dict | None = None, timeout: float | None = None, **kwargs):
        reply = self.context.request("method", timeout=timeout, handle=self.name, method=method,
                                     args=list(args), kwargs=kwargs, train=train, seed=seed,
                                     swap_globals=swap_globals)
        return unchanged_arguments(reply, self.called(method))

    def called(self, method: str = "__call__") -> str:
        """How a message names a call of this module: its class (as the student's process
        described it, when that is a name), with the method ("Model.decode")."""
        kind = self.info.get("type")
        kind = kind if isinstance(kind, str) and _NAME.fullmatch(kind) else "the module"
        return kind if method in ("__call__", "forward") else f"{kind}.{method}"

    def swap(self, path: str, probe: "Handle") -> None:
        try:
            self.context.request("swap", handle=self.name, path=path, probe=probe.name)
        except StudentError:
            raise Fail("the module has no submodule `{path}`, a name the assignment asks for",
                       path=path) from None

    def grad(self, *args, weights, method: str = "__call__") -> dict:
        """Gradients of sum(output * weights) for each named parameter (eval mode)."""
        return expect_mapping(self.context.request("grad", handle=self.name, args=list(args),
                                                   weights=weights, method=method),
                              "the gradients")

    def calls(self) -> list[dict]:
        return expect_calls(self.context.request("calls", handle=self.name),
                            "the grader's stand-in")

    def ref(self) -> dict:
        return {"$handle": self.name}


class Context:
    """What a check function receives: the student's process, the reference and the course."""

    def __init__(self, session: StudentSession, reference: dict, course, assignment,
                 check_seconds: float, standins=None):
        self.session, self.ref = session, reference
        self.course, self.assignment = course, assignment
        self.standins = standins                # the course's stand-ins (autograder/standins.py)
        self.check_seconds = check_seconds
        self.atol = course.tolerance.atol
        self.rtol = course.tolerance.rtol
        self._handles = 0
        self.extra: dict = {}
        self.generator = torch.Generator().manual_seed(0)

    def seed(self, value: int) -> None:
        self.generator.manual_seed(value)

    def randn(self, *shape) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator)

    def randint(self, low: int, high: int, *shape) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.generator)

    def request(self, op: str, timeout: float | None = None, **args):
        reply = self.session.request(op, timeout or self.check_seconds, **args)
        huge = _huge_int(reply)
        if huge is not None:            # no check can use it; float(), isclose() would raise
            raise Fail("{what} returned an int too large for a float ({value})",
                       what=_replier(op, args), value=_about(huge))
        return reply

    def call(self, function: str, *args, swap_globals: dict | None = None, seed=None,
             timeout: float | None = None, **kwargs):
        reply = self.request("call", timeout=timeout, fn=function, args=list(args),
                             kwargs=kwargs, swap_globals=swap_globals, seed=seed)
        return unchanged_arguments(reply, function)

    def _name(self) -> str:
        self._handles += 1
        return f"h{self._handles}"

    def new(self, cls: str, *args, seed: int = 0, swap_globals: dict | None = None,
            **kwargs) -> Handle:
        name = self._name()
        info = self.request("new", handle=name, cls=cls, args=list(args), kwargs=kwargs, seed=seed,
                            swap_globals=swap_globals)
        return Handle(self, name, info)

    def probe(self, kind: str, **options) -> tuple[Handle, torch.nn.Module]:
        """A stand-in in the student's process and its twin here, built from the same seed."""
        name = self._name()
        self.request("probe", handle=name, kind=kind, options=options)
        return Handle(self, name), self.standins.probe(kind, **options)

    def remote_probe(self, kind: str, **options) -> tuple[Handle, dict]:
        """A stand-in model whose answers are computed here, by a twin built from `options`;
        the student's process holds only a handle. Returns the handle and the record of its
        calls, kept on this side: {"encode": n, "decode": n, "decoded": [(tgt_in, logits), ...]}
        (the first RECORDED_CALLS decode calls, each input and the logits answered)."""
        name = self._name()
        twin = self.standins.probe(kind, **options)
        counts = {"encode": 0, "decode": 0, "decoded": []}
        vocab = int(options["vocab_size"])

        def answer(method: str, args):
            if method not in ("encode", "decode") or not isinstance(args, list) or len(args) != (
                    1 if method == "encode" else 2):
                raise ValueError(f"unknown call {method}")
            tokens = args[0]
            if not isinstance(tokens, torch.Tensor) or dtype_kind(tokens) != "integer" or \
                    tokens.dim() != 2 or tokens.numel() > 1 << 16 or tokens.numel() == 0 or \
                    int(tokens.min()) < 0 or int(tokens.max()) >= vocab:
                raise ValueError(f"{method} takes token ids [B, T] below {vocab}")
            counts[method] += 1
            with torch.no_grad():
                if method == "encode":
                    return twin.encode(tokens.long())
                memory = args[1]
                if not isinstance(memory, torch.Tensor) or dtype_kind(memory) != "floating" or \
                        memory.dim() != 3 or memory.shape[0] != tokens.shape[0] or \
                        memory.shape[-1] != twin.src_table.shape[1] or memory.numel() > 1 << 20:
                    raise ValueError("decode takes the memory that encode returned")
                logits = twin.decode(tokens.long(), memory.float())
                if len(counts["decoded"]) < RECORDED_CALLS:
                    counts["decoded"].append((tokens.long().clone(), logits.clone()))
                return logits

        self.session.callbacks[name] = answer
        self.request("probe", handle=name, kind="remote", options={"vocab_size": vocab})
        return Handle(self, name), counts

    def global_calls(self, name: str) -> list[dict]:
        """Calls a global stand-in (swapped in with swap_globals) received."""
        return expect_calls(self.request("calls", handle=name), name)

    def reference_module(self, cls: str, *args, seed: int = 0, **kwargs) -> torch.nn.Module:
        torch.manual_seed(seed)
        return self.ref[cls](*args, **kwargs).eval()

    def expect_uses(self, handle: "Handle", run, what: str) -> None:
        """The module's output must depend on the weights loaded into it (`handle.loaded`):
        `run()` gives the output before and after they are all shifted a little. A module that
        computes something trivial beside parameters it never uses fails here."""
        weights = {name: tensor for name, tensor in handle.loaded.items()
                   if isinstance(tensor, torch.Tensor) and tensor.is_floating_point()}
        before = expect_kind(run(), "floating", what)
        handle.load({name: tensor + 0.5 for name, tensor in weights.items()})
        after = expect_kind(run(), "floating", what)
        handle.load(weights)
        if tuple(before.shape) == tuple(after.shape) and close(before, after, 1e-6, 1e-5):
            raise Fail("{what} does not change when the module's weights change: it must compute "
                       "its output with its parameters", what=what)

    def expect_close(self, got, expected: torch.Tensor, what: str, hint: str = "") -> None:
        got = expect_like(got, expected, what)
        if not close(got, expected, self.atol, self.rtol):
            gap = largest_gap(got, expected)
            if hint:
                raise Fail("{what}: not the expected values (largest difference {gap:.2g}): {hint}",
                           what=what, gap=gap, hint=hint)
            raise Fail("{what}: not the expected values (largest difference {gap:.2g})",
                       what=what, gap=gap)


# -- running the checks of one notebook ----------------------------------------------------------
def describe_student_error(error: StudentError) -> tuple[str, dict]:
    info = error.info
    if info.get("type") == "NotImplementedError":
        return ("not written yet: the code raises NotImplementedError", {})
    where = info.get("where") or ""
    line = info.get("line")
    params = {"kind": info.get("type"), "message": str(info.get("message", ""))[:400]}
    where = where.strip("<>")
    if where.startswith("cell ") and line:      # "<cell sdpa-code>": the word in the language
        return ("your code raised {kind} (cell {cell}, line {line}): {message}",
                {**params, "cell": where.removeprefix("cell "), "line": line})
    if where and line:
        return ("your code raised {kind} ({where}, line {line}): {message}",
                {**params, "where": where, "line": line})
    return "your code raised {kind}: {message}", params


def verdict(error: BaseException) -> tuple[str, dict, bool]:
    """What a check's exception means for the student: (template, params, the grader's own
    fault), every value checked by `shown`. Student errors, hangs and crashes fail that check
    only."""
    template, params, internal = _verdict(error)
    return template, {str(key): shown(value) for key, value in params.items()}, internal


def _verdict(error: BaseException) -> tuple[str, dict, bool]:
    if isinstance(error, Fail):
        return error.template, error.params, False
    if isinstance(error, StudentError):
        return (*describe_student_error(error), False)
    if isinstance(error, TimedOut):      # CPU time, waiting on nothing, the backstop (session.py)
        if error.template is not None:
            return (*error.template, False)
        if error.waiting:
            return ("did not finish within {seconds:.0f} s of waiting while using little CPU (it "
                    "may be waiting on something: input(), a sleep, a lock)",
                    {"seconds": error.seconds}, False)
        return ("used more than {seconds:.0f} CPU seconds (an endless loop, or very slow code?)",
                {"seconds": error.seconds}, False)
    if isinstance(error, ProcessEnded):
        if error.memory:
            template = "used more memory than allowed ({description})"
        elif error.limit:
            template = "went over a limit of the sandbox: it {description}"
        else:
            template = "your code ended the grading process ({description})"
        return template, {"description": error.description}, False
    # the grader could not make sense of what came back
    return ("could not be checked ({kind}: {message})",
            {"kind": type(error).__name__, "message": str(error)[:300]}, True)
