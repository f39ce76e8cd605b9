"""The reference solution, read from the source notebooks: the only home of solution code.

`reference(course, assignment_id)` executes an assignment's setup and solution cells (the same text
`tfcourse build` writes into the helper modules) in the trusted grader, with the helper modules of
earlier assignments built the same way, and returns the resulting namespace.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

from tfcourse import notebook
from tfcourse.course import Course


def recipe_source(course: Course, assignment_id: str) -> str:
    """The locked recipe cells (training code) of an assignment, joined."""
    nb = notebook.read(_notebook_path(course, assignment_id))
    return "\n\n".join(notebook.text(cell) for cell in notebook.cells_with_role(nb, "recipe"))


def _notebook_path(course: Course, assignment_id: str) -> Path:
    assignment = course.assignment(assignment_id)
    return course.source_dir / assignment.id / assignment.notebooks[0]


def setup_source(course: Course, assignment_id: str) -> list[str]:
    nb = notebook.read(_notebook_path(course, assignment_id))
    return [notebook.text(cell) for cell in notebook.cells_with_role(nb, "setup")]


_CACHE: dict[tuple[str, str], dict] = {}


def _namespace(course: Course, assignment_id: str) -> dict:
    key = (str(course.root), assignment_id)
    if key in _CACHE:
        return _CACHE[key]
    assignment = course.assignment(assignment_id)
    for module_name in assignment.uses:
        _install_module(course, module_name)
    code = "\n".join(notebook.solution_code(notebook.read(course.source_dir / assignment.id / name))
                     for name in assignment.notebooks)
    namespace = {"__name__": f"reference_{assignment_id.replace('-', '_')}"}
    exec(compile(code, f"<reference {assignment_id}>", "exec"), namespace)
    _CACHE[key] = namespace
    return namespace


def _install_module(course: Course, module_name: str) -> None:
    """Make `import attention_parts` (say) give the reference, built from its provider's source."""
    provider = course.provider_of(module_name)
    namespace = _namespace(course, provider.id)
    module = sys.modules.get(module_name)
    if module is None or getattr(module, "__tfcourse_reference__", None) != str(course.root):
        module = types.ModuleType(module_name)
        module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__")})
        module.__tfcourse_reference__ = str(course.root)
        sys.modules[module_name] = module


def reference(course: Course, assignment_id: str) -> dict:
    """The reference namespace of an assignment (cached per course folder)."""
    return _namespace(course, assignment_id)


def helper_module(course: Course, module_name: str) -> str:
    """The text of a helper module (`attention_parts.py`, say), made from its provider's source."""
    provider = course.provider_of(module_name)
    name = provider.notebooks[0]
    nb = notebook.read(course.source_dir / provider.id / name)
    return notebook.module_source(nb, f"source/{provider.id}/{name}")


def helper_files(course: Course, assignment_id: str) -> dict[str, str]:
    """File name -> text of every helper module an assignment ships with."""
    return {f"{name}.py": helper_module(course, name)
            for name in course.assignment(assignment_id).uses}
