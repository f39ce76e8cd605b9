"""Reports that score nothing and still list every check of the assignment: the report of a
grader that failed, and of a submission that is not a file or a folder (a link, a pipe).

The grader writes them (__main__.py), and so does the runner when the grader itself could not
(batch/child.py): whatever happens, a submission ends with a report whose maximum is its
assignment's, and a note that says why nothing was scored.
"""
from __future__ import annotations

from pathlib import Path

from tfcourse.course import Course, CourseError
from tfcourse.source import groups_by_notebook

from .files import KIND_WORDS, Refused, kind_inside, split_submission
from .finding import find_notebooks
from .job import Job
from .report import Note, NotebookReport, SubmissionReport, TestResult


def zero_report(course: Course, assignment_id: str | None, name: str, template: str,
                params: dict | None = None, error: str | None = None, skip=()
                ) -> SubmissionReport:
    """A report that scores nothing and lists every check of the assignment (so that its maximum
    is the assignment's, less the checks in `skip`, not graded) with `template` as the reason; no
    checks when the assignment is None."""
    report = SubmissionReport(assignment_id or "", name, error=error)
    if assignment_id:
        for notebook, groups in groups_by_notebook(course, assignment_id).items():
            report.notebooks.append(NotebookReport(notebook, tests=[
                TestResult(test_id, 0.0, points, "not graded: skipped", graded=False)
                if test_id in skip else TestResult(test_id, 0.0, points, template,
                                                   dict(params or {}))
                for group in groups for test_id, points in zip(group.test_ids(),
                                                               group.tests.values())]))
    return report


def assignment_of(course: Course, submission: Path, within: Path | None) -> str | None:
    """The assignment told from the names of a submission's notebooks (no file is read)."""
    try:
        return find_notebooks(course, submission, None, within)[0]
    except (Refused, OSError, ValueError, CourseError):
        return None


def failure_report(course: Course, submission: Path, assignment: str | None, problem: str,
                   within: Path | None = None, skip=()) -> SubmissionReport:
    """The report of a submission whose grader failed: every check of its assignment, at 0
    (those in `skip`: not graded); the assignment, when not given, told by its notebooks' names."""
    known = assignment or assignment_of(course, submission, within)
    return grader_failed(course, submission.name, known, problem, skip)


def job_failure_report(course: Course, job: Job, assignment: str | None, problem: str,
                       name: str | None = None) -> SubmissionReport:
    """`failure_report` for a grading job: the notebooks' names told the job's assignment when
    they were listed, so none is looked for again (unless the job lists none). `name`: the
    submission's, as its caller named it (default: the job's)."""
    known = assignment
    if known is None and job.notebooks is None:
        known = assignment_of(course, job.submission, job.within)
    return grader_failed(course, job.submission.name if name is None else name, known, problem,
                         job.skip)


def grader_failed(course: Course, name: str, known: str | None, problem: str, skip=()
                  ) -> SubmissionReport:
    """The report of `failure_report`, for the assignment `known` (None: not known)."""
    report = zero_report(course, known, name, "not graded: {reason}",
                         {"reason": "the grader failed"}, error=problem, skip=skip)
    report.notes.append(Note("the grader failed on this submission, so nothing was scored; "
                             "run tfcourse grade again, and report it if it persists", {}, "error"))
    if known is None:
        expected = ", ".join(n for a in course.assignments for n in a.notebooks)
        report.notes.append(Note("its assignment could not be told from the names of its "
                                 "notebooks (expected one of: {expected}), so its checks are not "
                                 "listed", {"expected": expected}, "error"))
    return report


def refused_root(course, submission: Path, within: Path | None, assignment_id: str | None,
                 skip=(), kind: str | None = None):
    """The report for a submission that is itself a link, a pipe or a device: never followed nor
    opened; every check of its assignment (when known) at 0, and a note that says why. `kind`:
    what the submission is, as listed in its job (None: looked at now)."""
    base, parts = split_submission(submission, within)
    kind = kind or kind_inside(base, parts)
    if kind in ("file", "folder", "missing"):
        return None
    if assignment_id is None:
        for assignment in course.assignments:
            if parts[-1] in assignment.notebooks:
                assignment_id = assignment.id
                break
    report = zero_report(course, assignment_id, submission.name,
                         "not graded: the notebook could not be read", skip=skip)
    report.notes.append(Note("{name} is {what}; only regular files and folders are graded",
                             {"name": parts[-1], "what": KIND_WORDS[kind]}, "error"))
    return report
