"""An assignment's source, read once: what the rest of tfcourse needs from `source/`.

The source notebooks (`source/<assignment>/<notebook>.ipynb`) are where the course writes each
thing once: which check groups' test cells each notebook holds, the locked setup and recipe cells,
the solution code, and so the helper module an assignment provides to the later ones. Grading (the
reference, the reader of submissions, the reports that list every check), the build and the
adapters all take them from here, so the notebooks are parsed and derived in one place.

`assignment_source(course, assignment_id)` gives the model of one assignment,
`source_notebook(path)` that of one notebook. Both are cached per file, by its modification
time, size and inode: a source notebook that changes on disk is read again on the next call; one
that does not is read once. The parsed notebooks are shared: never change one
(`SourceNotebook.copy()` gives a copy to edit)."""
from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from . import notebook
from .course import Assignment, CheckGroup, Course


@dataclass(frozen=True, eq=False)
class SourceNotebook:
    """One source notebook, parsed, with what is derived from it."""
    name: str                           # attention.ipynb
    path: Path
    nb: notebook.Node                   # the parsed notebook: shared, never to be changed
    kinds: Mapping[str, str]            # grade id -> "solution", "test" or "locked"
    originals: Mapping[str, str]        # grade id -> the source of its cell
    test_ids: tuple[str, ...]           # grade ids of the test cells, in the notebook's order
    setup: tuple[str, ...]              # the setup cells (role: setup), in order
    recipe: tuple[str, ...]             # the recipe cells (role: recipe), in order
    solution_code: str                  # setup and solution cells as a module (notebook.py)

    @property
    def solution_ids(self) -> set[str]:
        return {gid for gid, kind in self.kinds.items() if kind == "solution"}

    def module_source(self, origin: str) -> str:
        """This notebook's solution as a read-only helper module (see notebook.module_source)."""
        return notebook.module_source(self.nb, origin)

    def copy(self) -> notebook.Node:
        """A copy of the parsed notebook that may be changed (the build sets points in it)."""
        return copy.deepcopy(self.nb)

    @classmethod
    def parse(cls, path: Path, nb: notebook.Node) -> "SourceNotebook":
        kinds, originals = {}, {}
        for cell in nb.cells:
            gid = notebook.grade_id(cell)
            if gid:
                kinds[gid] = ("solution" if notebook.is_solution(cell) else
                              "test" if notebook.is_test(cell) else "locked")
                originals[gid] = notebook.text(cell)
        return cls(
            name=path.name, path=path, nb=nb,
            kinds=MappingProxyType(kinds), originals=MappingProxyType(originals),
            test_ids=tuple(notebook.grade_id(cell) for cell in nb.cells
                           if notebook.is_test(cell) and notebook.grade_id(cell)),
            setup=tuple(notebook.text(cell) for cell in notebook.cells_with_role(nb, "setup")),
            recipe=tuple(notebook.text(cell) for cell in notebook.cells_with_role(nb, "recipe")),
            solution_code=notebook.solution_code(nb),
        )


@dataclass(frozen=True, eq=False)
class AssignmentSource:
    """An assignment's source notebooks, in course.yaml's order, and what is derived from them."""
    assignment: Assignment
    notebooks: tuple[SourceNotebook, ...]

    @property
    def id(self) -> str:
        return self.assignment.id

    def notebook(self, name: str) -> SourceNotebook:
        for source in self.notebooks:
            if source.name == name:
                return source
        raise KeyError(f"{self.id} has no notebook {name!r}")

    @property
    def first(self) -> SourceNotebook:
        """The assignment's first notebook: it holds the recipe and makes the helper module."""
        return self.notebooks[0]

    def groups_in(self, name: str) -> list[CheckGroup]:
        """The check groups whose test cells live in the notebook `name`, in course.yaml's
        order (a group without a test cell is in none)."""
        ids = set(self.notebook(name).test_ids)
        return [group for group in self.assignment.checks if group.id in ids]

    def groups_by_notebook(self) -> dict[str, list[CheckGroup]]:
        """Each notebook -> its check groups: every group once, in the first notebook with its
        test cell; a group no test cell names goes with the first notebook (so that a report
        listing these lists every check of the assignment)."""
        return place_groups(self.assignment, {source.name: source for source in self.notebooks})

    @property
    def recipe(self) -> str:
        """The locked recipe cells (the course's training code), joined."""
        return "\n\n".join(self.first.recipe)

    @property
    def solution_code(self) -> str:
        """The solution of every notebook (setup and solution cells): the reference's code."""
        return "\n".join(source.solution_code for source in self.notebooks)

    @property
    def module_origin(self) -> str:
        return f"source/{self.id}/{self.first.name}"

    @property
    def module_text(self) -> str | None:
        """The text of the helper module this assignment provides (None when it provides none)."""
        if not self.assignment.provides_module:
            return None
        return self.first.module_source(self.module_origin)


def place_groups(assignment: Assignment, sources: Mapping[str, SourceNotebook]
                 ) -> dict[str, list[CheckGroup]]:
    """`AssignmentSource.groups_by_notebook`, from the notebooks that could be read."""
    placed: dict[str, list[CheckGroup]] = {name: [] for name in assignment.notebooks}
    homes: dict[str, str] = {}
    for name in assignment.notebooks:
        if name in sources:
            for gid in sources[name].test_ids:
                homes.setdefault(gid, name)
    for group in assignment.checks:
        placed[homes.get(group.id, assignment.notebooks[0])].append(group)
    return placed


# -- the caches ------------------------------------------------------------------------------------
_LOCK = threading.Lock()
_NOTEBOOKS: dict[str, tuple[tuple, SourceNotebook]] = {}
_ASSIGNMENTS: dict[tuple[str, str], AssignmentSource] = {}


def _stamp(path: str) -> tuple:
    info = os.stat(path)
    return info.st_mtime_ns, info.st_size, info.st_ino, info.st_dev


def source_notebook(path: str | os.PathLike) -> SourceNotebook:
    """The source notebook at `path`, parsed once (again when the file changed). Raises OSError
    when it cannot be read and ValueError when it is not JSON."""
    key = os.path.abspath(path)
    stamp = _stamp(key)
    with _LOCK:
        cached = _NOTEBOOKS.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    parsed = SourceNotebook.parse(Path(path), notebook.read(key))
    with _LOCK:
        _NOTEBOOKS[key] = (stamp, parsed)
    return parsed


def notebook_path(course: Course, assignment_id: str, name: str) -> Path:
    return course.source_dir / assignment_id / name


def assignment_source(course: Course, assignment_id: str) -> AssignmentSource:
    """The model of an assignment's source (its notebooks read once; again when one changed, or
    when course.yaml says something else of the assignment). Raises CourseError for an unknown
    assignment, OSError or ValueError when a notebook cannot be read."""
    assignment = course.assignment(assignment_id)
    notebooks = tuple(source_notebook(notebook_path(course, assignment.id, name))
                      for name in assignment.notebooks)
    key = (str(course.root), assignment.id)
    with _LOCK:
        cached = _ASSIGNMENTS.get(key)
    if cached is not None and cached.assignment == assignment and \
            len(cached.notebooks) == len(notebooks) and \
            all(old is new for old, new in zip(cached.notebooks, notebooks)):
        return cached
    made = AssignmentSource(assignment, notebooks)
    with _LOCK:
        _ASSIGNMENTS[key] = made
    return made


def groups_by_notebook(course: Course, assignment_id: str) -> dict[str, list[CheckGroup]]:
    """`AssignmentSource.groups_by_notebook`, for reports that must list every check whatever
    state the course folder is in: a notebook that cannot be read holds no group."""
    assignment = course.assignment(assignment_id)
    sources = {}
    for name in assignment.notebooks:
        try:
            sources[name] = source_notebook(notebook_path(course, assignment.id, name))
        except (OSError, ValueError):
            continue
    return place_groups(assignment, sources)


def helper_module(course: Course, module_name: str) -> str:
    """The text of a helper module (`<module>.py`, course.yaml's `provides`), made from its
    provider's source."""
    return assignment_source(course, course.provider_of(module_name).id).module_text


def helper_files(course: Course, assignment_id: str) -> dict[str, str]:
    """File name -> text of every helper module an assignment ships with (the modules it uses)."""
    return {f"{name}.py": helper_module(course, name)
            for name in course.assignment(assignment_id).uses}


def providers(course: Course, assignment_id: str) -> list[str]:
    """The assignment and every assignment whose module it uses, directly or not, in course.yaml's
    order."""
    found, todo = [], [assignment_id]
    while todo:
        current = course.assignment(todo.pop())
        if current.id not in found:
            found.append(current.id)
            todo += [course.provider_of(module).id for module in current.uses]
    return [a.id for a in course.assignments if a.id in found]


def clear_cache() -> None:
    """Forget every notebook read (tests)."""
    with _LOCK:
        _NOTEBOOKS.clear()
        _ASSIGNMENTS.clear()
