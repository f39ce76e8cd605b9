"""Grading here against grading on a Dask cluster, through the `tfcourse grade` command.

    .venv/bin/python bench/cluster.py [--submissions 6] [--workers 2] [--repeat 1]
                                      [--assignments 01-attention 02-layers 03-sorting]

For each assignment, grades the same submissions (copies of its solution, each a student's folder)
with `tfcourse grade --jobs W`, then with `--scheduler` on a Dask cluster started here: a `dask
scheduler` and W `dask worker`s (a nanny each, one thread each, TFCOURSE_COURSE set), as an
instructor would run them on other machines. Every run grades from scratch (--force into a new
folder), and the scores of both must be equal.

Times are wall-clock seconds of the whole command, and CPU seconds of every process that took part
(bench/proctree.py): for local grading, the command's process tree; on the cluster, the client's
tree and the scheduler's and workers' trees (graders and sandboxes included), counted from the
command's start, in cpuacct cgroups where this runs as root on cgroup v1, else sampled. Starting
the cluster is shown apart: it is paid once, not per batch.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctree import ROOT, CpuAccount, Usage, cpu_seconds

from tfcourse.sandbox.launch import descendants

BIN = Path(sys.executable).parent
ASSIGNMENTS = ("01-attention", "02-layers", "03-sorting")


def tree(roots: list[int]) -> list[int]:
    return [pid for root in roots for pid in (root, *descendants(root))]


def run_watched(command: list[str], cluster: "Cluster | None", interval: float = 0.2) -> Usage:
    """Run `command`; its wall time and the CPU seconds its process tree and the `cluster`'s
    processes (already running: only what they use from now on counts) used meanwhile."""
    roots = [process.pid for process in cluster.processes] if cluster else []
    account = CpuAccount.make() if cluster is None or cluster.account else None
    baseline = {pid: cpu_seconds(pid) for pid in tree(roots)}
    counted_before = cluster.account.seconds() if account and cluster else 0.0
    seen = dict(baseline)
    started = time.perf_counter()
    try:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   cwd=ROOT, preexec_fn=account.enter if account else None)
        while process.poll() is None:
            for pid in [*tree([process.pid]), *tree(roots)]:
                seen[pid] = max(seen.get(pid, 0.0), cpu_seconds(pid))
            time.sleep(interval)
        usage = Usage(wall=time.perf_counter() - started)
        for pid in tree(roots):                    # what the workers did until the last answer
            seen[pid] = max(seen.get(pid, 0.0), cpu_seconds(pid))
        usage.cpu = sum(cpu - baseline.get(pid, 0.0) for pid, cpu in seen.items())
        if account is not None:
            usage.counted = "cpuacct"
            usage.cpu = account.seconds() + (cluster.account.seconds() - counted_before
                                             if cluster else 0.0)
    finally:
        if account is not None:
            account.close()
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed with status {process.returncode}")
    return usage


class Cluster:
    """A scheduler and `workers` workers on 127.0.0.1, as `dask` starts them."""

    def __init__(self, workers: int, folder: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{port}"
        self.account = CpuAccount.make()           # the scheduler's and workers' CPU seconds
        started = time.perf_counter()
        options = dict(env={**os.environ, "TFCOURSE_COURSE": str(ROOT)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       start_new_session=True, preexec_fn=self.account and self.account.enter)
        self.processes = [subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], **options)]
        self.processes += [subprocess.Popen(
            [str(BIN / "dask"), "worker", self.address, "--nthreads", "1", "--nworkers", "1",
             "--no-dashboard", "--preload", "tfcourse.batch.cluster",
             "--local-directory", str(folder)], **options) for _ in range(workers)]
        from distributed import Client
        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        self.start_wall = time.perf_counter() - started
        self.start_cpu = self.account.seconds() if self.account else \
            sum(cpu_seconds(pid) for pid in self.pids)

    @property
    def pids(self) -> list[int]:
        return tree([process.pid for process in self.processes])

    def close(self) -> None:
        for process in reversed(self.processes):
            os.killpg(process.pid, 15)
        for process in self.processes:
            process.wait()
        if self.account is not None:
            self.account.close()


def grade(submissions: Path, scratch: Path, options: list[str], cluster: "Cluster | None"
          ) -> tuple[Usage, dict[str, float]]:
    out = Path(tempfile.mkdtemp(prefix="graded-", dir=scratch))
    usage = run_watched([sys.executable, "-m", "tfcourse", "grade", str(submissions), "--out",
                         str(out), "--no-progress", "--force", *options], cluster)
    scores = {path.parent.name: json.loads(path.read_text())["score"]
              for path in out.rglob("results.json")}
    return usage, scores


def compare(assignment: str, options, cluster: Cluster, scratch: Path) -> None:
    """One assignment's submissions graded here and on the cluster: a table, and the scores."""
    submissions = scratch / assignment
    for index in range(options.submissions):
        shutil.copytree(ROOT / "solutions" / assignment, submissions / f"student{index + 1}")
    cases = {f"here, --jobs {options.workers}": ["--jobs", str(options.workers)],
             f"dask, {options.workers} workers": ["--scheduler", cluster.address]}
    print(f"\n{options.submissions} submissions of {assignment} (cpu s: "
          f"{'cpuacct cgroups' if cluster.account else 'sampled process trees'})")
    print(f"{'':22}  {'wall s':>6}  {'cpu s':>6}  {'cpu s each':>10}  {'submissions/cpu s':>17}")
    found = {}
    for title, arguments in cases.items():
        on = None if "--jobs" in arguments else cluster
        runs = [grade(submissions, scratch, arguments, on) for _ in range(options.repeat)]
        usage, scores = min(runs, key=lambda run: run[0].wall)
        found[title] = scores
        print(f"{title:22}  {usage.wall:6.1f}  {usage.cpu:6.1f}  "
              f"{usage.cpu / options.submissions:10.2f}  {options.submissions / usage.cpu:17.3f}")
    first, second = found.values()
    print("scores: " + ("equal" if first == second else f"DIFFER: {first} {second}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2, help="workers, and --jobs here")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case; the best counts")
    parser.add_argument("--assignments", nargs="+", default=list(ASSIGNMENTS), choices=ASSIGNMENTS)
    options = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="tfbench-") as folder:
        scratch = Path(folder)
        cluster = Cluster(options.workers, scratch / "workers")
        try:
            print(f"cluster start: {cluster.start_wall:.1f} s wall, {cluster.start_cpu:.1f} s cpu "
                  f"(a scheduler and {options.workers} workers, paid once)")
            for assignment in options.assignments:
                compare(assignment, options, cluster, scratch)
        finally:
            cluster.close()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
