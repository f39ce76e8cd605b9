"""The hidden graders catch the bugs a real class writes, each in its own part, by its cause.

Every bug in `catalogue/` is a small edit of a correct submission (the course's solution, or a port
in `alternatives.py`), graded end to end with the real grader. Each must lose the checks it names
(the kill rate), the message of each must name the cause in the words the catalogue gives, and it
must lose points in its own check group only (the precision: exact, with the few bugs that truly
break two parts listed in `catalogue.TWO_PARTS`). All submissions are graded once, in two batches:
most without the training check, a few with it (where not learning is the point).
"""
import json
import re

import nbformat
import pytest
import yaml

from catalogue import TWO_PARTS, every_bug, groups
from conftest import ROOT, grade_batches, lost_points, make_submission, replace_in, \
    solution_cells, strip
from tfcourse import notebook

BUGS = every_bug()
ADDED = "+"         # a cell name "+<grade_id>": the cell a port adds before that answer cell


def build(folder, bug):
    """The bug's submission: its base (the solution, or a port with its added cells), edited."""
    answers = dict(solution_cells(bug.assignment))
    added = {}
    if bug.port is not None:
        answers.update(bug.port.answers)
        added = dict(bug.port.added)
    for cell, edits in bug.edits.items():
        cells = added if cell.startswith(ADDED) else answers
        key = cell.removeprefix(ADDED)
        code = cells[key]
        for old, new in edits:
            code = replace_in(code, old, new)
        cells[key] = code

    def add_cells(nb):
        for before, code in added.items():
            index = next(i for i, cell in enumerate(nb.cells)
                         if notebook.grade_id(cell) == before)
            nb.cells.insert(index, nbformat.v4.new_code_cell(code))
    return make_submission(folder, bug.assignment, answers=answers, edit=add_cells)


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


def names_cause(message: str, words) -> bool:
    """Whether `message` holds every one of `words` (any case, any spacing)."""
    text = strip(message).lower()
    return all(strip(word).lower() in text for word in words)


def lost_outside(bug, lost) -> set:
    return {test for test in lost if test.split(".")[0] not in bug.own}


# -- the messages in Spanish ---------------------------------------------------------------------
# The catalogue is graded in English; a bug's Spanish words (`es`) are asked of its messages as the
# Spanish feedback gives them: each English message read back into its template and its values
# (the template whose words match it, most words first), then rendered from the Spanish catalog,
# each value that is itself a message or a phrase in Spanish too.
FIELD = re.compile(r"\{(\w+)(?::[^{}]*)?\}")
SPANISH = {str(english): str(spanish) for folder in ("tfcourse", "autograder", "visible")
           for english, spanish
           in yaml.safe_load((ROOT / folder / "locale" / "es.yaml").read_text("utf-8")).items()}


def _pattern(template: str) -> re.Pattern:
    parts, seen, last = [], set(), 0
    for field in FIELD.finditer(template):
        name = field.group(1)
        parts += [re.escape(template[last:field.start()]),
                  f"(?P={name})" if name in seen else f"(?P<{name}>.*?)"]
        seen.add(name)
        last = field.end()
    return re.compile("".join(parts) + re.escape(template[last:]), re.S)


TEMPLATES = sorted(((english, _pattern(english)) for english in SPANISH if FIELD.search(english)),
                   key=lambda item: -len(FIELD.sub("", item[0])))


def spanish(message: str, depth: int = 0) -> str:
    """`message`, an English message of the graders, as the Spanish feedback renders it."""
    if message in SPANISH:
        return SPANISH[message]
    for english, pattern in TEMPLATES if depth < 4 else ():
        found = pattern.fullmatch(message)
        if found:
            values = {name: spanish(value, depth + 1) for name, value in found.groupdict().items()}
            return FIELD.sub(lambda field: values[field.group(1)], SPANISH[english])
    return message


def test_messages_are_read_back_into_spanish():
    assert spanish("shift_right changed its argument y in place (y[...] = ..., +=, or a method "
                   "ending in _ such as masked_fill_): the caller's tensors must stay as they "
                   "were, so compute the result in a new tensor (y.clone() before writing into "
                   "it, or torch.cat, masked_fill, y + ...)").startswith(
        "shift_right modificó in place su argumento y (y[...] = ...")
    assert spanish("the output: not the expected values (largest difference 0.5)") == \
        "la salida: no son los valores esperados (mayor diferencia 0.5)"
    assert spanish("no such message") == "no such message"


def test_spanish_words_are_asked_of_tests_the_bug_loses():
    wrong = [bug.name for bug in BUGS if bug.es and not set(bug.es) <= set(bug.says)]
    assert not wrong, f"bugs whose Spanish words name a test they are not asked to lose: {wrong}"


# -- the catalogue itself ------------------------------------------------------------------------
def test_bug_names_are_unique():
    names = [bug.name for bug in BUGS]
    assert len(names) == len(set(names)) >= 55


def test_every_bug_names_its_cause():
    """Every bug asks at least one of its messages for the words of its cause."""
    wordless = [bug.name for bug in BUGS if not any(bug.says.values())]
    assert not wordless, f"bugs whose messages are not asked to name a cause: {wordless}"


def test_every_bug_is_in_one_part():
    """A bug's checks lie in one check group; the exceptions are listed, with their reasons."""
    by_name = {bug.name: bug for bug in BUGS}
    assert set(TWO_PARTS) <= set(by_name), "TWO_PARTS names a bug the catalogue does not have"
    wrong = {bug.name: sorted(bug.own) for bug in BUGS
             if bug.own != TWO_PARTS.get(bug.name, bug.own) or
             len(bug.own) != (2 if bug.name in TWO_PARTS else 1)}
    assert not wrong, f"bugs whose checks are not in one part (nor listed in TWO_PARTS): {wrong}"


def test_catalogue_edits_apply():
    """Every edit still finds its text (the solution or a port changed under the catalogue)."""
    for bug in BUGS:
        base = {**solution_cells(bug.assignment), **(bug.port.answers if bug.port else {})}
        added = dict(bug.port.added) if bug.port else {}
        for cell, edits in bug.edits.items():
            code = added[cell[1:]] if cell.startswith(ADDED) else base[cell]
            for old, new in edits:
                assert code.count(old) == 1, f"{bug.name}: {old!r} is not once in {cell}"
                code = code.replace(old, new)


# -- each bug, graded ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_bug_loses_its_checks(graded, bug):
    lost, messages = graded[bug.name]
    assert bug.expect <= lost, (f"{bug.name} should lose {sorted(bug.expect)}; it lost "
                                f"{sorted(lost)}:\n" + json.dumps(messages, indent=1))
    if bug.exact:
        assert lost == bug.expect, (f"{bug.name} is one cause, reported once: it should lose "
                                    f"{sorted(bug.expect)} only; it lost {sorted(lost)}:\n"
                                    + json.dumps(messages, indent=1))


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_bug_message_names_its_cause(graded, bug):
    _, messages = graded[bug.name]
    wrong = {test: {"must say": list(words), "said": messages.get(test, "(passed)")}
             for test, words in bug.says.items()
             if words and not names_cause(messages.get(test, ""), words)}
    assert not wrong, f"{bug.name}: messages that do not name the cause:\n" + json.dumps(
        wrong, indent=1)


@pytest.mark.slow
@pytest.mark.parametrize("bug", [bug for bug in BUGS if bug.es],
                         ids=[bug.name for bug in BUGS if bug.es])
def test_bug_message_names_its_cause_in_spanish(graded, bug):
    _, messages = graded[bug.name]
    wrong = {test: {"must say": list(words), "said": spanish(messages.get(test, "(passed)"))}
             for test, words in bug.es.items()
             if words and not names_cause(spanish(messages.get(test, "")), words)}
    assert not wrong, f"{bug.name}: Spanish messages that do not name the cause:\n" + json.dumps(
        wrong, indent=1, ensure_ascii=False)


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=[bug.name for bug in BUGS])
def test_bug_stays_in_its_part(graded, bug):
    lost, messages = graded[bug.name]
    outside = lost_outside(bug, lost)
    assert not outside, (f"{bug.name} belongs to {sorted(bug.own)} but also lost "
                         f"{sorted(outside)}:\n" + json.dumps(
                             {test: messages[test] for test in sorted(outside)}, indent=1))


@pytest.mark.slow
def test_kill_rate_and_precision(graded):
    """Every bug loses points (kill rate), only in its own part (precision), and each message the
    catalogue asks about names its cause."""
    rows, killed, precise, asked, named = [], 0, 0, 0, 0
    for bug in BUGS:
        lost, messages = graded[bug.name]
        inside = not lost_outside(bug, lost)
        killed += bool(lost)
        precise += bool(lost) and inside
        causes = [names_cause(messages.get(test, ""), words)
                  for test, words in bug.says.items() if words]
        asked += len(causes)
        named += sum(causes)
        rows.append((bug.name, ", ".join(sorted(bug.expect)),
                     f"{sum(causes)}/{len(causes)}",
                     ", ".join(sorted(lost)) + ("" if inside else "   <- outside its part")))
    kill_rate, precision = killed / len(BUGS), precise / len(BUGS)
    widths = [max(len(row[column]) for row in rows + [("bug", "expected to lose", "cause")])
              for column in (0, 1, 2)]
    print(f"\n{'bug':{widths[0]}}  {'expected to lose':{widths[1]}}  {'cause':{widths[2]}}  lost")
    for name, expected, cause, lost in rows:
        print(f"{name:{widths[0]}}  {expected:{widths[1]}}  {cause:{widths[2]}}  {lost}")
    print(f"{len(BUGS)} bugs: kill rate {kill_rate:.0%}, precision {precision:.0%}; "
          f"{asked} messages asserted, {named} name their cause")
    assert kill_rate == 1.0
    assert precision == 1.0
    assert named == asked
