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
"""
from __future__ import annotations

import functools
import json
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
from .binds import (INSIDE_LIB, INSIDE_PYTHON, INSIDE_WORK, Binds, gpu_binds, interpreter_binds,
                    mask_hidden, system_binds, under)
from .limits import DISK, MEMORY, PROCESSES, Cgroup
from ..process import signal_on_parent_death
from .seccomp import student_filter
# (Isolation, bwrap_works and course_standins: for those who start sandboxes)
from .settings import (Isolation, SandboxConfig, _unshare_flags,  # noqa: F401
                       bwrap_works, choose_isolation, course_standins, sandbox_folder)

HARNESS = ("worker.py", "channel.py", "rulebook.py")
ALWAYS_HIDDEN = (Path("/root"), Path("/home"), Path("/tmp"))
WATCH_SECONDS = 0.2
# Open files of each student's process (a student has no use for more)
OPEN_FILES = 256
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
# Sets RLIMIT_NPROC inside bubblewrap's user namespace (set outside, it would count every process
# of the grader's user), then runs the worker.
NPROC_TRAMPOLINE = ("import os, resource, sys; n = int(sys.argv[1]); "
                    "resource.setrlimit(resource.RLIMIT_NPROC, (n, n)); "
                    "os.execv(sys.argv[2], sys.argv[2:])")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags, from /proc/cpuinfo (empty where it cannot be read); read once, not
    for every student."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


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


class Sandbox:
    """One student process. `start()` returns the two ends of the request channel."""

    def __init__(self, config: SandboxConfig):
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
        self._prepare_folders()

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
        return INSIDE_WORK if self.mode == "bwrap" else self.work

    # -- starting -----------------------------------------------------------------------------
    def _worker(self, python: Path, lib: Path, fd_in: int, fd_out: int) -> list[str]:
        return [str(python), "-E", "-s", "-B", str(lib / "worker.py"),
                "--fd-in", str(fd_in), "--fd-out", str(fd_out)]

    def _bwrap_arguments(self) -> tuple[list[str], Path]:
        """Everything bwrap is told but the command, and the interpreter's path inside."""
        binds = Binds()
        system_binds(binds)
        python = interpreter_binds(binds)
        work = INSIDE_WORK
        binds.bind(self.lib, INSIDE_LIB)
        binds.arguments += ["--perms", "01777", "--size", str(self.config.disk_mb << 20),
                            "--tmpfs", str(work), "--perms", "01777", "--dir", str(work / "tmp")]
        for name in self.config.files:
            binds.add("--ro-bind", str(self.work / name), work / name)
        for name in ("passwd", "group"):
            binds.add("--ro-bind", str(self.base / "etc" / name), Path("/etc", name))
        if any(under(inside, Path("/tmp")) for inside in binds.trees.values()):
            binds.arguments += ["--perms", "0755", "--dir", "/tmp"]     # read-only, below
        else:
            binds.add("--symlink", str(work / "tmp"), Path("/tmp"))
        hidden = {Path(os.path.realpath(p)) for p in [*self.config.hide, *ALWAYS_HIDDEN,
                                                         Path.home()] if Path(p).exists()}
        mask_hidden(binds, sorted(hidden))
        binds.arguments += ["--proc", "/proc", "--dev", "/dev"]
        if self.config.gpu:
            gpu_binds(binds)
        binds.arguments += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", str(work),
                            *_unshare_flags()]
        if self.drop_to:
            binds.arguments += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return binds.arguments, python

    def _command(self, fd_in: int, fd_out: int, arguments_fd: int, python: Path) -> list[str]:
        """The command the keeper runs. In bwrap, its options come through `arguments_fd`, so that
        bwrap's own command line (visible inside as /proc/1/cmdline) names no host path."""
        if self.mode != "bwrap":
            return self._worker(Path(sys.executable), self.lib, fd_in, fd_out)
        command = ["bwrap", "--args", str(arguments_fd), "--"]
        if self.drop_to:
            uid, gid = self.drop_to
            command += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all"]
        if self._nproc_inside():
            command += [str(python), "-I", "-S", "-c", NPROC_TRAMPOLINE,
                        str(self.config.processes)]
        return command + self._worker(python, INSIDE_LIB, fd_in, fd_out)

    def _nproc_inside(self) -> bool:
        """Whether RLIMIT_NPROC must be set inside bubblewrap's user namespace (no pids cgroup,
        not root)."""
        return self.mode == "bwrap" and os.geteuid() != 0 and not self._pids_counted()

    def _pids_counted(self) -> bool:
        return self.cgroup is not None and self.cgroup.pids is not None

    def _environment(self) -> dict[str, str]:
        threads = str(self.config.threads)
        in_venv = sys.prefix != sys.base_prefix
        python_bin = (INSIDE_PYTHON / "bin" if self.mode == "bwrap" and in_venv
                      else Path(sys.executable).parent)
        environment = {"PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
                       "HOME": str(self.work_inside), "TMPDIR": str(self.work_inside / "tmp"),
                       "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": threads,
                       "MKL_NUM_THREADS": threads, "PYTHONHASHSEED": "0",
                       "PYTHONDONTWRITEBYTECODE": "1",
                       **kernel_environment(self.config.cpu_kernels)}
        if not self.config.gpu:
            environment["CUDA_VISIBLE_DEVICES"] = ""      # and bwrap shows no GPU device
        elif "CUDA_VISIBLE_DEVICES" in os.environ:
            environment["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        return environment

    def _rlimits(self) -> dict[str, tuple[int, int]]:
        """The student's process's resource limits. The address space is only a backstop against
        one huge allocation (the cgroup or the watchdog limit real memory): what the interpreter
        maps to import torch, measured on this machine, plus twice the memory limit. None with a
        GPU, whose driver reserves far more address space than it uses."""
        disk = self.config.disk_mb << 20
        # the grader's own memory limit (RLIMIT_DATA, where no cgroup holds it) is not theirs
        data = resource.getrlimit(resource.RLIMIT_DATA)[1]
        found = {"RLIMIT_CORE": (0, 0), "RLIMIT_FSIZE": (disk, disk),
                 "RLIMIT_NOFILE": (OPEN_FILES, OPEN_FILES), "RLIMIT_DATA": (data, data)}
        footprint = measure.interpreter_footprint_kb(self.drop_to if self.mode == "process"
                                                     else None)
        if footprint and not self.config.gpu:
            space = (footprint << 10) + ((2 * self.config.memory_mb + 1024) << 20)
            found["RLIMIT_AS"] = (space, space)
        if self.mode == "process" and not self._pids_counted() and self.drop_to and \
                self.drop_to[0] != os.geteuid():
            # No PID namespace to kill a fork bomb at once: the kernel must stop it. It counts
            # every process of the sandbox user, so graders running side by side share it.
            found["RLIMIT_NPROC"] = (self.config.processes, self.config.processes)
        return found

    def start(self) -> tuple[int, int]:
        """Start the keeper, which starts the student's process; nothing when grading refused."""
        if self.refusal:
            return -1, -1
        self.cgroup = Cgroup.create(self.config.limits, self.config.cgroup_parents)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        spec = self._keeper_spec(to_child_r, from_child_w)
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(self.base / "keeper.py")], pass_fds=spec["fds"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=self.base, env=self._environment(), start_new_session=True,
            preexec_fn=_die_with_grader)
        for fd in spec["fds"]:
            os.close(fd)
        try:
            self.process.stdin.write(json.dumps(spec).encode())
            self.process.stdin.close()
        except BrokenPipeError:              # the keeper could not start: the session says so
            pass
        self.fd_in, self.fd_out = to_child_w, from_child_r
        self._begin_watching()
        return to_child_w, from_child_r

    def _begin_watching(self) -> None:
        """Collect the student's output and watch its limits, once its process is started."""
        self._stop.clear()
        threading.Thread(target=self._drain, daemon=True).start()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    def _unix_sockets(self) -> bool:
        """Whether the student's code may make AF_UNIX sockets: where a cgroup counts what their
        buffers hold (seccomp.py)."""
        return self.cgroup is not None and self.cgroup.memory is not None

    def _keeper_spec(self, fd_in: int, fd_out: int) -> dict:
        """What the keeper is told: the command, its folder, limits, user and cgroup, and the file
        descriptors it hands on (the channel's ends; bwrap's options)."""
        passed, arguments_fd, python = [fd_in, fd_out], -1, Path(sys.executable)
        calls = student_filter(self._unix_sockets())
        if self.mode == "bwrap":
            arguments, python = self._bwrap_arguments()
            seccomp_fd = _memory_file(calls)
            arguments += ["--seccomp", str(seccomp_fd)]
            arguments_fd = _memory_file(b"".join(a.encode() + b"\0" for a in arguments))
            passed += [arguments_fd, seccomp_fd]
        return {"command": self._command(fd_in, fd_out, arguments_fd, python),
                "cwd": str(self.work), "base": str(self.base), "rlimits": self._rlimits(),
                "grader": os.getpid(),
                "user": self.drop_to if self.mode == "process" else None, "fds": passed,
                "seccomp": calls.hex() if self.mode == "process" else "",
                "cgroup_procs": self.cgroup.procs_files if self.cgroup else [],
                "cgroup_folders": [str(f) for f in self.cgroup.folders] if self.cgroup else []}

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

    def _kill_targets(self) -> list[int]:
        """Whom one round of `kill` signals: the student's processes, and the keeper."""
        return [*self._members(), self.process.pid]

    def _orphans(self, table: dict[int, int] | None = None) -> list[int]:
        """Processes that escaped to us as their subreaper (when the keeper itself was killed).

        The grader process that owns a sandbox has no other children, so any child but the
        sandbox's keeper (or the keeper of a zygote this process holds: NOT_ORPHANS) is something
        the student left behind.
        """
        table = _process_table() if table is None else table
        me = os.getpid()
        known = ({self.process.pid} if self.process else set()) | NOT_ORPHANS
        found = []
        for pid, parent in table.items():
            if parent == me and pid not in known:
                found.append(pid)
                found += descendants(pid, table)
        return found

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
