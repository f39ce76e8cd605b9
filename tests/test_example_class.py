"""The example class that ships in examples/class/: generated from the solution, the release and
the catalogue, up to date, and graded to the scores README.md gives."""
import csv
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from tfcourse.build import exampleclass

# README.md, "Install and test": each submission's score with --skip trained.accuracy
SCORES = {
    ("example-cheat-torch-sdpa", "01-attention"): (8, 14),
    ("example-heads-no-transpose", "01-attention"): (9, 14),
    ("example-mask-inverted", "01-attention"): (12, 14),
    ("example-masked-fill-dropped", "01-attention"): (12, 14),
    ("example-no-scale", "01-attention"): (12, 14),
    ("example-solution", "01-attention"): (14, 14),
    ("example-solution", "02-layers"): (29, 29),
    ("example-solution", "03-sorting"): (16, 16),
    ("example-untouched", "01-attention"): (0, 14),
    ("example-untouched", "02-layers"): (0, 29),
    ("example-untouched", "03-sorting"): (0, 16),
}
# what each bug of the class must lose (its catalogue entry says the same), and the cheat
LOST = {
    "example-cheat-torch-sdpa": {"sdpa.shapes", "sdpa.softmax", "sdpa.values", "sdpa.mask"},
    "example-heads-no-transpose": {"mha.self", "mha.cross", "mha.mask"},
    "example-mask-inverted": {"sdpa.mask"},
    "example-masked-fill-dropped": {"sdpa.mask"},
    "example-no-scale": {"sdpa.values"},
}


def test_the_committed_example_class_is_what_the_build_makes(course):
    assert exampleclass.stale(course) == [], "run `tfcourse build` and commit examples/"


def test_a_stale_example_class_is_named(tmp_path):
    """build --check lists the example class as stale when a bug of the catalogue (or the solution
    or the release) changed, and a file it no longer makes."""
    import shutil

    from tfcourse.course import load_course
    copy = tmp_path / "course"
    copy.mkdir()
    for name in ("course.yaml", "source", "release", "examples", "tests", "autograder", "visible"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, copy / name)
    catalogue = copy / "tests" / "catalogue" / "attention.py"
    catalogue.write_text(catalogue.read_text().replace(
        '"q @ k.transpose(-2, -1)",\n        {"sdpa.values": "sqrt(d_k)"}',
        '"q @ k.transpose(-2, -1) * 1.0",\n        {"sdpa.values": "sqrt(d_k)"}', 1))
    (copy / "examples" / "class" / "example-solution" / "notes.txt").write_text("mine")
    found = exampleclass.stale(load_course(copy))      # the copy's catalogue, read there
    assert found == ["examples/class/example-no-scale/01-attention/attention.ipynb is stale",
                     "examples/class/example-solution/notes.txt should not be there"], found


def test_every_submission_of_the_readme_is_in_the_class(course):
    made = {(path.parts[-3], path.parts[-2]) for path in exampleclass.example_class(course)
            if path.suffix == ".ipynb"}
    assert made == set(SCORES)
    assert all(student.startswith("example-") for student, _ in made)


def test_the_example_class_is_not_ignored_by_git():
    done = subprocess.run(["git", "check-ignore", "-q", "examples/class/example-solution/"
                           "01-attention/attention.ipynb"], cwd=ROOT)
    assert done.returncode == 1, "examples/class/ is hidden by .gitignore"


def test_the_example_class_carries_no_outputs(course):
    import json
    for path, text in exampleclass.example_class(course).items():
        if path.suffix == ".ipynb":
            cells = json.loads(text)["cells"]
            assert all(not cell.get("outputs") for cell in cells), path


@pytest.mark.slow
def test_the_readmes_command_grades_the_example_class_to_its_scores(tmp_path):
    """README.md's one command: grade the example class and write its report."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}

    def tfcourse(*args):
        done = subprocess.run([sys.executable, "-m", "tfcourse", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=1200, env=environment)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    graded, report = tmp_path / "graded", tmp_path / "report"
    done = tfcourse("grade", "examples/class", "--out", str(graded), "--skip", "trained.accuracy",
                    "--no-progress")
    assert "warning" not in done.stdout and "ignored" not in done.stdout, done.stdout
    with open(graded / "grades.csv", newline="") as rows:
        got = {(row["student_id"], row["assignment"]): row for row in csv.DictReader(rows)}
    assert {key: (float(row["score"]), float(row["max_score"])) for key, row in got.items()} \
        == SCORES, done.stdout
    for student, lost in LOST.items():
        row = got[(student, "01-attention")]
        zero = {test for test, value in row.items() if "." in test and value == "0"}
        assert zero == lost, (student, zero)
    assert done.stdout.strip().endswith(f"3 submissions were handed in as released (every "
                                        f"check says it is not written yet): `tfcourse report "
                                        f"{graded} --out report/ --skip-unstarted` leaves them "
                                        f"out of the class report's figures"), done.stdout
    said = tfcourse("report", str(graded), "--out", str(report)).stdout
    assert said.startswith(f"wrote {report / 'index.html'}\n"), said
    for assignment in ("01-attention", "02-layers", "03-sorting"):
        assert f"wrote {report / assignment / 'index.html'}" in said, said
