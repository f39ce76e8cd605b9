"""Correct solutions in other styles than the course's get full marks, end to end.

A grader that only accepts the course's own way of writing a piece is wrong: each alternative in
`alternatives.py` is a complete, correct submission in a style a student might choose (einsum,
unflatten, helper cells, a sublayer wrapper, F.linear, a scaled-embedding module...), and the
ports are public code (the Annotated Transformer, nanoGPT, course notes) renamed to the contract:
modules registered under two names, output layers tied in either order, helpers with extra optional
arguments, masks made other ways. Whole 03-sorting submissions are graded with the training check
as well.
"""
import json

import nbformat
import pytest

from alternatives import ALTERNATIVES, PORTS
from conftest import grade_batches, lost_points, make_submission
from tfcourse import notebook

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
    """alternative name -> (its Gradescope-style results, the checks skipped)."""
    return grade_batches(course, ALTERNATIVES, tmp_path_factory.mktemp("alternatives"), build)


def test_enough_alternatives_and_one_trained():
    assert len(ALTERNATIVES) >= 5
    assert any(alt.train and alt.assignment == "03-sorting" for alt in ALTERNATIVES)
    assert len({alt.name for alt in ALTERNATIVES}) == len(ALTERNATIVES)


def test_ports_of_public_code_in_every_assignment():
    """At least eight ports, in every assignment, and one port of 03-sorting trained end to end."""
    assert len(PORTS) >= 8
    assert {alt.assignment for alt in PORTS} == {"01-attention", "02-layers", "03-sorting"}
    assert any(alt.train and alt.assignment == "03-sorting" for alt in PORTS)


@pytest.mark.slow
@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=[alt.name for alt in ALTERNATIVES])
def test_alternative_gets_full_marks(graded, alternative):
    results, skipped = graded[alternative.name]
    failed = {test["number"]: test["output"] for test in results["tests"]
              if test["number"] in lost_points(results, skipped)}
    assert results["max_score"] > 0
    assert not failed, json.dumps(failed, indent=1)
