"""Grading one submission in this, the trusted process.

`grade_submission` runs pytest on the assignment's hidden graders (`autograder/test_*.py` of the
course folder) with the `Grading` of plugin.py, and returns the report made of plain data. A
`NotebookRun` is one notebook of the submission: it reads the notebook, applies the course's static
rules, starts the student's code in a sandbox and answers, group by group, whether the group's
checks may run at all. It runs in a process of its own (`python -m tfcourse.submission`, see
__main__.py), one per submission, so that nothing a submission does can reach the others or the
runner.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from tfcourse.course import Course
from tfcourse.source import assignment_source

from ..sandbox.launch import Sandbox, SandboxConfig
from ..sandbox.session import OutOfTime, ProcessEnded, StudentError, StudentSession, TimedOut
from . import rules
from .framework import Context, Fail, describe_student_error
from .reference import reference
from .report import Note, NotebookReport, SubmissionReport
from .files import load_program


class NotGraded(Fail):
    """No check of a group (or notebook) can run; the message says why."""


class NotebookRun:
    """One notebook of a submission, from reading it to its report. The student's process starts
    at the first check that needs it (`context`), and ends with `finish`."""

    def __init__(self, course: Course, assignment, name: str, path, config: SandboxConfig | None,
                 prestarted: Sandbox | None = None, standins=None):
        self.course, self.assignment, self.name = course, assignment, name
        self.started = time.monotonic()
        self.report = NotebookReport(name)
        source = assignment_source(course, assignment.id)
        self.groups = source.groups_in(name)        # those whose test cells are in it
        self.config, self.prestarted, self.standins = config, prestarted, standins
        self.program = load_program(course.source_dir / assignment.id / name, path,
                                    course.limit("notebook_mb"), source=source.notebook(name))
        self.report.notes = self.program.notes
        self.session: StudentSession | None = None
        self._context: Context | None = None
        self.refusal: tuple[str, dict] | None = None      # why none of its checks can run
        self.static = None
        self._gates: dict[tuple, tuple[str, dict] | None] = {}       # group.part -> refusal
        self.tripped: dict[tuple, set[str]] = {}          # group.part -> calls seen
        # stubs whose check took longer than its time -> (that check, its seconds): their other
        # checks fail at once instead of waiting out the same endless loop again
        self.hung: dict[tuple[str, ...], tuple[str, float]] = {}

    # -- starting ------------------------------------------------------------------------------
    def context(self) -> Context:
        """The checks' context, the student's process started; raises NotGraded when the notebook
        cannot be graded at all."""
        if self._context is None and self.refusal is None:
            self._start()
        if self.refusal is not None:
            raise NotGraded(self.refusal[0], **self.refusal[1])
        return self._context

    def _start(self) -> None:
        course, assignment, program = self.course, self.assignment, self.program
        if not program.readable:
            self._close_prestarted()
            self.refusal = ("not graded: the notebook could not be read", {})
            return
        size = sum(len(cell.source.encode("utf-8", "replace")) for cell in program.cells
                   if cell.from_student)
        if size > course.limit("code_kb") * 1024:     # the rules' check costs time and memory
            self._close_prestarted()
            self.refusal = ("not graded: your code in this notebook is {kb:.0f} KB, more than "
                            "the {limit:.0f} KB allowed", {"kb": size / 1024,
                                                           "limit": course.limit("code_kb")})
            return
        self.static = rules.check(
            [(cell.label, cell.source) for cell in program.cells if cell.from_student],
            course.forbidden_names(),
            context=[cell.source for cell in program.cells if not cell.from_student],
            stubs={stub for group in assignment.checks for stub in group.stubs},
            known_modules=assignment.uses)
        if self.static.unchecked:        # not valid Python: those cells fail to run as well
            self.report.extra["rules_unchecked"] = [{"cell": label, "why": why}
                                                    for label, why in self.static.unchecked]
        # The time for the student's code starts now: reading it (above) is the grader's own time.
        deadline = time.monotonic() + course.limit("submission_seconds")
        self.session = StudentSession(program.cells, self.config, course.forbidden_names(),
                                      course.limit("cell_seconds"), deadline,
                                      prestarted=self.prestarted)
        self.prestarted = None
        self._context = Context(self.session, reference(course, assignment.id), course,
                                assignment, course.limit("check_seconds"), self.standins)
        self._context.extra = self.report.extra
        try:
            self.session.start()
        except OutOfTime:
            self.out_of_time()
            return
        except (ProcessEnded, TimedOut) as error:       # could not even start the sandbox
            self.report.notes.append(Note("grader: the student's process could not be started "
                                          "({error})", {"error": str(error)}, "error"))
            self.refusal = ("not graded: the grader could not run this notebook", {})
            return
        self.report.sandbox = self.session._sandbox.mode if self.session._sandbox else ""
        if self.session.warning:
            self.report.notes.append(Note("grader: {warning}", {"warning": self.session.warning}))

    def out_of_time(self) -> None:
        """The time for this notebook ran out: no further check of it runs."""
        self.refusal = ("not graded: the time for this notebook ({seconds:.0f} s) ran out",
                        {"seconds": self.course.limit("submission_seconds")})

    def _close_prestarted(self) -> None:
        if self.prestarted is not None:
            self.prestarted.close()
            self.prestarted = None

    # -- one group of checks -------------------------------------------------------------------
    def gate(self, group, test: str) -> Context:
        """The context for check `test` of `group`, or NotGraded when it cannot earn points: a
        stub it checks is missing, or breaks the course's rules."""
        context = self.context()
        key = group.part(test)
        hung = self._hung(key[1])
        if hung is not None:
            raise NotGraded(hung[0], **hung[1])
        if key not in self._gates:
            self._gates[key] = self._refusal(context, key[1])
            self.session.tripped.clear()
            self.tripped[key] = set()
        refusal = self._gates[key]
        if refusal is not None:
            raise NotGraded(refusal[0], **refusal[1])
        return context

    def timed_out(self, group, test: str, seconds: float) -> None:
        """Check `test` of `group` took longer than its `seconds`: the stubs it checks hung."""
        self.hung.setdefault(group.part(test)[1], (f"{group.id}.{test}", seconds))

    def _hung(self, stubs: tuple[str, ...]) -> tuple[str, dict] | None:
        """Why a check of `stubs` is not run: stubs it checks already hung in another check."""
        for hung, (check, seconds) in self.hung.items():
            if set(hung) <= set(stubs):
                return ("not run: {stub} already took longer than {seconds:.0f} s in {check}",
                        {"stub": ", ".join(hung), "seconds": seconds, "check": check})
        return None

    def _refusal(self, context: Context, stubs: tuple[str, ...]) -> tuple[str, dict] | None:
        try:
            kinds = context.request("names", names=list(stubs))
        except StudentError as error:         # the student's objects broke even this question
            return describe_student_error(error)
        if not isinstance(kinds, dict):
            kinds = {}
        missing = [name for name in stubs if kinds.get(name, "missing") == "missing"]
        if missing:
            return ("{names} is not defined: was its cell deleted, renamed or left with an error?",
                    {"names": ", ".join(missing)})
        broken = self.static.messages(stubs)
        if broken:
            shown = "; ".join(broken[:3]) + (f"; and {len(broken) - 3} more" * (len(broken) > 3))
            return ("{reasons}; the course's rules do not allow this here, so write the "
                    "attention yourself", {"stubs": ", ".join(stubs), "reasons": shown})
        return None

    def after_check(self, group, test: str) -> tuple[str, dict] | None:
        """After check `test` of `group`: the forbidden calls the code of its stubs made so far,
        as a refusal that zeroes every check of those stubs (None when there were none)."""
        key = group.part(test)
        if self.session is None or key not in self.tripped:
            return None
        self.tripped[key] |= set(self.session.tripped)
        if not self.tripped[key]:
            return None
        return ("{stubs} called {apis} while being checked, which the course's rules do not "
                "allow here", {"stubs": ", ".join(key[1]),
                               "apis": ", ".join(sorted(self.tripped[key]))})

    # -- the end -------------------------------------------------------------------------------
    def finish(self) -> NotebookReport:
        """Close the student's process; the notebook's report, without its tests (the plugin
        adds them)."""
        self._close_prestarted()
        report = self.report
        session = self.session
        if session is not None:
            session.close()
            report.cells = [asdict(outcome) for outcome in session.outcomes]
            report.notes += cell_notes(session)
            if session.output_tail.strip():
                report.extra["output_tail"] = session.output_tail[-2000:]
            report.peak_memory_mb = round(session.peak_rss_kb / 1024, 1)
        report.seconds = round(time.monotonic() - self.started, 2)
        return report


def cell_notes(session: StudentSession) -> list[Note]:
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

    from .plugin import Grading, SubmissionRun

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
