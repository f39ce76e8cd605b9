"""What a grade looks like on the outside: Gradescope's results.json, and feedback for the student.

The report from the grader (report.py: `SubmissionReport`) holds English templates and their
values. `feedback(course, report, lang)` renders it once in a language, as a `Feedback`: the score,
the notes, and a row per check of the assignment under the part of the notebook it tests. Every
rendering is made from that one value: results.json (`results_json`, Gradescope's format), the
student's feedback.md and feedback.html (`feedback_markdown`, `feedback_html`) and the output of
each nbgrader test cell (`cell_outputs` in adapters/nbgrader.py); none is made from another's
output. None contains any of the hidden checks' code.
"""
from __future__ import annotations

import contextlib
import html
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse.course import Course, CourseError
from tfcourse.i18n import message_kind, phrase, render
from tfcourse.pages import render as render_page

from ..submission.report import FOLDERS, SubmissionReport, finite, folders_of, say


def _stubs(course: Course, assignment_id: str, group_id: str) -> str:
    """What a check group tests, in the student's words: the names of the stubs it covers."""
    try:
        return ", ".join(course.assignment(assignment_id).group(group_id).stubs)
    except (KeyError, CourseError):
        return group_id


def max_points(course: Course, report: SubmissionReport) -> float:
    if report.assignment:
        return course.assignment(report.assignment).points
    return 0.0


# -- the one rendering of a report -----------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One check of the assignment, as the student reads it."""
    id: str                 # "sdpa.values"
    group: str              # "sdpa"
    name: str               # the check's name, in the language ("values")
    title: str              # "<stub>: values"
    passed: bool
    score: float
    max_score: float
    failure: str            # why it lost its points, in the language ("" when it passed)
    message: str            # what a row says: "passed", or the failure
    kind: str = ""          # the failure's kind, in English (i18n.message_kind; "" when passed)
    graded: bool = True     # False: skipped or deselected; its points are not in the total

    @property
    def mark(self) -> str:
        return "✓" if self.passed else "✗" if self.graded else "–"

    @property
    def points(self) -> str:
        """Its points as a row shows them: "1 / 2", or "– / 2" when not graded."""
        return f"{self.score:g} / {self.max_score:g}" if self.graded else f"– / {self.max_score:g}"


@dataclass(frozen=True)
class Part:
    """The checks of one group: the part of the notebook they test (its stubs)."""
    group: str
    stubs: str
    rows: tuple[Row, ...]

    @property
    def score(self) -> float:
        return sum(row.score for row in self.rows if row.graded)

    @property
    def max_score(self) -> float:
        """The points of its checks that were graded."""
        return sum(row.max_score for row in self.rows if row.graded)


@dataclass(frozen=True)
class Feedback:
    """A graded submission in one language: what every rendering shows."""
    lang: str
    assignment: str                     # "" when no notebook of the course was found
    assignment_title: str               # in the language ("" without an assignment)
    submission: str
    score: float
    max_score: float
    notes: tuple[str, ...]              # about the notebook: each may have several lines
    parts: tuple[Part, ...]             # every check of the assignment, in course.yaml's order
    seconds: float
    notebooks: tuple[dict, ...]         # per notebook: name, seconds, sandbox, memory, extra
    grader_error: str | None            # the grader itself failed (for the instructor)
    internal_errors: tuple[str, ...]    # checks the grader could not run
    folders: tuple[Path, ...] = field(default=FOLDERS, repr=False)     # the catalogs
    # the checks not graded by choice (skipped, deselected): their points, by the reason, in
    # the language; `max_score` leaves them out
    not_graded: tuple[tuple[str, float], ...] = ()

    @property
    def total(self) -> str:
        """The score as every rendering shows it: "8 / 8 (6 points not graded: skipped)"."""
        text = f"{self.score:g} / {self.max_score:g}"
        if self.not_graded:
            text += " (" + "; ".join(self.say("{points} points not graded: {reason}",
                                              {"points": f"{points:g}", "reason": reason})
                                     for reason, points in self.not_graded) + ")"
        return text

    @property
    def rows(self) -> list[Row]:
        return [row for part in self.parts for row in part.rows]

    @property
    def student(self) -> str:
        """Whom the feedback is for, as its heading names them: in nbgrader's layout
        (`submitted/<student>/<assignment>/`, the submission "alice/hw1") the student's
        folder, not the assignment's, which the page names on its own."""
        head, _, tail = self.submission.rpartition("/")
        return head if head and self.assignment and tail == self.assignment else self.submission

    def part(self, group_id: str) -> Part | None:
        return next((part for part in self.parts if part.group == group_id), None)

    @property
    def summary(self) -> str:
        rows = [row for row in self.rows if row.graded]
        return self.say("{passed} of {total} checks passed",
                        {"passed": sum(row.passed for row in rows), "total": len(rows)})

    def say(self, template: str, params: dict | None = None) -> str:
        """`template` in the feedback's language."""
        return render(template, params, self.lang, self.folders)


def feedback(course: Course, report: SubmissionReport, lang: str) -> Feedback:
    """The report rendered in `lang`: a row for every check of its assignment (a check the report
    lacks is not graded, and says why), the notes, the score out of the assignment's points."""
    assignment = report.assignment
    graded = {test.id: test for test in report.tests}
    parts: dict[str, list[Row]] = {}
    not_graded: dict[str, float] = {}
    wanted = course.assignment(assignment).test_ids() if assignment else []
    for test_id in wanted:
        group_id, _, name = test_id.partition(".")
        test = graded.get(test_id)
        points = course.assignment(assignment).points_of(test_id)
        chosen = test is not None and not test.graded      # skipped or deselected
        if test is None:
            template = "not graded: {reason}"
            params = {"reason": phrase("the grader failed") if report.error
                      else phrase("no notebook held it")}
            score, passed = 0.0, False
        else:
            template, params, score, passed = test.template, test.params, test.points, test.passed
        if chosen:
            score, passed = 0.0, False
        failure = "" if passed else say(template, params, lang, course)
        shown = say(name, None, lang, course)
        parts.setdefault(group_id, []).append(Row(
            id=test_id, group=group_id, name=shown,
            title=f"{_stubs(course, assignment, group_id)}: {shown}", passed=passed, score=score,
            max_score=points, failure=failure,
            message=say("passed", None, lang, course) if passed else failure,
            kind="" if passed else message_kind(template, params, folders_of(course)),
            graded=not chosen))
        if chosen:
            reason = failure.partition(": ")[2] or failure
            not_graded[reason] = not_graded.get(reason, 0.0) + points
    notes = [say(note.template, note.params, lang, course) for note in report.notes]
    for notebook in report.notebooks:
        notes += [f"{notebook.name}: " + say(note.template, note.params, lang, course)
                  for note in notebook.notes]
    if report.error:
        notes.insert(0, say("the grader failed on this submission, so nothing was scored; your "
                            "instructor has the details", None, lang, course))
    return Feedback(
        lang=lang, assignment=assignment,
        assignment_title=course.assignment(assignment).title(lang) if assignment else "",
        submission=report.submission,
        score=round(sum(row.score for rows in parts.values() for row in rows), 4),
        max_score=max_points(course, report) - sum(not_graded.values()), notes=tuple(notes),
        parts=tuple(Part(group_id, _stubs(course, assignment, group_id), tuple(rows))
                    for group_id, rows in parts.items()),
        seconds=report.seconds,
        notebooks=tuple({"name": nb.name, "seconds": nb.seconds, "sandbox": nb.sandbox,
                         "peak_memory_mb": nb.peak_memory_mb,
                         **{k: v for k, v in nb.extra.items() if k != "output_tail"}}
                        for nb in report.notebooks),
        grader_error=report.error,
        internal_errors=tuple(test.id for test in report.tests if test.internal),
        folders=folders_of(course), not_graded=tuple(not_graded.items()))


# -- results.json ----------------------------------------------------------------------------------
def results_json(view: Feedback) -> dict:
    """Results in Gradescope's format (also what `tfcourse grade` writes for every submission)."""
    return {
        "score": view.score,
        "max_score": view.max_score,
        "output": "\n".join(view.notes),
        "tests": [{"name": row.title, "number": row.id, "score": row.score,
                   "max_score": row.max_score, "status": "passed" if row.passed else "failed",
                   "output": row.message, "visibility": "visible",
                   **({"extra_data": {"kind": row.kind}} if row.kind else {})}
                  for row in view.rows],
        "visibility": "visible",
        "execution_time": round(view.seconds, 1),
        "extra_data": {
            "assignment": view.assignment,
            "submission": view.submission,
            "notebooks": [dict(notebook) for notebook in view.notebooks],
            "grader_error": view.grader_error,
            "internal_errors": list(view.internal_errors),
            # checks not graded by choice (skipped, deselected): max_score leaves them out
            "not_graded": [row.id for row in view.rows if not row.graded],
            "not_graded_points": sum(points for _, points in view.not_graded),
            "total": view.total,
        },
    }


def gradescope_json(course: Course, report: SubmissionReport, lang: str) -> dict:
    """`results_json` of the report rendered in `lang`."""
    return results_json(feedback(course, report, lang))


# -- feedback.md and feedback.html -----------------------------------------------------------------
ABOUT_CHECKS = ("The hidden checks ran your code on inputs you have not seen. Each message says "
                "what they found; the checks themselves stay with your instructor.")


# What Markdown reads as its own in a message's text (which may hold a student's words: a cell's
# error, a file's name): emphasis, code, tables, strikethrough, escapes and links ("](") anywhere
# (an underscore inside a word is not emphasis, nor a bracket of "shape [2, 3]"); headings,
# quotes, lists, rules, setext underlines and link definitions at a line's start. Escaped, the
# text is only text.
_INLINE = re.compile(r"([\\`*|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|(?<=\])\()")
_LINE_START = re.compile(r"^([#>+=\[-]|\d+(?=[.)]))")


def markdown_text(text: str) -> str:
    """`text` as Markdown that shows it as it is, on one line: HTML escaped, Markdown's marks
    escaped, line breaks (\\n, \\r, U+2028...) as spaces."""
    text = _INLINE.sub(r"\\\1", html.escape(" ".join(text.splitlines()), quote=False).strip())
    match = _LINE_START.match(text)
    if match is None:
        return text
    if match.group(1)[0].isdigit():                 # "3." and "3)": "3\." and "3\)"
        return text[:match.end()] + "\\" + text[match.end():]
    return "\\" + text


def _note_items(view: Feedback) -> list[list[str]]:
    """Each note as one list item, in lines: a note may hold several (a cell's error message), and
    a line break in a name (a notebook called "a\\nb.ipynb") stays inside its note."""
    return [lines for note in view.notes
            if (lines := [line for line in note.splitlines() if line.strip()])]


def _part_points(part: Part) -> str:
    """A part's points: those of its graded checks, "–" when none was."""
    if not any(row.graded for row in part.rows):
        return f"– / {sum(row.max_score for row in part.rows):g}"
    return f"{part.score:g} / {part.max_score:g}"


def feedback_markdown(view: Feedback) -> str:
    """The student's feedback as Markdown: score, notes, and a table of checks per part."""
    lines = [f"# {view.say('Feedback')}: {markdown_text(view.student)}", ""]
    if view.assignment:
        lines += [f"**{view.assignment_title}** ({view.assignment})", ""]
    lines.append(f"**{view.say('Score')}: {view.total}**"
                 + (f" · {view.summary}" if view.rows else ""))
    lines.append("")
    notes = _note_items(view)
    if notes:
        lines.append(f"## {view.say('About your notebook')}")
        for note in notes:       # further lines after a hard break (\\), in the same list item
            lines += [f"{'  ' if i else '- '}{markdown_text(line)}"
                      f"{'' if i == len(note) - 1 else chr(92)}" for i, line in enumerate(note)]
        lines.append("")
    for part in view.parts:
        lines += [f"## {part.stubs}: {_part_points(part)}", "",
                  f"| | {view.say('Check')} | {view.say('Points')} | {view.say('Message')} |",
                  "|---|---|---|---|"]
        lines += [f"| {row.mark} | {markdown_text(row.name)} | {row.points} | "
                  f"{markdown_text(row.message)} |"
                  for row in part.rows]
        lines.append("")
    if view.rows:
        lines.append(view.say(ABOUT_CHECKS))
    return "\n".join(lines).rstrip("\n") + "\n"


def part_view(stubs: str, rows: list[tuple]) -> dict:
    """One part of the notebook as templates/part.html shows it: its stubs, its points, and a row
    per check, (passed, name, score, max_score, message[, graded]). A check not graded (skipped,
    deselected) is left out of the points."""
    rows = [(*row, True) if len(row) == 5 else tuple(row) for row in rows]
    return {"stubs": stubs,
            "score": sum(row[2] for row in rows if row[5]),
            "most": sum(row[3] for row in rows if row[5]),
            "rows": [{"passed": passed, "name": name, "score": score, "most": most,
                      "message": message, "graded": graded}
                     for passed, name, score, most, message, graded in rows]}


def feedback_html(view: Feedback) -> str:
    """The same feedback as a page of its own (plain HTML and CSS, nothing to load; see
    templates/feedback.html)."""
    return render_page(
        "feedback.html", view=view, notes=_note_items(view), about=ABOUT_CHECKS,
        parts=[part_view(part.stubs, [(row.passed, row.name, row.score, row.max_score,
                                       row.message, row.graded) for row in part.rows])
               for part in view.parts])


def private_folder(path: Path) -> None:
    """Make `path` and any missing folder above it, each readable by its owner only (0700): later
    sandboxes and other users must not read results. Folders already there are left as they are."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)                     # whatever the umask


def strict_json(data) -> str:
    """Valid JSON whatever numbers the report holds (see `finite`)."""
    return json.dumps(finite(data), indent=1, ensure_ascii=False, allow_nan=False)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` (UTF-8; what cannot be encoded is replaced) to `path` all at once, readable by
    its owner only (0600), in a folder made 0700 if it is new. The file reaches the disk before
    it is renamed into place, and the rename after (fsync of the folder): a machine that loses
    power leaves the old file or the new one, never an empty one under the name."""
    private_folder(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o600)
            stream.write(text.encode("utf-8", errors="replace"))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
        sync_folder(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def sync_folder(folder: Path) -> None:
    """Make the names in `folder` (a rename into it) reach the disk."""
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def write_results(course: Course, report: SubmissionReport, folder: Path, lang: str,
                  fingerprint: str = "") -> dict:
    """A submission's results.json, feedback.md and feedback.html in `folder` (0600 files in a 0700
    folder); returns the results."""
    view = feedback(course, report, lang)
    results = results_json(view)
    private_folder(folder)
    os.chmod(folder, 0o700)
    if fingerprint:
        results["extra_data"]["fingerprint"] = fingerprint
    write_atomically(folder / "feedback.md", feedback_markdown(view))
    write_atomically(folder / "feedback.html", feedback_html(view))
    write_atomically(folder / "results.json", strict_json(results))
    return results
