"""The hub recipe's first step (docs/hub/install.sh): the users' environment is one every user can
run, checked as an account with no rights of its own; and torch is the CPU build."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT

INSTALL = ROOT / "docs" / "hub" / "install.sh"
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="checks as `nobody`: needs root and setpriv")


@pytest.fixture
def open_dir():
    """A folder every user may enter (pytest's own tmp_path is under a private one)."""
    folder = Path(tempfile.mkdtemp(prefix="tfhub-recipe-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _check(env: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(INSTALL), "--check"], capture_output=True, text=True,
                          env={**os.environ, "TFCOURSE_HUB_ENV": str(env)}, timeout=300)


@needs_root
def test_an_environment_made_from_a_private_python_is_refused(open_dir):
    """Issue 25: with Python in a private home (pyenv under /root, mode 700) the recipe's venv
    could not be run by students, whose servers then did not start."""
    private = open_dir / "private"
    private.mkdir(mode=0o700)
    os.symlink(os.path.realpath(sys.executable), private / "python3")
    env = open_dir / "env"
    subprocess.run([str(private / "python3"), "-m", "venv", "--without-pip", str(env)],
                   check=True, timeout=300)
    for name in ("python", "python3"):                   # as a venv made from that path points
        (env / "bin" / name).unlink()
        os.symlink(private / "python3", env / "bin" / name)
    done = _check(env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "other users cannot run" in done.stderr and "PYTHON=/usr/bin/python3" in done.stderr


@needs_root
def test_an_environment_without_torch_is_refused(open_dir):
    env = open_dir / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(env)], check=True,
                   timeout=300)
    done = _check(env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not import torch and tfcourse" in done.stderr


def test_the_recipe_installs_torchs_cpu_build_with_the_script():
    text = " ".join((ROOT / "docs" / "jupyterhub.md").read_text().split())
    assert "bash docs/hub/install.sh" in text and "install.sh --check" in text
    script = INSTALL.read_text()
    assert "https://download.pytorch.org/whl/cpu" in script
    assert script.index("--index-url") < script.index("[instructor,hub]")   # torch first
