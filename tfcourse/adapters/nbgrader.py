"""nbgrader's side: preprocessors that put the trusted grader's verdicts into the test cells.

- `SandboxedGrade` takes the place of nbgrader's `Execute` in `nbgrader autograde`. It grades the
  notebook with the same runner as `tfcourse grade` (student code in the sandbox, verdicts computed
  outside it) and writes each test cell's output from the verdict: nothing for full marks, the
  points as the cell's result for part marks, an error for none. It starts no kernel: nbgrader's
  Execute would run every student cell again, outside the sandbox, as whoever runs autograde, where
  one cell could rewrite the graders, read `source/` or edit `gradebook.db`. So student code runs
  only in the sandbox, and a warning printed on stderr cannot zero a cell: `nbgrader autograde`
  gives the same points as `tfcourse grade`. The autograded notebook keeps the student's code
  without outputs (nbgrader's sanitizing step clears them).
- `SafeCollect` is nbgrader's collect, except that a link a student left in the exchange stays a
  link in `submitted/` (nbgrader's copy would follow it, as the instructor, and bring back whatever
  it points to, such as the solutions); `SandboxedGrade` then refuses any notebook that is not a
  regular file.
- `ExecuteSolution` is for `generate_solution` only: it runs the course's own solution notebook
  (from `source/`, written by the instructor) in a kernel, so that the solutions show their plots,
  then scores it like `SandboxedGrade`. It refuses any notebook outside the course's `source/`.
  What the run printed is kept as the finished cell shows it, without a progress bar's redraws and
  timings (tfcourse/build/outputs.py), so that building twice changes nothing in `solutions/`.
- `OverwriteReleasedCells` is nbgrader's autograde step that puts each locked cell back as the
  gradebook holds it, without nbgrader's false alarm: nbgrader warns `Attribute 'checksum' for cell
  sdpa has changed!` for every test cell of every submission, because the gradebook holds a test
  cell with its hidden tests and students were given it without them. This step restores those
  cells just the same, and warns only when a student changed a locked cell. A cell as an earlier
  release gave it (the course changed its points or text after the student fetched) is said to be
  the course's change, in one line, not the student's: a release writes into each locked cell the
  checksum of its text and points, so a cell that still matches its own checksum was not edited.
- `ClearHiddenTestsOnPage` and `SanitizeMarkdown` declare nbconvert's `display_data_priority`
  setting, as nbgrader's `GetGrades` does: nbconvert's HTML exporter sets it for every step of
  `generate_feedback`, and a step that does not declare it logs `Config option
  display_data_priority not recognized` for each notebook.
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import compute_checksum, ignore_patterns
from nbconvert.exporters import NotebookExporter
from traitlets import Bool, List, Unicode

from tfcourse import notebook as nbtools
from tfcourse.course import load_course

from ..build.outputs import clean_outputs
from ..submission.report import SubmissionReport
from ..batch.results import Feedback, feedback, say
from ..batch.child import grade_in_child, student_threads
from ..submission.failures import zero_report
from ..submission.files import KIND_WORDS, NotebookFile, file_limit_mb, kind_inside
from ..submission.notebooks import read_notebook

PLACEHOLDER = "# graded by tfcourse's autograder (see this cell's output)"


def course_root(configured: str) -> Path:
    """The course folder: as nbgrader_config.py sets it (`course_root`), else nbgrader's own
    convention, the folder nbgrader runs in."""
    return Path(configured or os.getcwd()).resolve()


def grade_with_runner(course, nb, assignment_id: str, notebook_name: str,
                      threads: int | None = None) -> SubmissionReport:
    """Grade an in-memory notebook in a separate trusted grader process, as tfcourse grade does."""
    with tempfile.TemporaryDirectory(prefix="tfnbgrader-") as scratch:
        folder = Path(scratch) / "submission"
        folder.mkdir()
        nbformat.write(nb, str(folder / notebook_name))
        return grade_in_child(course, folder, assignment_id, threads or student_threads(course),
                              skip=[], hide=[])


def cell_outputs(view: Feedback, group) -> list:
    """The outputs a test cell shows for its group's results (nbgrader reads its points off
    them): a line per check; nothing more for full marks, the points as the cell's result for
    part marks, an error for none."""
    part = view.part(group.id)
    rows = part.rows if part is not None else ()
    lines = [f"{'✓' if row.passed else '✗'} {row.name} ({row.score:g}/{row.max_score:g})"
             + ("" if row.passed else f": {row.failure}") for row in rows]
    score = part.score if part is not None else 0.0
    summary = "\n".join(lines) + "\n"
    if score >= group.points:
        return [new_output("stream", name="stdout", text=summary)]
    if score > 0:
        return [new_output("stream", name="stdout", text=summary),
                new_output("execute_result", data={"text/plain": f"{score:g}"},
                           execution_count=None)]
    return [new_output("error", ename="ChecksFailed",
                       evalue=view.say("no points for {group}", {"group": group.id}),
                       traceback=summary.splitlines())]


def _score_test_cells(root: Path, nb, resources, lang_option: str, execute=None):
    """Grade `nb` in the sandbox with the course in `root`, blank the test cells while
    `execute(nb, resources)` (if any) runs, then write the verdicts into them. Returns (nb,
    resources)."""
    course = load_course(root)
    assignment = course.assignment(resources["nbgrader"]["assignment"])
    name = resources["nbgrader"]["notebook"] + ".ipynb"
    lang = lang_option or course.language
    _refuse_other_points(nb, assignment)
    kind = _submitted_kind(course.root, resources, assignment.id, name)
    if kind in ("file", None):
        report = grade_with_runner(course, nb, assignment.id, name)
    else:
        report = zero_report(course, assignment.id, name, "not graded: {name} is {what}; only "
                                                          "regular files are graded",
                             {"name": name, "what": KIND_WORDS.get(kind, kind)})
    if report.error:        # nbgrader would store the blank verdicts as a score of 0
        raise RuntimeError(f"not graded: the grader failed on {name} ({report.error}); nothing "
                           f"was stored for this submission: autograde it again")
    tests, sources = {}, {}
    for cell in nb.cells:
        gid = nbtools.grade_id(cell)
        if nbtools.is_test(cell) and gid:
            tests[gid] = cell
            sources[gid] = cell.source
            cell.source = PLACEHOLDER
    if execute is not None:
        nb, resources = execute(nb, resources)
    view = feedback(course, report, lang)
    for group in assignment.checks:
        cell = tests.get(group.id)
        if cell is not None:
            cell.source = sources[group.id]
            cell.outputs = cell_outputs(view, group)
    resources.setdefault("tfcourse", {})["report"] = report.to_dict()
    return nb, resources


def _refuse_other_points(nb, assignment) -> None:
    """Stop when a test cell's points (in autograde, the gradebook's) are not course.yaml's:
    nbgrader would total the grade with the others, silently unlike `tfcourse grade`."""
    points = {group.id: group.points for group in assignment.checks}
    wrong = [f"{gid}: {float(held):g} here, {points[gid]:g} in course.yaml"
             for gid, held in ((nbtools.grade_id(cell), nbtools.nbgrader(cell).get("points"))
                               for cell in nb.cells if nbtools.is_test(cell))
             if gid in points and isinstance(held, (int, float))
             and abs(float(held) - points[gid]) > 1e-9]
    if wrong:
        raise RuntimeError(f"not graded: the points nbgrader holds for {assignment.id} are not "
                           f"course.yaml's ({'; '.join(wrong)}). Run `tfcourse build` in the "
                           f"course folder: it writes course.yaml's points into the notebooks, the "
                           f"release and nbgrader's gradebook")


def _submitted_kind(root: Path, resources, assignment_id: str, name: str) -> str | None:
    """What the student's submitted notebook is on disk ("file", "link", ...), read without
    following any link below the course's `submitted/` folder; None outside autograde."""
    student = resources["nbgrader"].get("student")
    submitted = root / "submitted"
    if not student or not submitted.is_dir() or os.environ.get("NBGRADER_EXECUTION") != "autograde":
        return None
    kind = kind_inside(submitted, (str(student), assignment_id, name))
    return None if kind == "missing" else kind


def _display_data_priority():
    """nbconvert's `display_data_priority`, declared as a setting (see the module's docstring)."""
    return List(NbGraderPreprocessor.class_traits()["display_data_priority"].default()).tag(
        config=True)


class SanitizeMarkdown(NbGraderPreprocessor):
    """Raw HTML in markdown cells shown as text: a student's `<img onerror=...>` or `<script>` must
    not run in the instructor's browser when nbgrader's feedback or formgrader pages show the
    notebook (nbgrader's own templates render markdown without sanitizing it)."""

    display_data_priority = _display_data_priority()

    TAG = re.compile(r"<(?=[A-Za-z/!?])")

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = self.TAG.sub("&lt;", cell.source)
        return nb, resources


class SafeCollect(ExchangeCollect):
    """nbgrader's collect, keeping links as links (see the module's docstring)."""

    def do_copy(self, src, dest, log=None):
        shutil.copytree(src, dest, symlinks=True,
                        ignore=ignore_patterns(exclude=self.coursedir.ignore,
                                               include=self.coursedir.include,
                                               max_file_size=self.coursedir.max_file_size,
                                               log=self.log))


class SandboxedGrade(NbGraderPreprocessor):
    """nbgrader autograde's grading step: verdicts from the sandboxed grader, and no kernel."""

    lang = Unicode("", help="Language of the verdicts; default: course.yaml's.").tag(config=True)
    course_root = Unicode("", help="The course folder (default: where nbgrader runs).").tag(
        config=True)

    def preprocess(self, nb, resources):
        return _score_test_cells(course_root(self.course_root), nb, resources, self.lang)


class GuardedNotebookExporter(NotebookExporter):
    """The exporter nbgrader autograde reads each notebook with: a notebook that the trusted
    grader would not read (built to be expensive to read: too many JSON values, nested too deeply;
    larger than limits.notebook_file_mb; not JSON) is refused before nbgrader parses it, with the
    grader's reason; nbgrader then reports that submission as failed, with the reason."""

    course_root = Unicode("", help="The course folder (default: where nbgrader runs).").tag(
        config=True)

    def from_filename(self, filename, resources=None, **kw):
        course = load_course(course_root(self.course_root))
        name = Path(filename).name
        raw, notes = read_notebook(NotebookFile(Path(filename).resolve().parent, (name,), 1,
                                                "file", limit_mb=file_limit_mb(course)),
                                   course.limit("notebook_mb"))
        if raw is None:
            said = "; ".join(say(note.template, note.params, "en") for note in notes)
            raise ValueError(f"{filename}: not graded: {said}")
        return super().from_filename(filename, resources, **kw)


class ExecuteSolution(Execute):
    """generate_solution's step: run the course's solution notebook in a kernel, then score it."""

    lang = Unicode("", help="Language of the verdicts; default: course.yaml's.").tag(config=True)
    record_timing = Bool(False, help="No timestamps in cell metadata (keeps diffs clean).").tag(
        config=True)
    course_root = Unicode("", help="The course folder (default: where nbgrader runs).").tag(
        config=True)

    def preprocess(self, nb, resources):
        root = course_root(self.course_root)
        folder = Path(resources.get("metadata", {}).get("path") or ".").resolve()
        source = (root / "source").resolve()
        if folder != source and source not in folder.parents:
            raise RuntimeError(f"ExecuteSolution runs only the course's own notebooks (in "
                               f"{source}), not {folder}: use SandboxedGrade for students' work")
        return _score_test_cells(root, nb, resources, self.lang, execute=self._execute)

    def _execute(self, nb, resources):
        self._root = course_root(self.course_root)
        nb, resources = super().preprocess(nb, resources)
        return clean_outputs(nb), resources

    def setup_kernel(self, **kwargs):
        """The kernel that runs the solution: its log (ipykernel's "running over TCP without
        encryption" warning) not on the build's terminal, and the sandbox's CPU kernels and one
        thread, so that a rebuild on another machine prints the same numbers (the training
        demo's accuracies: 99.9% on one CPU's kernels was 100.0% on another's)."""
        from ..sandbox.launch import kernel_environment

        config = load_course(getattr(self, "_root", None) or course_root(self.course_root)).sandbox
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        kwargs.setdefault("env", {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                  **kernel_environment(config.cpu_kernels)})
        return super().setup_kernel(**kwargs)


class ClearHiddenTestsOnPage(ClearHiddenTests):
    """nbgrader's ClearHiddenTests, for generate_feedback's page (see the module's docstring); and
    without the bare score a part-marked test cell holds as its result (autograde reads its
    points from it; on the page it showed as `Out[ ]: 4` under the cell, whose header already
    says "Score: 4.0 / 6.0")."""

    display_data_priority = _display_data_priority()

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if nbtools.is_test(cell):
            cell.outputs = [output for output in cell.get("outputs", [])
                            if output.get("output_type") != "execute_result"]
        return cell, resources


class OverwriteReleasedCells(OverwriteCells):
    """nbgrader's OverwriteCells, quiet about a locked cell that is as it was released (the
    gradebook's cell without its hidden tests): see the module's docstring. A locked cell as an
    earlier release gave it (a student who fetched before the instructor changed its points or
    text) is said to be the instructor's change, once, not a student's edit. Every other change
    nbgrader reports is still reported, said to be the student's, and every locked cell is
    restored as before."""

    _as_released = False
    _earlier: str | None = None          # how an earlier release's cell differs from this one
    _earlier_changes: list = []

    def preprocess_cell(self, cell, resources, cell_index):
        self._as_released = self._is_as_released(cell)
        self._earlier = None if self._as_released else self._as_an_earlier_release(cell)
        self._earlier_changes = []
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if self._earlier is not None and self._earlier_changes:
            self.log.info("Cell %s is as an earlier release gave it (%s): the course changed it "
                          "after this student fetched the assignment, the student did not edit "
                          "it; it is graded as the gradebook holds it now",
                          nbtools.grade_id(cell), self._earlier)
        return cell, resources

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._as_released:
            return
        if self._earlier is not None and attr in ("points", "checksum"):
            self._earlier_changes.append(attr)
            return
        super().report_change(name, attr, old, new)
        if attr == "checksum":
            self.log.warning("Cell %s was edited by the student: it is neither as this release "
                             "nor as an earlier one gave it (its text does not match the checksum "
                             "it was released with); it is put back as the gradebook holds it",
                             name)

    def _source_cell(self, cell):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None:
            return None
        try:
            return self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return None

    def _released(self, cell, source):
        """The cell as this release gave it: the gradebook's source, without its hidden tests."""
        released = copy.deepcopy(cell)
        released.source = source.source
        ClearHiddenTests(config=self.config)._remove_hidden_test_region(released)
        return released

    def _is_as_released(self, cell) -> bool:
        source = self._source_cell(cell)
        if source is None:
            return False
        try:
            original = copy.deepcopy(cell)
            original.source = source.source
            return (self._released(cell, source).source == cell.source
                    and compute_checksum(original) == source.checksum)
        except (KeyError, RuntimeError):
            return False

    def _as_an_earlier_release(self, cell) -> str | None:
        """How the cell differs from this release's, when it is as an earlier release gave it:
        unchanged since that release wrote its checksum (which covers its text and points), with
        another text or other points than this release's. None when the student changed it, or
        when it is no locked cell nbgrader checks."""
        meta = cell.metadata.get("nbgrader", {})
        source = self._source_cell(cell)
        if source is None or not source.locked or not meta.get("locked"):
            return None
        try:
            if meta.get("checksum") != compute_checksum(cell):
                return None                    # changed after it was released: the student
            released = self._released(cell, source)
        except (KeyError, RuntimeError, ValueError):
            return None
        if released.source != cell.source:
            return "another text than this release's"
        try:
            now = float(self.gradebook.find_graded_cell(
                meta.get("grade_id"), self.notebook_id, self.assignment_id).max_score)
        except MissingEntry:
            return "the same text"
        given = meta.get("points")
        if given is not None and float(given) != now:
            return f"the same text, released with {float(given):g} points, now {now:g}"
        return "the same text"
