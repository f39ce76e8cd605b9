"""The Spanish edition: every message a student or instructor reads has a translation, the notebooks
have their prose in both languages, and `--lang es` gives a Spanish release and Spanish feedback."""
import ast
import re
import string
from pathlib import Path

import pytest
import torch
import yaml

from tfcourse import notebook
from tfcourse.build.language import select_language
from tfcourse.i18n import render

from conftest import NOTEBOOK_OF, ROOT

WORD = re.compile(r"[a-z]{2,}")
# Where every string literal is a message (checks), and where only the templates given to these
# functions, and phrases marked with phrase(), are.
WHOLE = [*sorted((ROOT / "autograder").glob("test_*.py")),
         ROOT / "tfcourse" / "submission" / "framework.py",
         ROOT / "tfcourse" / "student" / "checking.py",
         *sorted((ROOT / "visible").glob("*.py"))]         # the course's visible checks
CALLS = {"Fail", "Note", "say", "render", "phrase", "_fail", "_ok", "_say"}
MARKED = [p for p in [*sorted((ROOT / "autograder").glob("*.py")),
                      *sorted((ROOT / "tfcourse").rglob("*.py"))] if p not in WHOLE]
# The pages' templates (tfcourse/pages.py): their say("...") calls are messages too.
TEMPLATES = sorted((ROOT / "tfcourse" / "templates").glob("*.html"))
TEMPLATE_SAY = re.compile(r"""\bsay\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")


def catalog(folder: str) -> dict:
    return yaml.safe_load((ROOT / folder / "locale" / "es.yaml").read_text(encoding="utf-8"))


def _is_message(text: str) -> bool:
    if " " not in text.strip() or not WORD.search(text) or "<" in text:
        return False
    try:
        compile(text, "<text>", "eval")          # code, such as "causal_mask(4)", needs no words
        return False
    except SyntaxError:
        return True


def _docstrings(tree) -> set[int]:
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)}


def _fstring_parts(tree) -> set[int]:
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
            for part in node.values}


def messages(path: Path, whole: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    if whole:
        skip = _docstrings(tree) | _fstring_parts(tree)
        found |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in skip
                  and _is_message(node.value)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name in CALLS and node.args and isinstance(node.args[0], ast.Constant) and \
                    isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def template_messages(path: Path) -> set[str]:
    return {double or single for double, single in TEMPLATE_SAY.findall(path.read_text())}


def everything() -> dict[str, set[str]]:
    """Message -> the files it comes from."""
    found: dict[str, set[str]] = {}
    for path in WHOLE + MARKED + TEMPLATES:
        texts = template_messages(path) if path.suffix == ".html" else \
            messages(path, path in WHOLE)
        for text in texts:
            found.setdefault(text, set()).add(str(path.relative_to(ROOT)))
    return found


def _strings(source: str) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def said_anywhere(course) -> set[str]:
    """Every text the course's code could show: each string of the engine's, the graders' and
    the visible checks' code, each say() of the pages' templates, each string of the source
    notebooks' code (their plots' titles), and the checks' names."""
    said = {name for a in course.assignments for g in a.checks for name in g.tests}
    for path in WHOLE + MARKED:
        said |= _strings(path.read_text(encoding="utf-8"))
    for path in TEMPLATES:
        said |= template_messages(path)
    for assignment, name in NOTEBOOK_OF.items():
        nb = notebook.read(ROOT / "source" / assignment / name)
        said |= _strings("\n".join(notebook.text(c) for c in nb.cells if c.cell_type == "code")
                         .replace("\n%", "\n#"))
    return said


# Translations of texts since reworded, to delete from a catalog (and from here with them).
STALE: dict[str, set[str]] = {}


@pytest.mark.parametrize("folder", ["tfcourse", "autograder", "visible"])
def test_every_translation_is_of_a_text_the_code_still_says(folder, course):
    """Translations are keyed by their English: a message reworded in the code, and not in its
    catalog, loses its Spanish without a word. Its old key then translates nothing, and fails
    here, wherever the message is (a grader's Fail, an engine's keyword argument, a template)."""
    orphans = set(catalog(folder)) - said_anywhere(course)
    known = STALE.get(folder, set())
    assert known <= set(catalog(folder)), ("gone from the catalog, drop from STALE:",
                                           sorted(known - set(catalog(folder))))
    assert orphans == known, (
        "translated, but no code says this English any more: if the message was reworded, move "
        "its translation to the new English; else delete it:\n"
        + "\n".join(sorted(orphans - known)) + "\n(no longer stale: "
        + "; ".join(sorted(known - orphans)) + ")")


def test_every_message_has_a_spanish_translation(course):
    known = {**catalog("tfcourse"), **catalog("autograder"), **catalog("visible")}
    names = {name for a in course.assignments for g in a.checks for name in g.tests}
    missing = sorted(text for text in everything() if text not in known)
    missing += sorted(name for name in names if name not in known)
    assert not missing, "no Spanish for:\n" + "\n".join(missing)


LABELS = {"title", "xlabel", "ylabel", "floor_label"}


def plot_labels(source: str) -> set[str]:
    """The titles and labels a notebook's code gives to the show.* pictures."""
    tree = ast.parse(source.replace("\n%", "\n#"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)
             and getattr(node.func.value, "id", "") == "show"]
    return {keyword.value.value for node in calls for keyword in node.keywords
            if keyword.arg in LABELS and isinstance(keyword.value, ast.Constant)
            and _is_message(keyword.value.value)}


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_the_pictures_have_spanish_titles_and_labels(assignment):
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    labels = plot_labels("\n".join(notebook.text(c) for c in nb.cells if c.cell_type == "code"))
    assert labels, "the notebook draws no pictures with titles"
    missing = sorted(labels - set(catalog("tfcourse")) - set(catalog("visible")))
    assert not missing, "no Spanish for:\n" + "\n".join(missing)


def test_pictures_follow_the_language():
    import matplotlib
    matplotlib.use("Agg")
    from tfcourse.student import checking, show, use_language, visible

    try:        # a notebook's titles come with its visible checks: here, the course folder's
        use_language("es")
        checking.use_catalog(visible.course_payload(ROOT)["locale"])
        figure = show.curve([3.0, 2.0, 1.0], title="Training loss and its floor", xlabel="step",
                            ylabel="loss", floor=0.5, floor_label="label-smoothing floor")
        axes = figure.axes[0]
        assert (axes.get_title(), axes.get_xlabel(), axes.get_ylabel()) == (
            "Pérdida de entrenamiento y su piso", "paso", "pérdida")
        assert axes.get_legend().get_texts()[0].get_text() == "piso del label smoothing 0.500"
        figure = show.heads(torch.full((2, 3, 3), 1 / 3))
        assert [a.get_title() for a in figure.axes[:2]] == ["head 0", "head 1"]
        assert figure._suptitle.get_text() == "Pesos de atención por head"
    finally:
        use_language("en")
        checking.use_catalog(None)


@pytest.mark.parametrize("folder", ["tfcourse", "autograder", "visible"])
def test_translations_keep_their_placeholders(folder):
    fields = string.Formatter()
    for english, spanish in catalog(folder).items():
        names = {f for _, f, _, _ in fields.parse(str(english)) if f}
        assert names == {f for _, f, _, _ in fields.parse(str(spanish)) if f}, english


def test_render_falls_back_and_translates_phrases():
    from tfcourse.batch.results import say

    assert say("{what}: shape {got}, expected {expected}",
               {"what": "the output", "got": [1], "expected": [2]}, "es") == \
        "la salida: forma [1]; se esperaba [2]"
    assert render("an English sentence with no translation", {}, "es") == \
        "an English sentence with no translation"


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_every_prose_cell_exists_in_both_languages(assignment):
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    tagged = [notebook.lang(c) for c in nb.cells if notebook.lang(c)]
    assert tagged.count("en") == tagged.count("es") > 0
    for index, cell in enumerate(nb.cells):       # each English cell has its Spanish one next
        if notebook.lang(cell) == "en":
            assert notebook.lang(nb.cells[index + 1]) == "es", (assignment, index)


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_the_spanish_edition_has_spanish_prose_and_checks(assignment):
    nb = select_language(notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment]),
                         "es")
    assert {notebook.lang(c) for c in nb.cells} == {None, "es"}
    language = [c for c in nb.cells if notebook.role(c) == "language"]
    assert 'use_language("es")' in language[0].source
    prose = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Tarea" in prose and "Assignment" not in prose


@pytest.mark.slow
def test_feedback_follows_the_language(grade):
    results = grade(ROOT / "release" / "01-attention", lang="es")
    assert results["score"] == 0
    assert all("todavía no está escrito" in t["output"] for t in results["tests"])
    assert results["tests"][0]["name"].endswith("formas")


def test_where_student_code_raised_is_said_in_the_language(course):
    """The grader's traceback names a cell "<cell sdpa-code>": the Spanish feedback says "celda",
    not the English word inside a Spanish sentence."""
    from tfcourse.batch.results import feedback, feedback_markdown
    from tfcourse.sandbox.session import StudentError
    from tfcourse.submission.framework import describe_student_error
    from tfcourse.submission.report import NotebookReport, SubmissionReport, TestResult

    template, params = describe_student_error(StudentError(
        {"type": "ValueError", "message": "bad shape", "where": "<cell sdpa-code>", "line": 3}))
    report = SubmissionReport("01-attention", "alice/01-attention", [NotebookReport(
        "attention.ipynb", [TestResult("sdpa.values", 0.0, 2.0, template, params)])])
    spanish = feedback_markdown(feedback(course, report, "es"))
    assert "tu código lanzó ValueError (celda sdpa-code, línea 3): bad shape" in spanish
    assert "cell" not in spanish.lower().replace("celda", ""), spanish
    english = feedback_markdown(feedback(course, report, "en"))
    assert "your code raised ValueError (cell sdpa-code, line 3): bad shape" in english
