"""docs/contract.md keeps in step with the stubs' docstrings, course.yaml and the catalogue.

Every sentence of every stub's docstring has a row (read from the source notebooks, split as
tests/contract_table.py splits them), and no row outlives its sentence; a row names the checks of
its assignment that hold the sentence and the bugs or lazy twins that break it. Each of those is
asserted by a slow test to lose one of the row's checks (a catalogue bug its `says`, a twin its
`check`), unless the twin is a known hole: a row whose every breaker is a known hole is one of
`UNCHECKED`, and the other way round. The file is what the generator writes.
"""
import pytest

from catalogue import every_bug
from catalogue.lazy import KNOWN_HOLES, TWINS
from contract_table import DOC, UNCHECKED, read_table, render, stubs

BUGS = {bug.name: bug for bug in every_bug()}
TWIN = {twin.name: twin for twin in TWINS}


@pytest.fixture(scope="module")
def table():
    return read_table(DOC.read_text())


@pytest.fixture(scope="module")
def docstrings(course):
    return {(stub, sentence): assignment for assignment, stub, said in stubs(course)
            for sentence in said}


def loses(name: str) -> set[str]:
    """The checks a slow test asserts that this bug or twin loses."""
    if name in BUGS:
        return set(BUGS[name].expect)
    twin = TWIN[name]
    return set() if name in KNOWN_HOLES else {twin.check}


def test_every_sentence_has_a_row(table, docstrings):
    missing = [key for key in docstrings if key not in table]
    stale = [key for key in table if key not in docstrings]
    assert not missing, "docstring sentences without a row in docs/contract.md (run `python " \
                        f"tests/contract_table.py` and fill them in): {missing}"
    assert not stale, f"rows of docs/contract.md whose sentence is gone: {stale}"


def test_rows_name_real_checks_and_bugs(course, table, docstrings):
    wrong = {}
    for key, (checks, breakers) in table.items():
        assignment = docstrings.get(key)
        tests = course.assignment(assignment).test_ids() if assignment else []
        problems = [f"{check} is not a check of {assignment}" for check in checks
                    if check not in tests]
        problems += [f"{name} is neither a catalogue bug nor a lazy twin" for name in breakers
                     if name not in BUGS and name not in TWIN]
        problems += [f"{name} is not asked to lose any of {list(checks)}" for name in breakers
                     if name in BUGS and not BUGS[name].expect & set(checks)
                     or name in TWIN and TWIN[name].check not in checks]
        if not checks or not breakers:
            problems.append("a row needs a check and a bug or twin")
        if problems:
            wrong[key] = problems
    assert not wrong, f"rows of docs/contract.md: {wrong}"


def test_unchecked_sentences_are_those_without_a_breaker(table):
    """A sentence is held when some bug or twin of its row is asserted to lose one of its
    checks; those held by none are UNCHECKED (their twins are in KNOWN_HOLES)."""
    unheld = {key for key, (checks, breakers) in table.items()
              if not any(loses(name) & set(checks) for name in breakers)}
    assert unheld <= set(UNCHECKED), f"sentences no check holds (add to UNCHECKED): {unheld}"
    assert set(UNCHECKED) <= unheld, ("UNCHECKED sentences that a check now holds (remove them): "
                                      f"{set(UNCHECKED) - unheld}")


def test_the_doc_is_generated(course, table):
    assert DOC.read_text() == render(course, table), \
        "docs/contract.md is not what `python tests/contract_table.py` writes: run it"
