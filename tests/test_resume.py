"""Resuming a batch: the submission's content, the graders and the course decide "unchanged",
not how the command was spelt."""
import hashlib
import json
import os
import shutil

import pytest

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


def test_a_grade_is_recorded_under_the_fingerprint_only_for_the_bytes_it_saw(tmp_path):
    """The runner fingerprints a submission when it plans the batch; its grader reads the
    notebooks later. The grader says what reading each gave, by path: the SHA-256 of its bytes,
    or why it refused it; the fingerprint is recorded only when each is what the plan saw (else a
    later run would report the submission "unchanged" with a grade of other bytes)."""
    from tfcourse.batch.fingerprint import Seen, graded_as_stamped, stamp
    from tfcourse.submission.report import NotebookReport, SubmissionReport

    alice = tmp_path / "alice"
    (alice / "sub").mkdir(parents=True)
    (alice / "attention.ipynb").write_bytes(b"planned")
    (alice / "sub" / "draft.ipynb").write_bytes(b"draft")
    (alice / "twice.ipynb").write_bytes(b"linked")
    os.link(alice / "twice.ipynb", alice / "sub" / "twice.ipynb")
    (alice / "link.ipynb").symlink_to(alice / "attention.ipynb")
    taken = stamp(runner.list_submission(alice), "v1", "[]")
    planned, draft = hashlib.sha256(b"planned").hexdigest(), hashlib.sha256(b"draft").hexdigest()
    assert taken.files["attention.ipynb"] == Seen(planned, 7, 1)
    assert taken.files["sub/draft.ipynb"] == Seen(draft, 5, 1)
    assert "link.ipynb" not in taken.files

    def report(*reads):
        return SubmissionReport(A, "alice", [NotebookReport("attention.ipynb", read=read)
                                            for read in reads])
    assert graded_as_stamped(report({"attention.ipynb": planned}), taken)
    assert graded_as_stamped(report({"sub/draft.ipynb": draft}, {}), taken)   # {}: none read
    assert not graded_as_stamped(report({"attention.ipynb": draft}), taken)   # swapped bytes
    assert not graded_as_stamped(report({"other.ipynb": planned}), taken)     # not planned
    assert not graded_as_stamped(report({"attention.ipynb": None}), taken)    # unreadable now
    assert not graded_as_stamped(report({"attention.ipynb": "changed while read"}), taken)
    assert not graded_as_stamped(report(["attention.ipynb"]), taken)          # not a map
    # refused for what the file was at the plan too: its kind, its hard links, its size
    assert graded_as_stamped(report({"link.ipynb": "refused: kind link"}), taken)
    assert graded_as_stamped(report({"twice.ipynb": "refused: links 2"}), taken)
    assert graded_as_stamped(report({"attention.ipynb": "refused: size 7"}), taken)
    # refused for what it became in between
    assert not graded_as_stamped(report({"attention.ipynb": "refused: kind link"}), taken)
    assert not graded_as_stamped(report({"attention.ipynb": "refused: links 2"}), taken)
    assert not graded_as_stamped(report({"attention.ipynb": "refused: size 9"}), taken)
    assert not graded_as_stamped(report({"link.ipynb": planned}), taken)
    by_content = report({"attention.ipynb": planned})
    by_content.read = {"sub/draft.ipynb": planned}      # what telling the assignment read
    assert not graded_as_stamped(by_content, taken)
    by_content.read = {"sub/draft.ipynb": draft}
    assert graded_as_stamped(by_content, taken)
    single = stamp(runner.list_submission(alice / "attention.ipynb"), "v1", "[]")
    assert single.files == {"": Seen(planned, 7, 1)}
    assert graded_as_stamped(report({"": planned}), single)
    too_large = stamp(runner.list_submission(alice), "v1", "[]")
    object.__setattr__(too_large, "files", {"attention.ipynb": Seen(None, 7, 1)})  # unhashed
    assert not graded_as_stamped(report({"attention.ipynb": planned}), too_large)


@pytest.mark.slow
def test_a_notebook_swapped_while_its_batch_runs_is_graded_again_next_time(course, tmp_path,
                                                                          monkeypatch):
    """A student who can write into the class folder while it is graded swaps a working notebook
    in after the plan fingerprinted the stub, and the stub back after the grading: the grade of
    the working one must not stay recorded under the stub's fingerprint (a second run said
    "unchanged", 14 / 14, for the stub)."""
    notebook = tmp_path / "class" / "mallory" / "attention.ipynb"
    shutil.copytree(ROOT / "release" / A, notebook.parent)
    stub = notebook.read_bytes()
    grade_in_child = runner.grade_in_child

    def swapped(*args, **options):
        notebook.write_bytes((ROOT / "solutions" / A / "attention.ipynb").read_bytes())
        try:
            return grade_in_child(*args, **options)
        finally:
            notebook.write_bytes(stub)

    monkeypatch.setattr(runner, "grade_in_child", swapped)
    out = tmp_path / "out"
    (first,) = runner.grade_many(course, [tmp_path / "class"], out, jobs=1, lang="en",
                                 progress=False, assignment=A)
    results = json.loads((out / "mallory" / "results.json").read_text())
    assert (first.status, first.score) == ("graded", 14)
    assert "fingerprint" not in results["extra_data"]
    assert "changed while the submission was being graded" in \
        (out / "mallory" / "feedback.md").read_text()
    monkeypatch.setattr(runner, "grade_in_child", grade_in_child)
    (second,) = runner.grade_many(course, [tmp_path / "class"], out, jobs=1, lang="en",
                                  progress=False, assignment=A)
    assert (second.status, second.score) == ("graded", 0)
    (third,) = runner.grade_many(course, [tmp_path / "class"], out, jobs=1, lang="en",
                                 progress=False, assignment=A)
    assert (third.status, third.score) == ("unchanged", 0)


@pytest.mark.slow
@pytest.mark.parametrize("decoy", ["no_grade_ids", "a_link"])
def test_a_notebook_not_graded_but_read_to_tell_the_assignment_counts_too(course, tmp_path,
                                                                         monkeypatch, decoy):
    """No name tells the assignment of zed's a.ipynb (the solution) and b.ipynb (the stub): the
    grader reads both, and grades b (the tie goes to the last name). Changing b while the batch
    runs (its grade ids stripped, or a link in its place: it no longer counts) makes the grader
    grade a, whose bytes are those planned; b restored, a second run said "unchanged", 14 / 14,
    for a folder whose grading gives 0 (review 32's second attacker)."""
    folder = tmp_path / "class" / "zed"
    shutil.copytree(ROOT / "release" / A, folder)
    (folder / "attention.ipynb").rename(folder / "b.ipynb")
    shutil.copy(ROOT / "solutions" / A / "attention.ipynb", folder / "a.ipynb")
    stub = (folder / "b.ipynb").read_bytes()
    grade_in_child = runner.grade_in_child

    def swapped(*args, **options):
        if decoy == "a_link":
            (folder / "b.ipynb").unlink()
            (folder / "b.ipynb").symlink_to(folder / "a.ipynb")
        else:
            nb = json.loads(stub)
            for cell in nb["cells"]:
                cell["metadata"].pop("nbgrader", None)
            (folder / "b.ipynb").write_text(json.dumps(nb))
        try:
            return grade_in_child(*args, **options)
        finally:
            (folder / "b.ipynb").unlink()
            (folder / "b.ipynb").write_bytes(stub)

    def run():
        (outcome,) = runner.grade_many(course, [tmp_path / "class"], tmp_path / "out", jobs=1,
                                       lang="en", progress=False)
        return outcome.status, outcome.score

    monkeypatch.setattr(runner, "grade_in_child", swapped)
    assert run() == ("graded", 14)                    # a graded: b did not count while read
    results = json.loads((tmp_path / "out" / "zed" / "results.json").read_text())
    assert "fingerprint" not in results["extra_data"]
    monkeypatch.setattr(runner, "grade_in_child", grade_in_child)
    assert run() == ("graded", 0)                     # b, the stub, is the one graded
    assert run() == ("unchanged", 0)
