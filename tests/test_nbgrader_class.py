"""A class in nbgrader's layout, end to end, as the README and the instructor's guide tell it:
`tfcourse grade submitted/ --out graded/`, then `tfcourse report graded/` and `tfcourse similarity
submitted/`, on what grading wrote (graded/<student>/<assignment>/).

The class: alice hands in the solutions of 01-attention (collected by nbgrader: with its
timestamp.txt) and of 03-sorting (placed by hand), bob the released 01-attention untouched (by
hand). The training check is skipped, as on a machine where it is not the point.
"""
import csv
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def tfcourse(*args, cwd):
    """The command, run in `cwd` with this checkout's package (as an instructor types it)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "tfcourse", "--course", str(ROOT), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": path})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    submitted = root / "submitted"
    for student, assignment, edition, notebook in (
            ("alice", "01-attention", "solutions", "attention.ipynb"),
            ("alice", "03-sorting", "solutions", "sorting.ipynb"),
            ("bob", "01-attention", "release", "attention.ipynb")):
        folder = submitted / student / assignment
        folder.mkdir(parents=True)
        shutil.copy(ROOT / edition / assignment / notebook, folder / notebook)
    (submitted / "alice" / "01-attention" / "timestamp.txt").write_text(
        "2026-12-01 10:00:00.000000 UTC")
    (submitted / "alice" / "01-attention" / "submission_secret.txt").write_text("s3cr3t")
    run = tfcourse("grade", "submitted/", "--out", "graded/", "--jobs", "1", "--no-progress",
                   "--skip", "trained.accuracy", cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    return root, run


def test_grading_writes_nbgrader_layout_and_says_so(graded):
    root, run = graded
    for name in ("alice/01-attention", "alice/03-sorting", "bob/01-attention"):
        assert (root / "graded" / name / "results.json").is_file(), name
    assert "graded/<student>/<assignment>/results.json" in run.stdout
    assert "graded/<submission>/" not in run.stdout
    assert "graded/grades.csv" in run.stdout
    assert run.stdout.strip().endswith(                        # bob's: said once, at the end
        "1 submission was handed in as released (every check says it is not written yet): "
        "`tfcourse report graded --out report/ --skip-unstarted` leaves it out of the class "
        "report's figures"), run.stdout


def test_the_feedback_names_the_student(graded):
    root, _ = graded
    for student, assignment in (("alice", "01-attention"), ("bob", "01-attention")):
        page = (root / "graded" / student / assignment / "feedback.md").read_text()
        assert page.splitlines()[0] == f"# Feedback: {student}", page
        html = (root / "graded" / student / assignment / "feedback.html").read_text()
        assert f"<h1>Feedback: {student}</h1>" in html


def test_a_folder_placed_by_hand_is_named_with_what_nbgrader_needs(graded):
    _, run = graded
    warned = [line for line in run.stderr.splitlines() if "timestamp.txt" in line]
    assert len(warned) == 2, run.stderr                 # not alice/01-attention: collected
    assert any("submitted/bob/01-attention" in line and "release_feedback" in line
               and "student_id_exclude=bob" in line for line in warned), warned
    assert any("submitted/alice/03-sorting" in line for line in warned), warned


def test_grades_csv_lists_the_class(graded):
    root, _ = graded
    rows = list(csv.DictReader((root / "graded" / "grades.csv").open()))
    got = {(row["student_id"], row["assignment"]): (row["score"], row["max_score"])
           for row in rows}
    assert got == {("alice", "01-attention"): ("14", "14"), ("bob", "01-attention"): ("0", "14"),
                   ("alice", "03-sorting"): ("16", "16")}
    sorting = next(row for row in rows if row["assignment"] == "03-sorting")
    assert sorting["trained.accuracy"] == "" and sorting["model.params"] == "1"
    # a later run skips them all as unchanged, and still lists every one
    (root / "graded" / "grades.csv").unlink()
    again = tfcourse("grade", "submitted/", "--no-progress", "--jobs", "1",
                     "--skip", "trained.accuracy", cwd=root)          # --out's default: graded/
    assert again.returncode == 0 and again.stdout.count("unchanged") == 3, again.stdout
    assert list(csv.DictReader((root / "graded" / "grades.csv").open())) == rows


def test_report_reads_nbgrader_layout(graded):
    root, _ = graded
    run = tfcourse("report", "graded/", "--out", "report/", cwd=root)
    assert run.returncode == 0, run.stderr
    scores = list(csv.DictReader((root / "report" / "01-attention" / "scores.csv").open()))
    assert sorted(row["submission"] for row in scores) == ["alice/01-attention",
                                                           "bob/01-attention"]
    assert (root / "report" / "03-sorting" / "index.html").is_file()
    page = (root / "report" / "01-attention" / "index.html").read_text()
    assert "2 submissions graded" in page                              # bob's is unstarted:
    assert "Unstarted among them (handed in as released" in page        # said, and counted
    assert "left out" not in page.lower().split("what to explain")[0]
    left = tfcourse("report", "graded/", "--out", "started/", "--skip-unstarted", cwd=root)
    assert left.returncode == 0, left.stderr
    scores = list(csv.DictReader((root / "started" / "01-attention" / "scores.csv").open()))
    assert [row["submission"] for row in scores] == ["alice/01-attention"]
    page = (root / "started" / "01-attention" / "index.html").read_text()
    assert "1 submissions graded" in page and "Left out of every figure" in page


def test_similarity_reads_nbgrader_layout(graded, tmp_path):
    root, _ = graded
    known = tmp_path / "known" / "alice" / "01-attention"         # nbgrader's layout there too
    known.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "01-attention" / "attention.ipynb", known)
    run = tfcourse("similarity", "submitted/", "--assignment", "01-attention", "--out",
                   "similarity/", "--known", str(tmp_path / "known"), cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    pairs = list(csv.DictReader((root / "similarity" / "pairs.csv").open()))
    assert [(pair["first"], pair["second"]) for pair in pairs] == [
        ("alice/01-attention", "known: attention.ipynb")], pairs
    assert "not compared: bob/01-attention: too little code" in run.stdout
