"""What every visible check is made of: messages, failing without stopping the notebook, the
course's rule applied to the code the student ran, fixed examples compared with the solution's,
and small helpers to call a student's stub and read what it gives. The checks themselves are the
course's (its `visible/` folder), loaded into the kernel by visible.py.

A check says PASS only for what it checked. When its numbers or the course's rule are missing, or
the code the student ran cannot be read, it reports that it could not run and why (CheckNotRun),
which `tfcourse check` shows as NOT CHECKED, never as PASS."""
from __future__ import annotations

import contextlib
import math

import torch

from ..i18n import translate
from . import examples

_settings = {"lang": "en"}
_OUTPUTS: dict[str, str] = {}      # example output key -> its name in words (describe_outputs)


def use_language(lang: str) -> None:
    """The language of the checks' messages (the notebook's edition sets it)."""
    _settings["lang"] = lang


def current_language() -> str:
    return _settings["lang"]


def use_catalog(catalogs: dict | None) -> None:
    """The course's own messages (lang -> English template -> translation), read before tfcourse's:
    the catalogs the course's visible checks come with (visible.py sets them)."""
    _settings["catalogs"] = catalogs or {}


def say(template: str, params: dict | None = None, lang: str | None = None) -> str:
    """`template` in the notebook's language, from the course's catalog or else tfcourse's, with
    its {placeholders} filled in (values that are phrases of a catalog are translated too)."""
    lang = lang or _settings["lang"]
    own = (_settings.get("catalogs") or {}).get(lang) or {}

    def tr(text: str) -> str:
        found = own.get(text)
        return found if found is not None else translate(text, lang)
    if params is None:
        return tr(template)
    values = {key: tr(value) if isinstance(value, str) else value
              for key, value in params.items()}
    try:
        return tr(template).format(**values)
    except (KeyError, IndexError, ValueError):
        return template.format(**(params or {}))


def _say(template: str, **params) -> str:
    return say(template, params)


def describe_outputs(names: dict[str, str]) -> None:
    """Names in words for outputs of the fixed examples whose keys read as code (`self`)."""
    _OUTPUTS.update(names)


def _ok(template: str, **params) -> None:
    print("✓ " + _say(template, **params))


class _Problem(Exception):
    pass


class _NotRun(Exception):
    """Something the check needs is missing: it cannot say whether the stub is right."""


def _fail(template: str, **params):
    raise _Problem(_say(template, **params))


class CheckFailed(AssertionError):
    """A visible check that failed, where failing checks raise (see `raising`). Jupyter shows
    only its message, in red: the traceback would point into this file, not to the problem."""

    def _render_traceback_(self):          # IPython's hook for an exception's own display
        return _red_lines(str(self))


class CheckNotRun(CheckFailed):
    """A visible check that could not run (its numbers, the course's rule or the code that ran are
    missing): never a pass. Its message names the check and says why."""


def _red(message: str) -> str:
    return f"\x1b[1;31m✗ {message}\x1b[0m"


# nbgrader's Validate shows a failing cell's traceback, line by line: `nbgrader validate` indents
# each line by 4 and cuts it at 87 characters (its Validator.width, 90, less 3), and the button's
# dialog shows each line unwrapped. A check's message is one long line whose hint comes last, so
# it is shown as lines this wide: whole in both (ename and evalue keep the message in one line).
SHOWN_WIDTH = 76


def _red_lines(message: str) -> list[str]:
    """The message in red, as lines of at most SHOWN_WIDTH characters, words never split."""
    import textwrap

    lines = []
    for paragraph in f"✗ {message}".split("\n"):
        lines += textwrap.wrap(paragraph, SHOWN_WIDTH, break_long_words=False,
                               break_on_hyphens=False) or [""]
    return [f"\x1b[1;31m{line}\x1b[0m" for line in lines]


def _not_run(reason: str, **params):
    raise _NotRun(_say(reason, **params))


@contextlib.contextmanager
def raising():
    """Failing checks raise CheckFailed in here (tests, scripts) instead of reporting and going
    on."""
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


def _report_failure(message: str, kind: type = CheckFailed) -> None:
    """A failing check (or one that could not run: `kind` CheckNotRun): red in the notebook, and
    recorded as the cell's error (what nbgrader's Validate and `tfcourse check` read), without
    stopping Run All at this cell."""
    _settings.setdefault("failures", []).append(message)
    if _settings.get("raise"):
        raise kind(message)
    shell = _shell()
    if shell is not None and hasattr(shell, "_showtraceback"):
        try:            # an error output in the cell; the cell itself ends normally
            shell._showtraceback(kind, message, _red_lines(message))
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
        message, kind = None, CheckFailed
        try:
            _rule(args)
            function(*args, **kwargs)
        except _Problem as problem:
            message = str(problem)
        except _NotRun as missing:
            message, kind = _say("check.{name} could not run: {reason}", name=function.__name__,
                                 reason=str(missing)), CheckNotRun
        except Exception as error:     # noqa: BLE001 - a value the check did not foresee
            message = _say("the check could not finish ({kind}: {message}): look at what your "
                           "code returns", kind=type(error).__name__, message=error)
        if message is not None:
            _report_failure(message, kind)
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
            _not_run("the course's rule reads the code you ran, and outside a Jupyter kernel "
                     "there is none to read (run the notebook in Jupyter, or `tfcourse check` it)")
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
    if not names:
        return
    rules = examples.expected().get("rules")
    if not rules:
        _not_run("the course's rule is missing: {why}", why=_missing())
    cells = _history()
    if not cells:
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
def _missing() -> str:
    return examples.expected().get("missing") or _say(
        "the numbers the course's solution gives are not in this notebook (rebuild it with "
        "`tfcourse build`)")


def _wanted(name: str) -> dict:
    """The solution's numbers of example `name`; the check cannot run without them."""
    wanted = examples.expected().get("examples", {}).get(name)
    if not wanted:
        _not_run("the numbers of its fixed example {name!r} are missing: {why}", name=name,
                 why=_missing())
    return wanted


def _example(name: str, *stubs) -> dict:
    """Run example `name` on the student's stubs; what came out, by key."""
    return examples.registry()[name](*stubs, names=_wanted(name).get("names"))


def _differs(name: str, got: dict, keys=None) -> list[tuple[str, float]]:
    """The keys of example `name` whose values differ from the solution's, with the largest gap
    (CheckNotRun when the numbers are missing: a missing number is never a match)."""
    wanted = _wanted(name)
    out = []
    for key in keys or [k for k in wanted["values"] if k in got]:
        if key not in wanted["values"]:
            _not_run("the number {key!r} of its fixed example {name!r} is missing: {why}",
                     key=key, name=name, why=_missing())
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
    """The solution's value of `key` in example `name` (CheckNotRun when it is missing)."""
    data = _wanted(name).get("values", {}).get(key)
    if data is None:
        _not_run("the number {key!r} of its fixed example {name!r} is missing: {why}",
                 key=key, name=name, why=_missing())
    return examples.from_data(data)


def _module(what: str, cls, *args, names=None, **kwargs):
    """The student's module, its weights set by name to the example's fixed values, in eval mode;
    and the names set. `names` (the solution's, from visible_checks.json): fail when one is
    missing."""
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
        _fail("on the check's fixed example, {what} is not what the course's solution gives "
              "({gap}){hint}", what=_say(_OUTPUTS[key]) if key in _OUTPUTS else f"`{key}`",
              gap=_say("a different shape or type") if gap == math.inf else
              _say("largest difference {gap:.3g}", gap=gap),
              hint=(": " + _say(hint)) if hint else "")
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
