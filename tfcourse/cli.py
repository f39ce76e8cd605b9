"""The `tfcourse` command.

    tfcourse build [--check] [--lang es]      release/, solutions/ and helper modules from source/
    tfcourse grade SUBMISSION... [--out DIR]  grade submissions with the hidden graders
    tfcourse check NOTEBOOK                   a student's own run of the visible checks
    tfcourse gradescope ASSIGNMENT --out F    a Gradescope autograder bundle
    tfcourse feedback-service --exchange DIR  on a hub: grade each submission as it arrives
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from .course import CourseError, find_course_root, load_course


def _course(options):
    return load_course(options.course or find_course_root())


def _graded_course(options):
    """The course, for a command that grades: its hidden graders are in its autograder/ folder."""
    course = _course(options)
    if not (course.root / "autograder").is_dir():
        raise CourseError(f"{course.root} has no autograder/ folder: grading needs the "
                          f"instructor's course folder")
    return course


def cmd_build(options) -> int:
    from .build.release import BuildError, build, check

    course = _course(options)
    if options.check:
        stale = check(course, options.lang)
        for line in stale:
            print(f"stale: {line}")
        print("everything built from source/ is up to date" if not stale else
              f"{len(stale)} stale item(s): run `tfcourse build` and commit the result")
        return 1 if stale else 0
    try:
        build(course, options.lang, execute=not options.no_execute)
    except BuildError as error:
        print(f"build failed:\n{error}", file=sys.stderr)
        return 1
    print("built release/ and solutions/")
    return 0


def cmd_grade(options) -> int:
    course = _graded_course(options)
    from .grading.cluster import ClusterError, require_distributed
    from .grading.runner import (Interrupted, SideBySideRefused, available_cores, grade_many,
                                 hide_command_line, table)

    hide_command_line("tfcourse grade")       # no path of the class for student code to read

    jobs = options.jobs or available_cores()
    lang = options.lang or course.language
    if options.scheduler and options.jobs:
        print("tfcourse grade: --jobs is not used with --scheduler: each Dask worker grades as "
              "many submissions at once as it has threads", file=sys.stderr)
    try:
        if options.scheduler:
            require_distributed()
        outcomes = grade_many(course, options.submissions, options.out, jobs=jobs, lang=lang,
                              force=options.force, assignment=options.assignment,
                              skip=options.skip or [], progress=not options.no_progress,
                              scheduler=options.scheduler)
    except Interrupted as stop:
        name = signal.Signals(stop.signal).name if stop.signal else "a signal"
        ended = ("its tasks on the cluster were cancelled" if options.scheduler else
                 "every grader was ended")
        print(f"tfcourse grade: stopped by {name}; {ended}. Results written before are kept; "
              f"run the same command again to grade the rest.", file=sys.stderr)
        return 128 + (stop.signal or signal.SIGTERM)
    except (ClusterError, SideBySideRefused) as error:
        print(f"tfcourse grade: {error}", file=sys.stderr)
        return 2
    print(table(outcomes))
    print(f"results in {options.out}/<submission>/results.json and feedback.md")
    return 0


def cmd_check(options) -> int:
    from .student.run import run_visible_checks

    return run_visible_checks(options.notebook, timeout=options.timeout)


def cmd_gradescope(options) -> int:
    course = _graded_course(options)
    from .adapters.gradescope import build_bundle

    path = build_bundle(course, options.assignment, options.out, lang=options.lang)
    print(f"wrote {path}")
    return 0


def cmd_feedback_service(options) -> int:
    course = _graded_course(options)
    from .hub.service import main

    return main(course, options)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tfcourse", description=__doc__.split("\n\n")[0])
    top.add_argument("--course", type=Path, help="the course folder (default: the nearest folder "
                                                  "with course.yaml)")
    commands = top.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="generate release/, solutions/ and helper modules")
    build.add_argument("--check", action="store_true",
                       help="change nothing; fail when anything committed is stale")
    build.add_argument("--lang", help="the edition's language (default: course.yaml's)")
    build.add_argument("--no-execute", action="store_true",
                       help="do not run the solution notebooks (faster; no outputs or plots)")
    build.set_defaults(run=cmd_build)

    grade = commands.add_parser("grade", help="grade submissions")
    grade.add_argument("submissions", nargs="+", type=Path,
                       help="a student's folder, a notebook, or a folder of submissions")
    grade.add_argument("--out", type=Path, default=Path("graded"), help="results folder")
    grade.add_argument("--jobs", type=int,
                       help="submissions at once (default: one per core this process may use)")
    grade.add_argument("--lang", help="language of the feedback (default: course.yaml's)")
    grade.add_argument("--force", action="store_true", help="grade again what is unchanged")
    grade.add_argument("--assignment", help="the assignment (default: from notebook names)")
    grade.add_argument("--skip", nargs="*", help="test ids to skip, e.g. trained.accuracy")
    grade.add_argument("--no-progress", action="store_true", help="no progress bar")
    grade.add_argument("--scheduler", metavar="ADDRESS",
                       help="grade on the workers of this Dask scheduler (tcp://host:8786, or "
                            "its scheduler file) rather than here; needs tfcourse[cluster]")
    grade.set_defaults(run=cmd_grade)

    check = commands.add_parser("check", help="run a notebook's visible checks")
    check.add_argument("notebook", type=Path)
    check.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    check.set_defaults(run=cmd_check)

    bundle = commands.add_parser("gradescope", help="build a Gradescope autograder bundle")
    bundle.add_argument("assignment")
    bundle.add_argument("--out", type=Path, default=Path("autograder.zip"))
    bundle.add_argument("--lang", help="language of the feedback (default: course.yaml's)")
    bundle.set_defaults(run=cmd_gradescope)

    service = commands.add_parser(
        "feedback-service", help="on a JupyterHub: grade each submission as it arrives, and "
                                 "show each student their results (docs/jupyterhub.md)")
    service.add_argument("--course", type=Path, default=argparse.SUPPRESS,
                         help="the course folder (as before the command)")
    from .hub.service import add_arguments
    add_arguments(service)
    service.set_defaults(run=cmd_feedback_service)
    return top


def main(argv=None) -> int:
    options = parser().parse_args(argv)
    try:
        return options.run(options)
    except CourseError as error:
        print(f"tfcourse: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
