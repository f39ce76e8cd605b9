"""The launch plan of a sandboxed process: what its keeper (keeper.py) is told to start, worked out
from the sandbox's settings by functions that start nothing and change nothing. launch.py makes
the folders and the cgroup, measures what the plan needs of the machine, and starts the plan.

A plan holds bubblewrap's options (the binds of binds.py, the work folder's tmpfs, the masks, the
namespaces), the interpreter as the process sees it, its environment, its resource limits, its
seccomp filter, the user it drops to and the cgroup it joins; `command` and `keeper_spec` add the
file descriptors it is handed, once they are open.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .binds import (INSIDE_LIB, INSIDE_PYTHON, INSIDE_WORK, Binds, gpu_binds, interpreter_binds,
                    mask_hidden, system_binds, under)
from .seccomp import student_filter
from .settings import SandboxConfig, _unshare_flags

HARNESS = ("worker.py", "channel.py", "refusal.py", "rulebook.py")
ALWAYS_HIDDEN = (Path("/root"), Path("/home"), Path("/tmp"))
# Open files of each student's process (a student has no use for more)
OPEN_FILES = 256
# Sets RLIMIT_NPROC inside bubblewrap's user namespace (set outside, it would count every process
# of the grader's user), then runs the worker.
NPROC_TRAMPOLINE = ("import os, resource, sys; n = int(sys.argv[1]); "
                    "resource.setrlimit(resource.RLIMIT_NPROC, (n, n)); "
                    "os.execv(sys.argv[2], sys.argv[2:])")
WORKER, ZYGOTE = "worker", "zygote"        # what a plan runs: a student's worker, or a zygote


@dataclass(frozen=True)
class LaunchPlan:
    """How one sandboxed process is started (see the module's docstring)."""
    mode: str                               # "bwrap" or "process"
    user: tuple[int, int] | None            # the sandbox user it drops to
    base: Path                              # its folder: work/, lib/, etc/, keeper.py
    bwrap: tuple[str, ...]                  # bubblewrap's options (none in "process" mode)
    python: Path                            # the interpreter, as the process sees it
    environment: dict[str, str]
    rlimits: dict[str, tuple[int, int]]
    seccomp: bytes                          # the filter (seccomp.py)
    nproc_inside: bool = False              # RLIMIT_NPROC set inside bubblewrap's namespace
    processes: int = 0                      # that limit
    cgroup_procs: tuple[str, ...] = ()      # the cgroup it joins (cgroup.procs files, folders)
    cgroup_folders: tuple[str, ...] = ()
    runs: str = WORKER                      # WORKER or ZYGOTE

    @property
    def work(self) -> Path:
        return self.base / "work"

    @property
    def lib(self) -> Path:
        return self.base / "lib"


def work_inside(mode: str, base: Path) -> Path:
    """The work folder as student code sees it."""
    return INSIDE_WORK if mode == "bwrap" else base / "work"


def bwrap_options(config: SandboxConfig, base: Path, drop_to: tuple[int, int] | None
                  ) -> tuple[list[str], Path]:
    """Everything bwrap is told but the command and the filter, and the interpreter's path
    inside."""
    binds = Binds()
    system_binds(binds)
    python = interpreter_binds(binds)
    work = INSIDE_WORK
    binds.bind(base / "lib", INSIDE_LIB)
    binds.arguments += ["--perms", "01777", "--size", str(config.disk_mb << 20),
                        "--tmpfs", str(work), "--perms", "01777", "--dir", str(work / "tmp")]
    for name in config.files:
        binds.add("--ro-bind", str(base / "work" / name), work / name)
    for name in ("passwd", "group"):
        binds.add("--ro-bind", str(base / "etc" / name), Path("/etc", name))
    if any(under(inside, Path("/tmp")) for inside in binds.trees.values()):
        binds.arguments += ["--perms", "0755", "--dir", "/tmp"]     # read-only, below
    else:
        binds.add("--symlink", str(work / "tmp"), Path("/tmp"))
    hidden = {Path(os.path.realpath(p)) for p in [*config.hide, *ALWAYS_HIDDEN, Path.home()]
              if Path(p).exists()}
    mask_hidden(binds, sorted(hidden))
    binds.arguments += ["--proc", "/proc", "--dev", "/dev"]
    if config.gpu:
        gpu_binds(binds)
    binds.arguments += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", str(work),
                        *_unshare_flags()]
    if drop_to:
        binds.arguments += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return binds.arguments, python


def environment(config: SandboxConfig, mode: str, base: Path, kernels: dict[str, str]
                ) -> dict[str, str]:
    """The process's environment; `kernels`: launch.kernel_environment's, for its CPU."""
    threads = str(config.threads)
    inside = work_inside(mode, base)
    in_venv = sys.prefix != sys.base_prefix
    python_bin = (INSIDE_PYTHON / "bin" if mode == "bwrap" and in_venv
                  else Path(sys.executable).parent)
    found = {"PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
             "HOME": str(inside), "TMPDIR": str(inside / "tmp"),
             "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": threads,
             "MKL_NUM_THREADS": threads, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
             **kernels}
    if not config.gpu:
        found["CUDA_VISIBLE_DEVICES"] = ""      # and bwrap shows no GPU device
    elif "CUDA_VISIBLE_DEVICES" in os.environ:
        found["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return found


def rlimits(config: SandboxConfig, mode: str, drop_to: tuple[int, int] | None,
            pids_counted: bool, footprint_kb: int | None, data: int
            ) -> dict[str, tuple[int, int]]:
    """The process's resource limits. The address space is only a backstop against one huge
    allocation (the cgroup or the watchdog limit real memory): what the interpreter maps to import
    torch (`footprint_kb`, measured on this machine), plus twice the memory limit. None with a
    GPU, whose driver reserves far more address space than it uses. `data`: the grader's own
    RLIMIT_DATA hard limit (where no cgroup holds it), which is not the student's."""
    disk = config.disk_mb << 20
    found = {"RLIMIT_CORE": (0, 0), "RLIMIT_FSIZE": (disk, disk),
             "RLIMIT_NOFILE": (OPEN_FILES, OPEN_FILES), "RLIMIT_DATA": (data, data)}
    if footprint_kb and not config.gpu:
        space = (footprint_kb << 10) + ((2 * config.memory_mb + 1024) << 20)
        found["RLIMIT_AS"] = (space, space)
    if mode == "process" and not pids_counted and drop_to and drop_to[0] != os.geteuid():
        # No PID namespace to kill a fork bomb at once: the kernel must stop it. It counts every
        # process of the sandbox user, so graders running side by side share it.
        found["RLIMIT_NPROC"] = (config.processes, config.processes)
    return found


def worker(python: Path, lib: Path, fd_in: int, fd_out: int) -> list[str]:
    return [str(python), "-E", "-s", "-B", str(lib / "worker.py"),
            "--fd-in", str(fd_in), "--fd-out", str(fd_out)]


def command(plan: LaunchPlan, fd_in: int, fd_out: int, arguments_fd: int) -> list[str]:
    """The command the keeper runs. In bwrap, its options come through `arguments_fd`, so that
    bwrap's own command line (visible inside as /proc/1/cmdline) names no host path."""
    if plan.runs == ZYGOTE:
        return ["bwrap", "--args", str(arguments_fd), "--", str(plan.python), "-E", "-s", "-B",
                str(INSIDE_LIB / "zygote.py"), "--control", str(fd_in), "--ready", str(fd_out)]
    if plan.mode != "bwrap":
        return worker(Path(sys.executable), plan.lib, fd_in, fd_out)
    found = ["bwrap", "--args", str(arguments_fd), "--"]
    if plan.user:
        uid, gid = plan.user
        found += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                  "--inh-caps=-all", "--bounding-set=-all"]
    if plan.nproc_inside:
        found += [str(plan.python), "-I", "-S", "-c", NPROC_TRAMPOLINE, str(plan.processes)]
    return found + worker(plan.python, INSIDE_LIB, fd_in, fd_out)


def keeper_spec(plan: LaunchPlan, fd_in: int, fd_out: int, arguments_fd: int,
                fds: list[int]) -> dict:
    """What the keeper is told: the command, its folder, limits, user and cgroup, and the file
    descriptors it hands on (`fds`: the channel's ends; bwrap's options and filter)."""
    return {"command": command(plan, fd_in, fd_out, arguments_fd),
            "cwd": str(plan.work), "base": str(plan.base), "rlimits": plan.rlimits,
            "grader": os.getpid(),
            "user": plan.user if plan.mode == "process" else None, "fds": fds,
            "seccomp": plan.seccomp.hex() if plan.mode == "process" else "",
            "cgroup_procs": list(plan.cgroup_procs), "cgroup_folders": list(plan.cgroup_folders)}


def launch_plan(config: SandboxConfig, mode: str, drop_to: tuple[int, int] | None, base: Path,
                *, cgroup=None, unix_sockets: bool | None = None, kernels: dict[str, str],
                footprint_kb: int | None, data: int) -> LaunchPlan:
    """The plan of a student's worker for `config`, isolated as `mode` (dropping to `drop_to`),
    in the folder `base`, held by `cgroup` (limits.Cgroup, or None: the watchdog). `unix_sockets`
    (None: where the cgroup counts memory) says whether its filter allows AF_UNIX sockets."""
    pids_counted = cgroup is not None and cgroup.pids is not None
    if unix_sockets is None:
        unix_sockets = cgroup is not None and cgroup.memory is not None
    options, python = bwrap_options(config, base, drop_to) if mode == "bwrap" else \
        ([], Path(sys.executable))
    return LaunchPlan(
        mode=mode, user=drop_to, base=base, bwrap=tuple(options), python=python,
        environment=environment(config, mode, base, kernels),
        rlimits=rlimits(config, mode, drop_to, pids_counted, footprint_kb, data),
        seccomp=student_filter(unix_sockets),
        nproc_inside=mode == "bwrap" and os.geteuid() != 0 and not pids_counted,
        processes=config.processes,
        cgroup_procs=tuple(cgroup.procs_files) if cgroup else (),
        cgroup_folders=tuple(str(f) for f in cgroup.folders) if cgroup else ())


def zygote_plan(plan: LaunchPlan, capabilities: tuple[str, ...]) -> LaunchPlan:
    """The plan of a zygote (forked.py) made from a student's `plan`: bubblewrap's options with
    only `capabilities` (bubblewrap run as root keeps every capability unless told: none, which
    clears those added before too, then only these), zygote.py in place of the worker, no limit
    but no core file, and no cgroup (each student's process is forked into its own)."""
    options = [*plan.bwrap, "--cap-drop", "ALL"]
    for capability in capabilities:
        options += ["--cap-add", capability]
    return dataclasses.replace(plan, bwrap=tuple(options), runs=ZYGOTE,
                               rlimits={"RLIMIT_CORE": (0, 0)}, cgroup_procs=(),
                               cgroup_folders=())
