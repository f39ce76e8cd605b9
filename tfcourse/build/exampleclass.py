"""The example class: a few made-up submissions that ship with the course, to grade before a real
class (`tfcourse grade examples/class --out graded --skip trained.accuracy && tfcourse report
graded`, README.md).

It is generated, never edited: each submission is the release (`release/`, as the build writes it)
with its answer cells filled in from the course's solution (`source/`), then edited as one bug of
the course's catalogue (`tests/catalogue/`, the bugs the hidden graders are tested against) or as
one cheat, so it follows the solution, the release and the catalogue as they change.
`tfcourse build` writes it; `tfcourse build --check` fails when the committed one is stale. The
folders are nbgrader's `<student>/<assignment>/` layout (with the timestamp.txt its collect
leaves), every student's name starting with `example-`, so that none is mistaken for a real
student's work; examples/README.md says what each is. Notebooks carry no outputs.

A course without a catalogue (no `tests/catalogue/` in its folder) has no example class.
"""
from __future__ import annotations

import importlib
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

# The cheat: torch's own attention inside the stub, which the course's rule forbids.
CHEAT = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """Attention of every query over all keys (torch's own: what the course's rule forbids)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return out, scores.softmax(dim=-1)
'''

# student -> (what it is, {assignment: None for the solution, "release" for the release as it
# is, "cheat" for CHEAT, else a catalogue bug's name})
CLASS = {
    "solution": ("the course's solution, in every assignment",
                 {"01-attention": None, "02-layers": None, "03-sorting": None}),
    "untouched": ("the release handed in as it is: every stub still raises NotImplementedError",
                  {"01-attention": "release", "02-layers": "release", "03-sorting": "release"}),
    "mask-inverted": ("the mask's meaning inverted (~mask): True read as keep",
                      {"01-attention": "sdpa_mask_inverted"}),
    "no-scale": ("the scores not divided by sqrt(d_k)", {"01-attention": "sdpa_no_scale"}),
    "heads-no-transpose": ("the heads split with a view alone, without the transpose",
                           {"01-attention": "mha_split_without_transpose"}),
    "masked-fill-dropped": ("scores.masked_fill(...) whose result is not kept",
                            {"01-attention": "sdpa_masked_fill_result_dropped"}),
    "cheat-torch-sdpa": ("torch's F.scaled_dot_product_attention inside the stub",
                         {"01-attention": "cheat"}),
}


def has_example_class(course: Course) -> bool:
    return (course.root / "tests" / "catalogue" / "__init__.py").is_file()


def _catalogue(course: Course) -> dict:
    """The course's catalogue of bugs, by name (tests/catalogue/, imported from the course)."""
    tests = str(course.root / "tests")
    added = tests not in sys.path
    if added:
        sys.path.insert(0, tests)
    try:
        catalogue = importlib.import_module("catalogue")
        return {bug.name: bug for bug in catalogue.every_bug()}
    finally:
        if added:
            sys.path.remove(tests)


def _solution_cells(course: Course, assignment: str) -> dict[str, str]:
    cells = {}
    for source in assignment_source(course, assignment).notebooks:
        for cell in source.nb.cells:
            if notebook.is_solution(cell):
                cells[notebook.grade_id(cell)] = notebook.strip_solution_markers(
                    notebook.text(cell))
    return cells


def _answers(course: Course, assignment: str, what: str | None, bugs: dict) -> dict | None:
    """grade_id -> code of the answer cells (None: the release as it is)."""
    if what == "release":
        return None
    answers = _solution_cells(course, assignment)
    if what is None:
        return answers
    if what == "cheat":
        answers["sdpa-code"] = CHEAT
        return answers
    bug = bugs[what]
    if bug.port is not None or bug.assignment != assignment:
        raise ValueError(f"example class: bug {what} does not edit {assignment}'s solution")
    for cell, edits in bug.edits.items():
        code = answers[cell]
        for old, new in edits:
            if old not in code:
                raise ValueError(f"example class: bug {what}: {old!r} is not in the solution's "
                                 f"{cell} cell any more (tests/catalogue/ is out of date)")
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


def _readme() -> str:
    lines = ["# The example class", "",
             "Made-up submissions, generated by `tfcourse build` from `source/`, `release/` and "
             "the catalogue of bugs in `tests/catalogue/` (never edit them; "
             "`tfcourse build --check` fails when they are stale). Each folder is a student, in "
             "nbgrader's `<student>/<assignment>/` layout; no real student's work is here.", "",
             "Grade them and write the class report, from the course folder:", "",
             "```bash",
             "tfcourse grade examples/class --out graded --skip trained.accuracy && "
             "tfcourse report graded",
             "```", "",
             "The scores it prints are in the README's *Try it on the example class*.", "",
             "| student | what it is | assignments |", "|---|---|---|"]
    for student, (said, assignments) in CLASS.items():
        lines.append(f"| `{PREFIX}{student}` | {said} | {', '.join(assignments)} |")
    return "\n".join(lines) + "\n"


def example_class(course: Course, release: Path | None = None) -> dict[Path, str]:
    """Path -> text of every file of the example class, made from `release` (default: the
    course's release/) and the solution; empty for a course without a catalogue."""
    if not has_example_class(course):
        return {}
    release = release or course.release_dir
    bugs = _catalogue(course)
    root = course.root / FOLDER
    files = {root.parent / "README.md": _readme()}
    by_id = {assignment.id: assignment for assignment in course.assignments}
    for student, (_, assignments) in CLASS.items():
        for assignment_id, what in assignments.items():
            folder = root / f"{PREFIX}{student}" / assignment_id
            answers = _answers(course, assignment_id, what, bugs)
            for name in by_id[assignment_id].notebooks:
                files[folder / name] = _notebook_text(release / assignment_id / name, answers)
            for helper in sorted((release / assignment_id).glob("*.py")):
                files[folder / helper.name] = helper.read_text(encoding="utf-8")
            files[folder / "timestamp.txt"] = TIMESTAMP      # as nbgrader's submit writes it
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
