"""The Gradescope bundle, run the way Gradescope runs it, in a temporary /autograder.

setup.sh needs the network and root's apt, so it is only syntax-checked here; run_autograder runs
for real, with this project's interpreter standing in for the one setup.sh installs.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest
import yaml

from conftest import ROOT, lost

from tfcourse.adapters.gradescope import FAILURE, build_bundle

# End to end: builds the bundles and runs Gradescope's run_autograder.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundles(course, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundles")
    return {assignment: build_bundle(course, assignment, folder / f"{assignment}.zip")
            for assignment in ("01-attention", "02-layers")}


def gradescope(bundle, tmp_path, *notebooks, python=sys.executable, edit=None):
    """Unzip `bundle` as Gradescope does, put `notebooks` in the submission, call `edit(source)`,
    run run_autograder; returns (results, the simulated /autograder)."""
    root = tmp_path / "autograder"
    source = root / "source"
    with zipfile.ZipFile(bundle) as archive:
        for info in archive.infolist():
            path = archive.extract(info, source)
            os.chmod(path, info.external_attr >> 16 & 0o777)      # as unzip keeps the modes
    shutil.copy(source / "run_autograder", root / "run_autograder")   # done at image build time
    (root / "submission").mkdir()
    for notebook, name in notebooks:
        shutil.copy(notebook, root / "submission" / name)
    if edit:
        edit(source)
    environment = {**os.environ, "TFCOURSE_GRADESCOPE_ROOT": str(root), "TFCOURSE_PYTHON": python}
    finished = subprocess.run([str(root / "run_autograder")], cwd=root, env=environment,
                              capture_output=True, text=True, timeout=400)
    assert finished.returncode == 0, finished.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    return results, root


def test_bundle_holds_what_gradescope_needs(course, bundles, tmp_path):
    with zipfile.ZipFile(bundles["02-layers"]) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        for script in ("setup.sh", "run_autograder"):
            assert infos[script].external_attr >> 16 & 0o111, f"{script} is not executable"
            (tmp_path / script).write_bytes(archive.read(script))
            subprocess.run(["bash", "-n", str(tmp_path / script)], check=True)
        setup = archive.read("setup.sh").decode()
        bundled = yaml.safe_load(archive.read("course.yaml"))
    # A Gradescope container usually has no user namespaces: the bundle accepts a plain process
    # as nobody there; the rest of course.yaml is as written.
    assert bundled["sandbox"]["accept_weaker"] == "process"
    assert {k: v for k, v in bundled.items() if k != "sandbox"} == {
        k: v for k, v in course.raw.items() if k != "sandbox"}
    for name in ("tfcourse/adapters/gradescope.py", "autograder/test_layers.py", "tfcourse/cli.py",
                 "course.yaml", "pyproject.toml", "source/02-layers/layers.ipynb",
                 "source/01-attention/attention.ipynb"):       # 02 builds on 01's reference
        assert name in infos
    assert not any(name.startswith(("source/03-sorting", "solutions/", "release/", "tests/"))
                   or "__pycache__" in name for name in infos)
    assert "download.pytorch.org/whl/cpu" in setup and "torch==" in setup
    again = build_bundle(course, "02-layers", tmp_path / "again.zip")
    assert again.read_bytes() == bundles["02-layers"].read_bytes()      # reproducible


@pytest.mark.parametrize("assignment", ["01-attention", "02-layers"])
def test_solution_gets_full_marks(bundles, tmp_path, assignment):
    folder = ROOT / "solutions" / assignment
    notebook = next(folder.glob("*.ipynb"))
    results, root = gradescope(bundles[assignment], tmp_path, (notebook, notebook.name))
    assert results["score"] == results["max_score"] > 0, json.dumps(results, indent=1)[:3000]
    assert not lost(results)
    # The reference solution in the bundle is root's alone while student code runs.
    assert stat.S_IMODE((root / "source").stat().st_mode) & 0o077 == 0
    for path in (root / "source" / "source").rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_stub_under_another_name_gets_nothing(bundles, tmp_path):
    stub = ROOT / "release" / "01-attention" / "attention.ipynb"
    results, _ = gradescope(bundles["01-attention"], tmp_path, (stub, "attention (1).ipynb"))
    assert results["score"] == 0 and results["max_score"] == 14
    assert results["tests"] and all("not written yet" in t["output"] for t in results["tests"])


def test_empty_submission_says_what_to_upload(course, bundles, tmp_path):
    results, _ = gradescope(bundles["01-attention"], tmp_path)
    assert results["score"] == 0 and results["max_score"] == 14
    assert "no notebook was submitted: upload attention.ipynb" in results["output"]
    assert [t["number"] for t in results["tests"]] == course.assignment("01-attention").test_ids()
    assert all(t["score"] == 0 for t in results["tests"])


def test_results_are_written_when_python_cannot_start(bundles, tmp_path):
    notebook = ROOT / "solutions" / "01-attention" / "attention.ipynb"
    results, _ = gradescope(bundles["01-attention"], tmp_path, (notebook, notebook.name),
                            python=str(tmp_path / "no-such-python"))
    assert results["score"] == 0
    assert results["output"] == FAILURE


def test_results_are_written_when_the_grader_fails(bundles, tmp_path):
    def break_course(source):
        (source / "course.yaml").write_text("id: [", encoding="utf-8")

    notebook = ROOT / "solutions" / "01-attention" / "attention.ipynb"
    results, _ = gradescope(bundles["01-attention"], tmp_path, (notebook, notebook.name),
                            edit=break_course)
    assert results["score"] == 0
    assert results["output"] == FAILURE
    assert "course.yaml" in results["extra_data"]["grader_error"]
