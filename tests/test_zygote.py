"""Students' processes forked from a zygote (tfcourse/sandbox/forked.py, zygote.py): each is a
fresh process in fresh namespaces, nothing one student does reaches the next, and the grader falls
back to a fresh sandbox whenever the zygote cannot serve.

The limits (memory, processes, disk) and the grader's death are tested for forked processes with
every other mode, in test_sandbox.py ("forked").
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid

import pytest

from conftest import survivors, zygote_for_sandbox

from tfcourse.sandbox import forked
from tfcourse.sandbox.launch import SandboxConfig, bwrap_works
from tfcourse.sandbox.session import StudentSession
from tfcourse.sandbox.session import Cell

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (bwrap_works() and os.geteuid() == 0),
                                 reason="students' processes are forked only in bubblewrap, "
                                        "as root")]
TOKEN = f"tfzygote{uuid.uuid4().hex[:10]}"
CONFIG = {"memory_mb": 768, "disk_mb": 64, "processes": 32, "isolation": "bwrap"}

# A student who leaves everything she can behind: files, a changed torch, a module's state,
# environment, a daemon, an abstract socket, a random sequence.
LEAVES = f"""
import os, socket, subprocess, sys, random, torch, channel
open("/sandbox/work/left.txt", "w").write("x")
open("/tmp/left.txt", "w").write("x")
torch.matmul = lambda *a: "hijacked"
torch.left_behind = True
channel.left_behind = True
os.environ["LEFT_BEHIND"] = "1"
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{TOKEN}"],
                 start_new_session=True)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind("\\0{TOKEN}")
listener.listen()
random.seed(1)
"""
# The next student: what she finds.
FINDS = f"""
import json, os, random, socket, sys, torch, channel
def status():
    return dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines()
                if ":" in line)
def reachable():
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect("\\0{TOKEN}")
        return True
    except OSError:
        return False
seen = status()
processes = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
raise RuntimeError(json.dumps({{
    "files": [p for p in ("/sandbox/work/left.txt", "/tmp/left.txt") if os.path.exists(p)],
    "listing": sorted(os.listdir("/sandbox/work")),
    "torch": [torch.matmul(torch.ones(1, 1), torch.ones(1, 1)) == "hijacked",
              hasattr(torch, "left_behind")],
    "channel": hasattr(channel, "left_behind"),
    "environment": "LEFT_BEHIND" in os.environ,
    "socket": reachable(),
    "processes": processes, "pid": os.getpid(),
    "daemon": [p for p in processes
               if "{TOKEN}" in open(f"/proc/{{p}}/cmdline").read()],
    "random": [random.random(), __import__("numpy").random.random(), torch.initial_seed(),
               torch.rand(1).item()],
    "uid": os.getuid(), "gid": os.getgid(),
    "capabilities": [seen[name].strip() for name in
                     ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": seen["NoNewPrivs"].strip(),
    "init": open("/proc/1/cmdline").read(),
    "main": sys.modules["__main__"].__file__,
}}))
"""


def run(host, *sources: str, **config) -> StudentSession:
    """Run `sources` as cells in a sandbox of CONFIG (and `config`), forked from `host` where
    it fits the sandbox, as a runner hands its zygote to a job's grader."""
    cells = [Cell(str(number), source) for number, source in enumerate(sources, 1)]
    settings = forked.handed(SandboxConfig(**{**CONFIG, **config}), host)
    session = StudentSession(cells, settings, [], 60, time.monotonic() + 120)
    try:
        session.start()
    finally:
        session.close()
    return session


def reported(session: StudentSession) -> dict:
    outcome = session.outcomes[-1]
    assert outcome.error and outcome.error["type"] == "RuntimeError", outcome
    return json.loads(outcome.error["message"])


def test_no_state_crosses_from_one_student_to_the_next():
    with zygote_for_sandbox(SandboxConfig(**CONFIG)) as host:
        first = reported(run(host, LEAVES, FINDS))       # what she sees of her own doings
        second = reported(run(host, FINDS))
        third = reported(run(host, FINDS))
    assert first["files"] and first["socket"] and first["daemon"] and first["environment"]
    assert second["files"] == [] and second["listing"] == ["tmp"]
    assert first["torch"] == [True, True] and first["channel"]
    assert second["torch"] == [False, False] and not second["channel"]
    assert not second["environment"] and not second["socket"]
    assert second["daemon"] == [] and second["pid"] == 2 and second["processes"] == [1, 2]
    assert all(a != b for a, b in zip(second["random"], third["random"]))   # each seeded afresh
    assert first["random"][2] != second["random"][2]       # torch's too
    assert (second["uid"], second["gid"]) == (65534, 65534)
    assert second["capabilities"] == ["0000000000000000"] * 5
    assert second["no_new_privs"] == "1"
    assert "zygote.py" in second["init"]                 # forked, not started afresh
    assert second["main"].endswith("/sandbox/lib/worker.py")
    assert survivors(TOKEN) == []                        # her daemon ended with her process


def test_a_killed_zygote_costs_nothing_but_time():
    """Students keep being graded when the zygote dies: a fresh sandbox each, as before."""
    with zygote_for_sandbox(SandboxConfig(**CONFIG)) as host:
        assert "zygote.py" in reported(run(host, FINDS))["init"]
        for pid in [*host.sandbox._members(), host.sandbox.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        host.sandbox.process.wait(timeout=10)
        session = run(host, "x = 1", FINDS)
        seen = reported(session)
        assert "zygote.py" not in seen["init"] and seen["pid"] == 2
        assert len(session.config.zygote.broken) == 1


def test_a_sandbox_unlike_the_zygote_is_started_afresh():
    """Another harness, other limits of the bwrap arguments, other threads: no fork."""
    with zygote_for_sandbox(SandboxConfig(**CONFIG)) as host:
        assert forked.fitting(SandboxConfig(**CONFIG), host) == host.key
        assert forked.fitting(SandboxConfig(**CONFIG, threads=2), host) is None
        session = run(host, FINDS, threads=2)
        assert "zygote.py" not in reported(session)["init"]
        assert session.config.zygote is None          # not handed on: nothing failed


def test_the_zygote_holds_only_the_capabilities_it_needs():
    """bubblewrap as root would keep every capability: the zygote keeps its seven, in its
    effective and bounding sets alike (its student processes keep none: above)."""
    from tfcourse.sandbox.launch import descendants

    wanted = 0
    for name in forked.ZYGOTE_CAPABILITIES:
        wanted |= 1 << CAPABILITY_NUMBERS[name]
    with zygote_for_sandbox(SandboxConfig(**CONFIG)) as host:
        reported(run(host, FINDS))              # it is up and serving
        zygotes = [pid for pid in descendants(host.sandbox.process.pid)     # not its bwrap's two
                   if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].endswith(b"python")]
        seen = [dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read()
                     .splitlines() if ":" in line) for pid in zygotes]
    assert seen and all(int(s["CapEff"], 16) == wanted and int(s["CapBnd"], 16) == wanted
                        for s in seen), seen


CAPABILITY_NUMBERS = {"CAP_DAC_OVERRIDE": 1, "CAP_KILL": 5, "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8,
                      "CAP_NET_ADMIN": 12, "CAP_SYS_ADMIN": 21}
HOG = """
import torch
held = torch.ones(MB << 18)          # MB megabytes of float32, written
"""


@pytest.mark.parametrize("megabytes, killed", [(420, False), (900, True)])
def test_memory_is_limited_as_for_a_fresh_process(megabytes, killed):
    """The torch pages a forked process shares with the zygote are the zygote's in the cgroup's
    count; the student's limit is lowered by them, so that the verdict is a fresh process's."""
    config = {**CONFIG, "memory_mb": 1024}
    cells = [Cell("1", HOG.replace("MB", str(megabytes))), Cell("2", FINDS)]
    verdicts = []
    for fork in (True, False):
        with zygote_for_sandbox(SandboxConfig(**config), fork) as host:
            session = StudentSession(cells, forked.handed(SandboxConfig(**config), host), [],
                                     60, time.monotonic() + 120)
            try:
                session.start()
            finally:
                session.close()
        first = session.outcomes[0]
        assert ("zygote.py" in reported(session)["init"]) == fork
        verdicts.append(first.ended_process)
    assert verdicts[0] == verdicts[1], verdicts
    assert (verdicts[0] == "used more than 1024 MB of memory") == killed


def test_a_test_is_handed_a_zygote_only_once_it_is_ready():
    """Three forked cases of test_sandbox.py failed once on a loaded machine: their first request
    reached a zygote still importing torch, whose start and fork together took longer than the
    READY_SECONDS a request waits, so the student's process started afresh and the case read it as
    not forked. The tests' zygote is handed on once its ready pipe says so, however long that is."""
    with zygote_for_sandbox(SandboxConfig(**CONFIG)) as host:
        assert host._ready_fd < 0 and host.refused is None and host.usable()
        assert "zygote.py" in reported(run(host, FINDS))["init"]
