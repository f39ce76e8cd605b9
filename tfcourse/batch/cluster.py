"""Grading on a Dask cluster: `tfcourse grade SUBMISSIONS --out DIR --scheduler ADDRESS`.

The client (the instructor's machine) does what runner.grade_many does everywhere else: it finds
the submissions, lists each once and fingerprints that listing (an unchanged one is not sent), and
writes every result into --out. In between, each submission travels as bytes: the client reads the
notebooks of that listing the grader would read (never through a link, within the notebook size
limits) and sends them with the shape of the submission's folder (its links, pipes and other
refused entries, as what they are). A worker
rebuilds that in a private temporary folder and grades it with the trusted grader in a child
process (`grade_in_child`: the student's code runs in that worker's sandbox, never in the worker);
it answers with the report as JSON, which the client checks before it builds the report from it.
Nothing a student wrote is unpickled: tasks carry bytes and plain values, answers are JSON text.

A worker grades only with the same course and engine as the client's: it needs the course folder
(its path in TFCOURSE_COURSE, else the worker's working directory or one above it), and refuses a
task whose grader fingerprint differs from its own; that submission's result says why. A worker
that dies loses nothing: the scheduler runs its tasks elsewhere. A submission whose grading ends
every worker it lands on (the scheduler's `allowed-failures`) ends with a result that says so.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import stat
import sys
import tempfile
import time
import traceback
import types
import typing
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from tfcourse.course import Course, CourseError, find_course_root, load_course

from ..sandbox.forked import ZygotePool
from ..submission.failures import failure_report, grader_failed
from ..submission.files import Refused, open_inside
from ..submission.finding import Listing, candidates_of, list_submission, match_notebooks
from ..submission.report import SubmissionReport
from .child import Warm, grade_in_child, grader_version, runtime_versions
from .survey import printable

log = logging.getLogger(__name__)

COURSE_VARIABLE = "TFCOURSE_COURSE"        # on a worker: the course folder
SPECIAL = {"link", "fifo", "socket", "device", "other"}      # entries that are never read
MOST_LINKS = 64                            # a notebook with more names than this is sent as 64
# The zygotes and fork servers of this worker's gradings (child.Warm): its tasks run in Dask's
# threads, which no code of ours owns, so each task borrows them; they end with the worker process.
WORKER_WARM = ZygotePool(Warm)
BYTES_IN_FLIGHT = 1 << 30                  # notebooks' bytes sent and not graded yet, at most


class ClusterError(Exception):
    """The cluster cannot be used at all (no `distributed`, no scheduler at the address)."""


# -- the client's side: a submission as bytes -----------------------------------------------------
def _entry(base: Path, parts: tuple[str, ...], below: tuple[str, ...], kind: str, read: bool,
           limit: int) -> dict:
    """One entry of a submission: `below` its root, at base/parts. A notebook the grader reads
    travels with its bytes; one it refuses unread (other names on disk, too large) with what
    decides that (its number of names, its size); anything else as what it is."""
    entry = {"path": [os.fsencode(name) for name in below], "kind": kind}
    if kind != "file" or not read:
        return entry
    try:
        fd = open_inside(base, parts)
    except (Refused, OSError):         # replaced since it was listed: not followed there either
        return {**entry, "kind": "link"}
    try:
        info = os.fstat(fd)
        if info.st_nlink > 1:
            return {**entry, "links": min(info.st_nlink, MOST_LINKS)}
        if info.st_size > limit:
            return {**entry, "size": info.st_size}
        data = bytearray()
        while len(data) <= limit and (chunk := os.read(fd, 1 << 20)):
            data += chunk                                 # it may have grown since the fstat
        return {**entry, "size": len(data)} if len(data) > limit else \
            {**entry, "data": bytes(data)}
    finally:
        os.close(fd)


def pack(course: Course, path: Path, within: Path | None, assignment: str | None,
         found: Listing | None = None) -> dict:
    """What a worker needs to grade the submission at `path` as it would be graded here: the names
    from the instructor's folder to it, what it is, and its entries (the notebooks and links the
    grader looks at), as listed in `found` (None: listed now). Raises OSError when it cannot be
    read at all."""
    limit = int(max(course.limit("notebook_file_mb"), course.limit("notebook_mb")) * 1048576)
    found = found or list_submission(path, within)
    base, parts, kind = found.base, found.parts, found.kind
    entries = []
    if kind == "folder":
        candidates, links = candidates_of(course, found)        # OSError: not readable at all
        if isinstance(found.unreadable, Refused):  # swapped for a link since it was looked at
            kind = "link"
        else:
            _, notebooks = match_notebooks(course, base, parts, candidates, links, assignment)
            read = {file.parts for file in notebooks.values() if file is not None}
            for item in found.entries:                          # its notebooks and links
                full = (*parts, *item.parts)
                entries.append(_entry(base, full, item.parts, item.kind, full in read, limit))
    if kind not in ("folder", "missing"):
        entries.append(_entry(base, parts, (), kind, True, limit))
    return {"parts": [os.fsencode(name) for name in parts], "kind": kind, "entries": entries}


# -- the worker's side ----------------------------------------------------------------------------
def _name(part) -> str:
    if not isinstance(part, bytes) or part in (b"", b".", b"..") or b"/" in part or b"\0" in part:
        raise ValueError(f"not a file name: {part!r}")
    return os.fsdecode(part)


def unpack(packed: dict, folder: Path) -> tuple[Path, Path]:
    """Rebuild a packed submission in the private, empty `folder`: (its path, the folder it is
    graded within)."""
    within, others = folder / "submission", folder / "other-names"
    within.mkdir()
    others.mkdir()
    root = within.joinpath(*map(_name, packed["parts"]))
    root.parent.mkdir(parents=True, exist_ok=True)
    if packed["kind"] == "folder":
        root.mkdir()
    elif packed["kind"] not in {"missing", "file", *SPECIAL}:
        raise ValueError(f"not a kind of submission: {packed['kind']!r}")
    for entry in packed["entries"]:
        path = root.joinpath(*map(_name, entry["path"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        _make(path, entry, others)
    return root, within


def _make(path: Path, entry: dict, others: Path) -> None:
    """One entry, as it was on the client: a file (its bytes, or as large, or with as many names
    on disk), or what is never read (a link that leads nowhere, a pipe, a socket, a device)."""
    kind = entry["kind"]
    if kind == "file":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        with os.fdopen(fd, "wb") as handle:
            if "size" in entry:
                handle.truncate(int(entry["size"]))           # sparse: it is never read
            else:
                handle.write(bytes(entry.get("data", b"")))
        for _ in range(min(int(entry.get("links", 1)), MOST_LINKS) - 1):
            os.link(path, others / uuid.uuid4().hex)
    elif kind == "link":
        os.symlink("not-followed", path)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "device" and os.geteuid() == 0:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))     # as /dev/null: never opened
    elif kind in SPECIAL:
        os.mknod(path, 0o600 | stat.S_IFSOCK)       # what an unprivileged worker can make of it
    else:
        raise ValueError(f"not a kind of entry: {kind!r}")


def worker_course() -> Course:
    """This worker's course: TFCOURSE_COURSE, else the course folder at or above its working
    directory."""
    root = os.environ.get(COURSE_VARIABLE)
    course = load_course(Path(root) if root else find_course_root())
    if not (course.root / "autograder").is_dir():
        raise CourseError(f"{course.root} has no autograder/ folder: grading needs the "
                          f"instructor's course folder")
    return course


@lru_cache(maxsize=None)
def _scratch() -> Path:
    """The folder of this worker process's submissions (each in a folder of its own inside),
    hidden from every student's sandbox: in the worker's local directory, which the next worker
    on this machine removes should this one be killed."""
    try:
        from distributed import get_worker
        local = get_worker().local_directory
    except (ImportError, ValueError):               # not in a Dask worker
        log.debug("not in a Dask worker: submissions unpacked in the system's temporary folder")
        local = None
    return Path(tempfile.mkdtemp(prefix="tfcluster-", dir=local))


@lru_cache(maxsize=4)
def _isolation(root: Path):
    from ..sandbox.launch import SandboxConfig, choose_isolation

    return choose_isolation(SandboxConfig.from_course(load_course(root), {}, 1, []))


def isolation_lines(root: Path) -> tuple[str, ...]:
    """How this machine isolates student code, when weaker than bubblewrap or refused."""
    isolation = _isolation(root)
    return tuple(line for line in (isolation.refusal, isolation.warning) if line)


def without_bubblewrap(root: Path, host: str) -> str:
    """Why this worker must not grade ("" when it may): only bubblewrap cuts student code off
    the network, and on a cluster a plain process could reach the scheduler, which runs any code
    it is sent on every worker (and the client unpickles what comes back)."""
    isolation = _isolation(root)
    if isolation.mode == "bwrap":
        return ""
    why = isolation.refusal or isolation.warning or f"isolation {isolation.mode}"
    return (f"worker {host} cannot isolate student code with bubblewrap ({why}); on a cluster "
            f"student code must not reach the network, where the Dask scheduler is: install "
            f"bubblewrap on the workers and allow user namespaces (docs/instructor-guide.md, "
            f"Grading on a cluster)")


def refusal(why: str) -> str:
    """A task's answer when this worker cannot grade for the client: why, and this worker's Dask
    address, so that the client sends it no more."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):           # not in a Dask worker (a test calls it)
        address = ""
    return json.dumps({"refused": why, "address": address})


def grade_task(payload: dict) -> str:
    """A Dask task: grade one packed submission on this worker. JSON text: {"report": ...,
    "seconds", "worker", "isolation"}, or {"refused": why, "address"} when this worker cannot
    grade for this client (no course folder, or not the same one, or no bubblewrap)."""
    started, host = time.monotonic(), socket.gethostname()
    try:
        course = worker_course()
        version = grader_version(course)
    except (CourseError, OSError) as error:
        return refusal(f"worker {host}: {error} (set {COURSE_VARIABLE} to the course folder "
                       f"where the workers start)")
    if version != payload["version"]:
        here, theirs = runtime_versions(), payload.get("runtime", "")
        versions = (f"; it has {here}, the client {theirs}" if theirs and theirs != here else "")
        return refusal(
            f"worker {host} grades with another course or tfcourse ({course.root}: grader "
            f"fingerprint {version}, not the client's {payload['version']}{versions}): give "
            f"every worker the same course folder, tfcourse, Python and torch as this machine")
    why = without_bubblewrap(course.root, host)
    if why:
        return refusal(why)
    with tempfile.TemporaryDirectory(dir=_scratch(), ignore_cleanup_errors=True) as folder:
        packed = payload["submission"]
        try:
            submission, within = unpack(packed, Path(folder))
            with WORKER_WARM.lend() as warm:
                report = grade_in_child(course, submission, payload["assignment"],
                                        int(payload["threads"]), list(payload["skip"]),
                                        [_scratch()], within, warm)
        except Exception:               # never let one submission fail the task
            log.warning("grading a submission failed in this worker: it is reported as a "
                        "grader failure", exc_info=True)
            name = os.fsdecode(packed["parts"][-1]) if packed.get("parts") else "submission"
            report = failure_report(course, Path(folder, name), payload["assignment"],
                                    traceback.format_exc())
    return json.dumps({"report": report.to_dict(), "seconds": time.monotonic() - started,
                       "worker": host, "isolation": list(isolation_lines(course.root))},
                      default=str)


TASK = grade_task              # what the client sends (tests put another function here)


def dask_setup(worker) -> None:
    """`dask worker ADDRESS --preload tfcourse.batch.cluster`: the worker says in its log, as it
    starts, the course folder it grades with and how it isolates student code, or why it cannot
    grade (then every submission sent to it fails with that reason)."""
    try:
        course = worker_course()
    except (CourseError, OSError) as error:
        print(f"tfcourse worker: cannot grade: {error} (set {COURSE_VARIABLE} to the course "
              f"folder)", file=sys.stderr)
        return
    for line in isolation_lines(course.root):
        print(f"tfcourse worker: {line}", file=sys.stderr)
    print(f"tfcourse worker: grading with {course.root}", file=sys.stderr)


# -- checking what comes back ---------------------------------------------------------------------
def _check(value, kind, where: str) -> None:
    """That `value` (parsed JSON) fits the type `kind` of report.py's dataclasses."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: not an object")
        hints, fields = typing.get_type_hints(kind), dataclasses.fields(kind)
        unknown = set(value) - {field.name for field in fields}
        if unknown:
            raise ValueError(f"{where}: unknown fields {sorted(map(str, unknown))}")
        for field in fields:
            if field.name in value:
                _check(value[field.name], hints[field.name], f"{where}.{field.name}")
            elif field.default is dataclasses.MISSING and \
                    field.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}: no {field.name}")
    elif origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where}: not a list")
        for index, item in enumerate(value):
            _check(item, typing.get_args(kind)[0], f"{where}[{index}]")
    elif origin in (typing.Union, types.UnionType):
        for option in typing.get_args(kind):
            try:
                return _check(value, option, where)
            except ValueError:
                pass
        raise ValueError(f"{where}: not {kind}")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: not a number")
    elif kind is type(None):
        if value is not None:
            raise ValueError(f"{where}: not null")
    elif kind in (str, bool, dict):
        if not isinstance(value, kind):
            raise ValueError(f"{where}: not {kind.__name__}")
    else:
        raise TypeError(f"{where}: {kind} is not a type a report holds")


class WorkerRefused(Exception):
    """A worker would not grade for this client; the message says why, `address` which."""

    def __init__(self, why: str, address: str = ""):
        super().__init__(why)
        self.address = address


def refusal_of(future) -> WorkerRefused | None:
    """A finished task's refusal, naming the worker that refused, if it was one."""
    try:
        read_answer(future.result())
    except WorkerRefused as refused:
        return refused if refused.address else None
    except Exception as error:          # a failed task or an unreadable answer: no refusal
        log.debug("task %s: no refusal in its answer (%s: %s)", getattr(future, "key", "?"),
                  type(error).__name__, error)
    return None


def read_answer(text) -> tuple[SubmissionReport, float, list[str]]:
    """(report, seconds, the worker's isolation lines) from a task's JSON answer. Raises
    WorkerRefused for a refusal, ValueError for anything that is not a report."""
    if not isinstance(text, str):
        raise ValueError(f"the answer is a {type(text).__name__}, not JSON text")
    answer = json.loads(text)
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    if "refused" in answer:
        raise WorkerRefused(str(answer["refused"]), str(answer.get("address", "")))
    _check(answer.get("report"), SubmissionReport, "report")
    seconds, lines = answer.get("seconds", 0.0), answer.get("isolation", [])
    _check(seconds, float, "seconds")
    _check(lines, list[str], "isolation")
    host = str(answer.get("worker", "?"))
    return SubmissionReport.from_dict(answer["report"]), float(seconds), \
        [f"worker {host}: {line}" for line in lines]


# -- the client ----------------------------------------------------------------------------------
@dataclass
class Batch:
    """What grade_many hands over: the submissions to grade, as its plan has them (runner.Planned:
    each listed once, fingerprinted, and sent as listed), how to grade them, and `record(entry,
    report, seconds) -> Outcome`, which writes a result as for local grading."""
    course: Course
    todo: list
    version: str
    assignment: str | None
    threads: int
    skip: list[str]
    record: Callable


def require_distributed() -> None:
    try:
        import distributed  # noqa: F401 (only whether it is installed)
    except ImportError:
        raise ClusterError("--scheduler needs Dask's distributed: pip install "
                           "'tfcourse[cluster]'") from None


def connect(address: str):
    """A Dask client of the scheduler at `address` (tcp://host:8786), or named in the scheduler
    file at that path."""
    require_distributed()
    from distributed import Client

    where = {"scheduler_file": address} if os.path.isfile(address) else {"address": address}
    try:
        return Client(**where, timeout=30, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise ClusterError(f"no Dask scheduler could be reached at {address}: {error}") from None


def _window(client) -> int:
    """Submissions sent ahead of the workers: enough to keep them all busy and let an adaptive
    cluster grow, without the whole class in memory at once."""
    return max(32, 2 * sum(client.nthreads().values()))


def result_of(batch: Batch, entry, future, say: Callable[[str], None]
              ) -> tuple[SubmissionReport, float]:
    """The report of a finished task; a failure's, saying why, when it brought no report."""
    from distributed import KilledWorker

    item = entry.item
    try:
        report, seconds, lines = read_answer(future.result())
        for line in lines:
            say(line)
        return report, seconds
    except KilledWorker as error:
        last = getattr(error.last_worker, "address", error.last_worker)
        problem = (f"grading this submission ended each of the {error.allowed_failures + 1} Dask "
                   f"workers it was sent to (the last: {last}), so it was not graded")
    except WorkerRefused as error:
        problem = f"not graded: {error}"
        say(str(error))
    except Exception as error:     # the task failed (after its retries), or its answer is not JSON
        problem = f"grading on the cluster failed: {type(error).__name__}: {error}"
    return grader_failed(batch.course, item.path.name, entry.graded, problem), 0.0


def run_on_cluster(address: str, batch: Batch, outcomes: list, bar) -> None:
    """Grade `batch.todo` on the workers of the Dask scheduler at `address`, appending each
    outcome to `outcomes` as it comes. When interrupted, cancel every task sent, then raise."""
    if not batch.todo:
        return
    dispatch = _Dispatch(batch, connect(address), outcomes, bar)
    try:
        dispatch.send()
        for future in dispatch.pending:
            entry, payload = dispatch.running.pop(future), dispatch.payloads.pop(future)
            dispatch.sizes.pop(future, None)
            refused = refusal_of(future)
            if refused:                 # that worker gets no more tasks; this one goes elsewhere
                dispatch.refusing.add(refused.address)
                workers = dispatch.others()
                if workers:
                    dispatch.say(str(refused))
                    dispatch.submit(entry, payload, workers)
                    continue
            dispatch.send()
            dispatch.done(entry, *result_of(batch, entry, future, dispatch.say))
    except BaseException:
        dispatch.client.cancel(list(dispatch.running))
        raise
    finally:
        dispatch.client.close()


class _Dispatch:
    """The tasks of one batch on a cluster: those waiting, those sent (with their payloads, to
    send one again elsewhere, and their sizes), and the workers that refused."""

    def __init__(self, batch: Batch, client, outcomes: list, bar):
        from distributed import as_completed

        self.batch, self.client, self.outcomes, self.bar = batch, client, outcomes, bar
        self.runtime, self.said = runtime_versions(), set()
        self.waiting, self.pending = iter(batch.todo), as_completed(loop=client.loop)
        self.running: dict = {}
        self.sizes: dict = {}                   # bytes of notebooks in each task sent
        self.payloads: dict = {}                # each task's payload, to send it again elsewhere
        self.refusing: set[str] = set()         # workers that refused: sent no more tasks

    def say(self, line: str) -> None:
        if line not in self.said:
            self.said.add(line)
            print(f"tfcourse grade: {printable(line)}", file=sys.stderr)   # a worker's words

    def done(self, entry, report: SubmissionReport, seconds: float) -> None:
        self.outcomes.append(self.batch.record(entry, report, seconds))
        if self.bar:
            self.bar.update()

    def others(self) -> list[str] | None:
        """The workers tasks may go to: any while none refused, else those that did not."""
        if not self.refusing:
            return None
        return [w for w in self.client.scheduler_info()["workers"] if w not in self.refusing]

    def submit(self, entry, payload: dict, workers: list[str] | None) -> None:
        where = {} if workers is None else {"workers": workers, "allow_other_workers": False}
        future = self.client.submit(TASK, payload, key=f"tfcourse-grade-{entry.stamp}-"
                                    f"{uuid.uuid4().hex[:8]}", pure=False, retries=1, **where)
        self.running[future], self.payloads[future] = entry, payload
        self.sizes[future] = sum(len(e.get("data", b"")) for e in
                                 payload["submission"].get("entries", []))
        self.pending.add(future)

    def send(self) -> None:
        batch, window = self.batch, _window(self.client)
        while len(self.running) < window and (not self.running or sum(self.sizes.values()) <
                                              BYTES_IN_FLIGHT) and (entry := next(self.waiting,
                                                                                  None)):
            item = entry.item
            try:
                packed = pack(batch.course, item.path, item.within, batch.assignment,
                              entry.listing)
            except (OSError, ValueError) as error:      # as its grader would fail to read it
                self.done(entry, grader_failed(batch.course, item.path.name, entry.graded,
                                               f"the submission could not be read: {error}"),
                          0.0)
                continue
            payload = {"submission": packed, "version": batch.version, "runtime": self.runtime,
                       "threads": batch.threads, "assignment": batch.assignment,
                       "skip": list(batch.skip)}
            self.submit(entry, payload, self.others())
