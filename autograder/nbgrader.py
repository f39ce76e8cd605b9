"""nbgrader's side: a preprocessor that puts the trusted grader's verdicts into the test cells.

`TrustedExecute` takes the place of nbgrader's `Execute` in `nbgrader autograde` (and in building the
solutions). It grades the notebook with the same runner as `tfcourse grade` (student code in a
sandbox, verdicts computed outside it), then executes the notebook in a kernel as nbgrader always
does, so the formgrader shows the student's outputs, and finally writes each test cell's output from
the verdict: nothing for full marks, the points as the cell's result for part marks, an error for
none. What runs in the kernel cannot change a score, and a warning printed on stderr cannot zero a
cell, so `nbgrader autograde` gives the same points as `tfcourse grade`.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Unicode

from tfcourse import notebook as nbtools
from tfcourse.course import load_course

from .report import SubmissionReport
from .results import say
from .runner import grade_in_child, student_threads

COURSE_ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = "# graded by tfcourse's autograder (see this cell's output)"


def grade_with_runner(nb, assignment_id: str, notebook_name: str,
                      threads: int | None = None) -> SubmissionReport:
    """Grade an in-memory notebook in a separate trusted grader process, as tfcourse grade does."""
    course = load_course(COURSE_ROOT)
    with tempfile.TemporaryDirectory(prefix="tfnbgrader-") as scratch:
        folder = Path(scratch) / "submission"
        folder.mkdir()
        nbformat.write(nb, str(folder / notebook_name))
        return grade_in_child(course, folder, assignment_id, threads or student_threads(course),
                              skip=[], hide=[])


def verdict_outputs(report: SubmissionReport, group, lang: str) -> list:
    """The outputs a test cell shows for its group's results (nbgrader reads its points off them)."""
    tests = {test.id: test for test in report.tests}
    lines, score = [], 0.0
    for name, points in group.tests.items():
        test = tests.get(f"{group.id}.{name}")
        if test is None:
            lines.append(f"✗ {name}: " + say("not graded: {reason}",
                                              {"reason": report.error or "missing"}, lang))
            continue
        score += test.points
        mark = "✓" if test.passed else "✗"
        text = "" if test.passed else ": " + say(test.template, test.params, lang)
        lines.append(f"{mark} {say(name, None, lang)} ({test.points:g}/{points:g}){text}")
    summary = "\n".join(lines) + "\n"
    if score >= group.points:
        return [new_output("stream", name="stdout", text=summary)]
    if score > 0:
        return [new_output("stream", name="stdout", text=summary),
                new_output("execute_result", data={"text/plain": f"{score:g}"},
                           execution_count=None)]
    return [new_output("error", ename="ChecksFailed", evalue=say("no points for {group}",
                                                                  {"group": group.id}, lang),
                       traceback=summary.splitlines())]


class TrustedExecute(Execute):
    """nbgrader's Execute, with test cells scored by tfcourse's sandboxed grader."""

    execute_student_cells = Bool(
        True, help="Also run the notebook in a kernel, as nbgrader does, so that its outputs are "
                   "kept (scores never depend on it).").tag(config=True)
    lang = Unicode("", help="Language of the verdicts; default: course.yaml's.").tag(config=True)
    record_timing = Bool(False, help="No timestamps in cell metadata (keeps diffs clean).").tag(
        config=True)

    def preprocess(self, nb, resources):
        course = load_course(COURSE_ROOT)
        assignment = course.assignment(resources["nbgrader"]["assignment"])
        name = resources["nbgrader"]["notebook"] + ".ipynb"
        lang = self.lang or course.language
        report = grade_with_runner(nb, assignment.id, name)
        tests, sources = {}, {}
        for cell in nb.cells:
            gid = nbtools.grade_id(cell)
            if nbtools.is_test(cell) and gid:
                tests[gid] = cell
                sources[gid] = cell.source
                cell.source = PLACEHOLDER
        if self.execute_student_cells:
            nb, resources = super().preprocess(nb, resources)
        for group in assignment.checks:
            cell = tests.get(group.id)
            if cell is not None:
                cell.source = sources[group.id]
                cell.outputs = verdict_outputs(report, group, lang)
        resources.setdefault("tfcourse", {})["report"] = report.to_dict()
        return nb, resources
