"""The engine's diagnostics (tfcourse/logs.py): every fallback is logged with its reason, never
silent, and `tfcourse -v` shows them."""
import logging
import os

import pytest

from conftest import ROOT
from tfcourse import logs
from tfcourse.batch import child
from tfcourse.cli import main
from tfcourse.course import load_course
from tfcourse.sandbox import forked, launch
from tfcourse.sandbox.limits import Limits


@pytest.fixture
def engine_log():
    """The "tfcourse" logger as it was, after a test that configures it."""
    logger = logging.getLogger("tfcourse")
    before = (logger.level, list(logger.handlers), logger.propagate)
    yield logger
    logger.setLevel(before[0])
    logger.handlers[:] = before[1]
    logger.propagate = before[2]


def warnings_of(caplog, name):
    return [record.getMessage() for record in caplog.records
            if record.name == name and record.levelno == logging.WARNING]


def test_a_refused_cgroup_is_logged_with_the_reason(monkeypatch, caplog):
    monkeypatch.setattr(launch.Cgroup, "create", classmethod(lambda cls, limits, parents: None))
    monkeypatch.setattr(launch, "_TOLD", set())
    caplog.set_level(logging.DEBUG, logger="tfcourse")
    assert launch.sandbox_cgroup(Limits(256, 0, 16), {"": "/sys/fs/cgroup/graders"}) is None
    (line,) = warnings_of(caplog, "tfcourse.sandbox.launch")
    assert line.startswith("no cgroup for the sandbox (none could be made in "
                           "/sys/fs/cgroup/graders (v2)): the watchdog keeps its limits"), line
    caplog.clear()
    assert launch.sandbox_cgroup(Limits(256, 0, 16), {"": "/sys/fs/cgroup/graders"}) is None
    assert not warnings_of(caplog, "tfcourse.sandbox.launch")          # once a process
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    caplog.clear()
    launch.sandbox_cgroup(Limits(256, 0, 16))        # beside this process's cgroup: where it is
    (line,) = warnings_of(caplog, "tfcourse.sandbox.launch")
    assert "cgroup" in line.partition("(")[2], line


def test_an_unusable_zygote_is_logged_with_the_reason(monkeypatch, caplog, capsys):
    class Unstartable:
        def __init__(self, config):
            raise OSError("no room for the zygote's folder")

    monkeypatch.setattr(forked, "Zygote", Unstartable)
    monkeypatch.delenv(forked.SWITCH, raising=False)
    caplog.set_level(logging.INFO, logger="tfcourse")
    assert forked.Zygotes().for_course(load_course(ROOT), 1) is None
    (line,) = warnings_of(caplog, "tfcourse.sandbox.forked")
    assert "no room for the zygote's folder" in line and "started afresh" in line
    # what the instructor read before is printed as it was
    assert "tfcourse: no zygote for the students' processes (no room" in capsys.readouterr().err
    caplog.clear()
    forked.HandedZygote(-1).failed("its control socket closed")
    (line,) = warnings_of(caplog, "tfcourse.sandbox.forked")
    assert line.startswith("the zygote is unusable (its control socket closed)")


def test_a_fork_server_that_cannot_start_is_logged(monkeypatch, caplog, tmp_path):
    class NoServer:
        def spawn(self, *args):
            raise OSError("cannot fork")

    monkeypatch.delenv(child.forkserver.SWITCH, raising=False)
    caplog.set_level(logging.INFO, logger="tfcourse")
    assert child._Graders().fork(NoServer(), ["--job", "x"], {}, tmp_path) is None
    (line,) = warnings_of(caplog, "tfcourse.batch.child")
    assert "no fork server for the grader (OSError: cannot fork)" in line


@pytest.mark.parametrize("argv, level", [(["-v", "config", "limits.memory_mb"], logging.INFO),
                                         (["config", "-vv", "limits.memory_mb"], logging.DEBUG),
                                         (["config", "limits.memory_mb"], None)])
def test_verbose_shows_the_engines_log(argv, level, engine_log, monkeypatch, capsys):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if k != logs.ENVIRONMENT})      # as it was, after
    handlers = list(engine_log.handlers)
    assert main(argv) == 0
    assert "memory" in capsys.readouterr().out
    added = [h for h in engine_log.handlers if h not in handlers]
    if level is None:                       # silent: no handler, nothing for graders either
        assert not added and logs.ENVIRONMENT not in os.environ
        return
    assert len(added) == 1 and engine_log.level == level
    assert os.environ[logs.ENVIRONMENT] == logging.getLevelName(level)
    logging.getLogger("tfcourse.batch.child").info("shown")
    assert "INFO tfcourse.batch.child: shown" in capsys.readouterr().err


def test_without_verbose_the_engine_prints_no_warning(capsys):
    """The library's convention: a NullHandler, so Python's last resort does not print."""
    logging.getLogger("tfcourse.sandbox.launch").warning("not for the instructor's terminal")
    assert capsys.readouterr().err == ""


def test_what_a_grader_wrote_on_stderr_reaches_the_runners_log(caplog, tmp_path):
    class Ended:
        pid, returncode = 4242, 0

        def communicate(self, timeout=None):
            return None, "2027-01-15 08:00:00 WARNING tfcourse.sandbox.launch: no cgroup\n\n"

        def poll(self):
            return 0

    (tmp_path / "report.json").write_text("{}")
    caplog.set_level(logging.INFO, logger="tfcourse")
    assert child._wait(load_course(ROOT), Ended(), None, tmp_path / "report.json") is None
    assert [r.getMessage() for r in caplog.records if r.name == "tfcourse.batch.child"] == [
        "grader 4242: 2027-01-15 08:00:00 WARNING tfcourse.sandbox.launch: no cgroup"]
