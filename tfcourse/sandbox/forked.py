"""Students' processes forked from a zygote that has imported torch once (zygote.py), where the
machine allows it: grading as root, in bubblewrap, with one torch thread.

- Each thread that starts graders holds one zygote (a `Zygotes`, made and closed by whoever owns the
  thread: a job slot of the feedback service; a `ZygotePool` lends them to a runner's workers): a
  `Zygote`, whose own sandbox (started by `AsZygote`) has the very allow-list, interpreter and
  environment a student's process gets. For each job it asks whether the zygote fits the job's
  sandboxes (`fitting`: their KEY is the zygote's, the same bwrap arguments but the work folder's
  files, so the same paths hidden, the same interpreter, environment, harness, user and threads),
  and only then hands its control socket to the grader (`--zygote-fd FD`, and the KEY in the
  grader's job).
- A grader's `open_sandbox` forks the student's process from the zygote its sandbox settings name
  (SandboxConfig.zygote: the `HandedZygote` its job was handed) as given (a sandbox started by
  `Forked`); with none, or once the zygote failed or is gone, it starts a fresh sandbox as before
  (launch.Fresh).

A forked student's process is watched and limited as any other (its own cgroup, the watchdog, the
output cap): only how it starts differs, and the isolation is the same (docs/sandbox.md). Its pages
shared with the zygote (torch's code and data, about 200 MB) are charged to the zygote's cgroup,
not the student's, so `limits.memory_mb` counts only what the student's process itself adds.

TFCOURSE_STUDENT_FORKS=0 turns it off: a fresh sandboxed interpreter for every student's process.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .launch import (NOT_ORPHANS, Fresh, Sandbox, SandboxConfig, _memory_file, choose_isolation,
                     course_standins, kernel_environment, start_keeper)
from .limits import Cgroup
from .plan import bwrap_options, environment, zygote_plan

log = logging.getLogger(__name__)

SWITCH = "TFCOURSE_STUDENT_FORKS"
# What the zygote may do inside bubblewrap: make each student's namespaces and mounts, drop to the
# sandbox user, let the student's PID 1 kill what the student left (processes of the sandbox
# user), and remove a student's cgroup when its grader died (a cgroup v1 hierarchy's root folder
# is mode 555: only DAC_OVERRIDE writes there). The student's process keeps none of them
# (zygote.py checks).
ZYGOTE_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP",
                       "CAP_NET_ADMIN", "CAP_KILL", "CAP_DAC_OVERRIDE")
READY_SECONDS = 30                         # for the student's process to be made
MESSAGE = 4096
UCRED = struct.Struct("iII")


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


class ZygoteFailed(Exception):
    """No student's process could be forked: the grader starts a fresh one instead."""


def fork_key(config: SandboxConfig) -> str | None:
    """What a student's process forked from a zygote shares with it, as a digest of what sandboxes
    made with `config` would be given (their folder named "<base>", their files left out); None
    where a zygote cannot be used (not bubblewrap as root with a sandbox user, a GPU, more than one
    torch thread, a refusal)."""
    isolation = choose_isolation(config)
    user = isolation.user
    if unforkable(config, isolation) is not None:
        return None
    base = Path("<base>")
    arguments, python = bwrap_options(dataclasses.replace(config, files={}), base, user)
    shown = environment(config, isolation.mode, base, kernel_environment(config.cpu_kernels))
    text = json.dumps([arguments, str(python), shown, user, sorted(config.harness.items()),
                       config.threads])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def unforkable(config: SandboxConfig, isolation=None) -> str | None:
    """Why the students' processes of sandboxes made with `config` cannot be forked from a zygote
    (see `fork_key`), or None when they can."""
    isolation = isolation or choose_isolation(config)
    if isolation.refusal:
        return f"grading refuses to run student code here ({isolation.refusal})"
    if isolation.mode != "bwrap":
        return f"the sandbox is {isolation.mode}, not bubblewrap"
    if os.geteuid() != 0 or isolation.user is None:
        return "not grading as root with a sandbox user"
    if config.gpu:
        return "the students' processes have a GPU"
    if config.threads != 1:          # torch starts a thread at import with more: a fork keeps one
        return f"{config.threads} torch threads per process, not 1"
    return None


def fitting(config: SandboxConfig, zygote: "Zygote | None") -> str | None:
    """`zygote`'s key when the students' processes of sandboxes made with `config` may be forked
    from it (their fork key is its: the zygote shows them nothing their own sandbox would hide),
    else None. The runner asks it of each job, once; the grader forks as its job says."""
    if zygote is None or zygote.key is None:
        return None
    return zygote.key if fork_key(config) == zygote.key else None


def handed(config: SandboxConfig, zygote: "Zygote | None") -> SandboxConfig:
    """`config`, naming `zygote`'s control socket when `zygote` fits it (`fitting`), as a grader's
    settings name the zygote its job hands on; else (or before it started) `config` as it is."""
    if zygote is None or zygote.control is None or fitting(config, zygote) is None:
        return config
    return dataclasses.replace(config, zygote=HandedZygote(zygote.control.fileno()))


# -- the runner's side: one zygote per grading thread ----------------------------------------------
class AsZygote(Fresh):
    """Starts a zygote's own sandbox: bubblewrap as for a student, with the zygote's capabilities
    (plan.zygote_plan), and zygote.py in place of the worker, by the keeper (keeper.py), so that it
    and every student's process forked from it end when the runner's thread does. Its filter
    allows AF_UNIX sockets: its students, who inherit it, are forked into cgroups only. Nothing
    watches it but its `Zygote`; the runner's other children are not its orphans."""
    unix_sockets = True
    watched = False

    def prepare(self, sandbox: Sandbox) -> None:
        super().prepare(sandbox)
        here = Path(__file__).parent
        (sandbox.lib / "zygote.py").write_bytes((here / "zygote.py").read_bytes())

    def start(self, sandbox: Sandbox) -> tuple[subprocess.Popen, int, int]:
        """The keeper, the zygote's control socket and the pipe on which it says it is ready."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ready_read, ready_write = os.pipe()
        plan = zygote_plan(sandbox._plan(), ZYGOTE_CAPABILITIES)
        with open(sandbox.base / "zygote.log", "wb") as log:
            # (the keeper closes `theirs` here once it is handed on)
            process = start_keeper(plan, theirs.detach(), ready_write, log, not_orphan=True)
        return process, ours.detach(), ready_read

    def orphans(self, sandbox: Sandbox, table: dict[int, int]) -> list[int]:
        return []

    def closed(self, sandbox: Sandbox) -> None:
        if sandbox.process is not None:
            NOT_ORPHANS.discard(sandbox.process.pid)


class Zygote:
    """A zygote for students' processes made with `config`: its sandbox (AsZygote), its `key`
    (fork_key; None where this machine allows no zygote) and, once started, its control socket."""

    def __init__(self, config: SandboxConfig):
        self.sandbox = Sandbox(config, AsZygote())
        self.key = fork_key(config)
        self.control: socket.socket | None = None
        self._ready_fd = -1
        self.refused: str | None = None

    def start(self) -> None:
        control, self._ready_fd = self.sandbox.start()
        self.control = socket.socket(fileno=control)
        os.set_blocking(self._ready_fd, False)

    def usable(self) -> bool:
        """Whether graders may still be sent to it: alive, and not refused at its start."""
        if self._ready_fd >= 0:
            try:
                said = os.read(self._ready_fd, 4096)
            except BlockingIOError:
                said = None                     # still importing torch: requests wait for it
            if said is not None:
                os.close(self._ready_fd)
                self._ready_fd = -1
                if said != b"ok":
                    self.refused = said.decode("utf-8", "replace") or "it ended at once"
        return self.refused is None and self.sandbox.alive()

    def wait_ready(self, timeout: float) -> bool:
        """Wait, at most `timeout` seconds, until the zygote says whether it started (its ready
        pipe, once torch is imported); whether it is usable. A request sent before then waits for
        it within the READY_SECONDS a student's process has to be made."""
        if self._ready_fd >= 0:
            select.select([self._ready_fd], [], [], timeout)
        return self.usable() and self._ready_fd < 0

    def close(self) -> None:
        if self.control is not None:
            self.control.close()                # the zygote's loop ends
            self.control = None
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1
        process = self.sandbox.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)     # the keeper ends everything below it
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.sandbox.close()


STARTS = 2                                  # zygotes one Zygotes starts at most, for one course


class Zygotes:
    """The zygote of one thread that starts graders (a runner's worker, a job slot of the feedback
    service, one grading of its own): started for a course on first use, once more if it died,
    and closed by whoever made it. Its keeper ends when the thread that started it does
    (PR_SET_PDEATHSIG), with every student's process forked from it."""

    def __init__(self):
        self.wanted: str | None = None         # the course and settings it was started for
        self.host: Zygote | None = None
        self.starts = 0                         # how many were started for `wanted`

    def __enter__(self) -> "Zygotes":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def for_course(self, course, threads: int) -> Zygote | None:
        """The zygote for `course` (started on first use, once more if it died), or None where
        none can be used: turned off, not grading as root in bubblewrap, or it failed."""
        if not enabled():
            log.debug("zygotes turned off (%s=0): each student's process is started afresh",
                      SWITCH)
            return None
        wanted = json.dumps([str(course.root), threads, course_standins(course),
                             repr(course.sandbox), repr(course.limits)])
        if self.wanted != wanted:
            self.close()
            self.wanted, self.starts = wanted, 0
        if self.host is not None:
            if self.host.usable():
                return self.host
            if self.host.refused:               # it would refuse again (torch's threads)
                self.starts = STARTS
                log.warning("the zygote refused at its start (%s): each student's process is "
                            "started afresh", self.host.refused)
            else:
                log.warning("the zygote ended: another is started (%d of %d so far)",
                            self.starts, STARTS)
            self.host.close()
            self.host = None
        if self.starts >= STARTS:
            return None
        self.starts += 1
        host = None
        try:
            config = SandboxConfig.from_course(course, {}, threads, [])
            host = Zygote(config)
            if host.key is None:                # this machine does not allow it
                self.starts = STARTS
                log.info("no zygote: %s; each student's process is started afresh",
                         unforkable(config))
            else:
                host.start()
                self.host = host
                return host
        except (OSError, subprocess.SubprocessError) as error:
            print(f"tfcourse: no zygote for the students' processes ({error})", file=sys.stderr)
            log.warning("no zygote for the students' processes (%s: %s): each is started afresh",
                        type(error).__name__, error)
        if host is not None:
            host.close()
        return None

    def close(self) -> None:
        """End the zygote (and the students' processes forked from it); the course is forgotten."""
        if self.host is not None:
            self.host.close()
        self.host, self.wanted, self.starts = None, None, 0


_THREADS = threading.local()


def of_this_thread() -> Zygotes:
    """The zygote of a thread whose caller owns none (nbgrader's autograde, which grades a class
    one notebook after another in its main thread; Gradescope; a test): one for the thread's
    life, so that its gradings share it as a runner's do. Its keeper ends with the thread; the
    main thread's is closed at exit (its folders removed)."""
    own = getattr(_THREADS, "zygotes", None)
    if own is None:
        own = _THREADS.zygotes = Zygotes()
        if threading.current_thread() is threading.main_thread():
            atexit.register(own.close)
    return own


class ZygotePool:
    """Zygotes for gradings that run side by side in threads that are not ours (a runner's
    ThreadPoolExecutor, a Dask worker's tasks): each grading borrows one for its time, so that no
    two use one at once, and gives it back for the next; `close` ends them all. `make`: what is
    lent, a `Zygotes` or what holds one (batch/child.py's Warm, with a fork server)."""

    def __init__(self, make=Zygotes):
        self._make = make
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        self._all: list = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lend(self):
        try:
            zygotes = self._free.get_nowait()
        except queue.Empty:
            zygotes = self._make()
            with self._lock:
                self._all.append(zygotes)
        try:
            yield zygotes
        finally:
            self._free.put(zygotes)

    def close(self) -> None:
        with self._lock:
            every = list(self._all)
        for zygotes in every:
            zygotes.close()


# -- the grader's side: one student's process ----------------------------------------------------
class ForkedProcess:
    """The monitor of a forked student's process (zygote.py), with the part of subprocess.Popen's
    interface Sandbox uses: pid, poll(), wait(timeout), stdout. Its status comes on the reply
    socket; while that socket is open the monitor does not exit, so `pid` stays its own."""

    def __init__(self, reply: socket.socket, pid: int, output: int):
        self.pid, self._reply = pid, reply
        self.stdout = open(output, "rb")
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def _check(self, timeout: float) -> int | None:
        with self._lock:
            if self.returncode is None and self._reply is not None and \
                    select.select([self._reply], [], [], timeout)[0]:
                try:
                    message = self._reply.recv(MESSAGE)
                except OSError:
                    message = b""
                try:
                    self.returncode = int(json.loads(message)["status"])
                except (ValueError, KeyError, TypeError):
                    self.returncode = 128 + signal.SIGKILL     # the monitor itself was killed
            return self.returncode

    def poll(self) -> int | None:
        return self._check(0)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(["student"], timeout)
            code = self._check(left)
            if code is not None:
                return code

    def kill_monitor(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._reply is not None:
                self._reply.close()             # the monitor may exit now
                self._reply = None


class Forked:
    """Starts a sandbox's plan by asking the zygote a grader was handed (`zygote`) to fork its
    process: no folder (the files go to the zygote, in the request), a cgroup of its own; a fresh
    start (launch.Fresh) when the zygote cannot make it."""
    forked = True
    unix_sockets: bool | None = None
    watched = True

    def __init__(self, zygote: HandedZygote):
        self.zygote = zygote

    def prepare(self, sandbox: Sandbox) -> None:
        os.rmdir(sandbox.base)

    def start(self, sandbox: Sandbox) -> tuple[ForkedProcess | subprocess.Popen, int, int]:
        try:
            return self._start(sandbox)
        except ZygoteFailed as error:
            self.zygote.failed(str(error))
            sandbox.start_afresh()
            return sandbox.launcher.start(sandbox)

    def _start(self, sandbox: Sandbox) -> tuple[ForkedProcess, int, int]:
        # As a fresh sandbox counts: its bwrap is one process more in the cgroup than the init.
        limits = sandbox.config.limits
        sandbox.cgroup = Cgroup.create(dataclasses.replace(limits, processes=limits.processes - 1),
                                       sandbox.config.cgroup_parents)
        if sandbox.cgroup is None or sandbox.cgroup.memory is None:
            # The zygote's filter allows AF_UNIX sockets, whose buffers only a cgroup counts: a
            # fresh sandbox's filter, without a cgroup, allows none (seccomp.py)
            if sandbox.cgroup is not None:
                sandbox.cgroup.remove()
                sandbox.cgroup = None
            raise ZygoteFailed("no cgroup can hold a forked student's memory")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        output_r, output_w = os.pipe()
        ends = [to_child_w, from_child_r, output_r]
        try:
            self._ask(sandbox, [theirs.fileno(), to_child_r, from_child_w, output_w])
        except OSError as error:
            _undo(sandbox, ours, ends)
            raise ZygoteFailed(f"the zygote could not be asked ({error})") from None
        finally:
            theirs.close()
            for fd in (to_child_r, from_child_w, output_w):
                os.close(fd)
        try:
            pid, shared_kb = _ready(ours)
            if sandbox.cgroup is not None:  # the student's code runs once it is asked to: not yet
                sandbox.cgroup.lower_memory(limits, shared_kb)
        except (ZygoteFailed, OSError) as error:
            _undo(sandbox, ours, ends)
            if isinstance(error, ZygoteFailed):
                raise
            raise ZygoteFailed(f"the student's memory limit could not be set ({error})") from None
        return ForkedProcess(ours, pid, output_r), to_child_w, from_child_r

    def _ask(self, sandbox: Sandbox, passed: list[int]) -> None:
        """Send the zygote the request for `sandbox`'s process, with the descriptors it gets
        (`passed`) and its cgroup's (cgroup.procs to join, the folder above to make its own)."""
        folders = sandbox.cgroup.folders
        opened = []
        try:
            opened = [os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                      for folder in folders]
            opened += [os.open(folder.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                       for folder in folders]
            spec = {"files": sandbox.config.files, "rlimits": sandbox._plan().rlimits,
                    "user": list(sandbox.drop_to), "disk_bytes": sandbox.config.disk_mb << 20,
                    "cgroups": [folder.name for folder in folders]}
            request = _memory_file(json.dumps(spec).encode())
            try:
                socket.send_fds(self.zygote.control(), [b"spawn"], [request, *passed, *opened])
            finally:
                os.close(request)
        finally:
            for fd in opened:
                os.close(fd)

    def orphans(self, sandbox: Sandbox, table: dict[int, int]) -> list[int]:
        # A forked student's processes live in a PID namespace below the monitor: none can
        # become this grader's child.
        return []

    def kill_targets(self, sandbox: Sandbox) -> list[int]:
        # Not the monitor: it says how the init ended (its PID namespace ends with it), and while
        # this grader holds its socket its pid stays its own.
        return sandbox._members()

    def killed(self, sandbox: Sandbox) -> None:
        if sandbox.process.poll() is None:
            sandbox.process.kill_monitor()         # it never said: end it too

    def closed(self, sandbox: Sandbox) -> None:
        if sandbox.process is not None:
            sandbox.process.close()


def _undo(sandbox: Sandbox, reply: socket.socket, fds: list[int]) -> None:
    reply.close()
    for fd in fds:
        os.close(fd)
    if sandbox.cgroup is not None:
        sandbox.cgroup.remove()
        sandbox.cgroup = None


def _ready(reply: socket.socket) -> tuple[int, int]:
    """The monitor's pid (from the socket's credentials) and the kB of anonymous memory the
    student's process shares with the zygote, once the monitor says that process is ready."""
    if not select.select([reply], [], [], READY_SECONDS)[0]:
        raise ZygoteFailed(f"the zygote made no student's process within {READY_SECONDS} s")
    try:
        message, ancillary, _, _ = reply.recvmsg(MESSAGE, socket.CMSG_SPACE(UCRED.size))
    except OSError as error:
        raise ZygoteFailed(f"the zygote's reply was lost ({error})") from None
    pid = None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = UCRED.unpack(data[:UCRED.size])[0]
    try:
        said = json.loads(message) if message else {"failed": "the zygote is gone"}
    except ValueError:
        said = {"failed": "the zygote's reply could not be read"}
    shared = said.get("shared_kb", 0)
    if said.get("ready") is not True or not pid or not isinstance(shared, int) or shared < 0:
        raise ZygoteFailed(str(said.get("failed", "no pid")))
    return pid, shared


class HandedZygote:
    """The zygote a grader was handed: the control socket behind `fd`, as the grader's command line
    names it (`--zygote-fd`). The grader makes one for its job (submission/__main__.py) and names
    it in its sandboxes' settings (SandboxConfig.zygote), so that every sandbox it opens shares
    it: each student's process is forked from it until it fails once; the rest start afresh."""

    def __init__(self, fd: int):
        self.fd = fd
        self.broken: list[str] = []             # why it failed, once it did
        self._control: socket.socket | None = None

    def control(self) -> socket.socket | None:
        """Its control socket (None if `fd` is not one)."""
        if self._control is None:
            try:
                self._control = socket.socket(fileno=os.dup(self.fd))
            except OSError as error:
                log.warning("the zygote handed to this grader is unusable (descriptor %d: %s): "
                            "each student's process is started afresh", self.fd, error)
                return None
        return self._control

    def failed(self, why: str) -> None:
        self.broken.append(why)
        print(f"tfcourse: a student's process is started afresh: {why}", file=sys.stderr)
        log.warning("the zygote is unusable (%s): this grader starts each student's process "
                    "afresh", why)


def open_sandbox(config: SandboxConfig) -> Sandbox:
    """The sandbox of one student's process: forked from the zygote that `config` names (the
    runner's, which it checked fits these settings: `fitting`), unless it failed before, else
    started afresh (launch.Fresh)."""
    zygote = config.zygote
    if zygote is not None and enabled() and not zygote.broken and zygote.control() is not None:
        return Sandbox(config, Forked(zygote))
    return Sandbox(config)
