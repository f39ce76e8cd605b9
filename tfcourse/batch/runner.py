"""Grading many submissions: one trusted grader process each, N at a time, nothing lost.

Each submission is graded by `python -m tfcourse.submission` in its own process, with a time limit;
whatever happens to that process, the submission ends with a results.json and a feedback page, that
lists every check of its assignment. Results carry a fingerprint of the submission and of the
grader, so a second run grades only what is new or changed. The input folders are only ever read,
and never through a link (see submission/files.py). Stopping the runner (SIGTERM, SIGINT, or
SIGKILL) ends its graders, and with them the students' processes; their temporary folders go.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse.course import Course, CourseError
from tfcourse.source import groups_by_notebook

from ..submission.__main__ import MEMORY_VARIABLE, PARENT_VARIABLE   # PARENT: the runner's pid, for its
                                                          # graders: each dies with it
from ..submission.report import Note, NotebookReport, SubmissionReport, TestResult
from .results import private_folder, write_results
from ..sandbox import forked
from ..sandbox.launch import SANDBOX_FOLDER
from ..sandbox.limits import MEMORY, Cgroup, Limits, parents_of
from ..sandbox.limits import PARENT_VARIABLE as CGROUP_PARENT
from ..submission.files import (KIND_WORDS, Entry, Refused, find_notebooks, is_notebook_name,
                                kind_inside, listing, open_inside, root_kind, split_submission)

GRADER_FILES = ("autograder", "source", "course.yaml")
ENGINE_FILES = ("submission", "batch", "sandbox", "student", "course.py", "notebook.py",
                "source.py", "i18n.py", "locale")
HASH_LIMIT = 256 << 20          # a notebook larger than this is fingerprinted by size and time,
HASH_BUDGET = 1 << 30           # and so are those beyond this much read for one submission


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


class Interrupted(BaseException):
    """The runner was told to stop (SIGTERM, SIGINT): its graders were ended."""

    def __init__(self, number: int):
        super().__init__(number)
        self.signal = number


def available_cores() -> int:
    """The cores this container may use. Gradescope (and Kubernetes) cap CPU with a cgroup quota,
    while os.cpu_count() reports the whole host: more torch threads than cores only slows down."""
    cores = len(os.sched_getaffinity(0))
    quotas = [("/sys/fs/cgroup/cpu.max", None),                    # cgroup v2: "quota period"
              ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")]
    for quota_file, period_file in quotas:
        try:
            fields = Path(quota_file).read_text().split()
            if period_file:
                fields.append(Path(period_file).read_text().strip())
            quota, period = fields[0], fields[1]
        except (OSError, IndexError):
            continue
        if quota not in ("max", "-1"):
            return max(1, min(cores, int(quota) // int(period)))
        return cores
    return cores


def student_threads(course: Course) -> int:
    """Torch threads for the student's process (course.yaml's sandbox.threads)."""
    return course.sandbox.threads


def course_notebooks(course: Course) -> set[str]:
    return {name for assignment in course.assignments for name in assignment.notebooks}


def printable(text: str) -> str:
    """A name as it can be shown and written as UTF-8: undecodable bytes become U+FFFD, control
    characters (a newline in a folder's name) '?'."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in text)


# -- what was given: submissions, and what is not one ---------------------------------------------
@dataclass
class Found:
    """One submission: its name (its results folder below --out), its path, the instructor's
    folder it was found in (no link is followed below it), and a warning about it."""
    name: str
    path: Path
    within: Path | None = None
    note: str = ""


@dataclass
class Survey:
    """What was given: the submissions; what is not one, as (path, why); and warnings about the
    folders given, as (path, what)."""
    submissions: list[Found] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _stem(name: str) -> str:
    return name[:-len(".ipynb")] if is_notebook_name(name) and name != ".ipynb" else name


def _name_of(path: Path) -> str:
    """A command-line path's name: `..` and `.` are named after the folder they stand for."""
    name = Path(os.path.abspath(path)).name or "submission"
    return name if root_kind(path) == "folder" else _stem(name)


def _refused_note(kind: str) -> str:
    return (f"{KIND_WORDS[kind]}: not followed; graded 0 with a note saying so" if kind != "file"
            else "")


class _Rule:
    """The rule of `survey`, for one course; `exclude` (the results folder) is never a
    submission."""

    def __init__(self, course: Course, exclude: Path | None, out: Survey):
        self.known = course_notebooks(course)
        self.assignments = {a.id for a in course.assignments}
        self.exclude = _identity(exclude) if exclude else None
        self.out = out

    def holds_course_notebook(self, base: Path, parts: tuple[str, ...]) -> bool:
        """Whether a folder holds a notebook named as the course's, in it or one folder down."""
        try:
            entries = listing(base, parts, depth=2)
        except (Refused, OSError):
            return False
        return any(e.kind != "folder" and e.name in self.known for e in entries)

    def command_line(self, path: Path) -> None:
        """A path given on the command line: one submission, or a class folder."""
        kind = root_kind(path)
        if kind == "missing":
            self.out.submissions.append(Found(_name_of(path), path, None, "does not exist"))
            return
        if kind != "folder":
            self.out.submissions.append(Found(_name_of(path), path, None, _refused_note(kind)))
            return
        try:
            entries = [e for e in listing(path, (), depth=1) if not e.name.startswith(".")]
        except OSError as error:                # not ours to read: its grader says so
            self.out.submissions.append(Found(_name_of(path), path, None, str(error)))
            return
        course_named = [e.name for e in entries if e.kind != "folder" and e.name in self.known]
        neighbours = [e.name for e in entries if e.kind != "folder"
                      and is_notebook_name(e.name) and e.name not in self.known]
        neighbours += [e.name + "/" for e in entries if e.kind == "folder"
                       and self.holds_course_notebook(path, (e.name,))]
        if course_named and not neighbours:
            self.out.submissions.append(Found(_name_of(path), path))
            return
        if course_named:
            self.out.warnings.append((str(path), (
                f"holds {', '.join(course_named)} beside other submissions "
                f"({', '.join(neighbours[:5])}{', ...' if len(neighbours) > 5 else ''}): graded "
                f"as a class folder, each entry a submission of its own")))
        if not entries:
            self.out.warnings.append((str(path), "an empty folder: nothing to grade"))
        for entry in entries:
            self.class_entry(path, entry)

    def class_entry(self, folder: Path, entry: Entry) -> None:
        """An entry of a class folder: a notebook file or a folder is one student's."""
        path = folder / entry.name
        if self.exclude and _identity(path) == self.exclude:
            return
        if entry.kind == "folder":
            self.student_folder(folder, entry.name)
        elif is_notebook_name(entry.name):
            self.out.submissions.append(Found(_stem(entry.name), path, folder,
                                              _refused_note(entry.kind)))
        elif entry.kind == "link" and os.path.isdir(path):    # a stat: nothing is read there
            self.out.submissions.append(Found(entry.name, path, folder, _refused_note("link")))
        else:
            self.out.ignored.append((str(path), f"{KIND_WORDS[entry.kind]}, not a notebook "
                                                 f"nor a folder: ignored"))

    def student_folder(self, folder: Path, name: str) -> None:
        """One student's folder; in nbgrader's layout (submitted/<student>/<assignment>/), each
        of its folders named as an assignment is a submission."""
        try:
            inner = [e for e in listing(folder, (name,), depth=1) if not e.name.startswith(".")]
        except (Refused, OSError) as error:     # swapped for a link since, or not ours to read
            self.out.submissions.append(Found(name, folder / name, folder, str(error)))
            return
        if any(e.kind != "folder" and is_notebook_name(e.name) for e in inner):
            self.out.submissions.append(Found(name, folder / name, folder))
            return
        assignments = [e for e in inner if e.kind == "folder" and e.name in self.assignments]
        if not assignments:
            self.out.submissions.append(Found(name, folder / name, folder))
            return
        for entry in inner:
            if entry in assignments:
                self.out.submissions.append(Found(f"{name}/{entry.name}",
                                                  folder / name / entry.name, folder))
            else:
                self.out.ignored.append((str(folder / name / entry.name),
                                         "beside nbgrader's assignment folders, not one of "
                                         "them: ignored"))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
        return info.st_dev, info.st_ino
    except OSError:
        return None


def survey(course: Course, paths: list[Path], exclude: Path | None = None) -> Survey:
    """The submissions among `paths` by the rule in `expand`'s docstring, with what does not fit
    it: what was ignored, and warnings about the folders given."""
    found = Survey()
    rule = _Rule(course, exclude, found)
    for path in paths:
        rule.command_line(Path(path))
    names = _unique([(item.name, item.path) for item in found.submissions])
    for item, (name, _) in zip(found.submissions, names):
        item.name = name
    return found


def expand(course: Course, paths: list[Path], exclude: Path | None = None
           ) -> list[tuple[str, Path]]:
    """(name, path) of each submission among `paths` (the command line), by this rule (also in
    docs/instructor-guide.md, "Collect"):

    - A path that is not a folder is one submission (a notebook; a link or a pipe is one too, and
      its grader refuses it with a note). A folder is one submission when it holds a notebook
      named as one of the course's and no other submission: no other notebook, no folder holding
      a course notebook (in it or one folder down).
    - Any other folder is a class folder: each of its entries is one student's. A notebook file
      is one submission (named without .ipynb); a folder is one submission, unless it holds no
      notebook and has folders named as the course's assignments (nbgrader's submitted/<student>/
      <assignment>/): then each of those is one ("student/assignment"). A link to a folder is a
      submission its grader refuses. Anything else is ignored, and `survey` says why.
    - Hidden entries (.ipynb_checkpoints, .DS_Store) and `exclude` (the results folder) are left
      out. Links are never followed, not even one given on the command line: only the folders
      above a path given are the instructor's to choose.

    So a stray notebook beside the students' folders is one more submission, never the whole class;
    a student's folder named like a notebook is a folder, so a student's.
    """
    return [(item.name, item.path) for item in survey(course, paths, exclude).submissions]


def _safe(name: str) -> str:
    """A name usable as a folder below --out: no empty, `.` or `..` part."""
    parts = [part if part not in ("", ".", "..") else "_" for part in name.split("/")]
    return "/".join(parts)


def _unique(found: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Names for the results folders, one each: two submissions with the same name
    (solutions/01-attention, release/01-attention; alice/ and alice.ipynb) get their parent
    folder's name in front, then the whole file name, then a number."""
    counts: dict[str, int] = {}
    for name, _ in found:
        counts[_safe(name)] = counts.get(_safe(name), 0) + 1
    taken: set[str] = set()
    unique = []
    for name, path in found:
        name = _safe(name)
        absolute = Path(os.path.abspath(path))
        options = [name] if counts[name] == 1 else []
        options += [_safe(f"{absolute.parent.name}/{name}"),
                    _safe(f"{absolute.parent.name}/{absolute.name}")]
        options += [f"{options[-1]}~{number}" for number in range(2, len(found) + 2)]
        chosen = next(option for option in options if option not in taken)
        taken.add(chosen)
        unique.append((chosen, path))
    return unique


# -- fingerprints ---------------------------------------------------------------------------------
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


def graded_as(course: Course, item, assignment: str | None) -> str:
    """The assignment a submission is graded as: the one given, else the one its notebooks'
    names tell (as the grader will find it), however the command was spelt."""
    if assignment:
        return assignment
    try:
        found, _ = find_notebooks(course, item.path, None, item.within)
    except (Refused, OSError, ValueError):
        return ""
    return found or ""


def _hash_file(digest, base: Path, parts: tuple[str, ...], budget: list[int]) -> None:
    """Add a notebook file's bytes to `digest`, read as the grader reads it (no link followed);
    past the limits, its size, time and inode stand in for them. `budget`: bytes left to read."""
    try:
        fd = open_inside(base, parts)
    except (Refused, OSError) as error:
        digest.update(f"unreadable {error}".encode("utf-8", "replace"))
        return
    try:
        info = os.fstat(fd)
        digest.update(f"{info.st_size} {info.st_nlink}".encode())
        if info.st_size > min(HASH_LIMIT, budget[0]):
            digest.update(f"{info.st_mtime_ns} {info.st_ino}".encode())
            return
        budget[0] -= info.st_size
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)


def fingerprint(submission: Path, version: str, options: str, within: Path | None = None) -> str:
    """What grading depends on: the grader, the options, and each notebook of the submission (its
    path, what it is, its bytes), found and read as the grader finds and reads them."""
    digest = hashlib.sha256(f"{version}|{options}".encode())
    base, parts = split_submission(submission, within)
    kind, budget = kind_inside(base, parts), [HASH_BUDGET]
    digest.update(kind.encode())
    if kind == "file":
        _hash_file(digest, base, parts, budget)
    elif kind == "folder":
        try:
            entries = listing(base, parts)
        except (Refused, OSError) as error:
            entries = []
            digest.update(f"unreadable {error}".encode("utf-8", "replace"))
        for entry in entries:
            if entry.kind != "folder" and is_notebook_name(entry.name):
                digest.update("/".join(entry.parts).encode("utf-8", "surrogateescape") + b"\0")
                digest.update(entry.kind.encode())
                if entry.kind == "file":
                    _hash_file(digest, base, (*parts, *entry.parts), budget)
    return digest.hexdigest()[:24]


def _previous_fingerprint(folder: Path) -> str | None:
    try:
        return json.loads((folder / "results.json").read_text())["extra_data"]["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- one grader process ---------------------------------------------------------------------------
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

    def fork(self, args: list[str], env: dict, cwd: Path, kept: dict[str, int] | None = None):
        """A grader forked by this thread's fork server (forkserver.py), or None where there is
        none (turned off, or it cannot start): then `start` runs a fresh interpreter."""
        from . import forkserver

        if not forkserver.enabled():
            return None
        if self.stopping:
            raise Interrupted(0)
        try:
            process = forkserver.spawn(args, env, cwd, kept)
        except Exception:                   # no server: a fresh interpreter grades instead
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


def grader_cgroup(course: Course, environment: dict) -> Cgroup | None:
    """A cgroup to hold a grader (and the keepers it starts, not its students' processes) to
    limits.grader_memory_mb, None where this machine lets us make none; `environment` then tells
    the grader to make its students' cgroups beside this one, not inside, or, without one, to
    hold its own memory to that limit."""
    held = Cgroup.create(Limits(int(course.limit("grader_memory_mb")), 0, GRADER_TASKS))
    if held is not None:
        environment[CGROUP_PARENT] = parents_of(held)
    else:                               # the grader limits its own (__main__.limit_own_memory)
        environment[MEMORY_VARIABLE] = str(int(course.limit("grader_memory_mb")))
    return held


def _hold(held: Cgroup | None, pid: int) -> Cgroup | None:
    """Move the grader `pid` into `held`. What it allocated before stays where it was: the limit
    is on its growth (it grows from a fork server's pages, or from an interpreter's start)."""
    if held is None:
        return None
    try:
        for procs in held.procs_files:
            Path(procs).write_text(str(pid))
    except OSError:                     # it ended already, or may not be moved: no limit
        held.remove()
        return None
    return held


def grade_in_child(course: Course, submission: Path, assignment: str | None, threads: int,
                   skip: list[str], hide: list[Path], within: Path | None = None
                   ) -> SubmissionReport:
    """Run the trusted grader in a child process; whatever it does, come back with a report.
    `within`: the instructor's folder the submission was found in (default: the one above it)."""
    limit = course.limit("submission_seconds") * 3 + 120
    problem = None
    with tempfile.TemporaryDirectory(prefix="tfreport-", ignore_cleanup_errors=True) as scratch, \
            tempfile.TemporaryDirectory(prefix="tfgrade-", ignore_cleanup_errors=True) as sandboxes:
        os.chmod(sandboxes, 0o711)           # the sandbox user must reach its folder inside
        out = Path(scratch) / "report.json"
        # from /, as given (a submission named "--skip=x.ipynb" is a path, not an option; no
        # ".." is folded away)
        args = [str(Path.cwd() / submission), "--course", str(course.root), "--out", str(out),
                "--threads", str(threads)]
        if within is not None:
            args += ["--within", str(Path.cwd() / within)]
        if assignment:
            args += ["--assignment", assignment]
        if skip:
            args += ["--skip", *skip]
        if hide:
            args += ["--hide", *map(str, hide)]
        # The grader's sandboxes go in `sandboxes`, so that they are removed even when the grader
        # is killed before it can remove them itself.
        environment = {**os.environ, SANDBOX_FOLDER: sandboxes, PARENT_VARIABLE: str(os.getpid())}
        # This thread's zygote, which forks the students' processes with torch imported
        # (sandbox/forked.py), where this machine allows one.
        zygote, kept = forked.zygote_for(course, threads), {}
        environment.pop(forked.ZYGOTE_VARIABLE, None)
        environment.pop(CGROUP_PARENT, None)
        environment.pop(MEMORY_VARIABLE, None)
        held = grader_cgroup(course, environment)
        if zygote is not None:
            kept = {forked.ZYGOTE_VARIABLE: zygote.control.fileno()}
            environment[forked.ZYGOTE_VARIABLE] = f"{zygote.control.fileno()}:{zygote.key}"
        try:
            process = GRADERS.fork(args, environment, course.root, kept) or GRADERS.start(
                [sys.executable, "-m", "tfcourse.submission", *args], cwd=course.root,
                env=environment, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=list(kept.values()))
        except BaseException:
            if held is not None:
                held.remove()
            raise
        held = _hold(held, process.pid)
        try:
            _, stderr = process.communicate(timeout=limit)
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
        if problem is None:
            try:
                return SubmissionReport.from_dict(json.loads(out.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError, RecursionError) as error:
                problem = f"the grader's report could not be read ({error})"
    return failure_report(course, submission, assignment, problem, within, skip)


def _ending(code: int) -> str:
    if code >= 0:
        return f"ended with status {code}" + ("" if code else " without writing its report")
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


# -- reports with every check ---------------------------------------------------------------------
def zero_report(course: Course, assignment_id: str | None, name: str, template: str,
                params: dict | None = None, error: str | None = None, skip=()
                ) -> SubmissionReport:
    """A report that scores nothing and lists every check of the assignment (so that its maximum
    is the assignment's, less the checks in `skip`, not graded) with `template` as the reason; no
    checks when the assignment is None."""
    report = SubmissionReport(assignment_id or "", name, error=error)
    if assignment_id:
        for notebook, groups in groups_by_notebook(course, assignment_id).items():
            report.notebooks.append(NotebookReport(notebook, tests=[
                TestResult(test_id, 0.0, points, "not graded: skipped", graded=False)
                if test_id in skip else TestResult(test_id, 0.0, points, template,
                                                   dict(params or {}))
                for group in groups for test_id, points in zip(group.test_ids(),
                                                               group.tests.values())]))
    return report


def _assignment_of(course: Course, submission: Path, within: Path | None) -> str | None:
    """The assignment told from the names of a submission's notebooks (no file is read)."""
    try:
        return find_notebooks(course, submission, None, within)[0]
    except (Refused, OSError, ValueError, CourseError):
        return None


def failure_report(course: Course, submission: Path, assignment: str | None, problem: str,
                   within: Path | None = None, skip=()) -> SubmissionReport:
    """The report of a submission whose grader failed: every check of its assignment, at 0
    (those in `skip`: not graded)."""
    known = assignment or _assignment_of(course, submission, within)
    report = zero_report(course, known, submission.name, "not graded: {reason}",
                         {"reason": "the grader failed"}, error=problem, skip=skip)
    report.notes.append(Note("the grader failed on this submission, so nothing was scored; "
                             "run tfcourse grade again, and report it if it persists", {}, "error"))
    if known is None:
        expected = ", ".join(n for a in course.assignments for n in a.notebooks)
        report.notes.append(Note("its assignment could not be told from the names of its "
                                 "notebooks (expected one of: {expected}), so its checks are not "
                                 "listed", {"expected": expected}, "error"))
    return report


# -- many submissions -----------------------------------------------------------------------------
def grade_one(course: Course, submission: Path, *, assignment: str | None = None,
              skip: list[str] = (), threads: int | None = None, lang: str | None = None,
              hide: list[Path] = (), within: Path | None = None
              ) -> tuple[SubmissionReport, dict]:
    """Grade one submission in its own grader process: (report, Gradescope-style results)."""
    from .results import gradescope_json

    threads = threads or student_threads(course)
    report = grade_in_child(course, submission, assignment, threads, list(skip), list(hide),
                            within)
    return report, gradescope_json(course, report, lang or course.language)


def _write(course: Course, report: SubmissionReport, item: Found, folder: Path, lang: str,
           stamp: str) -> tuple[dict | None, str]:
    """Write a submission's results; when its report cannot be rendered, a failure's instead.
    (results or None, status)."""
    try:
        # no fingerprint when the grader failed, so that the next run grades it again
        return (write_results(course, report, folder, lang, "" if report.error else stamp),
                "failed" if report.error else "graded" if report.assignment else
                "not graded: no assignment")
    except Exception:                                  # never let one submission stop the batch
        failure = failure_report(course, item.path, report.assignment or None,
                                 traceback.format_exc(), item.within)
        failure.submission = report.submission
        try:
            return write_results(course, failure, folder, lang), "failed"
        except Exception:
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
            f"{printable(str(readable[0]))}{more} can be read by user {course.sandbox.user!r}, who runs every student's code here (sandbox."
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


def hide_command_line(shown: str = "tfcourse") -> bool:
    """Overwrite this process's command line as /proc/PID/cmdline shows it to every user (the
    sandbox user too, in process mode) with `shown`: the class folder's path is not there to be
    read. Python keeps its own copy (sys.argv). Whether it could."""
    try:
        after = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(after[45]), int(after[46])          # arg_start, arg_end (fields 48, 49)
    except (OSError, IndexError, ValueError):
        return False
    text = shown.encode()[:max(end - start - 1, 0)]
    if end <= start:
        return False
    import ctypes

    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, text, len(text))
    return True


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
    """Grade every submission among `paths` (see `survey`) into `out`/<name>/: `jobs` at a time
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
    version = grader_version(course)
    threads = threads or student_threads(course)
    hide = [out.resolve(), *[Path(p).resolve() for p in paths]]
    outcomes = Outcomes(ignored=found.ignored, warnings=found.warnings)
    todo = []
    for item in found.submissions:
        folder = out / item.name
        # the submission's content, the graders and the course decide "unchanged", not how the
        # command was spelt (with or without --assignment)
        options = json.dumps([graded_as(course, item, assignment), sorted(skip), lang])
        stamp = fingerprint(item.path, version, options, item.within)
        previous = None if force else _previous_results(folder, stamp)
        if previous:
            outcomes.append(Outcome(item.name, folder, "unchanged", previous["score"],
                                    previous["max_score"], 0.0,
                                    previous["extra_data"].get("assignment", ""), item.note,
                                    _not_graded(previous)))
        else:
            todo.append((item, folder, stamp))

    def record(entry, report: SubmissionReport, seconds: float) -> Outcome:
        """Write a submission's results (the same here and for a cluster's report)."""
        item, folder, stamp = entry
        report.submission = printable(item.name)
        results, status = _write(course, report, item, folder, lang, stamp)
        return Outcome(item.name, folder, status, results["score"] if results else 0.0,
                       results["max_score"] if results else 0.0, round(seconds, 1),
                       report.assignment, item.note, _not_graded(results))

    def work(entry):
        item, folder, stamp = entry
        if GRADERS.stopping:
            return None
        started = time.monotonic()
        try:
            report = grade_in_child(course, item.path, assignment, threads, list(skip), hide,
                                    item.within)
        except Exception:                    # never let one submission stop the batch
            report = failure_report(course, item.path, assignment, traceback.format_exc(),
                                    item.within)
        if GRADERS.stopping:                 # ended by the stop: not a result
            return None
        return record(entry, report, time.monotonic() - started)

    bar = None
    if progress and todo:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc="grading", unit="submission", file=sys.stderr)
    try:
        with graders_end_on_signals():
            if scheduler is None:
                _run_all(work, todo, jobs, outcomes, bar)
            else:
                from .cluster import Batch, run_on_cluster
                run_on_cluster(scheduler, Batch(course, todo, version, assignment, threads,
                                                list(skip), record), outcomes, bar)
    finally:
        forked.close_all()                   # the zygotes of this batch's threads
        if bar:
            bar.close()
    order = {item.name: index for index, item in enumerate(found.submissions)}
    outcomes.sort(key=lambda o: order.get(o.name, 0))
    return outcomes


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
    if _previous_fingerprint(folder) != stamp:
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
