"""What `nbgrader autograde` and `generate_feedback` print on this course: no false alarm.

nbgrader alone prints, for every submission, a checksum warning per test cell (the gradebook holds
them with their hidden tests, students got them without) and three SQLAlchemy SAWarnings (nbgrader
0.9's gradebook on SQLAlchemy 2), and `generate_feedback` a `display_data_priority not recognized`
line per step of this course's configuration. With the course's nbgrader_config.py, an untouched
submission is graded without a warning, and a student who edited a locked test cell is still named.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import compute_checksum

from conftest import ROOT, solution_cells
from tfcourse import notebook

# End to end: runs nbgrader's autograde and generate_feedback on a copy of the course.
pytestmark = pytest.mark.slow

A = "01-attention"
COURSE_ONLY = shutil.ignore_patterns(".venv", ".git", ".pytest_cache", "build", "*.egg-info",
                                     "__pycache__", "gradebook.db", "graded", "autograded",
                                     "submitted", "feedback", "bench")


def test_autograde_and_feedback_warn_only_about_an_edited_locked_cell(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(ROOT, course, ignore=COURSE_ONLY)
    bin_folder = Path(sys.executable).parent

    def nbgrader(*args) -> str:
        environment = {**os.environ, "HOME": str(tmp_path),
                       "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run([str(bin_folder / "nbgrader"), *args], cwd=course, env=environment,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    nbgrader("generate_assignment", A, "--force")
    answers = solution_cells(A)
    for student in ("alice", "bob", "carol"):    # the release just generated, answered; bob
        nbgrader("db", "student", "add", student)    # also edits a locked cell (a test cell);
        nb = nbformat.read(str(course / "release" / A / "attention.ipynb"), as_version=4)
        for cell in nb.cells:                        # carol fetched an earlier release, whose
            if notebook.is_solution(cell):           # sdpa cell had 4 points, not 6
                cell.source = answers[notebook.grade_id(cell)]
            if student == "bob" and notebook.grade_id(cell) == "mha":
                cell.source += "\nprint('all checks passed')"
            if student == "carol" and notebook.grade_id(cell) == "sdpa":
                assert cell.metadata.nbgrader["points"] != 4.0
                cell.metadata.nbgrader["points"] = 4.0      # as that release wrote it
                cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
        (course / "submitted" / student / A).mkdir(parents=True)
        nbformat.write(nb, str(course / "submitted" / student / A / "attention.ipynb"))

    autograde = nbgrader("autograde", A, "--force")
    assert "SAWarning" not in autograde, autograde
    changed = [line for line in autograde.splitlines() if "has changed!" in line]
    assert len(changed) == 1 and "Attribute 'checksum' for cell mha has changed!" in changed[0], \
        autograde
    sanitizing_bob = autograde.index(f"Sanitizing {course}/submitted/bob/")
    assert autograde.index("Attribute 'checksum'") > sanitizing_bob, autograde   # bob's only
    sanitizing_carol = autograde.index(f"Sanitizing {course}/submitted/carol/")
    assert autograde.index("Attribute 'checksum'") < sanitizing_carol, autograde
    # bob's edit is said to be his; carol's cell is said to be the course's change, not hers
    edited = [line for line in autograde.splitlines() if "edited by the student" in line]
    assert len(edited) == 1 and "Cell mha" in edited[0], autograde
    earlier = [line for line in autograde.splitlines() if "an earlier release" in line
               and "edited by the student" not in line]
    assert len(earlier) == 1 and "Cell sdpa" in earlier[0], autograde
    assert "released with 4 points, now 6" in earlier[0], earlier
    assert "the student did not edit it" in earlier[0], earlier
    assert autograde.index(earlier[0]) > sanitizing_carol, autograde
    restored = (course / "autograded" / "bob" / A / "attention.ipynb").read_text()
    assert "all checks passed" not in restored           # the locked cell was put back

    feedback = nbgrader("generate_feedback", A, "--force")
    assert "not recognized" not in feedback and "WARNING" not in feedback, feedback
    assert (course / "feedback" / "alice" / A / "attention.html").is_file()
