"""The one document a grader gets from the runner (tfcourse/submission/job.py): written once,
read back checked, field by field."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tfcourse.submission.job import Job, JobError

ROOT = Path(__file__).resolve().parents[1]


def full_job(tmp_path) -> Job:
    return Job(submission=tmp_path / "class" / "alice", course=ROOT, out=tmp_path / "r.json",
               within=tmp_path / "class", assignment="01-attention", threads=2,
               skip=("trained.accuracy",), hide=(tmp_path / "graded",), memory_mb=1024,
               sandbox_folder=tmp_path / "sandboxes", cgroup_parents={"": "/sys/fs/cgroup/x"},
               zygote_key="ab" * 16)


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
