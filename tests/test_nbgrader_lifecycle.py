"""nbgrader's whole lifecycle on a copy of the course, with a local exchange folder.

Instructor: generate_assignment, add the students, release_assignment. Students (another folder
and HOME each): fetch_assignment, fill in the answers, submit: alice with a bug, eve with cells
that try to change the course folder, read `source/` and leave a process running, frank with the
stubs untouched, mallory who swaps her notebook in the exchange for a link to the solutions.
Instructor: collect, autograde, generate_feedback, export. alice's exported score equals what
`tfcourse grade` gives her notebook; nbgrader's feedback page shows no hidden test; eve changes
nothing, learns nothing and leaves nothing; frank, graded after her, scores 0; mallory's link is
collected as a link and scores 0.
"""
import csv
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, replace_in, solution_cells, survivors
import tfcourse
from tfcourse import notebook

# End to end: runs nbgrader's whole lifecycle.
pytestmark = pytest.mark.slow

A, STUDENT = "01-attention", "alice"
MARKER = "tflifecycle-eve-was-here"
ENGINE = Path(tfcourse.__file__).parent           # the engine that grades: installed code


def eve_cell(course: Path) -> str:
    """Student code that, run as the instructor, would give everyone full marks (by rewriting the
    graders), copy the solutions into its outputs and leave a process behind."""
    return f"""
import glob, os, subprocess, sys
COURSE = {str(course)!r}
ENGINE = {str(ENGINE)!r}
# A conftest.py beside the graders, or a line in the installed engine, would be loaded by the
# trusted grader's pytest: every check passed.
FULL_MARKS = (
    "\\nimport pytest  # {MARKER}\\n"
    "@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n"
    "    outcome = yield\\n"
    "    outcome.get_result().outcome = 'passed'\\n")
for target in (os.path.join(COURSE, "autograder", "conftest.py"),
               os.path.join(ENGINE, "submission", "plugin.py")):
    try:
        with open(target, "a") as handle:
            handle.write(FULL_MARKS)
    except OSError:
        pass
found = []
for path in glob.glob(os.path.join(COURSE, "autograder", "**", "*.py"), recursive=True) + [
        os.path.join(COURSE, name) for name in ("course.yaml", "nbgrader_config.py",
                                                "gradebook.db")]:
    try:
        with open(path, "a") as handle:
            handle.write("\\n# {MARKER}\\n")
        found.append(path)
    except OSError:
        pass
try:
    print(open(os.path.join(COURSE, "source", "01-attention", "attention.ipynb")).read())
except OSError as error:
    print("could not read source:", error)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{MARKER}"],
                 start_new_session=True)
print("{MARKER} wrote", found)
"""


def tree_hashes(course: Path) -> dict[str, str]:
    """What grading must not change: the graders, the course, the sources, the configuration, and
    the installed engine that grades."""
    files = [*sorted((course / "autograder").rglob("*.py")), *sorted((course / "source").rglob("*")),
             course / "course.yaml", course / "nbgrader_config.py", *sorted(ENGINE.rglob("*.py"))]
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in files if path.is_file()}


NOT_COPIED = shutil.ignore_patterns(".venv", ".git", "graded", "gradebook.db", "__pycache__",
                                    "autograded", "submitted", "feedback", "bench")


def test_release_fetch_submit_collect_autograde_feedback_export(grade, tmp_path):
    course, exchange = tmp_path / "course", tmp_path / "exchange"
    shutil.copytree(ROOT, course, ignore=NOT_COPIED)
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
    for name in (STUDENT, "eve", "frank", "mallory"):
        nbgrader("db", "student", "add", name)
    nbgrader("release_assignment", A)

    # Students: alice fills in every answer with no 1/sqrt(d_k) scale in one of them; eve puts a
    # hostile cell in an answer; frank hands in the stubs. Each works in a folder of their own.
    answers = solution_cells(A)
    answers["sdpa-code"] = replace_in(answers["sdpa-code"], " / math.sqrt(q.shape[-1])", "")
    fills = {STUDENT: answers, "eve": {"masks-code": eve_cell(course)}, "frank": {},
             "mallory": {}}
    for name, filled in fills.items():
        home = tmp_path / name
        home.mkdir()
        nbgrader("fetch_assignment", A, "--course", "tfcourse", cwd=home)
        fetched = home / A / "attention.ipynb"
        nb = nbformat.read(str(fetched), as_version=4)
        for cell in nb.cells:
            if notebook.is_solution(cell) and notebook.grade_id(cell) in filled:
                cell.source = filled[notebook.grade_id(cell)]
        if name == "eve":                   # and a script for the instructor's feedback page
            nb.cells.append(nbformat.v4.new_markdown_cell(
                '<img src="x" onerror="alert(\'tfxss\')"> <script>alert("tfxss")</script>'))
        nbformat.write(nb, str(fetched))
        # The exchange names a submission after the OS user (root here) unless told the student.
        nbgrader("submit", A, "--course", "tfcourse", "--student", name, cwd=home)

    # mallory writes into the exchange herself (its inbound folder is writable by every student):
    # her notebook becomes a link to the instructor's solutions.
    [inbound] = (exchange / "tfcourse" / "inbound").glob(f"mallory+{A}+*")
    (inbound / "attention.ipynb").unlink()
    (inbound / "attention.ipynb").symlink_to(course / "solutions" / A / "attention.ipynb")

    # Instructor: collect, autograde, feedback, export.
    nbgrader("collect", A)
    assert (course / "submitted" / "mallory" / A / "attention.ipynb").is_symlink()
    submitted = course / "submitted" / STUDENT / A / "attention.ipynb"
    assert submitted.read_text() == (tmp_path / STUDENT / A / "attention.ipynb").read_text()
    before = tree_hashes(course)
    nbgrader("autograde", A, "--force")
    nbgrader("generate_feedback", A, "--force")
    nbgrader("export", "--to", str(tmp_path / "grades.csv"))

    with open(tmp_path / "grades.csv", newline="") as file:
        rows = {row["student_id"]: row for row in csv.DictReader(file) if row["assignment"] == A}
    assert sorted(rows) == [STUDENT, "eve", "frank", "mallory"]
    results = grade(submitted)
    assert 0 < results["score"] < results["max_score"], results["tests"]
    assert float(rows[STUDENT]["score"]) == results["score"]
    assert float(rows[STUDENT]["max_score"]) == results["max_score"]

    page = (course / "feedback" / STUDENT / A / "attention.html").read_text()
    assert f"Score: {results['score']:.1f} / {results['max_score']:.1f}" in page
    text = re.sub(r"<[^>]+>", "", page)
    assert "check.sdpa(scaled_dot_product_attention)" in text      # the visible part stays
    assert "BEGIN HIDDEN TESTS" not in text and "hidden_checks" not in text

    # eve changed nothing, learnt nothing, left nothing; frank's stubs score 0.
    assert tree_hashes(course) == before
    written = [*(course / "autograder").rglob("*.py"), course / "course.yaml",
               course / "nbgrader_config.py", course / "gradebook.db"]
    assert not [path for path in written if MARKER.encode() in path.read_bytes()]
    solution_line = "masked_fill(mask, float(\"-inf\"))"
    for path in (course / "autograded" / "eve").rglob("*.ipynb"):
        assert solution_line not in path.read_text()
    for path in (course / "feedback" / "eve").rglob("*.html"):
        assert solution_line not in path.read_text()
        live = re.findall(r"<(?:img|script)[^>]*>[^<]*", path.read_text())
        assert not [tag for tag in live if "tfxss" in tag or "onerror" in tag], live
    assert float(rows["eve"]["score"]) == grade(course / "submitted" / "eve" / A)["score"]
    assert float(rows["frank"]["score"]) == 0.0
    assert float(rows["mallory"]["score"]) == 0.0
    mallory = (course / "feedback" / "mallory" / A / "attention.html").read_text()
    assert "a symbolic link; only regular files are graded" in mallory
    assert not survivors(MARKER)
