"""The trusted grader process: `python -m tfcourse.submission --job JOB.json`, or by hand
`python -m tfcourse.submission SUBMISSION --course DIR --out REPORT.json`.

Grades one submission and writes its report as JSON (atomically, readable by its owner only). Its
job (job.py) says what to grade and how: the runner resolves it and writes it, with the
submission's notebooks as found, which the grader matches without looking for them again; from
the command line, the options make one, which lists none (the grader finds them then). The
student's sandbox is started before the graders are imported, so that both interpreters load
torch at the same time: a few seconds saved on every submission.
Whatever goes wrong, a report is written, and it lists every check of the assignment when the
assignment is known.

Started by the runner, it dies with it: the runner's pid comes as `--parent PID`, and the kernel
sends this process SIGKILL when that process ends (PR_SET_PDEATHSIG), even by SIGKILL. Forked by
the runner's fork server, it dies with the server, which sees to it before the grader starts.
"""
import argparse
import errno
import json
import os
import sys
import traceback
from pathlib import Path

from tfcourse import logs
from tfcourse.course import load_course

from ..process import PARENT_OPTION, die_with_parent, hide_command_line, set_subreaper
from ..sandbox.forked import HandedZygote, open_sandbox
from .failures import job_failure_report, refused_root
from .finding import job_notebooks, listed_root_kind
from .job import Job, JobError
from .reference import helper_files
from .report import SubmissionReport, finite


class OverMemory(MemoryError):
    """This grader's memory limit (`limit_own_memory`) was reached."""


def limit_own_memory(asked: int | None) -> int | None:
    """Where the runner could make no cgroup to hold this grader, its heap and private mappings
    (RLIMIT_DATA) may grow by limits.grader_memory_mb (`asked`, from the job) beyond what it holds
    now: an allocation past that fails with MemoryError. The limit in MB, or None where none was
    asked for."""
    import resource

    if asked is None:
        return None
    with open("/proc/self/status", encoding="ascii") as status:
        held = next((int(line.split()[1]) for line in status if line.startswith("VmData:")), 0)
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    soft = (held << 10) + (asked << 20)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return asked


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


def sandbox_config(course, job: Job, assignment_id: str, zygote_fd: int | None):
    """The settings of the job's sandboxes (Job.sandbox_config), with the runner's zygote as it
    hands it on: its control socket, where the job says it fits them (job.zygote_key)."""
    config = job.sandbox_config(course, helper_files(course, assignment_id))
    if zygote_fd is not None and job.zygote_key is not None:
        config.zygote = HandedZygote(zygote_fd)
    return config


def grade(job: Job, memory_mb: int | None, zygote_fd: int | None) -> dict:
    """Grade the job's submission; the report as plain data."""
    sandbox = None
    assignment_id = job.assignment
    try:
        course = load_course(job.course)
        refused = refused_root(course, job.submission, job.within, assignment_id, job.skip,
                               listed_root_kind(job))
        if refused is not None:
            return refused.to_dict()
        read: dict[str, str | None] = {}            # what telling it by content read
        assignment_id, notebooks = job_notebooks(course, job, by_content=True, read=read)
        config = None
        if assignment_id is not None:
            config = sandbox_config(course, job, assignment_id, zygote_fd)
            sandbox = open_sandbox(config)
            sandbox.start()
        from .grade import grade_submission          # the graders load while the sandbox starts

        report = grade_submission(course, job.submission, assignment_id, notebooks, config,
                                  skip=frozenset(job.skip), prestarted=sandbox)
        report.read = read
        return report.to_dict()
    except Exception as error:                       # a grader bug: say so, score nothing
        memory = memory_mb is not None and out_of_memory(error)
        if memory:                                   # over its own limit: what is left to do
            lift_own_limit()                         # needs a little
        if sandbox is not None:
            sandbox.close()
        return failed(job, assignment_id,
                      over_memory(memory_mb) if memory else traceback.format_exc())


def failed(job: Job, assignment_id: str | None, problem: str) -> dict:
    """The report of a grader that failed: every check of the assignment (when known) at 0."""
    try:
        course = load_course(job.course)
        report = job_failure_report(course, job, assignment_id, problem)
    except Exception:                                # not even the course: say so, plainly
        report = SubmissionReport(assignment_id or "", job.submission.name, error=problem)
    return report.to_dict()


def write_report(path: Path, data: dict) -> None:
    """The report as JSON, all at once, readable by its owner only."""
    temporary = path.with_name(f".{path.name}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(finite(data), default=str, allow_nan=False))
    os.replace(temporary, path)


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Grade one submission (trusted process).")
    parser.add_argument("submission", type=Path, nargs="?")
    parser.add_argument("--job", type=Path, help="the job the runner resolved (job.py)")
    parser.add_argument("--course", type=Path)
    parser.add_argument("--out", type=Path, help="where to write the JSON report")
    parser.add_argument("--within", type=Path, help="the instructor's folder the submission was "
                        "found in: no link below it is followed (default: the one above it)")
    parser.add_argument("--assignment")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--hide", nargs="*", default=[], type=Path)
    parser.add_argument(PARENT_OPTION, type=int, dest="parent",
                        help="the pid of the process this one dies with")
    parser.add_argument("--zygote-fd", type=int, help="the zygote's control socket (used where "
                        "the job says it fits its sandboxes: zygote_key)")
    options = parser.parse_args(argv)
    if options.job is None and (options.submission is None or options.course is None or
                                options.out is None):
        parser.error("give --job, or a submission with --course and --out")
    return options


def job_of(options) -> Job:
    """The job given (--job), or the one the command line's options make."""
    if options.job is not None:
        return Job.read(options.job)
    absolute = Path.cwd()
    return Job(submission=absolute / options.submission, course=absolute / options.course,
               out=absolute / options.out,
               within=None if options.within is None else absolute / options.within,
               assignment=options.assignment, threads=options.threads, skip=tuple(options.skip),
               hide=tuple(absolute / path for path in options.hide))


def main(argv=None) -> int:
    options = parse(argv)
    logs.configure_from_environment()
    if argv is None:                   # a fresh interpreter: its command line names the paths
        hide_command_line("tfcourse.submission")
    die_with_parent(options.parent)    # before any sandbox is started
    set_subreaper()
    try:
        job = job_of(options)
    except JobError as error:          # no report can be written where no job says where
        print(f"tfcourse.submission: {error}", file=sys.stderr)
        return 2
    memory_mb = limit_own_memory(job.memory_mb)
    data = grade(job, memory_mb, options.zygote_fd)
    try:
        write_report(job.out, data)
    except MemoryError:                # over its limit while writing: the failure, written freely
        lift_own_limit()
        write_report(job.out, failed(job, data.get("assignment") or None,
                                     over_memory(memory_mb)))
    except (ValueError, RecursionError):   # something in it cannot be written
        write_report(job.out, failed(job, data.get("assignment") or None,
                                     traceback.format_exc()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
