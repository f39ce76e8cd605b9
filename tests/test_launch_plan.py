"""The launch plan of a sandboxed process (tfcourse/sandbox/plan.py), worked out from the sandbox's
settings without starting anything: what bubblewrap is told, the command, the environment, the
limits, the filter and the cgroup. test_sandbox.py starts the plans and attacks what they start."""
from __future__ import annotations

import dataclasses
import os
import sys
import types
from pathlib import Path

from tfcourse.sandbox import plan as planning
from tfcourse.sandbox.binds import INSIDE_LIB, INSIDE_WORK
from tfcourse.sandbox.seccomp import student_filter
from tfcourse.sandbox.settings import SandboxConfig

NOBODY = (65534, 65534)
BASE = Path("/nowhere/tfgrade-x")
FOOTPRINT = 400_000


def a_plan(mode="bwrap", drop_to=NOBODY, cgroup=None, **settings) -> planning.LaunchPlan:
    return planning.launch_plan(SandboxConfig(**settings), mode, drop_to, BASE, cgroup=cgroup,
                                kernels={"ATEN_CPU_CAPABILITY": "avx2"},
                                footprint_kb=FOOTPRINT, data=-1)


def a_cgroup(memory=True, pids=True):
    folders = [Path("/sys/fs/cgroup/a"), Path("/sys/fs/cgroup/b")]
    return types.SimpleNamespace(memory=folders[0] if memory else None,
                                 pids=folders[1] if pids else None, folders=folders,
                                 procs_files=[str(f / "cgroup.procs") for f in folders])


def test_the_address_space_is_a_backstop_above_the_memory_limit():
    limits = a_plan(memory_mb=768).rlimits
    space = (FOOTPRINT << 10) + ((2 * 768 + 1024) << 20)
    assert limits["RLIMIT_AS"] == (space, space)
    assert limits["RLIMIT_FSIZE"] == (256 << 20, 256 << 20)       # the disk limit, per file
    assert limits["RLIMIT_NOFILE"] == (planning.OPEN_FILES,) * 2
    assert limits["RLIMIT_CORE"] == (0, 0) and limits["RLIMIT_DATA"] == (-1, -1)
    assert "RLIMIT_AS" not in a_plan(gpu=True).rlimits               # a driver maps far more
    unmeasured = planning.rlimits(SandboxConfig(), "bwrap", NOBODY, False, None, -1)
    assert "RLIMIT_AS" not in unmeasured


def test_the_kernel_limits_processes_only_where_nothing_else_can():
    config = SandboxConfig(processes=9)
    assert planning.rlimits(config, "process", NOBODY, False, None, -1)["RLIMIT_NPROC"] == (9, 9)
    assert "RLIMIT_NPROC" not in planning.rlimits(config, "process", NOBODY, True, None, -1)
    assert "RLIMIT_NPROC" not in planning.rlimits(config, "bwrap", NOBODY, False, None, -1)
    own = (os.geteuid(), os.getegid())          # it would count the grader's own processes
    assert "RLIMIT_NPROC" not in planning.rlimits(config, "process", own, False, None, -1)


def test_the_environment_names_the_work_folder_as_the_process_sees_it():
    inside = a_plan().environment
    assert inside["HOME"] == str(INSIDE_WORK) and inside["TMPDIR"] == str(INSIDE_WORK / "tmp")
    outside = a_plan(mode="process", isolation="process").environment
    assert outside["HOME"] == str(BASE / "work")
    assert inside["CUDA_VISIBLE_DEVICES"] == "" and inside["ATEN_CPU_CAPABILITY"] == "avx2"
    assert inside["OMP_NUM_THREADS"] == inside["MKL_NUM_THREADS"] == "1"
    assert a_plan(threads=3).environment["OMP_NUM_THREADS"] == "3"


def test_bubblewrap_is_told_the_work_folder_its_files_and_what_to_hide():
    hidden = Path("/usr/share")                          # bound with /usr, unless hidden
    assert str(hidden) not in a_plan().bwrap
    options = a_plan(disk_mb=64, files={"data.txt": "x"}, hide=[hidden]).bwrap
    at = options.index("--tmpfs")
    assert options[at - 1] == str(64 << 20) and options[at + 1] == str(INSIDE_WORK)
    assert ("--ro-bind", str(BASE / "work" / "data.txt"), str(INSIDE_WORK / "data.txt")) in \
        zip(options, options[1:], options[2:])
    assert options[options.index(str(hidden)) - 1] == "--tmpfs" and "--unshare-net" in options
    assert options[options.index("--chdir") + 1] == str(INSIDE_WORK)
    assert "CAP_SETUID" in options and "CAP_SETUID" not in a_plan(drop_to=None).bwrap
    assert a_plan(mode="process").bwrap == ()


def test_the_command_drops_to_the_user_then_runs_the_worker():
    command = planning.command(a_plan(), 3, 4, 5)
    assert command[:4] == ["bwrap", "--args", "5", "--"]
    assert command[4] == "setpriv" and f"--reuid={NOBODY[0]}" in command
    assert command[-5:] == [str(INSIDE_LIB / "worker.py"), "--fd-in", "3", "--fd-out", "4"]
    assert planning.NPROC_TRAMPOLINE not in command
    counted = dataclasses.replace(a_plan(processes=5), nproc_inside=True)
    trampoline = planning.command(counted, 3, 4, 5)
    assert trampoline[trampoline.index(planning.NPROC_TRAMPOLINE) + 1] == "5"
    plain = planning.command(a_plan(mode="process"), 3, 4, -1)
    assert plain[0] == sys.executable and plain[4] == str(BASE / "lib" / "worker.py")


def test_a_cgroup_that_counts_tasks_and_memory_changes_the_plan():
    held = a_plan(cgroup=a_cgroup())
    assert held.cgroup_procs == ("/sys/fs/cgroup/a/cgroup.procs", "/sys/fs/cgroup/b/cgroup.procs")
    assert held.seccomp == student_filter(True)          # AF_UNIX: a cgroup counts its buffers
    assert a_plan(cgroup=a_cgroup(memory=False)).seccomp == student_filter(False)
    assert a_plan().seccomp == student_filter(False) and a_plan().cgroup_procs == ()
    assert not held.nproc_inside
    assert a_plan().nproc_inside == (os.geteuid() != 0)


def test_the_keeper_is_told_the_filter_and_user_only_where_bubblewrap_does_not_apply_them():
    boxed = planning.keeper_spec(a_plan(cgroup=a_cgroup()), 3, 4, 5, [3, 4, 5, 6])
    assert boxed["user"] is None and boxed["seccomp"] == "" and boxed["fds"] == [3, 4, 5, 6]
    assert boxed["cgroup_folders"] == ["/sys/fs/cgroup/a", "/sys/fs/cgroup/b"]
    assert boxed["cwd"] == str(BASE / "work") and boxed["grader"] == os.getpid()
    plain = planning.keeper_spec(a_plan(mode="process"), 3, 4, -1, [3, 4])
    assert plain["user"] == NOBODY and plain["seccomp"] == student_filter(False).hex()


def test_a_zygote_plan_keeps_only_its_capabilities_and_runs_the_zygote():
    student = a_plan(cgroup=a_cgroup())
    zygote = planning.zygote_plan(student, ("CAP_KILL", "CAP_SYS_ADMIN"))
    assert zygote.bwrap[:len(student.bwrap)] == student.bwrap
    assert zygote.bwrap[len(student.bwrap):] == ("--cap-drop", "ALL", "--cap-add", "CAP_KILL",
                                                 "--cap-add", "CAP_SYS_ADMIN")
    assert zygote.rlimits == {"RLIMIT_CORE": (0, 0)} and zygote.cgroup_procs == ()
    command = planning.command(zygote, 7, 8, 9)
    assert command[:4] == ["bwrap", "--args", "9", "--"] and "setpriv" not in command
    assert command[-5:] == [str(INSIDE_LIB / "zygote.py"), "--control", "7", "--ready", "8"]
