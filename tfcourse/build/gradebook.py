"""nbgrader's gradebook, where it holds points: kept equal to course.yaml.

`nbgrader generate_assignment` writes each test cell's points into the course's gradebook, and
`nbgrader autograde` scores with the gradebook's points, not the notebook's. So after course.yaml's
points change, `tfcourse build` writes them there too (it generates the release against the course's
own gradebook when there is one), `build --check` lists a gradebook that disagrees, and grading
refuses (nbgrader autograde) or warns (tfcourse grade) until it agrees.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..course import Course


def gradebook_url(course: Course) -> str | None:
    """The course's gradebook (nbgrader_config.py's `CourseDirectory.db_url`, else nbgrader's
    default, gradebook.db in the course folder) when it exists; None when there is none yet."""
    url = _configured_url(course) or f"sqlite:///{course.root / 'gradebook.db'}"
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_absolute():
            path = course.root / path
        return f"sqlite:///{path}" if path.is_file() else None
    return url


def _configured_url(course: Course) -> str:
    """The course's nbgrader_config.py's db_url, or "". A file that never names db_url sets none:
    it is not run then (it imports nbgrader, nbconvert and torch: seconds before a command's first
    line)."""
    try:
        text = (course.root / "nbgrader_config.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    if "db_url" not in text:
        return ""
    try:
        from traitlets.config.loader import PyFileConfigLoader
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()
    except Exception:        # noqa: BLE001 - nbgrader_config.py reports its own failure
        return ""
    url = config.get("CourseDirectory", {}).get("db_url", "")
    return url if isinstance(url, str) else ""


def disagreements(course: Course) -> list[str]:
    """Each test cell whose points in the course's gradebook are not course.yaml's: a line that
    says both. Assignments the gradebook does not hold yet are not listed."""
    url = gradebook_url(course)
    if url is None:
        return []
    try:
        from nbgrader.api import Gradebook, MissingEntry
    except ImportError:                       # no nbgrader here: nothing of it to disagree
        return []
    found = []
    with Gradebook(url) as gradebook:
        held = {assignment.name for assignment in gradebook.assignments}
        for assignment in course.assignments:
            if assignment.id not in held:
                continue
            for name in assignment.notebooks:
                for group in assignment.checks:
                    try:
                        cell = gradebook.find_grade_cell(group.id, Path(name).stem,
                                                         assignment.id)
                    except MissingEntry:
                        found.append(f"{assignment.id}/{group.id}: not in nbgrader's gradebook, "
                                     f"{group.points:g} points in course.yaml")
                        continue
                    if abs(float(cell.max_score) - float(group.points)) > 1e-9:
                        found.append(f"{assignment.id}/{group.id}: {float(cell.max_score):g} "
                                     f"points in nbgrader's gradebook, {group.points:g} in "
                                     f"course.yaml")
    return found


def advice(course: Course) -> str:
    where = os.path.relpath(course.root)
    return (f"run `tfcourse build` in {where} (it writes course.yaml's points into the notebooks, "
            f"the release and nbgrader's gradebook)")
