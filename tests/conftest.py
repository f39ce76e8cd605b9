"""Shared fixtures: the course, and building and grading submissions the way students make them.

A submission is built from the released notebook (what a student starts from) with each answer cell
filled in: by default with the course's solution, or with the code a test gives for that cell.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tfcourse import notebook  # noqa: E402
from tfcourse.course import load_course  # noqa: E402

NOTEBOOK_OF = {"01-attention": "attention.ipynb", "02-layers": "layers.ipynb",
               "03-sorting": "sorting.ipynb"}


@pytest.fixture(scope="session")
def course():
    return load_course(ROOT)


def solution_cells(assignment: str) -> dict[str, str]:
    """grade_id -> the course's solution code of each answer cell (markers removed)."""
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    return {notebook.grade_id(cell): notebook.strip_solution_markers(notebook.text(cell))
            for cell in nb.cells if notebook.is_solution(cell)}


def make_submission(folder: Path, assignment: str, answers: dict[str, str] | None = None,
                    edit=None) -> Path:
    """A student's folder: the released notebook, answer cells filled in, then `edit(nb)`.

    `answers` maps an answer cell's grade_id to the code a student wrote there; cells not named
    get the course's solution. Returns the folder (the helper modules are copied beside).
    """
    folder.mkdir(parents=True, exist_ok=True)
    release = ROOT / "release" / assignment
    nb = nbformat.read(str(release / NOTEBOOK_OF[assignment]), as_version=4)
    filled = {**solution_cells(assignment), **(answers or {})}
    for cell in nb.cells:
        gid = notebook.grade_id(cell)
        if notebook.is_solution(cell) and gid in filled:
            cell.source = filled[gid]
    if edit is not None:
        nb = edit(nb) or nb
    nbformat.write(nb, str(folder / NOTEBOOK_OF[assignment]))
    for extra in release.glob("*.py"):
        (folder / extra.name).write_text(extra.read_text())
    return folder


def replace_in(source: str, old: str, new: str, count: int = 1) -> str:
    """`source` with `old` replaced by `new`, failing loudly if `old` is not there."""
    assert old in source, f"{old!r} not found in the solution; the test is out of date"
    return source.replace(old, new, count)


def scores(results: dict) -> dict[str, float]:
    return {test["number"]: test["score"] for test in results["tests"]}


def lost(results: dict) -> set[str]:
    return {test["number"] for test in results["tests"] if test["status"] != "passed"}


@pytest.fixture(scope="session")
def grade(course):
    """grade(path, assignment=None, skip=()) -> Gradescope-style results of one submission."""
    from autograder.runner import grade_one

    def run(path: Path, assignment: str | None = None, skip=(), lang: str | None = None):
        _, results = grade_one(course, Path(path), assignment=assignment, skip=list(skip),
                               lang=lang)
        return results
    return run


def strip(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
