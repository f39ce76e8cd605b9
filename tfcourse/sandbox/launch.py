"""Starting, watching and killing the student's process.

Two ways to isolate, chosen by `sandbox.isolation` in course.yaml (docs/sandbox.md says what each
guarantees):

- `bwrap` (bubblewrap): the student's process sees only what is bound in for it (the system's
  libraries, the interpreter and its packages, the harness, its own work folder: an allow-list,
  nothing of the course, the submissions, the results, /root, /home or the machine's /tmp), no
  network, no other process, and a work folder that is a tmpfs of `limits.disk_mb`. Run as root,
  it also drops to `sandbox.user`.
- `process`: a plain child with resource limits, as `sandbox.user` when grading as root. It sees
  the machine's files, so it is used only where course.yaml accepts it (`sandbox.accept_weaker`);
  otherwise grading refuses to run student code and says how to fix the machine.

`auto` takes bwrap when it works on this machine. In both, a keeper process (keeper.py) starts
the student's process and ends everything it started, even when the grader is killed; a cgroup,
where the machine lets us make one, or else a watchdog, holds the student's processes to
`limits.memory_mb`, `limits.processes` and `limits.disk_mb`, and output is capped.

What the keeper is told (bubblewrap's options, the command, environment, limits, filter and
cgroup) is a launch plan that plan.py works out from the settings; here the folders and the cgroup
are made, and the plan started and watched.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from . import limits as measure
from .keeper import reap
from .binds import INSIDE_WORK
from .limits import DISK, MEMORY, PROCESSES, Cgroup
from ..process import signal_on_parent_death
# (OPEN_FILES: for those who read what a plan holds)
from .plan import (HARNESS, OPEN_FILES, LaunchPlan, keeper_spec, launch_plan,  # noqa: F401
                   work_inside)
# (Isolation, bwrap_works and course_standins: for those who start sandboxes)
from .settings import (Isolation, SandboxConfig,  # noqa: F401
                       bwrap_works, choose_isolation, course_standins, sandbox_folder)

log = logging.getLogger(__name__)

WATCH_SECONDS = 0.2
# Children of this process that are no sandbox's orphans: the keepers of the zygotes it holds
# (forked.py), where it also opens sandboxes of its own (tests do)
NOT_ORPHANS: set[int] = set()
SIGNAL_WORDS = {      # how a student's process ended, in words that follow "it"
    "SIGSEGV": "crashed with a segmentation fault (SIGSEGV: native code read memory it must not)",
    "SIGBUS": "crashed with a bus error (SIGBUS)",
    "SIGFPE": "crashed with an arithmetic error (SIGFPE)",
    "SIGILL": "crashed on an illegal instruction (SIGILL)",
    "SIGABRT": "aborted (SIGABRT)",
    "SIGKILL": "was killed (SIGKILL)",
}
@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags, from /proc/cpuinfo (empty where it cannot be read); read once, not
    for every student."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    except OSError as error:
        log.info("/proc/cpuinfo cannot be read (%s): torch picks its CPU kernels", error)
    return frozenset()


_TOLD: set[str] = set()     # the reasons already logged at WARNING by this process


def sandbox_cgroup(limits, parents: dict[str, str] | None = None) -> Cgroup | None:
    """A cgroup of its own for a sandbox (`Cgroup.create`), or None where this machine refuses
    one: then the watchdog keeps its limits by polling, and the log says why (at WARNING once a
    process, each later sandbox at DEBUG)."""
    cgroup = Cgroup.create(limits, parents)
    if cgroup is None:
        why = why_no_cgroup(parents)
        log.log(logging.DEBUG if why in _TOLD else logging.WARNING,
                "no cgroup for the sandbox (%s): the watchdog keeps its limits by polling", why)
        _TOLD.add(why)
    return cgroup


def why_no_cgroup(parents: dict[str, str] | None = None) -> str:
    """Why `Cgroup.create` made none, as far as this process can see: where it was asked to make
    one, or where this process's own cgroup is and whether it may write there."""
    if parents:
        return "none could be made in " + ", ".join(
            f"{folder} ({controller or 'v2'})" for controller, folder in sorted(parents.items()))
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as error:
        return f"/proc/self/cgroup cannot be read: {error}"
    for line in lines:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and not controllers:           # cgroup v2
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            parent = folder.parent if folder != Path("/sys/fs/cgroup") else folder
            return (f"this process's cgroup v2 is {folder}; neither it nor {parent} lets it "
                    f"make one with memory.max and pids.max"
                    + ("" if os.access(parent, os.W_OK) else f" ({parent} is not writable)"))
    return ("no cgroup v2, and the cgroup v1 memory and pids controllers refused a group beside "
            "this process's (" + "; ".join(lines) + ")")


def kernel_environment(cpu_kernels: str) -> dict[str, str]:
    """The environment that picks torch's CPU kernels for student code (`sandbox.cpu_kernels`).

    "avx2" asks ATen for its AVX2 kernels on a CPU that also has AVX-512. On such a CPU, torch
    2.13's AVX-512 softmax over a last dimension of 10 (every attention of the sorting model) took
    570 us against 77 us with AVX2, and a training step of the course's recipe 19 ms against 12
    (bench/README.md). It also makes AVX2 and AVX-512 hosts run the same ATen kernels (MKL still
    picks its own). ATen is not relied on to check that the CPU has what it is asked for, so the
    variable is only set where /proc/cpuinfo lists avx2 and fma; elsewhere (ARM, old x86), and
    with "auto", torch chooses as usual."""
    if cpu_kernels == "avx2" and {"avx2", "fma"} <= cpu_flags():
        return {"ATEN_CPU_CAPABILITY": "avx2"}
    return {}


# -- the watchdog's view of the processes -------------------------------------------------------
def _process_table() -> dict[int, int]:
    """pid -> parent pid, for every process we can see."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            table[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return table


def descendants(root: int, table: dict[int, int] | None = None) -> list[int]:
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, parent in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


class Fresh:
    """Starts a sandbox's plan afresh: in folders made for it, held by a cgroup of its own, by its
    keeper (keeper.py), which starts a new interpreter. The other ways: forked.Forked (a student's
    process forked from a zygote) and forked.AsZygote (the zygote's own sandbox).

    A launcher says how a sandbox is prepared, started, watched and ended: `prepare`, `start`,
    `orphans`, `kill_targets`, `killed` and `closed`, called by its Sandbox; `forked`, whether its
    process is forked from a zygote; `unix_sockets`, whether the plan's filter allows AF_UNIX
    sockets (None: where the cgroup counts memory); `watched`, whether the sandbox collects the
    process's output and watches its limits."""
    forked = False
    unix_sockets: bool | None = None
    watched = True

    def prepare(self, sandbox: Sandbox) -> None:
        sandbox._prepare_folders()

    def start(self, sandbox: Sandbox) -> tuple[subprocess.Popen, int, int]:
        """The keeper, and the two ends of the request channel (to the process, from it)."""
        sandbox.cgroup = sandbox_cgroup(sandbox.config.limits, sandbox.config.cgroup_parents)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        process = start_keeper(sandbox._plan(), to_child_r, from_child_w, subprocess.PIPE)
        return process, to_child_w, from_child_r

    def orphans(self, sandbox: Sandbox, table: dict[int, int]) -> list[int]:
        """Processes that escaped to us as their subreaper (when the keeper itself was killed).

        The grader process that owns a sandbox has no other children, so any child but the
        sandbox's keeper (or the keeper of a zygote this process holds: NOT_ORPHANS) is something
        the student left behind.
        """
        me = os.getpid()
        known = ({sandbox.process.pid} if sandbox.process else set()) | NOT_ORPHANS
        found = []
        for pid, parent in table.items():
            if parent == me and pid not in known:
                found.append(pid)
                found += descendants(pid, table)
        return found

    def kill_targets(self, sandbox: Sandbox) -> list[int]:
        """Whom one round of `kill` signals: the student's processes, and the keeper."""
        return [*sandbox._members(), sandbox.process.pid]

    def killed(self, sandbox: Sandbox) -> None:
        """After `kill` (of a started sandbox): the keeper ended, nothing more to end."""

    def closed(self, sandbox: Sandbox) -> None:
        """After `close`: nothing more to close."""


class Sandbox:
    """One sandboxed process, started by its `launcher` (Fresh, forked.Forked or forked.AsZygote).
    `start()` returns the two ends of the request channel."""

    def __init__(self, config: SandboxConfig, launcher=None):
        self.launcher = launcher or Fresh()
        self.config = config
        isolation = choose_isolation(config)
        self.mode, self.drop_to = isolation.mode, isolation.user
        self.warning, self.refusal = isolation.warning, isolation.refusal
        self.process: subprocess.Popen | None = None
        self.cgroup: Cgroup | None = None
        self.fd_in = self.fd_out = -1
        self.base = Path(tempfile.mkdtemp(prefix="tfgrade-", dir=sandbox_folder(config)))
        self.work, self.lib = self.base / "work", self.base / "lib"
        self.output = bytearray()
        self.output_dropped = 0
        self.exceeded: str | None = None        # MEMORY, PROCESSES or DISK, once one is hit
        self.peak_rss_kb = 0                     # the most memory the student's processes held
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._inside_pid: int | None = None      # a process whose root is the sandbox's
        self._cpu = 0.0                          # the most CPU seconds `cpu_seconds` has read
        self.launcher.prepare(self)

    @property
    def forked(self) -> bool:
        """Whether its process is forked from a zygote (forked.py)."""
        return self.launcher.forked

    @property
    def memory_exceeded(self) -> bool:
        return self.exceeded == MEMORY

    # -- folders ------------------------------------------------------------------------------
    def _prepare_folders(self):
        here = Path(__file__).parent
        self.work.mkdir()
        self.lib.mkdir()
        (self.work / "tmp").mkdir()
        for name in HARNESS:
            shutil.copy(here / name, self.lib / name)
        for name, text in self.config.harness.items():
            (self.lib / name).write_text(text, encoding="utf-8")
        shutil.copy(here / "keeper.py", self.base / "keeper.py")
        # What student code may import of tfcourse: the student library and its messages only.
        public = Path(__file__).resolve().parents[1]
        (self.lib / "tfcourse").mkdir()
        for name in ("__init__.py", "i18n.py"):
            shutil.copy(public / name, self.lib / "tfcourse" / name)
        for name in ("student", "locale"):
            shutil.copytree(public / name, self.lib / "tfcourse" / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name, text in self.config.files.items():
            (self.work / name).write_text(text, encoding="utf-8")
        self._write_users()
        os.chmod(self.base, 0o711)
        if self.drop_to and self.mode == "process":
            for path in (self.work, self.work / "tmp", *self.work.iterdir()):
                os.chown(path, *self.drop_to)

    def _write_users(self) -> None:
        """/etc/passwd and /etc/group for the sandbox: root and the sandbox user, no one else."""
        uid, gid = self.drop_to or (os.geteuid(), os.getegid())
        etc = self.base / "etc"
        etc.mkdir()
        (etc / "passwd").write_text(f"root:x:0:0:root:/:/usr/sbin/nologin\n"
                                    f"student:x:{uid}:{gid}:student:{INSIDE_WORK}:/bin/sh\n")
        (etc / "group").write_text(f"root:x:0:\nstudent:x:{gid}:\n")

    @property
    def work_inside(self) -> Path:
        """The work folder as student code sees it."""
        return work_inside(self.mode, self.base)

    # -- starting -----------------------------------------------------------------------------
    def _plan(self) -> LaunchPlan:
        """This sandbox's launch plan (plan.py), with what it needs of this machine measured
        here, and the cgroup it has now."""
        return launch_plan(
            self.config, self.mode, self.drop_to, self.base, cgroup=self.cgroup,
            unix_sockets=self.launcher.unix_sockets,
            kernels=kernel_environment(self.config.cpu_kernels),
            footprint_kb=self._footprint_kb(), data=resource.getrlimit(resource.RLIMIT_DATA)[1])

    def _footprint_kb(self) -> int | None:
        """What the interpreter maps to import torch, as the student's user (measured once)."""
        return measure.interpreter_footprint_kb(self.drop_to if self.mode == "process" else None)

    def _pids_counted(self) -> bool:
        return self.cgroup is not None and self.cgroup.pids is not None

    def start(self) -> tuple[int, int]:
        """Start its process (as the launcher does); nothing when grading refused."""
        if self.refusal:
            return -1, -1
        self.process, self.fd_in, self.fd_out = self.launcher.start(self)
        if self.launcher.watched:
            self._begin_watching()
        return self.fd_in, self.fd_out

    def start_afresh(self) -> None:
        """From now on a fresh sandbox (Fresh), with folders of its own (a zygote could not
        serve)."""
        self.launcher = Fresh()
        self.base = Path(tempfile.mkdtemp(prefix="tfgrade-", dir=sandbox_folder(self.config)))
        self.work, self.lib = self.base / "work", self.base / "lib"
        self.launcher.prepare(self)

    def _begin_watching(self) -> None:
        """Collect the student's output and watch its limits, once its process is started."""
        self._stop.clear()
        threading.Thread(target=self._drain, daemon=True).start()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    # -- watching -----------------------------------------------------------------------------
    def _drain(self):
        limit = self.config.output_kb * 1024
        stream = self.process.stdout
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            room = limit - len(self.output)
            if room > 0:
                self.output += chunk[:room]
            self.output_dropped += max(0, len(chunk) - max(room, 0))

    def _watch(self):
        tick = 0
        while not self._stop.wait(WATCH_SECONDS):
            if not self.alive():
                return
            kind = self._measure(thorough=tick % 5 == 0)
            if kind:
                self.exceeded = self.exceeded or kind
                self.kill()
                return
            tick += 1

    def _members(self, table: dict[int, int] | None = None) -> list[int]:
        """The student's processes: the cgroup's members, or the keeper's descendants (the keeper
        is their subreaper) and anything that escaped to us. Never the keeper itself."""
        table = _process_table() if table is None else table
        found = set(self.cgroup.members()) if self.cgroup else set()
        if self.process is not None:
            found.update(descendants(self.process.pid, table))
            found.discard(self.process.pid)
        found.update(self._orphans(table))
        return sorted(found)

    def _measure(self, thorough: bool) -> str | None:
        """Which limit the student's processes are over now, if any; records the peak memory."""
        kind = self.cgroup.exceeded() if self.cgroup else None
        if kind:
            return kind
        pids = self._members()
        if self.cgroup is not None and self.cgroup.memory is not None:
            self.peak_rss_kb = max(self.peak_rss_kb, self.cgroup.peak_kb())
        else:
            held = measure.memory_held_kb(pids, read_map_files=os.geteuid() == 0)
            self.peak_rss_kb = max(self.peak_rss_kb, held)
            if held > self.config.memory_mb * 1024:
                return MEMORY
        if not self._pids_counted() and measure.tasks(pids) >= self.config.processes:
            return PROCESSES
        return DISK if self._disk_full(pids, thorough) else None

    def _disk_full(self, pids: list[int], thorough: bool) -> bool:
        """Whether the student's processes filled the disk they may write to: the work folder's
        tmpfs in bwrap (seen through a process inside); the work folder, and in a `thorough` look
        what the sandbox user keeps in the machine's shared temporary folders, otherwise."""
        limit = self.config.disk_mb
        if self.mode == "bwrap":
            for pid in [self._inside_pid, *reversed(pids)]:
                try:
                    used, full = measure.tmpfs_used_mb(f"/proc/{pid}/root{INSIDE_WORK}")
                except (OSError, TypeError):
                    continue
                self._inside_pid = pid
                return full or used >= limit
            return False
        used = measure.folder_mb(self.work, limit)
        if thorough and self.drop_to and self.drop_to[0] != os.geteuid() and used < limit:
            used += measure.shared_temp_mb(self.drop_to[0], limit - used, self.base)
        return used >= limit

    def cpu_seconds(self) -> float:
        """CPU seconds the student's processes have spent since the sandbox started, all of them
        together, those that ended included: what its cgroup counts (cgroup v2 `cpu.stat`, v1
        `cpuacct`), else the process tree's own times in /proc (a fresh sandbox's keeper adds
        those of the processes it reaped). Never less than it said before: a process's time
        moves to its parent's when it is reaped, and a reading may fall between the two."""
        used = self.cgroup.cpu_seconds() if self.cgroup is not None else None
        if used is None:
            reapers = [self.process.pid] if self.process is not None and not self.forked else []
            used = measure.cpu_seconds(self._members(), reapers)
        self._cpu = max(self._cpu, used)
        return self._cpu

    def limit_exceeded(self) -> str | None:
        """The limit the student's processes went over, as the student should read it ("used more
        than 768 MB of memory"), or None. Looks now, not only at the watchdog's last look: a fork
        refused or a disk found full must be told as such, not as the error it caused."""
        if self.exceeded is None and self.cgroup is not None:
            self.exceeded = self.cgroup.exceeded()
        if self.exceeded is None and self.alive():
            looking = not self._pids_counted() or (self.mode == "bwrap" and not self._inside_pid)
            pids = self._members() if looking else []
            if not self._pids_counted() and measure.tasks(pids) >= self.config.processes:
                self.exceeded = PROCESSES
            elif self._disk_full(pids, thorough=False):
                self.exceeded = DISK
        return self.config.limits.message(self.exceeded) if self.exceeded else None

    # -- ending -------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def settle(self, seconds: float = 1.0) -> None:
        """Give a process that is ending on its own a moment, so that its own way of ending, not
        our kill, is what `exit_description` reports."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def exit_description(self) -> str:
        """How the process ended, in words that follow "it": "exited with status 3"."""
        code = self.process.poll() if self.process else None
        if code is None:
            return "is still running"
        if self.mode == "bwrap" and code > 128:   # bwrap exits with 128 + the signal that ended
            code = 128 - code                      # its child, as a shell does
        if code >= 0:
            return f"exited with status {code}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return SIGNAL_WORDS.get(name, f"was killed by {name}")

    def kill(self):
        """Kill the student's process and everything it started, wherever it went."""
        process = self.process
        if process is None:
            return
        for _ in range(5):
            if self.cgroup is not None:
                self.cgroup.kill()
            for pid in self._kill_targets():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                continue
            reap()
            if not self._members():
                break
        self._stop.set()
        self.launcher.killed(self)

    def _kill_targets(self) -> list[int]:
        return self.launcher.kill_targets(self)

    def _orphans(self, table: dict[int, int] | None = None) -> list[int]:
        """Processes that escaped to us (launcher.orphans)."""
        return self.launcher.orphans(self, _process_table() if table is None else table)

    def close(self):
        self.kill()
        # The watchdog may still be killing (after a limit was hit): let it finish, or it would
        # take the next sandbox's keeper, a child of ours too, for a daemon left behind.
        if self._watchdog is not None and self._watchdog is not threading.current_thread() \
                and self._watchdog.ident is not None:      # (not started: out of memory)
            self._watchdog.join()
        if self.cgroup is not None:
            self.peak_rss_kb = max(self.peak_rss_kb, self.cgroup.peak_kb())
            self.cgroup.remove()
        shutil.rmtree(self.base, ignore_errors=True)
        if self.mode == "process" and self.drop_to and self.drop_to[0] not in (0, os.geteuid()):
            # what the student left in /tmp, /var/tmp and /dev/shm goes before the next student
            # (one at a time in this mode: runner.refuse_side_by_side)
            measure.remove_leftovers(self.drop_to[0])
        self.launcher.closed(self)


# -- the fresh start of a plan --------------------------------------------------------------------
def _keeper_spec(plan: LaunchPlan, fd_in: int, fd_out: int) -> dict:
    """What the keeper is told (plan.keeper_spec), and the file descriptors it hands on: the
    channel's ends; in bwrap, its options and filter, each in a file of its own."""
    passed, arguments_fd = [fd_in, fd_out], -1
    if plan.mode == "bwrap":
        seccomp_fd = _memory_file(plan.seccomp)
        arguments = [*plan.bwrap, "--seccomp", str(seccomp_fd)]
        arguments_fd = _memory_file(b"".join(a.encode() + b"\0" for a in arguments))
        passed += [arguments_fd, seccomp_fd]
    return keeper_spec(plan, fd_in, fd_out, arguments_fd, passed)


def start_keeper(plan: LaunchPlan, fd_in: int, fd_out: int, stdout,
                 not_orphan: bool = False) -> subprocess.Popen:
    """Start `plan` afresh: its keeper (keeper.py), which starts the plan's process and hands it
    `fd_in` and `fd_out` (closed here once handed on); its output goes to `stdout`. `not_orphan`:
    the keeper is one of NOT_ORPHANS from its start (a zygote's)."""
    spec = _keeper_spec(plan, fd_in, fd_out)
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(plan.base / "keeper.py")], pass_fds=spec["fds"],
        stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.STDOUT, cwd=plan.base,
        env=plan.environment, start_new_session=True, preexec_fn=_die_with_grader)
    if not_orphan:
        NOT_ORPHANS.add(process.pid)            # for this process's own sandboxes, if any
    for fd in spec["fds"]:
        os.close(fd)
    try:
        process.stdin.write(json.dumps(spec).encode())
        process.stdin.close()
    except BrokenPipeError:              # the keeper could not start: the session says so
        pass
    return process


def _memory_file(data: bytes) -> int:
    """A file descriptor of an anonymous file holding `data`, read from its start."""
    fd = os.memfd_create("bwrap-arguments")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _die_with_grader() -> None:
    """In the keeper, before it starts: SIGTERM when the grader dies, so that it ends the
    sandbox (the keeper checks that the grader did not die before this was set)."""
    signal_on_parent_death(signal.SIGTERM)


def describe(course) -> str:
    """One line on how this machine would isolate the course's student code, for a setup check
    ("REFUSED: ..." when grading would not run it). Measures the interpreter's footprint, so that
    the first submission need not."""
    config = SandboxConfig.from_course(course, {}, 1, [])
    isolation = choose_isolation(config)
    if isolation.refusal:
        return f"REFUSED: {isolation.refusal}"
    footprint = measure.interpreter_footprint_kb(isolation.user if isolation.mode == "process"
                                                 else None)
    cgroup = Cgroup.create(config.limits)
    kept = f"a cgroup (v{cgroup.version})" if cgroup else "the watchdog (no cgroup can be made)"
    if cgroup:
        cgroup.remove()
    uid = isolation.user[0] if isolation.user else os.geteuid()
    return (f"isolation: {isolation.mode}, student code as uid {uid}; limits kept by {kept}; "
            f"torch maps {(footprint or 0) >> 10} MB to import"
            + (f"; note: {isolation.warning}" if isolation.warning else ""))


def main(argv=None) -> int:
    """`python -m tfcourse.sandbox.launch COURSE`: say how student code would be isolated;
    status 1 when grading would refuse to run it."""
    from tfcourse.course import load_course

    line = describe(load_course((argv or sys.argv[1:] or [None])[0]))
    print(line)
    return 1 if line.startswith("REFUSED") else 0


if __name__ == "__main__":
    sys.exit(main())
