"""nbgrader's whole lifecycle on a copy of the course, with a local exchange folder.

Instructor: generate_assignment, add a student, release_assignment. Student (another folder and
HOME): fetch_assignment, fill in the answers (one with a bug), submit. Instructor: collect,
autograde, generate_feedback, export. The exported score must equal what `tfcourse grade` gives the
same notebook, and nbgrader's feedback page must not show the hidden tests.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from conftest import ROOT, replace_in, solution_cells
from tfcourse import notebook

A, STUDENT = "01-attention", "alice"
NOT_COPIED = shutil.ignore_patterns(".venv", ".git", "graded", "gradebook.db", "__pycache__",
                                    "autograded", "submitted", "feedback", "bench")


def test_release_fetch_submit_collect_autograde_feedback_export(grade, tmp_path):
    course, student, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "exchange"
    shutil.copytree(ROOT, course, ignore=NOT_COPIED)
    student.mkdir()
    exchange.mkdir()
    bin_folder = Path(sys.executable).parent        # nbgrader runs alembic from here

    def nbgrader(*args, cwd: Path = course):
        environment = {**os.environ, "HOME": str(cwd),
                       "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run([str(bin_folder / "nbgrader"), *args, f"--Exchange.root={exchange}"],
                              cwd=cwd, env=environment, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    # Instructor: the release nbgrader generates is the committed one.
    nbgrader("generate_assignment", A, "--force")
    released = course / "release" / A / "attention.ipynb"
    assert released.read_text() == (ROOT / "release" / A / "attention.ipynb").read_text()
    nbgrader("db", "student", "add", STUDENT)
    nbgrader("release_assignment", A)

    # Student: fetch, fill in every answer (no 1/sqrt(d_k) scale in one of them), submit.
    nbgrader("fetch_assignment", A, "--course", "tfcourse", cwd=student)
    fetched = student / A / "attention.ipynb"
    answers = solution_cells(A)
    answers["sdpa-code"] = replace_in(answers["sdpa-code"], " / math.sqrt(q.shape[-1])", "")
    nb = nbformat.read(str(fetched), as_version=4)
    for cell in nb.cells:
        if notebook.is_solution(cell):
            cell.source = answers[notebook.grade_id(cell)]
    nbformat.write(nb, str(fetched))
    # The exchange names a submission after the OS user (root here) unless told the student.
    nbgrader("submit", A, "--course", "tfcourse", "--student", STUDENT, cwd=student)

    # Instructor: collect, autograde, feedback, export.
    nbgrader("collect", A)
    submitted = course / "submitted" / STUDENT / A / "attention.ipynb"
    assert submitted.read_text() == fetched.read_text()
    nbgrader("autograde", A, "--force")
    nbgrader("generate_feedback", A, "--force")
    nbgrader("export", "--to", str(tmp_path / "grades.csv"))

    with open(tmp_path / "grades.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row["assignment"] == A]
    assert [row["student_id"] for row in rows] == [STUDENT]
    results = grade(submitted)
    assert 0 < results["score"] < results["max_score"], results["tests"]
    assert float(rows[0]["score"]) == results["score"]
    assert float(rows[0]["max_score"]) == results["max_score"]

    page = (course / "feedback" / STUDENT / A / "attention.html").read_text()
    assert f"Score: {results['score']:.1f} / {results['max_score']:.1f}" in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "check.sdpa(scaled_dot_product_attention)" in text      # the visible part stays
    assert "BEGIN HIDDEN TESTS" not in text and "hidden_checks" not in text
