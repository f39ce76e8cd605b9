"""The sandbox itself: the limits a student cannot step around, what student code can see, that
weaker isolation is refused unless course.yaml accepts it, and that nothing outlives the grader.

Each test starts the student's process the way the grader does (a StudentSession on a few cells)
and reads what came of each cell. Limits are small here (512 MB, 64 MB of disk, 16 processes) so
that they are reached in a second or two. Tests that need bubblewrap, root or a cgroup say so and
are skipped where the machine lacks them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, survivors, zygote_for_sandbox

from tfcourse.sandbox import binds, launch, plan, seccomp
from tfcourse.sandbox.forked import handed
from tfcourse.sandbox import limits as measure
from tfcourse.sandbox.launch import Sandbox, SandboxConfig, bwrap_works, choose_isolation
from tfcourse.sandbox.limits import Cgroup, Limits
from tfcourse.sandbox.session import ProcessEnded, StudentSession, TimedOut
from tfcourse.sandbox.session import Cell

TOKEN = f"tfsandbox{uuid.uuid4().hex[:10]}"
SMALL = {"memory_mb": 512, "disk_mb": 64, "processes": 16}
ROOT_ONLY = os.geteuid() == 0
needs_bwrap = pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot run here")
# Process mode here: the venv is root's (under /root), so student code runs as the grader's user.
PROCESS = {"isolation": "process", "accept_weaker": "same-user"}
needs_zygote = pytest.mark.skipif(not (bwrap_works() and ROOT_ONLY),
                                  reason="students' processes are forked from a zygote only in "
                                         "bubblewrap as root")
# "forked": the student's process forked from a zygote (sandbox/forked.py), as graders get it
MODES = [pytest.param({"isolation": "bwrap"}, id="bwrap", marks=needs_bwrap),
         pytest.param({"isolation": "bwrap", "forked": True}, id="forked", marks=needs_zygote),
         pytest.param(PROCESS, id="process")]
# What a forked student's process sees as PID 1: the zygote's command line (bwrap's otherwise).
FORKED_CHECK = "raise RuntimeError(open('/proc/1/cmdline').read())"


def machine_has_cgroups() -> bool:
    made = Cgroup.create(Limits(**SMALL))
    if made is not None:
        made.remove()
    return made is not None


# Cgroup.create where this machine lets us make none
NO_CGROUP = classmethod(lambda cls, limits, parents=None: None)


@pytest.fixture(params=["cgroup", "watchdog"])
def counted_by(request, monkeypatch):
    """Each limit twice: kept by a cgroup (where the machine lets us make one), and by the
    watchdog alone, as on a machine where none can be made."""
    if request.param == "cgroup" and not machine_has_cgroups():
        pytest.skip("no cgroup can be made here")
    mode = getattr(request.node, "callspec", None) and request.node.callspec.params.get("mode")
    if request.param == "watchdog" and mode and mode.get("forked"):
        pytest.skip("a student is forked only into a cgroup; without one it starts afresh "
                    "(test_without_a_cgroup_a_student_starts_afresh_with_no_socket)")
    if request.param == "watchdog":
        monkeypatch.setattr(Cgroup, "create", NO_CGROUP)
    return request.param


def code(text: str) -> str:
    return textwrap.dedent(text).replace("TOKEN", TOKEN).strip() + "\n"


def run_cells(*sources: str, forked: bool = False, zygote=None, **config) -> StudentSession:
    """Run `sources` as cells 1, 2, ... in a fresh sandbox; the session, closed. `forked`: each
    student's process is forked from a zygote started for this sandbox (and the last cell checks
    that it was); `zygote`: one started already, handed on where it fits, as a runner does."""
    cells = [Cell(str(number), source) for number, source in enumerate(sources, 1)]
    sandbox_config = SandboxConfig(**{**SMALL, **config})
    if forked:
        cells.append(Cell("forked", FORKED_CHECK))
    with zygote_for_sandbox(sandbox_config, forked) as host:
        session = StudentSession(cells, handed(sandbox_config, host or zygote), [], 20,
                                 time.monotonic() + 120)
        try:
            session.start()
        finally:
            session.close()
    if forked:
        outcome = next(o for o in session.outcomes if o.label == "forked")
        assert "zygote.py" in outcome.error["message"], outcome
        assert session.config.zygote.broken == []
    return session


def ending(session: StudentSession, label: str) -> str | None:
    return next(o.ended_process for o in session.outcomes if o.label == label)


def reported(session: StudentSession, label: str) -> dict:
    """What a cell that ends with `raise RuntimeError(json.dumps(...))` reported."""
    outcome = next(o for o in session.outcomes if o.label == label)
    assert outcome.error and outcome.error["type"] == "RuntimeError", outcome
    return json.loads(outcome.error["message"])


# -- memory ----------------------------------------------------------------------------------------
HOLD_MEMFD = code("""
    import os, time
    held = []
    for _ in range(12):                # 768 MB in memfds, held only by file descriptors
        fd = os.memfd_create("hold")
        for offset in range(0, 64 << 20, 1 << 20):
            os.pwrite(fd, b"x" * (1 << 20), offset)
        held.append(fd)
    time.sleep(30)
""")
HOLD_MAPPED = code("""
    import mmap, os, time
    held = []
    for _ in range(12):                # 768 MB, mapped one page each, no descriptor kept
        fd = os.memfd_create("hold")
        for offset in range(0, 64 << 20, 1 << 20):
            os.pwrite(fd, b"x" * (1 << 20), offset)
        held.append(mmap.mmap(fd, 4096))
        os.close(fd)
    time.sleep(30)
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_memory_held_in_memfds_counts(mode, counted_by):
    session = run_cells(HOLD_MEMFD, "x = 1", **mode)
    assert ending(session, "1") == "used more than 512 MB of memory"
    assert ending(session, "2") is None


@pytest.mark.slow
@pytest.mark.skipif(not ROOT_ONLY, reason="only root may read the size of a mapped memfd")
def test_memory_mapped_from_a_closed_memfd_counts(counted_by):
    session = run_cells(HOLD_MAPPED, **PROCESS)
    assert ending(session, "1") == "used more than 512 MB of memory"


# A process holding 200 MB that starts a child the way subprocess and posix_spawn do (sharing its
# address space until the exec), held before its exec by opening a FIFO nobody writes to yet; or
# forks a child that fills 100 MB of its own.
SPAWNER = code("""
    import os, sys
    held = bytearray(200 << 20)
    for offset in range(0, len(held), 4096):
        held[offset] = 1
    if sys.argv[1] == "spawn":
        print("spawning", flush=True)
        os.posix_spawn("/bin/true", ["true"], {},
                       file_actions=[(os.POSIX_SPAWN_OPEN, 3, sys.argv[2], os.O_RDONLY, 0)])
    elif os.fork() == 0:
        own = bytearray(100 << 20)
        for offset in range(0, len(own), 4096):
            own[offset] = 1
        print("filled", flush=True)
    os.read(0, 1)
""")


HIDERS = {
    # a shared anonymous mapping: shared memory ("/dev/zero (deleted)"), not RssAnon
    "shared mapping": code("""
        import mmap
        held = mmap.mmap(-1, 200 << 20)
        for offset in range(0, len(held), 4096):
            held[offset] = 1
        print("held", flush=True)
        input()
    """),
    # the first thread exits and a second holds the memory: the process's own status shows none
    "exited first thread": code("""
        import ctypes, os, threading
        def hold():
            held = bytearray(200 << 20)
            for offset in range(0, len(held), 4096):
                held[offset] = 1
            print("held", flush=True)
            input()
            os._exit(0)
        threading.Thread(target=hold).start()
        ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[os.uname().machine], 0)  # exit
    """),
}


@pytest.mark.parametrize("hider", list(HIDERS))
@pytest.mark.parametrize("read_map_files", [True, False])
def test_memory_the_watchdog_could_miss_counts(hider, read_map_files):
    """200 MB held where a process's RssAnon does not show it count all the same (as root the
    watchdog sizes a shared object through /proc/PID/map_files, else by RssShmem)."""
    if read_map_files and not ROOT_ONLY:
        pytest.skip("only root may read /proc/PID/map_files")
    holder = subprocess.Popen([sys.executable, "-c", HIDERS[hider]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        assert measure.memory_held_kb([holder.pid], read_map_files) > 200 << 10
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_child_sharing_its_parents_memory_counts_once(start, tmp_path):
    """The watchdog counts an address space once: a child between vfork and exec shows its
    parent's memory as its own (CI once stopped a student's 40 `sleep`s for 2 x 300 MB of torch),
    while a forked child's own pages still count."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    spawner = subprocess.Popen([sys.executable, "-c", SPAWNER, start, str(fifo)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        spawner.stdout.readline()
        deadline = time.monotonic() + 10
        while not (children := launch.descendants(spawner.pid)) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)               # the child, at its FIFO or with its 100 MB, stays there
        alone = measure.memory_held_kb([spawner.pid], read_map_files=False)
        both = measure.memory_held_kb([spawner.pid, *children], read_map_files=False)
        assert len(children) == 1 and alone > 200 << 10
        if start == "spawn":
            assert measure.same_address_space(children[0], spawner.pid)
            assert both - alone < 10 << 10, (alone, both)
        else:
            assert not measure.same_address_space(children[0], spawner.pid)
            assert both - alone > 100 << 10, (alone, both)
    finally:
        for pid in launch.descendants(spawner.pid):
            os.kill(pid, signal.SIGKILL)
        spawner.kill()
        spawner.wait()


# -- processes -------------------------------------------------------------------------------------
MANY_PROCESSES = code("""
    import subprocess
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(40)]
""")
MANY_THREADS = code("""
    import threading, time
    for _ in range(40):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
""")
FORK_BOMB = code("""
    import os, time
    if os.fork() == 0:
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.001)
    time.sleep(30)
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_too_many_processes_are_stopped_and_named(mode, counted_by):
    session = run_cells(MANY_PROCESSES, MANY_THREADS, "x = 1", **mode)
    assert ending(session, "1") == "started more than 16 processes"
    assert ending(session, "2") == "started more than 16 processes"
    assert ending(session, "3") is None
    assert survivors(TOKEN) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_is_held_by_the_pids_cgroup(mode):
    if not machine_has_cgroups():
        pytest.skip("no cgroup can be made here")
    session = run_cells(FORK_BOMB, "x = 1", **mode)
    assert ending(session, "1") == "started more than 16 processes"
    assert ending(session, "2") is None


# -- disk ------------------------------------------------------------------------------------------
FILL_DISK = code("""
    import os
    for number in range(4):            # 4 files of 32 MB: twice the 64 MB allowed
        with open(f"big{number}", "wb") as handle:
            for _ in range(32):
                handle.write(b"x" * (1 << 20))
""")
FILL_TMP = code("""
    import os, tempfile
    for number in range(4):
        with open(os.path.join(tempfile.gettempdir(), f"big{number}"), "wb") as handle:
            for _ in range(32):
                handle.write(b"x" * (1 << 20))
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_writing_more_than_the_disk_limit_is_stopped_and_named(mode, counted_by):
    session = run_cells(FILL_DISK, FILL_TMP, "x = 1", **mode)
    assert ending(session, "1") == "wrote more than 64 MB to disk"
    assert ending(session, "2") == "wrote more than 64 MB to disk"
    assert ending(session, "3") is None


@pytest.mark.slow
@needs_bwrap
def test_the_rest_of_the_sandbox_is_read_only():
    session = run_cells(code("""
        import json, os
        wrote = []
        for path in ["/x", "/dev/shm/x", "/etc/x", "/sandbox/x", "/sandbox/lib/x",
                     "/usr/x"]:
            try:
                open(path, "w").close()
                wrote.append(path)
            except OSError:
                pass
        raise RuntimeError(json.dumps(wrote))
    """), isolation="bwrap")
    assert reported(session, "1") == []


# -- what student code can see ---------------------------------------------------------------------
SNOOP = code("""
    import json, os, sys
    def readable(path):
        try:
            if os.path.isdir(path):
                return bool(os.listdir(path))
            with open(path, "rb") as handle:
                return bool(handle.read(1))
        except OSError:
            return False
    paths = json.loads(PATHS)
    text = {name: open(f"/proc/{name}", "rb").read().decode("utf-8", "replace")
            for name in ("self/cmdline", "self/environ", "1/cmdline")}
    raise RuntimeError(json.dumps({
        "readable": [p for p in paths if readable(p)],
        "named": sorted({p for p in paths for t in text.values() if p in t}),
        "cwd": os.getcwd(), "listing": sorted(os.listdir(".")), "uid": os.getuid(),
        "root": sorted(os.listdir("/")), "devices": sorted(os.listdir("/dev")),
        "home": sorted(os.listdir(HOME)) if os.path.isdir(HOME) else [],
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}))
""")


@pytest.mark.slow
@needs_bwrap
def test_student_code_sees_only_what_is_bound(tmp_path):
    """A classmate's folder beside hers, the course, an earlier results folder, /root and the
    machine's /tmp: none readable, none named in its command line or environment."""
    classmate = tmp_path / "submitted" / "classmate"
    classmate.mkdir(parents=True)
    (classmate / "attention.ipynb").write_text("{}")
    earlier = Path("/var/tmp") / f"tfgraded-{TOKEN}"
    earlier.mkdir()
    (earlier / "results.json").write_text("{}")
    secrets = [Path("/tmp") / f"tfsecret-{TOKEN}", Path.home() / f".tfsecret-{TOKEN}"]
    for secret in secrets:
        secret.write_text("secret")
    try:
        paths = [str(classmate), str(classmate / "attention.ipynb"), str(earlier),
                 str(earlier / "results.json"), str(ROOT), str(ROOT / "course.yaml"),
                 str(ROOT / "autograder"), *map(str, secrets), "/home", sys.prefix,
                 str(Path(launch.__file__).parent)]
        source = SNOOP.replace("PATHS", repr(json.dumps(paths))).replace(
            "HOME", repr(str(Path.home())))
        session = run_cells(source, isolation="bwrap",
                            hide=[tmp_path / "submitted" / "mine"], files={"helper.py": "X = 1"})
    finally:
        earlier.joinpath("results.json").unlink()
        earlier.rmdir()
        for secret in secrets:
            secret.unlink()
    seen = reported(session, "1")
    assert seen["readable"] == [] and seen["named"] == []
    assert seen["cwd"] == "/sandbox/work" and seen["listing"] == ["helper.py", "tmp"]
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                                 "root", "sandbox", "sbin", "tmp", "usr"}
    # of the grader's home, only the way to the interpreter (pyenv's, here) is there
    base = Path(sys.base_prefix)
    assert seen["home"] == ([base.relative_to(Path.home()).parts[0]]
                            if Path.home() in base.parents else [])
    assert not [d for d in seen["devices"] if d.startswith("nvidia")]
    assert seen["cuda"] == ""
    if ROOT_ONLY:
        assert seen["uid"] == 65534


def test_bwrap_is_told_its_binds_through_a_descriptor(monkeypatch):
    """bwrap's command line is /proc/1/cmdline inside: the binds, which name the machine's paths,
    go through --args instead."""
    sandbox = Sandbox(SandboxConfig(isolation="bwrap", **SMALL))
    try:
        sandbox.mode, sandbox.drop_to = "bwrap", (65534, 65534)
        planned = sandbox._plan()
        command = plan.command(dataclasses.replace(
            planned, python=binds.INSIDE_PYTHON / "bin" / "python"), 3, 4, 5)
        arguments = list(planned.bwrap)
    finally:
        sandbox.close()
    assert command[:4] == ["bwrap", "--args", "5", "--"]
    assert not [part for part in command if str(ROOT) in part or str(sandbox.base) in part]
    assert ["--ro-bind", str(sandbox.lib), str(binds.INSIDE_LIB)] == \
        arguments[arguments.index(str(sandbox.lib)) - 1:arguments.index(str(sandbox.lib)) + 2]


def test_hidden_folders_inside_bound_trees_are_masked(tmp_path):
    """A course kept inside a tree the sandbox binds (under /usr/local, say) gets an empty folder
    over it."""
    made = binds.Binds()
    tree = tmp_path / "usr"
    (tree / "local" / "course").mkdir(parents=True)
    made.bind(tree, Path("/usr"))
    binds.mask_hidden(made, [tree / "local" / "course", tmp_path / "elsewhere"])
    at = made.arguments.index("/usr/local/course")
    assert made.arguments[at - 1] == "--tmpfs" and made.arguments[at + 1:at + 3] == [
        "--remount-ro", "/usr/local/course"]
    assert str(tmp_path / "elsewhere") not in " ".join(made.arguments)


def test_gpus_are_hidden_unless_asked_for():
    sandbox = Sandbox(SandboxConfig(**SMALL))
    try:
        def bwrap() -> list[str]:
            return plan.bwrap_options(sandbox.config, sandbox.base, sandbox.drop_to)[0]

        assert sandbox._plan().environment["CUDA_VISIBLE_DEVICES"] == ""
        assert "nvidia" not in " ".join(bwrap())
        sandbox.config.gpu = True
        assert sandbox._plan().environment.get("CUDA_VISIBLE_DEVICES") == \
            os.environ.get("CUDA_VISIBLE_DEVICES")
        assert "/sys" in bwrap()
        assert "RLIMIT_AS" not in sandbox._plan().rlimits
    finally:
        sandbox.close()


def test_student_code_gets_avx2_kernels_where_the_cpu_has_them(monkeypatch):
    """sandbox.cpu_kernels: avx2 asks torch for its AVX2 kernels, only on a CPU that has AVX2
    (ATen is not relied on to check: an illegal instruction would stop it); auto leaves torch to
    choose."""
    monkeypatch.setattr(launch, "cpu_flags", lambda: {"sse2", "avx2", "fma", "avx512f"})
    assert launch.kernel_environment("avx2") == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert launch.kernel_environment("auto") == {}
    monkeypatch.setattr(launch, "cpu_flags", lambda: {"sse2", "avx"})     # an old x86
    assert launch.kernel_environment("avx2") == {}
    monkeypatch.setattr(launch, "cpu_flags", lambda: {"fp", "asimd", "sve"})   # ARM
    assert launch.kernel_environment("avx2") == {}
    monkeypatch.setattr(launch, "cpu_flags", lambda: {"avx2", "fma"})
    sandbox = Sandbox(SandboxConfig(**SMALL))
    try:
        assert sandbox._plan().environment["ATEN_CPU_CAPABILITY"] == "avx2"
        sandbox.config.cpu_kernels = "auto"
        assert "ATEN_CPU_CAPABILITY" not in sandbox._plan().environment
    finally:
        sandbox.close()


def test_the_course_sets_the_student_process_kernels(course):
    """course.yaml's sandbox.cpu_kernels reaches the student's process's configuration."""
    assert SandboxConfig.from_course(course, {}, 1, []).cpu_kernels == course.sandbox.cpu_kernels


@pytest.mark.slow
@pytest.mark.skipif(not {"avx2", "fma"} <= launch.cpu_flags(), reason="no AVX2 on this CPU")
@pytest.mark.parametrize("mode", MODES)
def test_student_torch_runs_the_kernels_asked_for(mode):
    import torch

    source = code("""
        import json, torch
        raise RuntimeError(json.dumps(torch.backends.cpu.get_cpu_capability()))
    """)
    assert reported(run_cells(source, **mode, cpu_kernels="avx2"), "1") == "AVX2"
    assert reported(run_cells(source, **mode, cpu_kernels="auto"), "1") == \
        torch.backends.cpu.get_cpu_capability()


# -- weaker isolation ------------------------------------------------------------------------------
def test_weaker_isolation_is_refused_unless_accepted():
    refused = choose_isolation(SandboxConfig(isolation="process"))
    assert refused.refusal and "sandbox.accept_weaker: process" in refused.refusal
    assert "student code was not run" in refused.refusal
    accepted = choose_isolation(SandboxConfig(isolation="process", accept_weaker="same-user"))
    assert accepted.refusal is None and accepted.mode == "process" and accepted.warning
    unknown = choose_isolation(SandboxConfig(accept_weaker="maybe"))
    assert "sandbox.accept_weaker is 'maybe'" in unknown.refusal


@pytest.mark.skipif(not ROOT_ONLY, reason="grading as root")
def test_root_code_is_refused_when_the_sandbox_user_cannot_run_python(monkeypatch):
    """The venv is under /root here: `nobody` cannot run it, so a plain process would run student
    code as root; `process` alone does not accept that."""
    monkeypatch.setattr(measure, "interpreter_footprint_kb", lambda user=None: None)
    refused = choose_isolation(SandboxConfig(isolation="process", accept_weaker="process"))
    assert refused.refusal.startswith("student code was not run: user 'nobody' cannot run ")
    assert "so it would run as root" in refused.refusal
    assert "chmod -R a+rX /opt/tfcourse" in refused.refusal


def test_a_refused_sandbox_starts_nothing_and_says_why():
    with pytest.raises(ProcessEnded) as ended:
        run_cells("x = 1", isolation="process")
    assert ended.value.description.startswith(
        "student code was not run: course.yaml asks for sandbox.isolation: process, so it would "
        "run as a plain process that can read this machine's files")
    assert "install bubblewrap" in ended.value.description


# -- killing ---------------------------------------------------------------------------------------
DAEMONS = code("""
    import os, subprocess, sys
    SLEEP = "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\ntime.sleep(600)"
    subprocess.Popen([sys.executable, "-c", SLEEP, "TOKEN"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", SLEEP, "TOKEN"])
        os._exit(0)
    os.wait()
""")
GRADER = """
import json, sys, time
sys.path.insert(0, {root!r})
from tfcourse.process import set_subreaper
from tfcourse.sandbox.session import StudentSession
from tfcourse.sandbox.forked import HandedZygote
from tfcourse.sandbox.launch import SandboxConfig
from tfcourse.sandbox.session import Cell
set_subreaper()
config = {config!r}
config.pop("forked", None)
# as a grader's job says: where its sandboxes go, and the zygote of the test's, if any, that fits
fd = {zygote!r}
zygote = HandedZygote(fd) if fd is not None else None
session = StudentSession([Cell("1", {cell!r})], SandboxConfig(**config, folder={folder!r},
                                                              zygote=zygote), [], 20,
                         time.monotonic() + 120)
session.start()
cgroup = session._sandbox.cgroup
folders = [str(f) for f in cgroup.folders] if cgroup else []
print(json.dumps(folders + [str(session._sandbox.base)]), flush=True)
time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_nothing_outlives_a_grader_killed_by_sigkill(mode, tmp_path):
    """Student daemons (double fork, new session, SIGTERM ignored) die with a grader killed by
    SIGKILL, and the sandbox's cgroup and folder are removed."""
    config = {**SMALL, **mode}
    sandboxes = tmp_path / "sandboxes"            # as the runner does: its grader leaves them
    sandboxes.mkdir(mode=0o711)
    plain = SandboxConfig(**{k: v for k, v in config.items() if k != "forked"})
    with zygote_for_sandbox(plain, "forked" in config) as zygote:
        given = handed(plain, zygote).zygote
        fd = given.fd if given is not None else None
        assert (fd is not None) == ("forked" in config)
        script = GRADER.format(root=str(ROOT), cell=DAEMONS, config=config,
                               folder=str(sandboxes), zygote=fd)
        grader = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                  text=True, pass_fds=[fd] if fd is not None else [])
        _wait_for_the_daemons_then_kill(grader)
        deadline = time.monotonic() + 10
        folders = grader.folders
        while (survivors(TOKEN) or any(Path(f).exists() for f in folders)) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert survivors(TOKEN) == []
        assert [f for f in folders if Path(f).exists()] == []


def _wait_for_the_daemons_then_kill(grader) -> None:
    try:
        folders = json.loads(grader.stdout.readline())
        started = time.monotonic()
        while len(daemons := [line for line in survivors(TOKEN)
                              if not line.startswith(f"{grader.pid}:")]) < 2 and \
                time.monotonic() < started + 10:
            time.sleep(0.1)                  # the double fork's grandchild may not have exec'd
        assert len(daemons) == 2, daemons
    finally:
        grader.kill()
        grader.wait()
    grader.folders = folders


@pytest.mark.slow
def test_the_cgroup_stays_until_the_grader_has_read_why_the_process_ended():
    """The keeper kills what the student's process left when it ends, but leaves its cgroup:
    the grader reads there whether a limit ended it, then removes it."""
    if not machine_has_cgroups():
        pytest.skip("no cgroup can be made here")
    sandbox = Sandbox(SandboxConfig(**SMALL))
    try:
        fd_in, _ = sandbox.start()
        os.close(fd_in)                          # the worker reads the end of its requests: exits
        sandbox.process.wait(timeout=120)
        folders = list(sandbox.cgroup.folders)
        assert folders and all(folder.is_dir() for folder in folders)
    finally:
        sandbox.close()
    assert not any(folder.exists() for folder in folders)


# -- time: the student's CPU seconds, and a backstop on waiting ------------------------------------
TIMED = code("""
    import os, sys, threading, time
    def spin():
        while True:
            pass
    def nap():
        time.sleep(10 ** 6)
    def nap30():
        time.sleep(30)
    def quick():
        return sum(range(1000))
    def work(seconds):
        # what torch leaves beside a busy thread: helper threads parked, waiting for work
        for _ in range(4):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        return threading.active_count()
    def ask():
        sys.stdin = os.fdopen(os.pipe()[0])      # a terminal no one types into
        return input()
    def locked():
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
""")


@contextlib.contextmanager
def timed_session(mode: dict, wait_factor: float, wait_floor: float, cells=(), **idle):
    """A started session on TIMED (and `cells`), in `mode`, with that backstop on waiting and
    the `idle` limits given (idle_seconds, idle_total)."""
    config = {**SMALL, **mode}
    forked = bool(config.pop("forked", False))
    sandbox_config = SandboxConfig(**config)
    with zygote_for_sandbox(sandbox_config, forked) as host:
        session = StudentSession([Cell("1", TIMED), *cells], handed(sandbox_config, host), [],
                                 20, time.monotonic() + 600, wait_factor=wait_factor,
                                 wait_floor=wait_floor, **idle)
        try:
            session.start()
            if not cells:
                assert [o.ok for o in session.outcomes] == [True], session.outcomes
            yield session
        finally:
            session.close()
    if forked:
        assert session.config.zygote.broken == []


def call(session: StudentSession, function: str, cpu_seconds: float):
    return session.request("call", cpu_seconds, fn=function, args=[], kwargs={})


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_busy_loop_is_stopped_by_its_cpu_seconds(mode, counted_by):
    """An endless loop spends the request's CPU seconds and is stopped with those words, long
    before its (here an hour's) backstop on waiting."""
    from tfcourse.submission.framework import verdict

    with timed_session(mode, wait_factor=1, wait_floor=3600) as session:
        started = time.monotonic()
        with pytest.raises(TimedOut) as raised:
            call(session, "spin", 1.0)
        assert time.monotonic() - started < 600
        assert not raised.value.waiting and raised.value.seconds == 1.0
        assert 1.0 < session.cpu_used < 3.0
        assert verdict(raised.value)[:2] == (
            "used more than {seconds:.0f} CPU seconds (an endless loop, or very slow code?)",
            {"seconds": 1.0})
        assert call(session, "quick", 1.0) == 499500        # a fresh process answers


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_code_that_sleeps_is_stopped_by_the_backstop_on_waiting(mode):
    """A sleep spends no CPU: the backstop on waiting (wait_factor times the CPU seconds, plus
    wait_floor) stops it, and says it waited, not that it looped."""
    from tfcourse.submission.framework import verdict

    with timed_session(mode, wait_factor=2, wait_floor=1) as session:
        started = time.monotonic()
        with pytest.raises(TimedOut) as raised:
            call(session, "nap", 1.0)
        assert time.monotonic() - started >= 3.0
        assert raised.value.waiting and raised.value.seconds == 3.0
        assert session.cpu_used < 1.0
        assert verdict(raised.value)[:2] == (
            "did not finish within {seconds:.0f} s of waiting while using little CPU (it may be "
            "waiting on something: input(), a sleep, a lock)", {"seconds": 3.0})


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_busy_machine_does_not_stop_a_correct_stub(mode, counted_by):
    """Load takes the clock's time but none of the student's CPU: the student's processes are
    stopped (SIGSTOP) as the request is sent and go on (SIGCONT) three seconds later, three times
    the request's CPU seconds; the answer still counts. A clock limit of 1 s failed it. Nor does
    its idle limit (1 s): a stopped process is not idle, someone else stopped it."""
    with timed_session(mode, wait_factor=4, wait_floor=120, idle_seconds=1) as session:
        sandbox, send = session._sandbox, session._send
        stopped = []

        def send_while_stopped(message, timeout):
            if not stopped:
                stopped.extend(sandbox._members())
                for pid in stopped:
                    os.kill(pid, signal.SIGSTOP)
                resume = threading.Timer(3.0, lambda: [os.kill(pid, signal.SIGCONT)
                                                       for pid in stopped])
                resume.start()
            send(message, timeout)

        session._send = send_while_stopped
        started = time.monotonic()
        try:
            assert call(session, "quick", 1.0) == 499500
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        assert stopped and time.monotonic() - started >= 3.0
        assert session._sandbox is sandbox and sandbox.alive()     # not stopped and restarted


IDLE_WORDS = ("waited {seconds:.0f} s doing nothing (sleeping, or waiting on input() or a lock): "
              "the grader allows {limit:.0f} s of waiting")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_code_that_sleeps_is_stopped_by_its_idle_seconds(mode, counted_by):
    """A 30 s sleep spends neither CPU nor a CPU's waiting: none of its threads is runnable, so
    after the request's idle seconds (2) it is stopped, in those words, long before its backstop
    on waiting (an hour here); a fresh process answers the next request."""
    from tfcourse.submission.framework import verdict

    with timed_session(mode, wait_factor=1, wait_floor=3600, idle_seconds=2) as session:
        started = time.monotonic()
        with pytest.raises(TimedOut) as raised:
            call(session, "nap30", 20.0)
        waited = time.monotonic() - started
        assert 2.0 <= waited < 6.0, waited
        assert raised.value.waiting and raised.value.idle == 2 and not raised.value.total
        assert 2.0 < raised.value.seconds < 3.0
        assert str(raised.value).startswith("waited 2 s doing nothing")
        assert verdict(raised.value)[:2] == (IDLE_WORDS, {"seconds": raised.value.seconds,
                                                          "limit": 2})
        assert 2.0 < session.idle_used < 3.0 and session.cpu_used < 1.0
        assert call(session, "quick", 1.0) == 499500


@pytest.mark.slow
@pytest.mark.parametrize("stub", ["ask", "locked"])
@pytest.mark.parametrize("mode", MODES)
def test_code_that_waits_on_input_or_a_lock_is_stopped_by_its_idle_seconds(mode, stub):
    """input() on a terminal no one types into, a lock that is never released: both wait on
    nothing, and are stopped at the idle limit."""
    with timed_session(mode, wait_factor=1, wait_floor=3600, idle_seconds=1) as session:
        started = time.monotonic()
        with pytest.raises(TimedOut) as raised:
            call(session, stub, 20.0)
        assert time.monotonic() - started < 5.0
        assert raised.value.idle == 1


@pytest.mark.slow
def test_the_notebook_s_idle_seconds_are_its_requests_together():
    """Each request may wait on nothing for idle_seconds, all of them together for idle_total:
    the second sleep is stopped when the notebook's are spent, and says so. A cell that sleeps is
    left out with the same words."""
    from tfcourse.submission.framework import verdict
    from tfcourse.submission.run import cell_notes

    sleeper = Cell("2", "import time\ntime.sleep(30)\n")
    with timed_session(PROCESS, wait_factor=1, wait_floor=3600, cells=[sleeper],
                       idle_seconds=1.5, idle_total=2.5) as session:
        assert [o.ok for o in session.outcomes] == [True, False]
        assert session.outcomes[1].idle["limit"] == 1.5 and not session.outcomes[1].idle["total"]
        json.dumps(dataclasses.asdict(session.outcomes[1]))      # as the report keeps it
        assert cell_notes(session)[0].template == (
            "cell {label} " + IDLE_WORDS + "; it was left out and the rest was graded")
        spent = session.idle_used
        assert 1.5 < spent < 2.5
        started = time.monotonic()
        with pytest.raises(TimedOut) as raised:
            call(session, "nap30", 20.0)
        assert time.monotonic() - started < 2.5 - spent + 2.0
        assert raised.value.total and raised.value.idle == 2.5
        assert 2.5 < raised.value.seconds < 3.5
        assert verdict(raised.value)[0] == (
            "waited {seconds:.0f} s in all doing nothing (sleeping, or waiting on input() or a "
            "lock): the grader allows {limit:.0f} s of waiting per notebook")
        assert call(session, "quick", 1.0) == 499500       # a request that waits on nothing


def test_the_class_report_counts_a_stop_for_waiting_on_nothing_as_a_limit():
    """The class report lists the submissions that hit a limit by their messages' kinds: a
    request stopped for waiting on nothing is one."""
    from tfcourse.insights.classreport import LIMIT_KINDS
    from tfcourse.sandbox.session import IDLE_MESSAGE, IDLE_TOTAL_MESSAGE

    assert IDLE_MESSAGE == IDLE_WORDS
    assert IDLE_MESSAGE.startswith(LIMIT_KINDS) and IDLE_TOTAL_MESSAGE.startswith(LIMIT_KINDS)


def _hogs(count: int, cpu: int) -> list[subprocess.Popen]:
    """`count` busy loops outside the sandbox, all on CPU `cpu`: a machine busy for that CPU."""
    return [subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})"
                              "\nwhile True: pass"]) for _ in range(count)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_loaded_machine_does_not_make_a_busy_stub_idle(mode, counted_by):
    """A stub that computes (beside four parked helper threads, as torch keeps them) on a CPU it
    shares with four busy loops outside the sandbox gets a fifth of it (about half in a cgroup of
    its own, which the scheduler weighs against the loops' group): much of the time it waits in
    the run queue, spending nothing. Runnable ('R') is not idle, so its 0.5 s idle limit does not
    stop it, though its 1.5 CPU seconds take 3 to 7 s of the clock."""
    with timed_session(mode, wait_factor=4, wait_floor=120, idle_seconds=0.5) as session:
        for pid in session._sandbox._members():
            for thread in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(thread), {0})
        hogs = _hogs(4, 0)
        try:
            started = time.monotonic()
            assert session.request("call", 10.0, fn="work", args=[1.5], kwargs={}) == 5
            took = time.monotonic() - started
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        assert took > 2.25, took                 # it did wait for its CPU (1.5 CPU s)
        assert session.idle_used < 0.5


def test_a_process_is_busy_while_any_of_its_threads_is_runnable_or_stopped():
    """limits.busy: a sleeping process is idle; one whose threads sleep but one that computes is
    busy; a stopped one is busy (someone else stopped it); one that ended gives no answer."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    threads = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import threading, time
        for _ in range(4):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        while True:
            pass
    """)])
    try:
        time.sleep(1.0)
        assert measure.busy([sleeper.pid]) is False
        assert measure.busy([threads.pid]) is True
        assert measure.busy([sleeper.pid, threads.pid]) is True
        assert len(os.listdir(f"/proc/{threads.pid}/task")) == 5
        os.kill(sleeper.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert measure.busy([sleeper.pid]) is True
    finally:
        for child in (sleeper, threads):
            child.kill()
            child.wait()
    assert measure.busy([sleeper.pid]) is None


def test_a_cgroup_counts_cpu_seconds_where_it_can(tmp_path):
    """cgroup v2's cpu.stat (there whatever the controllers) and v1's cpuacct.usage, as seconds;
    None where the cgroup keeps no count (then the sandbox reads /proc)."""
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert Cgroup(2, folders=[tmp_path]).cpu_seconds() == 2.5
    (tmp_path / "cpuacct.usage").write_text("1500000000\n")
    assert Cgroup(1, folders=[tmp_path], cpu=tmp_path).cpu_seconds() == 1.5
    assert Cgroup(1, folders=[tmp_path]).cpu_seconds() is None


def test_the_process_tree_s_cpu_seconds_include_its_ended_children():
    """/proc: a process's own time and its waited-for children's; a reaper's children's only."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        pid = os.fork()
        if pid == 0:
            end = time.process_time() + 0.5
            while time.process_time() < end:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        sys.stdout.write("done\\n"); sys.stdout.flush()
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "done\n"
        assert measure.cpu_seconds([child.pid]) >= 0.4          # 0.5 s, in clock ticks
        assert measure.cpu_seconds([], reapers=[child.pid]) >= 0.4
        assert measure.cpu_seconds([], reapers=[os.getpid()]) < measure.cpu_seconds([os.getpid()])
    finally:
        child.kill()
        child.wait()


# -- the address space backstop --------------------------------------------------------------------
def test_the_address_space_backstop_comes_from_the_measured_footprint(monkeypatch):
    monkeypatch.setattr(measure, "interpreter_footprint_kb", lambda user=None: 3_000_000)
    sandbox = Sandbox(SandboxConfig(memory_mb=768))
    try:
        space = sandbox._plan().rlimits["RLIMIT_AS"][0]
    finally:
        sandbox.close()
    assert space == (3_000_000 << 10) + ((2 * 768 + 1024) << 20)


@pytest.mark.slow
def test_the_footprint_is_measured_once_and_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = measure.interpreter_footprint_kb()
    assert first and first > 100_000        # torch maps hundreds of MB just to import
    monkeypatch.setattr(measure, "_measure_footprint_kb", lambda user: pytest.fail("measured"))
    assert measure.interpreter_footprint_kb() == first
    assert json.loads((tmp_path / "tfcourse" / "interpreter.json").read_text())


# -- cgroup v2 (on a folder that looks like one) ---------------------------------------------------
def fake_v2(tmp_path: Path, monkeypatch) -> Path:
    """A cgroup v2 tree in a folder: the root hands memory and pids down, we live in a leaf."""
    root, own = tmp_path / "cgroup", tmp_path / "cgroup" / "grader.scope"
    own.mkdir(parents=True)
    for folder, controllers, subtree in ((root, "cpu memory pids", "memory pids"),
                                         (own, "memory pids", "")):
        (folder / "cgroup.controllers").write_text(controllers)
        (folder / "cgroup.subtree_control").write_text(subtree)
        (folder / "cgroup.procs").write_text("")
    monkeypatch.setattr(measure, "_own_folder",
                        lambda controller: own if controller == "" else None)
    monkeypatch.setattr(measure, "_cgroup_mounts", lambda: {"": (root, "/")})
    return root


def test_cgroup_v2_limits_memory_swap_and_processes(tmp_path, monkeypatch):
    root = fake_v2(tmp_path, monkeypatch)
    made = Cgroup._create_v2("tfcourse-test", Limits(768, 64, 16))
    assert made.version == 2 and made.memory == root / "tfcourse-test"
    # our own cgroup has processes, so it cannot hand controllers down: a sibling is made
    assert (made.memory / "memory.max").read_text() == str(768 << 20)
    assert (made.memory / "memory.swap.max").read_text() == "0"
    assert (made.memory / "memory.oom.group").read_text() == "1"
    assert (made.pids / "pids.max").read_text() == "16"
    assert made.exceeded() is None
    (made.memory / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert made.exceeded() == "memory"
    (made.memory / "memory.events").write_text("oom_kill 0\n")
    (made.pids / "pids.events").write_text("max 3\n")
    assert made.exceeded() == "processes"


# -- the setup check (Gradescope's setup.sh runs it) ---------------------------------------------
@pytest.mark.slow
def test_the_setup_check_says_how_student_code_would_be_isolated(tmp_path):
    import yaml

    from tfcourse.adapters.gradescope import SETUP

    assert "python -m tfcourse.sandbox.launch ." in SETUP.splitlines()[-1]
    assert "chmod -R a+rX /opt/tfcourse" in SETUP
    data = yaml.safe_load((ROOT / "course.yaml").read_text())
    data["sandbox"].update(isolation="process", accept_weaker=False)
    (tmp_path / "course.yaml").write_text(yaml.safe_dump(data))
    check = [sys.executable, "-m", "tfcourse.sandbox.launch", str(tmp_path)]
    refused = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert refused.returncode == 1
    assert refused.stdout.startswith("REFUSED: student code was not run: course.yaml asks for "
                                     "sandbox.isolation: process")
    if bwrap_works():
        fine = subprocess.run(check[:-1] + [str(ROOT)], capture_output=True, text=True, cwd=ROOT,
                              timeout=300)
        assert fine.returncode == 0 and fine.stdout.startswith("isolation: bwrap"), fine


# -- what student code has no use for (seccomp.py) -------------------------------------------------
CLOSED_CALLS = code("""
    import ctypes, json, os, socket
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)             # struct io_uring_params, zeroed
    calls = {"add_key": (248, b"user", b"TOKEN", b"left for the next", 17, -4),
             "keyctl": (250, 0, -4, 0, 0, 0),         # KEYCTL_GET_KEYRING_ID of the user keyring
             "shmget": (29, 0, 1 << 20, 0o1600),      # IPC_PRIVATE, IPC_CREAT | 0600
             "msgget": (68, 0, 0o1600), "semget": (64, 0, 1, 0o1600),
             "io_uring_setup": (425, 1, params)}
    said = {}
    for name, arguments in calls.items():
        result = libc.syscall(*arguments)
        said[name] = os.strerror(ctypes.get_errno()) if result == -1 else "allowed"
    for name in ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
        try:
            socket.socket(getattr(socket, name), socket.SOCK_DGRAM).close()
            said[name] = "allowed"
        except OSError as error:
            said[name] = error.strerror
    left, right = socket.socketpair()                 # AF_UNIX: multiprocessing needs it
    left.send(b"x")
    said["AF_UNIX"] = "allowed" if right.recv(1) == b"x" else "broken"
    import resource
    said["open files"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    raise RuntimeError(json.dumps(said))
""")
DENIED = "Operation not permitted"


@pytest.mark.slow
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the call numbers are x86-64's")
@pytest.mark.parametrize("mode", MODES)
def test_keyrings_system_v_ipc_io_uring_and_the_network_are_closed(mode):
    """A key added to the sandbox user's keyring, or a System V segment, would outlive the process
    (for the next student's code to read; a segment detached from every process is in nobody's
    memory); data sent over the loopback and never read is held in socket buffers that a cgroup
    v1 limit does not count. All fail; AF_UNIX sockets still work (seccomp.py), as many as
    RLIMIT_NOFILE lets the process open (their buffers are what the watchdog cannot count)."""
    session = run_cells(CLOSED_CALLS, **mode)
    assert reported(session, "1") == {
        **{name: DENIED for name in ("add_key", "keyctl", "shmget", "msgget", "semget",
                                     "io_uring_setup", "AF_INET", "AF_INET6", "AF_NETLINK",
                                     "AF_PACKET")},
        "AF_UNIX": "allowed", "open files": [launch.OPEN_FILES] * 2}


SOCKETS = code("""
    import json, socket
    said = {}
    for name, make in (("socketpair", socket.socketpair),
                       ("AF_UNIX", lambda: socket.socket(socket.AF_UNIX))):
        try:
            made = make()
            said[name] = "allowed"
        except OSError as error:
            said[name] = error.strerror
    raise RuntimeError(json.dumps(said))
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_without_a_cgroup_a_student_starts_afresh_with_no_socket(mode, monkeypatch):
    """Where no cgroup counts memory, the watchdog cannot see what sockets hold (their buffers, a
    memfd in flight in one): the student gets no socket at all, and is never forked from a
    zygote (whose filter allows AF_UNIX) but started afresh."""
    if mode.get("forked"):
        config = SandboxConfig(**{**SMALL, "isolation": "bwrap"})
        with zygote_for_sandbox(config) as host:
            monkeypatch.setattr(Cgroup, "create", NO_CGROUP)
            session = run_cells(SOCKETS, FORKED_CHECK, zygote=host, isolation="bwrap")
            assert session.config.zygote.broken == [
                "no cgroup can hold a forked student's memory"]
        assert "zygote.py" not in next(o for o in session.outcomes
                                       if o.label == "2").error["message"]
    else:
        monkeypatch.setattr(Cgroup, "create", NO_CGROUP)
        session = run_cells(SOCKETS, **mode)
    assert reported(session, "1") == {"socketpair": DENIED, "AF_UNIX": DENIED}


def _decide(program: bytes, arch: str, number: int, first: int = 0) -> str:
    """What the classic BPF `program` answers for a call on `arch` (a small interpreter of the
    instructions seccomp.py uses)."""
    data = struct.pack("<iIQQ", number, seccomp.AUDIT_ARCH[arch], 0, first)
    code = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    here, accumulator = 0, 0
    while True:
        op, jt, jf, k = code[here]
        here += 1
        if op == seccomp.LD_W_ABS:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.AND_K:
            accumulator &= k
        elif op == seccomp.JEQ_K:
            here += jt if accumulator == k else jf
        elif op == seccomp.RET_K:
            return {seccomp.SECCOMP_RET_ALLOW: "allow",
                    seccomp.SECCOMP_RET_ERRNO | seccomp.EPERM: "EPERM"}[k]


@pytest.mark.parametrize("arch", list(seccomp.AUDIT_ARCH))
def test_the_filter_decides_each_table_s_calls(arch):
    """Every architecture's table, the ones this machine cannot run too: the denied calls fail,
    socket() only for families other than AF_UNIX, and the calls around them are allowed;
    without AF_UNIX (no cgroup), socket() and socketpair() fail whatever the family."""
    strict = seccomp.student_filter(unix_sockets=False)
    for call in (seccomp.SOCKET[arch], seccomp.SOCKETPAIR[arch]):
        assert _decide(strict, arch, call, first=1) == "EPERM"
    assert _decide(strict, arch, 0) == "allow"
    program = seccomp.student_filter()
    for number in seccomp.denied(arch):
        assert _decide(program, arch, number) == "EPERM", number
        if arch == "x86_64":                                        # the x32 ABI's number
            assert _decide(program, arch, number | seccomp.X32_BIT) == "EPERM", number
    socket_call = seccomp.SOCKET[arch]
    assert _decide(program, arch, socket_call, first=1) == "allow"       # AF_UNIX
    assert _decide(program, arch, socket_call, first=1 | 1 << 32) == "allow"   # int: 32 bits
    for family in (2, 10, 16, 17):                         # AF_INET, AF_INET6, NETLINK, PACKET
        assert _decide(program, arch, socket_call, first=family) == "EPERM"
    for number in (0, 1, 3, 39, 56, 57, 59, 60, 231):     # read, write, close, getpid, clone...
        if number not in seccomp.denied(arch) and number != socket_call:
            assert _decide(program, arch, number) == "allow", number
