"""Resuming a batch: the submission's content, the graders and the course decide "unchanged",
not how the command was spelt."""
import json
import os
import shutil

from conftest import ROOT
from tfcourse.batch import child, runner

A = "01-attention"


def stamps(course, folder, assignment):
    version = child.grader_version(course)
    found = runner.survey(course, [folder])
    listings = {item.name: runner.list_submission(item.path, item.within)
                for item in found.submissions}
    return {name: runner.fingerprint(
        listed, version, json.dumps([runner.graded_as(course, listed, assignment), [], "en"]))
        for name, listed in listings.items()}


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


def test_a_fingerprint_keeps_its_value(tmp_path):
    """The fingerprint of a submission, now taken from its one listing, has the value it had when
    it listed the submission itself (2d6abe1): an earlier run's results stay "unchanged". Each
    notebook counts by its path, what it is and its bytes; other files, folders named like
    notebooks and what lies below a link do not."""
    alice = tmp_path / "alice"
    (alice / "sub" / "deeper").mkdir(parents=True)
    (alice / "attention.ipynb").write_bytes(b'{"cells": [], "nbformat": 4}')
    (alice / "sub" / "attention.ipynb").write_bytes(b"{}")
    (alice / "sub" / "deeper" / "draft.ipynb").write_bytes(b"draft")
    (alice / "notes.txt").write_bytes(b"not a notebook")
    (alice / "folder.ipynb").mkdir()
    (alice / "sub" / "away.ipynb").symlink_to("/etc/hostname")
    os.mkfifo(alice / "pipe.ipynb")
    (tmp_path / "carol.ipynb").write_bytes(b'{"cells": []}')
    (tmp_path / "dave.ipynb").symlink_to("carol.ipynb")
    # computed by 2d6abe1's fingerprint(path, "v1", options) on these same files
    before = {"alice": "8834a731406dc424a50ca342", "carol.ipynb": "77d2c9c82c7f7e4dee22915e",
              "dave.ipynb": "22858832e995330ce1d1f2e8", "nobody": "ed9910061774e1b881b5609e"}
    now = {name: runner.fingerprint(runner.list_submission(tmp_path / name), "v1",
                                    '["01-attention", [], "en"]') for name in before}
    assert now == before
    (alice / "notes.txt").write_bytes(b"changed, still not a notebook")
    assert runner.fingerprint(runner.list_submission(alice), "v1",
                              '["01-attention", [], "en"]') == before["alice"]
    (alice / "sub" / "deeper" / "draft.ipynb").write_bytes(b"draft 2")
    assert runner.fingerprint(runner.list_submission(alice), "v1",
                              '["01-attention", [], "en"]') != before["alice"]
