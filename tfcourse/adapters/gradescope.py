"""Gradescope autograder bundles: `tfcourse gradescope ASSIGNMENT --out autograder.zip`.

Gradescope unzips the bundle into /autograder/source and runs its setup.sh once, as root, to build
the grading image. For each submission it runs /autograder/run_autograder with the student's files
in /autograder/submission, and reads /autograder/results/results.json.

The bundle holds the hidden graders (`autograder/`), the tfcourse package (`tfcourse/`, which
setup.sh installs with its `grading` extra: pytest), course.yaml,
and the source notebooks of the assignment and of those it builds on: the reference solution is read
from them, so run_autograder makes them unreadable to anyone but root before grading, and the
student's code runs as an unprivileged user (the sandbox sees to that). `python -m
tfcourse.adapters.gradescope` is what run_autograder runs: it grades with `child.grade_one` and
writes results.json atomically; whatever fails, a results.json with score 0 and the reason is
written (by run_autograder itself when Python cannot even start).

The root is /autograder unless TFCOURSE_GRADESCOPE_ROOT says otherwise, and the interpreter is
/opt/tfcourse/bin/python (where setup.sh installs it) unless TFCOURSE_PYTHON says otherwise: the
tests run the bundle in a temporary folder with the project's own interpreter.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import stat
import sys
import tempfile
import time
import traceback
import zipfile
from importlib import metadata
from pathlib import Path

import yaml

from tfcourse.course import Course, CourseError, load_course
from tfcourse.source import providers

from ..submission.report import Note, SubmissionReport
from ..batch.results import gradescope_json, say, strict_json, write_atomically
from ..batch.child import grade_one

ROOT_VARIABLE = "TFCOURSE_GRADESCOPE_ROOT"
PACKAGES = ("autograder", "tfcourse")
FILES = ("course.yaml", "pyproject.toml", "README.md")    # pyproject names README.md as its readme
ZIP_TIME = (1980, 1, 1, 0, 0, 0)                        # fixed: the same course gives the same zip

SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Pick an Ubuntu 22.04
# (or newer) base image: tfcourse needs Python 3.10 or newer.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# bubblewrap isolates student code where the container allows it; setpriv (util-linux) drops to
# the unprivileged user inside it. Gradescope's containers usually allow no user namespaces: there
# student code runs as a plain process as that user (`nobody`), which course.yaml must accept
# (sandbox.accept_weaker: process), and which is why the Python below must be readable and runnable
# by everyone.
apt-get install -y -qq --no-install-recommends \\
    python3 python3-venv python3-pip bubblewrap util-linux ca-certificates
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
    echo "tfcourse needs Python 3.10 or newer: choose an Ubuntu 22.04 or newer base image" >&2
    exit 1
}
python3 -m venv /opt/tfcourse
/opt/tfcourse/bin/pip install -q --upgrade pip
# Gradescope's graders have no GPU. The CPU build of torch is a few hundred MB where the default
# Linux build pulls several GB of CUDA libraries: the image builds faster and starts faster, and
# grading is the same. The version is the one this bundle was built with.
/opt/tfcourse/bin/pip install -q "{torch}" --index-url https://download.pytorch.org/whl/cpu
/opt/tfcourse/bin/pip install -q ".[grading]"
chmod -R a+rX /opt/tfcourse
/opt/tfcourse/bin/python -c "import torch, tfcourse; print('torch', torch.__version__, 'ready')"
# How student code will be isolated here, checked now rather than on every submission: the image
# is not built when grading would refuse to run student code (the message says how to fix it).
# This also measures, once, what torch maps at import (the sandbox's address-space backstop).
/opt/tfcourse/bin/python -m tfcourse.sandbox.launch .
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this, as root, for every submission: it grades {assignment} from
# $ROOT/submission and writes $ROOT/results/results.json. Whatever fails, a results.json is
# written, with score 0 and the reason.
set -u
ROOT="${{{root_variable}:-/autograder}}"
PYTHON="${{TFCOURSE_PYTHON:-/opt/tfcourse/bin/python}}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
# Student code runs as an unprivileged user: the bundle (whose source notebooks hold the reference
# solution) and the results are root's alone.
chmod go-rwx "$ROOT/source" "$ROOT/results"
chmod -R go-rwx "$ROOT/source/source"
cd "$ROOT/source"
"$PYTHON" -m tfcourse.adapters.gradescope --root "$ROOT" \\
    --assignment {assignment} --lang {lang}
status=$?
if [ ! -s "$RESULTS" ]; then
    echo "the grader ended with status $status and wrote no results" >&2
    printf '%s\\n' {failure} > "$RESULTS.tmp"
    mv "$RESULTS.tmp" "$RESULTS"
fi
exit 0
"""

# What a student reads when the grader itself fails (the details are in Gradescope's stdout log,
# which only the instructor sees).
FAILURE = ("The autograder could not run, so nothing was scored. This is not a problem with your "
           "notebook: your instructor can see the details.")


def failed(lang: str, **extra) -> dict:
    """Gradescope's results when nothing could be graded."""
    return {"score": 0.0, "output": say(FAILURE, None, lang), "tests": [], **extra}


# -- building -------------------------------------------------------------------------------------
def needed_assignments(course: Course, assignment_id: str) -> list[str]:
    """The assignment and every assignment whose module it uses, directly or not (their source
    notebooks hold the reference), in course.yaml's order."""
    return providers(course, assignment_id)


def bundle_files(course: Course, assignment_id: str) -> list[tuple[str, Path]]:
    """(name in the zip, file on disk) of everything the bundle carries besides its scripts."""
    def tree(folder: Path) -> list[Path]:
        return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".pyc"
                      and not {"__pycache__", ".ipynb_checkpoints"} & set(p.parts))

    root = course.root
    files = [root / name for name in FILES]
    for package in PACKAGES:
        files += tree(root / package)
    for assignment in needed_assignments(course, assignment_id):
        files += tree(course.source_dir / assignment)
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise CourseError(f"the bundle needs files the course folder lacks: {', '.join(missing)}")
    return [(path.relative_to(root).as_posix(), path) for path in files]


def torch_requirement() -> str:
    """The torch the bundle installs: this machine's version, without its local tag (+cpu)."""
    try:
        return f"torch=={metadata.version('torch').split('+')[0]}"
    except metadata.PackageNotFoundError:
        return "torch>=2.1"


def _add(bundle: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, data)


def bundled_course_yaml(data: bytes) -> bytes:
    """course.yaml as the bundle carries it. A Gradescope container is made for one submission and
    thrown away, and usually allows no user namespaces: there a plain process as `nobody` is the
    sandbox, so the bundle accepts it (`sandbox.accept_weaker: process`) unless course.yaml says
    otherwise. Everything else is as written."""
    course = yaml.safe_load(data.decode("utf-8"))
    sandbox = course.setdefault("sandbox", {})
    if not sandbox.get("accept_weaker"):
        sandbox["accept_weaker"] = "process"
    header = ("# course.yaml as tfcourse gradescope bundles it: sandbox.accept_weaker is "
              "'process',\n"
              "# for Gradescope's containers (see docs/sandbox.md).\n")
    return (header + yaml.safe_dump(course, sort_keys=False, allow_unicode=True)).encode("utf-8")


def build_bundle(course: Course, assignment_id: str, out_path, lang: str | None = None) -> Path:
    """Write the Gradescope autograder zip for one assignment; returns its path."""
    course.assignment(assignment_id)                       # an unknown id fails here, clearly
    lang = lang or course.language
    if lang not in course.languages:
        raise CourseError(f"language {lang!r} is not among the course's {list(course.languages)}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    scripts = {
        "setup.sh": SETUP.replace("{torch}", torch_requirement()),
        "run_autograder": RUN_AUTOGRADER.format(
            assignment=assignment_id, lang=lang, root_variable=ROOT_VARIABLE,
            failure=shlex.quote(json.dumps(failed(lang)))),
    }
    handle, temporary = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.")
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w") as bundle:
            for name, text in scripts.items():
                _add(bundle, name, text.encode(), executable=True)
            for name, path in bundle_files(course, assignment_id):
                data = path.read_bytes()
                if name == "course.yaml":
                    data = bundled_course_yaml(data)
                _add(bundle, name, data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, out_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return out_path


# -- grading, inside Gradescope's container -------------------------------------------------------
def find_submission(course: Course, assignment_id: str, folder: Path) -> Path | None:
    """What to grade in Gradescope's submission folder, or None when it holds no notebook.

    Students upload the file their browser downloaded, sometimes renamed ("attention (1).ipynb"):
    a lone notebook is graded as the assignment's notebook whatever its name.
    """
    notebooks = sorted(p for p in folder.rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts) if folder.is_dir() else []
    if not notebooks:
        return None
    expected = course.assignment(assignment_id).notebooks
    if len(expected) == 1 and len(notebooks) == 1 and notebooks[0].name != expected[0]:
        return notebooks[0]
    return folder


def grade_gradescope(root: Path, assignment_id: str, lang: str) -> dict:
    """Gradescope's results for the submission in root/submission; never raises."""
    started = time.monotonic()
    try:
        course = load_course(root / "source")
        submission = find_submission(course, assignment_id, root / "submission")
        if submission is None:
            expected = ", ".join(course.assignment(assignment_id).notebooks)
            report = SubmissionReport(assignment_id, "submission", notes=[Note(
                "no notebook was submitted: upload {expected}", {"expected": expected},
                "error")])
            return gradescope_json(course, report, lang)
        _, results = grade_one(course, submission, assignment=assignment_id, lang=lang,
                               hide=[root])
        return results
    except Exception:                               # a grader bug: score nothing, say so
        traceback.print_exc()
        return failed(lang, execution_time=round(time.monotonic() - started, 1),
                      extra_data={"assignment": assignment_id,
                                  "grader_error": traceback.format_exc()[-2000:]})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Grade Gradescope's submission (run_autograder).")
    parser.add_argument("--root", type=Path,
                        default=Path(os.environ.get(ROOT_VARIABLE, "/autograder")))
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--lang", default="en")
    options = parser.parse_args(argv)
    results = grade_gradescope(options.root, options.assignment, options.lang)
    write_atomically(options.root / "results" / "results.json",
                     strict_json(results))
    # For the instructor: Gradescope keeps run_autograder's output as a log students do not see.
    print(f"{options.assignment}: {results['score']:g} / {results.get('max_score', 0):g} "
          f"in {results.get('execution_time', 0)} s")
    for test in results.get("tests", []):
        if test["status"] != "passed":
            print(f"  {test['number']}: {test['output']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
