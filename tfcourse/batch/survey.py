"""What was given to grade: the submissions among the paths of the command line, by the rule in
`expand`'s docstring, and what does not fit it (ignored, with why; warnings about the folders).
The input folders are only read, and never through a link (submission/files.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse.course import Course

from ..submission.files import Entry, KIND_WORDS, Refused, is_notebook_name, listing, root_kind


def course_notebooks(course: Course) -> set[str]:
    return {name for assignment in course.assignments for name in assignment.notebooks}


def printable(text: str) -> str:
    """A name as it can be shown and written as UTF-8: undecodable bytes become U+FFFD, control
    characters (a newline in a folder's name) '?'."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in text)


# -- what was given: submissions, and what is not one ---------------------------------------------
@dataclass
class Found:
    """One submission: its name (its results folder below --out), its path, the instructor's
    folder it was found in (no link is followed below it), and a warning about it."""
    name: str
    path: Path
    within: Path | None = None
    note: str = ""


@dataclass
class Survey:
    """What was given: the submissions; what is not one, as (path, why); and warnings about the
    folders given, as (path, what)."""
    submissions: list[Found] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _stem(name: str) -> str:
    return name[:-len(".ipynb")] if is_notebook_name(name) and name != ".ipynb" else name


def _name_of(path: Path) -> str:
    """A command-line path's name: `..` and `.` are named after the folder they stand for."""
    name = Path(os.path.abspath(path)).name or "submission"
    return name if root_kind(path) == "folder" else _stem(name)


def _refused_note(kind: str) -> str:
    return (f"{KIND_WORDS[kind]}: not followed; graded 0 with a note saying so" if kind != "file"
            else "")


class _Rule:
    """The rule of `survey`, for one course; `exclude` (the results folder) is never a
    submission."""

    def __init__(self, course: Course, exclude: Path | None, out: Survey):
        self.known = course_notebooks(course)
        self.assignments = {a.id for a in course.assignments}
        self.exclude = _identity(exclude) if exclude else None
        self.out = out

    def holds_course_notebook(self, base: Path, parts: tuple[str, ...]) -> bool:
        """Whether a folder holds a notebook named as the course's, in it or one folder down."""
        try:
            entries = listing(base, parts, depth=2)
        except (Refused, OSError):
            return False
        return any(e.kind != "folder" and e.name in self.known for e in entries)

    def command_line(self, path: Path) -> None:
        """A path given on the command line: one submission, or a class folder."""
        kind = root_kind(path)
        if kind == "missing":
            self.out.submissions.append(Found(_name_of(path), path, None, "does not exist"))
            return
        if kind != "folder":
            self.out.submissions.append(Found(_name_of(path), path, None, _refused_note(kind)))
            return
        try:
            entries = [e for e in listing(path, (), depth=1) if not e.name.startswith(".")]
        except OSError as error:                # not ours to read: its grader says so
            self.out.submissions.append(Found(_name_of(path), path, None, str(error)))
            return
        course_named = [e.name for e in entries if e.kind != "folder" and e.name in self.known]
        neighbours = [e.name for e in entries if e.kind != "folder"
                      and is_notebook_name(e.name) and e.name not in self.known]
        neighbours += [e.name + "/" for e in entries if e.kind == "folder"
                       and self.holds_course_notebook(path, (e.name,))]
        if course_named and not neighbours:
            self.out.submissions.append(Found(_name_of(path), path))
            return
        if course_named:
            self.out.warnings.append((str(path), (
                f"holds {', '.join(course_named)} beside other submissions "
                f"({', '.join(neighbours[:5])}{', ...' if len(neighbours) > 5 else ''}): graded "
                f"as a class folder, each entry a submission of its own")))
        if not entries:
            self.out.warnings.append((str(path), "an empty folder: nothing to grade"))
        for entry in entries:
            self.class_entry(path, entry)

    def class_entry(self, folder: Path, entry: Entry) -> None:
        """An entry of a class folder: a notebook file or a folder is one student's."""
        path = folder / entry.name
        if self.exclude and _identity(path) == self.exclude:
            return
        if entry.kind == "folder":
            self.student_folder(folder, entry.name)
        elif is_notebook_name(entry.name):
            self.out.submissions.append(Found(_stem(entry.name), path, folder,
                                              _refused_note(entry.kind)))
        elif entry.kind == "link" and os.path.isdir(path):    # a stat: nothing is read there
            self.out.submissions.append(Found(entry.name, path, folder, _refused_note("link")))
        else:
            self.out.ignored.append((str(path), f"{KIND_WORDS[entry.kind]}, not a notebook "
                                                 f"nor a folder: ignored"))

    def student_folder(self, folder: Path, name: str) -> None:
        """One student's folder; in nbgrader's layout (submitted/<student>/<assignment>/), each
        of its folders named as an assignment is a submission."""
        try:
            inner = [e for e in listing(folder, (name,), depth=1) if not e.name.startswith(".")]
        except (Refused, OSError) as error:     # swapped for a link since, or not ours to read
            self.out.submissions.append(Found(name, folder / name, folder, str(error)))
            return
        if any(e.kind != "folder" and is_notebook_name(e.name) for e in inner):
            self.out.submissions.append(Found(name, folder / name, folder))
            return
        assignments = [e for e in inner if e.kind == "folder" and e.name in self.assignments]
        if not assignments:
            self.out.submissions.append(Found(name, folder / name, folder))
            return
        for entry in inner:
            if entry in assignments:
                self.out.submissions.append(Found(f"{name}/{entry.name}",
                                                  folder / name / entry.name, folder))
                self.check_submitted(folder, (name, entry.name))
            else:
                self.out.ignored.append((str(folder / name / entry.name),
                                         "beside nbgrader's assignment folders, not one of "
                                         "them: ignored"))


    def check_submitted(self, folder: Path, parts: tuple[str, str]) -> None:
        """nbgrader's submitted/<student>/<assignment>/: a warning when it lacks the
        timestamp.txt or submission_secret.txt that nbgrader's `submit` puts there (a folder
        placed by hand):
        its feedback's release would stop nbgrader's `release_feedback` for the whole class."""
        try:
            names = {e.name for e in listing(folder, parts, depth=1) if e.kind == "file"}
        except (Refused, OSError):
            return
        missing = [name for name in (TIMESTAMP, SECRET) if name not in names]
        if missing:
            student, assignment = parts
            self.out.warnings.append((str(folder.joinpath(*parts)), NO_TIMESTAMP.format(
                student=student, assignment=assignment, missing=" and ".join(missing))))


TIMESTAMP, SECRET = "timestamp.txt", "submission_secret.txt"
NO_TIMESTAMP = (
    "no {missing}, so not collected by nbgrader (its submit writes timestamp.txt and "
    "submission_secret.txt): graded, but `nbgrader release_feedback {assignment}` stops for the "
    "whole class at this folder. Hand {student} their feedback.html yourself and release the "
    "others' with --CourseDirectory.student_id_exclude={student}")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
        return info.st_dev, info.st_ino
    except OSError:
        return None


def survey(course: Course, paths: list[Path], exclude: Path | None = None) -> Survey:
    """The submissions among `paths` by the rule in `expand`'s docstring, with what does not fit
    it: what was ignored, and warnings about the folders given."""
    found = Survey()
    rule = _Rule(course, exclude, found)
    for path in paths:
        rule.command_line(Path(path))
    names = _unique([(item.name, item.path) for item in found.submissions])
    for item, (name, _) in zip(found.submissions, names):
        item.name = name
    return found


def expand(course: Course, paths: list[Path], exclude: Path | None = None
           ) -> list[tuple[str, Path]]:
    """(name, path) of each submission among `paths` (the command line), by this rule (also in
    docs/instructor-guide.md, "Collect"):

    - A path that is not a folder is one submission (a notebook; a link or a pipe is one too, and
      its grader refuses it with a note). A folder is one submission when it holds a notebook
      named as one of the course's and no other submission: no other notebook, no folder holding
      a course notebook (in it or one folder down).
    - Any other folder is a class folder: each of its entries is one student's. A notebook file
      is one submission (named without .ipynb); a folder is one submission, unless it holds no
      notebook and has folders named as the course's assignments (nbgrader's submitted/<student>/
      <assignment>/): then each of those is one ("student/assignment"). A link to a folder is a
      submission its grader refuses. Anything else is ignored, and `survey` says why.
    - Hidden entries (.ipynb_checkpoints, .DS_Store) and `exclude` (the results folder) are left
      out. Links are never followed, not even one given on the command line: only the folders
      above a path given are the instructor's to choose.

    So a stray notebook beside the students' folders is one more submission, never the whole class;
    a student's folder named like a notebook is a folder, so a student's.
    """
    return [(item.name, item.path) for item in survey(course, paths, exclude).submissions]


def _safe(name: str) -> str:
    """A name usable as a folder below --out: no empty, `.` or `..` part."""
    parts = [part if part not in ("", ".", "..") else "_" for part in name.split("/")]
    return "/".join(parts)


def _unique(found: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Names for the results folders, one each: two submissions with the same name
    (solutions/<assignment>, release/<assignment>; alice/ and alice.ipynb) get their parent
    folder's name in front, then the whole file name, then a number."""
    counts: dict[str, int] = {}
    for name, _ in found:
        counts[_safe(name)] = counts.get(_safe(name), 0) + 1
    taken: set[str] = set()
    unique = []
    for name, path in found:
        name = _safe(name)
        absolute = Path(os.path.abspath(path))
        options = [name] if counts[name] == 1 else []
        options += [_safe(f"{absolute.parent.name}/{name}"),
                    _safe(f"{absolute.parent.name}/{absolute.name}")]
        options += [f"{options[-1]}~{number}" for number in range(2, len(found) + 2)]
        chosen = next(option for option in options if option not in taken)
        taken.add(chosen)
        unique.append((chosen, path))
    return unique
