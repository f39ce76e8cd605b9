"""visible_checks.json: the numbers the visible checks compare with, from the course's solution.

Each fixed example of tfcourse/student/examples.py (a function of stubs) runs on the reference
solution of the assignment whose checks grade those stubs; what it returns is written, rounded, into
`source/<assignment>/visible_checks.json` with what the visible checks need of course.yaml's rule.
nbgrader copies the file into the release beside the notebook, where the checks read it: students
get numbers, never the solution. `tfcourse build` writes the files; `build --check` compares them.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

from ..course import Assignment, Course
from ..student import checks
from ..student import examples


def _stubs(function) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "names"]


def _stubs_of(assignment: Assignment) -> set[str]:
    return {stub for group in assignment.checks for stub in group.stubs}


def example_text(course: Course, assignment: Assignment) -> str:
    """The text of an assignment's visible_checks.json."""
    from ..submission.reference import reference

    namespace = reference(course, assignment.id)
    found = {}
    with checks.raising():
        for name, function in sorted(examples.EXAMPLES.items()):
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
    data = {"about": "Written by `tfcourse build` from the course's solution: the numbers the "
                     "visible checks compare with. Do not edit.",
            "rules": rules, "examples": found}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def example_files(course: Course) -> dict[Path, str]:
    """Path -> text of each assignment's visible_checks.json in source/."""
    return {course.source_dir / assignment.id / examples.EXPECTED_NAME:
            example_text(course, assignment) for assignment in course.assignments}
