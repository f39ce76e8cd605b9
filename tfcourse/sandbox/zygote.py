"""The zygote: a sandboxed process that imports torch once, then forks every student's process.

A student's process spends about 2 CPU seconds importing torch before it runs a line of the
submission. The zygote pays that once per runner thread: forked.py starts it in bubblewrap with the
same allow-list, environment and interpreter as a student's process, and it never runs student
code. It runs as root inside bubblewrap (grading as root), with the capabilities it needs to make
namespaces and mounts (forked.ZYGOTE_CAPABILITIES); the student's process keeps none of them.

For each request on its control socket (a memfd holding the request's JSON, and descriptors: the
grader's reply socket, the channel's two ends, the output pipe, a `cgroup.procs` of each cgroup
folder of the student's cgroup and the folder above each) it forks three processes:

- the monitor, in the zygote's namespaces: it makes new mount, PID, network, IPC and UTS
  namespaces, forks the init, and tells the grader "ready" once the student's process is about to
  run (the grader reads the monitor's pid from the socket's credentials). It then waits: when the
  init ends, it sends its status (as bwrap exits: the status, or 128 + the signal); when the grader
  is gone (its end of the socket closed), it kills the init, which ends the whole PID namespace,
  and removes the student's cgroup. It exits only once the grader closed the socket, so its pid
  stays the grader's to signal until then.
- the init, PID 1 of the new namespace: it joins the student's cgroup and a cgroup namespace of its
  own, mounts a fresh /proc and a fresh tmpfs work folder of `limits.disk_mb` (the request's files
  in it, read-only), brings the loopback up (as bwrap does), forks the student's process and reaps
  whatever it leaves. When the student's process ends it kills the rest and exits as it did.
- the student's process, PID 2: a session of its own, the resource limits, no capabilities in any
  set, the sandbox user, no new privileges; it checks all that in /proc/self/status, then runs
  worker.py as `__main__`, as a fresh interpreter would, and exits.

So each student still gets a fresh process in fresh namespaces, and nothing one student does
reaches the next: each is forked from the same imported-only zygote, in mounts of its own.
"""
import argparse
import contextlib
import ctypes
import fcntl
import gc
import json
import os
import random
import resource
import runpy
import signal
import socket
import struct
import sys
import traceback

# What the worker imports (so that the fork has it already), and torch.
import channel  # noqa: F401
import refusal  # noqa: F401
import torch  # noqa: F401

# torch._dynamo, which the worker's refusal imports (through torch.nn.attention.bias) and so does
# a process's first optimizer: 1.3 CPU seconds in torch 2.13, paid here once rather than by every
# student's process, with the other modules the refusal imports. It starts no thread.
with contextlib.suppress(Exception):
    import torch._dynamo  # noqa: F401
    for _module in refusal.EAGER_MODULES:
        __import__(_module)

try:
    import standins  # noqa: F401
except ImportError:
    standins = None

WORK = "/sandbox/work"
SHARED_KB = 0        # the zygote's anonymous memory when it is ready: what each fork shares
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
CAPABILITY_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")      # read-only, as bwrap leaves them
CAPABILITY_LINES = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")

libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A step of making the student's process failed: the grader starts it afresh instead."""


def _call(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(number)}")


def _prctl(option: int, value: int, what: str) -> None:
    _call(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), what)


def _mount(source, target: str, kind, flags: int, data=None) -> None:
    def encode(text):
        return None if text is None else text.encode()

    _call(libc.mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags),
                     encode(data)), f"mount {target}")


# -- the student's process (PID 2) ----------------------------------------------------------------
def _drop_privileges(uid: int, gid: int) -> None:
    """No capability in any set, no supplementary group, the sandbox user in every uid and gid."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for capability in range(last + 1):
        _prctl(PR_CAPBSET_DROP, capability, "drop the bounding set")
    _call(libc.prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0),
          "clear the ambient set")
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _call(libc.capget(header, data), "capget")
    data[2] = data[5] = 0                                  # inheritable, both words
    _call(libc.capset(header, data), "clear the inheritable set")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)                            # clears permitted and effective
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no new privileges")
    _prctl(PR_SET_DUMPABLE, 1, "dumpable")                 # as after exec: /proc/self is ours


def _check_privileges(uid: int, gid: int) -> None:
    """Refuse to run student code unless /proc/self/status shows what _drop_privileges made."""
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines()
                  if ":" in line)
    for name in CAPABILITY_LINES:
        if int(status[name].strip(), 16) != 0:
            raise SetupError(f"{name} is {status[name].strip()}, not empty")
    if {int(x) for x in status["Uid"].split()} != {uid} or \
            {int(x) for x in status["Gid"].split()} != {gid} or status["Groups"].strip():
        raise SetupError("the student's process did not drop to the sandbox user")
    if status["NoNewPrivs"].strip() != "1":
        raise SetupError("no_new_privs is not set")


def _keep_only(descriptors: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in descriptors:
            with contextlib.suppress(OSError):
                os.close(fd)


def become_student(spec: dict, fd_in: int, fd_out: int, output: int, ready: int) -> None:
    """PID 2: limits, descriptors, the sandbox user; then worker.py. Never returns."""
    code = 127
    try:
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "die with the init")
        for name, (soft, hard) in spec["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        _keep_only({0, 1, 2, fd_in, fd_out, ready})
        uid, gid = spec["user"]
        _drop_privileges(uid, gid)
        _check_privileges(uid, gid)
        os.chdir(WORK)
        random.seed()                        # as a fresh interpreter, not the zygote's sequences
        torch.seed()
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        os.write(ready, b"ok")
        os.close(ready)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.write(ready, f"the student's process could not be made: {error}".encode())
        os._exit(code)
    try:
        sys.argv = [WORKER, "--fd-in", str(fd_in), "--fd-out", str(fd_out)]
        runpy.run_path(WORKER, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            import atexit
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


# -- the init (PID 1) -----------------------------------------------------------------------------
def _loopback_up() -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:     # no AF_INET: seccomp.py
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def _make_mounts(spec: dict) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_COVERED:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                   MS_NOEXEC)
    _mount("tmpfs", WORK, "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['disk_bytes']},mode=1777")
    os.mkdir(f"{WORK}/tmp")
    os.chmod(f"{WORK}/tmp", 0o1777)
    for name, text in spec["files"].items():
        path = f"{WORK}/{os.path.basename(name)}"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o644)
        _mount(path, path, None, MS_BIND)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _exit_code(status: int) -> int:
    """As bwrap exits: the status, or 128 + the signal that ended the process."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def be_init(spec: dict, fd_in: int, fd_out: int, output: int, procs: list[int],
            ready: int) -> None:
    """PID 1 of the student's namespaces. Never returns."""
    try:
        for fd in procs:                        # into the student's cgroup: "0" is this process
            os.write(fd, b"0")
            os.close(fd)
        _call(libc.unshare(CLONE_NEWCGROUP), "unshare the cgroup namespace")
        _make_mounts(spec)
        _loopback_up()
        os.chdir("/")
        student = os.fork()
        if student == 0:
            become_student(spec, fd_in, fd_out, output, ready)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.write(ready, f"the sandbox could not be made: {error}".encode())
        os._exit(127)
    for fd in (fd_in, fd_out, output, ready):
        os.close(fd)
    code = 1
    while True:                                 # reap everything; the student's status counts
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == student:
            code = _exit_code(status)
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)     # from PID 1: every other process in here
    os._exit(code)


# -- the monitor ----------------------------------------------------------------------------------
def _remove_cgroups(parents: list[int], names: list[str]) -> None:
    import time

    for parent, name in zip(parents, names):
        for _ in range(100):
            try:
                os.rmdir(name, dir_fd=parent)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def monitor(spec: dict, fds: list[int]) -> None:
    """The student's namespaces' keeper, in the zygote's own. Never returns."""
    reply = socket.socket(fileno=fds[0])
    fd_in, fd_out, output = fds[1:4]
    count = len(spec["cgroups"])
    procs, parents = fds[4:4 + count], fds[4 + count:4 + 2 * count]
    init = None
    try:
        _call(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                           CLONE_NEWUTS), "unshare the namespaces")
        ready_read, ready_write = os.pipe()
        init = os.fork()
        if init == 0:
            reply.close()
            os.close(ready_read)
            for fd in parents:
                os.close(fd)
            be_init(spec, fd_in, fd_out, output, procs, ready_write)
        for fd in (fd_in, fd_out, output, ready_write, *procs):
            os.close(fd)
        said = b""
        while True:
            chunk = os.read(ready_read, 4096)
            if not chunk:
                break
            said += chunk
        os.close(ready_read)
        if said != b"ok":
            raise SetupError(said.decode("utf-8", "replace") or "the sandbox ended at once")
        reply.send(json.dumps({"ready": True, "shared_kb": SHARED_KB}).encode())
    except BaseException as error:
        with contextlib.suppress(OSError):
            reply.send(json.dumps({"failed": str(error)[:2000]}).encode())
        _end(init, parents, spec["cgroups"])
        os._exit(1)
    _watch(reply, init, parents, spec["cgroups"])


def _end(init, parents: list[int], names: list[str]) -> None:
    if init:
        with contextlib.suppress(ProcessLookupError):
            os.kill(init, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(init, 0)
    _remove_cgroups(parents, names)


def _watch(reply: socket.socket, init: int, parents: list[int], names: list[str]) -> None:
    import select

    ended = os.pidfd_open(init)
    watch = select.poll()
    watch.register(ended, select.POLLIN)
    watch.register(reply, select.POLLIN | select.POLLHUP)
    while True:
        events = dict(watch.poll())
        if ended in events:
            _, status = os.waitpid(init, 0)
            with contextlib.suppress(OSError):
                reply.send(json.dumps({"status": _exit_code(status)}).encode())
                while reply.recv(64):          # until the grader closes its end
                    pass
            os._exit(0)
        if reply.fileno() in events:
            with contextlib.suppress(OSError):
                if reply.recv(64):             # only an end (the grader gone) means anything
                    continue
            _end(init, parents, names)         # the grader is gone: nothing of this outlives it
            os._exit(0)


# -- the zygote -----------------------------------------------------------------------------------
def _effective() -> int:
    for line in open("/proc/self/status").read().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def _keep_bounding(kept: int) -> None:
    """Drop from the bounding set every capability not in `kept`."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for capability in range(last + 1):
        if not kept >> capability & 1:
            _prctl(PR_CAPBSET_DROP, capability, "drop the bounding set")


def serve(control: socket.socket) -> None:
    """Fork a monitor for each request; never run anything of a request here."""
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 64, 32)
        except OSError:
            return
        if not message:
            return                              # the runner closed its end
        try:
            if message != b"spawn" or len(fds) < 5:
                raise ValueError("not a request")
            spec = json.loads(os.pread(fds[0], 1 << 26, 0))
            if len(fds) != 5 + 2 * len(spec["cgroups"]):
                raise ValueError("descriptors do not match the request")
        except (ValueError, KeyError, TypeError, OSError) as error:
            if fds[1:]:
                with contextlib.suppress(OSError):
                    socket.socket(fileno=os.dup(fds[1])).send(
                        json.dumps({"failed": f"bad request: {error}"}).encode())
            for fd in fds:
                os.close(fd)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                os.close(fds[0])
                for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(number, signal.SIG_DFL)
                monitor(spec, fds[1:])
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", type=int, required=True)
    parser.add_argument("--ready", type=int, required=True)
    options = parser.parse_args()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:        # a fork keeps one thread: torch's thread pool would be broken
        os.write(options.ready, f"refused: {threads} threads after importing torch".encode())
        sys.exit(1)
    _keep_bounding(_effective())            # what it may ever have: the few it was given
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)      # monitors are reaped by the kernel
    gc.collect()
    gc.freeze()                  # the imported objects: no page of them copied by a child's gc
    global SHARED_KB
    status = open("/proc/self/status").read()
    SHARED_KB = int(status.split("RssAnon:", 1)[1].split()[0]) if "RssAnon:" in status else 0
    os.write(options.ready, b"ok")
    os.close(options.ready)
    serve(socket.socket(fileno=options.control))


if __name__ == "__main__":
    main()
