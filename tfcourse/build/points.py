"""Whether the source notebooks hold course.yaml's points: read without nbformat or torch, so that
`tfcourse grade` can warn at once (build/release.py writes the points)."""
from __future__ import annotations

from .. import notebook
from ..course import Course
from ..source import source_notebook


def source_notebooks(course: Course):
    for assignment in course.assignments:
        for name in assignment.notebooks:
            yield assignment, course.source_dir / assignment.id / name


def points_disagreements(course: Course) -> list[str]:
    """Each source notebook whose test cells' points are not course.yaml's (a line each)."""
    found = []
    for assignment, path in source_notebooks(course):
        nb = source_notebook(path).nb
        for cell in nb.cells:
            gid = notebook.grade_id(cell)
            group = next((g for g in assignment.checks if g.id == gid), None)
            if notebook.is_test(cell) and group is not None and \
                    notebook.nbgrader(cell).get("points") != group.points:
                found.append(f"{path.relative_to(course.root)}: {gid} has "
                             f"{notebook.nbgrader(cell).get('points')} points, course.yaml "
                             f"{group.points:g}")
    return found
