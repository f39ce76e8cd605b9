"""The course's rule against torch's ready-made attention, read from the student's source code.

Every cell the student wrote is read (answer cells, cells they added, helpers, top-level
statements), and the course's own set-up cells too, for what their imports mean (`F` is
torch.nn.functional). Each top-level statement is a unit; the units make a graph of top-level
names: a unit *binds* the names it defines or assigns, and those it changes (`X.forward = ...`,
`setattr(X, ...)`, `lst.append(...)`, a helper called with X that changes its argument); it
*reads* the global names its code uses. A stub breaks the rule when a unit that binds it, or one
it reaches through the names it reads, holds a flagged construct (docs/rules.md lists them):

- torch's ready-made attention (course.yaml `rules.forbidden`) or one of its relatives in torch
  (`torch._C._nn.scaled_dot_product_attention`, `torch.ops.aten._scaled_dot_product_attention_math`,
  `nn.modules.activation.MultiheadAttention`, ...), however it was imported or aliased;
- dynamic access that can hide a name from this reading (`getattr(F, "scaled_" + "dot...")`,
  `globals()`, `exec`, `importlib`, `sys.modules`, `__dict__`, `__wrapped__`, pickles, ctypes, ...).

Honest code is left alone: a scratch statement comparing with `F.scaled_dot_product_attention`
binds nothing a stub uses, and `getattr(self, "w_" + name)` looks only at the student's own object.
Another stub called by its name (a module's stub calling the attention function's stub, say)
is judged on its own: the checks call a stand-in in its place.

This is static analysis of a dynamic language: it reports what it can see, and flags the constructs
that could hide the rest. The sandbox's refusal (sandbox/refusal.py) enforces it at run time.
Nothing here recurses over the student's syntax tree, so no nesting depth can crash it.

The pieces: bindings.py builds the graph of top-level names, findings.py flags constructs,
this module charges them to the stubs; the tables are in sandbox/rulebook.py.
"""
from __future__ import annotations

import ast
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from .bindings import BindingGraph, Unit
from .findings import Detector, Finding


# -- what comes out ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Violation:
    """A finding charged to a stub, and the names through which the stub reaches it."""
    finding: Finding
    via: tuple[str, ...] = ()     # top-level names from the stub to the finding's unit
    everywhere: bool = False      # it was in code that can change anything (exec, a pickle...)
    change: str = ""              # what that code changes, and where ("torch.Tensor.attend
                                  # (cell 3, line 2)"), when it changes torch or Python

    def message(self) -> str:
        text = self.finding.describe()
        for name in reversed(self.via):
            text = f"uses {name}, which {text}"
        if self.everywhere:
            text = "may be changed by code that " + text
        if self.change:
            text += f", through the change to {self.change}"
        return text


@dataclass
class Result:
    """What `check` found: violations by top-level name, and the cells it could not read."""
    by_name: dict[str, list[Violation]] = field(default_factory=dict)
    unchecked: list[tuple[str, str]] = field(default_factory=list)   # (cell label, why)

    def get(self, name: str, default=()):
        return self.by_name.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def messages(self, names: Iterable[str]) -> list[str]:
        """`name message` for each violation of these names, without repeats."""
        seen: dict[str, None] = {}
        for name in names:
            for violation in self.by_name.get(name, ()):
                seen.setdefault(f"{name} {violation.message()}")
        return list(seen)


def violations(sources, forbidden: list[str], *, context: Iterable[str] = (),
               stubs: Iterable[str] | None = None, known_modules: Iterable[str] = ()
               ) -> dict[str, list[Violation]]:
    """Top-level name -> the violations charged to it (see `check`)."""
    return check(sources, forbidden, context=context, stubs=stubs,
                 known_modules=known_modules).by_name


def check(sources, forbidden: list[str], *, context: Iterable[str] = (),
          stubs: Iterable[str] | None = None, known_modules: Iterable[str] = ()) -> Result:
    """Read the student's cells against the rule.

    sources: the student's cells, in notebook order: source strings, or (label, source) pairs.
    forbidden: course.yaml `rules.forbidden` less `allowed` (Course.forbidden_names()).
    context: the course's own cells run before them (their imports give names their meaning).
    stubs: the names the checks grade; each is judged on its own code, so another stub it calls by
        name does not pass its violations on (the checks call a stand-in there). None: no stubs.
    known_modules: modules the course ships beside the notebook (course.yaml's `uses`).
    """
    cells = [(str(index + 1), item) if isinstance(item, str) else (str(item[0]), item[1])
             for index, item in enumerate(sources)]
    return _analyse(list(forbidden), set(stubs or ()), set(known_modules),
                    [("setup", text) for text in context], cells)




def _analyse(forbidden: list[str], stubs: set[str], known_modules: set[str],
             context: list[tuple[str, str]], cells: list[tuple[str, str]]) -> Result:
    """Build the binding graph of the cells, flag their constructs, charge them to the stubs."""
    result = Result()
    graph = BindingGraph(forbidden)
    for label, source in context:
        tree, _ = parse(source)
        if tree is not None:
            graph.add_units(label, tree, trusted=True)
    for label, source in cells:
        tree, why = parse(source)
        if tree is None:
            result.unchecked.append((label, why))
        else:
            graph.add_units(label, tree, trusted=False)
    detector = Detector(graph, forbidden, known_modules)
    if not detector.matchers:                   # everything allowed: no rule to break
        return result
    for unit in graph.units:
        graph.scan(unit)
    graph.name_modules()
    students = [unit for unit in graph.units if not unit.trusted]
    for unit in students:
        graph.record_param_mutations(unit)
    for unit in students:
        detector.inspect(unit)
    _charge(students, stubs, result)
    return result


# -- reading cells ---------------------------------------------------------------------------
def parse(source: str) -> tuple[ast.Module | None, str | None]:
    """The cell's syntax tree, or why there is none. Never raises."""
    try:
        return ast.parse(source), None
    except SyntaxError as error:
        return None, f"it is not valid Python ({error.msg}, line {error.lineno})"
    except (ValueError, TypeError) as error:
        return None, f"it is not valid Python ({error})"
    except (RecursionError, MemoryError):
        pass
    # Python builds the tree recursively: deeply nested code needs more stack than the default.
    # Try again on a thread with a large stack, where the student's process could not go deeper.
    box: list = []

    def deep():
        try:
            box.append(ast.parse(source))
        except BaseException as error:    # noqa: BLE001 - anything is "could not read it"
            box.append(error)
    limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(512 << 20)
        try:
            sys.setrecursionlimit(max(limit, 200_000))
            worker = threading.Thread(target=deep, daemon=True)
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(limit)
            threading.stack_size(old_size)
    except (RuntimeError, ValueError, MemoryError) as error:
        box.append(error)
    if box and isinstance(box[0], ast.Module):
        return box[0], None
    return None, "it is nested too deeply to be read"


def _charge(students: list[Unit], stubs: set[str], result: Result) -> None:
    """Each stub's violations: the findings of the units that bind or change it, or that
    it reaches through the names those units read."""
    binding: dict[str, list[Unit]] = {}
    for unit in students:
        for name in unit.binds | unit.mutates:
            binding.setdefault(name, []).append(unit)
    # Code that can change anything when it runs (exec, a pickle, a change to torch itself),
    # as the notebook loads or when a check calls it: what it holds, and what it reaches,
    # counts against every stub.
    everywhere = [unit for unit in students
                  if unit.everywhere or any(f.writes for f in unit.findings)]
    names = sorted(stubs) if stubs else sorted(binding)
    for name in names:
        found = _reach(name, stubs, binding, everywhere)
        if found:
            result.by_name[name] = found


def _change(unit: Unit) -> str:
    """What a unit that changes torch or Python changes, and where (its first such change)."""
    if not unit.changes:
        return ""
    what, line = unit.changes[0]
    cell = f"cell {unit.cell}" if unit.cell else "a cell"
    return f"{what} ({cell}, line {line})"


def _reach(stub: str, stubs: set[str], binding, everywhere) -> list[Violation]:
    out: dict[tuple, Violation] = {}
    seen_units: set[int] = set()
    seen_names = {stub}
    queue = deque((unit, (), False, "") for unit in binding.get(stub, ()))
    queue.extend((unit, (), True, _change(unit)) for unit in everywhere)
    while queue:
        unit, via, global_, change = queue.popleft()
        if id(unit) in seen_units:
            continue
        seen_units.add(id(unit))
        for finding in unit.findings:
            out.setdefault((finding.what, finding.cell, finding.line),
                           Violation(finding, via, global_, change))
        for name, only_called in unit.reads.items():
            if name in seen_names or name not in binding:
                continue
            if only_called and name in stubs and name != stub:
                continue                   # judged on its own: the checks call a stand-in
            seen_names.add(name)
            queue.extend((u, via + (name,), global_, change) for u in binding[name])
    places = {(v.finding.cell, v.finding.line) for v in out.values() if v.finding.api}
    kept = [v for v in out.values()
            if v.finding.api or (v.finding.cell, v.finding.line) not in places]
    return sorted(kept, key=lambda v: (v.everywhere, len(v.via), not v.finding.api,
                                       v.finding.cell, v.finding.line))
