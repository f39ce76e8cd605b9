"""The one document a grader gets from the runner (tfcourse/submission/job.py): written once,
read back checked, field by field; the runner resolves it once (the notebooks, the zygote that
fits), and the grader reads no variable of the runner's environment."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tfcourse.batch import child
from tfcourse.course import load_course
from tfcourse.sandbox import forked
from tfcourse.sandbox import limits as measure
from tfcourse.sandbox.settings import SandboxConfig, bwrap_works
from tfcourse.submission import failures, finding
from tfcourse.submission.job import Job, JobError

ROOT = Path(__file__).resolve().parents[1]


def full_job(tmp_path) -> Job:
    return Job(submission=tmp_path / "class" / "alice", course=ROOT, out=tmp_path / "r.json",
               within=tmp_path / "class", assignment="01-attention", threads=2,
               skip=("trained.accuracy",), hide=(tmp_path / "graded",), memory_mb=1024,
               sandbox_folder=tmp_path / "sandboxes", cgroup_parents={"": "/sys/fs/cgroup/x"},
               zygote_key="ab" * 16, notebooks={str(tmp_path / "class" / "alice" / "a.ipynb"):
                                                 "file"}, unfollowed=("sub/link",))


def test_a_job_reads_back_as_written(tmp_path):
    job = full_job(tmp_path)
    job.write(tmp_path / "job.json")
    assert Job.read(tmp_path / "job.json") == job
    plain = Job(submission=tmp_path / "a", course=ROOT, out=tmp_path / "r.json")
    plain.write(tmp_path / "plain.json")
    assert Job.read(tmp_path / "plain.json") == plain


@pytest.mark.parametrize("change, says", [
    ({"version": 0}, "not a grading job of version 1"),
    ({"submission": "relative/alice"}, "submission is not an absolute path"),
    ({"threads": "2"}, "threads is not a whole number"),
    ({"threads": True}, "threads is not a whole number"),
    ({"memory_mb": -1}, "memory_mb is not a whole number"),
    ({"skip": "trained.accuracy"}, "skip is not a list"),
    ({"skip": [1]}, "skip is not str"),
    ({"cgroup_parents": {"": 3}}, "cgroup_parents is not a map of names to folders"),
    ({"zygote": "3:key"}, "unknown fields: zygote"),
    ({"out": None}, "out is not an absolute path"),
    ({"notebooks": {"a.ipynb": "file"}}, "notebooks is not a map of paths to what they are"),
    ({"notebooks": {"/a.ipynb": "folder"}}, "notebooks is not a map of paths to what they are"),
    ({"unfollowed": "sub/link"}, "unfollowed is not a list"),
])
def test_a_wrong_job_says_which_field(tmp_path, change, says):
    full_job(tmp_path).write(tmp_path / "job.json")
    data = {**json.loads((tmp_path / "job.json").read_text()), **change}
    (tmp_path / "job.json").write_text(json.dumps(data))
    with pytest.raises(JobError, match=says):
        Job.read(tmp_path / "job.json")


def test_a_job_without_a_submission_is_refused(tmp_path):
    (tmp_path / "job.json").write_text(json.dumps({"version": 1, "course": str(ROOT),
                                                   "out": str(tmp_path / "r.json")}))
    with pytest.raises(JobError, match="the job has no submission"):
        Job.read(tmp_path / "job.json")


def test_the_grader_refuses_a_broken_job_plainly(tmp_path):
    (tmp_path / "job.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "tfcourse.submission", "--job",
                           str(tmp_path / "job.json")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert "tfcourse.submission: the job" in done.stderr and "cannot be read" in done.stderr
    assert "Traceback" not in done.stderr


# -- the notebooks: found once, by the runner ------------------------------------------------------
A, NOTEBOOK = "01-attention", "attention.ipynb"


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT)


def alice(tmp_path) -> Path:
    """A class folder's alice/: the released notebook, another one below, a link not followed."""
    folder = tmp_path / "class" / "alice"
    (folder / "sub").mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes((ROOT / "release" / A / NOTEBOOK).read_bytes())
    (folder / "sub" / "draft.ipynb").write_text("{}")
    (folder / "sub" / "link").symlink_to(tmp_path)
    return folder


def job_for(course, folder: Path, tmp_path, assignment=None) -> Job:
    return child.make_job(course, folder, assignment, 1, [], [], folder.parent,
                          tmp_path / "report.json", tmp_path, {}, None)


def no_search(monkeypatch):
    """From here on, looking at a submission's files fails."""
    def searched(*args, **kwargs):
        raise AssertionError("the submission was looked at again")

    for module, name in ((finding, "candidates_in"), (finding, "listing"),
                         (finding, "kind_inside"), (failures, "kind_inside"),
                         (failures, "find_notebooks")):
        monkeypatch.setattr(module, name, searched)


def test_the_runner_lists_the_notebooks_and_the_grader_searches_no_more(course, tmp_path,
                                                                        monkeypatch):
    """The job lists the notebooks as found (and the links not followed); the grader matches that
    list to the assignment and refuses nothing it did not list, without looking again."""
    import tfcourse.submission.__main__ as grader
    import tfcourse.submission.grade

    folder = alice(tmp_path)
    job = job_for(course, folder, tmp_path)
    assert job.assignment == A and job.unfollowed == ("sub/link",)
    assert job.notebooks == {str(folder / NOTEBOOK): "file",
                             str(folder / "sub" / "draft.ipynb"): "file"}
    assert Job.from_dict(json.loads(json.dumps({"version": 1, **{
        name: str(value) if isinstance(value, Path) else value
        for name, value in vars(job).items()}}))).notebooks == job.notebooks
    expected = finding.find_notebooks(course, folder, None, folder.parent, by_content=True)
    graded = {}

    class NoSandbox:
        def __init__(self, config):
            pass

        def start(self):
            pass

        def close(self):
            pass

    def grade_submission(course, submission, assignment_id, notebooks, config, **options):
        graded.update(assignment=assignment_id, notebooks=notebooks)
        raise RuntimeError("graded")

    no_search(monkeypatch)
    assert finding.job_notebooks(course, job, by_content=True) == expected
    monkeypatch.setattr(grader, "open_sandbox", NoSandbox)
    monkeypatch.setattr(tfcourse.submission.grade, "grade_submission", grade_submission)
    report = grader.grade(job, None, None)
    assert graded == {"assignment": A, "notebooks": expected[1]}
    assert "RuntimeError: graded" in report["error"] and len(report["notebooks"][0]["tests"]) == 10


def test_a_submission_refused_whole_is_refused_by_its_listing(course, tmp_path, monkeypatch):
    """A submission that is itself a link is refused as listed in its job, not looked at again."""
    import tfcourse.submission.__main__ as grader

    (tmp_path / "class").mkdir()
    (tmp_path / "class" / NOTEBOOK).symlink_to(ROOT / "release" / A / NOTEBOOK)
    job = job_for(course, tmp_path / "class" / NOTEBOOK, tmp_path)
    assert job.notebooks == {str(tmp_path / "class" / NOTEBOOK): "link"} and job.assignment == A
    no_search(monkeypatch)
    report = grader.grade(job, None, None)
    assert report["notes"][0]["params"] == {"name": NOTEBOOK, "what": "a symbolic link"}


def test_a_failed_grader_is_reported_on_the_job_s_listing(course, tmp_path, monkeypatch):
    """When the grader fails, the runner's report of it takes the job's assignment: the
    submission's files are listed once in all (by the runner, for the job)."""
    folder = alice(tmp_path)
    (folder / NOTEBOOK).rename(folder / "mine.txt")              # no name tells the assignment
    looks = []
    walk = finding.listing
    monkeypatch.setattr(finding, "listing", lambda *a, **k: looks.append(a) or walk(*a, **k))
    monkeypatch.setattr(child.sys, "executable", "/bin/false")     # a grader that fails at once
    monkeypatch.setenv("TFCOURSE_FORK_SERVER", "0")
    monkeypatch.setenv("TFCOURSE_STUDENT_FORKS", "0")
    report = child.grade_in_child(course, folder, None, 1, [], [], folder.parent)
    assert len(looks) == 1
    assert report.assignment == "" and "the grader process ended with status 1" in report.error
    assert "its assignment could not be told" in report.notes[-1].template


def a_class(tmp_path) -> Path:
    """A class folder: alice/ (as above), bob/ with a notebook of no assignment's name, carol's
    notebook given alone."""
    folder = alice(tmp_path).parent
    (folder / "bob").mkdir()
    (folder / "bob" / "mine.ipynb").write_text("{}")
    (folder / "carol.ipynb").write_bytes((ROOT / "release" / A / NOTEBOOK).read_bytes())
    return folder


def failing_graders(monkeypatch):
    """Graders that fail at once, started as fresh processes (nothing is forked from a process
    that was started before the test's stand-ins)."""
    monkeypatch.setattr(child.sys, "executable", "/bin/false")
    monkeypatch.setenv("TFCOURSE_FORK_SERVER", "0")
    monkeypatch.setenv("TFCOURSE_STUDENT_FORKS", "0")


@pytest.mark.parametrize("assignment", [None, A])
def test_a_batch_lists_each_submission_once(course, tmp_path, monkeypatch, assignment):
    """`tfcourse grade` looks at each submission's files once: its fingerprint, its assignment
    and its grader's job come from that one listing (they once listed it two or three times)."""
    from tfcourse.batch import fingerprint, runner

    looks = []
    for module in (finding, fingerprint):                  # (fingerprint: where it once listed)
        for name in ("listing", "kind_inside"):
            real = getattr(finding, name)

            def looked(base, parts=(), *args, real=real, **options):
                looks.append(str(Path(base).joinpath(*parts)))
                return real(base, parts, *args, **options)

            monkeypatch.setattr(module, name, looked, raising=False)
    failing_graders(monkeypatch)
    folder = a_class(tmp_path)
    outcomes = runner.grade_many(course, [folder], tmp_path / "out", jobs=1, lang="en",
                                 assignment=assignment, progress=False)
    assert sorted(o.name for o in outcomes) == ["alice", "bob", "carol"]
    assert all(o.status == "failed" for o in outcomes)
    # a folder: what it is, then its entries; a notebook given alone: what it is
    assert sorted(looks) == sorted([str(folder / "alice")] * 2 + [str(folder / "bob")] * 2 +
                                   [str(folder / "carol.ipynb")])


def test_a_batch_grades_the_notebooks_it_fingerprinted(course, tmp_path, monkeypatch):
    """A notebook added after the plan fingerprinted a submission is not in its grader's job:
    the grade is recorded under the fingerprint of the notebooks graded."""
    from tfcourse.batch import runner

    folder = alice(tmp_path)
    jobs, start = [], child._start

    def started(course, job, *rest):
        jobs.append(Job.read(job))
        return start(course, job, *rest)

    def later(course, submission, *args, **options):
        (submission / "layers.ipynb").write_text("{}")        # the student's folder changes
        return grade_in_child(course, submission, *args, **options)

    grade_in_child = runner.grade_in_child
    failing_graders(monkeypatch)
    monkeypatch.setattr(child, "_start", started)
    monkeypatch.setattr(runner, "grade_in_child", later)
    runner.grade_many(course, [folder.parent], tmp_path / "out", jobs=1, lang="en",
                      progress=False)
    assert [sorted(Path(path).name for path in job.notebooks) for job in jobs] == \
        [["attention.ipynb", "draft.ipynb"]]
    assert jobs[0].assignment == A and jobs[0].unfollowed == ("sub/link",)


# -- nothing passes through the environment ----------------------------------------------------
OLD_VARIABLES = ("TFCOURSE_ZYGOTE", "TFCOURSE_CGROUP_PARENT", "TFCOURSE_SANDBOX_FOLDER")


def test_the_sandbox_reads_no_variable_of_the_runner(tmp_path, monkeypatch):
    """Where a sandbox is made, the cgroups' parents and the zygote come in its settings only:
    the variables that once carried them change nothing."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    monkeypatch.setenv("TFCOURSE_SANDBOX_FOLDER", str(tmp_path))
    monkeypatch.setenv("TFCOURSE_CGROUP_PARENT", json.dumps({"": str(tmp_path)}))
    monkeypatch.setenv("TFCOURSE_ZYGOTE", f"{theirs.fileno()}:{'ab' * 16}")
    try:
        sandbox = forked.open_sandbox(SandboxConfig(isolation="process"))
        try:
            assert not sandbox.forked and sandbox.base.parent != tmp_path
        finally:
            sandbox.close()
        assert measure._given_parent("", None) is None
        assert measure._given_parent("", {"": str(tmp_path)}) == tmp_path
    finally:
        ours.close()
        theirs.close()
    engine = Path(child.__file__).parents[1]
    said = [str(path) for path in engine.rglob("*.py")
            if any(name in path.read_text(encoding="utf-8") for name in OLD_VARIABLES)]
    assert said == []


def test_a_grader_forks_from_the_zygote_its_settings_name(tmp_path):
    """The grader uses the zygote it is handed as given (the runner checked that it fits)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        zygote = forked.HandedZygote(theirs.fileno())
        sandbox = forked.open_sandbox(SandboxConfig(isolation="process", folder=tmp_path,
                                                    zygote=zygote))
        assert sandbox.forked and sandbox.launcher.zygote is zygote
        assert list(tmp_path.iterdir()) == []           # its files go to the zygote
        zygote.failed("it is gone")                     # from now on: fresh sandboxes
        again = forked.open_sandbox(SandboxConfig(isolation="process", folder=tmp_path,
                                                  zygote=zygote))
        assert not again.forked
        again.close()
        assert not forked.open_sandbox(SandboxConfig(isolation="process", folder=tmp_path,
                                                     zygote=forked.HandedZygote(-1))).forked
    finally:
        ours.close()
        theirs.close()


@pytest.mark.skipif(not (bwrap_works() and os.geteuid() == 0),
                    reason="a zygote is used only in bubblewrap, as root")
def test_the_runner_hands_its_zygote_only_to_the_sandboxes_it_fits(tmp_path):
    """A job's sandbox that would hide what the zygote shows (a folder under a tree it binds),
    or run more torch threads, gets no zygote: a fresh sandbox, as the grader once decided."""
    config = {"memory_mb": 768, "disk_mb": 64, "processes": 32, "isolation": "bwrap"}
    host = forked.Zygote(SandboxConfig(**config))          # its key; not started
    try:
        assert host.key is not None
        assert forked.fitting(SandboxConfig(**config, folder=tmp_path), host) == host.key
        shown = Path(os.path.realpath(sys.prefix)) / "lib"      # bound into every sandbox
        assert forked.fitting(SandboxConfig(**config, hide=[shown]), host) is None
        assert forked.fitting(SandboxConfig(**config, threads=2), host) is None
        assert forked.handed(SandboxConfig(**config, threads=2), host).zygote is None
        assert forked.handed(SandboxConfig(**config), host).zygote is None    # no socket yet
        assert list(tmp_path.iterdir()) == []
    finally:
        host.close()
