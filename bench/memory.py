"""Peak memory of grading one submission, all processes together.

    .venv/bin/python bench/memory.py [--jobs N] [ASSIGNMENT...]

Each assignment's solution is graded by `tfcourse grade ... --jobs 1`, and the memory of that
command's whole process tree (the runner, the trusted grader, bubblewrap, the student's sandboxed process) is sampled every
0.1 s from /proc. Two sums are reported:

- RSS: resident memory, summed over the processes. It counts the pages the processes share (the
  torch library, mapped by both the grader and the student's process) once per process: an upper
  bound.
- PSS: the same with shared pages split between the processes that map them: the processes' real
  share of memory, what a container's memory limit (Gradescope's, Kubernetes') is closest to.

The report's own figure (peak_memory_mb: the student's processes, sampled by the sandbox's
watchdog) is shown beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from proctree import ROOT, run_watched

ASSIGNMENTS = ("01-attention", "02-layers", "03-sorting")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--jobs", type=int, default=1,
                        help="passed to tfcourse grade")
    parser.add_argument("assignments", nargs="*", default=list(ASSIGNMENTS))
    options = parser.parse_args()
    import torch

    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}; "
          f"--jobs {options.jobs}; sampled every {options.interval} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'assignment':14}  {'RSS MB':>7}  {'PSS MB':>7}  {'largest MB':>10}  "
          f"{'processes':>9}  {'student MB':>10}  {'wall s':>6}  score")
    for assignment in options.assignments:
        with tempfile.TemporaryDirectory(prefix="tfbench-") as out:
            usage = run_watched([sys.executable, "-m", "tfcourse", "grade",
                                 str(ROOT / "solutions" / assignment), "--out", out,
                                 "--jobs", str(options.jobs), "--no-progress"],
                                options.interval, cwd=ROOT)
            results = json.loads(next(Path(out).rglob("results.json")).read_text())
        student = max(nb["peak_memory_mb"] for nb in results["extra_data"]["notebooks"])
        print(f"{assignment:14}  {usage.rss_mb:7.0f}  {usage.pss_mb:7.0f}  "
              f"{usage.largest_mb:10.0f}  {usage.processes:9d}  {student:10.0f}  "
              f"{usage.wall:6.1f}  {results['score']:g} / {results['max_score']:g}", flush=True)
        for test in results["tests"]:
            if test["status"] != "passed":
                print(f"    lost {test['number']}: {test['output'][:150]}")
    print("RSS, PSS: peaks of the sums over the process tree; largest: the largest single process;"
          " student: the report's peak_memory_mb")
    return 0


if __name__ == "__main__":
    sys.exit(main())
