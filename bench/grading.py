"""How long grading takes, end to end, through the `tfcourse grade` command an instructor runs.

    .venv/bin/python bench/grading.py

1. One full submission (the solutions of all three assignments): each assignment on its own with
   --jobs 1, then all three in one command with --jobs 1 and with --jobs 2.
2. Two batches, each with --jobs 1 and with --jobs 2: four short submissions (two copies each of
   the 01-attention and 02-layers solutions), then two students' full work (two copies of each
   solution, 03-sorting included). The throughput ratio says how well parallel grading uses the
   cores; the first batch is dominated by starting processes, the second by training.
3. CPU seconds a submission in a batch, with --jobs 1: N copies of a solution, then 2N, graded
   from scratch; each submission after the first N costs (CPU(2N) - CPU(N)) / N. That is the
   figure a class of any size is billed per submission, once the batch's fork servers and zygotes
   are started (--batch N, default 6; --batch-assignments picks which, default 01 and 02).

Times are wall-clock seconds of the whole command (interpreter start to exit), the best of
--repeat runs, and the CPU seconds of every process it started (bench/proctree.py: a cpuacct
cgroup as root on cgroup v1, else sampled): on a shared machine the wall time depends on the other
jobs, the CPU time much less. Every run grades from scratch.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from proctree import ROOT, Usage, run_watched

ASSIGNMENTS = ("01-attention", "02-layers", "03-sorting")


def grade(submissions: list[Path], jobs: int, scratch: Path) -> tuple[Usage, list[dict]]:
    """(wall and CPU seconds, results.json of each submission) of one `tfcourse grade` run."""
    out = Path(tempfile.mkdtemp(prefix="graded-", dir=scratch))
    usage = run_watched([sys.executable, "-m", "tfcourse", "grade", *map(str, submissions),
                         "--out", str(out), "--jobs", str(jobs), "--no-progress"], 0.2, cwd=ROOT)
    results = [json.loads(path.read_text()) for path in sorted(out.rglob("results.json"))]
    return usage, results


def best(runs: int, submissions: list[Path], jobs: int, scratch: Path):
    trials = [grade(submissions, jobs, scratch) for _ in range(runs)]
    return min(trials, key=lambda trial: trial[0].wall)


def short_of_full_marks(results: list[dict]) -> str:
    """A warning naming any submission below full marks (all are solutions), or ''."""
    short = [f"{r['extra_data']['submission']} {r['score']:g}/{r['max_score']:g} lost "
             + ", ".join(t["number"] for t in r["tests"] if t["status"] != "passed")
             for r in results if r["score"] != r["max_score"]]
    return f"  (below full marks: {', '.join(short)})" if short else ""


def training_seconds(result: dict) -> str:
    found = [nb.get("training_seconds") for nb in result["extra_data"]["notebooks"]]
    return next((f"{s:.1f}" for s in found if s is not None), "-")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case; the best counts")
    parser.add_argument("--batch", type=int, default=6,
                        help="N for the CPU seconds a submission in a batch (0: skip)")
    parser.add_argument("--batch-assignments", nargs="+", default=list(ASSIGNMENTS[:2]),
                        choices=ASSIGNMENTS)
    parser.add_argument("--only-batch", action="store_true", help="only part 3")
    options = parser.parse_args()
    import torch

    print(f"machine: {os.cpu_count()} cores, {platform.machine()}, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="tfbench-") as folder:
        scratch = Path(folder)
        if not options.only_batch:
            full_submission(options, scratch)
        if options.batch:
            per_submission(options, scratch)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


def copies(assignments, scratch: Path) -> Path:
    """A class folder of a student for each of `assignments`, with a copy of its solution."""
    batch = Path(tempfile.mkdtemp(prefix="batch-", dir=scratch))
    for index, assignment in enumerate(assignments):
        shutil.copytree(ROOT / "solutions" / assignment, batch / f"student{index + 1}")
    return batch


def per_submission(options, scratch: Path) -> None:
    """Part 3: the CPU seconds each submission after the first N of a batch costs."""
    n = options.batch
    print(f"\nCPU seconds a submission in a batch, --jobs 1: {n}, then {2 * n} copies")
    print(f"{'assignment':14}  {f'{n} cpu s':>9}  {f'{2 * n} cpu s':>9}  {'each after':>10}  "
          f"{'wall s':>6}  counted")
    for assignment in options.batch_assignments:
        (first, results), (second, more) = (
            best(options.repeat, [copies([assignment] * count, scratch)], 1, scratch)
            for count in (n, 2 * n))
        print(f"{assignment:14}  {first.cpu:9.1f}  {second.cpu:9.1f}  "
              f"{(second.cpu - first.cpu) / n:10.2f}  {second.wall:6.1f}  {second.counted}"
              f"{short_of_full_marks(results + more)}")


def full_submission(options, scratch: Path) -> None:
    """Parts 1 and 2: one full submission, then two batches with --jobs 1 and 2."""
    solutions = [ROOT / "solutions" / a for a in ASSIGNMENTS]
    print("\none full submission, each assignment alone, --jobs 1")
    print(f"{'assignment':14}  {'wall s':>6}  {'cpu s':>6}  {'grader s':>8}  "
          f"{'training s':>10}  score")
    total = total_cpu = 0.0
    for path in solutions:
        usage, results = best(options.repeat, [path], 1, scratch)
        seconds, cpu = usage.wall, usage.cpu
        total, total_cpu = total + seconds, total_cpu + cpu
        result = results[0]
        print(f"{path.name:14}  {seconds:6.1f}  {cpu:6.1f}  {result['execution_time']:8.1f}  "
              f"{training_seconds(result):>10}  {result['score']:g} / {result['max_score']:g}"
              f"{short_of_full_marks(results)}")
    print(f"{'sum':14}  {total:6.1f}  {total_cpu:6.1f}  (cpu s {usage.counted})")
    for jobs in (1, 2):
        usage, results = best(options.repeat, solutions, jobs, scratch)
        print(f"all three in one command, --jobs {jobs}: {usage.wall:.1f} s wall, "
              f"{usage.cpu:.1f} s cpu"
              f"{short_of_full_marks(results)}")

    batches = {"four submissions (2 x 01-attention, 2 x 02-layers)":
               ("01-attention", "02-layers") * 2,
               "six submissions: two students' full work (2 x each assignment)": ASSIGNMENTS * 2}
    for title, assignments in batches.items():
        batch = copies(assignments, scratch)
        print(f"\n{title}")
        print(f"{'jobs':>4}  {'wall s':>6}  {'cpu s':>6}  {'submissions/min':>15}")
        walls = {}
        for jobs in (1, 2):
            usage, results = best(options.repeat, [batch], jobs, scratch)
            walls[jobs] = usage.wall
            print(f"{jobs:4d}  {usage.wall:6.1f}  {usage.cpu:6.1f}  "
                  f"{len(assignments) * 60 / usage.wall:15.1f}{short_of_full_marks(results)}")
        print(f"throughput, 2 jobs against 1: {walls[1] / walls[2]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
