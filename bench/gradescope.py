"""The Gradescope bundle on one core: time, score and memory of one graded solution.

    .venv/bin/python bench/gradescope.py [ASSIGNMENT] [--cores 0] [--memory-mb 500]

Builds the assignment's bundle from a copy of the course whose course.yaml sets `limits.memory_mb`
(Gradescope's default container has 768 MB; the grader needs about 250 of it), unzips it into a
temporary folder laid out as Gradescope's /autograder (as tests/test_gradescope.py does), puts the
assignment's solution in submission/, and runs `run_autograder` under `taskset -c CORES`, as in a
container with that many CPUs. This project's interpreter stands in for the one setup.sh installs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

from tfcourse.adapters.gradescope import build_bundle
from tfcourse.course import load_course


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", nargs="?", default="03-sorting")
    parser.add_argument("--cores", default="0", help="taskset's CPU list (default: one core)")
    parser.add_argument("--memory-mb", type=int, default=500, help="course.yaml limits.memory_mb")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfbench-gradescope-") as folder:
        scratch = Path(folder)
        course_copy = scratch / "course"
        shutil.copytree(ROOT, course_copy, ignore=shutil.ignore_patterns(
            ".venv", ".git", "__pycache__", "graded", "*.egg-info"))
        settings = yaml.safe_load((course_copy / "course.yaml").read_text())
        settings["limits"]["memory_mb"] = options.memory_mb
        (course_copy / "course.yaml").write_text(yaml.safe_dump(settings, sort_keys=False,
                                                                allow_unicode=True))
        course = load_course(course_copy)
        bundle = build_bundle(course, options.assignment, scratch / "bundle.zip")

        root = scratch / "autograder"
        with zipfile.ZipFile(bundle) as archive:
            for info in archive.infolist():
                path = archive.extract(info, root / "source")
                os.chmod(path, info.external_attr >> 16 & 0o777)
        shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
        (root / "submission").mkdir()
        for notebook in course.assignment(options.assignment).notebooks:
            shutil.copy(ROOT / "solutions" / options.assignment / notebook,
                        root / "submission" / notebook)

        environment = {**os.environ, "TFCOURSE_GRADESCOPE_ROOT": str(root),
                       "TFCOURSE_PYTHON": sys.executable}
        started = time.perf_counter()
        finished = subprocess.run(["taskset", "-c", options.cores, str(root / "run_autograder")],
                                  cwd=root, env=environment, capture_output=True, text=True)
        wall = time.perf_counter() - started
        results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))

    notebooks = results.get("extra_data", {}).get("notebooks", [])
    lost = [test["name"] for test in results["tests"] if test["score"] < test["max_score"]]
    print(f"{options.assignment} bundle, taskset -c {options.cores}, limits.memory_mb "
          f"{options.memory_mb}; load average {os.getloadavg()[0]:.1f}")
    print(f"run_autograder exit status {finished.returncode}, {wall:.1f} s wall; score "
          f"{results['score']:g} / {sum(t['max_score'] for t in results['tests']):g}"
          + (f"; lost: {', '.join(lost)}" if lost else ""))
    for notebook in notebooks:
        print(f"  {notebook.get('name', '')}: graded in {notebook.get('seconds')} s, training "
              f"{notebook.get('training_seconds')} s, student's process peak "
              f"{notebook.get('peak_memory_mb')} MB, sandbox {notebook.get('sandbox')}")
    return 0 if finished.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
