"""Generating what is built from source/: points in the notebooks, helper modules, release/,
solutions/.

`build(course)` writes them, and the example class (exampleclass.py); `check(course)` builds into
a scratch folder and lists every committed file that differs. release/ and solutions/ come from
nbgrader's own converters, configured by the course's nbgrader_config.py, so `nbgrader
generate_assignment` run by hand gives the same release.
Execution outputs are not compared (timings and plots vary), only sources and cell metadata.
"""
from __future__ import annotations

import filecmp
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from .. import notebook
from ..course import Course
from ..source import helper_module, source_notebook
from . import exampleclass
from .examples import example_files, payloads
from .gradebook import disagreements as gradebook_disagreements
from .gradebook import gradebook_url
from .language import select_language
from .points import source_notebooks


class BuildError(Exception):
    pass


# -- points and helper modules -------------------------------------------------------------------
def with_points(course: Course, nb, assignment, visible: dict | None = None
                ) -> tuple[object, list[str]]:
    """The notebook with each test cell's points set from course.yaml, and the visible checks it
    carries (`visible`, build/examples.py) in its metadata; and the problems found."""
    problems = []
    if visible is not None:
        nb.metadata.setdefault("tfcourse", {})["visible_checks"] = visible
    tests = {notebook.grade_id(cell): cell for cell in nb.cells if notebook.is_test(cell)}
    for group in assignment.checks:
        cell = tests.get(group.id)
        if cell is None:
            problems.append(f"{assignment.id}: no test cell has grade_id {group.id!r}")
            continue
        cell.metadata["nbgrader"]["points"] = group.points
    for gid in tests:
        if not any(group.id == gid for group in assignment.checks):
            problems.append(f"{assignment.id}: test cell {gid!r} has no checks in course.yaml")
    if not notebook.cells_with_role(nb, "setup"):
        problems.append(f"{assignment.id}: no setup cell (metadata tfcourse.role = setup)")
    return nb, problems


def helper_modules(course: Course) -> dict[Path, str]:
    """Path -> text of every generated helper module (earlier assignments' solutions)."""
    return {course.source_dir / assignment.id / f"{module}.py": helper_module(course, module)
            for assignment in course.assignments for module in assignment.uses}


# -- nbgrader --------------------------------------------------------------------------------------
def _nbgrader_config(course: Course, db_url: str, lang: str, release: Path, solutions: Path,
                     execute: bool):
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()
    config.CourseDirectory.root = str(course.root)
    config.CourseDirectory.release_directory = str(release)
    config.CourseDirectory.solution_directory = str(solutions)
    config.CourseDirectory.db_url = db_url
    config.BaseConverter.force = True
    config.SelectLanguage.lang = lang
    config.ExecuteSolution.lang = lang
    config.SandboxedGrade.lang = lang
    if not execute:
        config.GenerateSolution.preprocessors = [
            p for p in config.GenerateSolution.preprocessors if p.__name__ != "ExecuteSolution"]
    return config


def run_nbgrader(course: Course, release: Path, solutions: Path | None, lang: str,
                 execute: bool = True, db_url: str | None = None, log=None) -> None:
    """nbgrader's generate_assignment (and generate_solution) for every assignment, recording
    the points in the gradebook at `db_url` (None: a scratch one); `log` is told each step."""
    from nbgrader.converters import GenerateAssignment, GenerateSolution
    from nbgrader.coursedir import CourseDirectory

    bin_folder = os.path.dirname(sys.executable)          # nbgrader runs `alembic` from PATH
    if bin_folder not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_folder + os.pathsep + os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="tfbuild-db-") as scratch:
        config = _nbgrader_config(course, db_url or f"sqlite:///{Path(scratch) / 'gradebook.db'}",
                                  lang, release, solutions or release, execute)
        for assignment in course.assignments:
            config.CourseDirectory.assignment_id = assignment.id
            coursedir = CourseDirectory(config=config)
            converters = [GenerateAssignment] + ([GenerateSolution] if solutions else [])
            for converter in converters:
                if log is not None:
                    log(f"  {assignment.id}: " + ("the student version" if converter is
                                                  GenerateAssignment else
                                                  "the solutions, executed and graded"
                                                  if execute else "the solutions"))
                started = time.monotonic()
                app = converter(coursedir=coursedir, config=config)
                app.start()
                if log is not None and time.monotonic() - started > 30:
                    log(f"  {assignment.id}: done in {time.monotonic() - started:.0f} s")
                if getattr(app, "_failed", False):
                    raise BuildError(f"nbgrader failed on {assignment.id}")


# -- build and check -------------------------------------------------------------------------------
def _write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def edition_dirs(course: Course, lang: str, out: Path | None = None) -> tuple[Path, Path]:
    """Where an edition's release and solutions go: release/ and solutions/ for the course's own
    language (course.yaml's `language`); for another, editions/<lang>/release and
    editions/<lang>/solutions, beside them and never over them; or `out`/release and
    `out`/solutions when a folder is given."""
    if out is not None:
        return Path(out) / "release", Path(out) / "solutions"
    if lang == course.language:
        return course.release_dir, course.solutions_dir
    edition = course.root / "editions" / lang
    return edition / "release", edition / "solutions"


def build(course: Course, lang: str | None = None, execute: bool = True, log=print,
          out: Path | None = None) -> None:
    lang = lang or course.language
    visible = payloads(course)
    for assignment, path in source_notebooks(course):
        nb, problems = with_points(course, source_notebook(path).copy(), assignment,
                                   visible[assignment.id])
        if problems:
            raise BuildError("\n".join(problems))
        if _write_if_changed(path, nbformat.writes(nb) + "\n"):
            log(f"updated the points and visible checks in {path.relative_to(course.root)}")
    for path, text in helper_modules(course).items():
        if _write_if_changed(path, text):
            log(f"wrote {path.relative_to(course.root)}")
    for path, text in example_files(course, visible).items():
        if _write_if_changed(path, text):
            log(f"wrote {path.relative_to(course.root)} (the numbers the visible checks compare "
                f"with)")
    release, solutions = edition_dirs(course, lang, out)
    for folder in (release, solutions):
        shutil.rmtree(folder, ignore_errors=True)
    log(f"generating {_shown(course, release)} and {_shown(course, solutions)} ({lang}) with "
        f"nbgrader" + ("; the solutions are executed and graded, which takes a few minutes "
                       "on a free machine" if execute else ""))
    # The course's own edition goes with its gradebook, so that autograde scores with its points.
    db_url = gradebook_url(course) if release == course.release_dir else None
    run_nbgrader(course, release, solutions, lang, execute, db_url=db_url, log=log)
    if db_url:
        log("nbgrader's gradebook holds course.yaml's points")
    if release == course.release_dir:          # made from the course's own release
        exampleclass.write(course, log)
    failing = failed_cells(solutions, _shown(course, solutions).rstrip("/")) if execute else []
    if failing:
        raise BuildError("\n".join(failing) + "\nThe solutions were written, but a solution "
                         "that fails its own checks must not be released: fix it (or, for a time "
                         "limit, build on a less busy machine) and build again.")


def failed_cells(solutions: Path, label: str) -> list[str]:
    """The cells of the executed solutions that ended in an error (a check the solution fails,
    or an exception): one line each, naming the notebook, the cell and the message."""
    failing = []
    for path in sorted(solutions.rglob("*.ipynb")) if solutions.exists() else []:
        for index, cell in enumerate(_load(path).get("cells", [])):
            for output in cell.get("outputs", []):
                if output.get("output_type") != "error":
                    continue
                where = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or index
                said = " ".join(line.strip() for line in output.get("traceback", [])[-3:])
                said = said if len(said) < 300 else said[:297] + "..."
                failing.append(f"{label}/{path.relative_to(solutions)}, cell {where}: the "
                               f"solution fails ({output.get('ename')}: {output.get('evalue')}) "
                               f"{said}".rstrip())
    return failing


def _shown(course: Course, folder: Path) -> str:
    try:
        return f"{folder.resolve().relative_to(course.root.resolve())}/"
    except ValueError:
        return f"{folder}/"


def comparable(nb: dict) -> dict:
    """A notebook as far as --check compares it: sources, cell types and metadata, no outputs."""
    cells = [{"cell_type": c.get("cell_type"), "source": "".join(c.get("source", "")),
              "metadata": {k: v for k, v in c.get("metadata", {}).items() if k != "execution"},
              "id": c.get("id")} for c in nb.get("cells", [])]
    meta = {k: v for k, v in nb.get("metadata", {}).items() if k in ("tfcourse", "kernelspec")}
    return {"cells": cells, "metadata": meta}


def _compare_trees(expected: Path, actual: Path, label: str) -> list[str]:
    stale = []
    wanted = {p.relative_to(expected) for p in expected.rglob("*") if p.is_file()}
    present = {p.relative_to(actual) for p in actual.rglob("*") if p.is_file()
               and ".ipynb_checkpoints" not in p.parts} if actual.exists() else set()
    for name in sorted(wanted - present):
        stale.append(f"{label}/{name} is missing")
    for name in sorted(present - wanted):
        stale.append(f"{label}/{name} should not be there")
    for name in sorted(wanted & present):
        if name.suffix == ".ipynb":
            same = comparable(_load(expected / name)) == comparable(_load(actual / name))
        else:
            same = filecmp.cmp(expected / name, actual / name, shallow=False)
        if not same:
            stale.append(f"{label}/{name} is stale")
    return stale


def check(course: Course, lang: str | None = None, out: Path | None = None) -> list[str]:
    """Everything committed that a build would change (empty when all is up to date): for another
    language than the course's, the edition that `build(course, lang, out=out)` writes."""
    lang = lang or course.language
    release_dir, solutions_dir = edition_dirs(course, lang, out)
    stale = []
    visible = payloads(course)
    for assignment, path in source_notebooks(course):
        nb, problems = with_points(course, source_notebook(path).copy(), assignment,
                                   visible[assignment.id])
        stale += problems
        if comparable(_load(path)) != comparable(json.loads(nbformat.writes(nb))):
            stale.append(f"{path.relative_to(course.root)}: test cell points or the visible "
                         f"checks it carries differ from course.yaml and visible/")
    for path, text in helper_modules(course).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(f"{path.relative_to(course.root)} is stale")
    for path, text in example_files(course, visible).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(f"{path.relative_to(course.root)} is stale")
    with tempfile.TemporaryDirectory(prefix="tfbuild-check-") as scratch:
        release, solutions = Path(scratch) / "release", Path(scratch) / "solutions"
        run_nbgrader(course, release, solutions, lang, execute=False)
        stale += _compare_trees(release, release_dir, _shown(course, release_dir).rstrip("/"))
        stale += _compare_trees(solutions, solutions_dir,
                                _shown(course, solutions_dir).rstrip("/"))
        if release_dir == course.release_dir:  # what the build would make of that release
            stale += exampleclass.stale(course, release)
    if release_dir == course.release_dir:
        stale += [f"gradebook: {line}" for line in gradebook_disagreements(course)]
    stale += failed_cells(solutions_dir, _shown(course, solutions_dir).rstrip("/"))
    return stale


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


__all__ = ["build", "check", "edition_dirs", "failed_cells", "BuildError", "select_language"]
