"""The visible checks a notebook carries: the course's checks and the numbers they compare with.

Each fixed example of the course's visible checks (its `visible/` folder: a function of stubs
marked with `@examples.example`) runs on the reference solution of the assignment whose checks
grade those stubs; what it returns is written, rounded, with what the visible checks need of
course.yaml's rule, the checks' modules and their messages, as one payload (visible.py says what it
holds). `tfcourse build` writes it into `source/<assignment>/visible_checks.json`, which nbgrader
copies into the release beside the notebook, and into the metadata of the assignment's source
notebooks, which nbgrader keeps in the released ones: the notebook alone is enough. Students get
the checks and numbers, never the solution. `build --check` compares both.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

from .. import notebook
from ..course import Assignment, Course
from ..student import checking, examples, visible


def _stubs(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "names"]


def _stubs_of(assignment: Assignment) -> set[str]:
    return {stub for group in assignment.checks for stub in group.stubs}


def _calls(course: Course, assignment: Assignment) -> list[str]:
    """The `check.X` that the assignment's test cells call, in the notebooks' order."""
    import re

    from ..source import assignment_source

    called = []
    for source in assignment_source(course, assignment.id).notebooks:
        for cell in source.nb.cells:
            if notebook.is_test(cell):
                for name in re.findall(r"\bcheck\.(\w+)\s*\(", notebook.text(cell)):
                    called += [name] * (name not in called)
    return called


def payload(course: Course, assignment: Assignment) -> dict:
    """What an assignment's notebooks carry of the visible checks (visible.py)."""
    from ..submission.reference import reference

    code = visible.course_payload(course.root)
    loaded = visible.Bundle(code, visible.FOLDER)
    namespace = reference(course, assignment.id)
    found = {}
    with checking.raising():
        for name, function in sorted(loaded.examples.items()):
            stubs = _stubs(function)
            if not set(stubs) <= _stubs_of(assignment):
                continue
            got = function(*(namespace[stub] for stub in stubs))
            names = got.pop("names", None)
            got.pop("called", None)
            found[name] = {"names": names,
                           "values": {key: examples.as_data(value) for key, value in got.items()}}
    rules = {"forbidden": course.forbidden_names(),
             "stubs": sorted({stub for each in course.assignments for stub in _stubs_of(each)}),
             "known_modules": sorted(assignment.uses)}
    missing = [name for name in _calls(course, assignment) if not hasattr(loaded.entry, name)]
    if missing:
        raise LookupError(f"{assignment.id}: the test cells call check." + ", check.".join(missing)
                          + f", which {visible.FOLDER}/{visible.ENTRY}.py does not define")
    return {"about": "Written by `tfcourse build` from the course's visible/ folder and its "
                     "solution: the visible checks and the numbers they compare with. Do not edit.",
            "checks": _calls(course, assignment), "rules": rules, "examples": found, **code}


def example_text(course: Course, assignment: Assignment, data: dict | None = None) -> str:
    """The text of an assignment's visible_checks.json."""
    data = payload(course, assignment) if data is None else data
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def payloads(course: Course) -> dict[str, dict]:
    """Assignment id -> the payload its notebooks carry."""
    return {assignment.id: payload(course, assignment) for assignment in course.assignments}


def example_files(course: Course, found: dict[str, dict] | None = None) -> dict[Path, str]:
    """Path -> text of each assignment's visible_checks.json in source/."""
    found = payloads(course) if found is None else found
    return {course.source_dir / assignment.id / examples.EXPECTED_NAME:
            example_text(course, assignment, found[assignment.id])
            for assignment in course.assignments}
