"""release/, solutions/ and the helper modules are built from source/, and the release is clean."""
import ast
import json
import os
import shutil
import subprocess
import sys

import pytest

from tfcourse import notebook
from tfcourse.build.release import _compare_trees, check, failed_cells

from conftest import NOTEBOOK_OF, ROOT

BIN = os.path.dirname(sys.executable)


@pytest.mark.slow
def test_everything_built_is_up_to_date(course):
    assert check(course) == []


def test_the_committed_solutions_pass_their_own_checks():
    """A solution notebook whose check failed when it was built (a time limit hit on a busy
    machine) must not be committed: `build` refuses it and `build --check` lists it."""
    assert failed_cells(ROOT / "solutions", "solutions") == []


def test_a_solution_that_fails_its_check_is_named(tmp_path):
    nb = {"cells": [
        {"cell_type": "code", "source": "check.sdpa(f)", "metadata": {}, "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "✓ shapes\n"}]},
        {"cell_type": "code", "source": "check.trained(g)",
         "metadata": {"nbgrader": {"grade_id": "trained"}}, "outputs": [
             {"output_type": "error", "ename": "ChecksFailed", "evalue": "no points for trained",
              "traceback": ["✗ accuracy (0/6): took longer than 240 s"]}]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "03-sorting").mkdir()
    (tmp_path / "03-sorting" / "sorting.ipynb").write_text(json.dumps(nb))
    (line,) = failed_cells(tmp_path, "solutions")
    assert line.startswith("solutions/03-sorting/sorting.ipynb, cell trained: the solution fails")
    assert "took longer than 240 s" in line and "ChecksFailed" in line
    nb["cells"].pop()
    (tmp_path / "03-sorting" / "sorting.ipynb").write_text(json.dumps(nb))
    assert failed_cells(tmp_path, "solutions") == []


def released(assignment):
    return notebook.read(ROOT / "release" / assignment / NOTEBOOK_OF[assignment])


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_release_has_no_solution_and_no_hidden_test(assignment):
    text = (ROOT / "release" / assignment / NOTEBOOK_OF[assignment]).read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "hidden_checks"):
        assert marker not in text
    source = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    for cell in source.cells:
        if notebook.is_solution(cell):
            body = notebook.text(cell).split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
            for line in body.strip().splitlines():
                if len(line.strip()) > 25:
                    assert line.strip() not in text, f"solution line leaked: {line.strip()}"


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_every_stub_raises_not_implemented(assignment):
    nb = released(assignment)
    stubs = [notebook.text(c) for c in nb.cells if notebook.is_solution(c)]
    assert stubs
    for source in stubs:
        tree = ast.parse(source)
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        assert functions
        for function in functions:
            raises = [n for n in ast.walk(function) if isinstance(n, ast.Raise)]
            assert raises, f"{function.name} in {assignment} has no stub"
            assert "NotImplementedError" in ast.unparse(raises[-1])


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_release_is_in_the_course_language_only(course, assignment):
    nb = released(assignment)
    assert {notebook.lang(c) for c in nb.cells} <= {None, course.language}
    language_cells = [c for c in nb.cells if notebook.role(c) == "language"]
    assert language_cells and f'use_language("{course.language}")' in language_cells[0].source


@pytest.mark.slow
def test_nbgrader_generate_assignment_reproduces_the_release(tmp_path):
    """An instructor running nbgrader by hand in the course folder gets the committed release."""
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    for assignment in NOTEBOOK_OF:
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                        "--force", f"--CourseDirectory.release_directory={tmp_path / 'release'}",
                        f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
    assert _compare_trees(tmp_path / "release", ROOT / "release", "release") == []


@pytest.mark.slow
def test_check_notices_a_stale_release(course, tmp_path):
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "graded",
                                                              "__pycache__", "*.db"))
    target = copy / "release" / "01-attention" / "attention.ipynb"
    nb = json.loads(target.read_text())
    nb["cells"][0]["source"] = ["# edited by hand\n"]
    target.write_text(json.dumps(nb))
    (copy / "source" / "02-layers" / "attention_parts.py").write_text("# stale\n")
    from tfcourse.course import load_course
    stale = check(load_course(copy))
    assert "release/01-attention/attention.ipynb is stale" in stale
    assert any("attention_parts.py is stale" in line for line in stale)


# -- editions in other languages -------------------------------------------------------------------
def _recorded_build(course, monkeypatch, **options):
    """Where build() would remove and generate an edition, without running nbgrader."""
    import tfcourse.build.release as release_module

    calls, removed = [], []
    monkeypatch.setattr(release_module, "run_nbgrader",
                        lambda course, release, solutions, lang, execute=True, **options:
                        calls.append((release, solutions, lang)))
    monkeypatch.setattr(shutil, "rmtree", lambda path, ignore_errors=False: removed.append(path))
    release_module.build(course, execute=False, log=lambda *args: None, **options)
    return calls, removed


def test_another_language_is_built_beside_the_release_never_over_it(course, monkeypatch,
                                                                     tmp_path):
    edition = ROOT / "editions" / "es"
    calls, removed = _recorded_build(course, monkeypatch, lang="es")
    assert calls == [(edition / "release", edition / "solutions", "es")]
    assert removed == [edition / "release", edition / "solutions"]
    calls, removed = _recorded_build(course, monkeypatch, lang="es", out=tmp_path)
    assert calls == [(tmp_path / "release", tmp_path / "solutions", "es")]
    assert removed == [tmp_path / "release", tmp_path / "solutions"]
    calls, _ = _recorded_build(course, monkeypatch)                  # course.yaml's: release/
    assert calls == [(course.release_dir, course.solutions_dir, course.language)]


@pytest.mark.slow
def test_the_spanish_edition_is_spanish_and_leaves_the_english_release_as_it_was(tmp_path):
    before = {path: path.read_bytes() for path in (ROOT / "release").rglob("*") if path.is_file()}
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    subprocess.run([sys.executable, "-m", "tfcourse", "build", "--lang", "es", "--no-execute",
                    "--out", str(tmp_path)], cwd=ROOT, env=env, check=True, capture_output=True)
    after = {path: path.read_bytes() for path in (ROOT / "release").rglob("*") if path.is_file()}
    assert after == before
    nb = notebook.read(tmp_path / "release" / "02-layers" / "layers.ipynb")
    assert {notebook.lang(c) for c in nb.cells} == {None, "es"}
    code = "\n".join(notebook.text(c) for c in nb.cells if notebook.is_solution(c))
    assert "La tabla sinusoidal [T, d_model]" in code and "The sinusoidal table" not in code
# -- points: one command writes them everywhere, and grading refuses a stale gradebook ----------
def _course_copy(tmp_path, *leave_out: str):
    """The course folder, without the venv, git, gradings and gradebooks, nor `leave_out`."""
    copy = tmp_path / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "graded",
                                                              "__pycache__", "*.db", *leave_out))
    return copy


def _more_points_for_sdpa_values(copy):
    text = (copy / "course.yaml").read_text()
    (copy / "course.yaml").write_text(text.replace("tests: {shapes: 1, softmax: 1, values: 2, "
                                                   "mask: 2}", "tests: {shapes: 1, softmax: 1, "
                                                   "values: 3, mask: 2}", 1))


def _gradebook_points(copy, group="sdpa"):
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gradebook:
        return gradebook.find_grade_cell(group, "attention", "01-attention").max_score


@pytest.mark.slow
def test_build_writes_new_points_into_nbgraders_gradebook(tmp_path):
    """Issue 25: after course.yaml's points changed, `build --no-execute` left nbgrader's gradebook
    at the old points (autograde gave x/14, tfcourse grade x/15) and `build --check` called it
    up to date."""
    copy = _course_copy(tmp_path)
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    subprocess.run([f"{BIN}/nbgrader", "generate_assignment", "01-attention", "--force"],
                   cwd=copy, env=env, check=True, capture_output=True, timeout=600)
    assert _gradebook_points(copy) == 6
    _more_points_for_sdpa_values(copy)
    from tfcourse.build.gradebook import disagreements    # what `build --check` lists as stale
    from tfcourse.course import load_course
    assert disagreements(load_course(copy)) == [
        "01-attention/sdpa: 6 points in nbgrader's gradebook, 7 in course.yaml"]
    done = subprocess.run([sys.executable, "-m", "tfcourse", "build", "--no-execute"], cwd=copy,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _gradebook_points(copy) == 7
    assert disagreements(load_course(copy)) == []


def test_autograde_refuses_points_that_are_not_course_yamls(course):
    from tfcourse.adapters.nbgrader import _refuse_other_points
    nb = notebook.read(ROOT / "release" / "01-attention" / "attention.ipynb")
    _refuse_other_points(nb, course.assignment("01-attention"))          # as built: agrees
    cell = next(c for c in nb.cells if notebook.grade_id(c) == "sdpa")
    cell.metadata["nbgrader"]["points"] = 5                             # a stale gradebook's
    with pytest.raises(RuntimeError, match=r"sdpa: 5 here, 6 in course.yaml.*tfcourse build"):
        _refuse_other_points(nb, course.assignment("01-attention"))


def test_tfcourse_grade_warns_when_the_notebooks_hold_other_points(tmp_path, capsys):
    copy = tmp_path / "course"
    copy.mkdir()
    for name in ("course.yaml", "nbgrader_config.py"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "source", copy / "source")
    _more_points_for_sdpa_values(copy)
    from tfcourse.cli import _warn_about_stale_points
    from tfcourse.course import load_course
    _warn_about_stale_points(load_course(copy))
    err = capsys.readouterr().err
    assert "WARNING: course.yaml's points are not everywhere yet" in err
    assert "sdpa has 6.0 points, course.yaml 7" in err and "run `tfcourse build`" in err


def test_the_solutions_kernel_is_quiet_and_uses_the_sandboxs_cpu_kernels(monkeypatch):
    """Issue 25: `tfcourse build` printed ipykernel's "running over TCP without encryption"
    warnings, and a rebuild on another CPU changed the solutions' printed accuracies."""
    import nbclient.client
    from tfcourse.adapters.nbgrader import ExecuteSolution
    started = {}

    class Started(Exception):
        pass

    def start_new_kernel(self, **kwargs):
        started.update(kwargs)
        raise Started

    monkeypatch.setattr(nbclient.client.NotebookClient, "start_new_kernel", start_new_kernel)
    step = ExecuteSolution(course_root=str(ROOT))
    nbclient.client.NotebookClient.__init__(step, notebook.read(
        ROOT / "source" / "01-attention" / "attention.ipynb"))
    with pytest.raises(Started):
        with step.setup_kernel():
            pass
    assert started["stderr"] == subprocess.DEVNULL
    assert started["env"]["OMP_NUM_THREADS"] == "1"
    from tfcourse.sandbox.launch import kernel_environment
    assert kernel_environment("avx2").items() <= started["env"].items()


def test_feedback_pages_show_no_bare_score_under_a_test_cell():
    """Issue 25: nbgrader's feedback showed `Out[ ]: 4` under each part-marked test cell."""
    import nbformat
    from nbformat.v4 import new_output
    from tfcourse.adapters.nbgrader import ClearHiddenTestsOnPage, cell_outputs  # noqa: F401
    nb = notebook.read(ROOT / "release" / "01-attention" / "attention.ipynb")
    cell = next(c for c in nb.cells if notebook.grade_id(c) == "sdpa")
    cell.outputs = [new_output("stream", name="stdout", text="✓ shapes (1/1)\n"),
                    new_output("execute_result", data={"text/plain": "4"}, execution_count=None)]
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    page, _ = ClearHiddenTestsOnPage().preprocess(nb, {})
    cell = next(c for c in page.cells if notebook.grade_id(c) == "sdpa")
    assert [output["output_type"] for output in cell.outputs] == ["stream"]


def test_the_table_says_ignored_once():
    """Issue 25: "ignored: a file, not a notebook nor a folder: ignored"."""
    from tfcourse.batch.runner import table
    text = table([], ignored=[("notes.txt", "a file, not a notebook nor a folder: ignored")])
    assert text.count("ignored") == 1, text


def _course_with_a_gradebook(tmp_path):
    copy = _course_copy(tmp_path, "release", "solutions", "docs", "bench", "tests")
    (copy / "gradebook.db").write_bytes(b"")
    return copy


GRADEBOOK_PROBE = (
    "import sys; from tfcourse.course import load_course; "
    "from tfcourse.build.gradebook import gradebook_url; "
    "from tfcourse.build.points import points_disagreements; c = load_course(sys.argv[1]); "
    "print(gradebook_url(c), points_disagreements(c), sorted(m for m in "
    "('nbconvert', 'nbformat', 'nbgrader', 'torch') if m in sys.modules))")


def test_the_points_warning_of_tfcourse_grade_loads_no_notebook_library(tmp_path):
    """`tfcourse grade` first compares course.yaml's points with the notebooks' and the
    gradebook's: that read runs neither nbgrader_config.py (it imports nbgrader, nbconvert and
    torch: 8 to 30 s before the command's first line) nor nbformat, where the configuration names
    no db_url."""
    copy = _course_with_a_gradebook(tmp_path)
    said = subprocess.run([sys.executable, "-c", GRADEBOOK_PROBE, str(copy)],
                          capture_output=True, text=True, timeout=300, check=True).stdout
    assert said.strip() == f"sqlite:///{copy / 'gradebook.db'} [] []"


@pytest.mark.slow          # runs nbgrader_config.py: it imports nbgrader, nbconvert and torch
def test_a_db_url_in_nbgrader_config_is_still_read(tmp_path):
    copy = _course_with_a_gradebook(tmp_path)
    config = copy / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.CourseDirectory.db_url = 'sqlite:////none.db'\n")
    said = subprocess.run([sys.executable, "-c", GRADEBOOK_PROBE, str(copy)],
                          capture_output=True, text=True, timeout=300, check=True).stdout
    assert said.startswith("None [] [")          # /none.db does not exist: read, not guessed
