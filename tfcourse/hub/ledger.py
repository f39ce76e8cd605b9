"""What happened to each submission the service has seen, kept on disk, and fair use.

One JSON file per submission (records/<key>.json, written whole with a rename), so the service
can stop at any moment and start again where it was: a submission that was queued or being graded
is graded again, one whose results were written is not. One service owns a state folder at a time
(an flock on state/lock), so nothing is graded twice by two services.

Fair use counts, per student and assignment, the submissions taken for grading in the last hour and
the last 24 hours, by the service's clock when it first saw them (a student's own timestamp.txt is
not evidence of anything).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from tfcourse.batch.results import private_folder, strict_json, write_atomically

HOUR, DAY = 3600.0, 86400.0

QUEUED, GRADING, GRADED = "queued", "grading", "graded"
FAILED, LIMITED, REFUSED = "failed", "limited", "refused"
SUPERSEDED = "superseded"                   # a newer submission came before its turn
SAME = "same"               # the same notebooks as a submission graded or queued already
PENDING = (QUEUED, GRADING)                 # to grade, also after a restart
ATTEMPTS = 3                                # gradings begun, each ended by a stop of the service
# (a crash: a graceful stop gives its gradings back); then one more, alone, if others were graded
# beside it (so that the submission that stops the service is the one failed)
STOPPED = ("not graded: the service stopped {attempts} times while grading it, the last time "
           "with nothing else graded beside it; it does not count against your fair use; your "
           "instructor has the details")
# What fair use counts: a grader's failure too (else a submission that made the grader fail on
# purpose would be an unlimited, if one-bit, oracle).
COUNTED = (QUEUED, GRADING, GRADED, FAILED)
FLOOD = 100                 # records a student may have from one day; more are not even recorded


class AlreadyRunning(Exception):
    """Another service holds this state folder."""


@dataclass
class Record:
    key: str                    # the exchange's name for it: student+assignment+time[+random]
    student: str                # the account that submitted it (its files' owner)
    assignment: str
    received: float             # when this service first saw it (seconds since the epoch)
    status: str = QUEUED
    why: str = ""               # a template (i18n) saying why it was not graded, with `params`
    params: dict = field(default_factory=dict)
    next_allowed: float | None = None       # limited: when the next grading is allowed
    score: float | None = None
    max_score: float | None = None
    graded_at: float | None = None
    seconds: float | None = None    # how long its grading took (the wait estimates learn from it)
    attempts: int = 0           # gradings started (more than one: the service was restarted)
    digest: str = ""            # of the notebooks copied (a renamed folder is the same submission)
    estimate: float | None = None   # the wait for results its page said when it was queued (s)
    ahead: int | None = None        # and how many submissions it said were ahead of it
    alone: bool = False         # to be graded with nothing beside it (its last try: see ATTEMPTS)

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def next_allowed(times: list[float], now: float, per_hour: int, per_day: int) -> float | None:
    """When the next grading is allowed, given the times of those counted so far; None: now.
    math.inf when the course allows none."""
    waits = []
    for limit, window in ((per_hour, HOUR), (per_day, DAY)):
        if limit <= 0:
            return math.inf
        recent = sorted(t for t in times if t > now - window)
        if len(recent) >= limit:               # allowed once enough of them are out of the window
            waits.append(recent[len(recent) - limit] + window)
    return max(waits) if waits else None


class Ledger:
    """The service's state folder: records/, snapshots/ (what is to be graded, copied from the
    exchange), results/ (results.json, feedback.md, feedback.html of each graded submission)."""

    def __init__(self, state: Path):
        self.state = Path(state)
        private_folder(self.state)
        for name in ("records", "snapshots", "results"):
            private_folder(self.state / name)
        self.records: dict[str, Record] = {}
        self.notes: list[str] = []          # what the last load met (unreadable files)
        self._lock = threading.RLock()
        self._lock_file = None

    # -- one service per state folder ---------------------------------------------------------
    def claim(self) -> None:
        """Hold the state folder for this process, or raise AlreadyRunning."""
        handle = open(self.state / "lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise AlreadyRunning(f"another tfcourse feedback service is using {self.state}; "
                                 f"stop it first (one service per state folder)") from None
        self._lock_file = handle

    # -- records ----------------------------------------------------------------------------
    def load(self) -> list[Record]:
        """Read every record; returns those to grade again (queued, or being graded when the
        service stopped), oldest first. A record whose results were written is graded. A file
        that cannot be read (left empty by a crash) stops nothing: an unreadable record is set
        aside (its submission is taken again from the exchange), a submission whose results
        cannot be read is graded again; `notes` says which, for the log."""
        self.notes = []
        for path in sorted((self.state / "records").glob("*.json")):
            try:
                record = Record.from_dict(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError, AttributeError) as error:
                self.notes.append(f"{path.name}: its record cannot be read ({error}): set "
                                  f"aside; the submission is taken again if still submitted")
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(f"{path.name}.unreadable"))
                continue
            self.records[record.key] = record
        todo, grading = [], {r.key for r in self.records.values() if r.status == GRADING}
        for record in [r for r in self.records.values() if r.status in PENDING]:
            results = self._written(record.key)
            last_try = record.status == GRADING and record.attempts >= ATTEMPTS
            if results is not None:             # written, then stopped before saying so
                self._after_restart(record, results=results)
            elif last_try and (record.alone or grading == {record.key}):
                self._after_restart(replace(    # it may be what stops the service
                    record, status=FAILED, params={"attempts": record.attempts}, why=STOPPED))
            else:
                todo.append(replace(record, status=QUEUED, alone=record.alone or last_try))
        return sorted((self._after_restart(r) for r in todo), key=lambda r: r.received)

    def _written(self, key: str) -> dict | None:
        """The results written for `key`, None if none or unreadable (then graded again)."""
        path = self.results_file(key)
        if not path.is_file():
            return None
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(results, dict):
                return results
            raise ValueError("not an object")
        except (OSError, ValueError) as error:
            self.notes.append(f"{key}: its results cannot be read ({error}): graded again")
            return None

    def _after_restart(self, record: Record, results: dict | None = None) -> Record:
        """Hold `record` as the restart left it, and write it if its disk has room; if not, the
        record on disk says what it said, and the next restart decides the same."""
        try:
            if results is not None:
                return self.finish(record, results)
            self.save(record)
        except OSError:
            if results is not None:
                record = replace(record, status=GRADED, score=results.get("score"),
                                 max_score=results.get("max_score"), graded_at=time.time())
            self.records[record.key] = record
        return record

    def save(self, record: Record) -> None:
        """Write the record, then hold it (a record that cannot be written is not held)."""
        with self._lock:
            write_atomically(self.state / "records" / f"{record.key}.json",
                             strict_json(asdict(record)))
            self.records[record.key] = record

    def same_as(self, record: Record, gone) -> Record | None:
        """An earlier submission of the same student and assignment with the same notebooks,
        graded or waiting to be, whose folder is `gone` (a predicate on its key) from the
        exchange: this is that folder renamed, or deleted and submitted again unchanged. A folder
        is known by its name and its contents, never by its inode (file systems reuse those)."""
        with self._lock:
            return next((r for r in self.records.values() if r.key != record.key and
                         r.student == record.student and r.assignment == record.assignment and
                         r.digest == record.digest and r.status in (GRADED, *PENDING)
                         and gone(r.key)), None)

    def seen(self, key: str) -> bool:
        with self._lock:
            return key in self.records

    def of_student(self, student: str) -> list[Record]:
        with self._lock:
            return sorted((r for r in self.records.values() if r.student == student),
                          key=lambda r: r.received, reverse=True)

    def all(self) -> list[Record]:
        with self._lock:
            return sorted(self.records.values(), key=lambda r: r.received, reverse=True)

    # -- fair use -----------------------------------------------------------------------------
    def flooding(self, student: str, now: float) -> bool:
        """Whether `student` has FLOOD records from the last day already (a script submitting in
        a loop): more would only fill the disk."""
        with self._lock:
            return sum(r.student == student and r.received > now - DAY
                       for r in self.records.values()) >= FLOOD

    def wait(self, record: Record, per_hour: int, per_day: int) -> float | None:
        """When fair use allows `record` to be graded (next_allowed: None, now)."""
        with self._lock:
            times = [r.received for r in self.records.values()
                     if r.student == record.student and r.assignment == record.assignment
                     and counted(r) and r.key != record.key]
        return next_allowed(times, record.received, per_hour, per_day)

    def admit(self, record: Record, per_hour: int, per_day: int) -> bool:
        """Queue `record` if fair use allows one more grading of its student's assignment now;
        else record it as limited, with the time the next one is allowed. Saved either way. A
        submission of the same student and assignment still waiting is superseded by it (not
        graded, not counted): one waits at a time for each, so nobody fills the queue."""
        with self._lock:
            for older in list(self.records.values()):
                if older.student == record.student and older.assignment == record.assignment \
                        and older.status == QUEUED and older.key != record.key:
                    self.save(replace(older, status=SUPERSEDED, why="not graded: a newer "
                                      "submission came before its turn"))
                    remove_tree(self.snapshot_folder(older.key))
            wait = self.wait(record, per_hour, per_day)
            if wait is None:
                record.status = QUEUED
            else:
                record.status, record.next_allowed = LIMITED, wait
                record.why = ("feedback on submit is not offered for this course" if wait ==
                              math.inf else "not graded: fair use allows {hour} gradings an hour "
                              "and {day} a day for each assignment; the next is allowed at "
                              "{when}")
                record.params = {"hour": per_hour, "day": per_day}
                record.next_allowed = None if wait == math.inf else wait
            self.save(record)
            return wait is None

    # -- snapshots and results ------------------------------------------------------------------
    def snapshot_folder(self, key: str) -> Path:
        return self.state / "snapshots" / key

    def results_folder(self, key: str) -> Path:
        return self.state / "results" / key

    def results_file(self, key: str) -> Path:
        return self.results_folder(key) / "results.json"

    def results(self, key: str) -> dict | None:
        try:
            return json.loads(self.results_file(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def finish(self, record: Record, results: dict, failed: bool = False,
               now: float | None = None) -> Record:
        """Record `record` as graded (or failed: the grader itself failed) with its results; the
        record held is the one written (none, if it cannot be written)."""
        done = replace(record, status=FAILED if failed else GRADED, score=results.get("score"),
                       max_score=results.get("max_score"), graded_at=now or time.time())
        if failed:
            done.why = "the grader failed on this submission; your instructor has the details"
        self.save(done)
        remove_tree(self.snapshot_folder(record.key))
        return done


def counted(record: Record) -> bool:
    """Whether fair use counts `record`: not when the service's stops failed it (it may be a
    classmate's submission, graded beside it, that stopped the service)."""
    return record.status in COUNTED and not (record.status == FAILED and record.why == STOPPED)


def digest(folder: Path) -> str:
    """The notebooks copied into `folder`, by their names and bytes."""
    total = hashlib.sha256()
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        total.update(os.fsencode(path.name) + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def remove_tree(path: Path) -> None:
    """Remove a folder of the service's own (no link in it is followed)."""
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
