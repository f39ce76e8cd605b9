"""`tfcourse doctor`: whether another account (a student's) can run this environment.

`.ci/install` makes `.venv` from whatever Python is at hand, often one under a private home (a
pyenv under /root, mode 700): the instructor's commands work, and every student's get *Permission
denied*. The check names the folder that stops them."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tfcourse import doctor


@pytest.fixture
def public():
    """A folder every account may search (pytest's own tmp_path lies under a private one)."""
    root = Path(tempfile.mkdtemp(prefix="tfdoctor-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root)


def _environment(root, home_mode):
    """A home holding a Python, and a venv elsewhere whose bin/python links to it."""
    home = root / "home"
    (home / "bin").mkdir(parents=True)
    python = home / "bin" / "python3.11"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (home / "lib").mkdir()
    (home / "lib" / "os.py").write_text("")
    (home / "lib" / "os.py").chmod(0o644)
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(python)
    package = venv / "site" / "tfcourse"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for folder in (root, venv, venv / "bin", venv / "site", package, home / "bin", home / "lib"):
        folder.chmod(0o755)
    home.chmod(home_mode)
    return venv / "bin" / "python", {"tfcourse": package / "__init__.py",
                                     "the standard library": home / "lib" / "os.py"}


def test_a_python_under_a_private_home_is_named(public):
    python, packages = _environment(public, 0o700)
    found = doctor.findings(python, packages)
    problems = [line for ok, line in found if not ok]
    assert len(problems) == 2, found                 # the interpreter and its library
    assert f"{public / 'home'} is not searchable by other accounts" in problems[0], problems
    assert "the standard library" in problems[1], problems
    assert [ok for ok, line in found if "tfcourse" in line] == [True], found


def test_a_world_readable_environment_passes(public):
    python, packages = _environment(public, 0o755)
    assert all(ok for ok, _ in doctor.findings(python, packages)), \
        doctor.findings(python, packages)


def test_a_package_file_only_its_owner_reads_is_named(public):
    python, packages = _environment(public, 0o755)
    packages["tfcourse"].chmod(0o600)           # installed under umask 077
    found = dict((line.split(" ")[0], ok) for ok, line in doctor.findings(python, packages))
    assert found["tfcourse"] is False, found


def test_the_command_says_whether_students_can_run_it():
    done = subprocess.run([sys.executable, "-m", "tfcourse", "doctor"], capture_output=True,
                          text=True, timeout=120, env={**os.environ})
    assert done.returncode in (0, 1), done.stderr
    last = done.stdout.strip().splitlines()[-1]
    if done.returncode == 0:
        assert last == "other accounts (students) can run this environment", done.stdout
    else:
        assert "PROBLEM: " in done.stdout and "/opt/tfcourse" in last, done.stdout
