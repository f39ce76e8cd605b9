"""The hidden graders catch the bugs a real class writes, each in its own part.

Every bug in `catalogue/` is a small edit of the course's solution, graded end to end with the real
grader. Each must lose the checks it names; together they must all lose points (the kill rate) and
nearly all lose points in their own part only (the precision). All submissions are graded once, in
two batches: most without the training check, a few with it (where not learning is the point).
"""
import json

import pytest

from catalogue import attention, groups, layers, sorting
from conftest import grade_batches, lost_points, make_submission, replace_in, solution_cells

BUGS = attention.BUGS + layers.BUGS + sorting.BUGS
def build(folder, bug):
    cells = solution_cells(bug.assignment)
    answers = {}
    for grade_id, edits in bug.edits.items():
        code = cells[grade_id]
        for old, new in edits:
            code = replace_in(code, old, new)
        answers[grade_id] = code
    return make_submission(folder, bug.assignment, answers=answers)


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """bug name -> (tests that lost points, their messages), every bug graded once."""
    out = {}
    for name, (results, skipped) in grade_batches(course, BUGS, tmp_path_factory.mktemp(
            "catalogue"), build).items():
        lost = lost_points(results, skipped)
        out[name] = (lost, {test["number"]: test["output"] for test in results["tests"]
                            if test["number"] in lost})
    return out


def test_bug_names_are_unique():
    names = [bug.name for bug in BUGS]
    assert len(names) == len(set(names)) >= 45


@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_bug_loses_its_checks(graded, bug):
    lost, messages = graded[bug.name]
    assert bug.expect <= lost, (f"{bug.name} should lose {sorted(bug.expect)}; it lost "
                                f"{sorted(lost)}:\n" + json.dumps(messages, indent=1))


def test_kill_rate_and_precision(graded):
    """Every bug loses points (kill rate); nearly all only in their own part (precision)."""
    rows, killed, precise = [], 0, 0
    for bug in BUGS:
        lost, _ = graded[bug.name]
        inside = groups(lost) <= bug.own
        killed += bool(lost)
        precise += bool(lost) and inside
        rows.append((bug.name, ", ".join(sorted(bug.expect)),
                     ", ".join(sorted(lost)) + ("" if inside else "   <- outside its part")))
    kill_rate, precision = killed / len(BUGS), precise / len(BUGS)
    widths = [max(len(row[column]) for row in rows) for column in (0, 1)]
    print(f"\n{'bug':{widths[0]}}  {'expected to lose':{widths[1]}}  lost")
    for name, expected, lost in rows:
        print(f"{name:{widths[0]}}  {expected:{widths[1]}}  {lost}")
    print(f"{len(BUGS)} bugs: kill rate {kill_rate:.0%}, precision {precision:.0%}")
    assert kill_rate == 1.0
    assert precision >= 0.95
