"""How a check is written and run.

A check is a function of a `Context`, registered under its assignment and test id (`"sdpa.values"`);
its points come from course.yaml. It asks the student's process for outputs on inputs it chose,
computes what the reference gives in this (trusted) process, and raises `Fail` with a message in the
course's words when they differ. Student errors, hangs and crashes become failures of that check
only; the next check starts the student's process again if it had to go.
"""
from __future__ import annotations

import contextlib
import math
import time

import torch

from .report import TestResult
from .sandbox import standins
from .sandbox.session import OutOfTime, ProcessEnded, StudentError, StudentSession, TimedOut

REGISTRY: dict[tuple[str, str], "callable"] = {}


def check(assignment_id: str, test_id: str):
    """Register a check: `@check("01-attention", "sdpa.values")`."""
    def register(function):
        REGISTRY[(assignment_id, test_id)] = function
        return function
    return register


class Fail(Exception):
    """A check failed; the message is an English template filled with `params`."""

    def __init__(self, template: str, **params):
        super().__init__(template)
        self.template, self.params = template, params


# -- checking values -----------------------------------------------------------------------------
def as_tensor(value, what: str) -> torch.Tensor:
    if isinstance(value, dict) and "$unsendable" in value:
        raise Fail("{what} should be a tensor, not {kind}", what=what, kind=value["$unsendable"])
    if not isinstance(value, torch.Tensor):
        raise Fail("{what} should be a tensor, not {kind}", what=what, kind=type(value).__name__)
    return value


def expect_shape(value, shape, what: str) -> torch.Tensor:
    tensor = as_tensor(value, what)
    if tuple(tensor.shape) != tuple(shape):
        raise Fail("{what}: shape {got}, expected {expected}", what=what,
                   got=list(tensor.shape), expected=list(shape))
    return tensor


def close(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> bool:
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected.shape):
        return False
    if got.dtype == torch.bool or expected.dtype == torch.bool:
        return torch.equal(got.bool(), expected.bool())
    got, expected = got.double(), expected.double()
    if torch.isnan(got).any() != torch.isnan(expected).any():
        return False
    return bool(torch.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True))


def largest_gap(got: torch.Tensor, expected: torch.Tensor) -> float:
    try:
        return float((got.double() - expected.double()).abs().nan_to_num(math.inf).max())
    except (RuntimeError, TypeError):
        return math.inf


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


# -- what a check works with ---------------------------------------------------------------------
class Handle:
    """A module living in the student's process, known here by name."""

    def __init__(self, context: "Context", name: str, info: dict | None = None):
        self.context, self.name, self.info = context, name, info or {}

    @property
    def parameters(self) -> dict[str, list[int]]:
        return {name: shape for name, shape in self.info.get("params", [])}

    def count(self) -> int:
        return sum(math.prod(shape) for shape in self.parameters.values())

    def load(self, state: dict) -> tuple[list[str], list[str]]:
        """Load reference weights by name: (missing parameter names, unexpected names)."""
        result = self.context.request("load", handle=self.name, state=state)
        params = set(self.parameters)
        missing = [name for name in result["missing"] if name in params]
        return missing, list(result["unexpected"])

    def run(self, *args, method: str = "__call__", train: bool = False, seed: int | None = None,
            swap_globals: dict | None = None, timeout: float | None = None, **kwargs):
        return self.context.request("method", timeout=timeout, handle=self.name, method=method,
                                    args=list(args), kwargs=kwargs, train=train, seed=seed,
                                    swap_globals=swap_globals)

    def swap(self, path: str, probe: "Handle") -> None:
        try:
            self.context.request("swap", handle=self.name, path=path, probe=probe.name)
        except StudentError:
            raise Fail("the module has no submodule `{path}`, a name the assignment asks for",
                       path=path) from None

    def grad(self, *args, weights, method: str = "__call__") -> dict:
        """Gradients of sum(output * weights) for each named parameter (eval mode)."""
        return self.context.request("grad", handle=self.name, args=list(args), weights=weights,
                                    method=method)

    def calls(self) -> list[dict]:
        return self.context.request("calls", handle=self.name)

    def state(self) -> dict:
        return self.context.request("state", handle=self.name)

    def ref(self) -> dict:
        return {"$handle": self.name}


class Context:
    """What a check function receives: the student's process, the reference and the course."""

    def __init__(self, session: StudentSession, reference: dict, course, assignment,
                 check_seconds: float):
        self.session, self.ref, self.course, self.assignment = session, reference, course, assignment
        self.check_seconds = check_seconds
        self.atol = float(course.tolerance["atol"])
        self.rtol = float(course.tolerance["rtol"])
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
        return self.session.request(op, timeout or self.check_seconds, **args)

    def call(self, function: str, *args, swap_globals: dict | None = None, seed=None,
             timeout: float | None = None, **kwargs):
        return self.request("call", timeout=timeout, fn=function, args=list(args), kwargs=kwargs,
                            swap_globals=swap_globals, seed=seed)

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
        return Handle(self, name), standins.probe(kind, **options)

    def global_calls(self, name: str) -> list[dict]:
        """Calls a global stand-in (swapped in with swap_globals) received."""
        return self.request("calls", handle=name)

    def reference_module(self, cls: str, *args, seed: int = 0, **kwargs) -> torch.nn.Module:
        torch.manual_seed(seed)
        return self.ref[cls](*args, **kwargs).eval()

    def expect_close(self, got, expected: torch.Tensor, what: str, hint: str = "") -> None:
        got = expect_shape(got, tuple(expected.shape), what)
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
    if where and line:
        return ("your code raised {kind} ({where}, line {line}): {message}",
                {**params, "where": where.strip("<>"), "line": line})
    return "your code raised {kind}: {message}", params


def run_test(function, context: Context, test_id: str, max_points: float) -> TestResult:
    started = time.monotonic()
    result = TestResult(test_id, 0.0, max_points)
    try:
        function(context)
        result.points = max_points
    except Fail as failure:
        result.template, result.params = failure.template, failure.params
    except StudentError as error:
        result.template, result.params = describe_student_error(error)
    except TimedOut as error:
        result.template = "took longer than {seconds:.0f} s (an endless loop, or very slow code?)"
        result.params = {"seconds": error.seconds}
    except ProcessEnded as error:
        if error.memory:
            result.template = "used more memory than allowed ({description})"
        else:
            result.template = "your code ended the grading process ({description})"
        result.params = {"description": error.description}
    except OutOfTime:
        raise
    except Exception as error:              # the grader could not make sense of what came back
        result.template = "could not be checked ({kind}: {message})"
        result.params = {"kind": type(error).__name__, "message": str(error)[:300]}
        result.internal = True
    result.seconds = time.monotonic() - started
    return result
