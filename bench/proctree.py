"""Run a command and watch its whole process tree through /proc: wall time, CPU time, peak memory.

Grading starts processes of its own (the trusted grader, bubblewrap, the student's sandboxed
process), and some are killed rather than reaped, so the CPU time the kernel hands back to the
parent (RUSAGE_CHILDREN) misses them. Where this runs as root on cgroup v1, the command runs in a
cpuacct cgroup of its own (CpuAccount), which counts every process started in it, however short
or however it ended (the sandbox moves students' processes to cgroups of its own for memory and
processes, never for cpuacct); elsewhere, sampling /proc every `interval` seconds sees every
process that lives longer than that, and the tables say which was used.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from tfcourse.sandbox.launch import descendants

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    wall: float = 0.0         # seconds
    cpu: float = 0.0          # seconds of CPU, user and system, over every process seen
    rss_mb: float = 0.0       # peak of the summed resident memory (shared pages once per process)
    pss_mb: float = 0.0       # peak of the summed proportional memory (shared pages split)
    largest_mb: float = 0.0   # the largest single process's peak RSS
    processes: int = 0        # the most processes alive at once
    counted: str = "sampled"  # how the CPU seconds were counted: "cpuacct" or "sampled"


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
_made = itertools.count()


class CpuAccount:
    """A cpuacct cgroup (cgroup v1) made for one measure: the CPU seconds of every process started
    in it. `make()` gives None where none can be made (not root, or no cgroup v1 cpuacct)."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def make(cls) -> "CpuAccount | None":
        folder = CPUACCT / f"tfcourse-bench-{os.getpid()}-{next(_made)}"
        try:
            folder.mkdir()
        except OSError:
            return None
        return cls(folder)

    def enter(self) -> None:
        """Put the calling process in (a Popen's preexec_fn: the command and all it starts)."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        return int((self.folder / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        """Remove the cgroup once the processes in it are gone (a killed one takes a moment)."""
        for _ in range(100):
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:                  # busy: a process is still ending
                time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS          # utime, stime
    except (OSError, IndexError, ValueError):
        return 0.0


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB; zeros once it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


def run_watched(command: list[str], interval: float = 0.1, **popen) -> Usage:
    """Run `command` to its end (its output discarded), sampling its process tree; its CPU
    seconds from a CpuAccount where one can be made."""
    account = CpuAccount.make()
    try:
        usage = _run_watched(command, interval, account, **popen)
        if account is not None:
            usage.cpu, usage.counted = account.seconds(), "cpuacct"
    finally:
        if account is not None:
            account.close()
    return usage


def _run_watched(command: list[str], interval: float, account: CpuAccount | None,
                 **popen) -> Usage:
    usage = Usage()
    cpu: dict[int, float] = {}
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=account.enter if account else None, **popen)
    while process.poll() is None:
        pids = [process.pid, *descendants(process.pid)]
        sizes = [memory_kb(pid) for pid in pids]
        for pid in pids:
            cpu[pid] = max(cpu.get(pid, 0.0), cpu_seconds(pid))
        usage.rss_mb = max(usage.rss_mb, sum(rss for rss, _ in sizes) / 1024)
        usage.pss_mb = max(usage.pss_mb, sum(pss for _, pss in sizes) / 1024)
        usage.largest_mb = max([usage.largest_mb, *(rss / 1024 for rss, _ in sizes)])
        usage.processes = max(usage.processes, sum(1 for rss, _ in sizes if rss))
        time.sleep(interval)
    usage.wall = time.perf_counter() - started
    usage.cpu = sum(cpu.values())
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed with status {process.returncode}")
    return usage
