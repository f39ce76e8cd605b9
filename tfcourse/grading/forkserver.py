"""A fork server for the trusted grader: torch, pytest and the engine are imported once per runner
thread, and each submission's grader is a child forked from that pristine process.

`python -m tfcourse.grading` spends about 2.3 of its 3.3 CPU seconds importing torch and pytest.
Here a server process imports them once and then only forks: each request (the grader's command
line, environment and folder) becomes a child that runs `tfcourse.grading.__main__.main` exactly as
the command would, in a session of its own, its stderr on a pipe the runner gave. The server itself
never grades, so nothing one grading does (a module's state, a cache, an open file) reaches the
next: every child starts from the same imported-only process. Student code is not involved: it
runs in the sandbox the child starts, a fresh process in fresh namespaces, as before.

One server per runner thread (`spawn`; for the course folder of its last grading), so the
protocol is one request at a time: send the request with the pipe's write end, read back the
child's pid, then (after the child ended) its exit status. The server dies with the thread that
started it (PR_SET_PDEATHSIG), and each child with the server. TFCOURSE_FORK_SERVER=0 turns it
off (a fresh interpreter for each grader, as before).
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

PRELOAD = ("torch", "pytest", "tfcourse.grading.__main__", "tfcourse.grading.grade",
           "tfcourse.grading.plugin", "tfcourse.grading.framework")
PARENT_VARIABLE = "TFCOURSE_GRADER_PARENT"      # runner.PARENT_VARIABLE
SWITCH = "TFCOURSE_FORK_SERVER"
GRADER = "tfcourse.grading.__main__"            # what a child runs: its main(args)
MESSAGE = 1 << 20


# -- the server ---------------------------------------------------------------------------------
def serve(channel: socket.socket) -> None:
    import importlib

    from .__main__ import die_with_parent

    die_with_parent()
    for name in PRELOAD:
        importlib.import_module(name)
    channel.send(b'{"ready": true}')
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, MESSAGE, 1)
        except OSError:
            return
        if not message:
            return                                  # the runner closed its end
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            _child(request, fds[0], channel)         # never returns
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())


def _child(request: dict, stderr: int, channel: socket.socket) -> None:
    """Become the grader of `request`: its own session, stderr, folder and environment."""
    code = 1
    try:
        channel.close()
        os.setsid()
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr, 2)
        os.close(null)
        os.close(stderr)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[PARENT_VARIABLE] = str(os.getppid())      # dies with the server
        import random

        random.seed()                   # as a fresh interpreter, not the server's sequences
        for name, reseed in (("torch", "seed"), ("numpy.random", "seed")):
            if name in sys.modules:
                getattr(sys.modules[name], reseed)()
        import importlib

        module = importlib.import_module(request.get("module", GRADER))
        sys.argv = [module.__name__, *request["args"]]
        code = module.main(request["args"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# -- the runner's side ----------------------------------------------------------------------------
class ServerGone(Exception):
    """The fork server could not be started, or ended."""


class ForkedGrader:
    """A grader forked by the server, with the part of subprocess.Popen's interface the runner
    uses: pid, communicate(timeout), poll(), wait(), returncode."""

    def __init__(self, server: "ForkServer", pid: int, stderr: int):
        self.server, self.pid, self._stderr = server, pid, stderr
        self._chunks: list[bytes] = []
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._stderr is not None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["tfcourse.grading"], timeout)
            ready, _, _ = select.select([self._stderr], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._stderr, 65536)
            if chunk:
                self._chunks.append(chunk)
            else:
                os.close(self._stderr)
                self._stderr = None
        self.wait()
        return None, b"".join(self._chunks).decode("utf-8", "replace")

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.server.status()
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode


class ForkServer:
    """One server process (see the module's docstring), for one thread of the runner."""

    def __init__(self, cwd: Path):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = {**os.environ, PARENT_VARIABLE: str(os.getpid())}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tfcourse.grading.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], cwd=cwd, env=environment, start_new_session=True,
            stdin=subprocess.DEVNULL)
        theirs.close()
        self.channel = ours
        self.cwd = cwd
        if self._receive(timeout=300).get("ready") is not True:
            raise ServerGone("the fork server did not start")

    def _receive(self, timeout: float | None = None) -> dict:
        ready, _, _ = select.select([self.channel], [], [], timeout)
        message = self.channel.recv(MESSAGE) if ready else b""
        if not message:
            self.close()
            raise ServerGone("the fork server ended")
        return json.loads(message)

    def spawn(self, args: list[str], env: dict, cwd: Path, module: str = GRADER) -> ForkedGrader:
        read, write = os.pipe()
        try:
            request = json.dumps({"args": args, "env": env, "cwd": str(cwd),
                                  "module": module}).encode()
            try:
                socket.send_fds(self.channel, [request], [write])
            except OSError as error:
                self.close()
                raise ServerGone(f"the fork server ended ({error})") from None
        finally:
            os.close(write)
        try:
            pid = self._receive(timeout=60)["pid"]
        except BaseException:
            os.close(read)
            raise
        return ForkedGrader(self, pid, read)

    def status(self) -> int:
        try:
            return int(self._receive()["status"])
        except ServerGone:
            return -signal.SIGKILL

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.close()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()


_SERVERS = threading.local()


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def spawn(args: list[str], env: dict, cwd: Path) -> ForkedGrader:
    """A grader for `args` (the command line of `python -m tfcourse.grading`), forked by this
    thread's server for `cwd` (started on first use). Raises ServerGone when no server works."""
    servers = getattr(_SERVERS, "by_folder", None)
    if servers is None:
        servers = _SERVERS.by_folder = {}
    key = str(cwd)
    for other in [k for k in servers if k != key]:  # one server a thread: each holds ~300 MB
        servers.pop(other).close()
    for attempt in range(2):                # a server that died is started again, once
        server = servers.get(key)
        if server is None or server.process.poll() is not None:
            server = servers[key] = ForkServer(Path(cwd))
        try:
            return server.spawn(args, env, cwd)
        except ServerGone:
            servers.pop(key, None)
            if attempt:
                raise
    raise ServerGone("unreachable")


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
