"""Grading many submissions: one trusted grader process each, N at a time, nothing lost.

Each submission is graded by `python -m tfcourse.submission` in its own process, with a time limit;
whatever happens to that process, the submission ends with a results.json and a feedback page, that
lists every check of its assignment. Results carry a fingerprint of the submission and of the
grader, so a second run grades only what is new or changed. The input folders are only ever read,
and never through a link (see submission/files.py). Stopping the runner (SIGTERM, SIGINT, or
SIGKILL) ends its graders, and with them the students' processes; their temporary folders go.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from tfcourse.course import Course

from ..process import hide_command_line  # noqa: F401 (the command's, here since it was)
from ..sandbox import forked
from ..submission.failures import grader_failed
from ..submission.finding import Listing, list_submission
from ..submission.report import Note, SubmissionReport
from .child import (GRADERS, Interrupted, Warm, grade_in_child, grade_one,  # noqa: F401
                    grader_version, graders_end_on_signals, student_threads)  # (grade_one)
from .fingerprint import (Stamp, fingerprint, graded_as, graded_as_stamped,  # noqa: F401
                          previous_fingerprint)  # (fingerprint: callers')
from .fingerprint import stamp as take_stamp
from .graded import write_grades
from .results import private_folder, write_results
from .survey import Found, Survey, expand, printable, survey  # noqa: F401 (expand: callers')

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    name: str
    folder: Path
    status: str                 # graded, unchanged, failed, "not graded: no assignment"
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    assignment: str = ""
    note: str = ""              # for the instructor: what about this input did not fit
    not_graded: str = ""        # the points not graded by choice: "6 points not graded: skipped"


class Outcomes(list):
    """grade_many's outcomes, in the order of the submissions; `ignored`: what was given or found
    that is not a submission, as (path, why); `warnings`: about the folders given, (path, what)."""

    def __init__(self, items=(), ignored=(), warnings=()):
        super().__init__(items)
        self.ignored = list(ignored)
        self.warnings = list(warnings)


CGROUP = Path("/sys/fs/cgroup")


def available_cores(cgroup: Path = CGROUP) -> int:
    """The cores this container may use. Gradescope (and Kubernetes) cap CPU with a cgroup quota,
    while os.cpu_count() reports the whole host: more torch threads than cores only slows down.
    The fewer of the affinity's cores and the quota (cgroup v2 `cpu.max`, else v1
    `cpu.cfs_quota_us` over `cpu.cfs_period_us`, under `cgroup`), rounded down, at least 1.

    Not loky's (joblib's) `cpu_count()`, though it reads the same files and the affinity: on
    fake cgroup files it gave the same answers for no quota (v2 "max", v1 -1), whole quotas and a
    smaller affinity, but rounds a fractional quota up (1.5 cores: 2, 2.5 cores: 3) where this
    rounds down (1 and 2): it sizes a process pool that may use the whole quota, while each
    grading here runs torch at full load, and a second one on half a core is throttled for the
    pair. It also obeys LOKY_MAX_CPU_COUNT, and would be a dependency (a process-pool library,
    80 to 160 ms to import) for these lines."""
    cores = len(os.sched_getaffinity(0))
    quotas = [(cgroup / "cpu.max", None),                          # cgroup v2: "quota period"
              (cgroup / "cpu" / "cpu.cfs_quota_us", cgroup / "cpu" / "cpu.cfs_period_us")]
    for quota_file, period_file in quotas:
        try:
            fields = quota_file.read_text().split()
            if period_file:
                fields.append(period_file.read_text().strip())
            quota, period = fields[0], fields[1]
        except (OSError, IndexError) as error:
            log.debug("no CPU quota in %s (%s)", quota_file, error)
            continue
        if quota not in ("max", "-1"):
            log.debug("CPU quota %s of %s us (%s), %d cores in the affinity", quota, period,
                      quota_file, cores)
            return max(1, min(cores, int(quota) // int(period)))
        return cores
    return cores


# -- many submissions -----------------------------------------------------------------------------
class Planned(NamedTuple):
    """A submission the plan grades: where its results go, the assignment it is graded as (None:
    the grader tells it by content, or cannot), its listing and its fingerprint with the bytes it
    saw (fingerprint.Stamp; both None: it could not be listed, and its grader says why)."""
    item: Found
    folder: Path
    graded: str | None
    listing: Listing | None
    taken: Stamp | None = None

    @property
    def stamp(self) -> str:
        """Its fingerprint ("" when it has none)."""
        return self.taken.value if self.taken else ""


CHANGED_WHILE_GRADED = ("the notebooks changed while the submission was being graded: they were "
                        "graded as the grader read them, and the next run grades them again")


def _write(course: Course, report: SubmissionReport, entry: Planned, lang: str
           ) -> tuple[dict | None, str]:
    """Write a submission's results; when its report cannot be rendered, a failure's instead.
    (results or None, status)."""
    folder, stamp = entry.folder, entry.stamp
    if report.error:          # no fingerprint when the grader failed: the next run grades it again
        stamp = ""
    elif entry.taken and not graded_as_stamped(report, entry.taken):
        stamp = ""            # nor when the grader read other bytes than those fingerprinted
        report.notes.append(Note(CHANGED_WHILE_GRADED))
    try:
        return (write_results(course, report, folder, lang, stamp),
                "failed" if report.error else "graded" if report.assignment else
                "not graded: no assignment")
    except Exception:                                  # never let one submission stop the batch
        log.warning("%s: its results could not be written; a failure is written instead",
                    entry.item.path, exc_info=True)
        failure = grader_failed(course, entry.item.path.name,
                                report.assignment or entry.graded, traceback.format_exc())
        failure.submission = report.submission
        try:
            return write_results(course, failure, folder, lang), "failed"
        except Exception:
            log.error("%s: not even its failure could be written in %s", entry.item.path, folder,
                      exc_info=True)
            return None, "failed"


def _say_isolation(course: Course) -> None:
    """How student code will be isolated on this machine, on stderr, once for the batch, when it
    is weaker than bubblewrap or refused (each result says it too, but a table of zeros alone
    would not tell the instructor why)."""
    from ..sandbox.launch import SandboxConfig, choose_isolation

    isolation = choose_isolation(SandboxConfig.from_course(course, {}, 1, []))
    for line in (isolation.refusal, isolation.warning):
        if line:
            print(f"tfcourse grade: {line}", file=sys.stderr)


class SideBySideRefused(Exception):
    """Students would be graded side by side as one user, in process mode: refused."""


def readable_by(path: Path, user: tuple[int, int]) -> bool:
    """Whether the user (uid, gid) could read `path`: search permission on every folder above
    it, read permission on it (by the owner's, the group's or the others' bits)."""
    uid, gid = user

    def allowed(info: os.stat_result, bit: int) -> bool:
        shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
        return bool(info.st_mode >> shift & bit)

    absolute = Path(os.path.abspath(path))
    try:
        folders = [os.stat(folder) for folder in reversed(absolute.parents)]
        target = os.stat(absolute, follow_symlinks=False)
    except OSError:
        return False
    return all(allowed(info, 1) for info in folders) and allowed(target, 4)


def refuse_readable(course: Course, found: Survey | list[Path]) -> None:
    """Where student code runs as a plain process as the sandbox user, a submission that user
    can read (the usual umask makes them so) could be read by every classmate's code: refused,
    with the command that makes them private. `found`: a survey, or the paths to check."""
    from ..sandbox.launch import SandboxConfig, choose_isolation

    isolation = choose_isolation(SandboxConfig.from_course(course, {}, 1, []))
    if isolation.mode != "process" or isolation.refusal or not isolation.user or \
            isolation.user[0] in (0, os.geteuid()):
        return
    paths = [item.path for item in found.submissions] if isinstance(found, Survey) else found
    readable = [path for path in paths if readable_by(path, isolation.user)]
    if readable:
        folders = sorted({str(Path(os.path.abspath(path)).parent) for path in readable})
        more = f" and {len(readable) - 1} more submissions" if len(readable) > 1 else ""
        raise SideBySideRefused(
            f"{printable(str(readable[0]))}{more} can be read by user {course.sandbox.user!r}, "
            f"who runs every student's code here (sandbox."
            f"isolation: process): make them private first (chmod -R o-rwx "
            f"{' '.join(printable(folder) for folder in folders[:3])})")


def refuse_side_by_side(course: Course, jobs: int) -> None:
    """Where student code runs as a plain process (sandbox.isolation process, accepted by
    course.yaml), every student runs as one user, with no process namespace: side by side, one
    could kill another's worker or fill the disk both are counted on. More than one at a time is
    refused there, with a message that says what to do."""
    from ..sandbox.launch import SandboxConfig, choose_isolation

    isolation = choose_isolation(SandboxConfig.from_course(course, {}, 1, []))
    if jobs > 1 and isolation.mode == "process" and isolation.refusal is None:
        raise SideBySideRefused(
            f"--jobs {jobs} is refused: student code runs as a plain process here (sandbox."
            f"isolation: process), all students as one user, who could kill a classmate's "
            f"process or fill the disk counted against them; grade one at a time (--jobs 1), "
            f"or install bubblewrap (apt-get install bubblewrap)")


def _warn(found: Survey) -> None:
    """What does not fit the rule, on stderr before grading starts (the table repeats it)."""
    for path, why in found.warnings + found.ignored:
        print(f"tfcourse grade: {printable(path)}: {why}", file=sys.stderr)
    for item in found.submissions:
        if item.note:
            print(f"tfcourse grade: {printable(str(item.path))}: {item.note}", file=sys.stderr)


def grade_many(course: Course, paths: list[Path], out: Path, *, jobs: int, lang: str,
               force: bool = False, assignment: str | None = None, skip: list[str] = (),
               progress: bool = True, threads: int | None = None,
               scheduler: str | None = None) -> Outcomes:
    """Grade every submission among `paths` (see `survey`) into `out`/<name>/, and write
    `out`/grades.csv from every result there (graded.write_grades): `jobs` at a time
    here, or, given the address of a Dask scheduler, on its workers (cluster.py; `jobs` is then
    not used). Raises Interrupted when told to stop, after ending every grader and removing their
    temporary folders; SideBySideRefused when `jobs` > 1 where students run as one user."""
    if assignment:
        course.assignment(assignment)                  # an unknown id fails here, clearly
    if scheduler is None:
        refuse_side_by_side(course, jobs)
    private_folder(out)
    found = survey(course, paths, exclude=out)
    _warn(found)
    if scheduler is None:                              # on a cluster, each worker says its own
        refuse_readable(course, found)
        _say_isolation(course)
    batch = _Batch(course, out, lang, assignment, list(skip), threads or student_threads(course),
                   [out.resolve(), *[Path(p).resolve() for p in paths]], grader_version(course))
    outcomes = Outcomes(ignored=found.ignored, warnings=found.warnings)
    todo = batch.plan(found.submissions, force, outcomes)
    bar = None
    if progress and todo:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc="grading", unit="submission", file=sys.stderr)
    try:
        with graders_end_on_signals():
            if scheduler is None:
                _run_all(batch.work, todo, jobs, outcomes, bar)
            else:
                from .cluster import Batch, run_on_cluster
                run_on_cluster(scheduler, Batch(course, todo, batch.version, assignment,
                                                batch.threads, batch.skip, batch.record),
                               outcomes, bar)
    finally:
        batch.warm.close()                   # so that no zygote and no folder of one outlives it
        if bar:
            bar.close()
        write_grades(course, out)            # every result under `out`, those kept from before too
    order = {item.name: index for index, item in enumerate(found.submissions)}
    outcomes.sort(key=lambda o: order.get(o.name, 0))
    return outcomes


@dataclass
class _Batch:
    """What grade_many grades every submission with, and how one is graded and recorded."""
    course: Course
    out: Path
    lang: str
    assignment: str | None               # as given (None: each submission's own)
    skip: list[str]
    threads: int
    hide: list[Path]
    version: str
    # The zygotes and fork servers of the gradings side by side (child.Warm), closed at the
    # batch's end
    warm: forked.ZygotePool = field(default_factory=lambda: forked.ZygotePool(Warm))

    def plan(self, submissions: list[Found], force: bool, outcomes: Outcomes) -> list[Planned]:
        """The submissions to grade, each listed once (its fingerprint, its assignment and its
        grader's job all come from that listing); those unchanged since the last run go to
        `outcomes` at once."""
        todo = []
        for item in submissions:
            folder = self.out / item.name
            try:
                found = list_submission(item.path, item.within)
            except ValueError:                 # not inside its folder: its grader says why
                todo.append(Planned(item, folder, self.assignment, None))
                continue
            # the submission's content, the graders and the course decide "unchanged", not how
            # the command was spelt (with or without --assignment)
            graded = graded_as(self.course, found, self.assignment)
            options = json.dumps([graded, sorted(self.skip), self.lang])
            taken = take_stamp(found, self.version, options)
            previous = None if force else _previous_results(folder, taken.value)
            if previous:
                outcomes.append(Outcome(item.name, folder, "unchanged", previous["score"],
                                        previous["max_score"], 0.0,
                                        previous["extra_data"].get("assignment", ""), item.note,
                                        _not_graded(previous)))
            else:
                todo.append(Planned(item, folder, graded or None, found, taken))
        return todo

    def record(self, entry: Planned, report: SubmissionReport, seconds: float) -> Outcome:
        """Write a submission's results (the same here and for a cluster's report)."""
        item = entry.item
        report.submission = printable(shown_name(self.course, item))
        results, status = _write(self.course, report, entry, self.lang)
        return Outcome(item.name, entry.folder, status, results["score"] if results else 0.0,
                       results["max_score"] if results else 0.0, round(seconds, 1),
                       report.assignment, item.note, _not_graded(results))

    def work(self, entry: Planned) -> Outcome | None:
        """Grade one submission of the plan in its grader process, on the notebooks the plan
        listed; None when stopped."""
        item, graded = entry.item, entry.graded
        if GRADERS.stopping:
            return None
        started = time.monotonic()
        try:
            with self.warm.lend() as warm:
                report = grade_in_child(self.course, item.path, graded, self.threads,
                                        list(self.skip), self.hide, item.within, warm,
                                        entry.listing)
        except Exception:                    # never let one submission stop the batch
            report = grader_failed(self.course, item.path.name, graded, traceback.format_exc())
        if GRADERS.stopping:                 # ended by the stop: not a result
            return None
        return self.record(entry, report, time.monotonic() - started)


def shown_name(course: Course, item: Found) -> str:
    """The submission's name in its results and feedback: its results folder's, but for a folder
    named as an assignment, given alone (`submitted/alice/hw1`, or `submitted/alice/`):
    nbgrader's layout says whose it is, "alice/hw1" (the heading names "alice")."""
    path = Path(os.path.abspath(item.path))
    ours = {folder.resolve() for folder in (course.root, course.release_dir,
                                            course.solutions_dir, course.source_dir)}
    if item.name == path.name and path.name in {a.id for a in course.assignments} and \
            path.parent.name and path.parent.resolve() not in ours:
        return f"{path.parent.name}/{path.name}"
    return item.name


def _not_graded(results: dict | None) -> str:
    """What a results.json's total leaves out ("6 points not graded: skipped"), in words."""
    try:
        total = str(results["extra_data"].get("total", ""))
    except (KeyError, TypeError, AttributeError):
        return ""
    return total.partition(" (")[2].rstrip(")")


def _run_all(work, todo: list, jobs: int, outcomes: list, bar) -> None:
    """Run `work` on each item, `jobs` at a time. When interrupted, wait for the workers (their
    graders are dead by then, and they remove their temporary folders), then raise."""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = [pool.submit(work, item) for item in todo]
        for future in as_completed(futures):
            outcome = future.result()
            if outcome is not None:
                outcomes.append(outcome)
            if bar:
                bar.update()
    except BaseException:
        GRADERS.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _previous_results(folder: Path, stamp: str) -> dict | None:
    """The results of an earlier run of the same submission with the same grader, if any."""
    if previous_fingerprint(folder) != stamp:
        return None
    try:
        previous = json.loads((folder / "results.json").read_text())
        float(previous["score"]), float(previous["max_score"]), dict(previous["extra_data"])
        return previous
    except (OSError, ValueError, KeyError, TypeError):
        return None


def table(outcomes: list[Outcome], ignored: list[tuple[str, str]] | None = None,
          warnings: list[tuple[str, str]] | None = None) -> str:
    """The batch as a table: one row per submission, then what was ignored and why, then the
    warnings about the folders given (by default those `grade_many` put on its outcomes)."""
    ignored = getattr(outcomes, "ignored", []) if ignored is None else ignored
    warnings = getattr(outcomes, "warnings", []) if warnings is None else warnings
    names = [printable(path) for path, _ in ignored + warnings] + [printable(o.name)
                                                                  for o in outcomes]
    width = max([len(name) for name in names] + [10])
    lines = [f"{'submission':{width}}  {'assignment':12}  {'score':>13}  {'time':>7}  status"]
    for o in outcomes:
        score = f"{o.score:g} / {o.max_score:g}"
        note = "".join(f" ({text})" for text in (o.not_graded, o.note) if text)
        lines.append(f"{printable(o.name):{width}}  {o.assignment or '-':12}  {score:>13}  "
                     f"{o.seconds:6.1f}s  {o.status}{note}")
    for path, why in ignored:
        said = why if why.endswith("ignored") else f"ignored: {why}"     # said once
        lines.append(f"{printable(path):{width}}  {'-':12}  {'':>13}  {'':>7}  {said}")
    for path, what in warnings:
        lines.append(f"{printable(path):{width}}  {'-':12}  {'':>13}  {'':>7}  warning: {what}")
    return "\n".join(lines)
