"""The trusted grader process: `python -m autograder SUBMISSION --course DIR --out REPORT.json`.

Grades one submission and writes its report as JSON (atomically). The student's sandbox is started
before the graders are imported, so that both interpreters load torch at the same time: a few
seconds saved on every submission. Whatever goes wrong, a report is written.
"""
import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from tfcourse.course import load_course

from .reference import helper_files
from .report import SubmissionReport
from .sandbox.launch import Sandbox, SandboxConfig, set_subreaper
from .submission import find_notebooks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Grade one submission (trusted process).")
    parser.add_argument("submission", type=Path)
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--assignment")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--hide", nargs="*", default=[], type=Path)
    options = parser.parse_args(argv)
    set_subreaper()
    sandbox = None
    try:
        course = load_course(options.course)
        assignment_id, notebooks = find_notebooks(course, options.submission, options.assignment)
        config = None
        if assignment_id is not None:
            config = SandboxConfig.from_course(course, helper_files(course, assignment_id),
                                               options.threads,
                                               [options.submission, *options.hide])
            sandbox = Sandbox(config)
            sandbox.start()
        from .grade import grade_submission          # the graders load while the sandbox starts

        report = grade_submission(course, options.submission, assignment_id, notebooks, config,
                                  skip=frozenset(options.skip), prestarted=sandbox)
        data = report.to_dict()
    except Exception:                                # a grader bug: say so, score nothing
        if sandbox is not None:
            sandbox.close()
        data = SubmissionReport(options.assignment or "", options.submission.name,
                                error=traceback.format_exc()).to_dict()
    temporary = options.out.with_name(f".{options.out.name}.tmp")
    temporary.write_text(json.dumps(data, default=str), encoding="utf-8")
    os.replace(temporary, options.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
