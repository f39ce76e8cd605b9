"""What grading wrote under its --out folder, found one way for every command that reads it.

`tfcourse grade` writes a submission's results to `OUT/<submission>/results.json`, and those of
nbgrader's `submitted/<student>/<assignment>/` layout to `OUT/<student>/<assignment>/results.json`.
`results_files` finds both (the report, the class's grades.csv and anything else that reads graded
results goes through it); `write_grades` makes the class's spreadsheet from them.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from tfcourse.course import Course, CourseError

from .results import write_atomically

RESULTS = "results.json"
GRADES = "grades.csv"
RESULTS_MB = 8          # a results.json is a few KB; a larger file is not one grading wrote


def _folders(folder: Path) -> list[Path]:
    """The folders in `folder`, by name: not hidden, not links (a results folder holds neither)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return []
    return [Path(entry.path) for entry in entries
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)]


def results_files(folder: Path) -> list[tuple[str, Path]]:
    """(name, path) of each results.json grading wrote under `folder`, in either layout:
    `<submission>/results.json` (named "submission") and nbgrader's
    `<student>/<assignment>/results.json` (named "student/assignment"), sorted by name."""
    found = []
    for first in _folders(Path(folder)):
        if (first / RESULTS).is_file():
            found.append((first.name, first / RESULTS))
        for second in _folders(first):
            if (second / RESULTS).is_file():
                found.append((f"{first.name}/{second.name}", second / RESULTS))
    return sorted(found)


def layouts(names: list[str]) -> list[str]:
    """The layouts of these results' names, as `OUT/...` paths say them."""
    shapes = {"<student>/<assignment>" if "/" in name else "<submission>" for name in names}
    return sorted(shapes, reverse=True) or ["<submission>"]


def student_of(name: str, assignment: str, submission: str = "") -> str:
    """Who a result is of: the student's folder above nbgrader's assignment folder
    ("alice/hw1" -> "alice"), else the submission's own name."""
    for said in (submission, name):
        head, _, tail = said.rpartition("/")
        if head and tail == assignment:
            return head
    return submission or name


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _read(path: Path) -> dict | None:
    try:
        if path.stat().st_size > RESULTS_MB << 20:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("tests"), list) and \
        isinstance(data.get("extra_data", {}), dict)
    return data if ok else None


def _check_order(course: Course | None, assignments: list[str], found: list[str]) -> list[str]:
    """The check ids as columns: each assignment's in course.yaml's order, then any other."""
    order = []
    for assignment in assignments:
        try:
            order += course.assignment(assignment).test_ids() if course else []
        except (KeyError, CourseError):
            pass
    return list(dict.fromkeys(order + found))


def grades_table(course: Course | None, folder: Path) -> tuple[list[str], list[list[str]]]:
    """The class's grades: a header and a row per result under `folder` (student_id,
    assignment, score, max_score, as `nbgrader export` names them, then each check's points; a
    check not graded, or of another assignment, is left empty). Results that cannot be read are
    left out."""
    rows = []
    for name, path in results_files(folder):
        data = _read(path)
        if data is None:
            continue
        extra = data.get("extra_data") or {}
        assignment = extra.get("assignment") if isinstance(extra.get("assignment"), str) else ""
        submission = extra.get("submission") if isinstance(extra.get("submission"), str) else ""
        skipped = extra.get("not_graded") if isinstance(extra.get("not_graded"), list) else []
        checks = {test["number"]: _number(test.get("score")) for test in data["tests"]
                  if isinstance(test, dict) and isinstance(test.get("number"), str)
                  and test["number"] not in skipped}
        rows.append((student_of(name, assignment, submission), assignment,
                     _number(data.get("score")), _number(data.get("max_score")), checks))
    assignments = list(dict.fromkeys(sorted(row[1] for row in rows)))
    order = _check_order(course, assignments, [check for row in rows for check in row[4]])

    def cell(value):
        return "" if value is None else f"{value:g}"
    table = [[student, assignment, cell(score), cell(most), *(cell(checks.get(check))
                                                                for check in order)]
             for student, assignment, score, most, checks in
             sorted(rows, key=lambda row: (row[1], row[0]))]
    return ["student_id", "assignment", "score", "max_score", *order], table


def write_grades(course: Course | None, folder: Path) -> Path:
    """`folder`/grades.csv, made anew from every results.json under `folder` (so a run that
    skipped unchanged submissions still lists them); returns its path."""
    header, rows = grades_table(course, folder)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    write_atomically(Path(folder) / GRADES, text.getvalue())
    return Path(folder) / GRADES
