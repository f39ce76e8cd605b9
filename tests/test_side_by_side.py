"""Students side by side where student code runs as a plain process (sandbox.isolation: process):
what one student leaves in the machine's temporary folders goes before the next student, more than
one at a time is refused, and no path of the class is on the command line of a trusted process."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ROOT

from tfcourse import cli
from tfcourse.batch import runner
from tfcourse.batch.runner import Outcomes, SideBySideRefused, grade_many
from tfcourse.sandbox import launch
from tfcourse.sandbox.limits import remove_leftovers

STRANGER = 54321            # a user id that owns nothing on this machine but what a test makes


def in_process_mode(course, accept: str = "same-user"):
    sandbox = dataclasses.replace(course.sandbox, isolation="process", accept_weaker=accept)
    return dataclasses.replace(course, sandbox=sandbox)


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user are made as root")
def test_what_the_sandbox_user_left_in_shared_temp_is_removed(tmp_path):
    """Only that user's entries go, links are removed and not followed, the rest stays."""
    kept = tmp_path / "mine"
    kept.write_text("the grader's")
    left = [tmp_path / "big", tmp_path / "folder", tmp_path / "link"]
    left[0].write_bytes(b"x" * 4096)
    left[1].mkdir()
    (left[1] / "inside").write_text("more")
    left[2].symlink_to(kept)
    for path in [*left, left[1] / "inside"]:
        os.chown(path, STRANGER, STRANGER, follow_symlinks=False)
    assert remove_leftovers(STRANGER, [tmp_path]) == 3
    assert [path.name for path in tmp_path.iterdir()] == ["mine"]
    assert kept.read_text() == "the grader's"


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user are made as root")
def test_a_process_mode_sandbox_removes_its_users_leftovers_when_it_closes():
    """A hostile student left 270 MB in /tmp as the sandbox user: it counted against every later
    classmate's disk limit. The sandbox that ran it removes it when it closes."""
    sandbox = launch.Sandbox(launch.SandboxConfig(isolation="process", accept_weaker="process"))
    sandbox.mode, sandbox.drop_to = "process", (STRANGER, STRANGER)
    left = Path("/tmp") / f"tfleft-{uuid.uuid4().hex[:8]}"
    left.mkdir()
    (left / "fill").write_bytes(b"x" * 65536)
    for path in (left, left / "fill"):
        os.chown(path, STRANGER, STRANGER)
    try:
        sandbox.close()
        assert not left.exists()
    finally:
        if left.exists():
            import shutil
            shutil.rmtree(left)


def test_more_than_one_student_at_a_time_is_refused_in_process_mode(course, tmp_path):
    with pytest.raises(SideBySideRefused, match=r"--jobs 2 is refused: student code runs as a "
                                                r"plain process here .* grade one at a time "
                                                r"\(--jobs 1\)"):
        grade_many(in_process_mode(course), [tmp_path], tmp_path / "graded", jobs=2, lang="en",
                   progress=False)
    assert not (tmp_path / "graded").exists()
    empty = grade_many(in_process_mode(course), [tmp_path], tmp_path / "graded", jobs=1,
                       lang="en", progress=False)
    assert list(empty) == []


def test_the_command_says_why_it_refuses(course, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_graded_course", lambda options: in_process_mode(course))
    code = cli.main(["--course", str(ROOT), "grade", str(tmp_path), "--jobs", "3", "--out",
                     str(tmp_path / "graded"), "--no-progress"])
    assert code == 2
    assert "tfcourse grade: --jobs 3 is refused" in capsys.readouterr().err


def test_no_path_of_the_class_is_on_the_runners_command_line(tmp_path, monkeypatch):
    """/proc/PID/cmdline is readable by every user: student code running as the sandbox user
    read the class folder's path there, then every classmate's notebook."""
    secret = f"/srv/class-{uuid.uuid4().hex[:8]}"
    shown = subprocess.run(
        [sys.executable, "-c", "from tfcourse.batch.runner import hide_command_line; "
         "hide_command_line('tfcourse grade'); import sys; "
         "print(sys.argv[-1], open('/proc/self/cmdline', 'rb').read())", secret],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert shown.stdout.startswith(f"{secret} b'tfcourse grade\\x00")
    assert secret not in shown.stdout.split(" ", 1)[1]
    hidden = []
    monkeypatch.setattr(runner, "hide_command_line", hidden.append)
    monkeypatch.setattr(runner, "grade_many", lambda *args, **kwargs: Outcomes())
    assert cli.main(["--course", str(ROOT), "grade", secret, "--out", str(tmp_path / "g"),
                     "--no-progress"]) == 0
    assert hidden == ["tfcourse grade"]


def test_submissions_the_sandbox_user_can_read_are_refused_in_process_mode(course, monkeypatch):
    """Written with the usual umask, every classmate's notebook was readable by the sandbox user,
    who runs each student's code in process mode: grading refuses until they are private."""
    import shutil
    import tempfile

    from tfcourse.batch.runner import readable_by

    nobody = (65534, 65534)
    base = Path(tempfile.mkdtemp(prefix="tfclass-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        (base / "class").mkdir(mode=0o755)
        notebook = base / "class" / "alice.ipynb"
        notebook.write_text("{}")
        os.chmod(notebook, 0o644)
        assert readable_by(notebook, nobody)
        monkeypatch.setattr(launch, "choose_isolation",
                            lambda config: launch.Isolation("process", nobody))
        with pytest.raises(SideBySideRefused, match=r"class/alice.ipynb can be read by user "
                                                    r"'nobody', .*\(chmod -R o-rwx /var/tmp/"):
            grade_many(in_process_mode(course, "process"), [base / "class"], base / "graded",
                       jobs=1, lang="en", progress=False)
        os.chmod(base / "class", 0o750)
        assert not readable_by(notebook, nobody)
        os.chmod(base / "class", 0o755)
        os.chmod(notebook, 0o640)
        assert not readable_by(notebook, nobody)
    finally:
        shutil.rmtree(base)


# -- the feedback service: the same protections as `tfcourse grade` ------------------------------
def run_service(course, options) -> int | None:
    """`tfcourse feedback-service`'s exit status, None when it did not end by itself (it
    started, and would serve until stopped)."""
    import threading

    from tfcourse.hub import command as service

    ended = []
    thread = threading.Thread(target=lambda: ended.append(service.run(course, options)),
                              daemon=True)
    thread.start()
    thread.join(60)
    return ended[0] if ended else None


def service_options(tmp_path, *more: str):
    import argparse

    from tfcourse.hub import command as service

    parser = argparse.ArgumentParser()
    service.add_arguments(parser)
    return parser.parse_args(["--exchange", str(tmp_path / "exchange"), "--state",
                              str(tmp_path / "state"), "--no-page", *more])


def test_the_service_refuses_students_side_by_side_in_process_mode(course, tmp_path, capsys,
                                                                    monkeypatch):
    """The service graded --jobs 2 in process mode: one student could kill a classmate's worker
    or fill the disk counted against them, as with `tfcourse grade --jobs 2`."""
    hidden = []
    monkeypatch.setattr(runner, "hide_command_line", hidden.append)
    assert run_service(in_process_mode(course), service_options(tmp_path, "--jobs", "2")) == 2
    assert "tfcourse feedback-service: --jobs 2 is refused: student code runs as a plain " \
           "process here" in capsys.readouterr().err
    assert not (tmp_path / "state" / "lock").exists()       # refused before it starts
    assert hidden == ["tfcourse feedback-service"]


SERVICE_READY_BOUND = 600     # s: a bound on the service's start, never reached unless it hangs


def test_the_services_command_line_shows_no_path(tmp_path):
    """/proc/PID/cmdline of the service named its state folder and the exchange. The test reads
    it once the service says it is watching (its log line "watching ..."), however long its start
    takes: it waited 30 s by the clock (3.3 s unloaded) and timed out at a load of 4."""
    import threading

    exchange = tmp_path / f"exchange-{uuid.uuid4().hex[:8]}"
    service = subprocess.Popen(
        [sys.executable, "-m", "tfcourse", "--course", str(ROOT), "feedback-service",
         "--exchange", str(exchange), "--state", str(tmp_path / "state"), "--no-page"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    said, watching = [], threading.Event()

    def read():                                 # until it ends: its log, and the ready line
        for line in service.stderr:
            said.append(line)
            if " watching " in line:
                watching.set()
        watching.set()                          # it ended without saying so

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        watching.wait(SERVICE_READY_BOUND)
        assert service.poll() is None, "".join(said)
        shown = Path(f"/proc/{service.pid}/cmdline").read_bytes()
    finally:
        service.terminate()
        service.wait(timeout=60)
        reader.join(timeout=60)
    assert any(" watching " in line for line in said), "".join(said)
    assert (tmp_path / "state" / "lock").exists(), "".join(said)
    assert shown.startswith(b"tfcourse feedback-service\0")
    assert str(exchange).encode() not in shown and str(tmp_path).encode() not in shown


def test_a_state_folder_the_sandbox_user_can_read_is_refused_in_process_mode(course, monkeypatch,
                                                                            capsys):
    """A state folder made (or restored from a backup) with the usual umask let every student's
    code, run as the sandbox user, read classmates' snapshots and results: the service refuses
    to start until it is private."""
    import shutil
    import tempfile

    monkeypatch.setattr(runner, "hide_command_line", lambda shown: True)
    nobody = (65534, 65534)
    base = Path(tempfile.mkdtemp(prefix="tfstate-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        state = base / "state"
        old = state / "results" / "alice+01-attention+1+r1"
        old.mkdir(parents=True, mode=0o755)
        for folder in (state, state / "results", old):
            os.chmod(folder, 0o755)
        (old / "results.json").write_text("{}")
        os.chmod(old / "results.json", 0o644)
        monkeypatch.setattr(launch, "choose_isolation",
                            lambda config: launch.Isolation("process", nobody))
        options = service_options(base, "--state", str(state))
        assert run_service(in_process_mode(course, "process"), options) == 2
        err = capsys.readouterr().err
        assert "can be read by user 'nobody'" in err and f"chmod -R o-rwx {state}" in err, err
        assert not (state / "lock").exists()
    finally:
        shutil.rmtree(base)
