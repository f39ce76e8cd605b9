"""What a student installs: the wheel carries the engine and the student library, never the
course's graders, reference or solutions, and needs none of the instructor's tools."""
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser

import pytest

from conftest import ROOT

INSTRUCTOR_ONLY = {"nbgrader", "jupyterlab", "nbclient", "pytest", "selenium"}


@pytest.mark.slow          # a pytest or python process of its own: seconds
def test_the_student_library_imports_none_of_the_instructors_tools():
    probe = ("import sys, tfcourse.student\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'nbgrader', 'nbclient', "
             "'jupyterlab', 'pytest', 'autograder', 'notebook'}))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300, cwd="/")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_wheel_holds_no_grader_and_needs_no_instructor_tool(tmp_path):
    # Built from a copy: setuptools writes build/ and tfcourse.egg-info into the folder it builds,
    # and an egg-info left in the course folder shadows the installed package's entry points.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", "editions"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                    str(source)], check=True, timeout=600, capture_output=True)
    (wheel,) = tmp_path.glob("tfcourse-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = Parser().parsestr(archive.read(next(n for n in names
                                                       if n.endswith("METADATA"))).decode())
    top = {name.split("/")[0] for name in names}
    assert top == {"tfcourse", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                   + ".dist-info"}
    assert not [name for name in names if "autograder/" in name or "source/" in name
                or "solutions/" in name or "standins" in name or "test_" in name]
    # the student library (the course's own checks ship with each release, from visible/), the
    # engine's data files and messages
    assert not [name for name in names if name.startswith("visible/")
                or name.endswith(("/layer_checks.py", "/sorting_checks.py"))]
    for needed in ("tfcourse/student/checking.py", "tfcourse/sandbox/keeper.py",
                   "tfcourse/submission/plugin.py", "tfcourse/batch/runner.py",
                   "tfcourse/locale/es.yaml",
                   "tfcourse/templates/report.html", "tfcourse/templates/feedback.css"):
        assert needed in names
    required = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert {r.split(">")[0].split("=")[0].strip().lower() for r in required} == {
        "torch", "matplotlib", "tqdm", "nbformat", "pyyaml"}
    instructor = [r.split(">")[0].strip() for r in metadata.get_all("Requires-Dist")
                  if 'extra == "instructor"' in r]
    # the instructor's tools, and the pages' (jinja2) and similarity's (copydetect)
    assert set(instructor) == {"pytest", "nbgrader", "jupyterlab", "nbclient", "jinja2",
                               "copydetect"}
    assert not INSTRUCTOR_ONLY & {r.split(">")[0].strip() for r in required}
