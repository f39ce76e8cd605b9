"""Starting the grader of one submission: a process of its own (`python -m tfcourse.submission`),
with its job, its cgroup and a time limit; whatever that process does, a report comes back.

The runner, the Dask workers (cluster.py), the feedback service and nbgrader's preprocessor all
grade through `grade_in_child`. The runner resolves the submission's job once (submission/job.py)
and hands it over as one file; the grader is forked from its thread's fork server where there is
one (forkserver.py), else started as a fresh interpreter. A thread's fork server and its zygote
(which forks the students' processes) are its `Warm` processes, held by whoever owns the thread.
Every grader running is in `GRADERS`, so that a runner told to stop (`graders_end_on_signals`)
ends them all, and with them their students' processes. `grader_version` is what grading depends
on besides the submission.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tfcourse.course import Course, CourseError

from ..process import PARENT_OPTION
from ..sandbox import forked
from . import forkserver
from ..sandbox.limits import MEMORY, Cgroup, Limits, parents_of
from ..submission.failures import job_failure_report
from ..submission.files import Refused, split_submission
from ..submission.finding import Listing, assignment_by_names, list_submission, listed
from ..submission.job import Job
from ..submission.report import SubmissionReport

log = logging.getLogger(__name__)

GRADER_FILES = ("autograder", "source", "course.yaml")
ENGINE_FILES = ("submission", "batch", "sandbox", "student", "course.py", "notebook.py",
                "source.py", "i18n.py", "locale")


class Interrupted(BaseException):
    """The runner was told to stop (SIGTERM, SIGINT): its graders were ended."""

    def __init__(self, number: int):
        super().__init__(number)
        self.signal = number


def student_threads(course: Course) -> int:
    """Torch threads for the student's process (course.yaml's sandbox.threads)."""
    return course.sandbox.threads


# -- what grading depends on besides the submission ----------------------------------------------
ENGINE = Path(__file__).resolve().parents[1]          # the installed tfcourse package


def runtime_versions() -> str:
    """The Python and torch that grade, in words: a trained model's floats depend on both."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "none"
    return f"Python {platform.python_version()}, torch {torch}"


def grader_version(course: Course) -> str:
    """What grading depends on besides the submission: the course's graders, sources and
    course.yaml, the engine's code, and the Python and torch versions."""
    digest = hashlib.sha256()
    digest.update(runtime_versions().encode())
    folders = [("course", course.root, name) for name in GRADER_FILES]
    folders += [("engine", ENGINE, name) for name in ENGINE_FILES]
    for label, base, name in folders:
        root = base / name
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(f"{label}/{path.relative_to(base)}".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# -- the graders running now ----------------------------------------------------------------------
class _Graders:
    """The grader processes running now, so that a runner told to stop ends them all. Each grader
    leads a process group of its own: one kill ends it and what it started in that group."""

    def __init__(self):
        self._lock = threading.RLock()      # taken again by the signal handler, in the same thread
        self._running: set[subprocess.Popen] = set()
        self.stopping = False

    def start(self, command: list[str], **options) -> subprocess.Popen:
        with self._lock:
            if self.stopping:
                raise Interrupted(0)
            process = subprocess.Popen(command, start_new_session=True, **options)
            self._running.add(process)
            return process

    def fork(self, servers: forkserver.ForkServers, args: list[str], env: dict, cwd: Path,
             kept: dict[str, int] | None = None):
        """A grader forked by the thread's fork server (`servers`), or None where there is none
        (turned off, or it cannot start): then `start` runs a fresh interpreter. `kept`:
        descriptors it inherits, each by the option of its command line that names it."""
        if not forkserver.enabled():
            log.debug("fork server turned off (%s=0): a fresh interpreter grades",
                      forkserver.SWITCH)
            return None
        if self.stopping:
            raise Interrupted(0)
        try:
            process = servers.spawn(args, env, cwd, kept)
        except Exception as error:          # no server: a fresh interpreter grades instead
            log.warning("no fork server for the grader (%s: %s): a fresh interpreter grades "
                        "instead", type(error).__name__, error)
            return None
        with self._lock:
            self._running.add(process)
            if self.stopping:               # told to stop while it was forked
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
        return process

    def forget(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._running.discard(process)

    def stop_all(self) -> None:
        with self._lock:
            self.stopping = True
            for process in list(self._running):
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, signal.SIGKILL)


GRADERS = _Graders()


class Warm:
    """What a thread that starts graders keeps warm for them: its zygote (`zygotes`), which forks
    the students' processes with torch imported (sandbox/forked.py), and its fork server
    (`servers`), which forks the graders (forkserver.py). Made and closed by whoever owns the
    thread: a job slot of the feedback service; a runner's or a Dask worker's pool
    (forked.ZygotePool(Warm)) lends one to each grading side by side."""

    def __init__(self, zygotes: forked.Zygotes | None = None):
        self.zygotes = zygotes or forked.Zygotes()
        self.servers = forkserver.ForkServers()

    def __enter__(self) -> "Warm":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self.zygotes.close()
        self.servers.close()


_THREADS = threading.local()


def of_this_thread() -> Warm:
    """The warm processes of a thread whose caller owns none (nbgrader's autograde, Gradescope, a
    test): its zygote (forked.of_this_thread) and a fork server, for the thread's life, so that
    its gradings share them as a runner's do. Both end with the thread."""
    own = getattr(_THREADS, "warm", None)
    if own is None:
        own = _THREADS.warm = Warm(forked.of_this_thread())
    return own


@contextlib.contextmanager
def graders_end_on_signals():
    """While grading: SIGTERM, SIGINT or SIGHUP to the runner ends every grader at once (and, as
    they die, their students' processes), then raises Interrupted in the main thread, so that the
    temporary folders are removed as the stack unwinds."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number, frame):
        if not GRADERS.stopping:
            GRADERS.stop_all()
            raise Interrupted(number)

    GRADERS.stopping = False
    previous = {number: signal.signal(number, stop)
                for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


GRADER_TASKS = 256             # processes and threads of one grader (its students' have their own)
ZYGOTE_OPTION = "--zygote-fd"  # the grader's option that names the zygote's control socket


def grader_cgroup(course: Course) -> tuple[Cgroup | None, dict[str, str], int | None]:
    """A cgroup to hold a grader (and the keepers it starts, not its students' processes) to
    limits.grader_memory_mb, None where this machine lets us make none; with it, the folders the
    grader makes its students' cgroups in (beside this one, not inside), or, without one, the
    memory the grader holds itself to: (cgroup, parents, memory MB)."""
    limit = int(course.limit("grader_memory_mb"))
    held = Cgroup.create(Limits(limit, 0, GRADER_TASKS))
    if held is not None:
        return held, json.loads(parents_of(held)), None
    from ..sandbox.launch import why_no_cgroup
    log.info("no cgroup for the grader (%s): it holds itself to %d MB", why_no_cgroup(), limit)
    return None, {}, limit                 # the grader limits its own (__main__.limit_own_memory)


def _hold(held: Cgroup | None, pid: int) -> Cgroup | None:
    """Move the grader `pid` into `held`. What it allocated before stays where it was: the limit
    is on its growth (it grows from a fork server's pages, or from an interpreter's start)."""
    if held is None:
        return None
    try:
        for procs in held.procs_files:
            Path(procs).write_text(str(pid))
    except OSError as error:            # it ended already, or may not be moved: no limit
        log.info("grader %d not moved into its cgroup (%s): no cgroup limit", pid, error)
        held.remove()
        return None
    return held


def make_job(course: Course, submission: Path, assignment: str | None, threads: int,
             skip: list[str], hide: list[Path], within: Path | None, out: Path,
             sandboxes: Path, cgroup_parents: dict[str, str], memory_mb: int | None,
             found: Listing | None = None) -> Job:
    """The job of one submission, resolved here once: paths from / as given (a submission named
    "--skip=x.ipynb" is a path; no ".." is folded away), its notebooks as listed (`found`, the
    runner's listing, else listed now), and its assignment as given or as their names tell it.
    Where they cannot be listed (not inside `within`, unreadable), the job lists none, and the
    grader says why."""
    job = Job(submission=Path.cwd() / submission, course=course.root, out=out,
              within=None if within is None else Path.cwd() / within, assignment=assignment,
              threads=threads, skip=tuple(skip), hide=tuple(Path(p) for p in hide),
              memory_mb=memory_mb, sandbox_folder=sandboxes, cgroup_parents=cgroup_parents)
    try:
        notebooks, unfollowed = listed(course, _listing_of(submission, within, found))
        if assignment is None:
            assignment = assignment_by_names(course, {Path(path).name for path in notebooks})
    except (Refused, OSError, ValueError, CourseError) as error:
        # the grader reads the submission itself, and reports what it cannot read
        log.info("%s: not listed before grading (%s: %s); its grader lists it", submission,
                 type(error).__name__, error)
        return job
    return dataclasses.replace(job, assignment=assignment, notebooks=notebooks,
                               unfollowed=unfollowed)


def _listing_of(submission: Path, within: Path | None, found: Listing | None) -> Listing:
    """`found` when it is the listing of `submission` (checked by name: nothing is listed
    again), else the submission listed now (ValueError: not inside `within`)."""
    if found is None:
        return list_submission(submission, within)
    if (found.base, found.parts) != split_submission(submission, within):
        raise RuntimeError(f"the listing of {found.base.joinpath(*found.parts)} was handed "
                           f"over to grade {submission}")
    return found


def grade_in_child(course: Course, submission: Path, assignment: str | None, threads: int,
                   skip: list[str], hide: list[Path], within: Path | None = None,
                   warm: Warm | None = None, found: Listing | None = None
                   ) -> SubmissionReport:
    """Run the trusted grader in a child process; whatever it does, come back with a report.
    `within`: the instructor's folder the submission was found in (default: the one above it).
    `warm`: the calling thread's zygote and fork server; None: this thread's own
    (`of_this_thread`), for a caller that owns none. `found`: the submission as the caller listed
    it (the runner, which fingerprinted that listing); None: listed here, once."""
    warm = warm or of_this_thread()
    with tempfile.TemporaryDirectory(prefix="tfreport-", ignore_cleanup_errors=True) as scratch, \
            tempfile.TemporaryDirectory(prefix="tfgrade-", ignore_cleanup_errors=True) as sandboxes:
        os.chmod(sandboxes, 0o711)           # the sandbox user must reach its folder inside
        # The zygote, where this machine allows one: handed on where it fits the job.
        zygote = warm.zygotes.for_course(course, threads)
        held, parents, memory_mb = grader_cgroup(course)
        # The grader's sandboxes go in `sandboxes`, so that they are removed even when the grader
        # is killed before it can remove them itself.
        job = make_job(course, submission, assignment, threads, skip, hide, within,
                       Path(scratch) / "report.json", Path(sandboxes), parents, memory_mb, found)
        job = dataclasses.replace(job, zygote_key=forked.fitting(
            job.sandbox_config(course, {}), zygote))
        job.write(Path(scratch) / "job.json")
        kept = {ZYGOTE_OPTION: zygote.control.fileno()} if job.zygote_key else {}
        try:
            process = _start(course, Path(scratch) / "job.json", kept, warm.servers)
        except BaseException:
            if held is not None:
                held.remove()
            raise
        problem = _wait(course, process, _hold(held, process.pid), job.out)
        if problem is None:
            try:
                return SubmissionReport.from_dict(json.loads(job.out.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError, RecursionError) as error:
                problem = f"the grader's report could not be read ({error})"
    return job_failure_report(course, job, job.assignment, problem, Path(submission).name)


def _start(course: Course, job: Path, kept: dict[str, int], servers: forkserver.ForkServers):
    """The grader of `job`: forked from the thread's fork server (`servers`), else a fresh
    interpreter."""
    args = ["--job", str(job)]
    fresh = [*args, PARENT_OPTION, str(os.getpid())]
    for option, fd in kept.items():
        fresh += [option, str(fd)]
    environment = dict(os.environ)
    return GRADERS.fork(servers, args, environment, course.root, kept) or GRADERS.start(
        [sys.executable, "-m", "tfcourse.submission", *fresh], cwd=course.root,
        env=environment, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=list(kept.values()))


def _wait(course: Course, process, held: Cgroup | None, out: Path) -> str | None:
    """Wait for the grader `process` to end within its time; None when it ran to its end and
    wrote its report, else what went wrong."""
    # The notebook's backstop on waiting (its time is CPU time: submission/run.py), and twice its
    # CPU time again for the grader's own work
    limit = course.limit("submission_seconds") * (course.limit("wait_factor") + 2) + \
        course.limit("wait_floor_seconds") + 120
    problem = None
    try:
        _, stderr = process.communicate(timeout=limit)
        for line in (stderr or "").splitlines():    # its log (logs.py), and what it printed
            if line.strip():
                log.info("grader %d: %s", process.pid, line)
        # Only a grader that ran to its end wrote the report: after any other ending, a file
        # there may come from student code (as root in process mode it can kill the grader).
        if held is not None and held.exceeded() == MEMORY:
            problem = (f"the grader process used more than "
                       f"{course.limit('grader_memory_mb'):.0f} MB of memory "
                       f"(limits.grader_memory_mb) and was stopped")
        elif process.returncode != 0 or not out.exists():
            problem = (f"the grader process {_ending(process.returncode)}: "
                       f"{(stderr or '').strip()[-800:]}")
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        problem = f"the grader process did not finish within {limit:.0f} s"
    finally:
        if process.poll() is None:      # interrupted while waiting: it must not outlive us
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        GRADERS.forget(process)
        if held is not None:
            held.remove()
    return problem


def _ending(code: int) -> str:
    if code >= 0:
        return f"ended with status {code}" + ("" if code else " without writing its report")
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def grade_one(course: Course, submission: Path, *, assignment: str | None = None,
              skip: list[str] = (), threads: int | None = None, lang: str | None = None,
              hide: list[Path] = (), within: Path | None = None
              ) -> tuple[SubmissionReport, dict]:
    """Grade one submission in its own grader process: (report, Gradescope-style results)."""
    from .results import gradescope_json      # (feedback: not needed by every caller)

    threads = threads or student_threads(course)
    report = grade_in_child(course, submission, assignment, threads, list(skip), list(hide),
                            within)
    return report, gradescope_json(course, report, lang or course.language)
