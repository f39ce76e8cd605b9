"""`tfcourse check NOTEBOOK`: a student's own run of the visible checks, before submitting."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, make_submission

# End to end: runs `tfcourse check` on whole notebooks.
pytestmark = pytest.mark.slow

TFCOURSE = Path(sys.executable).with_name("tfcourse")
GROUPS = ["sdpa", "mha", "masks"]          # 01-attention's test cells, in notebook order


def check(notebook: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(TFCOURSE), "check", str(notebook)], capture_output=True, text=True,
                          timeout=300)


def blocks(output: str) -> dict[str, str]:
    """grade_id -> its report block ('[FAIL] sdpa: ...' and the indented lines below it)."""
    found = {}
    for block in output.split("\n\n"):
        for group in GROUPS:
            if block.startswith("[") and f"] {group}: " in block.splitlines()[0]:
                found[group] = block
    return found


def test_released_stubs_fail_each_check_in_plain_words(tmp_path):
    notebook = tmp_path / "attention.ipynb"
    shutil.copy(ROOT / "release" / "01-attention" / "attention.ipynb", notebook)
    before = notebook.read_bytes()
    done = check(notebook)
    assert done.returncode == 1, done.stdout + done.stderr
    found = blocks(done.stdout)
    assert list(found) == GROUPS, done.stdout
    for group, block in found.items():
        assert block.startswith(f"[FAIL] {group}: check.{group}("), block
        assert "is not written yet: replace `raise NotImplementedError()`" in block, block
        assert "Traceback" not in block and "AssertionError" not in block, block
    assert "0 of 3 visible checks pass" in done.stdout
    assert notebook.read_bytes() == before, "tfcourse check must not change the student's file"


def test_solved_notebook_passes_every_check(tmp_path):
    notebook = tmp_path / "solved.ipynb"
    shutil.copy(ROOT / "solutions" / "01-attention" / "attention.ipynb", notebook)
    done = check(notebook)
    assert done.returncode == 0, done.stdout + done.stderr
    found = blocks(done.stdout)
    assert list(found) == GROUPS, done.stdout
    assert all(block.startswith("[PASS]") and "✓ " in block for block in found.values()), found
    assert "3 of 3 visible checks pass" in done.stdout
    assert "[ERROR]" not in done.stdout


def test_a_broken_answer_cell_is_named_and_only_its_check_fails(tmp_path):
    broken = "def causal_mask(T:\n    return None\n"     # the masks' cell: nothing uses it
    make_submission(tmp_path, "01-attention", answers={"masks-code": broken})
    done = check(tmp_path / "attention.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[ERROR] the cell that starts with `def causal_mask(T:` raised SyntaxError" in \
        done.stdout, done.stdout
    found = blocks(done.stdout)
    assert found["sdpa"].startswith("[PASS]") and found["mha"].startswith("[PASS]"), found
    assert found["masks"].startswith("[FAIL]"), found
    assert "2 of 3 visible checks pass" in done.stdout
