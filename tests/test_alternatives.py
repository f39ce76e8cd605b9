"""Correct solutions in other styles than the course's get full marks, end to end.

A grader that only accepts the course's own way of writing a piece is wrong: each alternative in
`alternatives.py` is a complete, correct submission in a style a student might choose (einsum,
unflatten, helper cells, a sublayer wrapper, F.linear, a scaled-embedding module...). One whole
03-sorting submission is graded with the training check as well.
"""
import json

import nbformat
import pytest

from alternatives import ALTERNATIVES
from conftest import make_submission
from tfcourse import notebook

TRAINING = "trained.accuracy"


def build(folder, alternative):
    def add_cells(nb):
        for before, code in alternative.added.items():
            index = next(i for i, cell in enumerate(nb.cells)
                         if notebook.grade_id(cell) == before)
            nb.cells.insert(index, nbformat.v4.new_code_cell(code))
    return make_submission(folder, alternative.assignment, answers=alternative.answers,
                           edit=add_cells)


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """alternative name -> its Gradescope-style results."""
    from autograder.runner import grade_many

    root = tmp_path_factory.mktemp("alternatives")
    out = {}
    for train in (False, True):
        batch = [alt for alt in ALTERNATIVES if alt.train == train]
        folders = [build(root / "submissions" / alt.name, alt) for alt in batch]
        for outcome in grade_many(course, folders, root / "graded", jobs=2, lang="en",
                                  progress=False, skip=[] if train else [TRAINING]):
            out[outcome.name] = json.loads((outcome.folder / "results.json").read_text())
    return out


def test_enough_alternatives_and_one_trained():
    assert len(ALTERNATIVES) >= 5
    assert any(alt.train and alt.assignment == "03-sorting" for alt in ALTERNATIVES)


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=[alt.name for alt in ALTERNATIVES])
def test_alternative_gets_full_marks(graded, alternative):
    results = graded[alternative.name]
    skipped = set() if alternative.train else {TRAINING}
    failed = {test["number"]: test["output"] for test in results["tests"]
              if test["score"] < test["max_score"] and test["number"] not in skipped}
    assert results["max_score"] > 0
    assert not failed, json.dumps(failed, indent=1)
