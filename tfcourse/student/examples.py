"""Fixed small examples for the visible checks: a fixed input, fixed weights, the expected numbers.

Each example is a function of the student's stub (the course's, in its visible/ folder, marked with
`@example(name)`) that runs it on inputs and weights made by a formula here (no random generator,
so every machine and torch version makes the same numbers) and returns what came out, by name.
`tfcourse build` runs the same functions on the course's solution and writes what they return into
each notebook's metadata and the visible_checks.json beside it (tfcourse/build/examples.py):
students get the numbers, never the solution. A visible check runs the example on the student's
stub and compares with the numbers of the notebook it runs for (visible.py makes them active).

The numbers come with what the visible checks need of course.yaml to apply the course's rule
against torch's ready-made attention as the grader does: the forbidden names, the stubs and the
helper modules.
"""
from __future__ import annotations

import contextlib
import json
import math
import zlib
from pathlib import Path

import torch

EXPECTED_NAME = "visible_checks.json"
EXAMPLES: dict[str, object] = {}          # example name -> function(stub, ...) -> {name: value}
_active: dict[str, object] = {"data": None, "registry": None}


def example(name: str):
    """Marks a function of the course's visible checks as the fixed example `name`."""
    def register(function):
        function.example_name = name
        EXAMPLES[name] = function
        return function
    return register


def registry() -> dict:
    """Example name -> function, of the visible checks running now (else every one loaded)."""
    return _active["registry"] if _active["registry"] is not None else EXAMPLES


@contextlib.contextmanager
def active(data: dict, examples: dict | None = None):
    """The numbers (and example functions) that the checks run in here compare with."""
    before = dict(_active)
    _active.update(data=data, registry=examples)
    try:
        yield
    finally:
        _active.update(before)


def expected(folder: str | Path | None = None) -> dict:
    """The numbers the checks compare with: those made active (see `active`); or, given a
    folder, its visible_checks.json; {} when there are none (the checks then say they could not
    run: they never pass without them)."""
    if folder is None:
        return _active["data"] if isinstance(_active["data"], dict) else {}
    try:
        data = json.loads((Path(folder) / EXPECTED_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


# -- numbers by formula ----------------------------------------------------------------------------
def pattern(name: str, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """A fixed tensor for `name`: a sine wave whose frequency and phase come from the name."""
    seed = zlib.crc32(name.encode("utf-8"))
    count = math.prod(shape)
    step = 0.61 + (seed % 89) / 97
    index = torch.arange(count, dtype=torch.float64)
    values = torch.sin(index * step + (seed % 31)) + 0.3 * torch.cos(index * 0.37 * step + 1.0)
    return (values * scale).reshape(shape).float()


def fill(module: torch.nn.Module, names) -> list[str]:
    """Set each of `names` (state_dict keys) in `module` to its fixed pattern; the names it lacks.

    Weights get a scale of 1/sqrt(fan_in), LayerNorm weights sit near 1, biases are small."""
    state = module.state_dict(keep_vars=True)
    missing = [name for name in names if name not in state]
    with torch.no_grad():
        for name in names:
            tensor = state.get(name)
            if tensor is None or not tensor.is_floating_point():
                continue
            shape = tuple(tensor.shape)
            if len(shape) >= 2:
                value = pattern(name, *shape, scale=shape[-1] ** -0.5)
            elif "norm" in name and name.endswith("weight"):
                value = 1 + pattern(name, *shape, scale=0.2)
            else:
                value = pattern(name, *shape, scale=0.1)
            if value.shape == tensor.shape:
                tensor.copy_(value)
    return missing


def parameter_names(module: torch.nn.Module) -> list[str]:
    return [name for name, value in module.state_dict(keep_vars=True).items()
            if value.is_floating_point()]


@contextlib.contextmanager
def global_swapped(function, name: str, value):
    """`name` in the globals of `function` (a notebook's namespace) set to `value` for a while."""
    namespace = getattr(function, "__globals__", None)
    if namespace is None:
        yield
        return
    had, old = name in namespace, namespace.get(name)
    namespace[name] = value
    try:
        yield
    finally:
        if had:
            namespace[name] = old
        else:
            namespace.pop(name, None)


@contextlib.contextmanager
def attribute_swapped(owner, name: str, value):
    """`owner.name` set to `value` on the instance for a while."""
    had = name in vars(owner)
    old = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


def as_data(value):
    """A value as JSON: tensors as nested lists of rounded floats (or ints, or bools)."""
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return {"shape": list(value.shape), "bool": value.reshape(-1).tolist()}
        if not value.is_floating_point():
            return {"shape": list(value.shape), "int": value.reshape(-1).tolist()}
        flat = value.detach().double().reshape(-1).tolist()
        return {"shape": list(value.shape), "float": [float(f"{x:.7g}") for x in flat]}
    if isinstance(value, float):
        return float(f"{value:.9g}")
    return value


def from_data(data):
    if isinstance(data, dict) and "shape" in data:
        for kind, dtype in (("float", torch.float64), ("int", torch.long), ("bool", torch.bool)):
            if kind in data:
                return torch.tensor(data[kind], dtype=dtype).reshape(data["shape"])
    return data
