"""The course's nbgrader_config.py: what nbgrader does when it does not load.

nbgrader logs a configuration file that raises and goes on with its own defaults: its autograde
would then run every student cell in a kernel, as the instructor, outside the sandbox. A mistake in
course.yaml is enough. The configuration catches its own failure and leaves nbgrader nothing to run:
every step that reads or writes notebooks, and collect, stops with the error, and no kernel starts.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.config.loader import PyFileConfigLoader

from conftest import ROOT

MISTAKE = "course.yaml: langauge: unknown key"


def load(folder: Path):
    return PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()


def broken_course(folder: Path) -> Path:
    """The course folder's configuration beside a course.yaml with a misspelt key."""
    folder.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", folder)
    text = (ROOT / "course.yaml").read_text()
    assert "\nlanguage: " in text
    (folder / "course.yaml").write_text(text.replace("\nlanguage: ", "\nlangauge: ", 1))
    return folder


def test_the_course_configuration_grades_in_the_sandbox():
    config = load(ROOT)
    names = [step.__name__ for step in config.Autograde.autograde_preprocessors]
    assert names[0] == "SandboxedGrade" and "Execute" not in names, names
    assert config.ExchangeFactory.collect.__name__ == "SafeCollect"
    assert config.CourseDirectory.course_id == "tfcourse"
    assert "enabled" not in config.Execute


def test_a_formgrader_started_elsewhere_reads_the_course_through_load_subconfig(
        tmp_path, monkeypatch):
    """The guide's line for a formgrader whose server starts outside the course folder (a hub's
    home folder): ~/.jupyter/nbgrader_config.py loads the course's, and with it its steps."""
    from nbgrader.apps.baseapp import NbGrader

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / ".jupyter").mkdir(parents=True)
    elsewhere.mkdir()
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.Exchange.root = "/srv/nbgrader/exchange"\n'
        f'load_subconfig("{ROOT / "nbgrader_config.py"}")    # this course folder\'s\n')
    for name in [name for name in os.environ if name.startswith("JUPYTER")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(elsewhere)
    app = NbGrader()
    app.load_cwd_config = True                # as the formgrader loads it
    app.load_config_file()
    config = app.config
    assert config.Exchange.root == "/srv/nbgrader/exchange"
    assert config.CourseDirectory.root == str(ROOT)
    assert config.Autograde.autograde_preprocessors[0].__name__ == "SandboxedGrade"


def test_a_configuration_that_fails_leaves_nbgrader_nothing_to_run(tmp_path, capfd):
    config = load(broken_course(tmp_path / "course"))
    assert MISTAKE in capfd.readouterr().err          # said at once, where nbgrader starts
    assert config.Execute.enabled is False
    for steps in (config.GenerateAssignment.preprocessors, config.GenerateSolution.preprocessors,
                  config.Autograde.sanitize_preprocessors, config.Autograde.autograde_preprocessors,
                  config.GenerateFeedback.preprocessors):
        [step] = steps
        with pytest.raises(RuntimeError, match=MISTAKE):
            step().preprocess(None, {})
    with pytest.raises(RuntimeError, match=MISTAKE):
        config.ExchangeFactory.collect().start()


@pytest.mark.slow
def test_nbgrader_autograde_stops_and_runs_no_student_cell(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(
        ".venv", ".git", ".pytest_cache", "build", "*.egg-info", "__pycache__", "gradebook.db",
        "graded", "autograded", "submitted", "feedback", "bench"))
    bin_folder = Path(sys.executable).parent
    environment = {**os.environ, "HOME": str(tmp_path),
                   "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}

    def nbgrader(*args):
        return subprocess.run([str(bin_folder / "nbgrader"), *args], cwd=course, env=environment,
                              capture_output=True, text=True, timeout=300)

    assert nbgrader("generate_assignment", "01-attention", "--force").returncode == 0
    submitted = course / "submitted" / "eve" / "01-attention"
    submitted.mkdir(parents=True)
    marker = tmp_path / "ran"        # a student cell that leaves a trace when it runs anywhere
    notebook = (course / "release" / "01-attention" / "attention.ipynb").read_text()
    notebook = notebook.replace('"import math\\n"', f'"open({str(marker)!r}, \\"w\\")\\n", '
                                                    f'"import math\\n"', 1)
    assert str(marker) in notebook
    (submitted / "attention.ipynb").write_text(notebook)
    text = (course / "course.yaml").read_text()
    (course / "course.yaml").write_text(text.replace("\nlanguage: ", "\nlangauge: ", 1))

    done = nbgrader("autograde", "01-attention", "--force")
    assert done.returncode != 0, done.stderr
    assert MISTAKE in done.stderr and "did not load" in done.stderr, done.stderr
    assert "IPKernelApp" not in done.stderr, done.stderr      # no kernel started
    assert not marker.exists()


def test_autograde_refuses_a_notebook_built_to_be_expensive_to_read_before_parsing_it(tmp_path):
    """nbgrader parses each submitted notebook itself, in the instructor's process: the course's
    exporter makes the grader's checks first (6 MB of empty objects would cost it 630 MB)."""
    from tfcourse.adapters.nbgrader import GuardedNotebookExporter

    config = load(ROOT)
    assert config.Autograde.exporter_class is GuardedNotebookExporter
    evil = tmp_path / "attention.ipynb"
    evil.write_bytes(b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ['
                     + b"{}," * 2_000_000 + b"{}]}")
    exporter = GuardedNotebookExporter(course_root=str(ROOT))
    with pytest.raises(ValueError, match=r"attention.ipynb: not graded: the notebook "
                                         r"attention.ipynb holds more than 200000 JSON values"):
        exporter.from_filename(str(evil))
    output, _ = exporter.from_filename(str(ROOT / "release" / "01-attention" / "attention.ipynb"))
    assert '"nbgrader"' in output


def test_a_grading_that_failed_is_not_stored_as_a_score_of_0(monkeypatch, course, tmp_path):
    """When the grader fails on a notebook (its sandbox never came up, under load), autograde's
    step raises: nbgrader reports that submission as failed and stores nothing, instead of blank
    verdicts that it would total as 0 points."""
    import nbformat

    from tfcourse.adapters import nbgrader as adapter
    from tfcourse.submission.report import SubmissionReport
    from conftest import make_submission

    monkeypatch.setattr(adapter, "grade_with_runner", lambda *args, **kw: SubmissionReport(
        "01-attention", "alice", error="attention.ipynb: the student's process could not be "
                                       "started: no answer within 60 s"))
    folder = make_submission(tmp_path / "alice", "01-attention")
    nb = nbformat.read(str(folder / "attention.ipynb"), as_version=4)
    resources = {"nbgrader": {"assignment": "01-attention", "notebook": "attention"}}
    with pytest.raises(RuntimeError, match="the grader failed on attention.ipynb .*could not "
                                           "be started.*nothing was stored"):
        adapter.SandboxedGrade(course_root=str(ROOT)).preprocess(nb, resources)
