"""How much a sandbox may use, and how much it uses: memory, processes, disk.

The kernel counts best, so a sandbox gets a cgroup of its own where this machine lets us make one
(cgroup v2: memory.max, which counts shared memory and memfd too, memory.swap.max 0, pids.max;
cgroup v1: memory.limit_in_bytes, memory.memsw.limit_in_bytes, pids.max). Everything the student
starts stays in it, however it forks, and the kernel stops it at the limit. Where no cgroup can be
made (an unprivileged user, a container), the watchdog counts what the processes really hold:
each address space's anonymous pages, and each shared-memory object (memfd, /dev/shm, a shared
anonymous mapping) they hold open or mapped, once; not kernel memory such as socket buffers (so
there student code gets no socket at all, seccomp.py). Disk is a size-limited tmpfs in
bubblewrap; in a plain process, the watchdog adds up the work folder and what the sandbox user
left in the machine's shared temporary folders. The address-space backstop comes from what this
interpreter maps to import torch, measured once.

The session (session.py) also asks whether the student's processes are doing anything at all
(`busy`: is any of their threads runnable?), to tell a process that waits on nothing (a sleep,
input(), a lock) from one that waits for a CPU on a busy machine, which spends no CPU either.

This module makes and reads cgroups and reads /proc; the sandbox (launch.py) decides what to do
about what it finds.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

MEMORY, PROCESSES, DISK = "memory", "processes", "disk"
CPUACCT = "cpuacct"           # cgroup v1's count of CPU time (v2 counts it in every cgroup)
TICKS = os.sysconf("SC_CLK_TCK")
CGROUP_PREFIX = "tfcourse"
SHARED_TEMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
# How /proc names shared-memory objects ("/dev/zero (deleted)": a shared anonymous mapping)
SHARED_MEMORY = ("/memfd:", "/dev/shm/", "/SYSV", "/dev/zero")
KCMP = {"x86_64": 312, "aarch64": 272, "i686": 349}   # kcmp(2) in each system call table
KCMP_VM = 1


@dataclass(frozen=True)
class Limits:
    """What the student's processes may use together (course.yaml's `limits`)."""
    memory_mb: int
    disk_mb: int
    processes: int

    def message(self, kind: str) -> str:
        """What the student did, in words that follow "it": "used more than 768 MB of memory"."""
        return {MEMORY: f"used more than {self.memory_mb} MB of memory",
                PROCESSES: f"started more than {self.processes} processes",
                DISK: f"wrote more than {self.disk_mb} MB to disk"}[kind]


# -- cgroups -----------------------------------------------------------------------------------
def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _fields(path: Path) -> dict[str, int]:
    """A flat-keyed cgroup file ("oom_kill 3" lines) as a mapping."""
    found = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[key] = int(value)
    return found


def _own_cgroups() -> dict[str, str]:
    """Controller ("" for cgroup v2) -> this process's cgroup, from /proc/self/cgroup."""
    found = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        for controller in ([""] if hierarchy == "0" else controllers.split(",")):
            found[controller] = path
    return found


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    """Controller ("" for cgroup v2) -> (where its hierarchy is mounted, the mount's root)."""
    found = {}
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        tail = fields[fields.index("-") + 1:]
        if tail[0] == "cgroup2":
            found.setdefault("", (Path(fields[4]), fields[3]))
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in (MEMORY, "pids", CPUACCT):
                    found.setdefault(option, (Path(fields[4]), fields[3]))
    return found


def _own_folder(controller: str) -> Path | None:
    """The folder of this process's cgroup in `controller`'s hierarchy, where it is mounted."""
    mount, own = _cgroup_mounts().get(controller), _own_cgroups().get(controller)
    if mount is None or own is None:
        return None
    where, root = mount
    relative = os.path.relpath(own, root)
    if relative.startswith(".."):
        return None
    folder = (where / relative).resolve()
    return folder if folder.is_dir() else None


def parents_of(cgroup: Cgroup) -> str:
    """The folders `cgroup` was made in, as JSON (a grader's job hands them on): where the grader
    it holds makes its students' cgroups, beside its own, not below (there they would count
    against its limit)."""
    controllers = [""] if cgroup.version == 2 else \
        [MEMORY if folder == cgroup.memory else CPUACCT if folder == cgroup.cpu else "pids"
         for folder in cgroup.folders]
    return json.dumps({controller: str(folder.parent)
                       for controller, folder in zip(controllers, cgroup.folders)})


def _given_parent(controller: str, parents: dict[str, str] | None = None) -> Path | None:
    """Where `parents` says this process makes cgroups of `controller` ("" for v2); None where
    it says nothing."""
    try:
        given = (parents or {}).get(controller)
    except AttributeError:
        return None
    return Path(given) if isinstance(given, str) and Path(given).is_dir() else None


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Cgroup:
    """The cgroup folders of one sandbox (one per hierarchy: two on cgroup v1, one on v2)."""
    version: int
    memory: Path | None = None          # the folder whose memory files limit the sandbox
    pids: Path | None = None
    folders: list[Path] = field(default_factory=list)
    cpu: Path | None = None             # cgroup v1: the folder whose cpuacct.usage counts its CPU

    # -- making ---------------------------------------------------------------------------------
    @classmethod
    def create(cls, limits: Limits, parents: dict[str, str] | None = None) -> "Cgroup | None":
        """A new cgroup with the limits set, or None where this machine lets us make none.
        `parents`: the folders to make it in, by controller ("" for v2), as `parents_of` gives
        them (a grader's job does); None: beside this process's cgroup."""
        name = f"{CGROUP_PREFIX}-{_pid_namespace()}-{os.getpid()}-{time.monotonic_ns()}"
        for make in (cls._create_v2, cls._create_v1):
            try:
                made = make(name, limits, parents)
            except OSError:
                made = None
            if made is not None:
                return made
        return None

    @classmethod
    def _create_v2(cls, name: str, limits: Limits, parents: dict[str, str] | None = None
                   ) -> "Cgroup | None":
        for parent in _v2_parents(parents):
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            made = cls(2, folder, folder, [folder])
            try:
                made._write(folder / "memory.max", limits.memory_mb << 20)
                made._write(folder / "pids.max", limits.processes)
                for optional, value in (("memory.swap.max", 0), ("memory.oom.group", 1)):
                    with contextlib.suppress(OSError):
                        made._write(folder / optional, value)
            except OSError:
                made.remove()
                continue
            return made
        return None

    @classmethod
    def _create_v1(cls, name: str, limits: Limits, parents: dict[str, str] | None = None
                   ) -> "Cgroup | None":
        made = cls(1)
        for controller in (MEMORY, "pids", CPUACCT):
            parent = _given_parent(controller, parents) or _own_folder(controller)
            if parent is None or not os.access(parent, os.W_OK):
                continue
            _sweep(parent)
            folder = parent / name
            try:
                folder.mkdir()
                made.folders.append(folder)
                if controller == MEMORY:
                    made._write(folder / "memory.limit_in_bytes", limits.memory_mb << 20)
                    if (folder / "memory.memsw.limit_in_bytes").exists():
                        made._write(folder / "memory.memsw.limit_in_bytes", limits.memory_mb << 20)
                    made.memory = folder
                elif controller == CPUACCT:        # counts only: it limits nothing
                    made.cpu = folder
                else:
                    made._write(folder / "pids.max", limits.processes)
                    made.pids = folder
            except OSError:
                continue
        if made.memory is None and made.pids is None:
            made.remove()
            return None
        return made

    @staticmethod
    def _write(path: Path, value) -> None:
        path.write_text(str(value))

    # -- using ----------------------------------------------------------------------------------
    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join every folder of this cgroup."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def members(self) -> set[int]:
        found = set()
        for folder in self.folders:
            for line in _read(folder / "cgroup.procs").split():
                with contextlib.suppress(ValueError):
                    found.add(int(line))
        return found

    def exceeded(self) -> str | None:
        """MEMORY when the kernel killed for memory, PROCESSES when it refused a fork, else None."""
        if self.memory is not None:
            name = "memory.events" if self.version == 2 else "memory.oom_control"
            events = _fields(self.memory / name)
            if events.get("oom_kill", 0) or events.get("oom_group_kill", 0):
                return MEMORY
        if self.pids is not None and _fields(self.pids / "pids.events").get("max", 0):
            return PROCESSES
        return None

    def cpu_seconds(self) -> float | None:
        """CPU seconds its processes have spent, those that ended included (cgroup v2
        `cpu.stat` usage_usec, there whether or not the cpu controller is enabled; v1
        `cpuacct.usage`), or None where it keeps no such count."""
        if self.version == 2 and self.folders:
            usec = _fields(self.folders[0] / "cpu.stat").get("usage_usec")
            return None if usec is None else usec / 1e6
        if self.cpu is not None:
            text = _read(self.cpu / "cpuacct.usage").strip()
            return int(text) / 1e9 if text.isdigit() else None
        return None

    def peak_kb(self) -> int:
        if self.memory is None:
            return 0
        for name in ("memory.peak", "memory.max_usage_in_bytes", "memory.current",
                     "memory.usage_in_bytes"):
            text = _read(self.memory / name).strip()
            if text.isdigit():
                return int(text) // 1024
        return 0

    def lower_memory(self, limits: Limits, kb: int) -> None:
        """Hold the memory to `limits.memory_mb` less `kb`: what a process forked from a zygote
        shares with it, which a fresh process would have been charged for (forked.py)."""
        if self.memory is None:
            return
        value = max(64 << 20, (limits.memory_mb << 20) - (kb << 10))
        names = (["memory.max"] if self.version == 2 else
                 ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"])
        for name in names:                       # v1: the memory limit first, then memory+swap
            if (self.memory / name).exists():
                self._write(self.memory / name, value)

    def kill(self) -> None:
        """Kill every process in the cgroup, including those started while we kill."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                self._write(self.folders[0] / "cgroup.kill", 1)
        kill_until_gone(self.members)

    def remove(self) -> None:
        """Kill what is left and remove the folders (the kernel keeps a cgroup while it has
        members, so removal is tried again for a moment)."""
        for _ in range(50):
            self.kill()
            self.folders = [folder for folder in self.folders if not _removed(folder)]
            if not self.folders:
                return
            time.sleep(0.02)


def _removed(folder: Path) -> bool:
    with contextlib.suppress(OSError):       # a cgroup made below it first (none of ours is)
        for child in folder.iterdir():
            if child.is_dir() and child.name.startswith(CGROUP_PREFIX):
                Cgroup(1, folders=[child]).remove()
    try:
        folder.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _v2_parents(parents: dict[str, str] | None = None) -> list[Path]:
    """Where a cgroup v2 child with the memory and pids controllers can be made: this process's
    own cgroup when it can hand them down, else the nearest ancestor we may write to that does
    (its own processes keep a cgroup from handing controllers down, except at the root)."""
    given = _given_parent("", parents)
    if given is not None:
        return [given]
    own = _own_folder("")
    mount = _cgroup_mounts().get("")
    if own is None or mount is None:
        return []
    found = []
    for folder in [own, *own.parents]:
        if not str(folder).startswith(str(mount[0])):
            break
        wanted = {MEMORY, "pids"}
        if not wanted <= set(_read(folder / "cgroup.controllers").split()):
            continue
        if not wanted <= set(_read(folder / "cgroup.subtree_control").split()):
            with contextlib.suppress(OSError):
                (folder / "cgroup.subtree_control").write_text("+memory +pids")
        if wanted <= set(_read(folder / "cgroup.subtree_control").split()) and \
                os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK):
            _sweep(folder)
            found.append(folder)
            break
    return found


def _sweep(parent: Path) -> None:
    """Remove cgroups that sandboxes of this machine's graders left behind when they were killed
    (their keeper normally removes them): those of dead graders in our PID namespace."""
    prefix = f"{CGROUP_PREFIX}-{_pid_namespace()}-"
    with contextlib.suppress(OSError):
        for folder in parent.iterdir():
            if not folder.name.startswith(prefix) or not folder.is_dir():
                continue
            with contextlib.suppress(ValueError, IndexError):
                if not _alive(int(folder.name[len(prefix):].split("-")[0])):
                    Cgroup(1, folders=[folder]).remove()


def kill_until_gone(members, rounds: int = 100) -> None:
    """SIGKILL whatever `members()` lists until it lists nothing (a fork bomb refills it)."""
    for _ in range(rounds):
        pids = members()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


# -- counting without a cgroup -----------------------------------------------------------------
def _status(pid: int | str) -> dict[str, int]:
    """The numeric fields of /proc/PID/status (kB for memory); `pid` may be "PID/task/TID"."""
    found = {}
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            found[key] = int(parts[0])
    return found


def cpu_seconds(pids, reapers=()) -> float:
    """CPU seconds the processes `pids` have spent (each one's threads, and the children it
    waited for once they ended: utime, stime, cutime, cstime in /proc/PID/stat), plus what the
    ended children of `reapers` spent (cutime and cstime only: a keeper, the subreaper of
    what the student's process left, spends nothing of the student's itself)."""
    ticks = 0
    for pid, own in [*((pid, True) for pid in pids), *((pid, False) for pid in reapers)]:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            times = [int(value) for value in fields[11:15]]
        except (OSError, ValueError, IndexError):
            continue                    # ended meanwhile: its parent counts it once it is reaped
        ticks += sum(times) if own else sum(times[2:])
    return ticks / TICKS


# What a task's state (the third field of /proc/PID/task/TID/stat) says of it: these are doing
# something, or would be: R running or runnable (waiting for a CPU: the machine's load), D in an
# uninterruptible wait, usually for I/O (the machine's doing too), T and t stopped by a signal or
# a debugger (a grader, an administrator or a test may stop it: not the student's doing, we cannot
# tell who sent the signal), W paging (kernels before 2.6). The rest wait on nothing the machine
# owes them: S sleeping (time.sleep, input(), a lock, a pipe), Z and X ended.
BUSY_STATES = frozenset(b"RDTtW")


def busy(pids) -> bool | None:
    """Whether any thread of the processes `pids` is doing something (BUSY_STATES): one
    runnable thread makes its process busy, however many others sleep (torch's idle helper
    threads, say). None where no thread of them could be read (they all ended meanwhile)."""
    seen = False
    for pid in pids:
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue                            # ended meanwhile
        for thread in threads:
            try:
                with open(f"/proc/{pid}/task/{thread}/stat", "rb") as handle:
                    stat = handle.read()
                state = stat[stat.rindex(b")") + 2]
            except (OSError, ValueError, IndexError):
                continue
            if state in BUSY_STATES:
                return True
            seen = True
    return False if seen else None


def tasks(pids) -> int:
    """Processes and their threads: what a pids cgroup and RLIMIT_NPROC count."""
    return sum(_status(pid).get("Threads", 0) for pid in pids)


def _memory_task(pid: int) -> tuple[int | str, dict[str, int]]:
    """Where to read the memory of process `pid`, and its status: the process itself, or, where
    its first thread has exited while others run on (its status then shows no memory at all), a
    live thread's folder ("PID/task/TID"), which shows the memory they share."""
    status = _status(pid)
    if "RssAnon" in status:
        return pid, status
    with contextlib.suppress(OSError):
        for thread in os.listdir(f"/proc/{pid}/task"):
            found = _status(f"{pid}/task/{thread}")
            if "RssAnon" in found:
                return f"{pid}/task/{thread}", found
    return pid, status


def _shared_objects(pid: int | str, read_map_files: bool) -> tuple[dict, bool]:
    """The shared-memory objects `pid` holds open or maps: {(device, inode): bytes}, and whether
    it maps one whose size we could not read (then its RssShmem stands in for it)."""
    objects, unknown = {}, False
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(SHARED_MEMORY):
                    info = os.stat(f"/proc/{pid}/fd/{fd}")
                    objects[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    for line in _read(Path(f"/proc/{pid}/maps")).splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith(SHARED_MEMORY):
            continue
        if read_map_files:
            with contextlib.suppress(OSError):
                info = os.stat(f"/proc/{pid}/map_files/{parts[0]}")
                objects[(info.st_dev, info.st_ino)] = info.st_blocks * 512
                continue
        unknown = True
    return objects, unknown


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def same_address_space(pid: int, other: int) -> bool:
    """Whether two processes share one address space: a child between vfork and exec (as
    subprocess and posix_spawn start every program) or one cloned with CLONE_VM. Its status shows
    the whole of that memory, so it would count twice. kcmp(2) answers where the kernel lets us
    ask (root; the same user, of a dumpable process; not under Docker's default seccomp profile);
    where it does not, both count: more, never less."""
    number = KCMP.get(os.uname().machine)
    return number is not None and _libc().syscall(number, pid, other, KCMP_VM, 0, 0) == 0


def memory_held_kb(pids, read_map_files: bool) -> int:
    """What the processes hold in memory: each address space's anonymous pages (a child that
    shares its parent's, before its exec, counts once), plus every shared-memory object held open
    or mapped by any of them, counted once and whole (a memfd of 3 GB held by a file descriptor
    has no resident pages in anyone's RSS). File-backed pages (the torch library, some 230 MB of
    the CUDA build's) are left out: they are the page cache, shared with the grader
    and given back under pressure, as a cgroup would reclaim them.

    `read_map_files`: whether we may stat /proc/PID/map_files (root may); if not, a process that
    maps a shared object of unknown size counts its resident shared pages (RssShmem) instead.
    """
    total, objects, members = 0, {}, set(pids)
    for pid in pids:
        task, status = _memory_task(pid)
        parent = status.get("PPid")
        if parent not in members or not same_address_space(pid, parent):
            total += status.get("RssAnon", 0)
        held, unknown = _shared_objects(task, read_map_files)
        objects.update(held)
        if unknown:
            total += status.get("RssShmem", 0)
    return total + sum(objects.values()) // 1024


def tmpfs_used_mb(path: str) -> tuple[float, bool]:
    """(MB used, whether it is full) of the file system at `path`."""
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize / 1048576, info.f_bavail == 0


def folder_mb(folder: Path, stop_mb: float, uid: int | None = None) -> float:
    """MB in `folder` (each entry at least a block, so that a million empty files count), stopping
    early past `stop_mb`; with `uid`, only what that user owns (and folders of its own)."""
    total, stack = 0, [folder]
    while stack and total < stop_mb * 1048576:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if uid is not None and info.st_uid != uid:
                        continue
                    total += max(info.st_blocks * 512, 4096)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
    return total / 1048576


def remove_leftovers(uid: int, folders=SHARED_TEMP) -> int:
    """Remove what the user `uid` left in the machine's shared temporary folders (its own entries
    at their top, and everything below them), never following a link; the number removed. A
    student's leftovers would count against the next student's disk limit, and be read by them,
    when student code runs as that user (process mode)."""
    removed = 0
    for folder in folders:
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
                    removed += 1
    return removed


def shared_temp_mb(uid: int, stop_mb: float, skip: Path) -> float:
    """MB the user `uid` keeps in the machine's shared temporary folders (outside `skip`)."""
    total = 0.0
    for folder in SHARED_TEMP:
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if info.st_uid != uid or Path(entry.path) == skip:
                        continue
                    total += max(info.st_blocks * 512, 4096) / 1048576
                    if entry.is_dir(follow_symlinks=False):
                        total += folder_mb(Path(entry.path), stop_mb - total, uid)
    return total


# -- the interpreter's own footprint -----------------------------------------------------------
FOOTPRINT_PROBE = """\
import torch
torch.set_num_threads(1)
torch.ones(4).sum()
for line in open("/proc/self/status"):
    if line.startswith("VmPeak:"):
        print(line.split()[1])
"""


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tfcourse" / "interpreter.json"


def _interpreter_key(user: tuple[int, int] | None) -> str:
    """What the footprint depends on: this interpreter, its torch, the user that runs it."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
        torch_file = Path(spec.origin)
        torch_stamp = [str(torch_file), torch_file.stat().st_mtime_ns]
    except (ImportError, AttributeError, TypeError, OSError, ValueError):
        torch_stamp = None
    return json.dumps([os.path.realpath(sys.executable), sys.prefix, torch_stamp,
                       list(user) if user else None])


def interpreter_footprint_kb(user: tuple[int, int] | None = None) -> int | None:
    """The address space (kB) this interpreter maps to import torch, measured once per machine,
    interpreter, torch and user, then read from a cache; None when `user` cannot run it."""
    key, cache = _interpreter_key(user), _cache_file()
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), int):
        return known[key]
    footprint = _measure_footprint_kb(user)
    if footprint is not None:
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            temporary = cache.with_name(f".{cache.name}.{os.getpid()}")
            temporary.write_text(json.dumps({**(known if isinstance(known, dict) else {}),
                                             key: footprint}))
            os.replace(temporary, cache)
    return footprint


def _measure_footprint_kb(user: tuple[int, int] | None) -> int | None:
    options = {"user": user[0], "group": user[1], "extra_groups": []} if user else {}
    try:
        done = subprocess.run([sys.executable, "-E", "-s", "-c", FOOTPRINT_PROBE],
                              capture_output=True, text=True, timeout=300, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                                   "CUDA_VISIBLE_DEVICES": ""}, **options)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    return int(lines[-1]) if done.returncode == 0 and lines and lines[-1].isdigit() else None
