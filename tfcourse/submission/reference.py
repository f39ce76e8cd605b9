"""The reference solution, read from the source notebooks: the only home of solution code.

`reference(course, assignment_id)` executes an assignment's setup and solution cells (the same text
`tfcourse build` writes into the helper modules) in the trusted grader, with the helper modules of
earlier assignments built the same way, and returns the resulting namespace. The source comes from
the one model of it (tfcourse/source.py).
"""
from __future__ import annotations

import sys
import types

from tfcourse.course import Course
from tfcourse.source import (AssignmentSource, assignment_source, helper_files, helper_module,
                             providers)

# helper_files and helper_module live in tfcourse/source.py; imported from here too
__all__ = ["reference", "recipe_source", "helper_files", "helper_module"]


def recipe_source(course: Course, assignment_id: str) -> str:
    """The locked recipe cells (training code) of an assignment, joined."""
    return assignment_source(course, assignment_id).recipe


# (course folder, assignment) -> (the sources it was built from, the namespace)
_CACHE: dict[tuple[str, str], tuple[tuple[AssignmentSource, ...], dict]] = {}


def _namespace(course: Course, assignment_id: str) -> dict:
    """The namespace, built again when the source of the assignment or of one it builds on
    changed."""
    key = (str(course.root), assignment_id)
    sources = tuple(assignment_source(course, each) for each in providers(course, assignment_id))
    cached = _CACHE.get(key)
    if cached is not None and len(cached[0]) == len(sources) and \
            all(old is new for old, new in zip(cached[0], sources)):
        return cached[1]
    source = assignment_source(course, assignment_id)
    for module_name in source.assignment.uses:
        _install_module(course, module_name)
    namespace = {"__name__": f"reference_{assignment_id.replace('-', '_')}"}
    exec(compile(source.solution_code, f"<reference {assignment_id}>", "exec"), namespace)
    _CACHE[key] = (sources, namespace)
    return namespace


def _install_module(course: Course, module_name: str) -> None:
    """Make `import <module>` (course.yaml's `provides`) give the reference, built from its
    provider's source."""
    provider = course.provider_of(module_name)
    namespace = _namespace(course, provider.id)
    module = sys.modules.get(module_name)
    if module is None or getattr(module, "__tfcourse_reference__", None) != str(course.root) or \
            getattr(module, "__tfcourse_namespace__", None) is not namespace:
        module = types.ModuleType(module_name)
        module.__dict__.update({k: v for k, v in namespace.items() if not k.startswith("__")})
        module.__tfcourse_reference__ = str(course.root)
        module.__tfcourse_namespace__ = namespace
        sys.modules[module_name] = module


def reference(course: Course, assignment_id: str) -> dict:
    """The reference namespace of an assignment (cached per course folder, until its source
    changes)."""
    return _namespace(course, assignment_id)
