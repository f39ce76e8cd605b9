"""Grading one submission (one assignment's notebooks) in this, the trusted process.

`grade_submission` reads each notebook, starts the student's code in a sandbox, runs the course's
checks against it and returns a report made of plain data. `python -m autograder.grade` does the
same for one submission and writes the report as JSON; the batch runner starts one such process per
submission, so that nothing a submission does can reach the others or the runner.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from tfcourse import notebook as nbtools
from tfcourse.course import Course, load_course

from . import checks  # noqa: F401  (registers the checks)
from . import rules
from .framework import REGISTRY, Context, run_test
from .reference import helper_files, reference
from .report import Note, NotebookReport, SubmissionReport, TestResult
from .sandbox.launch import SandboxConfig, set_subreaper
from .sandbox.session import OutOfTime, ProcessEnded, StudentSession, TimedOut
from .submission import load_program


def groups_of_notebook(course: Course, assignment_id: str, notebook_name: str):
    """The check groups whose test cells live in this notebook, in course.yaml's order."""
    assignment = course.assignment(assignment_id)
    source = nbtools.read(course.source_dir / assignment_id / notebook_name)
    ids = {nbtools.grade_id(cell) for cell in source.cells if nbtools.is_test(cell)}
    return [group for group in assignment.checks if group.id in ids]


def sandbox_config(course: Course, assignment_id: str, threads: int,
                   hide: list[Path]) -> SandboxConfig:
    return SandboxConfig(
        isolation=str(course.sandbox.get("isolation", "auto")),
        user=str(course.sandbox.get("user", "nobody")),
        memory_mb=int(course.limit("memory_mb")),
        output_kb=int(course.limit("output_kb")),
        threads=threads,
        hide=[course.root, *hide],
        files=helper_files(course, assignment_id),
    )


def _zero(group, template: str, params: dict | None = None) -> list[TestResult]:
    return [TestResult(f"{group.id}.{name}", 0.0, points, template, params or {})
            for name, points in group.tests.items()]


def grade_notebook(course: Course, assignment_id: str, notebook_name: str, path: Path, *,
                   threads: int = 1, skip: frozenset = frozenset(), hide=()) -> NotebookReport:
    started = time.monotonic()
    report = NotebookReport(notebook_name)
    assignment = course.assignment(assignment_id)
    groups = groups_of_notebook(course, assignment_id, notebook_name)
    program = load_program(course.source_dir / assignment_id / notebook_name, path,
                           course.limit("notebook_mb"))
    report.notes = program.notes
    if not program.readable:
        for group in groups:
            report.tests += _zero(group, "not graded: the notebook could not be read")
        return report

    deadline = time.monotonic() + course.limit("submission_seconds")
    config = sandbox_config(course, assignment_id, threads, list(hide))
    session = StudentSession(program.cells, config, course.forbidden_names(),
                             course.limit("cell_seconds"), deadline)
    student_sources = [cell.source for cell in program.cells if cell.from_student]
    static = rules.violations(student_sources, course.forbidden_names())
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
    for outcome in session.outcomes:
        if outcome.ended_process:
            report.notes.append(Note("the cell {label} ended the grading process ({how}); it was "
                                     "left out and the rest was graded",
                                     {"label": outcome.label, "how": outcome.ended_process},
                                     "error"))
        elif not outcome.ok and outcome.error:
            report.notes.append(Note("the cell {label} raised {kind}: {message}",
                                     {"label": outcome.label, "kind": outcome.error.get("type"),
                                      "message": str(outcome.error.get("message"))[:300]}))
    if session.output_tail.strip():
        report.extra["output_tail"] = session.output_tail[-2000:]
    report.peak_memory_mb = round(session.peak_rss_kb / 1024, 1)
    report.seconds = round(time.monotonic() - started, 2)
    return report


def _grade_group(context, session, group, static, skip) -> list[TestResult]:
    results = []
    kinds = context.request("names", names=list(group.stubs))
    missing = [name for name in group.stubs if kinds.get(name) == "missing"]
    if missing:
        return _zero(group, "{names} is not defined: was its cell deleted, renamed or left "
                            "with an error?", {"names": ", ".join(missing)})
    broken = sorted({api for stub in group.stubs for api in static.get(stub, ())})
    if broken:
        return _zero(group, "{stubs} uses {apis}, which the course's rules do not allow here",
                     {"stubs": ", ".join(group.stubs), "apis": ", ".join(broken)})
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


def find_notebooks(course: Course, submission: Path, assignment_id: str | None):
    """(assignment id, {notebook name: path}) for a folder or a single notebook."""
    if submission.is_file():
        candidates = {submission.name: submission}
    elif submission.is_dir():
        candidates = {p.name: p for p in sorted(submission.rglob("*.ipynb"))
                      if ".ipynb_checkpoints" not in p.parts}
    else:
        candidates = {}
    if assignment_id is None:
        scores = [(sum(name in candidates for name in a.notebooks), a.id) for a in course.assignments]
        best = max(scores)
        if best[0] == 0:
            return None, candidates
        assignment_id = best[1]
    assignment = course.assignment(assignment_id)
    if submission.is_file() and len(assignment.notebooks) == 1:
        found = {assignment.notebooks[0]: submission}
    else:
        found = {name: candidates.get(name, (submission if submission.is_dir() else
                                             submission.parent) / name)
                 for name in assignment.notebooks}
    return assignment_id, found


def grade_submission(course: Course, submission: Path, *, assignment_id: str | None = None,
                     threads: int = 1, skip=frozenset(), hide=()) -> SubmissionReport:
    started = time.monotonic()
    assignment_id, notebooks = find_notebooks(course, submission, assignment_id)
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
        report.notebooks.append(grade_notebook(course, assignment_id, notebook_name, path,
                                               threads=threads, skip=frozenset(skip),
                                               hide=[submission, *hide]))
    report.seconds = round(time.monotonic() - started, 2)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Grade one submission (trusted process).")
    parser.add_argument("submission", type=Path)
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--assignment")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--hide", nargs="*", default=[], type=Path)
    options = parser.parse_args(argv)
    set_subreaper()
    course = load_course(options.course)
    try:
        report = grade_submission(course, options.submission, assignment_id=options.assignment,
                                  threads=options.threads, skip=frozenset(options.skip),
                                  hide=options.hide)
        data = report.to_dict()
    except Exception:                        # a grader bug: say so, score nothing
        data = SubmissionReport(options.assignment or "", options.submission.name,
                                error=traceback.format_exc()).to_dict()
    temporary = options.out.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, default=str), encoding="utf-8")
    os.replace(temporary, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
