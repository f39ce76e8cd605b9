"""The engine names nothing of this course: no assignment id, stub, helper module or constant.

A second course is a course folder (course.yaml, source/, autograder/, visible/), not a fork of
tfcourse; a new assignment is an edit of that folder, not an engine release. So no file of
tfcourse/ (code, docstrings, message catalogs) may name what course.yaml, the source notebooks'
stubs or the course's constants name, except where the allow-list below says why it must.

A name written as an attribute of something else (`F.scaled_dot_product_attention`,
`nn.Transformer`) is torch's, not the course's, and is not counted: the rule against torch's
ready-made attention (tfcourse/submission/rules*, tfcourse/sandbox) has to name torch's own API.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT
from tfcourse import notebook
from tfcourse.course import load_course

ENGINE = ROOT / "tfcourse"
TEXT = {".py", ".yaml", ".yml", ".md", ".txt", ".json", ".toml", ".cfg", ".html", ".js", ".css",
        ".sh", ".j2", ".tpl"}

# (file, name) -> why the engine must name it there. torch's own functions and ops happen to share
# the stub's name: the rule against them has to spell them, whatever the course calls its stubs.
ALLOWED = {
    ("tfcourse/sandbox/refusal.py", "scaled_dot_product_attention"):
        "torch's op, refused at its dispatcher in the sandbox",
    ("tfcourse/sandbox/rulebook.py", "scaled_dot_product_attention"):
        "the family of torch's attention ops that the rule refuses, keyed by torch's name",
}


def course_names() -> dict[str, str]:
    """Name -> what it is, for everything course-specific an engine file could name."""
    course = load_course(ROOT)
    names: dict[str, str] = {}
    for assignment in course.assignments:
        names[assignment.id] = "an assignment id"
        for group in assignment.checks:
            names.update({stub: "a stub (course.yaml)" for stub in group.stubs})
        names.update({module: "a helper module" for module in assignment.uses})
        if assignment.provides_module:
            names[assignment.provides_module] = "a helper module"
        for name in assignment.notebooks:
            nb = notebook.read(ROOT / "source" / assignment.id / name)
            for cell in nb.cells:
                if cell.cell_type != "code":
                    continue
                tree = _parsed(notebook.strip_solution_markers(notebook.text(cell)))
                top = _top_level(tree)
                if notebook.is_solution(cell):
                    names.update({n: "a stub (the notebook)" for n in top if not n.isupper()})
                if notebook.role(cell) in ("setup", "recipe"):
                    names.update({n: "a course constant" for n in top if n.isupper()})
    for path in sorted((ROOT / "visible").glob("*.py")):
        names.update({n: "a course constant (visible/)" for n in _top_level(_parsed(
            path.read_text(encoding="utf-8"))) if n.isupper() and len(n) > 1})
    return names


def _parsed(text: str):
    try:
        return ast.parse(text.replace("\n%", "\n#"))
    except SyntaxError:
        return ast.parse("")


def _top_level(tree) -> set[str]:
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        found.add(leaf.id)
    return found


def engine_mentions(names, root: Path = ENGINE) -> list[tuple[str, str, int]]:
    """(file, name, line) of each name written in a text file under `root`, torch's attributes
    (`x.name`) left out."""
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(
        map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w-])")
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in TEXT or "__pycache__" in path.parts:
            continue
        label = str(path.relative_to(root.parent))
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1):
            found += [(label, hit.group(1), number) for hit in pattern.finditer(line)]
    return found


def test_the_course_names_are_read():
    names = course_names()
    for name in ("01-attention", "scaled_dot_product_attention", "MultiHeadAttention",
                 "EncoderLayer", "Transformer", "shift_right", "greedy_decode", "noam_rate",
                 "attention_parts", "BOS", "VOCAB_SIZE"):
        assert name in names, name


def test_the_finder_finds_a_name_and_leaves_torchs_attributes(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "a.py").write_text("x = F.scaled_dot_product_attention(q)\n"
                                              "# see 02-layers and EncoderLayer\nBOS = 10\n")
    names = {"scaled_dot_product_attention", "02-layers", "EncoderLayer", "BOS"}
    assert [(name, line) for _, name, line in engine_mentions(names, tmp_path / "engine")] == [
        ("02-layers", 2), ("EncoderLayer", 2), ("BOS", 3)]


def test_no_engine_file_names_the_course():
    names = course_names()
    wrong = [f"{label}:{line}: {name} ({names[name]})"
             for label, name, line in engine_mentions(names) if (label, name) not in ALLOWED]
    assert not wrong, ("tfcourse/ names this course; move it to the course folder (course.yaml, "
                       "source/, autograder/, visible/), or allow it below with the reason:\n"
                       + "\n".join(wrong))


def test_every_allowance_is_still_needed():
    found = {(label, name) for label, name, _ in engine_mentions(course_names())}
    assert not set(ALLOWED) - found, f"no longer needed: {sorted(set(ALLOWED) - found)}"
