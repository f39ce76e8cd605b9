"""`tfcourse feedback-service`: grade each submission as it arrives, and show students the results.

Run by JupyterHub as a managed service, as the instructor's account (docs/jupyterhub.md):

    watcher      looks at the exchange's inbound folder every --poll seconds; each new submission
                 is checked (inbox.py), copied, and queued, or recorded as over fair use (ledger.py)
    workers      --jobs threads; each grades one queued submission at a time with the trusted
                 grader in its own process (the sandbox runs the student's code), as `tfcourse
                 grade` does, and writes its results into the state folder; with --scheduler,
                 each sends it to a Dask cluster's workers instead (remote.py)
    page         /services/<name>/ for each logged-in user: their own submissions (page.py,
                 served by app.py); /services/<name>/api/feedback: the same as JSON

The command (options, signals, the page's port) is command.py.

Stopped at any moment (a restart of the hub or of the service), it starts again where it was: what
was queued or being graded is graded, once (ledger.py).
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path

from tfcourse.course import Course
from tfcourse.batch import runner
from tfcourse.batch.results import write_results
from tfcourse.batch import forkserver
from tfcourse.batch.child import Warm, grade_in_child, student_threads
from tfcourse.submission.failures import failure_report

from . import keys, page
from .inbox import Arrival, Watcher, check_inbound, inbound, owner_of, snapshot
from .estimate import Timing, Wait, play
from .ledger import (FAILED, FLOOD, GRADING, HOUR, QUEUED, REFUSED, SAME, Ledger, Record, digest,
                     remove_tree)

log = logging.getLogger("tfcourse.feedback")
FLOODED = "not recorded: more than {flood} submissions from you in a day"
CACHE_SECONDS = 2.0         # the waits shown are played again at most this often
FREE_MB = 1                 # less free space in the state folder: grading waits


class Service:
    """The watcher and the grading workers (the page is `make_app`'s). `grade` (for tests):
    a function (course, folder, assignment) -> SubmissionReport; default: the sandboxed grader."""

    def __init__(self, course: Course, exchange: Path, state: Path, *, jobs: int | None = 1,
                 lang: str | None = None, poll: float = 2.0, trust_names: bool = False,
                 clock=time.time, grade=None, scheduler: str | None = None,
                 skip: list[str] = ()):
        self.course, self.exchange = course, Path(exchange)
        self.inbox = inbound(self.exchange, course.id)
        self.watcher = Watcher(self.inbox)
        self.ledger = Ledger(state)
        # --trust-names: a folder is its named student's only with their key (keys.py)
        self.secret = keys.secret(self.ledger.state) if trust_names else None
        # None: as many as the cluster's workers have threads (with a scheduler), else 1
        self.jobs_given, self.jobs = jobs, max(1, jobs or 1)
        self.poll, self.trust_names = poll, trust_names
        self.lang = lang or course.language
        self.clock = clock
        self.grade = grade or self._grade_in_sandbox
        self.scheduler = scheduler              # a Dask scheduler's address: graded there
        self.skip = list(skip)                  # checks not graded here ("not graded: skipped")
        self.remote = None                      # its client, once started (remote.Remote)
        self.turns = threading.Condition()      # queued records wait here for a worker
        self.busy: set[str] = set()             # students one of whose submissions is graded now
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        # entries not recorded one by one (a flood), or whose record could not be written:
        # key -> (student, why, its params), left alone until a restart
        self.ignored: dict[str, tuple[str, str, dict]] = {}
        self.distrust = ""                      # why the inbound folder is not looked into
        self.listen = ""                        # what is wrong with the page's port
        # entries whose owner's uid has no account name yet: key -> (named, assignment, uid)
        self.unnamed: dict[str, tuple[str, str, int]] = {}
        self.problem, self.problem_since = "", 0.0  # why the state folder cannot be written
        self.started: dict[str, float] = {}     # submissions being graded: when they began
        self.unwritten: dict[str, tuple] = {}   # results graded, not written yet: (report, s)
        self.timing = Timing()                  # what gradings took: the waits shown
        self._played: tuple[float, dict] = (-math.inf, {})     # the last waits played, when
        self._report = (threading.Lock(), [-math.inf])          # the class report, when made

    # -- the class report (tfcourse report, live) -------------------------------------------------
    REPORT_SECONDS = 60         # the instructor's class report is made again at most this often

    def class_report(self) -> Path:
        """The class report of everything graded so far (tfcourse/insights/classreport.py), in
        the state folder's report/, made again when older than REPORT_SECONDS."""
        from tfcourse.insights.classreport import latest, read_service, write_report

        out = self.ledger.state / "report"
        lock, made = self._report
        with lock:
            if time.monotonic() - made[0] > self.REPORT_SECONDS or \
                    not (out / "index.html").is_file():
                attempts, problems = read_service(self.ledger.state)
                write_report(self.course, latest(attempts), out, self.lang, problems, attempts)
                made[0] = time.monotonic()
        return out

    # -- starting and stopping ----------------------------------------------------------------
    def start(self) -> None:
        """Claim the state folder, take up what was pending, start the workers and the
        watcher. Raises SideBySideRefused where student code runs as a plain process and this
        service would grade students side by side or leave them its state folder to read (a
        cluster's workers refuse that mode themselves: cluster.without_bubblewrap);
        cluster.ClusterError when its scheduler cannot be reached."""
        if self.scheduler is None:
            self.refuse_side_by_side()
        self.ledger.claim()
        if self.scheduler is not None:
            from .remote import Remote

            self.remote = Remote(self.course, self.scheduler)
            if self.grade == self._grade_in_sandbox:
                self.grade = self._grade_on_cluster
            if self.jobs_given is None:
                self.jobs = self.remote.slots()
        again = self.ledger.load()
        for note in self.ledger.notes:
            log.error("%s", note)
        for record in sorted(self.ledger.all(), key=lambda r: r.graded_at or 0):
            self.timing.add(record.assignment, record.seconds)
        if again:
            log.info("picked up %d submission(s) left pending", len(again))
        self.threads = [threading.Thread(target=self._work, name=f"grader-{n}", daemon=True)
                        for n in range(self.jobs)]
        self.threads.append(threading.Thread(target=self._watch, name="watcher", daemon=True))
        for thread in self.threads:
            thread.start()

    def refuse_side_by_side(self) -> None:
        """`tfcourse grade`'s checks where student code runs as a plain process (sandbox.isolation:
        process), all students as one user: one submission at a time (--jobs 1), and nothing in
        the state folder (classmates' notebooks, results, records) readable by that user."""
        runner.refuse_side_by_side(self.course, self.jobs)
        tops = [self.ledger.state / name for name in ("records", "snapshots", "results", "report")]
        inside = list(tops) + [self.ledger.state / keys.SECRET_FILE] * (self.secret is not None)
        for folder in tops:
            for top, folders, files in os.walk(folder):
                inside += [Path(top, name) for name in folders + files]
        runner.refuse_readable(self.course, inside)

    def stop(self) -> None:
        self.stopping.set()
        with self.turns:
            self.turns.notify_all()

    def give_back(self) -> None:
        """A graceful stop (SIGTERM, SIGINT): the submissions being graded are queued again as
        they were, their attempt not counted (ledger.ATTEMPTS counts only crashes)."""
        with self.turns, self.ledger._lock:
            for key in list(self.started):
                record = self.ledger.records.get(key)
                if record is None or record.status != GRADING:
                    continue
                try:
                    self.ledger.save(replace(record, status=QUEUED,
                                             attempts=max(0, record.attempts - 1)))
                except OSError as error:
                    log.error("%s: not queued again (%s): the restart counts its attempt",
                              key, error)
                else:
                    log.info("%s: stopped while grading: queued again", key)

    # -- the watcher ----------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self.stopping.is_set():
            try:
                self.scan()
            except Exception:                   # keep watching, whatever one look met
                log.error("looking at %s failed:\n%s", self.inbox, traceback.format_exc())
            self.stopping.wait(self.poll)

    def scan(self) -> int:
        """Take every new submission; returns how many were seen. Nothing is taken from an
        inbound folder that is not the instructor's own (inbox.check_inbound)."""
        distrust = check_inbound(self.inbox)
        if distrust != self.distrust:
            (log.error if distrust else log.info)(
                "%s", distrust or f"watching {self.inbox}")
            self.distrust = distrust
        if distrust:
            return 0
        for key in [key for key in self.unnamed if not os.path.lexists(self.inbox / key)]:
            del self.unnamed[key]               # gone before its owner had a name
        found = in_turns(self.watcher.arrivals(
            lambda key: key in self.ignored or self.ledger.seen(key)))
        taken = 0
        for arrival in found:
            try:
                self.take(arrival)
            except OSError as error:            # the state folder: taken at the next look
                self.trouble(f"{arrival.key} not taken yet: {error}")
                break
            except Exception:                   # one odd entry does not hold up the others
                log.error("%s: could not be taken:\n%s", arrival.key, traceback.format_exc())
                self.not_taken(arrival, "not graded: the service could not read this "
                                        "submission; your instructor has the details")
            taken += 1
        else:
            if taken:
                self.trouble("")
        with self.turns:
            self.turns.notify_all()
        return taken

    def take(self, arrival: Arrival) -> Record:
        """Record a new submission: refused (another's name, an unknown assignment), the same as
        one graded or queued already, over fair use, or copied and queued. A flood from one
        account is not recorded one by one (its count is shown)."""
        student = self.student_of(arrival)
        if not self.trust_names and arrival.owner == f"uid {arrival.uid}":
            self.nameless(arrival)
            return Record(arrival.key, student, arrival.assignment, self.clock(), status=FAILED)
        if self.unnamed.pop(arrival.key, None) is not None:
            log.info("%s: its owner has a name again (%s)", arrival.key, arrival.owner)
        record = Record(arrival.key, student, arrival.assignment, self.clock())
        if self.ledger.flooding(record.student, record.received):
            self.ignored[arrival.key] = (student, FLOODED, {"flood": FLOOD})
            log.warning("%s: %s submitted more than anyone needs in a day: not recorded",
                        arrival.key, student)
            return record
        if self.refused(record, arrival):
            return record
        feedback = self.course.feedback
        if self.ledger.wait(record, feedback.per_hour, feedback.per_day) is not None:
            with self.turns:                    # not copied: a student over fair use with big
                self.ledger.admit(record, feedback.per_hour, feedback.per_day)  # notebooks
            log.info("%s: over fair use, not graded", arrival.key)    # holds up nobody
            return record
        # Copied before it is queued (no worker sees it half copied); its digest tells a folder
        # renamed, or the same work submitted again, from a new submission.
        self._copy(record, arrival)
        record.digest = digest(self.ledger.snapshot_folder(record.key))
        same = self.ledger.same_as(record, lambda key: not os.path.lexists(self.inbox / key))
        if same is not None:
            record.status, record.why = SAME, ("not graded: the same notebooks as your "
                                               "submission of {when}, whose folder is gone; "
                                               "its results are theirs")
            record.params = {"when": page.when(same.received)}
            self.ledger.save(record)
            remove_tree(self.ledger.snapshot_folder(record.key))
            log.info("%s: the same notebooks as %s, not graded again", arrival.key, same.key)
            return record
        with self.turns:
            if not self.ledger.admit(record, feedback.per_hour, feedback.per_day):
                remove_tree(self.ledger.snapshot_folder(record.key))
                log.info("%s: over fair use, not graded", arrival.key)
                return record
            wait = self.waits(fresh=True).get(record.key)
            if wait is not None:                # what its page says now, to compare later
                record = replace(record, ahead=wait.ahead, estimate=None if math.isinf(
                    wait.seconds) else round(wait.seconds, 1))
                self.ledger.save(record)
        log.info("%s: queued", arrival.key)
        return record

    def student_of(self, arrival: Arrival) -> str:
        """Whose `arrival` is: its owner's account; under --trust-names, the student its name
        says when it holds their key, else nobody's (keys.NOBODY: no fair use spent, on no
        student's page)."""
        if not self.trust_names:
            return arrival.owner
        if keys.holds_key(self.secret, arrival.path, arrival.named):
            return arrival.named
        return keys.NOBODY

    def refused(self, record: Record, arrival: Arrival) -> bool:
        """Whether `record` is refused (saved so, with its reason): submitted under another's
        name, without its student's key (--trust-names), or for an assignment without feedback
        on submit."""
        known = {a.id for a in self.course.assignments}
        if self.trust_names and record.student == keys.NOBODY:
            record.status, record.why = REFUSED, ("not graded: the folder holds no {file} with "
                                                  "the key of {named}, whose name it bears")
            record.params = {"file": keys.KEY_FILE, "named": arrival.named}
        elif not self.trust_names and arrival.owner != arrival.named:
            record.status, record.why = REFUSED, ("not graded: submitted under the name "
                                                  "{named} from the account {owner}")
            record.params = {"named": arrival.named, "owner": arrival.owner}
        elif arrival.assignment not in known:
            record.status, record.why = REFUSED, ("not graded: {assignment} has no feedback on "
                                                  "submit in this course")
            record.params = {"assignment": arrival.assignment}
        if record.status != REFUSED:
            return False
        self.ledger.save(record)
        log.warning("%s: %s", arrival.key, record.why.format(**record.params))
        return True

    def nameless(self, arrival: Arrival) -> None:
        """An owner whose account has no name now (the name service down for a moment): not
        recorded, looked at again at each poll, and listed among the instructor's failures until
        it has a name (then it is taken as any other)."""
        if arrival.key not in self.unnamed:
            log.error("%s: its owner, uid %d, has no account name now (the name service?): "
                      "looked at again at each poll", arrival.key, arrival.uid)
        self.unnamed[arrival.key] = (arrival.named, arrival.assignment, arrival.uid)

    def not_taken(self, arrival: Arrival, why: str) -> None:
        """Record `arrival` as not graded, saying why (held in memory if even that fails)."""
        try:
            student = self.student_of(arrival)
        except Exception:                       # not even its key could be read
            student = keys.NOBODY if self.trust_names else arrival.owner
        self.ignored[arrival.key] = (student, why, {})
        try:
            self.ledger.save(Record(arrival.key, student, arrival.assignment, self.clock(),
                                    status=FAILED, why=why))
        except OSError as error:                # held in memory (self.ignored) until it can be
            log.warning("%s: not recorded in the state folder (%s); held in memory",
                        arrival.key, error)

    def trouble(self, problem: str) -> None:
        """What keeps the service from writing its state folder now ("": nothing), logged when
        it changes and shown on the instructor's page."""
        if problem and not self.problem:
            log.error("the state folder %s cannot be written: %s; grading waits, and resumes "
                      "by itself once it can", self.ledger.state, problem)
            self.problem_since = self.clock()
        elif self.problem and not problem:
            log.info("the state folder can be written again: grading resumes")
        self.problem = problem

    def _copy(self, record: Record, arrival: Arrival | None = None) -> None:
        """Copy what was submitted into the state folder (again, after a restart that came
        between queueing and copying)."""
        if arrival is None:
            path = self.inbox / record.key
            try:
                info = os.stat(path, follow_symlinks=False)
                owner, uid = owner_of(info), info.st_uid
            except OSError:
                owner, uid = "", -1
            arrival = Arrival(record.key, path, record.student, record.assignment, owner, uid)
        for line in snapshot(self.course, arrival, self.ledger.snapshot_folder(record.key)):
            log.warning("%s: not copied: %s", record.key, line)

    # -- the workers ----------------------------------------------------------------------------
    def next_turn(self) -> Record | None:
        """The next submission to grade, by turns: among queued ones whose student has none
        being graded now, that of the student graded least in the last hour, then the oldest.
        Waits for one (and for space in the state folder); None once the service stops."""
        with self.turns:
            while not self.stopping.is_set():
                waiting = self.alone_first(self.order())
                if waiting and self.room():
                    record = waiting[0]
                    taken = replace(record, status=GRADING, attempts=record.attempts + 1)
                    try:
                        self.ledger.save(taken)
                    except OSError as error:
                        self.trouble(f"{record.key} not started: {error}")
                    else:
                        self.busy.add(record.student)
                        log.info("%s: grading (attempt %d)", record.key, taken.attempts)
                        self.started[record.key] = self.clock()
                        self._played = (-math.inf, {})  # the queue changed
                        return taken
                self.turns.wait(1.0)
        return None

    def alone_first(self, waiting: list[Record]) -> list[Record]:
        """Of `waiting`, what may start now: a submission to be graded alone (ledger.ATTEMPTS)
        first, once nothing else is graded; nothing while one of those is graded."""
        graded = [self.ledger.records.get(key) for key in self.started]
        if any(r is not None and r.alone for r in graded):
            return []
        alone = [r for r in waiting if r.alone]
        if alone:
            return [] if self.started else alone
        return waiting

    def order(self, free: bool = True) -> list[Record]:
        """The queued submissions in the order they will be graded (`free`: only those whose
        student has none being graded now, the ones `next_turn` chooses from)."""
        now = self.clock()
        recent: dict[str, int] = {}
        for r in self.ledger.all():
            if r.graded_at and r.graded_at > now - HOUR:
                recent[r.student] = recent.get(r.student, 0) + 1
        waiting = [r for r in self.ledger.all()
                   if r.status == QUEUED and not (free and r.student in self.busy)]
        return sorted(waiting, key=lambda r: (recent.get(r.student, 0), r.received))

    def room(self) -> bool:
        """Whether the state folder has room for a submission's results (else says so)."""
        try:
            info = os.statvfs(self.ledger.state)
        except OSError:
            return True
        free = info.f_bavail * info.f_frsize / 1048576
        if free >= FREE_MB:
            return True
        self.trouble(f"its disk is full ({free:.1f} MB free)")
        return False

    def _work(self) -> None:
        with Warm() as warm:                    # this slot's zygote and fork server, ended as
            self._warm(warm)                    # the slot ends
            while (record := self.next_turn()) is not None:
                try:
                    self.grade_one(record, warm)
                except Exception:
                    log.error("%s: grading failed:\n%s", record.key, traceback.format_exc())
                finally:
                    with self.turns:
                        self.busy.discard(record.student)
                        self.started.pop(record.key, None)
                        self.turns.notify_all()

    def _warm(self, warm: Warm) -> None:
        """Start this job slot's zygote (its students' processes are forked from it) and fork
        server (its graders are), both at once, as the slot starts: not at its first grading,
        which would wait for them (25-30 s on a loaded machine, after each restart)."""
        if self.grade != self._grade_in_sandbox:
            return
        try:
            warm.zygotes.for_course(self.course, student_threads(self.course))  # not awaited
            if forkserver.enabled():
                warm.servers.warm(self.course.root, dict(os.environ))
        except Exception:                       # the first grading starts them as it would have
            log.warning("a job slot could not warm up:\n%s", traceback.format_exc())

    def grade_one(self, record: Record, warm: Warm | None = None) -> None:
        """Grade `record` (taken by `next_turn`) and record its results. Results that cannot be
        written (a full disk) are kept, and the submission queued again, to be written later.
        `warm`: the job slot's zygote and fork server (None: the thread's own)."""
        started = self.clock()
        report, seconds = self.unwritten.pop(record.key, (None, 0.0))
        if report is None:
            report = self._grade(record, warm)
            if self.stopping.is_set():          # stopped while grading: graded after the restart
                return
            report.submission = f"{record.student}, {page.when(record.received)}"
            seconds, started = self.clock() - started, self.clock()
        try:
            results = write_results(self.course, report, self.ledger.results_folder(record.key),
                                    self.lang)
            seconds += self.clock() - started   # the slot's whole time: its results written too
            done = self.ledger.finish(replace(record, seconds=round(seconds, 2)), results,
                                      failed=bool(report.error), now=self.clock())
        except OSError as error:
            self.unwritten[record.key] = (report, seconds)
            self.trouble(f"{record.key}: its results not written: {error}")
            with self.turns:
                self.ledger.records[record.key] = replace(record, status=QUEUED,
                                                          attempts=record.attempts - 1)
            return
        self.trouble("")
        self.timing.add(done.assignment, seconds)
        self._played = (-math.inf, {})
        log.info("%s: %s / %s in %.1f s", done.key, results["score"], results["max_score"],
                 seconds)

    def _grade(self, record: Record, warm: Warm | None):
        folder = self.ledger.snapshot_folder(record.key)
        try:
            if not folder.is_dir():             # queued, then stopped before it was copied
                self._copy(record)
            folder.mkdir(mode=0o700, exist_ok=True)     # nothing could be copied: graded empty
            if self.grade == self._grade_in_sandbox:
                return self._grade_in_sandbox(self.course, folder, record.assignment, warm)
            return self.grade(self.course, folder, record.assignment)
        except Exception:
            return failure_report(self.course, folder, record.assignment,
                                  traceback.format_exc())

    def _grade_in_sandbox(self, course: Course, folder: Path, assignment: str,
                          warm: Warm | None = None):
        snapshots = self.ledger.state / "snapshots"
        return grade_in_child(course, folder, assignment, student_threads(course), self.skip,
                              [self.ledger.state.resolve(), self.exchange.resolve()],
                              within=snapshots, warm=warm)

    def _grade_on_cluster(self, course: Course, folder: Path, assignment: str):
        return self.remote.grade(course, folder, assignment, self.ledger.state / "snapshots",
                                 self.skip)

    # -- what the page shows ----------------------------------------------------------------------
    def waits(self, fresh: bool = False) -> dict[str, Wait]:
        """Submissions queued or being graded: how many go before each, and how long until its
        results, from the gradings measured so far (estimate.play). Played again at most every
        CACHE_SECONDS for the pages (each reloads itself), or when `fresh`."""
        with self.turns:
            if not fresh and 0 <= time.monotonic() - self._played[0] < CACHE_SECONDS:
                return self._played[1]
            records = self.ledger.all()
            running = {key: (self.ledger.records[key], began)
                       for key, began in self.started.items()
                       if key in self.ledger.records and self.ledger.records[key].status == GRADING}
            now = self.clock()
            waits = play([r for r in records if r.status == QUEUED], running,
                         [r for r in records if r.graded_at], self.jobs, self.timing, now)
            for key, (record, began) in running.items():
                waits[key] = Wait(0, max(0.0, began + self.timing.of(record.assignment) - now))
            self._played = (time.monotonic(), waits)
            return waits

    def overview(self) -> dict:
        """What the instructor sees: the queue, the rate, the failures, and what keeps the service
        from its work."""
        now, waits = self.clock(), self.waits()
        records = self.ledger.all()
        queue = sorted((r for r in records if r.key in waits),
                       key=lambda r: (r.status != GRADING, waits[r.key].ahead))
        done = [r for r in records if r.graded_at]
        return {
            "now": now, "jobs": self.jobs, "problem": self.problem,
            "problem_since": self.problem_since if self.problem else None,
            "distrust": self.distrust, "notes": list(self.ledger.notes),
            "listen": self.listen,
            "queue": [{"key": r.key, "student": r.student, "assignment": r.assignment,
                       "status": r.status, "received": r.received, "ahead": waits[r.key].ahead,
                       "wait": None if math.isinf(waits[r.key].seconds)
                       else round(waits[r.key].seconds, 1)} for r in queue],
            "graded_last_10_minutes": sum(r.graded_at > now - 600 for r in done),
            "graded_last_hour": sum(r.graded_at > now - HOUR for r in done),
            "seconds_per_grading": {a.id: round(self.timing.of(a.id), 1)
                                    for a in self.course.assignments
                                    if not math.isinf(self.timing.of(a.id))},
            "counts": {status: sum(r.status == status for r in records)
                       for status in sorted({r.status for r in records})},
            "failures": [{"key": r.key, "student": r.student, "assignment": r.assignment,
                          "why": r.why, "params": r.params} for r in records
                         if r.status == FAILED] + [
                {"key": key, "student": named, "assignment": assignment,
                 "why": "not graded yet: its owner, uid {uid}, has no account name now (the "
                        "name service?); looked at again at each poll", "params": {"uid": uid}}
                for key, (named, assignment, uid) in sorted(self.unnamed.items())],
            "not_recorded": [{"key": key, "student": student, "why": why, "params": params}
                             for key, (student, why, params) in sorted(self.ignored.items())],
        }

    def key(self, student: str) -> str | None:
        """`student`'s submission key (keys.py), under --trust-names; else None (none needed)."""
        return keys.key_of(self.secret, student) if self.secret is not None else None

    def view(self, student: str) -> tuple[list[Record], dict]:
        if student == keys.NOBODY:              # no hub user's: the instructor's page lists them
            return [], {}
        records = self.ledger.of_student(student)
        return records, {r.key: self.ledger.results(r.key) for r in records}

    def not_recorded(self, student: str) -> list[tuple[str, dict]]:
        """Why some of `student`'s folders have no record (a flood): (template, params)."""
        return [(why, params) for who, why, params in self.ignored.values()
                if who == student and student != keys.NOBODY]


def in_turns(arrivals: list[Arrival]) -> list[Arrival]:
    """`arrivals` (oldest first) taken in turns by account: each one's first, then each one's
    second...: a student's many submissions, each costly to copy, hold up a classmate's one
    copy at most."""
    rank: dict[int, int] = {}
    turns = []
    for arrival in arrivals:
        rank[arrival.uid] = rank.get(arrival.uid, -1) + 1
        turns.append((rank[arrival.uid], len(turns), arrival))
    return [arrival for _, _, arrival in sorted(turns, key=lambda item: item[:2])]
