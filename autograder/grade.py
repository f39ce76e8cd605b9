"""Grading one submission (one assignment's notebooks) in this, the trusted process.

`grade_submission` reads each notebook, starts the student's code in a sandbox, runs the course's
checks against it and returns a report made of plain data. It runs in a process of its own
(`python -m autograder`, see __main__.py), one per submission, so that nothing a submission does can
reach the others or the runner.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from tfcourse import notebook as nbtools
from tfcourse.course import Course

from . import checks  # noqa: F401  (registers the checks)
from . import rules
from .framework import REGISTRY, Context, describe_student_error, run_test
from .reference import reference
from .report import Note, NotebookReport, SubmissionReport, TestResult
from .sandbox.launch import Sandbox, SandboxConfig
from .sandbox.session import OutOfTime, ProcessEnded, StudentError, StudentSession, TimedOut
from .submission import load_program


def groups_of_notebook(course: Course, assignment_id: str, notebook_name: str):
    """The check groups whose test cells live in this notebook, in course.yaml's order."""
    assignment = course.assignment(assignment_id)
    source = nbtools.read(course.source_dir / assignment_id / notebook_name)
    ids = {nbtools.grade_id(cell) for cell in source.cells if nbtools.is_test(cell)}
    return [group for group in assignment.checks if group.id in ids]


def _zero(group, template: str, params: dict | None = None) -> list[TestResult]:
    return [TestResult(f"{group.id}.{name}", 0.0, points, template, params or {})
            for name, points in group.tests.items()]


def grade_notebook(course: Course, assignment_id: str, notebook_name: str, path: Path,
                   config: SandboxConfig, *, skip: frozenset = frozenset(),
                   prestarted: Sandbox | None = None) -> NotebookReport:
    """Grade one notebook; `prestarted` is a sandbox already started with `config`."""
    started = time.monotonic()
    report = NotebookReport(notebook_name)
    assignment = course.assignment(assignment_id)
    groups = groups_of_notebook(course, assignment_id, notebook_name)
    program = load_program(course.source_dir / assignment_id / notebook_name, path,
                           course.limit("notebook_mb"))
    report.notes = program.notes
    if not program.readable:
        if prestarted is not None:
            prestarted.close()
        for group in groups:
            report.tests += _zero(group, "not graded: the notebook could not be read")
        return report

    static = rules.check([(cell.label, cell.source) for cell in program.cells if cell.from_student],
                         course.forbidden_names(),
                         context=[cell.source for cell in program.cells if not cell.from_student],
                         stubs={stub for group in assignment.checks for stub in group.stubs},
                         known_modules=assignment.uses)
    if static.unchecked:            # not valid Python: those cells fail to run as well
        report.extra["rules_unchecked"] = [{"cell": label, "why": why}
                                           for label, why in static.unchecked]
    # The time for the student's code starts now: reading it (above) is the grader's own time.
    deadline = time.monotonic() + course.limit("submission_seconds")
    session = StudentSession(program.cells, config, course.forbidden_names(),
                             course.limit("cell_seconds"), deadline, prestarted=prestarted)
    ref = reference(course, assignment_id)
    context = Context(session, ref, course, assignment, course.limit("check_seconds"))
    context.extra = report.extra
    try:
        session.start()
        report.sandbox = session._sandbox.mode if session._sandbox else ""
        if session.warning:
            report.notes.append(Note("grader: {warning}", {"warning": session.warning}))
        for group in groups:
            report.tests += _grade_group(context, session, group, static, skip)
    except OutOfTime:
        done = {test.id for test in report.tests}
        for group in groups:
            for test in _zero(group, "not graded: the time for this notebook "
                                     "({seconds:.0f} s) ran out",
                              {"seconds": course.limit("submission_seconds")}):
                if test.id not in done:
                    report.tests.append(test)
    except (ProcessEnded, TimedOut) as error:           # could not even start the sandbox
        report.notes.append(Note("grader: the student's process could not be started ({error})",
                                 {"error": str(error)}, "error"))
        done = {test.id for test in report.tests}
        report.tests += [t for g in groups for t in _zero(g, "not graded: the grader could not "
                                                              "run this notebook")
                         if t.id not in done]
    finally:
        session.close()
    report.cells = [asdict(outcome) for outcome in session.outcomes]
    report.notes += _cell_notes(session)
    if session.output_tail.strip():
        report.extra["output_tail"] = session.output_tail[-2000:]
    report.peak_memory_mb = round(session.peak_rss_kb / 1024, 1)
    report.seconds = round(time.monotonic() - started, 2)
    return report


def _cell_notes(session: StudentSession) -> list[Note]:
    """What went wrong while the student's cells ran, and what the grader did about it."""
    notes = []
    for outcome in session.outcomes:
        if outcome.timed_out:
            notes.append(Note("cell {label} did not finish within {seconds:.0f} s (an endless "
                              "loop?); it was left out and the rest was graded",
                              {"label": outcome.label, "seconds": session.cell_seconds}, "error"))
        elif outcome.ended_process:
            notes.append(Note("cell {label} ended the grading process: it {how}; it was left out "
                              "and the rest was graded",
                              {"label": outcome.label, "how": outcome.ended_process}, "error"))
        elif not outcome.ok and outcome.error:
            notes.append(Note("cell {label} raised {kind}: {message}",
                              {"label": outcome.label, "kind": outcome.error.get("type"),
                               "message": str(outcome.error.get("message"))[:300]}))
    if session.output_dropped:
        notes.append(Note("your code printed more than {kb} KB of output; the rest ({mb:.1f} MB) "
                          "was dropped", {"kb": session.config.output_kb,
                                          "mb": session.output_dropped / 1048576}))
    return notes


def _grade_group(context, session, group, static, skip) -> list[TestResult]:
    results = []
    try:
        kinds = context.request("names", names=list(group.stubs))
    except StudentError as error:            # the student's objects broke even this question
        template, params = describe_student_error(error)
        return _zero(group, template, params)
    if not isinstance(kinds, dict):
        kinds = {}
    missing = [name for name in group.stubs if kinds.get(name, "missing") == "missing"]
    if missing:
        return _zero(group, "{names} is not defined: was its cell deleted, renamed or left "
                            "with an error?", {"names": ", ".join(missing)})
    broken = static.messages(group.stubs)
    if broken:
        shown = "; ".join(broken[:3]) + (f"; and {len(broken) - 3} more" * (len(broken) > 3))
        return _zero(group, "{reasons}; the course's rules do not allow this here, so write the "
                            "attention yourself",
                     {"stubs": ", ".join(group.stubs), "reasons": shown})
    session.tripped.clear()
    for name, points in group.tests.items():
        test_id = f"{group.id}.{name}"
        if test_id in skip:
            results.append(TestResult(test_id, 0.0, points, "skipped"))
            continue
        function = REGISTRY[(context.assignment.id, test_id)]
        results.append(run_test(function, context, test_id, points))
    if session.tripped:
        return _zero(group, "{stubs} called {apis} while being checked, which the course's rules "
                            "do not allow here",
                     {"stubs": ", ".join(group.stubs), "apis": ", ".join(sorted(session.tripped))})
    return results


def grade_submission(course: Course, submission: Path, assignment_id: str | None,
                     notebooks: dict[str, Path], config: SandboxConfig | None, *,
                     skip=frozenset(), prestarted: Sandbox | None = None) -> SubmissionReport:
    """Grade every notebook of one submission (as found by `find_notebooks`); `prestarted` is a
    sandbox already started with `config`, for the first notebook."""
    started = time.monotonic()
    name = submission.name if submission.is_dir() else submission.stem
    if assignment_id is None:
        expected = ", ".join(n for a in course.assignments for n in a.notebooks)
        report = SubmissionReport("", name)
        report.notes.append(Note("no notebook of this course was found in {name} (expected one "
                                 "of: {expected})", {"name": submission.name,
                                                     "expected": expected}, "error"))
        return report
    report = SubmissionReport(assignment_id, name)
    for notebook_name, path in notebooks.items():
        report.notebooks.append(grade_notebook(course, assignment_id, notebook_name, path, config,
                                               skip=frozenset(skip), prestarted=prestarted))
        prestarted = None
    report.seconds = round(time.monotonic() - started, 2)
    return report
