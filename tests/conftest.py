"""Shared fixtures: the course, and building and grading submissions the way students make them.

A submission is built from the released notebook (what a student starts from) with each answer cell
filled in: by default with the course's solution, or with the code a test gives for that cell.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

import nbformat
import pytest

from tfcourse import notebook
from tfcourse.course import load_course

ROOT = Path(__file__).resolve().parents[1]

# Each assignment's first notebook, from course.yaml: the tests name no assignment of their own.
NOTEBOOK_OF = {assignment.id: assignment.notebooks[0]
               for assignment in load_course(ROOT).assignments}


def visible_checks():
    """`check` as a notebook has it, with the course's visible/ folder as it is now: the numbers
    come from the working folder (a source or release folder, where `tfcourse build` wrote them),
    the code and messages from visible/ (so an edit there is tested before the next build)."""
    from tfcourse.student import visible
    return visible.Checks(override=visible.course_payload(ROOT))


@pytest.fixture(scope="session")
def course():
    return load_course(ROOT)


def solution_cells(assignment: str) -> dict[str, str]:
    """grade_id -> the course's solution code of each answer cell (markers removed)."""
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    return {notebook.grade_id(cell): notebook.strip_solution_markers(notebook.text(cell))
            for cell in nb.cells if notebook.is_solution(cell)}


def make_submission(folder: Path, assignment: str, answers: dict[str, str] | None = None,
                    edit=None) -> Path:
    """A student's folder: the released notebook, answer cells filled in, then `edit(nb)`.

    `answers` maps an answer cell's grade_id to the code a student wrote there; cells not named
    get the course's solution. Returns the folder (the helper modules are copied beside).
    """
    folder.mkdir(parents=True, exist_ok=True)
    release = ROOT / "release" / assignment
    nb = nbformat.read(str(release / NOTEBOOK_OF[assignment]), as_version=4)
    filled = {**solution_cells(assignment), **(answers or {})}
    for cell in nb.cells:
        gid = notebook.grade_id(cell)
        if notebook.is_solution(cell) and gid in filled:
            cell.source = filled[gid]
    if edit is not None:
        nb = edit(nb) or nb
    nbformat.write(nb, str(folder / NOTEBOOK_OF[assignment]))
    for extra in release.glob("*.py"):
        (folder / extra.name).write_text(extra.read_text())
    return folder


def replace_in(source: str, old: str, new: str, count: int = 1) -> str:
    """`source` with `old` replaced by `new`, failing loudly if `old` is not there."""
    assert old in source, f"{old!r} not found in the solution; the test is out of date"
    return source.replace(old, new, count)


def scores(results: dict) -> dict[str, float]:
    return {test["number"]: test["score"] for test in results["tests"]}


def lost(results: dict) -> set[str]:
    return {test["number"] for test in results["tests"] if test["status"] != "passed"}



# The start of a script that runs the sandbox's worker (its harness, as the sandbox holds it, from
# the folder given as argv[1]) on a thread of its own process, and `ask(op, **args)`, which sends
# it a request and returns the reply: what tests of the student's side drive.
WORKER_IN_A_THREAD = r'''
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import channel, torch, worker
requests, replies = os.pipe(), os.pipe()
threading.Thread(target=worker.Worker(requests[0], replies[1]).serve, daemon=True).start()
number = 0
def ask(op, **args):
    global number
    number += 1
    channel.send(requests[1], {"id": number, "op": op, "args": args})
    return channel.recv(replies[0])
'''

TRAINING = "trained.accuracy"     # the check that trains a model: skipped where it is not the point


def lost_points(results: dict, skipped: set[str]) -> set[str]:
    """The checks that scored less than their points, leaving out those that were skipped."""
    return {test["number"] for test in results["tests"]
            if test["score"] < test["max_score"] and test["number"] not in skipped}


def grade_batches(course, items, root: Path, build,
                  untrained=(TRAINING,)) -> dict[str, tuple[dict, set[str]]]:
    """Grade submissions as a class is graded, two at a time: `build(folder, item)` makes one for
    each item (a bug, an alternative: with a `name`, and `train` when the training check counts).
    Those that do not train are graded without the checks in `untrained`. item name -> (results,
    the checks skipped)."""
    import json

    from tfcourse.batch.runner import grade_many

    out = {}
    for train in (False, True):
        folders = [build(root / "submissions" / item.name, item)
                   for item in items if item.train == train]
        skip = [] if train else list(untrained)
        for outcome in grade_many(course, folders, root / "graded", jobs=2, lang="en",
                                  progress=False, skip=skip):
            results = json.loads((outcome.folder / "results.json").read_text())
            out[outcome.name] = (results, set(skip))
    return out


@pytest.fixture(scope="session")
def grade(course):
    """grade(path, assignment=None, skip=()) -> Gradescope-style results of one submission."""
    from tfcourse.batch.runner import grade_one

    def run(path: Path, assignment: str | None = None, skip=(), lang: str | None = None):
        _, results = grade_one(course, Path(path), assignment=assignment, skip=list(skip),
                               lang=lang)
        return results
    return run


def survivors(marker: str) -> list[str]:
    """Command lines of running processes (other than this one) that mention `marker`: what a
    grading left behind, when every process a test starts carries the marker."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        try:
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and marker in line and int(entry) != os.getpid():
            found.append(f"{entry}: {line[:200]}")
    return found


ZYGOTE_READY_BOUND = 600     # s: a bound on a zygote's start, never reached unless it hangs


@contextlib.contextmanager
def zygote_for_sandbox(config, wanted: bool = True):
    """While inside: a zygote started for `config` (sandbox/forked.py), as a runner's thread holds
    one; a sandbox's settings name it where it fits them, as a grader's job hands it on
    (`forked.handed(settings, host)`). None when not `wanted`.

    It is handed on once it says it is ready (torch imported), however long that takes on a busy
    machine: a request sent before has READY_SECONDS for the zygote's start and the fork together,
    and past them the student's process starts afresh, which a test of forked processes would read
    as a failure of what it checks."""
    from tfcourse.sandbox import forked

    if not wanted:
        yield None
        return
    host = forked.Zygote(config)
    assert host.key is not None, "no zygote can be used here"
    host.start()
    if not host.wait_ready(ZYGOTE_READY_BOUND):
        host.close()
        raise AssertionError(f"the zygote did not start: {host.refused or 'it ended'}")
    try:
        yield host
    finally:
        host.close()


def strip(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
