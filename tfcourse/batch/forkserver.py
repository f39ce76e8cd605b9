"""A fork server for the trusted grader: torch, pytest and the engine are imported once per runner
thread, and each submission's grader is a child forked from that pristine process.

`python -m tfcourse.submission` spends about 2.3 of its 3.3 CPU seconds importing torch and pytest.
Here a server process imports them once and then only forks: each request (the grader's command
line, environment and folder) becomes a child that runs `tfcourse.submission.__main__.main` exactly
as the command would, in a session of its own, its stderr on a pipe the runner gave. The server
itself never grades, so nothing one grading does (a module's state, a cache, an open file) reaches
the next: every child starts from the same imported-only process. Student code is not involved: it
runs in the sandbox the child starts, a fresh process in fresh namespaces, as before.

One server per thread that starts graders (`ForkServers`, for the course folder of its last
grading), so the protocol is one request at a time: send the request with the pipe's write end, read
back the child's pid, then (after the child ended) its exit status. The server dies with the thread
that started it (PR_SET_PDEATHSIG), and each child with the server. TFCOURSE_FORK_SERVER=0 turns it
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
import time
import traceback
from pathlib import Path

from ..process import die_with_parent

PRELOAD = ("torch", "pytest", "tfcourse.submission.__main__", "tfcourse.submission.grade",
           "tfcourse.submission.plugin", "tfcourse.submission.framework")
SWITCH = "TFCOURSE_FORK_SERVER"
GRADER = "tfcourse.submission.__main__"            # what a child runs: its main(args)
MESSAGE = 4096                                  # a reply; requests travel in a memfd
IMPORT_TIME = ("OMP_", "MKL_", "OPENBLAS_", "TORCH_", "PYTORCH_", "CUDA_", "LD_", "PYTHON")


# -- the server ---------------------------------------------------------------------------------
def serve(channel: socket.socket, parent: int | None = None) -> None:
    """Fork a grader for each request, one at a time. A request comes as two descriptors: a
    memfd holding its JSON (no size limit) and the write end of the grader's stderr pipe. The
    replies carry the request's number: {"id", "pid"} once the grader leads its own session,
    {"id", "status"} once it ended (still unreaped, so its pid is not reused while the runner may
    signal it), and the grader is reaped when the runner says "reap". The server dies with the
    runner's thread `parent`."""
    import importlib

    die_with_parent(parent)
    for name in PRELOAD:
        importlib.import_module(name)
    channel.send(b'{"ready": true}')
    ended = None                                    # the last grader, ended, not yet reaped
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, 64, 8)
        except OSError:
            return
        if ended is not None:                       # "reap", or the runner went on: reap it
            os.waitpid(ended, 0)
            ended = None
        if not message:
            return                                  # the runner closed its end
        if message != b"grade":
            continue
        try:
            request = json.loads(os.pread(fds[0], 1 << 30, 0))
            number = request["id"]
        except (ValueError, KeyError, IndexError, OSError) as error:
            for fd in fds:
                os.close(fd)
            channel.send(json.dumps({"error": repr(error)}).encode())
            continue
        ready_read, ready_write = os.pipe()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(ready_read)
            _child(request, fds[1], ready_write, me, channel, fds[2:])    # never returns
        os.close(ready_write)
        for fd in fds:
            os.close(fd)
        os.read(ready_read, 1)                       # EOF: the grader has its own session
        os.close(ready_read)
        channel.send(json.dumps({"id": number, "pid": pid}).encode())
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        channel.send(json.dumps({"id": number, "status": code}).encode())
        ended = pid


def _child(request: dict, stderr: int, ready: int, server: int, channel: socket.socket,
           kept: list[int]) -> None:
    """Become the grader of `request`: its own session, stderr, folder and environment, and the
    descriptors the runner handed on (`kept`, each named by the option of the grader's command
    line that says its number as this process has it)."""
    code = 1
    try:
        channel.close()
        os.setsid()
        os.close(ready)                             # the server may now say our pid
        signal.signal(signal.SIGINT, signal.default_int_handler)     # as in a fresh interpreter
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
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
        args = list(request["args"])
        for option, fd in zip(request.get("kept", []), kept):
            args += [option, str(fd)]
        # dies with the server (its pid taken before the fork: were the server gone already,
        # getppid would name whoever adopted us, and die_with_parent ends us at once)
        die_with_parent(server)
        import random

        random.seed()                   # as a fresh interpreter, not the server's sequences
        for name, reseed in (("torch", "seed"), ("numpy.random", "seed")):
            if name in sys.modules:
                getattr(sys.modules[name], reseed)()
        import importlib

        module = importlib.import_module(request.get("module", GRADER))
        sys.argv = [module.__name__, *args]
        code = module.main(args)
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
    uses: pid, communicate(timeout), poll(), wait(), returncode. Until `wait` has its status, the
    grader is not reaped, so its pid and process group stay its own."""

    def __init__(self, server: "ForkServer", number: int, pid: int, stderr: int):
        self.server, self.number, self.pid, self._stderr = server, number, pid, stderr
        self._chunks: list[bytes] = []
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        watch = select.poll()
        try:
            while self._stderr is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(["tfcourse.submission"], timeout)
                watch.register(self._stderr, select.POLLIN | select.POLLHUP)
                if not watch.poll(None if left is None else max(1, int(left * 1000))):
                    continue
                chunk = os.read(self._stderr, 65536)
                if chunk:
                    self._chunks.append(chunk)
                else:
                    self._close_stderr()
        except subprocess.TimeoutExpired:
            raise
        except BaseException:
            self._close_stderr()
            raise
        self.wait()
        return None, b"".join(self._chunks).decode("utf-8", "replace")

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            os.close(self._stderr)
            self._stderr = None

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.server.status(self.number)
            self._close_stderr()
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("tfcourse-request", os.MFD_CLOEXEC)
    os.write(fd, data)
    return fd


class ForkServer:
    """One server process (see the module's docstring), for one thread of the runner."""

    def __init__(self, cwd: Path, env: dict | None = None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = dict(os.environ if env is None else env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tfcourse.batch.forkserver", str(theirs.fileno()),
             str(os.getpid())],
            pass_fds=[theirs.fileno()], cwd=cwd, env=environment, start_new_session=True,
            stdin=subprocess.DEVNULL)
        theirs.close()
        self.channel = ours
        self.cwd = cwd
        self.requests = 0
        if self._receive(timeout=300).get("ready") is not True:
            raise ServerGone("the fork server did not start")

    def _receive(self, timeout: float | None = None, number: int | None = None) -> dict:
        """The next reply (of request `number`: a reply of an earlier request, left unread by a
        runner interrupted halfway, is skipped)."""
        watch = select.poll()
        watch.register(self.channel, select.POLLIN | select.POLLHUP)
        while True:
            ready = watch.poll(None if timeout is None else int(timeout * 1000))
            message = self.channel.recv(MESSAGE) if ready else b""
            if not message:
                self.close()
                raise ServerGone("the fork server ended")
            reply = json.loads(message)
            if "error" in reply:
                self.close()
                raise ServerGone(f"the fork server refused a request: {reply['error']}")
            if number is None or reply.get("id") == number:
                return reply

    def spawn(self, args: list[str], env: dict, cwd: Path, module: str = GRADER,
              kept: dict[str, int] | None = None) -> ForkedGrader:
        """Fork a grader; `kept`: descriptors it inherits, by the option that names each."""
        self.requests += 1
        number = self.requests
        kept = kept or {}
        read, write = os.pipe()
        try:
            request = _memfd(json.dumps({"id": number, "args": args, "env": env,
                                         "cwd": str(cwd), "module": module,
                                         "kept": list(kept)}).encode())
            try:
                socket.send_fds(self.channel, [b"grade"], [request, write, *kept.values()])
            except OSError as error:
                self.close()
                raise ServerGone(f"the fork server ended ({error})") from None
            finally:
                os.close(request)
        finally:
            os.close(write)
        try:
            pid = self._receive(timeout=60, number=number)["pid"]
        except BaseException:
            os.close(read)
            self.close()                            # out of step with it: start another
            raise
        return ForkedGrader(self, number, pid, read)

    def status(self, number: int) -> int:
        """The exit status of request `number`'s grader; then the server may reap it."""
        try:
            code = int(self._receive(number=number)["status"])
        except ServerGone:
            return -signal.SIGKILL
        except BaseException:
            self.close()
            raise
        with contextlib.suppress(OSError):
            self.channel.send(b"reap")
        return code

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.close()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


class ForkServers:
    """The fork server of one thread that starts graders: one at a time (each holds ~300 MB), for
    the course folder and environment of its last grading, started on first use. Held, with the
    thread's zygote, by whoever owns the thread (child.Warm); `close` ends it."""

    def __init__(self):
        self.by_folder: dict[str, ForkServer] = {}

    def _key(self, cwd: Path, env: dict) -> str:
        """The key of the server for `cwd` and `env` (the others closed)."""
        # what torch and the interpreter read once, at import: a server for each setting of it
        key = json.dumps([str(cwd)] + sorted((name, value) for name, value in env.items()
                                             if name.startswith(IMPORT_TIME)))
        for other in [k for k in self.by_folder if k != key]:
            self.by_folder.pop(other).close()
        return key

    def warm(self, cwd: Path, env: dict) -> None:
        """Start the server for `cwd` and `env` now, before its first grader is wanted (a
        service's job slot, as it starts)."""
        key = self._key(cwd, env)
        if key not in self.by_folder or self.by_folder[key].process.poll() is not None:
            self.by_folder[key] = ForkServer(Path(cwd), env)

    def spawn(self, args: list[str], env: dict, cwd: Path, kept: dict[str, int] | None = None
              ) -> ForkedGrader:
        """A grader for `args` (the command line of `python -m tfcourse.submission`), forked by
        the server for `cwd` (started on first use). Raises ServerGone when no server works."""
        key = self._key(cwd, env)
        for attempt in range(2):            # a server that died is started again, once
            server = self.by_folder.get(key)
            if server is None or server.process.poll() is not None:
                server = self.by_folder[key] = ForkServer(Path(cwd), env)
            try:
                return server.spawn(args, env, cwd, kept=kept)
            except ServerGone:
                self.by_folder.pop(key, None)
                if attempt:
                    raise
        raise ServerGone("unreachable")

    def close(self) -> None:
        while self.by_folder:
            self.by_folder.popitem()[1].close()


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), int(sys.argv[2]) if len(sys.argv) > 2 else None)
