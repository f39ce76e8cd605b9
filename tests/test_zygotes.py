"""Who holds the zygotes (tfcourse/sandbox/forked.py): a `Zygotes` made and closed by whoever owns
the thread that starts graders, a `ZygotePool` lending them to gradings side by side; no state of
the module. Here with a stand-in for the zygote's sandbox: no process is started (test_zygote.py
starts real ones)."""
from __future__ import annotations

import types

import pytest

from tfcourse.sandbox import forked


class Host:
    """A stand-in for forked.Zygote that starts nothing."""
    made: list["Host"] = []

    def __init__(self, config):
        self.config, self.key, self.refused = config, "k", None
        self.started = self.closed = False
        self.alive = True
        Host.made.append(self)

    def start(self):
        self.started = True

    def usable(self) -> bool:
        return self.alive and not self.closed

    def close(self):
        self.closed = True


@pytest.fixture
def hosts(monkeypatch, tmp_path):
    Host.made = []
    monkeypatch.setattr(forked, "Zygote", Host)
    monkeypatch.setattr(forked, "enabled", lambda: True)
    monkeypatch.setattr(forked.SandboxConfig, "from_course",
                        classmethod(lambda cls, course, files, threads, hide: cls()))
    return Host.made


def a_course(root, memory_mb=512):
    return types.SimpleNamespace(root=root, sandbox={"isolation": "bwrap"},
                                 limits={"memory_mb": memory_mb}, limit=lambda name: 1)


def test_a_zygote_is_started_once_and_kept_for_its_course(hosts, tmp_path, monkeypatch):
    course = a_course(tmp_path)
    with forked.Zygotes() as zygotes:
        first = zygotes.for_course(course, 1)
        assert zygotes.for_course(course, 1) is first and first.started and len(hosts) == 1
        other = zygotes.for_course(a_course(tmp_path, memory_mb=1024), 1)
        assert first.closed and other is not first       # another course: the old one ends
    assert other.closed                                  # its owner closed it


def test_a_dead_zygote_is_started_again_once_then_no_more(hosts, tmp_path, monkeypatch):
    course = a_course(tmp_path)
    zygotes = forked.Zygotes()
    for _ in range(forked.STARTS):
        zygotes.for_course(course, 1).alive = False
    assert zygotes.for_course(course, 1) is None and len(hosts) == forked.STARTS
    assert all(host.closed for host in hosts)


def test_where_no_zygote_fits_the_machine_none_is_started_again(hosts, tmp_path, monkeypatch):
    class Unfit(Host):                                   # not bwrap as root, say
        def __init__(self, config):
            super().__init__(config)
            self.key = None

    monkeypatch.setattr(forked, "Zygote", Unfit)
    zygotes = forked.Zygotes()
    assert zygotes.for_course(a_course(tmp_path), 1) is None
    assert zygotes.for_course(a_course(tmp_path), 1) is None and len(hosts) == 1
    assert hosts[0].closed and not hosts[0].started


def test_a_pool_lends_each_grading_side_by_side_its_own_zygotes(monkeypatch):
    closed = []
    monkeypatch.setattr(forked.Zygotes, "close", lambda self: closed.append(self))
    pool = forked.ZygotePool()
    with pool.lend() as first, pool.lend() as second:
        assert first is not second
    with pool.lend() as again:
        assert again in (first, second)                  # given back, lent again: no third
    pool.close()
    assert sorted(map(id, closed)) == sorted(map(id, (first, second)))


def test_a_caller_that_owns_no_zygote_shares_its_threads(hosts, tmp_path):
    """nbgrader's autograde grades a class one notebook after another, owning no zygote: its
    gradings share the thread's (one zygote start, not one per notebook); another thread has its
    own."""
    import threading

    course = a_course(tmp_path)
    mine = forked.of_this_thread()
    assert forked.of_this_thread() is mine
    first = mine.for_course(course, 1)
    assert forked.of_this_thread().for_course(course, 1) is first and len(hosts) == 1
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(forked.of_this_thread()))
    thread.start()
    thread.join()
    assert theirs[0] is not mine
    mine.close()


def test_a_thread_that_owns_nothing_has_its_own_warm_processes(hosts):
    """nbgrader's autograde, Gradescope, a test: grade_in_child without an owner uses the thread's
    zygote (forked.of_this_thread) and the thread's fork server; another thread has its own."""
    import threading

    from tfcourse.batch import child

    mine = child.of_this_thread()
    assert child.of_this_thread() is mine and mine.zygotes is forked.of_this_thread()
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(child.of_this_thread()))
    thread.start()
    thread.join()
    assert theirs[0] is not mine and theirs[0].servers is not mine.servers


def test_a_pool_of_warm_processes_ends_their_zygotes_and_fork_servers(monkeypatch):
    """A runner's pool lends each grading a zygote and a fork server (child.Warm), and ends both
    at the batch's end."""
    from tfcourse.batch import child, forkserver

    closed = []
    monkeypatch.setattr(forkserver.ForkServers, "close", lambda self: closed.append(self))
    monkeypatch.setattr(forked.Zygotes, "close", lambda self: closed.append(self))
    pool = forked.ZygotePool(child.Warm)
    with pool.lend() as warm:
        assert isinstance(warm, child.Warm)
    pool.close()
    assert closed == [warm.zygotes, warm.servers]
