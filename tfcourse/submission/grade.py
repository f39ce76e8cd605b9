"""Grading one submission in this, the trusted process.

`grade_submission` runs pytest on the assignment's hidden graders (`autograder/test_*.py` of the
course folder) with the `Grading` of plugin.py and a `SubmissionRun` of run.py, and returns the
report made of plain data. It runs in a process of its own (`python -m tfcourse.submission`, see
__main__.py), one per submission, so that nothing a submission does can reach the others or the
runner.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tfcourse.course import Course

from ..sandbox.launch import Sandbox, SandboxConfig
from .plugin import Grading
from .report import Note, SubmissionReport
from .run import SubmissionRun


# -- one submission: a pytest session ------------------------------------------------------------
PYTEST_ARGS = (
    "-q", "--no-header", "-rN",
    "-s",                       # no capture: the student's processes keep the grader's own output
    "--assert=plain",           # graders raise Fail; nothing to rewrite
    "-p", "no:cacheprovider",   # nothing written into the course folder
    "-p", "no:stepwise",
    # pytest's plugins that grading does not use: each costs time at every submission (these two
    # run gc.collect() at the end, a third of a second each with torch loaded)
    "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:doctest",
    "-p", "no:junitxml", "-p", "no:pastebin", "-p", "no:logging", "-p", "no:legacypath",
    "-p", "no:setuponly", "-p", "no:setupplan",
)


# What may change a pytest session from the environment: not the trusted grader's.
PYTEST_VARIABLES = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DEBUG", "PYTEST_THEME",
                    "PYTEST_THEME_MODE", "PYTEST_DEBUG_TEMPROOT", "PYTEST_VERSION")


def pytest_arguments(course: Course, assignment) -> list[str]:
    """pytest's command line for one assignment's graders in the trusted process: the course's
    own pytest settings (for the project's tests) do not apply, no third-party plugin loads, and
    no conftest.py is read from outside autograder/."""
    graders = course.root / "autograder"
    return [str(graders / assignment.graders), "--rootdir", str(course.root), "-c", os.devnull,
            "--confcutdir", str(graders), *PYTEST_ARGS, "-p", "tfcourse.submission.plugin"]


def grade_submission(course: Course, submission: Path, assignment_id: str | None,
                     notebooks: dict[str, Path], config: SandboxConfig | None, *,
                     skip=frozenset(), prestarted: Sandbox | None = None) -> SubmissionReport:
    """Grade every notebook of one submission (as found by `find_notebooks`) with the course's
    pytest graders; `prestarted` is a sandbox already started with `config`, for the first
    notebook."""
    import pytest

    name = submission.name if submission.is_dir() else submission.stem
    if assignment_id is None:
        expected = ", ".join(n for a in course.assignments for n in a.notebooks)
        report = SubmissionReport("", name)
        report.notes.append(Note(
            "not graded: no notebook of this course was found in {name} (expected one of: "
            "{expected}), and no notebook's cells are those of an assignment; if it holds one, "
            "say which: tfcourse grade --assignment ID (one of: {ids})",
            {"name": submission.name, "expected": expected,
             "ids": ", ".join(a.id for a in course.assignments)}, "error"))
        return report
    assignment = course.assignment(assignment_id)
    run = SubmissionRun(course, assignment, name, notebooks, config, skip=frozenset(skip),
                        prestarted=prestarted)
    grading = Grading(course, runs={assignment.id: run})
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"     # only our plugin in the trusted grader
    for name in PYTEST_VARIABLES:
        os.environ.pop(name, None)
    sys.dont_write_bytecode = True                         # nothing written into autograder/
    code = pytest.main(pytest_arguments(course, assignment), plugins=[grading.preset()])
    report = run.finish()
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        report.error = grading.problem or f"pytest ended with {pytest.ExitCode(code).name}"
    return report
