"""What grading takes in: submission files read only as regular files of their own, a class folder
read by an explicit rule, results only their owner can read, a runner whose graders die with it, a
result with every check whatever the code does to the parser, and replies of a bounded size.

Most tests read folders and files without starting a grader. The four that grade use small
submissions and skip the checks that are not the point (a few seconds of grading each). Tests that a
followed link would lead to the course's own files check, with `untouched`, that those are unchanged;
reads that would block or grow without end run in a forked process with a time and memory limit.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, make_submission

from tfcourse.batch import child, runner
from tfcourse.submission.report import Note, SubmissionReport
from tfcourse.batch.results import write_atomically, write_results
from tfcourse.batch.runner import fingerprint, grade_many, survey, table
from tfcourse.sandbox import channel
from tfcourse.submission.finding import find_notebooks
from tfcourse.submission.notebooks import build_program, load_program, parse_notebook, read_notebook
from tfcourse import notebook

A = "01-attention"
NOTEBOOK = "attention.ipynb"
SOLUTION = ROOT / "solutions" / A / NOTEBOOK
SOURCE = ROOT / "source" / A / NOTEBOOK
TOKEN = f"tfinputs{uuid.uuid4().hex[:10]}"      # in the command line of what a hanging cell starts
# Every check but the two of masks: what a student earns is seen in seconds.
SKIP = ["sdpa.shapes", "sdpa.softmax", "sdpa.values", "sdpa.mask", "mha.structure", "mha.self",
        "mha.cross", "mha.mask"]


# -- helpers --------------------------------------------------------------------------------------
def digest(*paths: Path) -> dict[str, str]:
    """The bytes and link counts of files outside the test's folder, to see that nothing changed."""
    return {str(p): f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_nlink}"
            for p in paths}


OUTSIDE = (SOLUTION, SOURCE)


@pytest.fixture
def untouched():
    """Fails the test if it changed the course's own files (which a followed link would read)."""
    before = digest(*OUTSIDE)
    yield
    assert digest(*OUTSIDE) == before


def _in_child(function, args, answer) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))     # a /dev/zero read stops here
    try:
        answer.send(("ok", function(*args)))
    except BaseException as error:                                  # noqa: BLE001
        answer.send(("error", repr(error)))


def bounded(function, *args, seconds: float = 20):
    """`function(*args)` in a forked process with 1 GB of memory and `seconds`: what reading a
    pipe (blocks forever) or /dev/zero (grows forever) would do to the grader, without harm here."""
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_in_child,
                                                        args=(function, args, send))
    child.start()
    try:
        if not receive.poll(seconds):
            pytest.fail(f"{function.__name__} did not come back within {seconds} s")
        status, value = receive.recv()
    finally:
        child.kill()
        child.join()
    assert status == "ok", value
    return value


def notes_of(course, submission: Path, within: Path | None = None) -> tuple[bool, list[str]]:
    """(readable, notes in English) of the course notebook of a submission, read as the grader
    reads it (by `find_notebooks` and `load_program`)."""
    from tfcourse.batch.results import say

    _, notebooks = find_notebooks(course, submission, A, within)
    program = load_program(SOURCE, notebooks[NOTEBOOK], course.limit("notebook_mb"))
    return program.readable, [say(note.template, note.params, "en") for note in program.notes]


def student(folder: Path) -> Path:
    """A student's folder with the released notebook (no answers: nothing to run)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_bytes((ROOT / "release" / A / NOTEBOOK).read_bytes())
    return folder


# -- 1. only regular files of their own are read -----------------------------------------------
def _link_to_solution(folder: Path) -> None:
    (folder / NOTEBOOK).symlink_to(SOLUTION)


def _link_to_zero(folder: Path) -> None:
    (folder / NOTEBOOK).symlink_to("/dev/zero")


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / NOTEBOOK)


def _device(folder: Path) -> None:
    os.mknod(folder / NOTEBOOK, stat.S_IFCHR | 0o600, os.makedev(1, 5))     # as /dev/zero


def _hard_link(folder: Path) -> None:
    copy = folder.parent / "elsewhere.ipynb"           # someone else's file, outside the folder
    copy.write_bytes(SOLUTION.read_bytes())
    os.link(copy, folder / NOTEBOOK)


def _linked_folder(folder: Path) -> None:
    (folder / "work").symlink_to(SOLUTION.parent)      # the notebook is in work/, a link


def _huge(folder: Path) -> None:
    with open(folder / NOTEBOOK, "wb") as handle:       # sparse: 300 MB that take no disk
        handle.truncate(300 << 20)


@pytest.mark.parametrize("make, words", [
    (_link_to_solution, "attention.ipynb is a symbolic link; only regular files are graded"),
    (_link_to_zero, "attention.ipynb is a symbolic link; only regular files are graded"),
    (_fifo, "attention.ipynb is a named pipe (FIFO); only regular files are graded"),
    (_device, "attention.ipynb is a device file; only regular files are graded"),
    (_hard_link, "attention.ipynb has 2 names on disk (hard links); only a file of its own is "
                 "graded: copy it rather than link it"),
    (_linked_folder, "work: symbolic links are not followed; only regular files and folders are "
                     "graded"),
    (_huge, "the notebook attention.ipynb is 300 MB, more than the 256 MB a notebook file may be; "
            "it was not read"),
], ids=["link", "dev-zero", "fifo", "device", "hard-link", "linked-folder", "huge"])
def test_only_regular_files_of_their_own_are_read(course, tmp_path, untouched, make, words):
    if make is _device and os.geteuid() != 0:
        pytest.skip("only root makes device files")
    folder = tmp_path / "class" / "mallory"
    folder.mkdir(parents=True)
    make(folder)
    readable, notes = bounded(notes_of, course, folder)
    assert not readable
    assert words in notes, notes


def test_a_folder_swapped_for_a_link_after_it_was_listed_is_not_followed(course, tmp_path,
                                                                        untouched):
    folder = tmp_path / "mallory"
    student(folder / "work")
    _, notebooks = find_notebooks(course, folder, A)
    (folder / "work").rename(folder / "old")
    (folder / "work").symlink_to(SOLUTION.parent)      # between the listing and the reading
    raw, notes = read_notebook(notebooks[NOTEBOOK], 64)
    assert raw is None
    assert [(n.template, n.params["name"]) for n in notes] == [
        ("{name} is {what}, not a folder; only regular files and folders are graded", "work")]


def test_a_submission_that_is_a_link_is_refused_with_every_check(course, tmp_path, untouched):
    from tfcourse.submission.failures import refused_root

    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "carol").symlink_to(SOLUTION.parent)
    (tmp_path / "class" / NOTEBOOK).symlink_to(SOLUTION)
    report = refused_root(course, tmp_path / "class" / "carol", tmp_path / "class", A)
    assert report.assignment == A and len(report.tests) == 10
    assert {t.points for t in report.tests} == {0.0}
    assert [(n.template, n.params) for n in report.notes] == [(
        "{name} is {what}; only regular files and folders are graded",
        {"name": "carol", "what": "a symbolic link"})]
    named = refused_root(course, tmp_path / "class" / NOTEBOOK, None, None)   # told by its name
    assert named.assignment == A and len(named.tests) == 10
    unknown = refused_root(course, tmp_path / "class" / "carol", None, None)
    assert unknown.assignment == "" and unknown.tests == [] and unknown.notes


def test_the_fingerprint_reads_what_the_grader_reads(course, tmp_path, untouched):
    folder = student(tmp_path / "mallory")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "sub" / NOTEBOOK)
    (folder / "zero.ipynb").symlink_to("/dev/zero")
    first = bounded(fingerprint, folder, "v", "o")
    (folder / NOTEBOOK).write_text((folder / NOTEBOOK).read_text() + " ")
    second = bounded(fingerprint, folder, "v", "o")
    assert second != first
    (folder / "zero.ipynb").unlink()
    (folder / "zero.ipynb").symlink_to(SOLUTION)          # a link is never read, whatever it is
    assert bounded(fingerprint, folder, "v", "o") == second


# -- 2. what a folder of submissions is --------------------------------------------------------
def names(found) -> dict[str, str]:
    return {item.name: str(item.path) for item in found.submissions}


def test_a_stray_notebook_beside_students_is_one_more_submission(course, tmp_path):
    class_folder = tmp_path / "class"
    for name in ("alice", "bob"):
        student(class_folder / name)
    student(class_folder)                                  # attention.ipynb at the root
    (class_folder / "carol.ipynb").write_text("{}")
    (class_folder / "README.txt").write_text("hello")
    found = survey(course, [class_folder])
    assert names(found) == {"alice": f"{class_folder}/alice", "attention":
                            f"{class_folder}/{NOTEBOOK}", "bob": f"{class_folder}/bob",
                            "carol": f"{class_folder}/carol.ipynb"}
    assert found.ignored == [(f"{class_folder}/README.txt",
                              "a file, not a notebook nor a folder: ignored")]
    assert found.warnings == [(str(class_folder), (
        "holds attention.ipynb beside other submissions (carol.ipynb, alice/, bob/): graded as a "
        "class folder, each entry a submission of its own"))]


def test_notebook_files_of_a_class_are_each_a_submission(course, tmp_path):
    class_folder = tmp_path / "class"
    class_folder.mkdir()
    for name in ("alice.ipynb", NOTEBOOK, "..ipynb"):
        (class_folder / name).write_text("{}")
    found = survey(course, [class_folder])
    assert sorted(names(found)) == ["alice", "attention"]   # ..ipynb is hidden: left out
    assert found.warnings


def test_a_students_own_folder_is_one_submission(course, tmp_path):
    folder = student(tmp_path / "alice")
    (folder / "helpers.py").write_text("x = 1")
    (folder / "data").mkdir()
    found = survey(course, [folder])
    assert names(found) == {"alice": str(folder)} and not found.ignored and not found.warnings


def test_nbgrader_layout_and_a_student_named_like_a_notebook(course, tmp_path):
    submitted = tmp_path / "submitted"
    student(submitted / "alice" / A)
    (submitted / "alice" / "02-layers").mkdir()           # handed in without its notebook
    (submitted / "alice" / "scratch").mkdir()
    student(submitted / NOTEBOOK)                           # a student's folder, oddly named
    found = survey(course, [submitted])
    assert names(found) == {f"alice/{A}": f"{submitted}/alice/{A}",
                            "alice/02-layers": f"{submitted}/alice/02-layers",
                            NOTEBOOK: f"{submitted}/{NOTEBOOK}"}
    assert found.ignored == [(f"{submitted}/alice/scratch",
                              "beside nbgrader's assignment folders, not one of them: ignored")]
    assert {item.within for item in found.submissions} == {submitted}


def test_links_are_never_followed_not_even_on_the_command_line(course, tmp_path, untouched):
    class_folder = tmp_path / "class"
    student(class_folder / "alice")
    (class_folder / "carol").symlink_to(SOLUTION.parent)
    (class_folder / "notes").symlink_to(SOLUTION)
    (tmp_path / "latest").symlink_to(class_folder)
    found = survey(course, [class_folder, tmp_path / "latest"])
    assert names(found) == {"alice": f"{class_folder}/alice", "carol": f"{class_folder}/carol",
                            "latest": f"{tmp_path}/latest"}
    notes = {item.name: item.note for item in found.submissions}
    assert notes["carol"] == notes["latest"] == ("a symbolic link: not followed; graded 0 with a "
                                                 "note saying so")
    assert found.ignored == [(f"{class_folder}/notes",
                              "a symbolic link, not a notebook nor a folder: ignored")]


def test_odd_names_get_results_folders_of_their_own(course, tmp_path):
    class_folder = tmp_path / "class"
    odd = ["new\nline", "bad\udcffbyte", "alice"]
    for name in odd:
        student(class_folder / name)
    (class_folder / "alice.ipynb").write_text("{}")
    out = class_folder / "graded"                      # the results folder, inside the class
    (out / "alice").mkdir(parents=True)
    found = survey(course, [class_folder], exclude=out)
    chosen = sorted(names(found))
    assert chosen == sorted(["new\nline", "bad\udcffbyte", "class/alice", "class/alice.ipynb"])
    for name in chosen:                                   # each one can be written, and shown
        write_results(course, SubmissionReport(A, runner.printable(name)), out / name, "en")
    assert len(list(out.rglob("results.json"))) == 4
    lines = table([runner.Outcome(name, out / name, "graded") for name in chosen]).splitlines()
    assert len(lines) == 5 and "new?line" in lines[1 + chosen.index("new\nline")]
    (class_folder / "alice" / "sub").mkdir()
    dots = survey(course, [class_folder / "alice" / "sub" / ".."])       # named after alice
    assert names(dots) == {"alice": f"{class_folder}/alice/sub/.."}


def test_nothing_to_grade_is_said_and_shown(course, tmp_path, capsys):
    class_folder = tmp_path / "class"
    class_folder.mkdir()
    (class_folder / "README.txt").write_text("hello")
    outcomes = grade_many(course, [class_folder], tmp_path / "graded", jobs=1, lang="en",
                          progress=False)
    assert list(outcomes) == []
    why = "a file, not a notebook nor a folder: ignored"
    assert f"tfcourse grade: {class_folder}/README.txt: {why}" in capsys.readouterr().err
    row = table(outcomes).splitlines()[1]
    assert row.endswith(f"  {why}") and row.count("ignored") == 1, row      # said once


# -- 4. a result with every check, whatever happens ----------------------------------------------
def test_a_failed_grader_leaves_every_check_of_the_assignment(course, tmp_path, monkeypatch,
                                                             untouched):
    folder = student(tmp_path / "class" / "alice")
    monkeypatch.setattr(child.sys, "executable", "/bin/false")     # a grader that fails at once
    monkeypatch.setenv("TFCOURSE_FORK_SERVER", "0")   # (a running fork server has its python)
    report = child.grade_in_child(course, folder, None, 1, [], [], tmp_path / "class")
    results = write_results(course, report, tmp_path / "graded" / "alice", "en")
    assert results["max_score"] == 14 and len(results["tests"]) == 10
    assert {t["output"] for t in results["tests"]} == {"not graded: the grader failed"}
    assert "the grader process ended with status 1" in results["extra_data"]["grader_error"]
    (folder / NOTEBOOK).rename(folder / "mine.txt")                  # no assignment to tell
    unknown = write_results(course, child.grade_in_child(course, folder, None, 1, [], []),
                            tmp_path / "graded" / "unknown", "en")
    assert unknown["max_score"] == 0 and unknown["tests"] == []
    assert ("its assignment could not be told from the names of its notebooks (expected one of: "
            "attention.ipynb, layers.ipynb, sorting.ipynb), so its checks are not listed"
            ) in unknown["output"]


NESTED = "x = 1" + " + 1" * 100000 + "\n"          # RecursionError in compile and ast.parse


def test_code_nested_too_deeply_or_odd_cells_do_not_stop_the_reading():
    """An answer cell turned into markdown is run when it compiles: code nested too deeply to
    compile is not valid Python. A cell whose source or metadata has odd types is read too."""
    nb = json.loads((ROOT / "release" / A / NOTEBOOK).read_text())
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "mha-code":
            cell["cell_type"], cell["source"] = "markdown", NESTED
    nb["cells"].append({"cell_type": "code", "source": ["x = 1\n", 2, None], "metadata": ["odd"]})
    raw, notes = parse_notebook(json.dumps(nb).encode(), NOTEBOOK, 64)
    program = build_program(notebook.read(SOURCE), raw)
    assert notes == [] and program.readable
    assert [(n.template, n.params) for n in program.notes if n.params.get("gid") == "mha-code"] \
        == [("your answer cell {gid} had been turned into a {kind} cell and is not valid Python, "
             "so it was not run", {"gid": "mha-code", "kind": "markdown"})]
    assert program.cells[-1].source == "x = 1"


def test_a_grader_that_fails_on_deep_code_still_lists_every_check(tmp_path, monkeypatch):
    """Whatever in the trusted grader the parser's RecursionError escapes from, the report it
    writes has the assignment, so every check (and the assignment's maximum)."""
    import tfcourse.submission.__main__ as grader
    import tfcourse.submission.grade
    from tfcourse.submission.job import Job

    class NoSandbox:
        def __init__(self, config, zygote=None):
            pass

        def start(self):
            pass

        def close(self):
            pass

    def parse(*args, **kwargs):
        import ast
        ast.parse(NESTED)

    monkeypatch.setattr(grader, "open_sandbox", NoSandbox)
    monkeypatch.setattr(tfcourse.submission.grade, "grade_submission", parse)
    job = Job(submission=student(tmp_path / "alice"), course=ROOT, out=tmp_path / "report.json")
    grader.write_report(job.out, grader.grade(job, None, None))
    report = SubmissionReport.from_dict(json.loads(job.out.read_text()))
    assert report.assignment == A and len(report.tests) == 10
    assert "RecursionError: maximum recursion depth exceeded during ast construction" in \
        report.error
    assert stat.S_IMODE(job.out.stat().st_mode) == 0o600


@pytest.mark.slow
def test_a_nested_expression_still_gets_a_result_with_every_check(course, tmp_path, untouched):
    folder = make_submission(tmp_path / "submitted" / "deep", A,
                             answers={"masks-code": NESTED + "def causal_mask(T):\n    pass\n"})
    outcomes = grade_many(course, [tmp_path / "submitted"], tmp_path / "graded", jobs=1,
                          lang="en", progress=False, skip=SKIP)
    # SKIP leaves the 2 points of masks: the total counts only those
    assert [(o.name, o.assignment, o.max_score) for o in outcomes] == [("deep", A, 2)]
    results = json.loads((tmp_path / "graded" / "deep" / "results.json").read_text())
    assert results["max_score"] == 2 and len(results["tests"]) == 10
    assert results["extra_data"]["total"] == "0 / 2 (12 points not graded: skipped)"
    assert "Traceback" not in results["output"] and results["score"] == 0
    assert folder.is_dir()


@pytest.mark.slow
def test_notebooks_built_to_be_expensive_to_read_and_a_grader_without_a_cgroup(
        course, tmp_path, monkeypatch):
    """A notebook of 2 million empty objects gets a result that says why it was not read (the
    grader did not parse it). Where no cgroup can hold a grader, the grader holds itself to
    limits.grader_memory_mb (here 1 MB more than it has at its start: it cannot even grade)."""
    import dataclasses

    evil = tmp_path / "class" / "evil"
    evil.mkdir(parents=True)
    (evil / NOTEBOOK).write_bytes(b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, '
                                  b'"cells": [' + b"{}," * 2_000_000 + b"{}]}")
    student(tmp_path / "class" / "alice")
    outcomes = grade_many(course, [tmp_path / "class" / "evil"], tmp_path / "graded", jobs=1,
                          lang="en", progress=False)
    assert [(o.name, o.status, o.score, o.max_score) for o in outcomes] == [
        ("evil", "graded", 0, 14)]
    results = json.loads((tmp_path / "graded" / "evil" / "results.json").read_text())
    assert "attention.ipynb holds more than 200000 JSON values" in results["output"]
    assert "Traceback" not in results["output"]
    assert {test["output"] for test in results["tests"]} == {
        "not graded: the notebook could not be read"}

    class NoCgroups:
        @staticmethod
        def create(limits):
            return None

    monkeypatch.setattr(child, "Cgroup", NoCgroups)
    small = dataclasses.replace(course, limits=dataclasses.replace(course.limits,
                                                                  grader_memory_mb=1))
    outcomes = grade_many(small, [tmp_path / "class" / "alice"], tmp_path / "graded", jobs=1,
                          lang="en", progress=False, skip=SKIP)
    assert [(o.name, o.status, o.score) for o in outcomes] == [("alice", "failed", 0)]
    results = json.loads((tmp_path / "graded" / "alice" / "results.json").read_text())
    assert results["extra_data"]["grader_error"] == (
        "the grader process used more than 1 MB of memory (limits.grader_memory_mb) and was "
        "stopped")


@pytest.mark.slow
def test_a_class_of_notebooks_named_after_students_is_graded_by_their_cells(course, tmp_path):
    """The guide's layout (alice.ipynb, bob.ipynb): each notebook's assignment is told from its
    cells' grade ids; one whose cells are no assignment's is not graded, and says which option to
    add, never 0/0 "graded"."""
    class_folder = tmp_path / "class"
    class_folder.mkdir()
    make_submission(tmp_path / "alice", A)
    (tmp_path / "alice" / NOTEBOOK).rename(class_folder / "alice.ipynb")
    shutil.copy(ROOT / "release" / "02-layers" / "layers.ipynb", class_folder / "bob.ipynb")
    (class_folder / "carol.ipynb").write_text(json.dumps(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
         "cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [],
                    "execution_count": None}]}))
    outcomes = grade_many(course, [class_folder], tmp_path / "graded", jobs=2, lang="en",
                          progress=False, skip=SKIP)
    found = {o.name: (o.assignment, o.status, o.score, o.max_score) for o in outcomes}
    assert found == {"alice": (A, "graded", 2, 2), "bob": ("02-layers", "graded", 0, 29),
                     "carol": ("", "not graded: no assignment", 0, 0)}
    said = json.loads((tmp_path / "graded" / "carol" / "results.json").read_text())["output"]
    assert said == ("not graded: no notebook of this course was found in carol.ipynb (expected "
                    "one of: attention.ipynb, layers.ipynb, sorting.ipynb), and no notebook's "
                    "cells are those of an assignment; if it holds one, say which: tfcourse "
                    "grade --assignment ID (one of: 01-attention, 02-layers, 03-sorting)")
    assert "not graded: no assignment" in table(outcomes)


# -- 1 and 2 together: a class with hostile neighbours --------------------------------------------
@pytest.mark.slow
def test_a_class_with_hostile_entries_grades_every_student(course, tmp_path, untouched):
    class_folder = tmp_path / "class"
    make_submission(class_folder / "alice", A)
    make_submission(tmp_path / "spare", A)
    (tmp_path / "spare" / NOTEBOOK).rename(class_folder / NOTEBOOK)   # one at the root
    (class_folder / "bob").mkdir()
    _link_to_solution(class_folder / "bob")
    (class_folder / "carol").symlink_to(SOLUTION.parent)
    os.mkfifo(class_folder / "fifo.ipynb")
    (class_folder / "zero.ipynb").symlink_to("/dev/zero")
    before = {p: p.lstat().st_mtime_ns for p in class_folder.rglob("*")}
    outcomes = grade_many(course, [class_folder], tmp_path / "graded", jobs=2, lang="en",
                          progress=False, assignment=A, skip=SKIP)
    scores = {o.name: (o.status, o.score, o.max_score) for o in outcomes}
    assert scores == {"alice": ("graded", 2, 2), "attention": ("graded", 2, 2),
                      "bob": ("graded", 0, 2), "carol": ("graded", 0, 2),
                      "fifo": ("graded", 0, 2), "zero": ("graded", 0, 2)}
    output = {o.name: json.loads((o.folder / "results.json").read_text())["output"]
              for o in outcomes}
    assert "attention.ipynb is a symbolic link; only regular files are graded" in output["bob"]
    assert "carol is a symbolic link; only regular files and folders are graded" in output["carol"]
    assert "fifo.ipynb is a named pipe (FIFO); only regular files and folders are graded" in \
        output["fifo"]
    assert "zero.ipynb is a symbolic link; only regular files and folders are graded" in \
        output["zero"]
    assert outcomes.warnings and {o.name: o.note for o in outcomes}["carol"]
    assert before == {p: p.lstat().st_mtime_ns for p in class_folder.rglob("*")}


# -- 5. results are their owner's --------------------------------------------------------------
def test_results_are_readable_by_their_owner_only(course, tmp_path):
    previous = os.umask(0)
    try:
        report = SubmissionReport(A, "alice", notes=[Note("a note", {})])
        write_results(course, report, tmp_path / "graded" / "alice" / A, "en")
        write_atomically(tmp_path / "graded" / "other.json", "{}")
    finally:
        os.umask(previous)
    for path in (tmp_path / "graded").rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert {p.name for p in (tmp_path / "graded" / "alice" / A).iterdir()} == {
        "results.json", "feedback.md", "feedback.html"}


# -- 6. replies of a bounded size ---------------------------------------------------------------
def _send_later(fd: int, data: bytes) -> threading.Thread:
    def write():
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_reply_over_the_limit_ends_the_request_with_its_size():
    import torch

    assert channel.TRUSTED and channel.RECEIVE_LIMIT == channel.REPLY_LIMIT == 8 << 20
    read, write = os.pipe()
    sender = _send_later(write, channel.pack({"id": 1, "value": torch.zeros(9 << 18)}))  # 9 MB
    try:
        with pytest.raises(channel.TooLarge, match=r"^the reply was 9\.1 MB; at most 8 MB$"):
            channel.recv(read, timeout=10)
    finally:
        os.close(read)                     # the sender stops (EPIPE) before its end is closed
        sender.join()
        os.close(write)


def test_the_students_side_still_takes_large_requests():
    import importlib.util

    spec = importlib.util.spec_from_file_location("channel", channel.__file__)
    inside = importlib.util.module_from_spec(spec)          # as the sandbox runs its copy
    spec.loader.exec_module(inside)
    assert not inside.TRUSTED and inside.RECEIVE_LIMIT > 500 << 20


def test_a_reply_is_decoded_without_copies():
    import torch

    tensors = [torch.arange(1 << 20, dtype=torch.float32), torch.ones(3, dtype=torch.bool)]
    data = channel.pack({"id": 1, "value": tensors})
    read, write = os.pipe()
    try:
        sender = _send_later(write, data)
        tracemalloc.start()
        try:
            reply = channel.recv(read, timeout=10)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        sender.join()
    finally:
        os.close(read)
        os.close(write)
    got = reply["value"]
    assert torch.equal(got[0], tensors[0]) and torch.equal(got[1], tensors[1])
    assert peak < 1.3 * len(data), (peak, len(data))       # one copy of the bytes, not four


def test_two_tensors_of_a_reply_never_share_memory():
    import torch

    header = json.dumps({"body": {"__dict__": {"a": {"__tensor__": 0, "dtype": "uint8",
                                                     "shape": [4]},
                                               "b": {"__tensor__": 0, "dtype": "uint8",
                                                     "shape": [4]}}},
                         "sizes": [4]}).encode()
    read, write = os.pipe()
    try:
        os.write(write, channel._FRAME.pack(len(header), 4) + header + bytes(4))
        with pytest.raises(channel.ChannelError, match="malformed tensor in message"):
            channel.recv(read, timeout=10)
        os.write(write, channel.pack({"a": torch.ones(2)}))
        assert torch.equal(channel.recv(read, timeout=10)["a"], torch.ones(2))
    finally:
        os.close(read)
        os.close(write)


# -- 3. the runner's graders die with it ---------------------------------------------------------
HANG = f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.1)", "{TOKEN}"],
                 start_new_session=True)
while True:
    pass
"""


def processes(*markers: str) -> list[str]:
    """Running processes whose command line holds every one of `markers` (this one excepted)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if all(marker in line for marker in markers):
            found.append(f"{entry}: {line[:160]}")
    return found


def graders(temporary: Path) -> list[str]:
    """The trusted grader processes of a runner started with TMPDIR=`temporary` (its fork server
    and the graders forked from it, whose command line is the server's; or fresh interpreters):
    every one has the runner's environment from its start."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environment = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        grader = "-m tfcourse.submission" in line or "-m tfcourse.batch.forkserver" in line
        if grader and f"TMPDIR={temporary}".encode() in environment:
            found.append(f"{entry}: {line[:160]}")
    return found


def ancestry(lines: list[str]) -> list[list[str]]:
    """For a failure's message: each process of `lines` and those above it."""
    chains = []
    for line in lines:
        pid, chain = int(line.split(":")[0]), []
        while pid > 1:
            try:
                status = Path(f"/proc/{pid}/stat").read_text()
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                break
            chain.append(f"{pid} {command[:100].decode(errors='replace')}")
            pid = int(status[status.rindex(")") + 2:].split()[1])
        chains.append(chain)
    return chains


def wait_for(condition, seconds: float):
    """The first true value of `condition()` within `seconds`, or its last value."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if value := condition():
            return value
        time.sleep(0.2)
    return condition()


def gone_within(find, seconds: float) -> list:
    """What `find()` still finds after `seconds`, or [] as soon as it finds nothing."""
    ends = time.monotonic() + seconds
    while (left := find()) and time.monotonic() < ends:
        time.sleep(0.2)
    return left


def hanging_runner(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    """`tfcourse grade` on a submission whose cell hangs (after starting a process of its own),
    once that process runs; (runner, submission, private temporary folder)."""
    from conftest import solution_cells

    cells = solution_cells(A)
    submission = make_submission(tmp_path / "class" / "hang", A,
                                 answers={"masks-code": cells["masks-code"] + HANG})
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    command = [sys.executable, "-m", "tfcourse", "--course", str(ROOT), "grade",
               str(tmp_path / "class"), "--out", str(tmp_path / "graded"), "--no-progress",
               "--jobs", "1"]
    runner_process = subprocess.Popen(command, cwd=ROOT, env={**os.environ,
                                                              "TMPDIR": str(temporary)},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait_for(lambda: processes(TOKEN), 120):
        runner_process.kill()
        pytest.fail(f"the hanging cell never ran: {runner_process.communicate()}")
    assert graders(temporary)                                    # its grader runs
    return runner_process, submission, temporary


def _cleanup(temporary: Path) -> None:
    """Kill what the test started, should the runner have left anything."""
    for line in processes(TOKEN) + graders(temporary):
        with contextlib.suppress(OSError):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


@pytest.mark.slow
def test_stopping_the_runner_ends_its_graders_and_their_folders(tmp_path, untouched):
    runner_process, submission, temporary = hanging_runner(tmp_path)
    try:
        runner_process.send_signal(signal.SIGTERM)
        _, stderr = runner_process.communicate(timeout=60)
        assert runner_process.returncode == 128 + signal.SIGTERM, stderr
        assert "tfcourse grade: stopped by SIGTERM; every grader was ended" in stderr
        left = gone_within(lambda: processes(TOKEN) + graders(temporary), 15)
        assert not left, ancestry(left)
        assert list(temporary.iterdir()) == []
        assert not (tmp_path / "graded" / "hang" / "results.json").exists()   # not a result
    finally:
        _cleanup(temporary)


@pytest.mark.slow
def test_a_runner_killed_outright_takes_its_graders_with_it(tmp_path, untouched):
    runner_process, submission, temporary = hanging_runner(tmp_path)
    try:
        runner_process.kill()
        runner_process.communicate(timeout=60)
        left = gone_within(lambda: processes(TOKEN) + graders(temporary), 15)
        assert not left, ancestry(left)
    finally:
        _cleanup(temporary)



def test_a_notebook_renamed_in_its_folder_is_noted_one_given_alone_is_not(course, tmp_path):
    """`alice/attention (1).ipynb` is noted ("there is no attention.ipynb; ... was graded in its
    place"), for the student to learn; the files of a flat class folder (`bob.ipynb`, the
    guide's layout) were named by the instructor, and their students' pages said so to each."""
    renamed = student(tmp_path / "alice") / NOTEBOOK
    renamed.rename(renamed.with_name("attention (1).ipynb"))
    _, notes = notes_of(course, tmp_path / "alice")
    assert "there is no attention.ipynb; attention (1).ipynb was graded in its place" in notes
    flat = tmp_path / "class" / "bob.ipynb"
    flat.parent.mkdir()
    flat.write_bytes((ROOT / "release" / A / NOTEBOOK).read_bytes())
    _, notes = notes_of(course, flat)
    assert not [note for note in notes if "in its place" in note], notes


# -- data posing as code: course.yaml limits.code_kb and limits.literal_kb ----------------------
def _hex(kb: float) -> str:
    """`kb` KB of hex digits that look like packed weights."""
    return "".join(f"{i * 2654435761 % 2**32:08x}" for i in range(int(kb * 1024) // 8))


LOAD = "import torch\nWEIGHTS = torch.frombuffer(bytearray(DATA), dtype=torch.uint8)\n"
# what a student might paste to load trained weights in __init__: too much code (code_kb) ...
TOO_MUCH_CODE = {
    "a 239 KB hex string": f'DATA = bytes.fromhex("{_hex(239)}")\n' + LOAD,
    "30,000 floats in a list": "DATA = [" + ", ".join(f"{(i * 0.618034) % 1:.6f}"
                                                     for i in range(30_000)) + "]\n",
    "bytes.fromhex of a long string": f'HEX = "{_hex(100)}"\nDATA = bytes.fromhex(HEX)\n' + LOAD,
}
# ... or, under that, too much literal data (literal_kb)
TOO_MUCH_DATA = {
    "8 KB of hex": f'HEX = "{_hex(8)}"\nDATA = bytes.fromhex(HEX)\n' + LOAD,
    "2,000 floats in a list": "DATA = [" + ", ".join(f"{(i * 0.618034) % 1:.4f}"
                                                    for i in range(2_000)) + "]\n",
    "a 6 KB bytes literal": 'DATA = b"' + "WXYZ" * 1536 + '"\n' + LOAD,
    "a long tuple of ints": "DATA = (" + ", ".join(str(i * 7919 % 256) for i in range(2_000)) +
                            ")\n" + LOAD,
    "an expression of many constants": "SCALE = " + " + ".join(str(i * 31 % 997) for i in
                                                               range(2_000)) + "\n",
    "many small strings": "\n".join(f'W{i} = "{_hex(0.03)}"' for i in range(200)) + "\n",
}


def _run(course, folder: Path, data: str):
    from conftest import solution_cells
    from tfcourse.submission.run import NotebookRun
    answers = {"sdpa-code": solution_cells(A)["sdpa-code"] + "\n\n" + data}
    submission = make_submission(folder, A, answers) / NOTEBOOK
    return NotebookRun(course, course.assignment(A), NOTEBOOK, submission, None)


@pytest.mark.parametrize("case", list(TOO_MUCH_CODE) + list(TOO_MUCH_DATA))
def test_data_pasted_into_code_is_not_graded(course, tmp_path, case):
    from tfcourse.submission.run import NotGraded
    data = {**TOO_MUCH_CODE, **TOO_MUCH_DATA}[case]
    run = _run(course, tmp_path / "pasted", data)
    with pytest.raises(NotGraded) as refused:
        run.context()
    text = refused.value.template.format(**refused.value.params)
    if case in TOO_MUCH_CODE:
        assert len(data) > course.limit("code_kb") * 1024
        assert text.startswith("not graded: your code in this notebook is ") and \
            text.endswith(f"KB, more than the {course.limit('code_kb'):.0f} KB allowed"), text
    else:
        assert len(data) < course.limit("code_kb") * 1024 - 4096          # not its code's size
        assert text.startswith("not graded: your code in this notebook holds "), text
        assert f"more than the {course.limit('literal_kb'):g} KB allowed (limits.literal_kb); " \
            "data pasted into code, such as trained weights, does not count as your work" in text
    assert run.session is None and run.static is None      # nothing ran, nothing was checked


def _graded(course, monkeypatch, assignment: str, path: Path):
    """The notebook's run up to its checks' context, the student's process not started."""
    from tfcourse.sandbox.session import StudentSession
    from tfcourse.submission.run import NotebookRun
    monkeypatch.setattr(StudentSession, "start", lambda session: None)
    run = NotebookRun(course, course.assignment(assignment), path.name, path, None)
    run.context()
    return run


def test_the_solutions_and_the_alternatives_fit_the_limits(course, tmp_path, monkeypatch):
    """Every solution notebook and every alternative of tests/alternatives.py (each earns full
    marks) is graded: its code and its literal data are well within code_kb and literal_kb."""
    import nbformat
    from alternatives import ALTERNATIVES
    from conftest import NOTEBOOK_OF
    from tfcourse.submission.literals import literal_bytes
    notebooks = [(a, ROOT / "solutions" / a / name) for a, name in NOTEBOOK_OF.items()]
    for alt in ALTERNATIVES:
        def add(nb, alt=alt):
            nb.cells.extend(nbformat.v4.new_code_cell(text) for text in alt.added.values())
        folder = make_submission(tmp_path / alt.name, alt.assignment, alt.answers, edit=add)
        notebooks.append((alt.assignment, folder / NOTEBOOK_OF[alt.assignment]))
    for assignment, path in notebooks:
        run = _graded(course, monkeypatch, assignment, path)
        assert run.refusal is None and run.static is not None, (path, run.refusal)
        student = [cell.source for cell in run.program.cells if cell.from_student]
        assert sum(map(len, student)) < course.limit("code_kb") * 1024 / 3, path
        assert literal_bytes(student) < course.limit("literal_kb") * 1024 / 8, path


def test_literal_data_counts_strings_bytes_and_numbers_but_not_docstrings():
    from tfcourse.submission.literals import literal_bytes
    assert literal_bytes(['"""A docstring."""\nclass A:\n    """Its docstring."""\n'
                          '    def f(self):\n        """And its."""\n        return 1\n']) == 1
    assert literal_bytes(['x = "abc" + b"de".decode()', "y = [1.5, -2, 0x10, True, None]",
                          'z = f"{x}ab"', 'print("ñ")']) == 3 + 2 + (3 + 1 + 4) + 2 + 2
    assert literal_bytes(['x = "not valid', "def broken(:"]) == 0
    deep = "x = " + " + ".join(["1"] * 3000)       # deeper than the default parser goes
    assert literal_bytes([deep]) == 3000
