"""The `tfcourse` command.

    tfcourse build [--check] [--lang es] [--out DIR]   release/, solutions/ and helper modules from
                                              source/; another language's edition goes to
                                              editions/<lang>/ (or DIR), never over release/
    tfcourse grade SUBMISSION... [--out DIR]  grade submissions with the hidden graders
    tfcourse check NOTEBOOK                   a student's own run of the visible checks
    tfcourse gradescope ASSIGNMENT --out F    a Gradescope autograder bundle
    tfcourse feedback-service --exchange DIR  on a hub: grade each submission as it arrives
    tfcourse report GRADED --out DIR          a class report: scores, checks, messages, cost
    tfcourse similarity SUBMITTED --out DIR   pairs of submissions whose code is alike
    tfcourse config [SETTING] [--markdown]    what a course.yaml setting means, and its default
    tfcourse doctor                           whether other accounts (students) can run this
                                              environment: its Python and packages
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from . import __version__

# Imports are made where they are needed: `tfcourse check`, its refusal inside a check's kernel and
# `--help` must answer at once, not after loading the grader, the sandbox and the hub (seconds).


def _course(options):
    from .course import find_course_root, load_course

    return load_course(options.course or find_course_root())


def _graded_course(options):
    """The course, for a command that grades: its hidden graders are in its autograder/ folder."""
    from .course import CourseError

    course = _course(options)
    if not (course.root / "autograder").is_dir():
        raise CourseError(f"{course.root} has no autograder/ folder: grading needs the "
                          f"instructor's course folder")
    return course


def cmd_build(options) -> int:
    from .build.release import BuildError, build, check, edition_dirs

    course = _course(options)
    if options.check:
        stale = check(course, options.lang, options.out)
        for line in stale:
            print(f"stale: {line}")
        print("everything built from source/ is up to date" if not stale else
              f"{len(stale)} stale item(s): run `tfcourse build` and commit the result")
        return 1 if stale else 0
    try:
        build(course, options.lang, execute=not options.no_execute, out=options.out,
              log=lambda line: print(line, flush=True))
    except BuildError as error:
        print(f"build failed:\n{error}", file=sys.stderr)
        return 1
    release, solutions = edition_dirs(course, options.lang or course.language, options.out)
    print(f"built {release} and {solutions}")
    return 0


def cmd_grade(options) -> int:
    course = _graded_course(options)
    from .batch.cluster import ClusterError, require_distributed
    from .batch.runner import (Interrupted, SideBySideRefused, available_cores, grade_many,
                               hide_command_line, table)

    hide_command_line("tfcourse grade")       # no path of the class for student code to read

    jobs = options.jobs or available_cores()
    lang = options.lang or course.language
    _warn_about_stale_points(course)
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
    from .batch.graded import GRADES, layouts

    for layout in layouts([outcome.name for outcome in outcomes]):
        print(f"results in {options.out}/{layout}/results.json and feedback.md")
    print(f"every submission's scores in {options.out / GRADES}")
    from .insights.classreport import unstarted_among

    unstarted = unstarted_among(options.out, [outcome.name for outcome in outcomes])
    if unstarted:                   # said once, here: the report counts them as failing all
        were = "submission was" if unstarted == 1 else "submissions were"
        print(f"{unstarted} {were} handed in as released (every check says it is not written "
              f"yet): `tfcourse report {options.out} --out report/ --skip-unstarted` leaves "
              f"{'it' if unstarted == 1 else 'them'} out of the class report's figures")
    return 0


def _warn_about_stale_points(course) -> None:
    """Loudly, on stderr: nbgrader's gradebook or the source notebooks hold other points than
    course.yaml (this command grades with course.yaml's; nbgrader autograde would not)."""
    from .build.gradebook import advice, disagreements
    from .build.points import points_disagreements

    lines = points_disagreements(course) + disagreements(course)
    if lines:
        print("tfcourse grade: WARNING: course.yaml's points are not everywhere yet; this grades "
              "with course.yaml's, nbgrader autograde refuses until they agree:", file=sys.stderr)
        for line in lines:
            print(f"    {line}", file=sys.stderr)
        print(f"    {advice(course)}", file=sys.stderr)


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
    from .hub.command import main

    return main(course, options)


def cmd_report(options) -> int:
    from .course import CourseError
    from .insights.classreport import latest, read_class, read_service, write_report

    try:
        course = _course(options)
    except CourseError:
        course = None                   # a report of results alone: check ids, no titles
    attempts = None
    if (options.graded / "records").is_dir() and (options.graded / "results").is_dir():
        attempts, problems = read_service(options.graded)      # a feedback service's state
        graded = latest(attempts)
    else:
        graded, problems = read_class(options.graded)
    for line in problems:
        print(f"not read: {line}", file=sys.stderr)
    if not graded:
        print(f"tfcourse report: no results.json in {options.graded}/<submission>/ nor in "
              f"{options.graded}/<student>/<assignment>/ (the folders `tfcourse grade --out` "
              f"writes, the second for nbgrader's submitted/)", file=sys.stderr)
        return 2
    lang = options.lang or (course.language if course else "en")
    pages = write_report(course, graded, options.out, lang, problems, attempts,
                         skip_unstarted=options.skip_unstarted)
    for path in pages:
        print(f"wrote {path}")
    print("beside each assignment's page: its figures and checks.csv, messages.csv, "
          "together.csv, scores.csv")
    return 0


SHOWN_PROBLEMS = 10     # lines about submissions not compared printed; the page lists them all


def cmd_similarity(options) -> int:
    course = _course(options)
    from .insights.similarity import run

    page, pairs, problems = run(course, options.submissions, options.out, options.assignment,
                                options.known, options.threshold)
    for line in problems[:SHOWN_PROBLEMS]:
        print(f"not compared: {line}")
    if len(problems) > SHOWN_PROBLEMS:
        print(f"not compared: {len(problems) - SHOWN_PROBLEMS} more, listed on the page")
    print(f"{len(pairs)} pair(s) at or above {options.threshold:.0%}: {page}")
    return 0


def _add_build(commands) -> None:
    build = commands.add_parser("build", help="generate release/, solutions/ and helper modules")
    build.add_argument("--check", action="store_true",
                       help="change nothing; fail when anything committed is stale")
    build.add_argument("--lang", help="the edition's language (default: course.yaml's); another "
                                      "language than course.yaml's is written to editions/<lang>/")
    build.add_argument("--out", type=Path, help="write the edition's release/ and solutions/ in "
                                                "this folder instead")
    build.add_argument("--no-execute", action="store_true",
                       help="do not run the solution notebooks (faster; no outputs or plots)")
    build.set_defaults(run=cmd_build)


def _add_grade(commands) -> None:
    grade = commands.add_parser("grade", help="grade submissions")
    grade.add_argument("submissions", nargs="+", type=Path,
                       help="a student's folder, a notebook, or a folder of submissions")
    grade.add_argument("--out", type=Path, default=Path("graded"),
                       help="results folder (default: graded/ in the current folder): "
                            "<submission>/ or, for nbgrader's submitted/, <student>/<assignment>/ "
                            "for each, and grades.csv")
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


def _add_check_and_gradescope(commands) -> None:
    check = commands.add_parser("check", help="run a notebook's visible checks")
    check.add_argument("notebook", type=Path)
    check.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    check.set_defaults(run=cmd_check)

    bundle = commands.add_parser("gradescope", help="build a Gradescope autograder bundle")
    bundle.add_argument("assignment")
    bundle.add_argument("--out", type=Path, default=Path("autograder.zip"))
    bundle.add_argument("--lang", help="language of the feedback (default: course.yaml's)")
    bundle.set_defaults(run=cmd_gradescope)


def _add_insights(commands) -> None:
    report = commands.add_parser(
        "report", help="a class report from graded results: scores, each check's pass rate and "
                       "messages, checks failing together, grading cost")
    report.add_argument("graded", type=Path,
                        help="the folder `tfcourse grade --out` wrote, or a feedback service's "
                             "state folder (--state): then also submissions per hour and tries")
    report.add_argument("--out", type=Path, default=Path("report"),
                        help="where pages go (default: report/ in the current folder)")
    report.add_argument("--lang", help="the report's language (default: course.yaml's)")
    report.add_argument("--skip-unstarted", action="store_true",
                        help="leave out submissions handed in as released (every check 'not "
                             "written yet'); the page says how many")
    report.set_defaults(run=cmd_report)

    similar = commands.add_parser(
        "similarity", help="pairs of submissions whose code is alike, to read side by side")
    similar.add_argument("submissions", nargs="+", type=Path,
                         help="students' folders or notebooks, or a folder of them")
    similar.add_argument("--out", type=Path, default=Path("similarity"),
                         help="where pages go (default: similarity/ in the current folder)")
    similar.add_argument("--assignment", help="the assignment (default: from notebook names)")
    similar.add_argument("--known", type=Path,
                         help="a folder of known sources (public implementations, .py or "
                              ".ipynb) to compare each submission with")
    similar.add_argument("--threshold", type=float, default=0.6,
                         help="list pairs sharing at least this share of their code each way")
    similar.set_defaults(run=cmd_similarity)


def _add_feedback_service(commands, argv) -> None:
    """The feedback service's own options are read only when that command is given (they come
    with the hub's code)."""
    service = commands.add_parser(
        "feedback-service", help="on a JupyterHub: grade each submission as it arrives, and "
                                 "show each student their results (docs/jupyterhub.md)")
    service.add_argument("--course", type=Path, default=argparse.SUPPRESS,
                         help="the course folder (as before the command)")
    if "feedback-service" in argv:
        from .hub.command import add_arguments
        add_arguments(service)
    service.set_defaults(run=cmd_feedback_service)


def cmd_config(options) -> int:
    from . import config

    root = getattr(options, "course", None)        # its graders' parameters are listed too
    if options.markdown:
        print(config.markdown(root), end="")
        return 0
    if not options.setting:
        print(config.listing(root))
        return 0
    text = config.describe(options.setting, root)
    if text is None:
        print(f"tfcourse config: {options.setting!r} is no setting of course.yaml "
              f"(`tfcourse config` lists them)", file=sys.stderr)
        return 2
    print(text)
    return 0


def _add_config(commands) -> None:
    config = commands.add_parser("config", help="what a course.yaml setting means, its type and "
                                                 "default (all of them, without SETTING)")
    config.add_argument("setting", nargs="?", help="a setting's path, e.g. limits.memory_mb")
    config.add_argument("--markdown", action="store_true",
                        help="every setting as docs/course-yaml.md writes them")
    config.set_defaults(run=cmd_config)


VERBOSE = ("log what the engine chose and why on stderr (a fallback taken: no fork server, no "
           "zygote, no cgroup): -v info, -vv debug")

def cmd_doctor(options) -> int:
    from .doctor import main

    return main()


def _add_doctor(commands) -> None:
    doctor = commands.add_parser(
        "doctor", help="whether other accounts (students) can run this environment: every "
                       "folder on the way to its Python and packages searchable and readable")
    doctor.set_defaults(run=cmd_doctor)


def parser(argv=None) -> argparse.ArgumentParser:
    """The command line."""
    argv = sys.argv[1:] if argv is None else argv
    top = argparse.ArgumentParser(prog="tfcourse", description=__doc__.split("\n\n")[0])
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.add_argument("--course", type=Path, help="the course folder (default: the nearest folder "
                                                  "with course.yaml)")
    top.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE)
    commands = top.add_subparsers(dest="command", required=True)
    _add_build(commands)
    _add_grade(commands)
    _add_check_and_gradescope(commands)
    _add_insights(commands)
    _add_config(commands)
    _add_doctor(commands)
    _add_feedback_service(commands, argv)
    for command in commands.choices.values():       # before the command or after it
        command.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                             help=VERBOSE)
    return top


def main(argv=None) -> int:
    options = parser(argv).parse_args(argv)
    from . import logs
    logs.configure(options.verbose)
    try:
        return options.run(options)
    except Exception as error:
        from .course import CourseError
        if not isinstance(error, CourseError):
            raise
        print(f"tfcourse: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
