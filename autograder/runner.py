"""Grading many submissions: one trusted grader process each, N at a time, nothing lost.

Each submission is graded by `python -m autograder.grade` in its own process, with a time limit;
whatever happens to that process, the submission ends with a results.json and a feedback page.
Results carry a fingerprint of the submission and of the grader, so a second run grades only what
is new or changed. The input folders are only ever read.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tfcourse.course import Course

from .report import Note, SubmissionReport
from .results import write_results
from .sandbox.launch import SANDBOX_FOLDER

GRADER_FILES = ("autograder", "source", "course.yaml")


@dataclass
class Outcome:
    name: str
    folder: Path
    status: str                 # graded, unchanged, failed
    score: float = 0.0
    max_score: float = 0.0
    seconds: float = 0.0
    assignment: str = ""


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
    return max(1, int(course.sandbox.get("threads", 1)))


def course_notebooks(course: Course) -> set[str]:
    return {name for assignment in course.assignments for name in assignment.notebooks}


def expand(course: Course, paths: list[Path], exclude: Path | None = None
           ) -> list[tuple[str, Path]]:
    """(name, path) of each submission: a notebook, a folder holding the course's notebooks, or a
    folder of such submissions (one or two levels down, as in nbgrader's submitted/ folder). A
    student's folder with no notebook in it is a submission too, so that it gets told so.
    `exclude` (the results folder) is never taken for a submission."""
    known = course_notebooks(course)
    exclude = exclude.resolve() if exclude else None

    def holds_notebooks(folder: Path) -> bool:
        return any((folder / name).is_file() for name in known) or any(
            p.suffix == ".ipynb" for p in folder.iterdir() if p.is_file())

    found: list[tuple[str, Path]] = []
    for path in paths:
        if path.is_file() or not path.exists():
            found.append((path.stem if path.suffix == ".ipynb" else path.name, path))
        elif holds_notebooks(path):
            found.append((path.name, path))
        else:
            for child in sorted(path.iterdir()):
                if child.name.startswith(".") or child.resolve() == exclude:
                    continue
                if child.is_file() and child.suffix == ".ipynb":
                    found.append((child.stem, child))
                elif child.is_dir() and holds_notebooks(child):
                    found.append((child.name, child))
                elif child.is_dir():
                    inner = [(f"{child.name}/{grandchild.name}", grandchild)
                             for grandchild in sorted(child.iterdir())
                             if grandchild.is_dir() and holds_notebooks(grandchild)]
                    found += inner or [(child.name, child)]
    return _unique(found)


def _unique(found: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Two submissions with the same name (solutions/01-attention, release/01-attention) get
    their parent folder's name in front, so that neither's results overwrite the other's."""
    names = [name for name, _ in found]
    unique = []
    for name, path in found:
        if names.count(name) > 1:
            name = f"{path.resolve().parent.name}/{name}"
        unique.append((name, path))
    return unique


def grader_version(course: Course) -> str:
    digest = hashlib.sha256()
    for name in GRADER_FILES:
        root = course.root / name
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(course.root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(submission: Path, version: str, options: str) -> str:
    digest = hashlib.sha256(f"{version}|{options}".encode())
    files = sorted(submission.rglob("*.ipynb")) if submission.is_dir() else [submission]
    for path in files:
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            digest.update(str(path.name).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def _previous_fingerprint(folder: Path) -> str | None:
    try:
        return json.loads((folder / "results.json").read_text())["extra_data"]["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def grade_in_child(course: Course, submission: Path, assignment: str | None, threads: int,
                      skip: list[str], hide: list[Path]) -> SubmissionReport:
    """Run the trusted grader in a child process; whatever it does, come back with a report."""
    limit = course.limit("submission_seconds") * 3 + 120
    with tempfile.TemporaryDirectory(prefix="tfreport-") as scratch, \
            tempfile.TemporaryDirectory(prefix="tfgrade-") as sandboxes:
        os.chmod(sandboxes, 0o711)           # the sandbox user must reach its folder inside
        out = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "autograder", str(submission),
                   "--course", str(course.root), "--out", str(out), "--threads", str(threads)]
        if assignment:
            command += ["--assignment", assignment]
        if skip:
            command += ["--skip", *skip]
        if hide:
            command += ["--hide", *map(str, hide)]
        # The grader's sandboxes go in `sandboxes`, so that they are removed even when the grader
        # is killed before it can remove them itself.
        environment = {**os.environ, SANDBOX_FOLDER: sandboxes, "PYTHONPATH": os.pathsep.join(
            [str(course.root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        process = subprocess.Popen(command, cwd=course.root, env=environment, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
        try:
            _, stderr = process.communicate(timeout=limit)
            # Only a grader that ran to its end wrote the report: after any other ending, a file
            # there may come from student code (as root in process mode it can kill the grader).
            problem = None if process.returncode == 0 and out.exists() else (
                f"the grader process {_ending(process.returncode)}: "
                f"{(stderr or '').strip()[-800:]}")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            problem = f"the grader process did not finish within {limit:.0f} s"
        if problem is None:
            try:
                return SubmissionReport.from_dict(json.loads(out.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError) as error:
                problem = f"the grader's report could not be read ({error})"
    report = SubmissionReport(assignment or "", submission.name, error=problem)
    report.notes.append(Note("the grader failed on this submission, so nothing was scored; "
                             "run tfcourse grade again, and report it if it persists", {}, "error"))
    return report


def _ending(code: int) -> str:
    if code >= 0:
        return f"ended with status {code}" + ("" if code else " without writing its report")
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def grade_one(course: Course, submission: Path, *, assignment: str | None = None,
              skip: list[str] = (), threads: int | None = None, lang: str | None = None,
              hide: list[Path] = ()) -> tuple[SubmissionReport, dict]:
    """Grade one submission in its own grader process: (report, Gradescope-style results)."""
    from .results import gradescope_json

    threads = threads or student_threads(course)
    report = grade_in_child(course, submission, assignment, threads, list(skip), list(hide))
    return report, gradescope_json(course, report, lang or course.language)


def grade_many(course: Course, paths: list[Path], out: Path, *, jobs: int, lang: str,
               force: bool = False, assignment: str | None = None, skip: list[str] = (),
               progress: bool = True, threads: int | None = None) -> list[Outcome]:
    submissions = expand(course, paths, exclude=out)
    version = grader_version(course)
    options = json.dumps([assignment, sorted(skip), lang])
    threads = threads or student_threads(course)
    out.mkdir(parents=True, exist_ok=True)    # so that it is hidden from the first sandbox on
    hide = [out.resolve(), *[p.resolve() for p in paths]]
    outcomes: list[Outcome] = []
    todo = []
    for name, path in submissions:
        folder = out / name
        stamp = fingerprint(path, version, options) if path.exists() else ""
        if not force and stamp and _previous_fingerprint(folder) == stamp:
            previous = json.loads((folder / "results.json").read_text())
            outcomes.append(Outcome(name, folder, "unchanged", previous["score"],
                                    previous["max_score"], 0.0,
                                    previous["extra_data"].get("assignment", "")))
        else:
            todo.append((name, path, folder, stamp))

    def work(item):
        name, path, folder, stamp = item
        started = time.monotonic()
        try:
            report = grade_in_child(course, path, assignment, threads, list(skip), hide)
        except Exception:                    # never let one submission stop the batch
            report = SubmissionReport(assignment or "", name, error=traceback.format_exc())
        report.submission = name
        # no fingerprint when the grader failed, so that the next run grades it again
        results = write_results(course, report, folder, lang, "" if report.error else stamp)
        status = "failed" if report.error else "graded"
        return Outcome(name, folder, status, results["score"], results["max_score"],
                       round(time.monotonic() - started, 1), report.assignment)

    bar = None
    if progress and todo:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc="grading", unit="submission", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(work, item) for item in todo]
        for future in as_completed(futures):
            outcomes.append(future.result())
            if bar:
                bar.update()
    if bar:
        bar.close()
    order = {name: index for index, (name, _) in enumerate(submissions)}
    return sorted(outcomes, key=lambda o: order.get(o.name, 0))


def table(outcomes: list[Outcome]) -> str:
    width = max([len(o.name) for o in outcomes] + [10])
    lines = [f"{'submission':{width}}  {'assignment':12}  {'score':>13}  {'time':>7}  status"]
    for o in outcomes:
        score = f"{o.score:g} / {o.max_score:g}"
        lines.append(f"{o.name:{width}}  {o.assignment or '-':12}  {score:>13}  "
                     f"{o.seconds:6.1f}s  {o.status}")
    return "\n".join(lines)
