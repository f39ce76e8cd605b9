"""The version is declared once, as tfcourse.__version__: pyproject.toml reads it, and
`tfcourse --version` prints it."""
import subprocess
import sys
from pathlib import Path

import pytest

import tfcourse
from tfcourse import cli

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_takes_its_version_from_the_package():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tfcourse.__version__"}


def test_the_version_is_a_release_number():
    parts = tfcourse.__version__.split(".")
    assert len(parts) == 3 and all(part.isdigit() for part in parts)


def test_tfcourse_version_prints_it(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == f"tfcourse {tfcourse.__version__}\n"


def test_the_command_prints_it_without_a_course(tmp_path):
    said = subprocess.run([sys.executable, "-m", "tfcourse", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == f"tfcourse {tfcourse.__version__}"
