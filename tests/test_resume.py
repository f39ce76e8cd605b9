"""Resuming a batch: the submission's content, the graders and the course decide "unchanged",
not how the command was spelt."""
import json
import shutil

from conftest import ROOT
from tfcourse.batch import child, runner

A = "01-attention"


def stamps(course, folder, assignment):
    version = child.grader_version(course)
    found = runner.survey(course, [folder])
    return {item.name: runner.fingerprint(
        item.path, version, json.dumps([runner.graded_as(course, item, assignment), [], "en"]),
        item.within) for item in found.submissions}


def test_adding_or_dropping_the_assignment_option_changes_nothing(course, tmp_path):
    shutil.copytree(ROOT / "solutions" / A, tmp_path / "class" / "alice")
    assert stamps(course, tmp_path / "class", None) == stamps(course, tmp_path / "class", A)


def test_another_assignment_or_other_content_is_graded_again(course, tmp_path):
    shutil.copytree(ROOT / "solutions" / A, tmp_path / "class" / "alice")
    before = stamps(course, tmp_path / "class", A)
    assert stamps(course, tmp_path / "class", "02-layers") != before
    notebook = tmp_path / "class" / "alice" / "attention.ipynb"
    notebook.write_text(notebook.read_text().replace("import", "import ", 1))
    assert stamps(course, tmp_path / "class", A) != before


def test_a_changed_grader_or_engine_grades_again(course, tmp_path, monkeypatch):
    before = child.grader_version(course)
    copy = tmp_path / "engine"
    shutil.copytree(child.ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(child, "ENGINE", copy)
    assert child.grader_version(course) == before
    (copy / "submission" / "framework.py").write_text("# changed\n", encoding="utf-8")
    assert child.grader_version(course) != before
