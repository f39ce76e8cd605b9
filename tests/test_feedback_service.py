"""Feedback on submit (tfcourse/hub/): the exchange's inbound folder, fair use, what a student sees,
and a service that stops at any moment and starts again without losing or doubling a grading.

The fast tests grade with a stand-in grader (no sandbox); the last test runs the real service
command, grading in the sandbox, and kills it mid-queue.
"""
from __future__ import annotations

import datetime
import json
import logging
import math
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tfcourse.batch.results import private_folder
from tfcourse.course import CourseError, load_course, parse_course
from tfcourse.submission.report import NotebookReport, SubmissionReport, TestResult
from tfcourse.hub import keys, page
from tfcourse.hub.ledger import (DAY, FAILED, GRADED, HOUR, LIMITED, QUEUED, REFUSED, SAME,
                                 SUPERSEDED, AlreadyRunning, Ledger, next_allowed)
from tfcourse.hub.service import Service

from conftest import ROOT, make_submission, replace_in, scores, solution_cells, strip

T0 = 1_800_000_000.0                    # a fixed clock for the tests


class Clock:
    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now


def full_marks(course, folder: Path, assignment: str) -> SubmissionReport:
    """A stand-in grader: every check passes."""
    tests = [TestResult(test_id, course.assignment(assignment).points_of(test_id),
                        course.assignment(assignment).points_of(test_id))
             for test_id in course.assignment(assignment).test_ids()]
    name = course.assignment(assignment).notebooks[0]
    assert (folder / name).is_file(), "the grader gets the copied notebook"
    return SubmissionReport(assignment, folder.name, [NotebookReport(name, tests)])


def submit(exchange: Path, student: str, assignment: str = "01-attention", stamp: str = "1",
           owner: str | None = None, notebook: bytes = b'{"cells": []}',
           state: Path | None = None, key: str | None = None) -> Path:
    """What `nbgrader submit` leaves in the inbound folder, with the student's submission key
    (keys.py) under the service's secret in `state` (by default the exchange's sibling "state"),
    as a student does where the service takes names on trust; `key`: another key instead (""
    for none)."""
    inbox = exchange / "tfcourse" / "inbound"
    if not inbox.is_dir():                      # as nbgrader's release makes it
        inbox.mkdir(parents=True)
        os.chmod(inbox, 0o733)
    folder = inbox / f"{student}+{assignment}+{stamp}+r{stamp}"
    folder.mkdir()
    name = load_course(ROOT).assignment(assignment).notebooks[0]
    (folder / name).write_bytes(notebook)
    (folder / "timestamp.txt").write_text(stamp)
    if key is None:
        key = with_key(folder, state or exchange.parent / "state", student)
    elif key:
        (folder / keys.KEY_FILE).write_text(key + "\n")
    if owner:
        for path in [folder, folder / name, folder / "timestamp.txt",
                     *[folder / keys.KEY_FILE] * bool(key)]:
            shutil.chown(path, owner)
    os.chmod(folder, 0o777)                     # nbgrader's last step
    return folder


def with_key(folder: Path, state: Path, student: str) -> str:
    """Put `student`'s submission key, under the secret of the service in `state`, into the
    submission `folder` (as the student does under --trust-names); the key."""
    private_folder(state)
    key = keys.key_of(keys.secret(state), student)
    (folder / keys.KEY_FILE).write_text(key + "\n")
    return key


@pytest.fixture
def course():
    return load_course(ROOT)


def service(course, tmp_path, clock=None, grade=full_marks, **options) -> Service:
    options.setdefault("trust_names", True)
    return Service(course, tmp_path / "exchange", tmp_path / "state", clock=clock or Clock(),
                   grade=grade, **options)


def grade_next(feedback: Service) -> str:
    """Grade the submission whose turn it is (as a worker would); its key."""
    record = feedback.next_turn()
    feedback.grade_one(record)
    feedback.busy.discard(record.student)
    return record.key


# -- fair use ---------------------------------------------------------------------------------------
def test_next_allowed_counts_the_last_hour_and_the_last_day():
    assert next_allowed([], T0, 3, 12) is None
    assert next_allowed([T0 - 10, T0 - 20], T0, 3, 12) is None
    assert next_allowed([T0 - 10, T0 - 20, T0 - 30], T0, 3, 12) == T0 - 30 + HOUR
    assert next_allowed([T0 - HOUR - 1] * 3, T0, 3, 12) is None          # out of the hour
    day = [T0 - HOUR * (k + 2) for k in range(12)]
    assert next_allowed(day, T0, 3, 12) == min(day) + DAY
    assert next_allowed([], T0, 0, 12) == math.inf


def test_a_student_over_the_limit_is_told_when_the_next_grading_is_allowed(course, tmp_path):
    clock = Clock()
    feedback = service(course, tmp_path, clock)
    for minute in range(4):
        clock.now = T0 + 60 * minute
        submit(tmp_path / "exchange", "alice", stamp=str(minute))
        feedback.scan()
        if minute < 3:
            grade_next(feedback)
    submit(tmp_path / "exchange", "bob", stamp="9")            # others are not held back
    feedback.scan()
    states = {r.key.split("+")[2] + r.student: r for r in feedback.ledger.all()}
    assert [states[f"{m}alice"].status for m in range(4)] == [GRADED] * 3 + [LIMITED]
    assert states["9bob"].status == QUEUED
    limited = states["3alice"]
    assert limited.next_allowed == T0 + HOUR                   # the first one leaves the hour
    records, results = feedback.view("alice")
    text = page.page(course, "alice", records, results, clock.now, "en")
    assert "fair use allows 3 gradings an hour and 12 a day" in text
    assert page.when(T0 + HOUR) in text
    # one hour after the first, one more is allowed
    clock.now = T0 + HOUR + 1
    submit(tmp_path / "exchange", "alice", stamp="60")
    assert feedback.scan() == 1
    assert feedback.ledger.records["alice+01-attention+60+r60"].status == QUEUED


def test_the_limit_counts_each_assignment_apart(course, tmp_path):
    feedback = service(course, tmp_path)
    for stamp in "123":
        submit(tmp_path / "exchange", "alice", stamp=stamp)
        feedback.scan()
        grade_next(feedback)
    submit(tmp_path / "exchange", "alice", "02-layers", stamp="4")
    feedback.scan()
    assert sorted(r.status for r in feedback.ledger.all()) == [GRADED] * 3 + [QUEUED]


def test_a_newer_submission_supersedes_one_still_waiting(course, tmp_path):
    """One submission of each student and assignment waits at a time: resubmitting before one's
    turn replaces the waiting one, which is neither graded nor counted."""
    feedback = service(course, tmp_path)
    for stamp in "12":
        submit(tmp_path / "exchange", "alice", stamp=stamp)
    feedback.scan()
    statuses = {r.key.split("+")[2]: r.status for r in feedback.ledger.all()}
    assert statuses == {"1": SUPERSEDED, "2": QUEUED}
    assert not feedback.ledger.snapshot_folder("alice+01-attention+1+r1").exists()
    assert grade_next(feedback) == "alice+01-attention+2+r2"
    records, results = feedback.view("alice")
    text = page.page(course, "alice", records, results, T0, "en")
    assert "a newer submission came before its turn" in text


def test_students_take_turns(course, tmp_path):
    """eve queues a submission of each assignment, then bob one: bob's is graded second, not
    last; and no student has two graded at once."""
    clock = Clock()
    feedback = service(course, tmp_path, clock)
    for number, assignment in enumerate(["01-attention", "02-layers", "03-sorting"]):
        submit(tmp_path / "exchange", "eve", assignment, stamp=str(number))
    submit(tmp_path / "exchange", "bob", stamp="9")
    feedback.scan()
    order = []
    for _ in range(4):
        record = feedback.next_turn()
        assert feedback.busy == {record.student}
        feedback.grade_one(record)
        feedback.busy.discard(record.student)
        clock.now += 1
        order.append(record.student)
    assert order == ["eve", "bob", "eve", "eve"]


def test_a_flood_of_submissions_is_not_even_recorded(course, tmp_path):
    from tfcourse.hub.ledger import FLOOD

    feedback = service(course, tmp_path)
    for number in range(FLOOD + 30):
        submit(tmp_path / "exchange", "eve", stamp=str(number))
    submit(tmp_path / "exchange", "bob", stamp="x")
    feedback.scan()
    eve = feedback.ledger.of_student("eve")
    assert len(eve) == FLOOD and [r.status for r in eve].count(QUEUED) == 1    # the newest
    assert len(list((tmp_path / "state" / "snapshots").iterdir())) == 2    # eve's 1, bob's
    assert feedback.ledger.of_student("bob")[0].status == QUEUED
    assert feedback.scan() == 0                          # the rest stays left alone


# -- who submitted --------------------------------------------------------------------------------
def test_a_submission_under_another_students_name_is_refused(course, tmp_path):
    feedback = service(course, tmp_path, trust_names=False)
    submit(tmp_path / "exchange", "alice", owner="nobody")     # nobody wrote it, as "alice"
    submit(tmp_path / "exchange", "nobody", stamp="2", owner="nobody")
    feedback.scan()
    records = {r.key: r for r in feedback.ledger.all()}
    forged = records["alice+01-attention+1+r1"]
    assert forged.status == REFUSED and forged.student == "nobody"
    assert feedback.view("alice")[0] == []                      # nothing lands on alice's page
    assert "submitted under the name alice from the account nobody" in \
        page.status_line(forged, "en", course, None)
    assert records["nobody+01-attention+2+r2"].status == QUEUED


def test_folders_named_for_a_classmate_spend_nothing_of_theirs_under_trust_names(course,
                                                                                  tmp_path):
    """--trust-names (one account for every student): mallory makes three folders named for
    bob, one with no key, one with her own, one with a made-up one. None is bob's: his real
    submission, made after them, is queued (not limited), his page lists it alone, and the three
    are nobody's, on the instructor's page."""
    feedback = service(course, tmp_path)
    exchange = tmp_path / "exchange"
    mallorys = keys.key_of(keys.secret(tmp_path / "state"), "mallory")
    for stamp, key in (("1", ""), ("2", mallorys), ("3", "0" * 32)):
        submit(exchange, "bob", stamp=stamp, key=key)
    assert course.feedback.per_hour == 3                # three spent would limit the fourth
    submit(exchange, "bob", stamp="4")                  # bob's own, with his key
    submit(exchange, "mallory", stamp="5")              # mallory's own, with hers
    assert feedback.scan() == 5
    bobs, _ = feedback.view("bob")
    assert [(r.key, r.status) for r in bobs] == [("bob+01-attention+4+r4", QUEUED)]
    assert feedback.not_recorded("bob") == []
    html = page.page(course, "bob", bobs, {}, T0, "en", key=feedback.key("bob"))
    assert "+1+r1" not in html and "+2+r2" not in html and "+3+r3" not in html
    assert feedback.key("bob") in html and keys.KEY_FILE in html
    assert [r.status for r in feedback.view("mallory")[0]] == [QUEUED]
    forged = [r for r in feedback.ledger.all() if r.student == keys.NOBODY]
    assert sorted(r.key for r in forged) == [f"bob+01-attention+{n}+r{n}" for n in "123"]
    assert {r.status for r in forged} == {REFUSED}
    assert "holds no feedback-key.txt with the key of bob" in \
        page.status_line(forged[0], "en", course, None)
    assert feedback.view(keys.NOBODY) == ([], {})


def test_a_submission_key_is_the_students_own_and_the_services(tmp_path):
    """Keys differ from student to student and from service to service (its secret, made once,
    0600); a key file that is a link, or far too long, holds no key."""
    private_folder(tmp_path / "a")
    private_folder(tmp_path / "b")
    first = keys.secret(tmp_path / "a")
    assert keys.secret(tmp_path / "a") == first
    assert os.stat(tmp_path / "a" / keys.SECRET_FILE).st_mode & 0o777 == 0o600
    assert keys.key_of(first, "bob") != keys.key_of(first, "bobby")
    assert keys.key_of(first, "bob") != keys.key_of(keys.secret(tmp_path / "b"), "bob")
    folder = tmp_path / "submitted"
    folder.mkdir()
    (tmp_path / "elsewhere").write_text(keys.key_of(first, "bob"))
    (folder / keys.KEY_FILE).symlink_to(tmp_path / "elsewhere")
    assert not keys.holds_key(first, folder, "bob")
    (folder / keys.KEY_FILE).unlink()
    (folder / keys.KEY_FILE).write_text(keys.key_of(first, "bob") + " " * 1000)
    assert not keys.holds_key(first, folder, "bob")
    (folder / keys.KEY_FILE).write_text(keys.key_of(first, "bob") + "\n")
    assert keys.holds_key(first, folder, "bob") and not keys.holds_key(first, folder, "eve")


def test_entries_nbgrader_does_not_make_are_left_alone(course, tmp_path):
    inbox = tmp_path / "exchange" / "tfcourse" / "inbound"
    inbox.mkdir(parents=True)
    os.chmod(inbox, 0o733)
    junk = ["stray-file", ".hidden+01-attention+1", "noplus", "eve+01-attention+1+r",
            "a+01-attention+" + "x" * 190, "eve+01-attention+" + "é" * 100]   # > 200 bytes
    (inbox / junk[0]).write_text("x")
    for name in junk[1:3] + junk[4:]:
        (inbox / name).mkdir()
        (inbox / name / "timestamp.txt").write_text("1")
        os.chmod(inbox / name, 0o777)
    os.symlink("/etc", inbox / junk[3])
    feedback = service(course, tmp_path)
    assert feedback.scan() == 0 and feedback.ledger.all() == []
    assert feedback.watcher.junk == set(junk)           # looked at once, not at every poll


def test_an_unknown_assignment_is_recorded_not_graded(course, tmp_path):
    feedback = service(course, tmp_path)
    submit(tmp_path / "exchange", "alice", "01-attention", stamp="1")
    (tmp_path / "exchange/tfcourse/inbound/alice+99-extra+2+r").mkdir()
    (tmp_path / "exchange/tfcourse/inbound/alice+99-extra+2+r/timestamp.txt").write_text("2")
    os.chmod(tmp_path / "exchange/tfcourse/inbound/alice+99-extra+2+r", 0o777)
    feedback.scan()
    statuses = {r.assignment: r.status for r in feedback.ledger.all()}
    assert statuses == {"01-attention": QUEUED, "99-extra": REFUSED}


def test_a_submission_still_being_copied_waits(course, tmp_path):
    from tfcourse.hub.inbox import SETTLE_SECONDS

    feedback = service(course, tmp_path)
    folder = submit(tmp_path / "exchange", "alice")
    (folder / "timestamp.txt").unlink()             # nbgrader writes it after the notebooks
    assert feedback.scan() == 0
    (folder / "timestamp.txt").write_text("1")
    assert feedback.scan() == 1
    other = submit(tmp_path / "exchange", "bob")    # made without nbgrader: taken in the end
    (other / "timestamp.txt").unlink()
    old = time.time() - SETTLE_SECONDS - 1
    os.utime(other, (old, old))
    assert feedback.scan() == 1


def test_an_unchanged_inbound_folder_is_not_listed_again(course, tmp_path, monkeypatch):
    """A classmate's junk (thousands of entries) costs a look at each only when the folder changes:
    while its mtime stays, a poll looks at nothing but the folders still being written; a new
    entry changes the mtime and is found at once; a whole listing at least every RELIST_SECONDS."""
    from tfcourse.hub import inbox as watched
    feedback = service(course, tmp_path)
    waiting = submit(tmp_path / "exchange", "alice")
    (waiting / "timestamp.txt").unlink()            # still being copied
    folder = waiting.parent
    for n in range(2000):
        os.close(os.open(folder / f"junk{n}", os.O_CREAT | os.O_WRONLY, 0o600))
    old = time.time() - 10
    os.utime(folder, (old, old))                    # last changed 10 s ago
    listings = []
    real = os.scandir
    monkeypatch.setattr(watched.os, "scandir", lambda path: (
        listings.append(path) if path == folder else None) or real(path))
    assert feedback.scan() == 0 and len(listings) == 1
    assert feedback.scan() == 0 and len(listings) == 1  # unchanged: only alice's folder looked at
    (waiting / "timestamp.txt").write_text("1")         # the inbound folder's mtime stays
    assert feedback.scan() == 1 and len(listings) == 1
    submit(tmp_path / "exchange", "bob")                # a new entry: the folder changed
    assert feedback.scan() == 1 and len(listings) == 2
    os.utime(folder, (old, old))
    feedback.scan()
    assert len(listings) == 3                           # listed once more, now well after a change
    feedback.watcher.listed = (feedback.watcher.listed[0],
                               time.time() - watched.RELIST_SECONDS - 1)
    feedback.scan()
    assert len(listings) == 4                           # and at least every RELIST_SECONDS


def test_nothing_is_taken_from_an_inbound_folder_that_is_not_the_instructors(course, tmp_path):
    """A student who replaced the course's folder in an exchange root without the sticky bit,
    or an inbound folder anyone can list: the service takes nothing, and says why."""
    folder = submit(tmp_path / "exchange", "alice")
    feedback = service(course, tmp_path)
    inbox = folder.parent
    os.chmod(inbox, 0o777)
    assert feedback.scan() == 0 and "can be listed by others" in feedback.distrust
    os.chmod(inbox, 0o733)
    shutil.chown(inbox.parent, "nobody")
    assert feedback.scan() == 0 and "belongs to nobody" in feedback.distrust
    shutil.chown(inbox.parent, "root")
    assert feedback.scan() == 1 and feedback.distrust == ""


def test_a_renamed_submission_is_recorded_not_graded_again(course, tmp_path):
    """A folder renamed is the same submission (same student, assignment and notebooks, its old
    name gone): recorded with the reason, not graded nor counted again. Changed, it is new."""
    feedback = service(course, tmp_path)
    folder = submit(tmp_path / "exchange", "alice")
    feedback.scan()
    grade_next(feedback)
    renamed = folder.rename(folder.with_name("alice+01-attention+again+x"))
    assert feedback.scan() == 1
    again = feedback.ledger.records[renamed.name]
    assert again.status == SAME and not feedback.ledger.snapshot_folder(renamed.name).exists()
    records, results = feedback.view("alice")
    assert "the same notebooks as your submission of " + page.when(T0) in \
        page.page(course, "alice", records, results, T0, "en")
    (renamed / "attention.ipynb").write_bytes(b'{"cells": [], "changed": 1}')
    renamed.rename(folder.with_name("alice+01-attention+third+y"))
    assert feedback.scan() == 1
    assert feedback.ledger.records["alice+01-attention+third+y"].status == QUEUED


@pytest.fixture
def small_disk(tmp_path):
    """A small ext4 file system of its own (a loop device), where the inode number of a folder
    deleted is given to the next one made: what happens on a class's exchange, made certain."""
    image, mount = tmp_path / "disk.img", tmp_path / "disk"
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 is not installed (e2fsprogs)")
    mount.mkdir()
    with open(image, "wb") as stream:
        stream.truncate(8 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a loop device here (it needs root and /dev/loop*): "
                    f"{mounted.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_classmates_submission_on_a_reused_inode_is_graded(course, tmp_path, small_disk):
    """nbgrader's inbound folder lets a student delete their own submitted folders, and ext4
    gives the freed inode numbers to the next folders made. Alice submits ten times and deletes
    her folders; the next submissions of her classmates, on her old inode numbers, are graded."""
    exchange = small_disk / "exchange"
    feedback = Service(course, exchange, tmp_path / "state", clock=Clock(), grade=full_marks,
                       trust_names=True)
    hers = [submit(exchange, "alice", stamp=str(n), notebook=b'{"n": %d}' % n,
                   state=tmp_path / "state")
            for n in range(10)]
    inodes = {os.stat(folder).st_ino for folder in hers}
    assert feedback.scan() == 10
    grade_next(feedback)                                # her newest (the others superseded)
    for folder in hers:
        shutil.rmtree(folder)
    theirs = [submit(exchange, name, stamp=str(10 + n), state=tmp_path / "state")
              for n, name in enumerate(["bob", "carol", "dave"])]
    reused = [folder.name for folder in theirs if os.stat(folder).st_ino in inodes]
    assert reused, "ext4 gave none of alice's inode numbers again: this proves nothing"
    assert feedback.scan() == 3
    queued = {key: record.status for key, record in feedback.ledger.records.items()
              if not key.startswith("alice")}
    assert queued == {folder.name: QUEUED for folder in theirs}, f"reused: {reused}"
    for _ in theirs:
        grade_next(feedback)
    for folder in theirs:
        assert feedback.ledger.records[folder.name].status == GRADED, folder.name
        assert feedback.view(folder.name.split("+")[0])[0][0].status == GRADED


def test_a_huge_notebook_is_copied_without_outputs_or_not_at_all(course, tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x = 1", outputs=[nbformat.v4.new_output("stream", text="y" * (65 << 20))])])
    big = submit(tmp_path / "exchange", "alice", notebook=nbformat.writes(nb).encode())
    sparse = submit(tmp_path / "exchange", "bob", stamp="2")
    with open(sparse / "attention.ipynb", "r+b") as handle:
        handle.truncate(65 << 20)                 # 65 MB of nothing, on no disk
    feedback = service(course, tmp_path)
    feedback.scan()
    copied = (feedback.ledger.snapshot_folder(big.name) / "attention.ipynb").read_bytes()
    assert len(copied) < 1000 and b'"x = 1"' in copied
    assert not (feedback.ledger.snapshot_folder(sparse.name) / "attention.ipynb").exists()


def test_a_file_of_another_account_is_not_copied(course, tmp_path):
    folder = submit(tmp_path / "exchange", "nobody", owner="nobody")
    shutil.chown(folder / "attention.ipynb", "root")
    feedback = service(course, tmp_path, trust_names=False)
    feedback.scan()
    assert not (feedback.ledger.snapshot_folder(folder.name) / "attention.ipynb").exists()


def test_a_link_in_the_submission_is_not_copied(course, tmp_path):
    secret = tmp_path / "secret.ipynb"
    secret.write_text("{}")
    folder = submit(tmp_path / "exchange", "alice")
    (folder / "attention.ipynb").unlink()
    os.symlink(secret, folder / "attention.ipynb")
    feedback = service(course, tmp_path)
    feedback.scan()
    assert not (feedback.ledger.snapshot_folder(folder.name) / "attention.ipynb").exists()


# -- grading once, across restarts --------------------------------------------------------------------
def test_what_was_submitted_then_is_graded_not_what_is_there_later(course, tmp_path):
    seen = []

    def grade(course, folder, assignment):
        seen.append((folder / "attention.ipynb").read_bytes())
        return full_marks(course, folder, assignment)

    feedback = service(course, tmp_path, grade=grade)
    folder = submit(tmp_path / "exchange", "alice", notebook=b'{"first": 1}')
    feedback.scan()
    (folder / "attention.ipynb").write_bytes(b'{"changed": 2}')
    grade_next(feedback)
    assert seen == [b'{"first": 1}']
    record = feedback.ledger.records[folder.name]
    assert record.status == GRADED
    assert record.score == record.max_score == course.assignment("01-attention").points
    assert not feedback.ledger.snapshot_folder(folder.name).exists()


def test_one_service_per_state_folder(course, tmp_path):
    first = service(course, tmp_path)
    first.ledger.claim()
    with pytest.raises(AlreadyRunning, match="another tfcourse feedback service"):
        service(course, tmp_path).ledger.claim()


def test_a_restart_grades_what_was_pending_once(course, tmp_path):
    """The service stops with one submission being graded and two queued, and one whose results
    were written but not recorded: after the restart each is graded exactly once."""
    graded: list[str] = []
    release = threading.Event()

    def slow(course, folder, assignment):
        release.wait(5)
        graded.append(folder.name)
        return full_marks(course, folder, assignment)

    first = service(course, tmp_path, grade=slow)
    for stamp in "1234":
        submit(tmp_path / "exchange", f"s{stamp}", stamp=stamp)
    first.scan()
    keys = sorted(first.ledger.records)
    # the fourth: graded and its results written, then stopped before its record said so
    release.set()
    record = first.ledger.records[keys[3]]
    first.grade_one(record)
    record.status = "grading"
    first.ledger.save(record)
    graded.clear()
    # the first: being graded when the service dies
    first.ledger.records[keys[0]].status = "grading"
    first.ledger.save(first.ledger.records[keys[0]])
    del first                                       # its lock goes with its file

    second = service(course, tmp_path, grade=full_marks_counting(graded))
    second.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and \
            any(r.status != GRADED for r in second.ledger.all()):
        time.sleep(0.05)
    second.stop()
    assert sorted(graded) == keys[:3]               # each pending one once; the fourth not again
    assert all(r.status == GRADED for r in second.ledger.all())
    assert second.scan() == 0                        # nothing is taken twice from the exchange


def test_a_submission_that_stops_the_service_each_time_ends_failed(course, tmp_path):
    from tfcourse.hub.ledger import ATTEMPTS

    feedback = service(course, tmp_path)
    submit(tmp_path / "exchange", "eve")
    feedback.scan()
    record = feedback.ledger.all()[0]
    record.status, record.attempts = "grading", ATTEMPTS
    feedback.ledger.save(record)
    again = Ledger(tmp_path / "state")
    assert again.load() == [] and again.records[record.key].status == FAILED
    assert "stopped 3 times while grading it" in page.status_line(
        again.records[record.key], "en", course, None)


def full_marks_counting(graded: list[str]):
    def grade(course, folder, assignment):
        graded.append(folder.name)
        return full_marks(course, folder, assignment)
    return grade


def test_a_flood_is_graded_once_each_by_several_workers(course, tmp_path):
    graded: list[str] = []
    lock = threading.Lock()

    def grade(course, folder, assignment):
        with lock:
            graded.append(folder.name)
        time.sleep(0.01)
        return full_marks(course, folder, assignment)

    feedback = service(course, tmp_path, grade=grade, jobs=4, poll=0.05)
    feedback.start()
    for number in range(40):
        submit(tmp_path / "exchange", f"student{number}", stamp=str(number))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(feedback.ledger.all()) < 40 or any(
            r.status != GRADED for r in feedback.ledger.all())):
        time.sleep(0.05)
    feedback.stop()
    assert len(graded) == len(set(graded)) == 40


# -- where a submission is, and when its results come ---------------------------------------------
def timed(clock: Clock, seconds: dict[str, float]):
    """A stand-in grader that takes `seconds[assignment]` of the clock's time."""
    def grade(course, folder, assignment):
        clock.now += seconds[assignment]
        return full_marks(course, folder, assignment)
    return grade


def test_the_page_says_how_many_are_ahead_and_when_the_results_come(course, tmp_path):
    """After a grading of each assignment measured (01 takes 40 s, 02 100 s, 03 70 s; none
    measured, no time is given), a rush: eve queues all three
    assignments, four classmates one each. Each page says how many go first and when its results
    come; graded by turns (eve's second after everyone's first), each comes exactly then."""
    clock = Clock()
    feedback = service(course, tmp_path, clock,
                       grade=timed(clock, {"01-attention": 40, "02-layers": 100,
                                           "03-sorting": 70}))
    submit(tmp_path / "exchange", "warm", "01-attention", stamp="w1")
    feedback.scan()
    [first] = feedback.ledger.all()                     # nothing measured yet: no time given
    assert first.estimate is None and page.status_line(
        first, "en", course, feedback.waits()[first.key]) == "queued, 0 ahead of you"
    submit(tmp_path / "exchange", "warm", "02-layers", stamp="w2")
    submit(tmp_path / "exchange", "warm", "03-sorting", stamp="w3")
    feedback.scan()
    grade_next(feedback), grade_next(feedback), grade_next(feedback)
    for n, assignment in enumerate(["01-attention", "02-layers", "03-sorting"]):
        submit(tmp_path / "exchange", "eve", assignment, stamp=f"e{n}")
    for n, name in enumerate(["ana", "bob", "cy", "dan"]):
        submit(tmp_path / "exchange", name, ["01-attention", "02-layers"][n % 2], stamp=str(n))
    feedback.scan()
    waits = feedback.waits()
    assert sorted(w.ahead for w in waits.values()) == list(range(7))
    promised = {key: clock.now + wait.seconds for key, wait in waits.items()}
    # recorded when queued, and right for those no later arrival goes before (not eve's repeats)
    later = [r for r in feedback.ledger.all() if r.student in ("ana", "bob", "cy", "dan")]
    assert [r.estimate for r in later] == [pytest.approx(promised[r.key] - r.received)
                                           for r in later]
    dan = feedback.view("dan")[0][0]
    text = page.page(course, "dan", [dan], {}, clock.now, "en", waits)
    assert f"queued, {waits[dan.key].ahead} ahead of you, results in about " \
           f"{page.duration(waits[dan.key].seconds)}" in text
    assert '<meta http-equiv="refresh"' in text                 # it reloads itself
    finished = {}
    for _ in range(7):
        key = grade_next(feedback)
        finished[key] = clock.now
    assert finished == promised
    assert [key.split("+")[0] for key in finished] == \
        ["eve", "ana", "bob", "cy", "dan", "eve", "eve"]


def test_the_instructor_sees_the_queue_the_rate_and_the_failures(course, tmp_path):
    clock = Clock()
    feedback = service(course, tmp_path, clock, grade=timed(clock, {"01-attention": 30}))
    for n, name in enumerate(["ana", "bob", "cy"]):
        submit(tmp_path / "exchange", name, stamp=str(n))
    feedback.scan()
    grade_next(feedback)
    feedback.ledger.save(page.Record("zed+01-attention+9+r9", "zed", "01-attention", T0, FAILED,
                                     why="the grader failed on this submission; your "
                                         "instructor has the details"))
    overview = feedback.overview()
    assert [(item["student"], item["ahead"]) for item in overview["queue"]] == \
        [("bob", 0), ("cy", 1)]
    assert [item["wait"] for item in overview["queue"]] == [30, 60]
    assert overview["graded_last_10_minutes"] == 1 and overview["counts"]["failed"] == 1
    assert overview["seconds_per_grading"]["01-attention"] == 30
    text = page.instructor(course, overview, "en")
    assert "zed" in text and "the grader failed" in text and "<td>bob</td>" in text
    assert "graded in the last 10 minutes:\n1" in text


def test_the_instructor_has_the_class_report_of_what_was_graded(course, tmp_path):
    """The class report (tfcourse report) of the service's state, linked from the instructor's
    view: each student's last graded submission, submissions per hour, tries per check."""
    feedback = service(course, tmp_path)
    for n, name in enumerate(["ana", "bob"]):
        submit(tmp_path / "exchange", name, stamp=str(n))
    feedback.scan()
    grade_next(feedback)
    grade_next(feedback)
    assert 'href="report/"' in page.instructor(course, feedback.overview(), "en")
    folder = feedback.class_report() / "01-attention"
    rows = {row["check"]: row for row in csv.DictReader((folder / "checks.csv").open())}
    assert set(rows) == set(course.assignment("01-attention").test_ids())
    assert all(row["passed"] == row["graded"] == "2" for row in rows.values())
    tries = list(csv.DictReader((folder / "tries.csv").open()))
    assert tries and all(row["first_try"] == "2" for row in tries)
    assert (folder / "per-hour.png").stat().st_size > 0


@pytest.fixture
def small_state(tmp_path):
    """The service's state folder on a tmpfs of 2 MB of its own, to fill."""
    folder = tmp_path / "state"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here (it needs root): {mounted.stderr.strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb") as stream:
        try:
            while True:
                stream.write(b"\0" * 65536)
                stream.flush()
        except OSError:
            pass
    return filler


def test_a_full_state_folder_loses_nothing_and_grading_resumes_by_itself(course, tmp_path,
                                                                          small_state, caplog):
    """The state folder's disk fills: a submission arriving then is taken once there is room,
    a grading whose results cannot be written is written then (graded once); the log and the
    instructor's page say why meanwhile, and no record is half written."""
    caplog.set_level(logging.INFO, logger="tfcourse.feedback")
    graded: list[str] = []
    feedback = service(course, tmp_path, grade=full_marks_counting(graded))
    submit(tmp_path / "exchange", "ana", stamp="1")
    feedback.scan()
    record = feedback.next_turn()
    filler = fill(small_state)
    feedback.grade_one(record)                          # its results cannot be written
    feedback.busy.discard(record.student)               # as its worker does
    submit(tmp_path / "exchange", "bob", stamp="2")
    assert feedback.scan() == 0                         # nor bob's submission taken
    assert "No space left" in feedback.problem
    assert "cannot be written" in caplog.text and "resumes by itself" in caplog.text
    assert "cannot be written since" in page.instructor(course, feedback.overview(), "en")
    assert feedback.ledger.records[record.key].status == QUEUED
    assert feedback.room() is False
    assert {r["status"] for r in _records(small_state).values()} == {"grading"}  # ana's, whole
    filler.unlink()                                     # space comes back
    assert feedback.scan() == 1
    grade_next(feedback), grade_next(feedback)
    assert feedback.problem == "" and "grading resumes" in caplog.text
    statuses = {key: r["status"] for key, r in _records(small_state).items()}
    assert statuses == {record.key: GRADED, "bob+01-attention+2+r2": GRADED}
    assert sorted(graded) == sorted(statuses)           # each graded once
    assert not list(small_state.glob("records/.*"))     # no half-written record left


def test_a_service_restarted_on_a_full_disk_starts_and_grades_once_there_is_room(
        course, tmp_path, small_state):
    """Killed while grading, restarted while its state folder's disk is full: it starts (it used
    to stop at once, unable to rewrite the record it took up), and grades once there is room."""
    graded: list[str] = []
    first = service(course, tmp_path)
    submit(tmp_path / "exchange", "ana", stamp="1")
    first.scan()
    key = first.next_turn().key                         # being graded when it is killed
    del first
    filler = fill(small_state)
    again = service(course, tmp_path, grade=full_marks_counting(graded), poll=0.1)
    again.start()
    assert again.ledger.records[key].status == QUEUED
    filler.unlink()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and again.ledger.records[key].status != GRADED:
        time.sleep(0.1)
    again.stop()
    assert _records(small_state)[key]["status"] == GRADED and graded == [key]


# -- what a student sees ------------------------------------------------------------------------------
def results_of(course, points: dict[str, float]) -> dict:
    from tfcourse.batch.results import gradescope_json

    assignment = "03-sorting"
    tests = [TestResult(t, points.get(t, course.assignment(assignment).points_of(t)),
                        course.assignment(assignment).points_of(t),
                        "" if t not in points else "the secret message of {check}", {"check": t})
             for t in course.assignment(assignment).test_ids()]
    return gradescope_json(course, SubmissionReport(assignment, "s", [
        NotebookReport("sorting.ipynb", tests)]), "en")


def with_feedback(course, due: str | None, **feedback) -> object:
    data = yaml.safe_load((ROOT / "course.yaml").read_text())
    data["feedback"] = {**data.get("feedback", {}), **feedback}
    if due:
        data["assignments"][2]["due"] = due
    return parse_course(data, ROOT)


def test_checks_show_what_course_yaml_says_before_the_deadline_and_all_after(course):
    changed = with_feedback(course, "2027-01-15T23:59:00+01:00",
                            checks={"trained": "score_only", "greedy.reference": "after_deadline"})
    results = results_of(changed, {"trained.accuracy": 0, "model.values": 0,
                                   "greedy.reference": 0})
    results["output"] = "sorting.ipynb: the rest (11.2 MB) was dropped"     # sizes can tell
    before = datetime.datetime(2027, 1, 15, 22, 0, tzinfo=datetime.timezone.utc).timestamp()
    view = page.shown(changed, "03-sorting", results, before, "en")
    rows = {row["title"]: row for row in view.rows}
    assert "Transformer, noam_rate, shift_right: accuracy" in rows
    assert rows["Transformer, noam_rate, shift_right: accuracy"]["message"] == \
        "shown after the deadline"
    assert "the secret message of model.values" in rows["Transformer: values"]["message"]
    assert not any("reference" in title for title in rows)       # not even listed
    assert (view.held_checks, view.held_points) == (1, 1.0)
    total = changed.assignment("03-sorting").points
    assert view.max_score == total - 1 and view.score == total - 1 - 6 - 2
    text = page.submission_block(
        page.Record("k", "s", "03-sorting", before, GRADED), results, changed, before, "en")
    assert "secret message of trained" not in text and "secret message of greedy" not in text
    assert "checks shown after the deadline: 1, worth 1 points" in text
    assert "11.2 MB" not in text and "notes about your notebook are shown after" in text
    after = page.shown(changed, "03-sorting", results, before + 7200, "en")
    assert after.complete and after.held_checks == 0 and after.max_score == total
    assert all("shown after the deadline" != row["message"] for row in after.rows)
    assert "11.2 MB" in after.notes


def test_without_a_deadline_the_before_deadline_view_stays(course):
    results = results_of(course, {"trained.accuracy": 0})
    view = page.shown(course, "03-sorting", results, T0 * 2, "en")
    accuracy = next(row for row in view.rows if row["title"].endswith("accuracy"))
    assert accuracy["message"] == "shown after the deadline" and not view.complete


def test_the_page_escapes_what_a_student_wrote(course, tmp_path):
    results = results_of(course, {"model.values": 0})
    results["tests"][0]["output"] = "<script>alert(1)</script>"
    results["output"] = "<img src=x onerror=alert(1)>"
    record = page.Record("k", "<b>eve</b>", "03-sorting", T0, GRADED)
    text = page.page(course, "<b>eve</b>", [record], {"k": results}, T0, "en")
    assert "<script>" not in text and "<img" not in text and "<b>eve" not in text


def test_the_feedback_section_is_checked(course):
    data = yaml.safe_load((ROOT / "course.yaml").read_text())
    for key, value, message in [
            ("checks", {"trained.acuracy": "visible"}, "did you mean trained.accuracy"),
            ("checks", {"trained": "sometimes"}, "must be one of visible"),
            ("per_hour", -1, "must be an integer >= 0"),
            ("before_deadline", "hidden", "must be one of visible, score_only or after_deadline")]:
        with pytest.raises(CourseError, match=message):
            parse_course({**data, "feedback": {**data["feedback"], key: value}}, ROOT)
    for due, message in [("2027-01-15T23:59:00", "needs its UTC offset"),
                         ("soon", "must be a date and time")]:
        assignments = [{**data["assignments"][0], "due": due}, *data["assignments"][1:]]
        with pytest.raises(CourseError, match=message):
            parse_course({**data, "assignments": assignments}, ROOT)
    assignments = [{**data["assignments"][0], "due": "2027-01-15T23:59:00Z"},
                   *data["assignments"][1:]]
    due = parse_course({**data, "assignments": assignments}, ROOT).assignments[0].due
    assert due == datetime.datetime(2027, 1, 15, 23, 59, tzinfo=datetime.timezone.utc)


# -- the real service, killed mid-queue ---------------------------------------------------------------
def _logged_result(log: Path, key: str) -> bool:
    """Whether the service's log has `key`'s result line ("KEY: 14.0 / 14.0 in 11.4 s")."""
    return re.search(re.escape(key) + r": [\d.]+ / [\d.]+ in ", log.read_text()) is not None


def _records(state: Path) -> dict[str, dict]:
    found = {}
    for path in (state / "records").glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_text())
        except ValueError:                      # never: records are written whole
            raise AssertionError(f"{path} was read half-written")
    return found


def _start(state: Path, exchange: Path, log: Path, *more: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tfcourse", "--course", str(ROOT), "feedback-service",
               "--exchange", str(exchange), "--state", str(state), "--no-page", "--poll", "0.2",
               "--trust-names", *(more or ["--jobs", "1"])]
    return subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _wait(until, seconds: float, what: str, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = until()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} within {seconds} s; the service said:\n"
                         f"{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_the_service_killed_mid_queue_grades_everything_once_after_a_restart(tmp_path):
    """Three students submit; the service is killed (SIGKILL) while it grades the first, and its
    grader dies with it. Restarted, it grades the three, each once, as `tfcourse grade` does; the
    hostile one, which tries to write its own results into the service's state, changes
    nothing there."""
    from tfcourse.batch.runner import grade_many

    from conftest import survivors

    exchange, state, log = tmp_path / "exchange", tmp_path / "state", tmp_path / "service.log"
    forged = state / "results" / "forged"
    hostile = (
        "import os, json\n"
        f"for path in [{str(forged)!r}, {str(state / 'records' / 'x.json')!r}]:\n"
        "    try:\n"
        "        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "        open(path, 'w').write(json.dumps({'score': 14, 'status': 'graded'}))\n"
        "    except OSError:\n"
        "        pass\n" + solution_cells("01-attention")["sdpa-code"])
    bug = replace_in(solution_cells("01-attention")["mha-code"], "return self.w_o(out)",
                     "return out")
    students = {"alice": {}, "bob": {"mha-code": bug}, "eve": {"sdpa-code": hostile}}
    folders = {}
    for number, (name, answers) in enumerate(students.items()):
        made = make_submission(tmp_path / "made" / name, "01-attention", answers)
        folders[name] = folder = exchange / "tfcourse" / "inbound" / \
            f"{name}+01-attention+2026-12-01 10:0{number}:00.000000 UTC+r{number}"
        shutil.copytree(made, folder)                   # as nbgrader submit leaves it
        (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
        with_key(folder, tmp_path / "state", name)
        os.chmod(folder, 0o777)
    os.chmod(folder.parent, 0o733)

    service = _start(state, exchange, log)
    try:
        first = _wait(lambda: next((key for key, r in _records(state).items()
                                    if r["status"] == "grading"), None), 60,
                      "a grading started", log)
        time.sleep(1.0)                            # its grader is well under way
        service.send_signal(signal.SIGKILL)
        service.wait(10)
    finally:
        if service.poll() is None:
            service.kill()
    _wait(lambda: not survivors(str(state)), 15, "the killed service's grader ended", log)
    assert _records(state)[first]["status"] == "grading"

    service = _start(state, exchange, log)
    try:
        records = _wait(lambda: (lambda r: r if len(r) == 3 and all(
            x["status"] == GRADED and _logged_result(log, k)
            for k, x in r.items()) else None)(_records(state)), 300,
            "all three graded, and their results logged (the record is saved first)", log)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(30)
    assert records[first]["attempts"] == 2
    assert sorted(r["attempts"] for r in records.values()) == [1, 1, 2]
    assert not forged.exists() and not (state / "records" / "x.json").exists()
    assert sorted(p.name for p in (state / "results").iterdir()) == sorted(records)

    batch = grade_many(load_course(ROOT), list(folders.values()), tmp_path / "graded", jobs=2,
                       lang="en", progress=False)
    expected = {o.folder.name.split("+")[0]: json.loads((o.folder / "results.json").read_text())
                for o in batch}
    for key, record in records.items():
        results = json.loads((state / "results" / key / "results.json").read_text())
        student = record["student"]
        assert scores(results) == scores(expected[student]), student
    by_student = {r["student"]: r["score"] for r in records.values()}
    full = load_course(ROOT).assignment("01-attention").points
    assert by_student["alice"] == by_student["eve"] == full and by_student["bob"] < full


def _exchange_with(tmp_path: Path, students: dict[str, dict]) -> Path:
    """The exchange, with one submission of 01-attention for each student (their answers)."""
    exchange = tmp_path / "exchange"
    for number, (student, answers) in enumerate(students.items()):
        made = make_submission(tmp_path / "made" / student, "01-attention", answers)
        folder = exchange / "tfcourse" / "inbound" / \
            f"{student}+01-attention+2026-12-01 10:0{number}:00.000000 UTC+r{number}"
        shutil.copytree(made, folder)                   # as nbgrader submit leaves it
        (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
        with_key(folder, tmp_path / "state", student)
        os.chmod(folder, 0o777)
    os.chmod(folder.parent, 0o733)
    return exchange


@pytest.mark.slow
def test_the_service_grades_on_a_cluster_and_a_worker_killed_mid_rush_loses_nothing(tmp_path):
    """`--scheduler`: a real Dask scheduler and two workers; the first is killed (its nanny
    too, for good) while it grades. Every submission is graded exactly once, with its scores,
    recorded as the service records any grading (fair use and pages read those records)."""
    pytest.importorskip("distributed")
    from test_cluster import Cluster, with_group

    bug = replace_in(solution_cells("01-attention")["mha-code"], "return self.w_o(out)",
                     "return out")
    exchange = _exchange_with(tmp_path, {"alice": {}, "bob": {"mha-code": bug}, "carol": {}})
    state, log = tmp_path / "state", tmp_path / "service.log"
    (tmp_path / "dask").mkdir()
    dask = Cluster(tmp_path / "dask")
    service = None
    try:
        service = _start(state, exchange, log, "--scheduler", dask.address)
        victim = dask.nannies[0]
        _wait(lambda: dask.graders(victim), 120, "a grading started on the first worker", log)
        with_group(victim, signal.SIGKILL)              # the nanny and its worker, for good
        victim.wait(10)
        records = _wait(lambda: (lambda r: r if len(r) == 3 and all(
            x["status"] == GRADED and _logged_result(log, k)
            for k, x in r.items()) else None)(_records(state)), 300,
            "all three graded, and their results logged (the record is saved first)", log)
    finally:
        if service is not None:
            service.send_signal(signal.SIGTERM)
            service.wait(30)
        dask.close()
    said = log.read_text()
    for key in records:                                 # each graded once: one result each
        assert said.count(f"{key}: queued") == 1 and said.count(f"{key}: ") == 3, key
        assert said.count(f"{key}: grading (attempt 1)") == 1, key
    assert {r["attempts"] for r in records.values()} == {1}
    assert sorted(p.name for p in (state / "results").iterdir()) == sorted(records)
    full = load_course(ROOT).assignment("01-attention").points
    scored = {r["student"]: r["score"] for r in records.values()}
    assert scored["alice"] == scored["carol"] == full and scored["bob"] < full
    assert "watching" in said and "Traceback" not in said


def test_the_guide_quotes_course_yaml(course):
    """docs/jupyterhub.md's fair-use example is course.yaml's own `feedback` section, and its
    numbers are the service's."""
    import re

    from tfcourse.hub.ledger import FLOOD

    text = (ROOT / "docs" / "jupyterhub.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "feedback:" in b)
    quoted = yaml.safe_load(block.replace("    ...\n", ""))["feedback"]
    assert quoted == yaml.safe_load((ROOT / "course.yaml").read_text())["feedback"]
    feedback = course.feedback
    assert f"fair use allows {feedback.per_hour} gradings an hour and {feedback.per_day} a day" \
        in strip(text)
    assert f"more than {FLOOD} folders in a day" in strip(text)


def test_a_notebook_too_costly_to_strip_is_copied_for_the_grader_to_refuse(course, tmp_path,
                                                                          monkeypatch):
    """Millions of tiny strings take strip_outputs minutes (submission.strippable): the service
    stalled on such a notebook while it copied it. It copies it unstripped (within the file
    limit), and the grader, which checks before stripping, says why nothing was graded."""
    import dataclasses

    from tfcourse.submission import notebooks as submission
    from tfcourse.hub import inbox

    monkeypatch.setattr(submission, "STRIP_TOKENS", 1000)       # as 20 million, made cheap
    monkeypatch.setattr(inbox, "strip_outputs", lambda data: pytest.fail("stripped"))
    small = dataclasses.replace(course, limits=dataclasses.replace(course.limits,
                                                                   notebook_mb=0.01))
    costly = b'{"cells": [], "x": [' + b'"",' * 5000 + b'""]}'
    folder = submit(tmp_path / "exchange", "alice", notebook=costly)
    feedback = service(small, tmp_path)
    feedback.scan()
    copied = feedback.ledger.snapshot_folder(folder.name) / "attention.ipynb"
    assert copied.read_bytes() == costly
    parsed, notes = submission.parse_notebook(costly, "attention.ipynb", 0.01)
    assert parsed is None and "more than" in notes[0].template


def test_checks_skipped_on_submit_reach_the_grader(course, tmp_path, monkeypatch):
    """`feedback-service --skip trained.accuracy`: the check is not graded (its training is too
    long for the hub's machine), and the student's results say it was skipped."""
    from tfcourse.submission.failures import zero_report
    from tfcourse.hub import service as module

    asked = []

    def grader(course, folder, assignment, threads, skip, hide, within=None, warm=None):
        asked.append(skip)
        return zero_report(course, assignment, folder.name, "wrong", skip=skip)

    monkeypatch.setattr(module, "grade_in_child", grader)
    submit(tmp_path / "exchange", "alice", "03-sorting")
    feedback = Service(course, tmp_path / "exchange", tmp_path / "state", clock=Clock(),
                       trust_names=True, skip=["trained.accuracy"])
    feedback.scan()
    key = grade_next(feedback)
    assert asked == [["trained.accuracy"]]
    tests = {t["name"]: t for t in feedback.ledger.results(key)["tests"]}
    skipped = [name for name, t in tests.items() if "skipped" in t.get("output", "")]
    assert skipped == ["Transformer, noam_rate, shift_right: accuracy"]


def test_each_job_slot_warms_its_zygote_and_fork_server_as_it_starts(course, tmp_path,
                                                                     monkeypatch):
    """A restarted service's slots stood idle while their first grading started the zygote and
    the fork server (25-30 s under load): each slot starts both as it starts, in its own thread
    (where its gradings will find them)."""
    from tfcourse.batch import forkserver
    from tfcourse.sandbox import forked

    started = []
    monkeypatch.setattr(forked.Zygotes, "for_course", lambda self, course, threads: started.append(
        ("zygote", threading.current_thread().name)))
    monkeypatch.setattr(forkserver.ForkServers, "warm", lambda self, cwd, env: started.append(
        ("fork server", threading.current_thread().name)))
    monkeypatch.setattr(forkserver, "enabled", lambda: True)
    feedback = Service(course, tmp_path / "exchange", tmp_path / "state", clock=Clock(),
                       jobs=2, poll=0.05)
    feedback.start()
    try:
        deadline = time.monotonic() + 30
        while len(started) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        feedback.stop()
    assert sorted(started) == [("fork server", "grader-0"), ("fork server", "grader-1"),
                               ("zygote", "grader-0"), ("zygote", "grader-1")]


# -- what a hostile review of the service found ---------------------------------------------------
def test_a_record_reaches_the_disk_before_its_rename_and_the_rename_after(tmp_path, monkeypatch):
    """A file renamed into place before it reached the disk can come back empty after a power
    loss: the file is synced, renamed, then its folder synced."""
    from tfcourse.batch import results as module

    events = []
    fsync, rename = os.fsync, os.replace

    def synced(handle):
        events.append(("fsync", "folder" if os.path.isdir(f"/proc/self/fd/{handle}") else "file"))
        return fsync(handle)

    monkeypatch.setattr(module.os, "fsync", synced)
    monkeypatch.setattr(module.os, "replace", lambda *a: (events.append(("rename",)), rename(*a)))
    module.write_atomically(tmp_path / "records" / "x.json", "{}")
    assert events == [("fsync", "file"), ("rename",), ("fsync", "folder")]


def test_an_unreadable_results_or_record_file_stops_nothing(course, tmp_path):
    """A crash left mallory's results.json empty (her record still says grading) and bob's record
    empty: the service starts, grades mallory's again and says why; bob's is taken again from the
    exchange. (Before: json's error out of Ledger.load, and the service never started.)"""
    exchange = tmp_path / "exchange"
    submit(exchange, "mallory", stamp="m")
    submit(exchange, "bob", stamp="b")
    feedback = service(course, tmp_path)
    feedback.scan()
    taken = feedback.next_turn()
    assert taken.student in ("mallory", "bob")
    other = next(r for r in feedback.ledger.all() if r.key != taken.key)
    feedback.ledger.results_file(taken.key).parent.mkdir(parents=True)
    feedback.ledger.results_file(taken.key).write_bytes(b"")
    (tmp_path / "state" / "records" / f"{other.key}.json").write_bytes(b"")
    del feedback

    again = service(course, tmp_path)
    again.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                len(again.ledger.all()) == 2 and all(r.status == GRADED
                                                     for r in again.ledger.all())):
            time.sleep(0.05)
    finally:
        again.stop()
    assert {r.key: r.status for r in again.ledger.all()} == {taken.key: GRADED,
                                                              other.key: GRADED}
    notes = again.overview()["notes"]
    assert any(taken.key in note and "graded again" in note for note in notes)
    assert any(other.key in note and "cannot be read" in note for note in notes)
    assert "At the last start" in page.instructor(course, again.overview(), "en")


def test_a_graceful_stop_queues_what_was_graded_again_without_counting_it(course, tmp_path):
    """SIGTERM or SIGINT (a hub restart) while a submission is graded: it is queued again, its
    attempt not counted (three of those failed it for good before)."""
    submit(tmp_path / "exchange", "bob")
    feedback = service(course, tmp_path)
    feedback.scan()
    taken = feedback.next_turn()
    assert taken.attempts == 1
    feedback.stop()
    feedback.give_back()
    again = Ledger(tmp_path / "state")
    assert [(r.status, r.attempts) for r in again.load()] == [(QUEUED, 0)]


def test_three_crashes_beside_a_classmate_give_one_more_try_alone(course, tmp_path):
    """mallory's and bob's submissions are graded side by side when the service crashes, three
    times. Each gets one more try alone (not failed both); mallory's, whose grading alone crashes
    it again, is failed, not counted against her fair use, and says so; bob's is graded."""
    from tfcourse.hub.ledger import counted

    exchange = tmp_path / "exchange"
    submit(exchange, "mallory", stamp="m")
    submit(exchange, "bob", stamp="b")
    feedback = service(course, tmp_path, jobs=2)
    feedback.scan()
    for _ in range(3):
        assert {feedback.next_turn().student, feedback.next_turn().student} == {"mallory", "bob"}
        feedback = service(course, tmp_path, jobs=2)       # the process is killed: a new one
        feedback.ledger.load()
    assert [(r.status, r.alone) for r in feedback.ledger.all()] == [(QUEUED, True)] * 2
    first = feedback.next_turn()
    assert feedback.alone_first(feedback.order()) == []   # nothing beside it
    if first.student == "bob":                              # graded alone: bob's is fine
        feedback.grade_one(first)
        feedback.busy.discard("bob")
        feedback.started.clear()
        first = feedback.next_turn()
    assert first.student == "mallory"
    feedback = service(course, tmp_path, jobs=2)            # mallory's, alone, crashes it
    feedback.ledger.load()
    if feedback.ledger.of_student("bob")[0].status == QUEUED:
        grade_next(feedback)
    mallory, bob = feedback.ledger.of_student("mallory")[0], feedback.ledger.of_student("bob")[0]
    assert (mallory.status, bob.status) == (FAILED, GRADED)
    assert not counted(mallory) and counted(bob)
    shown = page.status_line(mallory, "en", course, None)
    assert "the last time with nothing else graded beside it" in shown
    assert "does not count against your fair use" in shown


def test_an_owner_the_name_service_cannot_name_for_a_moment_is_looked_at_again(
        course, tmp_path, monkeypatch):
    """The name service is down for a moment (LDAP, sssd): the submission's owner has no name.
    It is not refused for ever: the instructor sees it among the failures, and once the owner
    has a name it is graded as any other."""
    import pwd

    from tfcourse.hub import inbox

    me = pwd.getpwuid(os.geteuid()).pw_name
    submit(tmp_path / "exchange", me)
    feedback = service(course, tmp_path, trust_names=False)
    known = pwd.getpwuid

    def down(uid):
        raise KeyError(uid)

    monkeypatch.setattr(inbox.pwd, "getpwuid", down)
    feedback.scan()
    feedback.scan()
    assert feedback.ledger.all() == []
    failures = feedback.overview()["failures"]
    assert [(item["student"], item["params"]) for item in failures] == [(me, {"uid": os.geteuid()})]
    assert "has no account name now" in page.instructor(course, feedback.overview(), "en")
    monkeypatch.setattr(inbox.pwd, "getpwuid", known)
    feedback.scan()
    assert [(r.student, r.status) for r in feedback.ledger.all()] == [(me, QUEUED)]
    assert feedback.overview()["failures"] == []


def test_the_service_waits_for_a_port_another_process_holds(course, tmp_path, monkeypatch):
    """A process holds the service's port while it restarts: the service says so and tries again
    (grading meanwhile) instead of exiting with its queue; it listens once the port is free."""
    import socket

    from tornado.web import Application
    from tfcourse.hub import command as module

    monkeypatch.setattr(module, "LISTEN_SECONDS", 0.05)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    feedback, done, outcome = service(course, tmp_path), threading.Event(), []

    def listen():
        import asyncio
        asyncio.set_event_loop(asyncio.new_event_loop())
        outcome.append(module.listen(Application([]), "127.0.0.1", port, feedback, done))

    thread = threading.Thread(target=listen)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not feedback.listen and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "Could not listen on 127.0.0.1" in feedback.listen and not outcome
        assert "Could not listen" in page.instructor(course, feedback.overview(), "en")
    finally:
        holder.close()
    thread.join(10)
    done.set()
    assert outcome == [True]


def test_the_service_warns_of_a_port_any_account_may_bind_and_the_recipe_uses_none():
    """From net.ipv4.ip_unprivileged_port_start up, any student may bind the service's port while
    it restarts and receive every student's requests: the service warns of such a port, and
    the recipe (docs/hub/jupyterhub_config.py, as docs/jupyterhub.md shows it) uses one below."""
    import re
    from urllib.parse import urlparse

    from tfcourse.hub.command import port_warning

    first = int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text())
    assert "can be bound by any account" in port_warning(max(first, 10101))
    config = (ROOT / "docs" / "hub" / "jupyterhub_config.py").read_text()
    url = re.search(r'"TFCOURSE_HUB_FEEDBACK_URL", "([^"]+)"', config).group(1)
    assert urlparse(url).port < 1024
    assert url in (ROOT / "docs" / "jupyterhub.md").read_text()


def test_submissions_over_fair_use_are_not_copied(course, tmp_path, monkeypatch):
    """Fair use is looked at before the watcher copies (and strips) a submission's notebooks: a
    student over it, with notebooks costly to copy, holds up no classmate's queueing (before:
    three 200 MB notebooks, ~3 s of the single watcher each)."""
    from tfcourse.hub import service as module

    exchange, clock = tmp_path / "exchange", Clock()
    feedback = service(course, tmp_path, clock)
    for n in range(course.feedback.per_hour):
        clock.now = T0 + n
        submit(exchange, "mallory", stamp=f"g{n}")
        feedback.scan()
        grade_next(feedback)
    copied = []
    snapshot = module.snapshot
    monkeypatch.setattr(module, "snapshot", lambda course, arrival, destination: (
        copied.append(arrival.named), snapshot(course, arrival, destination))[1])
    for n in range(3):
        submit(exchange, "mallory", stamp=f"m{n}")
    submit(exchange, "bob", stamp="b")
    feedback.scan()
    assert copied == ["bob"]
    assert sorted(r.status for r in feedback.ledger.of_student("mallory")) == \
        [GRADED] * course.feedback.per_hour + [LIMITED] * 3


def test_one_students_many_submissions_hold_up_a_classmates_copy_once_at_most(
        course, tmp_path, monkeypatch):
    """The watcher copies new submissions in turns by account: mallory's three (each a costly
    copy, within her fair use), older than bob's, let bob's be copied second, not fourth."""
    from tfcourse.hub import service as module

    exchange = tmp_path / "exchange"
    for n in range(3):
        folder = submit(exchange, "mallory", stamp=f"m{n}", owner="daemon")
        os.utime(folder, (T0 - 100 + n, T0 - 100 + n))
    bob = submit(exchange, "bob", stamp="b", owner="nobody")
    os.utime(bob, (T0, T0))
    copied = []
    snapshot = module.snapshot
    monkeypatch.setattr(module, "snapshot", lambda course, arrival, destination: (
        copied.append(arrival.named), snapshot(course, arrival, destination))[1])
    service(course, tmp_path).scan()
    assert copied == ["mallory", "bob", "mallory", "mallory"]


def test_same_second_stamps_and_resubmissions_while_graded_stay_apart(course, tmp_path):
    """bob and alice submit in the same second with the same stamp; bob resubmits while his first
    is being graded, twice. Each of bob's is graded or superseded once, alice's is graded, and
    nobody's record holds another's."""
    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="s")
    submit(exchange, "alice", stamp="s")
    feedback = service(course, tmp_path, jobs=1)
    feedback.scan()
    first = feedback.next_turn()
    submit(exchange, "bob", stamp="s2", notebook=b'{"cells": [1]}')
    submit(exchange, "bob", stamp="s3", notebook=b'{"cells": [2]}')
    feedback.scan()
    feedback.grade_one(first)
    feedback.busy.discard(first.student)
    while any(r.status == QUEUED for r in feedback.ledger.all()):
        grade_next(feedback)
    states = {r.key: (r.student, r.status) for r in feedback.ledger.all()}
    assert all(key.startswith(student) for key, (student, _) in states.items())
    assert sorted(s for k, (_, s) in states.items() if k.startswith("bob")) == \
        ["graded", "graded", "superseded"]
    assert states["alice+01-attention+s+rs"][1] == GRADED


def test_a_student_reads_no_classmates_page_json_queue_or_report(course, tmp_path):
    """The tornado app of make_app with the hub's login replaced by a fixed user (mallory):
    ?student=bob, the JSON, the queue and the class report."""
    from jupyterhub.services import auth
    from tornado.testing import AsyncHTTPTestCase

    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="1")
    feedback = service(course, tmp_path)
    feedback.scan()
    grade_next(feedback)
    original = auth.HubOAuthenticated.get_current_user
    auth.HubOAuthenticated.get_current_user = lambda self: {"name": "mallory"}
    try:
        from tfcourse.hub.app import make_app

        seen = {}

        class Case(AsyncHTTPTestCase):
            def get_app(self):
                return make_app(feedback, "/services/feedback/", {"teacher"})

            def runTest(self):
                for path in ["?student=bob", "api/feedback?student=bob", "api/queue",
                             "report/", "report/index.html", "report/../../records",
                             "?student=bob&student=mallory"]:
                    response = self.fetch("/services/feedback/" + path)
                    seen[path] = (response.code, response.body.decode(errors="replace"))

        case = Case()
        case.setUp()
        try:
            case.runTest()
        finally:
            case.tearDown()
    finally:
        auth.HubOAuthenticated.get_current_user = original
    for path, (code, body) in seen.items():
        assert "bob+01-attention" not in body and '"bob"' not in body, path


def test_the_page_gives_a_logged_in_user_their_own_key_alone(course, tmp_path, monkeypatch):
    """The hub's login says who asks (here a stand-in for it): the page and api/key give each
    user their own key; an instructor looking at a student's page is not shown the student's."""
    pytest.importorskip("jupyterhub")
    import asyncio

    from tornado.httpclient import AsyncHTTPClient
    from tornado.httpserver import HTTPServer
    from tornado.testing import bind_unused_port

    from tfcourse.hub import app

    monkeypatch.setattr(app.Base, "get_current_user",
                        lambda self: {"name": self.request.headers["X-User"]})
    feedback = service(course, tmp_path)
    bob, mallory = feedback.key("bob"), feedback.key("mallory")

    async def fetch(path, user):
        socket, port = bind_unused_port()
        server = HTTPServer(app.make_app(feedback, "/services/feedback/", {"teacher"}))
        server.add_sockets([socket])
        try:
            reply = await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/services/feedback/"
                                                  f"{path}", headers={"X-User": user},
                                                  raise_error=False)
            return reply.code, reply.body.decode()
        finally:
            server.stop()

    async def everything():
        return [await fetch("api/key", "bob"), await fetch("", "bob"),
                await fetch("", "mallory"), await fetch("?student=bob", "teacher")]

    (code, body), (_, page_of_bob), (_, page_of_mallory), (_, seen_by_teacher) = \
        asyncio.run(everything())
    assert code == 200 and json.loads(body) == {"student": "bob", "key": bob,
                                                "file": keys.KEY_FILE}
    assert bob in page_of_bob and mallory not in page_of_bob
    assert mallory in page_of_mallory and bob not in page_of_mallory
    assert bob not in seen_by_teacher
    plain = service(course, tmp_path / "plain", trust_names=False)
    assert plain.key("bob") is None
