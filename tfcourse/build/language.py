"""The edition's language: keep its prose, drop the other languages', tell the checks which it is.

An nbgrader preprocessor, so that `nbgrader generate_assignment` run by hand in the course folder
(with its nbgrader_config.py) gives the same release as `tfcourse build`. In an edition other than
English, the docstrings of the stubs are put in that language too, from the course's
`source/docstrings.<lang>.yaml` (English docstring -> its translation).
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import yaml
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .. import notebook
from ..course import load_course


def course_language(root: Path | None = None) -> str:
    return load_course(root).language


def docstring_catalog(root: Path | None, lang: str) -> dict[str, str]:
    """English docstring (as inspect.cleandoc gives it) -> its `lang` translation; empty for
    English or where the course has no catalog for `lang`."""
    path = (root or Path.cwd()) / "source" / f"docstrings.{lang}.yaml"
    if lang == "en" or not path.is_file():
        return {}
    table = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {inspect.cleandoc(english): spanish for english, spanish in table.items()}


def _docstrings(tree) -> list[ast.Constant]:
    return [node.body[0].value for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)]


def _written(text: str, indent: str) -> list[str]:
    lines = text.strip("\n").split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return ([f'{indent}"""{lines[0]}'] + [indent + line if line else "" for line in lines[1:]]
            + [f'{indent}"""'])


def translate_docstrings(source: str, catalog: dict[str, str]) -> str:
    """`source` with each docstring found in `catalog` replaced by its translation, at the same
    indentation; code that does not parse is left as it is."""
    if not catalog:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.split("\n")
    for node in sorted(_docstrings(tree), key=lambda node: node.lineno, reverse=True):
        translation = catalog.get(inspect.cleandoc(node.value))
        if translation is not None:
            lines[node.lineno - 1:node.end_lineno] = _written(translation, " " * node.col_offset)
    return "\n".join(lines)


def select_language(nb, lang: str, root: Path | None = None):
    """The notebook with only `lang`'s prose, its stubs' docstrings in `lang`, and its checks
    speaking `lang`."""
    catalog = docstring_catalog(root, lang)
    nb.cells = [cell for cell in nb.cells if notebook.lang(cell) in (None, lang)]
    for cell in nb.cells:
        if cell.cell_type == "code" and notebook.role(cell) == "language":
            cell.source = notebook.set_language(cell.source, lang)
        elif cell.cell_type == "code" and notebook.is_solution(cell):
            cell.source = translate_docstrings(cell.source, catalog)
    nb.metadata.setdefault("tfcourse", {})["lang"] = lang
    return nb


class SelectLanguage(NbGraderPreprocessor):
    lang = Unicode("", help="Language of the edition; default: course.yaml's.").tag(config=True)
    course_root = Unicode("", help="The course folder (default: the working folder).").tag(
        config=True)

    def preprocess(self, nb, resources):
        root = Path(self.course_root) if self.course_root else None
        lang = self.lang or course_language(root)
        return select_language(nb, lang, root), resources
