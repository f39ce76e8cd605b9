"""The example class: a few made-up submissions that ship with the course, to grade before a real
class (`tfcourse grade examples/class --out graded-example --skip trained.accuracy && tfcourse
report graded-example`, README.md).

It is generated, never edited, as the course's `examples/class.yaml` says: each submission is the
release (`release/`, as the build writes it) with its answer cells filled in from the course's
solution (`source/`), then edited as one bug of the course's catalogue (for this course
`tests/catalogue/`, the bugs the hidden graders are tested against) or with cells of its own (a
cheat), so it follows the solution, the release and the catalogue as they change.
`tfcourse build` writes it; `tfcourse build --check` fails when the committed one is stale. The
folders are nbgrader's `<student>/<assignment>/` layout (with the timestamp.txt its collect
leaves), every student's name starting with `example-`, so that none is mistaken for a real
student's work; examples/README.md says what each is. Notebooks carry no outputs.

A course without `examples/class.yaml` has no example class.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

from .. import notebook
from ..course import Course
from ..source import assignment_source

FOLDER = Path("examples") / "class"
# Each submission's time, as nbgrader's submit and collect write it: the folders read as collected
# by nbgrader (without it, `tfcourse grade` warns that `release_feedback` would stop at them).
TIMESTAMP = "2026-01-05 09:00:00.000000 UTC\n"
PREFIX = "example-"

SPEC = Path("examples") / "class.yaml"     # the course's: who the students are, what each did


def has_example_class(course: Course) -> bool:
    return (course.root / SPEC).is_file()


def _spec(course: Course) -> dict:
    import yaml

    spec = yaml.safe_load((course.root / SPEC).read_text(encoding="utf-8")) or {}
    if not isinstance(spec.get("students"), dict):
        raise ValueError(f"{SPEC}: no `students`")
    return spec


def _catalogue(course: Course, folder: str) -> dict:
    """The course's catalogue of bugs, by name: the `catalogue` package of `folder`, read in a
    process of its own started there (the engine edits no import path), as
    {name: {"assignment", "edits", "port"}}."""
    import json
    import subprocess

    code = ("import json, catalogue\n"
            "print(json.dumps({bug.name: {'assignment': bug.assignment, 'edits': bug.edits, "
            "'port': bug.port is not None} for bug in catalogue.every_bug()}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=course.root / folder,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise ValueError(f"{SPEC}: the catalogue in {folder}/ could not be read:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _solution_cells(course: Course, assignment: str) -> dict[str, str]:
    cells = {}
    for source in assignment_source(course, assignment).notebooks:
        for cell in source.nb.cells:
            if notebook.is_solution(cell):
                cells[notebook.grade_id(cell)] = notebook.strip_solution_markers(
                    notebook.text(cell))
    return cells


def _answers(course: Course, assignment: str, what, bugs) -> dict | None:
    """grade_id -> code of the answer cells (None: the release as it is), as SPEC says."""
    if what == "release":
        return None
    answers = _solution_cells(course, assignment)
    if what == "solution":
        return answers
    if not isinstance(what, dict) or not ({"bug"} <= set(what) or {"cells"} <= set(what)):
        raise ValueError(f"{SPEC}: {assignment}: {what!r} is none of solution, release, "
                         f"{{bug: NAME}}, {{cells: {{ID: CODE}}}}")
    for cell, code in (what.get("cells") or {}).items():
        if cell not in answers:
            raise ValueError(f"{SPEC}: {assignment} has no answer cell {cell!r}")
        answers[cell] = code
    if "bug" not in what:
        return answers
    name = what["bug"]
    bug = bugs().get(name)
    if bug is None:
        raise ValueError(f"{SPEC}: the catalogue has no bug {name!r}")
    if bug["port"] or bug["assignment"] != assignment:
        raise ValueError(f"{SPEC}: bug {name} does not edit {assignment}'s solution")
    for cell, edits in bug["edits"].items():
        code = answers[cell]
        for old, new in edits:
            if old not in code:
                raise ValueError(f"{SPEC}: bug {name}: {old!r} is not in the solution's "
                                 f"{cell} cell any more (the catalogue is out of date)")
            code = code.replace(old, new, 1)
        answers[cell] = code
    return answers


def _notebook_text(path: Path, answers: dict | None) -> str:
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if answers is not None and notebook.is_solution(cell) and \
                notebook.grade_id(cell) in answers:
            cell.source = answers[notebook.grade_id(cell)]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nbformat.writes(nb) + "\n"


def _readme(students: dict) -> str:
    lines = ["# The example class", "",
             "Made-up submissions, generated by `tfcourse build` from `class.yaml`, `source/`, "
             "`release/` and the course's catalogue of bugs (never edit them; "
             "`tfcourse build --check` fails when they are stale). Each folder is a student, in "
             "nbgrader's `<student>/<assignment>/` layout; no real student's work is here.", "",
             "Grade them and write the class report, from the course folder:", "",
             "```bash",
             "tfcourse grade examples/class --out graded-example --skip trained.accuracy && "
             "tfcourse report graded-example --out report-example",
             "```", "",
             "The scores it prints are in the course's README.", "",
             "| student | what it is | assignments |", "|---|---|---|"]
    for student, said in students.items():
        assignments = [key for key in said if key != "about"]
        lines.append(f"| `{PREFIX}{student}` | {said.get('about', '')} | "
                     f"{', '.join(assignments)} |")
    return "\n".join(lines) + "\n"


def example_class(course: Course, release: Path | None = None) -> dict[Path, str]:
    """Path -> text of every file of the example class, made from `release` (default: the
    course's release/) and the solution, as SPEC says; empty for a course without SPEC."""
    if not has_example_class(course):
        return {}
    import functools

    release = release or course.release_dir
    spec = _spec(course)
    bugs = functools.cache(lambda: _catalogue(course, str(spec.get("catalogue", "tests"))))
    root = course.root / FOLDER
    files = {root.parent / "README.md": _readme(spec["students"])}
    by_id = {assignment.id: assignment for assignment in course.assignments}
    for student, said in spec["students"].items():
        for assignment_id, what in said.items():
            if assignment_id == "about":
                continue
            if assignment_id not in by_id:
                raise ValueError(f"{SPEC}: {student}: no assignment {assignment_id!r}")
            folder = root / f"{PREFIX}{student}" / assignment_id
            answers = _answers(course, assignment_id, what, bugs)
            for name in by_id[assignment_id].notebooks:
                files[folder / name] = _notebook_text(release / assignment_id / name, answers)
            for helper in sorted((release / assignment_id).glob("*.py")):
                files[folder / helper.name] = helper.read_text(encoding="utf-8")
            files[folder / "timestamp.txt"] = TIMESTAMP      # as nbgrader's submit writes them:
            files[folder / "submission_secret.txt"] = f"{PREFIX}{student}-{assignment_id}\n"
            # release_feedback reads both (the secret names the feedback's hashed folder)
    return files


def stale(course: Course, release: Path | None = None) -> list[str]:
    """The example class's files that differ from what the build writes, or should not be."""
    wanted = example_class(course, release)
    if not wanted:
        return []
    found = []
    for path, text in wanted.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            found.append(f"{path.relative_to(course.root)} is stale")
    root = course.root / FOLDER
    for path in sorted(root.rglob("*")) if root.exists() else []:
        if path.is_file() and path not in wanted:
            found.append(f"{path.relative_to(course.root)} should not be there")
    return found


def write(course: Course, log=print) -> None:
    """Write the example class (from the course's release/), removing files it no longer has."""
    wanted = example_class(course)
    if not wanted:
        return
    changed = 0
    for path, text in wanted.items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed += 1
    root = course.root / FOLDER
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file() and path not in wanted:
            path.unlink()
            changed += 1
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if changed:
        log(f"wrote {FOLDER}/ ({changed} file(s) changed): the example class")
