"""The trusted grader's fork server (tfcourse/batch/forkserver.py): every grader starts from the
same imported-only process, so nothing one grading leaves behind reaches the next; it ends as a
grader process ends; and grading through it gives the same results as a fresh interpreter."""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tfcourse.batch import forkserver

from conftest import ROOT, make_submission, replace_in, solution_cells

# Each test starts a server, which imports torch: end to end.
pytestmark = pytest.mark.slow

PROBE = ROOT / "tests"                      # forkprobe.py: reports the state a child starts with


def probe(server, *args, **env) -> tuple[dict, int]:
    child = server.spawn(list(args), {**os.environ, **env}, PROBE, module="forkprobe")
    _, stderr = child.communicate(timeout=120)
    return json.loads(stderr.strip().splitlines()[-1]), child.returncode


@pytest.fixture
def server():
    started = forkserver.ForkServer(PROBE)
    yield started
    started.close()


def test_no_state_crosses_from_one_grader_to_the_next(server):
    first, _ = probe(server, PROBE_VARIABLE="alice")
    second, _ = probe(server, PROBE_VARIABLE="bob")
    assert first["pid"] != second["pid"]
    # the first left a module global, torch's seed and random's seed changed: none is seen
    assert first["left_by_another"] is None and second["left_by_another"] is None
    # each draws its own seeds, as a fresh interpreter does (not the server's, not the last's)
    assert first["torch_seed"] != second["torch_seed"] != 1234
    assert first["torch_draw"] != second["torch_draw"]
    assert first["random"] != second["random"]
    assert (first["variable"], second["variable"]) == ("alice", "bob")
    assert second["session"] and second["cwd"] == str(PROBE)


def test_a_graders_status_and_a_killed_grader(server):
    _, code = probe(server, "3")
    assert code == 3
    child = server.spawn(["0"], dict(os.environ), PROBE, module="time_bomb_that_does_not_exist")
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 1 and "ModuleNotFoundError" in stderr
    sleeper = server.spawn([], dict(os.environ), PROBE, module="forkprobe_sleeps")
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.communicate(timeout=0.5)
    os.killpg(sleeper.pid, signal.SIGKILL)           # as the runner ends a grader past its limit
    sleeper.communicate()
    assert sleeper.returncode in (-signal.SIGKILL, 1)
    assert probe(server)[1] == 0                     # the server serves on


def test_a_dead_server_is_replaced():
    servers = forkserver.ForkServers()                          # a thread's, as its owner holds
    try:
        first = servers.spawn([], dict(os.environ), PROBE)      # the grader without arguments
        first.communicate(timeout=120)
        (server,) = servers.by_folder.values()
        server.process.kill()
        server.process.wait()
        second = servers.spawn([], dict(os.environ), PROBE)
        second.communicate(timeout=120)
        (replaced,) = servers.by_folder.values()
        assert replaced is not server
    finally:
        servers.close()
    assert servers.by_folder == {} and replaced.process.poll() is not None


def test_a_large_request_and_a_runner_interrupted_halfway(server):
    """A request of megabytes (a long --hide list) is served; a grader whose status the runner
    never read does not put the server out of step with the next."""
    big = {**os.environ, "PROBE_VARIABLE": "x" * (4 << 20)}
    child = server.spawn([], big, PROBE, module="forkprobe")
    _, stderr = child.communicate(timeout=120)
    assert len(json.loads(stderr.strip().splitlines()[-1])["variable"]) == 4 << 20
    abandoned = server.spawn(["7"], dict(os.environ), PROBE, module="forkprobe")
    os.close(abandoned._stderr)                      # interrupted: never waited for
    report, code = probe(server, "5")
    assert code == 5 and report["pid"] != abandoned.pid


def test_the_runner_can_end_a_grader_at_once(server):
    """The pid comes back once the grader leads its own session: a stop right after the fork
    ends it (and its group)."""
    for _ in range(5):
        child = server.spawn([], dict(os.environ), PROBE, module="forkprobe_sleeps")
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL


def test_grading_through_the_server_equals_a_fresh_interpreter(course, tmp_path, monkeypatch):
    """The same two submissions, graded with and without the server: the same results, to the
    bit (scores, messages, notes)."""
    from tfcourse.batch.runner import grade_one

    bug = replace_in(solution_cells("01-attention")["sdpa-code"], "/ math.sqrt(q.shape[-1])", "")
    subs = [make_submission(tmp_path / "good", "01-attention"),
            make_submission(tmp_path / "bug", "01-attention", {"sdpa-code": bug})]
    seen = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(forkserver.SWITCH, switch)
        for sub in subs:
            _, results = grade_one(course, sub)
            for key in ("execution_time", "extra_data"):
                results.pop(key)
            seen.setdefault(sub.name, []).append(results)
    for name, (forked, fresh) in seen.items():
        assert forked == fresh, name
    assert seen["good"][0]["score"] == course.assignment("01-attention").points
    assert seen["bug"][0]["score"] < seen["good"][0]["score"]
