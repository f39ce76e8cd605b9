"""Every check means what it says: its lazy twin (catalogue/lazy.py) loses its points.

A twin meets a check's letter and not its spirit (zeros of the right shape, the input handed back,
noise for dropout, a frozen model, ...). The fast tests ask that every check in course.yaml has a
twin and that each twin still applies to the solution; the slow one grades them all, two batches
in all (the twins of the training checks with them, the others without), and asks each to lose
its check. `KNOWN_HOLES` (in catalogue/lazy.py) lists the twins that still win their check on
today's graders (each one a finding, expected to fail strictly): a fix that closes a hole makes
its test pass, and then its line there goes.
"""
import json
import time

import pytest

from catalogue.lazy import KNOWN_HOLES, TWINS
from conftest import grade_batches, lost_points, make_submission, replace_in, solution_cells

TRAINING_CHECKS = ("trained.accuracy", "regressor.trained")


def build(folder, twin):
    answers = dict(solution_cells(twin.assignment))
    code = answers[twin.cell]
    for old, new in twin.edits:
        code = replace_in(code, old, new)
    if twin.code:
        code = code.rstrip("\n") + "\n\n\n" + twin.code + "\n"
    answers[twin.cell] = code
    return make_submission(folder, twin.assignment, answers=answers)


def test_every_check_has_a_twin(course):
    checks = {(assignment.id, test) for assignment in course.assignments
              for test in assignment.test_ids()}
    gamed = {(twin.assignment, twin.check) for twin in TWINS}
    assert not gamed - checks, f"twins of checks course.yaml does not have: {gamed - checks}"
    assert not checks - gamed, f"checks without a lazy twin: {sorted(checks - gamed)}"


def test_twins_are_named_once_and_say_why():
    names = [twin.name for twin in TWINS]
    assert len(names) == len(set(names))
    assert all(twin.why for twin in TWINS)
    assert set(KNOWN_HOLES) <= set(names), "KNOWN_HOLES names a twin that does not exist"


def test_twin_edits_apply():
    """Every edit still finds its text once (the solution changed under the twin otherwise), and
    a twin of a training check is graded with the training checks."""
    for twin in TWINS:
        code = solution_cells(twin.assignment)[twin.cell]
        assert twin.edits or twin.code, twin.name
        for old, new in twin.edits:
            assert code.count(old) == 1, f"{twin.name}: {old!r} is not once in {twin.cell}"
            code = code.replace(old, new)
        assert twin.train == (twin.check in TRAINING_CHECKS), twin.name


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """twin name -> (the checks it lost, their messages); the wall time is printed."""
    start = time.monotonic()
    out = {}
    for name, (results, skipped) in grade_batches(course, TWINS, tmp_path_factory.mktemp("lazy"),
                                                  build, untrained=TRAINING_CHECKS).items():
        lost = lost_points(results, skipped)
        out[name] = (lost, {test["number"]: test["output"] for test in results["tests"]
                            if test["number"] in lost})
    print(f"\n{len(TWINS)} lazy twins graded in {time.monotonic() - start:.0f} s")
    for twin in TWINS:
        lost = out[twin.name][0]
        print(f"{'lost' if twin.check in lost else 'WON ':4}  {twin.check:22} {twin.name:38} "
              f"{', '.join(sorted(lost))}")
    return out


def _params() -> list:
    """One case per twin, those in KNOWN_HOLES expected to fail (strictly)."""
    return [pytest.param(twin, id=twin.name, marks=pytest.mark.xfail(
        strict=True, reason=f"{twin.check} still passes: {KNOWN_HOLES[twin.name]}")
        if twin.name in KNOWN_HOLES else ()) for twin in TWINS]


@pytest.mark.slow
@pytest.mark.parametrize("twin", _params())
def test_twin_loses_its_check(graded, twin):
    lost, messages = graded[twin.name]
    assert twin.check in lost, (f"{twin.name} ({twin.why}) should lose {twin.check}; it lost "
                                f"{sorted(lost) or 'nothing'}:\n" + json.dumps(messages, indent=1))
