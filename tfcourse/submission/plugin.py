"""The pytest plugin that grades: the course's hidden graders are pytest tests.

Each assignment's graders are one test module of the course's `autograder/` folder, named by
course.yaml (`graders: test_attention.py`), with one test function per check id: `test_sdpa_values`
grades `sdpa.values` (group `sdpa`, test `values`); its points come from course.yaml. A test asks
for the `ctx` fixture (framework.Context): the student's sandboxed submission (call its functions,
build its modules, load weights into them), the reference, seeded random inputs and the course's
tolerances. A check that fails raises `Fail` with the message the student reads.

    pytest autograder/test_attention.py --submission path/to/attention.ipynb [-k mha] [-x] [--pdb]

runs them as any pytest tests (without `--submission`: against the solution in source/), and
prints the points at the end (`--grade-report FILE` writes the report as JSON). `tfcourse grade`,
`nbgrader autograde` and Gradescope run the same pytest session, in the trusted grader process
(grade.py), and take the report from it.

The plugin is inert for any other test: only tests of a module that course.yaml names as graders
are graded. It is a `pytest11` entry point, so it loads into every pytest run where tfcourse is
installed: at load it imports pytest alone; the course, the sandbox and torch are imported when a
run collects a grader module (or grades a submission).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..course import Course
    from .report import SubmissionReport
    from .run import SubmissionRun

GRADING = pytest.StashKey["Grading"]()


# -- the state of one pytest session -----------------------------------------------------------
@dataclass
class Check:
    """A collected grader test: which check of which submission it grades."""
    run: "SubmissionRun"             # run.SubmissionRun
    group: object                  # course.CheckGroup
    test_id: str                   # "sdpa.values"


@dataclass
class Outcome:
    points: float
    template: str = ""
    params: dict = field(default_factory=dict)
    internal: bool = False
    seconds: float = 0.0


class Grading:
    """The plugin's state for one pytest session: which collected tests grade which check, and
    the submissions they grade (given by the trusted grader, or made from the command line)."""

    def __init__(self, course: "Course | None" = None, runs: dict | None = None, options=None):
        self.course, self.runs, self.options = course, dict(runs or {}), options
        self.checks: dict[str, Check] = {}       # item nodeid -> Check
        self.problem = ""                         # why grading could not happen at all

    def preset(self):
        """A plugin object that hands this Grading to the session (for pytest.main(plugins=))."""
        grading = self

        class Preset:
            @pytest.hookimpl(tryfirst=True)
            def pytest_configure(self, config):
                config.stash[GRADING] = grading

        return Preset()

    # -- from the command line -----------------------------------------------------------------
    def run_for(self, course: "Course", assignment) -> SubmissionRun:
        """The submission a command-line session grades for `assignment`."""
        if assignment.id in self.runs:
            return self.runs[assignment.id]
        from ..sandbox.launch import SandboxConfig
        from .finding import find_notebooks
        from .reference import helper_files
        from .run import SubmissionRun

        options = self.options
        submission = options.submission or course.source_dir / assignment.id
        submission = Path(submission).resolve()
        found, notebooks = find_notebooks(course, submission, assignment.id)
        if found is None:
            raise pytest.UsageError(f"{submission} holds no notebook of {assignment.id} "
                                    f"({', '.join(assignment.notebooks)})")
        config = SandboxConfig.from_course(course, helper_files(course, assignment.id),
                                           options.student_threads, [submission])
        name = submission.name if submission.is_dir() else submission.stem
        run = SubmissionRun(course, assignment, name, notebooks, config,
                            skip=frozenset(options.skip_check or ()))
        run.selected_only = True
        self.runs[assignment.id] = run
        return run

    # -- collecting ----------------------------------------------------------------------------
    def collect(self, config, items: list) -> None:
        """Find the grader tests among `items`, check them against course.yaml (before anything
        is read or started) and put them in course.yaml's order."""
        found = {}                               # item nodeid -> (course, assignment, group, id)
        for item in items:
            where = self._assignment_of(item, config)
            if where is not None:
                course, assignment = where
                found[item.nodeid] = (course, assignment, *_check_id(assignment, item))
        if not found:
            return
        selected = bool(config.option.keyword or config.option.markexpr)
        for assignment in {id(a): a for _, a, _, _ in found.values()}.values():
            tested = {test_id for _, a, _, test_id in found.values() if a is assignment}
            untested = [test_id for test_id in assignment.test_ids() if test_id not in tested]
            if untested and not selected:
                raise pytest.UsageError(
                    f"course.yaml's checks {', '.join(untested)} of {assignment.id} have no test "
                    f"in autograder/{assignment.graders} (write test_<group>_<test>(ctx) for "
                    f"each)")
        for item in items:
            if item.nodeid not in found:
                continue
            course, assignment, group, test_id = found[item.nodeid]
            run = self.run_for(course, assignment)
            if run.standins is None:
                run.standins = _standins(item)
            self.checks[item.nodeid] = Check(run, group, test_id)
            run.cases[test_id] = run.cases.get(test_id, 0) + 1
            if test_id in run.skip:
                item.add_marker(pytest.mark.skip(reason=f"{test_id}: --skip-check"))
        position = {item.nodeid: index for index, item in enumerate(items)}

        def order(item):
            if item.nodeid not in found:
                return (-1, -1, position[item.nodeid])
            course, assignment, _, test_id = found[item.nodeid]
            return (course.assignments.index(assignment), assignment.test_ids().index(test_id),
                    position[item.nodeid])
        items.sort(key=order)

    def _assignment_of(self, item, config):
        """(course, assignment) when `item` is in a module course.yaml names as graders."""
        path = Path(str(getattr(item, "path", "") or item.fspath)).resolve()
        if path.parent.name != "autograder":
            return None
        from ..course import CourseError, find_course_root, load_course

        course = self.course
        if course is None or course.root != path.parent.parent:
            try:
                course = self.course = load_course(config.option.course_folder
                                                   or find_course_root(path.parent))
            except CourseError:
                return None
        if course.root != path.parent.parent:
            return None
        for assignment in course.assignments:
            if assignment.graders == path.name:
                return course, assignment
        return None

    # -- results -------------------------------------------------------------------------------
    def record(self, item, report, call) -> None:
        check = self.checks.get(item.nodeid)
        if check is None:
            return
        from ..sandbox.session import OutOfTime, TimedOut
        from .framework import verdict

        if report.when == "call" and report.passed:
            check.run.record(check.test_id, Outcome(1.0, seconds=report.duration))
            return
        if report.skipped or call.excinfo is None:
            return
        error = call.excinfo.value
        if isinstance(error, OutOfTime):
            run = check.run.notebook(check.group)
            run.out_of_time()
            template, params, internal = run.refusal[0], run.refusal[1], False
        else:
            if isinstance(error, TimedOut):      # its stubs' other checks are not run
                check.run.notebook(check.group).timed_out(check.group,
                                                          check.test_id.split(".", 1)[1],
                                                          error.seconds, error.waiting)
            template, params, internal = verdict(error)
        check.run.record(check.test_id, Outcome(0.0, template, params, internal,
                                                report.duration))

    def finish(self) -> "dict[str, SubmissionReport]":
        return {assignment_id: run.finish() for assignment_id, run in self.runs.items()}


def _check_id(assignment, item):
    """(group, "group.test") that a test function grades, from its name: test_<group>_<test>."""
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    for group in sorted(assignment.checks, key=lambda g: -len(g.id)):
        prefix = f"test_{group.id}_"
        if name.startswith(prefix) and name[len(prefix):] in group.tests:
            return group, f"{group.id}.{name[len(prefix):]}"
    known = ", ".join(f"test_{t.replace('.', '_')}" for t in assignment.test_ids())
    raise pytest.UsageError(f"{item.nodeid}: {name} grades no check of {assignment.id} in "
                            f"course.yaml (the graders are: {known})")


def _standins(item):
    """The course's stand-ins module (autograder/standins.py), as the grader module imported it."""
    module = getattr(item, "module", None)
    package = getattr(module, "__package__", None) or ""
    import importlib

    try:
        return importlib.import_module(f"{package}.standins" if package else "standins")
    except ImportError:
        return None


# -- pytest's hooks --------------------------------------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("tfcourse", "grading a submission with the course's hidden graders")
    group.addoption("--submission", type=Path, default=None,
                    help="the notebook or folder to grade (default: the solution in source/)")
    group.addoption("--course-folder", type=Path, default=None,
                    help="the course folder (default: the one holding the grader module)")
    group.addoption("--grade-report", type=Path, default=None,
                    help="write the graded report (JSON) here")
    group.addoption("--student-threads", type=int, default=1,
                    help="torch threads for the student's process (default 1)")
    group.addoption("--skip-check", action="append", default=[],
                    help="a check id not to grade (e.g. trained.accuracy); repeatable")


def pytest_configure(config):
    if GRADING not in config.stash:
        config.stash[GRADING] = Grading(options=config.option)


def pytest_deselected(items):
    """Checks deselected (-k, -m) are not graded, nor any check with a case deselected."""
    for item in items:
        grading = item.config.stash.get(GRADING, None)
        check = grading.checks.get(item.nodeid) if grading is not None else None
        if check is not None:
            check.run.deselected.add(check.test_id)


def pytest_collection_modifyitems(session, config, items):
    grading = config.stash[GRADING]
    try:
        grading.collect(config, items)
    except pytest.UsageError as error:
        grading.problem = str(error)
        raise
    except Exception as error:
        from ..course import CourseError

        if not isinstance(error, CourseError):
            raise
        grading.problem = str(error)
        raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    config = item.config
    if GRADING in config.stash:
        config.stash[GRADING].record(item, report, call)
    return report


@pytest.fixture
def ctx(request):
    """The check's Context: the student's sandboxed submission, the reference, seeded inputs and
    the course's tolerances. Fails the test with the group's reason when its checks cannot run
    (names missing, the course's rules broken, time out), and after the test when the student's
    code made a forbidden call."""
    grading = request.config.stash[GRADING]
    check = grading.checks.get(request.node.nodeid)
    if check is None:
        raise pytest.UsageError(f"{request.node.nodeid}: the ctx fixture is for the course's "
                                f"graders, in a module course.yaml names (autograder/...)")
    notebook = check.run.notebook(check.group)
    test = check.test_id.split(".", 1)[1]
    context = notebook.gate(check.group, test)
    yield context
    tripped = notebook.after_check(check.group, test)
    if tripped is not None:
        check.run.refusals[check.group.part(test)] = tripped
        from .run import NotGraded

        raise NotGraded(tripped[0], **tripped[1])


@pytest.fixture
def reference(ctx):
    """The reference solution's namespace (built from source/), on the trusted side."""
    return ctx.ref


@pytest.fixture
def tolerance(ctx):
    """The course's tolerances for values compared with the reference: (atol, rtol)."""
    return ctx.atol, ctx.rtol


def pytest_sessionfinish(session, exitstatus):
    grading = session.config.stash.get(GRADING, None)
    if grading is None or grading.options is None or not grading.runs:
        return                      # the trusted grader finishes its own run (grade.py)
    grading.reports = grading.finish()
    path = session.config.option.grade_report
    if path is not None:
        data = {key: report.to_dict() for key, report in grading.reports.items()}
        Path(path).write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    grading = config.stash.get(GRADING, None)
    reports = getattr(grading, "reports", None) if grading is not None else None
    if not reports:
        return
    from .report import say

    terminalreporter.section("tfcourse: points")
    for report in reports.values():
        for test in report.tests:
            line = f"{test.id:<28} {test.points:g}/{test.max_points:g}"
            if not test.graded:
                line = f"{test.id:<28} -/{test.max_points:g}"
            if not test.passed and test.template:
                line += f"  {say(test.template, test.params, 'en')}"
            terminalreporter.write_line(line)
        got = sum(test.points for test in report.tests if test.graded)
        total = sum(test.max_points for test in report.tests if test.graded)
        left = sum(test.max_points for test in report.tests if not test.graded)
        line = f"{report.assignment}: {got:g}/{total:g} points"
        if left:
            line += f" ({left:g} more not graded: deselected or skipped)"
        terminalreporter.write_line(line)
