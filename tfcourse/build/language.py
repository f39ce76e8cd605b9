"""The edition's language: keep its prose, drop the other languages', tell the checks which it is.

An nbgrader preprocessor, so that `nbgrader generate_assignment` run by hand in the course folder
(with its nbgrader_config.py) gives the same release as `tfcourse build`.
"""
from __future__ import annotations

from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .. import notebook
from ..course import load_course


def course_language(root: Path | None = None) -> str:
    return load_course(root).language


def select_language(nb, lang: str):
    """The notebook with only `lang`'s prose, and its checks speaking `lang`."""
    nb.cells = [cell for cell in nb.cells if notebook.lang(cell) in (None, lang)]
    for cell in nb.cells:
        if cell.cell_type == "code" and notebook.role(cell) == "language":
            cell.source = notebook.set_language(cell.source, lang)
    nb.metadata.setdefault("tfcourse", {})["lang"] = lang
    return nb


class SelectLanguage(NbGraderPreprocessor):
    lang = Unicode("", help="Language of the edition; default: course.yaml's.").tag(config=True)
    course_root = Unicode("", help="The course folder (default: the working folder).").tag(
        config=True)

    def preprocess(self, nb, resources):
        lang = self.lang or course_language(Path(self.course_root) if self.course_root else None)
        return select_language(nb, lang), resources
