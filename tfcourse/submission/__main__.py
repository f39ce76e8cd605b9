"""The trusted grader process: `python -m tfcourse.submission SUBMISSION --course DIR --out REPORT.json`.

Grades one submission and writes its report as JSON (atomically, readable by its owner only). The
student's sandbox is started before the graders are imported, so that both interpreters load torch
at the same time: a few seconds saved on every submission. Whatever goes wrong, a report is written,
and it lists every check of the assignment when the assignment is known.

Started by the runner, it dies with it: the runner's pid comes in TFCOURSE_GRADER_PARENT, and the
kernel sends this process SIGKILL when that process ends (PR_SET_PDEATHSIG), even by SIGKILL.
"""
import argparse
import ctypes
import errno
import json
import os
import signal
import sys
import traceback
from pathlib import Path

from tfcourse.course import load_course

from .reference import helper_files
from .report import Note, SubmissionReport
from ..batch.results import finite
from ..sandbox.forked import open_sandbox
from ..sandbox.launch import SandboxConfig, set_subreaper
from .files import KIND_WORDS, find_notebooks, kind_inside, split_submission

PR_SET_PDEATHSIG = 1
PARENT_VARIABLE = "TFCOURSE_GRADER_PARENT"      # set by the runner and the fork server
MEMORY_VARIABLE = "TFCOURSE_GRADER_MEMORY_MB"   # set by the runner where no cgroup holds this


class OverMemory(MemoryError):
    """This grader's memory limit (`limit_own_memory`) was reached."""


def limit_own_memory() -> int | None:
    """Where the runner could make no cgroup to hold this grader, its heap and private mappings
    (RLIMIT_DATA) may grow by limits.grader_memory_mb beyond what it holds now: an allocation past
    that fails with MemoryError. The limit in MB, or None where none was asked for."""
    import resource

    asked = os.environ.pop(MEMORY_VARIABLE, "")
    if not asked.isdigit():
        return None
    with open("/proc/self/status", encoding="ascii") as status:
        held = next((int(line.split()[1]) for line in status if line.startswith("VmData:")), 0)
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    soft = (held << 10) + (int(asked) << 20)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return int(asked)


def out_of_memory(error: BaseException | None) -> bool:
    """Whether `error`, or one it came from, is an allocation refused: a MemoryError, or the
    errors that a refused thread stack, mapping or tensor raise."""
    for _ in range(16):                              # its chain, not a cycle in it
        if error is None:
            return False
        if isinstance(error, MemoryError) or getattr(error, "errno", None) == errno.ENOMEM or \
                "can't start new thread" in str(error) or "can't allocate memory" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def lift_own_limit() -> None:
    """After the grading failed at its limit: the little needed to report that is allowed."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))


def over_memory(limit_mb: int | None) -> str:
    """What a grader that ran out of its memory reports."""
    return (f"the grader process used more than {limit_mb or 0:.0f} MB of memory "
            f"(limits.grader_memory_mb) and was stopped")


def die_with_parent() -> None:
    """SIGKILL for this process when the runner that started it ends. A runner that ended before
    this was set is seen in getppid (this process has another parent by then)."""
    parent = os.environ.pop(PARENT_VARIABLE, "")
    if not parent.isdigit():
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != int(parent):
        os._exit(1)


def refused_root(course, submission: Path, within: Path | None, assignment_id: str | None,
                 skip=()):
    """The report for a submission that is itself a link, a pipe or a device: never followed nor
    opened; every check of its assignment (when known) at 0, and a note that says why."""
    from ..batch.runner import zero_report

    base, parts = split_submission(submission, within)
    kind = kind_inside(base, parts)
    if kind in ("file", "folder", "missing"):
        return None
    if assignment_id is None:
        for assignment in course.assignments:
            if parts[-1] in assignment.notebooks:
                assignment_id = assignment.id
                break
    report = zero_report(course, assignment_id, submission.name,
                         "not graded: the notebook could not be read", skip=skip)
    report.notes.append(Note("{name} is {what}; only regular files and folders are graded",
                             {"name": parts[-1], "what": KIND_WORDS[kind]}, "error"))
    return report


def grade(options) -> dict:
    """Grade the submission of the command line; the report as plain data."""
    sandbox = None
    assignment_id = options.assignment
    try:
        course = load_course(options.course)
        refused = refused_root(course, options.submission, options.within, assignment_id,
                               options.skip)
        if refused is not None:
            return refused.to_dict()
        assignment_id, notebooks = find_notebooks(course, options.submission, assignment_id,
                                                  options.within, by_content=True)
        config = None
        if assignment_id is not None:
            config = SandboxConfig.from_course(course, helper_files(course, assignment_id),
                                               options.threads,
                                               [options.submission, *options.hide])
            sandbox = open_sandbox(config)
            sandbox.start()
        from .grade import grade_submission          # the graders load while the sandbox starts

        report = grade_submission(course, options.submission, assignment_id, notebooks, config,
                                  skip=frozenset(options.skip), prestarted=sandbox)
        return report.to_dict()
    except Exception as error:                       # a grader bug: say so, score nothing
        memory = getattr(options, "memory_mb", None) is not None and out_of_memory(error)
        if memory:                                   # over its own limit: what is left to do
            lift_own_limit()                         # needs a little
        if sandbox is not None:
            sandbox.close()
        return failed(options, assignment_id,
                      over_memory(options.memory_mb) if memory else traceback.format_exc())


def failed(options, assignment_id: str | None, problem: str) -> dict:
    """The report of a grader that failed: every check of the assignment (when known) at 0."""
    try:
        from ..batch.runner import failure_report

        course = load_course(options.course)
        report = failure_report(course, options.submission, assignment_id, problem,
                                options.within, options.skip)
    except Exception:                                # not even the course: say so, plainly
        report = SubmissionReport(assignment_id or "", options.submission.name, error=problem)
    return report.to_dict()


def write_report(path: Path, data: dict) -> None:
    """The report as JSON, all at once, readable by its owner only."""
    temporary = path.with_name(f".{path.name}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(finite(data), default=str, allow_nan=False))
    os.replace(temporary, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Grade one submission (trusted process).")
    parser.add_argument("submission", type=Path)
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--within", type=Path, help="the instructor's folder the submission was "
                        "found in: no link below it is followed (default: the one above it)")
    parser.add_argument("--assignment")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--hide", nargs="*", default=[], type=Path)
    options = parser.parse_args(argv)
    if argv is None:                   # a fresh interpreter: its command line names the paths
        from ..batch.runner import hide_command_line

        hide_command_line("tfcourse.submission")
    die_with_parent()                  # before any sandbox is started
    set_subreaper()
    options.memory_mb = limit_own_memory()
    data = grade(options)
    try:
        write_report(options.out, data)
    except MemoryError:                # over its limit while writing: the failure, written freely
        lift_own_limit()
        write_report(options.out, failed(options, data.get("assignment") or None,
                                         over_memory(options.memory_mb)))
    except (ValueError, RecursionError):   # something in it cannot be written
        write_report(options.out, failed(options, data.get("assignment") or None,
                                         traceback.format_exc()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
