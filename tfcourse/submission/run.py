"""The run of one submission in the trusted grader: a `SubmissionRun` for its assignment, and a
`NotebookRun` for each of its notebooks.

A `NotebookRun` reads its notebook, applies the course's static rules, starts the student's code
in a sandbox and answers, group by group, whether the group's checks may run at all. A
`SubmissionRun` makes them as the checks first need them, records each check's outcome, and
makes the report with a result for every check of course.yaml. The pytest plugin (plugin.py)
drives a run; grade.py starts one.
"""
from __future__ import annotations

import time
from dataclasses import asdict

from tfcourse.course import Course, CourseError
from tfcourse.source import assignment_source

from ..sandbox.launch import Sandbox, SandboxConfig
from ..sandbox.session import (NotStarted, OutOfTime, ProcessEnded, StudentError, StudentSession,
                               TimedOut)
from . import rules
from .literals import literal_bytes
from .framework import Context, Fail, describe_student_error
from .reference import reference
from .report import Note, NotebookReport, SubmissionReport, TestResult, shown
from .notebooks import load_program


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
        self.report.read = self.program.read
        self.session: StudentSession | None = None
        self._context: Context | None = None
        self.refusal: tuple[str, dict] | None = None      # why none of its checks can run
        self.broken: str | None = None      # the sandbox did not come up, twice: no score at all
        self.static = None
        self._gates: dict[tuple, tuple[str, dict] | None] = {}       # group.part -> refusal
        self.tripped: dict[tuple, set[str]] = {}          # group.part -> calls seen
        # stubs whose check took longer than its time -> (that check, its seconds): their other
        # checks fail at once instead of waiting out the same endless loop again
        self.hung: dict[tuple[str, ...], tuple[str, float, bool]] = {}

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
        data = literal_bytes(cell.source for cell in program.cells if cell.from_student)
        if data > course.limit("literal_kb") * 1024:  # weights pasted in are not the student's
            self._close_prestarted()
            self.refusal = ("not graded: your code in this notebook holds {kb:.1f} KB of literal "
                            "data (strings, bytes and numbers written out), more than the "
                            "{limit:g} KB allowed (limits.literal_kb); data pasted into code, "
                            "such as trained weights, does not count as your work",
                            {"kb": data / 1024, "limit": course.limit("literal_kb")})
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
        # It is CPU time (the session's cpu_budget); the deadline is only its backstop on waiting.
        seconds = course.limit("submission_seconds")
        self.session = StudentSession(program.cells, self.config, course.forbidden_names(),
                                      course.limit("cell_seconds"), 0.0,
                                      prestarted=self.prestarted, cpu_budget=seconds,
                                      wait_factor=course.limit("wait_factor"),
                                      wait_floor=course.limit("wait_floor_seconds"),
                                      idle_seconds=course.limit("idle_seconds"),
                                      idle_total=course.limit("idle_total_seconds"))
        self.session.deadline = time.monotonic() + self.session.backstop(seconds)
        self.prestarted = None
        self._context = Context(self.session, reference(course, assignment.id), course,
                                assignment, course.limit("check_seconds"), self.standins)
        self._context.extra = self.report.extra
        try:
            self._start_session()
        except OutOfTime:
            self.out_of_time()
            return
        except (ProcessEnded, TimedOut) as error:       # could not even start the sandbox
            self.report.notes.append(Note("grader: the student's process could not be started "
                                          "({error})", {"error": str(error)}, "error"))
            self.refusal = ("not graded: the grader could not run this notebook", {})
            if isinstance(error, NotStarted):           # not the student's doing: no score
                self.broken = str(error)
            return
        self.report.sandbox = self.session._sandbox.mode if self.session._sandbox else ""
        if self.session.warning:
            self.report.notes.append(Note("grader: {warning}", {"warning": self.session.warning}))

    def _start_session(self) -> None:
        """Start the student's process; a sandbox that did not come up (NotStarted: no student
        code ran in it) is tried once more, a second later."""
        try:
            self.session.start()
        except NotStarted:
            time.sleep(1.0)
            self.session.start()

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

    def timed_out(self, group, test: str, seconds: float, waiting: bool = False) -> None:
        """Check `test` of `group` used more than its `seconds` of CPU time (or, `waiting`, waited
        `seconds` while using little): the stubs it checks hung."""
        self.hung.setdefault(group.part(test)[1], (f"{group.id}.{test}", seconds, waiting))

    def _hung(self, stubs: tuple[str, ...]) -> tuple[str, dict] | None:
        """Why a check of `stubs` is not run: stubs it checks already hung in another check."""
        for hung, (check, seconds, waiting) in self.hung.items():
            if set(hung) <= set(stubs):
                template = ("not run: {stub} already waited {seconds:.0f} s in {check} while "
                            "using little CPU" if waiting else
                            "not run: {stub} already used more than {seconds:.0f} CPU seconds "
                            "in {check}")
                return template, {"stub": ", ".join(hung), "seconds": seconds, "check": check}
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
        if outcome.idle is not None:         # it waited on nothing (session.IDLE_MESSAGE)
            notes.append(Note("cell {label} waited {seconds:.0f} s in all doing nothing "
                              "(sleeping, or waiting on input() or a lock): the grader allows "
                              "{limit:.0f} s of waiting per notebook; it was left out and the "
                              "rest was graded" if outcome.idle["total"] else
                              "cell {label} waited {seconds:.0f} s doing nothing (sleeping, or "
                              "waiting on input() or a lock): the grader allows {limit:.0f} s "
                              "of waiting; it was left out and the rest was graded",
                              {"label": outcome.label, "seconds": outcome.idle["seconds"],
                               "limit": outcome.idle["limit"]}, "error"))
        elif outcome.timed_out and outcome.waited:
            notes.append(Note("cell {label} did not finish within {seconds:.0f} s of waiting "
                              "while using little CPU (it may be waiting on something: input(), "
                              "a sleep, a lock); it was left out and the rest was graded",
                              {"label": outcome.label,
                               "seconds": session.backstop(session.cell_seconds)}, "error"))
        elif outcome.timed_out:
            notes.append(Note("cell {label} used more than {seconds:.0f} CPU seconds (an endless "
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


# -- one assignment of a submission -------------------------------------------------------------
class SubmissionRun:
    """One assignment of one submission: its notebooks (each a grade.NotebookRun, made when a
    check first needs it) and the outcome of each collected test."""

    def __init__(self, course: Course, assignment, name: str, notebooks: dict,
                 config, *, skip=frozenset(), prestarted=None, standins=None):
        self.course, self.assignment, self.name = course, assignment, name
        self.notebooks, self.config, self.skip = notebooks, config, frozenset(skip)
        self.prestarted, self.standins = prestarted, standins
        self.started = time.monotonic()
        self._runs: dict = {}
        self._notebook_of_group: dict[str, str] | None = None
        self.outcomes: dict[str, list] = {}      # check id -> its plugin.Outcome, each case
        self.cases: dict[str, int] = {}          # check id -> its collected tests (parametrized)
        self.refusals: dict[tuple, tuple[str, dict]] = {}     # CheckGroup.part -> the refusal's
        # a session of the command line (pytest autograder/... -k mha): a check deselected, or
        # not run after -x, is not graded, and its points are left out of the total; in the
        # trusted grader every check not run scores 0 of its points
        self.selected_only = False
        self.deselected: set[str] = set()        # checks with a case deselected (-k, -m)

    def notebook(self, group):
        """The NotebookRun holding `group`'s test cell."""
        if self._notebook_of_group is None:
            source = assignment_source(self.course, self.assignment.id)
            self._notebook_of_group = {group.id: name for name in self.notebooks
                                       for group in source.groups_in(name)}
        name = self._notebook_of_group.get(group.id)
        if name is None:
            raise CourseError(f"no notebook of {self.assignment.id} has the test cell "
                              f"{group.id!r}")
        return self._run_of(name)

    def _run_of(self, name: str):
        """The NotebookRun of the notebook `name`, made at the first need (the first one made
        takes the sandbox started beforehand)."""
        if name not in self._runs:
            self._runs[name] = NotebookRun(self.course, self.assignment, name,
                                           self.notebooks[name], self.config, self.prestarted,
                                           self.standins)
            self.prestarted = None
        return self._runs[name]

    def record(self, test_id: str, outcome) -> None:      # a plugin.Outcome
        self.outcomes.setdefault(test_id, []).append(outcome)

    def finish(self) -> SubmissionReport:
        """Every notebook's report, with a result for every check of course.yaml: a check whose
        test did not run (deselected, or pytest stopped) is not graded."""
        report = SubmissionReport(self.assignment.id, self.name)
        for name in self.notebooks:
            run = self._run_of(name)      # also a notebook no check ran: read for its notes
            notebook = run.finish()
            for group in run.groups:
                for test_name, points in group.tests.items():
                    refusal = self.refusals.get(group.part(test_name))
                    test_id = f"{group.id}.{test_name}"
                    notebook.tests.append(self._result(test_id, points, refusal))
            report.notebooks.append(notebook)
            if run.broken and not report.error:     # the grader's failure, not a score of 0
                report.error = f"{name}: the student's process could not be started: {run.broken}"
        report.seconds = round(time.monotonic() - self.started, 2)
        return report

    def _result(self, test_id: str, points: float, refusal) -> TestResult:
        outcomes = self.outcomes.get(test_id)
        seconds = sum(outcome.seconds for outcome in outcomes or [])
        if test_id in self.skip:
            return TestResult(test_id, 0.0, points, "not graded: skipped", graded=False)
        if refusal is not None:                  # found after its checks ran: the whole group
            return TestResult(test_id, 0.0, points, refusal[0],
                              {key: shown(value) for key, value in refusal[1].items()}, seconds)
        failed = next((outcome for outcome in outcomes or [] if outcome.points < 1), None)
        if failed is not None:                   # the first failing case says why
            return TestResult(test_id, 0.0, points, failed.template, failed.params, seconds,
                              failed.internal)
        if test_id in self.deselected:           # not all of its cases were selected
            return TestResult(test_id, 0.0, points, "not graded: deselected", seconds=seconds,
                              graded=False)
        if not outcomes or len(outcomes) < self.cases.get(test_id, 1):   # a case did not run
            return TestResult(test_id, 0.0, points, "not graded: its grader did not run",
                              seconds=seconds, graded=not self.selected_only)
        return TestResult(test_id, points, points, seconds=seconds)
