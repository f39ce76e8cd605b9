"""Grading on a Dask cluster (`tfcourse grade --scheduler`, tfcourse/batch/cluster.py).

The fast part needs no Dask process: a submission packed as bytes is rebuilt on the worker's side
exactly as the grader sees it (links, pipes, hard links, huge files, missing notebooks included);
a worker's answer is checked before a report is built from it; a worker with another course
refuses; a worker that died, or refused, leaves a result that says so.

The slow part starts a real `dask scheduler` and two `dask worker`s (with nannies, one thread each)
on 127.0.0.1, once for the module, and grades a small class of 01-attention submissions (good,
buggy, hostile code, hostile files) on them: every result equals local grading's, to the bit,
also when a worker is killed mid-batch; a second run sends nothing; a submission that kills every
worker it lands on, a client stopped by SIGTERM and a worker with another course each end as they
should. Then, where Slurm can run here, the same through dask-jobqueue's SLURMCluster.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from catalogue import attention
from conftest import ROOT, make_submission, replace_in, solution_cells

from tfcourse.batch import child, cluster, runner
from tfcourse.submission.report import Note, NotebookReport, SubmissionReport, TestResult
from tfcourse.batch.results import say
from tfcourse.submission.files import kind_inside, split_submission
from tfcourse.submission.finding import find_notebooks
from tfcourse.submission.notebooks import load_program

A = "01-attention"
NOTEBOOK = "attention.ipynb"
RELEASED = ROOT / "release" / A / NOTEBOOK
BIN = Path(sys.executable).parent


# -- fast: a submission as bytes, rebuilt as the grader sees it ----------------------------------
def seen(course, path: Path, within: Path | None) -> dict:
    """Everything the grader decides from a submission's files before running any code: what its
    root is, the notebooks it finds, and each one's program (cells, notes, readable)."""
    base, parts = split_submission(path, within)
    found = {"root": kind_inside(base, parts)}
    if found["root"] not in ("file", "folder"):
        return found
    assignment, notebooks = find_notebooks(course, path, None, within)
    found["assignment"] = assignment
    for name, file in notebooks.items():
        program = load_program(course.source_dir / (assignment or A) / NOTEBOOK, file,
                               course.limit("notebook_mb"))
        found[name] = (file.kind, file.shown, file.others, file.unfollowed, program.readable,
                       [(cell.label, cell.source) for cell in program.cells],
                       [say(note.template, note.params, "en") for note in program.notes])
    return found


def rebuilt(packed: dict, folder: Path) -> tuple[Path, Path]:
    """Unpacked as a worker unpacks a task: into an empty folder of its own."""
    folder.mkdir()
    return cluster.unpack(packed, folder)


def student(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_bytes(RELEASED.read_bytes())
    return folder


def _plain(folder):
    student(folder)
    (folder / "notes.ipynb").write_text("{}")               # another notebook, never read
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / ".ipynb_checkpoints" / NOTEBOOK).write_text("old")


def _link(folder):
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).symlink_to(RELEASED)


def _fifo(folder):
    folder.mkdir(parents=True)
    os.mkfifo(folder / NOTEBOOK)


def _socket(folder):
    folder.mkdir(parents=True)
    os.mknod(folder / NOTEBOOK, 0o600 | stat.S_IFSOCK)


def _hard_link(folder):
    student(folder)
    os.link(folder / NOTEBOOK, folder.parent.parent / "elsewhere.ipynb")   # outside the class


def _huge(folder):
    folder.mkdir(parents=True)
    with open(folder / NOTEBOOK, "wb") as handle:
        handle.truncate(300 << 20)


def _renamed_and_linked_folder(folder):
    folder.mkdir(parents=True)
    (folder / "deep" / "er").mkdir(parents=True)
    (folder / "deep" / "er" / "attention (1).ipynb").write_bytes(RELEASED.read_bytes())
    (folder / "work").symlink_to(RELEASED.parent)


def _missing_with_others(folder):
    folder.mkdir(parents=True)
    (folder / "mine.ipynb").write_text("not json")
    (folder / "theirs.ipynb").symlink_to("/etc/passwd")
    (folder / "data").symlink_to("/etc")


def _broken(folder):
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes(b'{"cells": [\xff\xfe')


SHAPES = {"plain": _plain, "link": _link, "fifo": _fifo, "socket": _socket,
          "hard-link": _hard_link, "huge": _huge, "renamed": _renamed_and_linked_folder,
          "missing": _missing_with_others, "broken": _broken}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_packed_folder_is_rebuilt_as_the_grader_sees_it(course, tmp_path, shape):
    folder = tmp_path / "class" / "alice"
    SHAPES[shape](folder)
    packed = cluster.pack(course, folder, folder.parent, None)
    copy, within = rebuilt(packed, tmp_path / "worker")
    assert copy.name == "alice" and within == tmp_path / "worker" / "submission"
    assert seen(course, copy, within) == seen(course, folder, folder.parent)
    if shape == "huge":           # its size travels, not its bytes
        assert packed["entries"] == [{"path": [NOTEBOOK.encode()], "kind": "file",
                                      "size": 300 << 20}]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_client_packs_the_submission_as_its_plan_listed_it(course, tmp_path, shape,
                                                              monkeypatch):
    """The client sends the notebooks of the listing it fingerprinted, without looking again."""
    from tfcourse.submission import finding

    folder = tmp_path / "class" / "alice"
    SHAPES[shape](folder)
    found = runner.list_submission(folder, folder.parent)
    packed = cluster.pack(course, folder, folder.parent, None)

    def looked(*args, **options):
        raise AssertionError("the submission was looked at again")

    monkeypatch.setattr(finding, "listing", looked)
    monkeypatch.setattr(finding, "kind_inside", looked)
    assert cluster.pack(course, folder, folder.parent, None, found) == packed


@pytest.mark.parametrize("shape", ["file", "link", "fifo", "missing", "nbgrader"])
def test_a_packed_submission_root_is_rebuilt_as_it_was(course, tmp_path, shape):
    """A notebook given alone, a link, a pipe, nothing at all, or nbgrader's student/assignment."""
    within = tmp_path / "class"
    within.mkdir()
    path = within / "bob.ipynb"
    if shape == "file":
        path.write_bytes(RELEASED.read_bytes())
    elif shape == "link":
        path.symlink_to(RELEASED)
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "nbgrader":
        path = student(within / "bob" / A)
    packed = cluster.pack(course, path, within, None)
    copy, inside = rebuilt(packed, tmp_path / "worker")
    assert copy.relative_to(inside) == path.relative_to(within)
    assert seen(course, copy, inside) == seen(course, path, within)


def test_a_task_carries_only_bytes_and_plain_values(course, tmp_path):
    _renamed_and_linked_folder(tmp_path / "carol")
    packed = cluster.pack(course, tmp_path / "carol", None, A)

    def plain(value):
        if isinstance(value, dict):
            return all(isinstance(k, str) and plain(v) for k, v in value.items())
        if isinstance(value, list):
            return all(map(plain, value))
        return type(value) in (bytes, str, int)
    assert plain(packed)
    assert b"".join(e.get("data", b"") for e in packed["entries"]) == RELEASED.read_bytes()


@pytest.mark.parametrize("parts", [[b".."], [b"a/b"], [b""], ["alice"], [b"x\0"]])
def test_a_worker_rebuilds_nothing_outside_its_folder(tmp_path, parts):
    with pytest.raises(ValueError):
        rebuilt({"parts": parts, "kind": "folder", "entries": []}, tmp_path / "worker")


def answer(report: SubmissionReport, **more) -> str:
    return json.dumps({"report": report.to_dict(), "seconds": 1.5, "worker": "w",
                       "isolation": [], **more})


REPORT = SubmissionReport(A, "alice", [NotebookReport(NOTEBOOK, [
    TestResult("sdpa.values", 0.0, 2.0, "wrong {x}", {"x": [1, 2]}, 0.25)],
    [Note("a note", {"n": 1})], [{"label": "1", "ok": True}], 1.0, 200.5, "bwrap",
    {"output_tail": "hi"})], [Note("top", {}, "error")], 2.0, None)


def test_a_workers_answer_is_checked_before_it_becomes_a_report():
    report, seconds, lines = cluster.read_answer(answer(REPORT, isolation=["weak"]))
    assert report == REPORT and seconds == 1.5 and lines == ["worker w: weak"]
    broken = [
        42, "not json", "[1]", json.dumps({"seconds": 1}),
        answer(REPORT).replace('"points": 0.0', '"points": "0"'),
        answer(REPORT).replace('"points": 0.0', '"points": true'),
        answer(REPORT).replace('"severity": "error"', '"severity": null'),
        answer(REPORT).replace('"sandbox": "bwrap"', '"sandbox": "bwrap", "__class__": 1'),
        answer(REPORT).replace('"tests": [', '"tests": [{"id": "x"}, '),
        answer(REPORT).replace('"error": null', '"error": ["x"]'),
        answer(REPORT, seconds="1"),
    ]
    for text in broken:
        with pytest.raises(ValueError):
            cluster.read_answer(text)
    with pytest.raises(cluster.WorkerRefused, match="another course"):
        cluster.read_answer(json.dumps({"refused": "another course"}))


def test_the_fingerprint_holds_python_and_torch(course, monkeypatch):
    """A torch upgrade changes a trained model's floats: results are graded again, and a worker
    with another torch refuses."""
    before = child.grader_version(course)
    monkeypatch.setattr(child, "runtime_versions", lambda: "Python 3.11.7, torch 9.9")
    assert child.grader_version(course) != before


def test_a_worker_with_another_course_or_none_refuses(course, tmp_path, monkeypatch):
    student(tmp_path / "alice")
    payload = {"submission": cluster.pack(course, tmp_path / "alice", None, None),
               "version": "0" * 16, "threads": 1, "assignment": None, "skip": []}
    monkeypatch.setenv(cluster.COURSE_VARIABLE, str(ROOT))
    refused = json.loads(cluster.grade_task(payload))["refused"]
    assert "another course or tfcourse" in refused and "0" * 16 in refused
    assert child.grader_version(course) in refused
    assert "it has Python" not in refused           # the same Python and torch: not named
    payload["runtime"] = "Python 3.0.0, torch 0.1"      # a client with others: both are named
    refused = json.loads(cluster.grade_task(payload))["refused"]
    assert f"it has {child.runtime_versions()}, the client Python 3.0.0, torch 0.1" in refused
    monkeypatch.setenv(cluster.COURSE_VARIABLE, str(tmp_path))
    refused = json.loads(cluster.grade_task(payload))["refused"]
    assert "course.yaml" in refused and cluster.COURSE_VARIABLE in refused


def test_a_worker_without_bubblewrap_refuses_whatever_course_yaml_accepts(course, tmp_path,
                                                                          monkeypatch):
    """A plain process has the network: on a cluster, student code could reach the scheduler,
    which runs any code on every worker. Such a worker grades nothing."""
    from tfcourse.sandbox.launch import Isolation

    student(tmp_path / "alice")
    payload = {"submission": cluster.pack(course, tmp_path / "alice", None, None),
               "version": child.grader_version(course), "threads": 1, "assignment": None,
               "skip": []}
    monkeypatch.setenv(cluster.COURSE_VARIABLE, str(ROOT))
    monkeypatch.setattr(cluster, "_isolation", lambda root: Isolation(
        "process", warning="student code runs as a plain process (accept_weaker: process)"))
    refused = json.loads(cluster.grade_task(payload))["refused"]
    assert "cannot isolate student code with bubblewrap" in refused
    assert "accept_weaker: process" in refused and "scheduler" in refused


class Finished:
    """A finished task, as distributed's Future shows it."""

    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def result(self):
        if self.error:
            raise self.error
        return self.value


def test_a_dead_worker_a_refusal_or_a_broken_answer_each_end_in_a_failure(course, tmp_path):
    from distributed import KilledWorker

    folder = student(tmp_path / "alice")
    entry = runner.Planned(runner.Found("alice", folder), tmp_path / "out", A,
                           runner.list_submission(folder))
    batch = cluster.Batch(course, [entry], "v", None, 1, [], None)
    said = []
    cases = [(Finished(error=KilledWorker("tfcourse-grade-x", "tcp://w:1", 3)),
              "ended each of the 4 Dask workers it was sent to (the last: tcp://w:1)"),
             (Finished(json.dumps({"refused": "worker w grades with another course"})),
              "not graded: worker w grades with another course"),
             (Finished(error=RuntimeError("lost")), "grading on the cluster failed"),
             (Finished("{"), "grading on the cluster failed: JSONDecodeError")]
    for future, words in cases:
        report, seconds = cluster.result_of(batch, entry, future, said.append)
        assert words in report.error and seconds == 0.0
        assert len(report.tests) == 10 and not any(t.points for t in report.tests)
    assert said == ["worker w grades with another course"]
    report, seconds = cluster.result_of(batch, entry, Finished(answer(REPORT)), said.append)
    assert report == REPORT and seconds == 1.5


def test_without_distributed_the_option_says_what_to_install(tmp_path, monkeypatch, capsys):
    from tfcourse import cli

    monkeypatch.setitem(sys.modules, "distributed", None)
    student(tmp_path / "alice")
    code = cli.main(["--course", str(ROOT), "grade", str(tmp_path / "alice"), "--out",
                     str(tmp_path / "out"), "--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"])
    error = capsys.readouterr().err
    assert code == 2 and "pip install 'tfcourse[cluster]'" in error
    assert "--jobs is not used with --scheduler" in error
    assert not (tmp_path / "out").exists()


# -- slow: a real scheduler and two workers ------------------------------------------------------
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """`dask scheduler` and two `dask worker`s (each a nanny and its worker process) on
    127.0.0.1. A task that was running on a worker that died twice fails (allowed-failures 1)."""

    def __init__(self, folder: Path):
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.logs = folder
        environment = {**os.environ, cluster.COURSE_VARIABLE: str(ROOT),
                       "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"}
        self.processes = [self.start("scheduler", [
            "scheduler", "--host", "127.0.0.1", "--port", self.address.rsplit(":", 1)[1],
            "--no-dashboard"], environment)]
        self.nannies = [self.start(f"worker-{n}", [
            "worker", self.address, "--name", f"w{n}", "--nthreads", "1", "--nworkers", "1",
            "--no-dashboard", "--preload", "tfcourse.batch.cluster", "--death-timeout", "60",
            "--local-directory", str(folder / f"w{n}")], environment) for n in (1, 2)]
        self.processes += self.nannies
        from distributed import Client
        self.client = Client(self.address, timeout=60, set_as_default=False)
        self.client.wait_for_workers(2, timeout=120)

    def start(self, name: str, arguments: list[str], environment: dict) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "wb")
        return subprocess.Popen(["nice", "-n", "10", str(BIN / "dask"), *arguments],
                                env=environment, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def graders(self, nanny: subprocess.Popen) -> list[int]:
        """The grading processes running under one worker now: its graders, or the fork server
        that forks them (a forked grader's command line is the server's)."""
        from tfcourse.sandbox.launch import descendants

        found = []
        for pid in descendants(nanny.pid) if nanny.poll() is None else []:
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:             # gone before its command line was read
                continue
            if b"tfcourse.submission" in line or b"tfcourse.batch.forkserver" in line:
                found.append(pid)
        return found

    def close(self) -> None:
        self.client.close()
        for process in reversed(self.processes):
            with_group(process, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with_group(process, signal.SIGKILL)
                process.wait()


def with_group(process: subprocess.Popen, number: int) -> None:
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    pytest.importorskip("distributed")
    started = Cluster(tmp_path_factory.mktemp("dask"))
    yield started
    started.close()


SOLUTION = solution_cells(A)
HOSTILE_CODE = """
import os, pathlib, torch
torch.allclose = lambda *args, **kwargs: True        # a cheat: every comparison passes
for path in ("/etc/shadow", os.environ.get("TFCOURSE_COURSE", "/") + "/course.yaml"):
    try:
        print(pathlib.Path(path).read_text()[:20])
    except OSError as error:
        print(type(error).__name__)
"""


def bug(name: str) -> dict[str, str]:
    """The answers of the catalogue's bug `name` (an edit of the course's solution)."""
    found = next(b for b in attention.BUGS if b.name == name)
    answers = dict(SOLUTION)
    for cell, edits in found.edits.items():
        for old, new in edits:
            answers[cell] = replace_in(answers[cell], old, new)
    return answers


def a_class(folder: Path) -> Path:
    """Eight submissions of 01-attention: a correct one, two with bugs, one with hostile code, and
    four whose files are refused (a link, a hard link beside a linked folder, a 300 MB file, a
    pipe at the class folder's root)."""
    make_submission(folder / "alice", A)
    make_submission(folder / "bob", A, bug("sdpa_no_scale"))
    make_submission(folder / "carol", A, bug("mha_no_output_projection"))
    make_submission(folder / "dave", A, bug("causal_blocks_diagonal"),
                    edit=lambda nb: nb.cells.insert(3, nbformat.v4.new_code_cell(HOSTILE_CODE)))
    _link(folder / "eve")
    _hard_link(folder / "frank")
    (folder / "frank" / "work").symlink_to(ROOT)
    _huge(folder / "gina")
    os.mkfifo(folder / "fifo.ipynb")
    return folder


def graded_but_the_pipe(outcomes) -> bool:
    """Every submission of `a_class` graded, but the pipe named like a notebook: nothing can be
    read from it, so no assignment either, and it is "not graded", never 0/0 "graded"."""
    statuses = {o.name: o.status for o in outcomes}
    return statuses.pop("fifo", None) == "not graded: no assignment" and \
        set(statuses.values()) == {"graded"}


@pytest.fixture(scope="module")
def classroom(course, tmp_path_factory):
    """(the class folder, its results graded here with --jobs 2)."""
    root = tmp_path_factory.mktemp("classroom")
    folder = a_class(root / "class")
    outcomes = runner.grade_many(course, [folder], root / "local", jobs=2, lang="en",
                                 progress=False)
    assert len(outcomes) == 8 and graded_but_the_pipe(outcomes)
    return folder, results_of(root / "local")


def results_of(out: Path) -> dict[str, dict]:
    return {str(path.parent.relative_to(out)): json.loads(path.read_text())
            for path in out.rglob("results.json")}


TIMING = ("execution_time", "seconds", "peak_memory_mb")


def comparable(results: dict):
    """results.json without what depends on the moment (times, memory)."""
    if isinstance(results, dict):
        return {key: comparable(value) for key, value in results.items() if key not in TIMING}
    if isinstance(results, list):
        return [comparable(value) for value in results]
    return results


def assert_same(here: dict, there: dict) -> None:
    assert sorted(here) == sorted(there)
    for name in here:
        assert there[name]["score"] == here[name]["score"], name
        assert [(t["number"], t["score"], t["max_score"]) for t in there[name]["tests"]] == \
            [(t["number"], t["score"], t["max_score"]) for t in here[name]["tests"]], name
        assert comparable(there[name]) == comparable(here[name]), name


@pytest.mark.slow
def test_a_class_graded_on_the_cluster_scores_as_graded_here(course, dask_cluster, classroom,
                                                             tmp_path, capfd):
    folder, local = classroom
    scores = {name: results["score"] for name, results in local.items()}
    assert scores["alice"] == 14 and 0 < scores["bob"] < 14 and 0 < scores["carol"] < 14
    assert scores["dave"] < 14 and scores["eve"] == scores["frank"] == scores["gina"] == 0
    outcomes = runner.grade_many(course, [folder], tmp_path / "out", jobs=1, lang="en",
                                 progress=False, scheduler=dask_cluster.address)
    assert graded_but_the_pipe(outcomes) and len(outcomes) == 8
    assert_same(local, results_of(tmp_path / "out"))
    # a second run sends nothing: every submission is unchanged
    again = runner.grade_many(course, [folder], tmp_path / "out", jobs=1, lang="en",
                              progress=False, scheduler="tcp://127.0.0.1:1")
    assert {o.status for o in again if o.name != "fifo"} == {"unchanged"}
    assert [o.score for o in again] == [o.score for o in outcomes]
    assert "grade: worker" not in capfd.readouterr().err    # bwrap on every worker: nothing to say


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing(course, dask_cluster, classroom, tmp_path):
    folder, local = classroom
    names = ["alice", "bob", "carol", "eve", "gina"]
    finished = []
    batch = threading.Thread(target=lambda: finished.append(runner.grade_many(
        course, [folder / name for name in names], tmp_path / "out", jobs=1, lang="en",
        progress=False, scheduler=dask_cluster.address)))
    batch.start()
    victim, deadline = dask_cluster.nannies[0], time.monotonic() + 120
    while not (graders := dask_cluster.graders(victim)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert graders, "no grader ever ran on the first worker"
    os.kill(parent_of(graders[0]), signal.SIGKILL)          # the worker process, mid-task
    batch.join(timeout=300)
    assert finished, "the batch did not end"
    assert {o.status for o in finished[0]} == {"graded"} and len(finished[0]) == len(names)
    assert_same({name: local[name] for name in names}, results_of(tmp_path / "out"))
    dask_cluster.client.wait_for_workers(2, timeout=60)     # its nanny started it again


@pytest.mark.slow
def test_a_worker_with_another_course_refuses_and_each_result_says_so(course, dask_cluster,
                                                                      tmp_path, monkeypatch,
                                                                      capfd):
    from tfcourse import cli

    monkeypatch.setattr(runner, "grader_version", lambda course: "f" * 16)
    for name in ("alice", "bob", "carol"):
        student(tmp_path / "class" / name)
    code = cli.main(["--course", str(ROOT), "grade", str(tmp_path / "class"), "--out",
                     str(tmp_path / "out"), "--scheduler", dask_cluster.address,
                     "--no-progress"])
    printed = capfd.readouterr()
    assert code == 0 and printed.out.count(" failed") == 3
    assert printed.err.count("grades with another course or tfcourse") == 1
    for results in results_of(tmp_path / "out").values():
        assert "grades with another course or tfcourse" in results["extra_data"]["grader_error"]
        assert results["score"] == 0 and len(results["tests"]) == 10
        assert "fingerprint" not in results["extra_data"]       # graded again next time


@pytest.mark.slow
def test_a_refusing_worker_gets_no_more_tasks_and_the_others_grade_the_class(
        course, dask_cluster, tmp_path, monkeypatch, capfd):
    """Worker w1 refuses (as one with another course would): every submission it refused is sent
    to w2, and w1 is sent nothing more; the refusal is said once."""
    answer_text = fake_answer()

    def refusing_on_w1(payload):
        from distributed import get_worker

        from tfcourse.batch import cluster as engine
        if get_worker().name == "w1":
            return engine.refusal("worker w1 grades with another course")
        return answer_text

    monkeypatch.setattr(cluster, "TASK", refusing_on_w1)
    names = [f"s{n}" for n in range(8)]
    for name in names:
        student(tmp_path / "class" / name)
    outcomes = runner.grade_many(course, [tmp_path / "class"], tmp_path / "out", jobs=1,
                                 lang="en", progress=False, scheduler=dask_cluster.address)
    assert sorted((o.name, o.status) for o in outcomes) == [(n, "graded") for n in names]
    assert capfd.readouterr().err.count("worker w1 grades with another course") == 1


def fake_answer() -> str:
    return json.dumps({"report": {"assignment": A, "submission": "x"}, "seconds": 0.0,
                       "worker": "fake", "isolation": []})


@pytest.mark.slow
def test_sigterm_cancels_the_tasks_sent(course, dask_cluster, tmp_path, monkeypatch):
    answer_text = fake_answer()

    def slow_task(payload):
        import time
        time.sleep(3)
        return answer_text

    def connect(address):
        client = connected(address)
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
        return client

    connected = cluster.connect
    monkeypatch.setattr(cluster, "TASK", slow_task)
    monkeypatch.setattr(cluster, "connect", connect)
    for name in ("a", "b", "c", "d", "e", "f"):
        student(tmp_path / "class" / name)
    started = time.monotonic()
    with pytest.raises(runner.Interrupted) as stop:
        runner.grade_many(course, [tmp_path / "class"], tmp_path / "out", jobs=1, lang="en",
                          progress=False, scheduler=dask_cluster.address)
    assert stop.value.signal == signal.SIGTERM and time.monotonic() - started < 6   # not 9 s
    assert not results_of(tmp_path / "out")
    deadline = time.monotonic() + 30            # the two running finish; the rest never start
    while dask_cluster.client.run_on_scheduler(lambda dask_scheduler: len(
            [key for key in dask_scheduler.tasks if str(key).startswith("tfcourse-grade-")])):
        assert time.monotonic() < deadline, "the tasks were not cancelled"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_submission_that_kills_every_worker_ends_with_a_result_saying_so(course, dask_cluster,
                                                                           tmp_path,
                                                                           monkeypatch):
    answer_text = fake_answer()

    def deadly_task(payload):
        import os
        import signal
        if payload["submission"]["parts"][-1] == b"poison":
            os.kill(os.getpid(), signal.SIGKILL)
        return answer_text

    monkeypatch.setattr(cluster, "TASK", deadly_task)
    for name in ("fine", "poison"):
        student(tmp_path / "class" / name)
    outcomes = runner.grade_many(course, [tmp_path / "class"], tmp_path / "out", jobs=1,
                                 lang="en", progress=False, scheduler=dask_cluster.address)
    assert [(o.name, o.status) for o in outcomes] == [("fine", "graded"), ("poison", "failed")]
    results = results_of(tmp_path / "out")["poison"]
    assert "ended each of the 2 Dask workers it was sent to" in \
        results["extra_data"]["grader_error"]
    assert len(results["tests"]) == 10 and results["score"] == 0
    dask_cluster.client.wait_for_workers(2, timeout=60)


# -- slow: a one-node Slurm cluster, through dask-jobqueue ---------------------------------------
SLURM_DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")


class Slurm:
    """munged, slurmctld and slurmd on this machine (one node, named as it is, two CPUs), their
    configuration and state in `folder`. `problem`: why they could not start, or None."""

    def __init__(self, folder: Path):
        self.folder, self.processes, self.problem = folder, [], None
        node = socket.gethostname().split(".")[0]
        (folder / "munge").mkdir(mode=0o700)
        key = folder / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.socket = folder / "munge" / "munge.socket"
        self.config = folder / "slurm.conf"
        self.config.write_text("\n".join([
            "ClusterName=tfcourse", f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={folder}/state",
            f"SlurmdSpoolDir={folder}/spool", f"SlurmctldPidFile={folder}/slurmctld.pid",
            f"SlurmdPidFile={folder}/slurmd.pid", f"SlurmctldLogFile={folder}/slurmctld.log",
            f"SlurmdLogFile={folder}/slurmd.log", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            "MpiDefault=none", "SwitchType=switch/none", "ReturnToService=2",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=8000 State=UNKNOWN",
            "PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        self.environment = {**os.environ, "SLURM_CONF": str(self.config)}
        self.start("munged", ["/usr/sbin/munged", "-F", "-f", f"--key-file={key}",
                              f"--socket={self.socket}", f"--pid-file={folder}/munged.pid",
                              f"--log-file={folder}/munged.log", f"--seed-file={folder}/seed"])
        self.start("slurmctld", ["/usr/sbin/slurmctld", "-D", "-f", str(self.config)])
        self.start("slurmd", ["/usr/sbin/slurmd", "-D", "-f", str(self.config)])
        deadline = time.monotonic() + 30
        while self.problem is None and self.state() != "idle":
            ended = [name for name, process in self.processes if process.poll() is not None]
            if ended or time.monotonic() > deadline:
                self.problem = (f"{', '.join(ended) or 'the node'} "
                                f"{'ended' if ended else 'was not idle within 30 s'}: "
                                + " | ".join(self.log_tail(name) for name, _ in self.processes))
            time.sleep(0.5)

    def start(self, name: str, command: list[str]) -> None:
        log = open(self.folder / f"{name}.out", "wb")
        self.processes.append((name, subprocess.Popen(command, env=self.environment, stdout=log,
                                                      stderr=subprocess.STDOUT)))

    def state(self) -> str:
        found = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.environment,
                               capture_output=True, text=True)
        return found.stdout.strip()

    def log_tail(self, name: str) -> str:
        lines = (self.folder / f"{name}.out").read_text(errors="replace").splitlines()
        return f"{name}: " + " / ".join(line for line in lines[-3:])

    def close(self) -> None:
        subprocess.run(["scancel", "--user", "root"], env=self.environment, capture_output=True)
        for _, process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [path for path in SLURM_DAEMONS if not os.access(path, os.X_OK)]
    if missing or not shutil.which("sbatch"):
        pytest.skip(f"Slurm is not installed here ({', '.join(missing) or 'no sbatch'})")
    if os.geteuid() != 0:
        pytest.skip("a one-node Slurm cluster is started here as root only")
    started = Slurm(tmp_path_factory.mktemp("slurm"))
    if started.problem:
        started.close()
        pytest.skip(f"Slurm could not start here: {started.problem}")
    yield started
    started.close()


@pytest.mark.slow
def test_graded_through_slurm_with_dask_jobqueue_as_here(course, slurm, classroom, tmp_path,
                                                         monkeypatch):
    """Two submissions, on two Slurm jobs of one Dask worker each (SLURMCluster)."""
    pytest.importorskip("dask_jobqueue")
    from dask_jobqueue import SLURMCluster

    folder, local = classroom
    monkeypatch.setenv("SLURM_CONF", str(slurm.config))
    jobs = SLURMCluster(cores=1, memory="4GB", processes=1, queue="grading", walltime="00:15:00",
                        python=sys.executable, local_directory=str(tmp_path / "workers"),
                        log_directory=str(tmp_path / "logs"),
                        job_script_prologue=[f"export {cluster.COURSE_VARIABLE}={ROOT}"],
                        worker_extra_args=["--preload", "tfcourse.batch.cluster"],
                        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0"})
    try:
        jobs.scale(jobs=2)
        outcomes = runner.grade_many(course, [folder / "alice", folder / "bob"],
                                     tmp_path / "out", jobs=1, lang="en", progress=False,
                                     scheduler=jobs.scheduler_address)
    finally:
        jobs.close()
    assert [(o.name, o.status) for o in outcomes] == [("alice", "graded"), ("bob", "graded")]
    assert_same({name: local[name] for name in ("alice", "bob")}, results_of(tmp_path / "out"))
