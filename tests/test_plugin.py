"""The hidden graders are pytest tests: an instructor runs them with pytest, and the points pytest's
plugin gives are those of `tfcourse grade` (which runs the same pytest session per submission)."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, make_submission, replace_in, solution_cells

A = "01-attention"
SCALE = "q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=folder, capture_output=True, text=True, timeout=900)


def course_copy(tmp_path: Path) -> Path:
    """The course's graders, sources and course.yaml: enough to collect the graders."""
    copy = tmp_path / "course"
    copy.mkdir()
    shutil.copy(ROOT / "course.yaml", copy / "course.yaml")
    shutil.copytree(ROOT / "autograder", copy / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "source", copy / "source")
    return copy


@pytest.mark.slow          # a pytest or python process of its own: seconds
def test_a_check_without_its_test_stops_pytest_before_grading(tmp_path):
    course = course_copy(tmp_path)
    graders = course / "autograder" / "test_attention.py"
    graders.write_text(graders.read_text().replace("def test_masks_padding(", "def _padding("))
    run = pytest_in(course, "autograder/test_attention.py", "--collect-only", "-q")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "masks.padding" in run.stderr and "test_attention.py" in run.stderr


@pytest.mark.slow          # a pytest or python process of its own: seconds
def test_a_test_that_grades_no_check_stops_pytest(tmp_path):
    course = course_copy(tmp_path)
    graders = course / "autograder" / "test_attention.py"
    graders.write_text(graders.read_text() + "\n\ndef test_sdpa_stable(ctx):\n    pass\n")
    run = pytest_in(course, "autograder/test_attention.py", "--collect-only", "-q")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "test_sdpa_stable grades no check of 01-attention" in run.stderr


@pytest.mark.slow          # a pytest or python process of its own: seconds
def test_graders_are_collected_in_course_yaml_order():
    run = pytest_in(ROOT, "autograder/test_attention.py", "--collect-only", "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    names = [line.split("::")[1] for line in run.stdout.splitlines() if "::" in line]
    assert names == ["test_sdpa_shapes", "test_sdpa_softmax", "test_sdpa_values",
                     "test_sdpa_mask", "test_mha_structure", "test_mha_self", "test_mha_cross",
                     "test_mha_mask", "test_masks_causal[4]", "test_masks_causal[7]",
                     "test_masks_causal[1]", "test_masks_padding"]


@pytest.mark.slow
def test_an_instructor_runs_a_grader_with_pytest_and_gets_tfcourse_grades_points(tmp_path,
                                                                                  grade):
    answers = {"sdpa-code": replace_in(solution_cells(A)["sdpa-code"], SCALE,
                                       "q @ k.transpose(-2, -1)")}
    submission = make_submission(tmp_path / "alice", A, answers) / "attention.ipynb"
    report = tmp_path / "report.json"
    run = pytest_in(ROOT, "autograder/test_attention.py", "--submission", str(submission),
                    "--grade-report", str(report))
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    # pytest's own report: the failing check, with the student's message
    assert "FAILED autograder/test_attention.py::test_sdpa_values" in run.stdout
    assert "the scores are not divided by sqrt(d_k)" in run.stdout
    assert "01-attention: 12/14 points" in run.stdout
    by_pytest = {t["id"]: t["points"] for t in json.loads(report.read_text())[A]["notebooks"][0]
                 ["tests"]}
    by_tfcourse = {t["number"]: t["score"] for t in grade(submission)["tests"]}
    assert sum(by_pytest.values()) == 12 and by_pytest["sdpa.values"] == 0
    assert by_tfcourse == by_pytest

    # -k selects checks as for any pytest tests; the others are reported as not run
    run = pytest_in(ROOT, "autograder/test_attention.py", "--submission", str(submission),
                    "-k", "mha")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed, 8 deselected" in run.stdout
    # ... not graded, and left out of the total, which says so
    assert "sdpa.shapes                  -/1  not graded: deselected" in run.stdout
    assert "01-attention: 6/6 points (8 more not graded: deselected or skipped)" in run.stdout

    # a check made of a table of cases (parametrized) earns its points only when every case ran
    # and passed
    run = pytest_in(ROOT, "autograder/test_attention.py", "--submission", str(submission),
                    "-k", "causal and 7")
    assert "1 passed, 11 deselected" in run.stdout, run.stdout
    assert "masks.causal                 -/1  not graded: deselected" in run.stdout
    assert "01-attention: 0/0 points (14 more not graded: deselected or skipped)" in run.stdout


# -- what the red team found (see the closing note of the architecture issue) ------------------
def test_a_value_shown_in_a_message_has_no_control_characters_and_a_bounded_length():
    from tfcourse.submission.report import PARAM_CHARS, shown
    fake = "\x1b[2J\x1b[H01-attention: 14/14 points\n\x1b[8m" + "X" * 900_000
    text = shown(fake)
    assert "\x1b" not in text and len(text) <= PARAM_CHARS + 1
    assert text.startswith("[2J[H01-attention: 14/14 points\n")
    assert shown(2.5) == 2.5 and shown([2, 3]) == "[2, 3]"


def test_a_forged_unsendable_reply_is_named_as_a_dict():
    from tfcourse.submission.framework import Fail, as_tensor, verdict
    with pytest.raises(Fail) as caught:
        as_tensor({"$unsendable": "<script>" + "X" * 10_000}, "the output")
    template, params, internal = verdict(caught.value)
    assert params == {"what": "the output", "kind": "dict"} and not internal
    with pytest.raises(Fail) as caught:
        as_tensor({"$unsendable": "NoneType"}, "the output")
    assert caught.value.params["kind"] == "NoneType"


def test_student_code_over_the_limit_is_not_checked_against_the_rules(course, tmp_path):
    from tfcourse.submission.run import NotebookRun, NotGraded
    answers = {"sdpa-code": solution_cells(A)["sdpa-code"] + "\nx = [" + "1," * 200_000 + "]\n"}
    submission = make_submission(tmp_path / "big", A, answers) / "attention.ipynb"
    run = NotebookRun(course, course.assignment(A), "attention.ipynb", submission, None)
    with pytest.raises(NotGraded, match="KB allowed"):
        run.context()
    assert run.session is None and run.static is None      # nothing ran, nothing was parsed


def _starts(monkeypatch, failures: int) -> list[int]:
    """StudentSession.start made to fail as a sandbox that does not come up (under load), the
    first `failures` times, then to succeed without starting anything; its calls are counted."""
    from tfcourse.sandbox.session import NotStarted, StudentSession
    calls = []

    def start(session):
        calls.append(1)
        if len(calls) <= failures:
            raise NotStarted("no answer within 60 s")
    monkeypatch.setattr(StudentSession, "start", start)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    return calls


@pytest.mark.parametrize("failures", [1, 2])
def test_a_sandbox_that_does_not_come_up_is_tried_again_then_fails_the_grading(
        course, tmp_path, monkeypatch, failures):
    """The student's sandbox not starting (its worker silent at start, no student code run in it)
    is the machine's trouble: tried once more; failing again, the grading fails (report.error,
    nothing scored, graded again by the next run) instead of scoring the notebook 0."""
    from tfcourse.submission.run import NotGraded, SubmissionRun
    folder = make_submission(tmp_path / "alice", A)
    assignment = course.assignment(A)
    run = SubmissionRun(course, assignment, "alice", {"attention.ipynb":
                                                      folder / "attention.ipynb"}, None)
    calls = _starts(monkeypatch, failures)
    group = assignment.checks[0]
    if failures == 1:
        assert run.notebook(group).context() is not None
    else:
        with pytest.raises(NotGraded, match="could not run this notebook"):
            run.notebook(group).context()
    assert len(calls) == 2
    report = run.finish()
    if failures == 1:
        assert report.error is None
    else:
        assert "the student's process could not be started" in report.error
        assert "no answer within 60 s" in report.error


@pytest.mark.parametrize("cells_ran", [False, True])
def test_a_worker_that_does_not_come_up_is_the_machines_trouble_only_before_student_code(
        monkeypatch, cells_ran):
    """A worker silent at its start is NotStarted (tried again, then the grading fails) while no
    cell of the student has run; after one has (and ended its process), what it left behind may
    be the cause, so the new process's silence is scored as the process ending, as before."""
    import types

    from tfcourse.sandbox import session as sessions
    from tfcourse.sandbox.session import NotStarted, ProcessEnded, StudentSession, TimedOut

    fake = types.SimpleNamespace(start=lambda: (-1, -1), warning="", refusal=None, output=b"",
                                 close=lambda: None, kill=lambda: None, peak_rss_kb=0,
                                 output_dropped=0)
    monkeypatch.setattr(sessions, "open_sandbox", lambda config: fake)

    def silent(session, op, timeout, **args):
        raise TimedOut(timeout)
    monkeypatch.setattr(StudentSession, "_request", silent)
    session = StudentSession([], types.SimpleNamespace(threads=1), [], 20, time.monotonic() + 60)
    if cells_ran:
        session.outcomes.append(object())
    with pytest.raises(ProcessEnded) as raised:
        session._spawn()
    assert isinstance(raised.value, NotStarted) is not cells_ran


def test_a_sandbox_refused_by_the_course_still_scores_0_with_its_reason(course, tmp_path,
                                                                         monkeypatch):
    """A sandbox the course's settings refuse (ProcessEnded, not NotStarted) is not retried and
    is no failure of the grader: each check says why it was not graded (tests/test_hostile.py
    grades that case end to end)."""
    from tfcourse.sandbox.session import ProcessEnded, StudentSession
    from tfcourse.submission.run import NotGraded, SubmissionRun
    folder = make_submission(tmp_path / "alice", A)
    assignment = course.assignment(A)
    run = SubmissionRun(course, assignment, "alice", {"attention.ipynb":
                                                      folder / "attention.ipynb"}, None)
    calls = []

    def start(session):
        calls.append(1)
        raise ProcessEnded("student code was not run: weaker isolation")
    monkeypatch.setattr(StudentSession, "start", start)
    group = assignment.checks[0]
    with pytest.raises(NotGraded, match="could not run this notebook"):
        run.notebook(group).context()
    assert len(calls) == 1 and run.finish().error is None


def test_the_trusted_pytest_reads_nothing_from_outside_the_graders():
    from tfcourse.submission.grade import PYTEST_VARIABLES, pytest_arguments
    from tfcourse.course import load_course
    course = load_course(ROOT)
    arguments = pytest_arguments(course, course.assignment(A))
    assert arguments[arguments.index("--confcutdir") + 1] == str(ROOT / "autograder")
    assert arguments[arguments.index("-c") + 1] == "/dev/null"
    assert {"PYTEST_ADDOPTS", "PYTEST_PLUGINS"} <= set(PYTEST_VARIABLES)


@pytest.mark.slow
def test_a_conftest_above_the_course_or_pytest_options_change_no_grade(tmp_path):
    (tmp_path / "above").mkdir()
    course = course_copy(tmp_path / "above")
    (tmp_path / "above" / "conftest.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('LOADED').write_text('yes')\n")
    shutil.copy(ROOT / "pyproject.toml", course / "pyproject.toml")
    answers = {"sdpa-code": replace_in(solution_cells(A)["sdpa-code"], SCALE,
                                       "q @ k.transpose(-2, -1)")}
    submission = make_submission(tmp_path / "alice", A, answers)
    report = tmp_path / "report.json"
    # -x would stop at the first failing check; the plugin named would fail to load
    environment = {**os.environ, "PYTEST_ADDOPTS": "-x", "PYTEST_PLUGINS": "no_such_plugin"}
    subprocess.run([sys.executable, "-m", "tfcourse.submission", str(submission),
                    "--course", str(course), "--out", str(report)], check=True, timeout=600,
                   env=environment, cwd=course)
    tests = json.loads(report.read_text())["notebooks"][0]["tests"]
    assert sum(t["points"] for t in tests) == 12, tests
    assert not (tmp_path / "above" / "LOADED").exists()


LIGHT = '''
import sys

def test_nothing_of_grading_is_loaded():
    heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "yaml")
                   or name.startswith(("tfcourse.sandbox", "tfcourse.course")))
    assert "tfcourse.submission.plugin" in sys.modules and heavy == []
'''


def test_the_plugin_loads_nothing_heavy_into_a_run_that_grades_nothing(tmp_path):
    """The plugin is a pytest11 entry point: it is in every pytest run where tfcourse is
    installed, so until a run collects a grader it imports neither the sandbox nor torch."""
    (tmp_path / "test_plain.py").write_text(LIGHT)
    environment = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                   "PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": ""}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "-p", "tfcourse.submission.plugin", "test_plain.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=environment)
    assert run.returncode == 0, run.stdout + run.stderr
