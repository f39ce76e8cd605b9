"""The sandbox's settings, and what they choose on this machine: `SandboxConfig` (course.yaml's
`sandbox` and `limits`, with what one grading adds) and the isolation it gets (`choose_isolation`:
bubblewrap, a plain process, or a refusal, and why). launch.py starts a student's process from
them.
"""
from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import limits as measure
from .limits import Limits

# The course's stand-ins (modules the graders put in place of a student's parts), copied beside
# the worker from the course folder: autograder/<this name>.
STANDINS = "standins.py"
DEFAULT_LIMITS = {"memory_mb": 3072, "disk_mb": 256, "processes": 64, "output_kb": 256}
# sandbox.accept_weaker: how much weaker than bubblewrap course.yaml lets the isolation be.
WEAKER = {False: 0, "no": 0, True: 1, "process": 1, "same-user": 2}


@dataclass
class SandboxConfig:
    isolation: str = "auto"
    user: str = "nobody"
    memory_mb: int = DEFAULT_LIMITS["memory_mb"]
    disk_mb: int = DEFAULT_LIMITS["disk_mb"]
    processes: int = DEFAULT_LIMITS["processes"]
    output_kb: int = DEFAULT_LIMITS["output_kb"]
    threads: int = 1
    cpu_kernels: str = "avx2"
    gpu: bool = False
    accept_weaker: object = False
    hide: list[Path] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)    # name in the work folder -> text
    harness: dict[str, str] = field(default_factory=dict)  # name beside the worker -> text
    # Where its folder and cgroup are made (a grader's job says; None: in the system's temporary
    # folder, and beside this process's cgroup)
    folder: Path | None = None
    cgroup_parents: dict[str, str] | None = None
    # The zygote that fits these settings (forked.fitting: the runner asks), as the grader was
    # handed it (forked.HandedZygote), to fork the student's process from; None: a fresh sandbox
    zygote: object = None

    @classmethod
    def from_course(cls, course, files: dict[str, str], threads: int,
                    hide: list[Path]) -> "SandboxConfig":
        """The sandbox course.yaml asks for, with the course folder and `hide` out of sight."""
        limit = {name: getattr(course.limits, name) for name in DEFAULT_LIMITS}
        settings = course.sandbox                  # checked when course.yaml was read
        return cls(isolation=settings.isolation, user=settings.user, gpu=settings.gpu,
                   accept_weaker=settings.accept_weaker, cpu_kernels=settings.cpu_kernels,
                   threads=threads, hide=[course.root, *hide], files=files,
                   harness=course_standins(course), **limit)

    @property
    def limits(self) -> Limits:
        return Limits(self.memory_mb, self.disk_mb, self.processes)


def sandbox_folder(config: SandboxConfig) -> str | None:
    """Where the sandboxes of `config` are made (None: the system's temporary folder)."""
    return str(config.folder) if config.folder is not None else None


def course_standins(course) -> dict[str, str]:
    """The course's stand-ins module, for the worker to import (none when the course has none)."""
    path = course.root / "autograder" / STANDINS
    return {STANDINS: path.read_text(encoding="utf-8")} if path.is_file() else {}


# -- choosing the isolation ---------------------------------------------------------------------
@dataclass(frozen=True)
class Isolation:
    """How student code will run: the mode, the (uid, gid) it drops to, a note for the results
    when it is weaker than bubblewrap, or why it must not run at all."""
    mode: str
    user: tuple[int, int] | None = None
    warning: str | None = None
    refusal: str | None = None


@functools.lru_cache(maxsize=None)
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot isolate student code on this machine, or None when it can (asked
    once, with the options the sandbox uses)."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed"
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        return "setpriv (util-linux), which drops to the sandbox user inside bubblewrap, is missing"
    try:
        done = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                               "--size", "65536", "--tmpfs", "/tmp", "--remount-ro", "/",
                               *_unshare_flags(), "--", "true"], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not run ({error})"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        return "bubblewrap cannot make its namespaces here" + (f" ({said[-1]})" if said else "")
    return None


def bwrap_works() -> bool:
    return bwrap_problem() is None


def _unshare_flags() -> list[str]:
    flags = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        return flags
    # In its own user namespace, student code could make more (and mount what it likes in
    # them): bubblewrap 0.8 can forbid that.
    nested = ["--disable-userns"] if _bwrap_knows("--disable-userns") else []
    return ["--unshare-user", *nested, *flags]


@functools.lru_cache(maxsize=None)
def _bwrap_knows(option: str) -> bool:
    try:
        return option in subprocess.run(["bwrap", "--help"], capture_output=True, text=True,
                                         timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def _user_ids(name: str) -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return None


FIX_BWRAP = ("install bubblewrap (apt-get install bubblewrap) where unprivileged user namespaces "
             "are allowed")
FIX_PYTHON = ("put the Python environment where {user!r} can read and run it (python3 -m venv "
              "/opt/tfcourse, install the course there, chmod -R a+rX /opt/tfcourse, and grade "
              "with /opt/tfcourse/bin/python)")
NOT_RUN = "student code was not run: "


def choose_isolation(config: SandboxConfig) -> Isolation:
    """The isolation this machine gives and course.yaml accepts; see docs/sandbox.md."""
    accepted = WEAKER.get(config.accept_weaker)
    if accepted is None:
        return Isolation("none", refusal=f"{NOT_RUN}sandbox.accept_weaker is "
                                         f"{config.accept_weaker!r}; use false, process or "
                                         f"same-user")
    if config.isolation not in ("auto", "bwrap", "process"):
        return Isolation("none", refusal=f"{NOT_RUN}sandbox.isolation is {config.isolation!r}; "
                                         f"use auto, bwrap or process")
    if config.isolation == "process":
        why, fix = ("course.yaml asks for sandbox.isolation: process",
                    f"set sandbox.isolation: auto and {FIX_BWRAP}")
    else:
        problem = bwrap_problem()
        if problem is None:
            return _bubblewrap(config, accepted)
        why, fix = f"bubblewrap cannot be used here ({problem})", FIX_BWRAP
    if accepted < 1:
        return Isolation("none", refusal=(
            f"{NOT_RUN}{why}, so it would run as a plain process that can read this machine's "
            f"files, and course.yaml does not accept weaker isolation. To fix: {fix}; or, where "
            f"student code may see the machine (a throwaway container, as on Gradescope), set "
            f"sandbox.accept_weaker: process in course.yaml"))
    return _plain_process(config, accepted)


def _bubblewrap(config: SandboxConfig, accepted: int) -> Isolation:
    if os.geteuid() != 0:        # in its own user namespace, as our user, seeing the allow-list
        return Isolation("bwrap")
    user = _user_ids(config.user)
    if user is not None:
        return Isolation("bwrap", user)
    if accepted < 2:
        return Isolation("none", refusal=(
            f"{NOT_RUN}sandbox.user {config.user!r} does not exist on this machine, and "
            f"course.yaml does not accept running student code as root. To fix: create that "
            f"user or name another in sandbox.user"))
    return Isolation("bwrap", None, f"sandbox.user {config.user!r} does not exist: student code "
                                    f"runs as root (sandbox.accept_weaker: same-user)")


def _plain_process(config: SandboxConfig, accepted: int) -> Isolation:
    """A plain process: as `sandbox.user` when grading as root and that user can run the
    interpreter; as the grader's own user only where course.yaml accepts that too."""
    me = pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() else "root"
    if os.geteuid() == 0:
        user = _user_ids(config.user)
        if user is not None and measure.interpreter_footprint_kb(user) is not None:
            return Isolation("process", user, (
                f"student code runs as a plain process, not in bubblewrap "
                f"(sandbox.accept_weaker: {config.accept_weaker}): it can read what user "
                f"{config.user!r} can read on this machine"))
        why = (f"user {config.user!r} cannot run {sys.executable} with torch" if user else
               f"sandbox.user {config.user!r} does not exist")
        fix = FIX_PYTHON.format(user=config.user) if user else "create that user"
    else:
        why, fix = ("without bubblewrap, student code would run as the grader's own user",
                    f"{FIX_BWRAP}, or grade as root")
    if accepted < 2:
        return Isolation("none", refusal=(
            f"{NOT_RUN}{why}, so it would run as {me}, able to change the graders and the "
            f"results, and course.yaml does not accept that. To fix: {fix}"))
    return Isolation("process", None, f"{why}: student code runs as {me}, the grader's own user "
                                      f"(sandbox.accept_weaker: same-user)")
