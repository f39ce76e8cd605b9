"""The keeper of one sandbox: starts the student's process, and ends everything it started.

launch.py runs this file (standard library only, `python -I -S`), outside the sandbox and as the
grader's user, with a JSON description of the sandbox on its standard input. It forks the
student's process (joined to the sandbox's cgroup, with its resource limits, as the sandbox user)
and becomes the subreaper of everything that process starts, so that no double fork gets away.

- When the student's process ends, the keeper kills everything else it left (the cgroup's members
  and its own descendants), then exits as that process did (same status, same signal), so the
  grader reads how the student's process ended from the keeper (and, in the cgroup it removes
  afterwards, whether a limit ended it).
- When the grader dies, even by SIGKILL, the kernel sends the keeper SIGTERM (PR_SET_PDEATHSIG):
  it kills everything and removes the sandbox's cgroup and folder, so nothing outlives the
  grader.
"""
import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RESET_SIGNALS = ("SIGPIPE", "SIGXFSZ", "SIGXFZ")      # Python ignores these; exec would keep that


class GraderGone(Exception):
    """The grader that started this keeper has died."""


def _grader_gone(signum, frame):
    raise GraderGone()


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program: bytes) -> None:
    """Install the seccomp filter `program` (seccomp.py) on this process and what it starts; no
    new privileges first, as the kernel asks of a process without CAP_SYS_ADMIN."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    for arguments in ((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                      (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)):
        if libc.prctl(*map(ctypes.c_ulong, arguments)) != 0:
            raise OSError(ctypes.get_errno(), "the seccomp filter could not be set")


def become_student(spec: dict) -> None:
    """In the forked child: a session of its own, the cgroup, the limits, the sandbox user; then
    exec the student's command. Never returns."""
    try:
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for procs in spec["cgroup_procs"]:
            with open(procs, "w") as handle:
                handle.write(str(os.getpid()))
        for name, (soft, hard) in spec["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        if spec.get("seccomp"):                 # process mode (bwrap loads its own)
            install_filter(bytes.fromhex(spec["seccomp"]))
        if spec["user"]:
            uid, gid = spec["user"]
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        for name in RESET_SIGNALS + ("SIGTERM",):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.chdir(spec["cwd"])
        os.execvp(spec["command"][0], spec["command"])
    except BaseException as error:              # said on the sandbox's output, for the grader
        os.write(2, f"the sandbox could not start: {error}\n".encode())
    os._exit(127)


def _descendants() -> list[int]:
    """Every process below this one (as subreaper, that is everything the student started)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
                parent = int(stat[stat.rindex(b")") + 2:].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, stack = [], [os.getpid()]
    while stack:
        for pid in children.get(stack.pop(), []):
            found.append(pid)
            stack.append(pid)
    return found


def _cgroup_members(folders: list[str]) -> set[int]:
    found = set()
    for folder in folders:
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(folder, "cgroup.procs")) as handle:
                found.update(int(line) for line in handle.read().split())
    return found


def reap() -> None:
    """Collect every child that has ended (zombies), without waiting for the others."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_everything(spec: dict, remove_cgroup: bool) -> None:
    """Kill the cgroup's members and every descendant until none is left; remove the cgroup when
    the grader is gone (else the grader removes it, once it has read why the process ended)."""
    folders = spec["cgroup_folders"]
    for folder in folders:                       # cgroup v2 kills its whole subtree at once
        with contextlib.suppress(OSError):
            with open(os.path.join(folder, "cgroup.kill"), "w") as handle:
                handle.write("1")
    for _ in range(200):
        reap()
        victims = _cgroup_members(folders) | set(_descendants())
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    for folder in folders if remove_cgroup else []:
        for _ in range(50):
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def exit_like(status: int) -> None:
    """Exit as the student's process did: the same status, or the same signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        time.sleep(1)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main() -> None:
    spec = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGTERM, _grader_gone)
    status = None
    try:
        if os.getppid() != spec["grader"]:       # died before its death signal was set up
            raise GraderGone()
        child = os.fork()
        if child == 0:
            become_student(spec)
        for fd in spec["fds"]:
            os.close(fd)
        while True:
            pid, status = os.waitpid(-1, 0)      # orphans are reaped here too
            if pid == child:
                break
    except GraderGone:
        status = None
    signal.signal(signal.SIGTERM, signal.SIG_IGN)    # nothing stops the cleaning up
    end_everything(spec, remove_cgroup=status is None)
    if status is None:                                # the grader cannot remove them any more
        shutil.rmtree(spec["base"], ignore_errors=True)
        os._exit(1)
    exit_like(status)


if __name__ == "__main__":
    main()
