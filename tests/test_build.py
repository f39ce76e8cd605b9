"""release/, solutions/ and the helper modules are built from source/, and the release is clean."""
import ast
import json
import os
import shutil
import subprocess
import sys

import pytest

from tfcourse import notebook
from tfcourse.build.release import _compare_trees, check

from conftest import NOTEBOOK_OF, ROOT

BIN = os.path.dirname(sys.executable)


@pytest.mark.slow
def test_everything_built_is_up_to_date(course):
    assert check(course) == []


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
                        lambda course, release, solutions, lang, execute=True:
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
