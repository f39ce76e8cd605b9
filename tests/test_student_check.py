"""`tfcourse check NOTEBOOK`: a student's own run of the visible checks, before submitting."""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
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


# The instructor guide's self-check cell, as a student keeps it in the notebook it checks.
SELF_CHECK = "import sys\n!{sys.executable} -m tfcourse check attention.ipynb"
# The same, spelt so that no cell scan could see it: the check started in the kernel must refuse.
HIDDEN_SELF_CHECK = """import subprocess, sys
args = [sys.executable, "-m", "tf" + "course", "che" + "ck", "attention.ipynb"]
done = subprocess.run(args, capture_output=True, text=True, timeout=120)
open("inner.txt", "w").write(f"{done.returncode}\\n{done.stdout}{done.stderr}")
"""


def marked(marker: str) -> list[int]:
    """Processes other than this one whose environment holds `marker`: all that a command given
    that environment started, kernels and their children included, still running."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if marker.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_self_check_cell_is_skipped_and_no_check_starts_another(tmp_path):
    assert SELF_CHECK in (ROOT / "docs" / "instructor-guide.md").read_text()   # the guide's cell
    marker = f"TFCOURSE_TEST_SELF_CHECK={secrets.token_hex(8)}"
    notebook = tmp_path / "attention.ipynb"
    nb = nbformat.read(str(ROOT / "release" / "01-attention" / "attention.ipynb"), as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell(SELF_CHECK))
    nb.cells.insert(2, nbformat.v4.new_code_cell(HIDDEN_SELF_CHECK))
    nbformat.write(nb, str(notebook))
    name, value = marker.split("=")
    try:
        done = subprocess.run([str(TFCOURSE), "check", str(notebook)], capture_output=True,
                              text=True, timeout=300, env={**os.environ, name: value})
        deadline = time.monotonic() + 20             # the kernel is shut down as the run ends
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not marked(marker), "processes left running after tfcourse check"
    finally:
        for pid in marked(marker):                   # what the run left, should the test fail
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert done.returncode == 1, done.stdout + done.stderr      # the stubs fail their checks
    assert "[SKIPPED] the cell with `!{sys.executable} -m tfcourse check attention.ipynb` was " \
        "not run: a check does not start another check" in done.stdout, done.stdout
    assert done.stdout.count("[SKIPPED]") == 1, done.stdout
    assert list(blocks(done.stdout)) == GROUPS, done.stdout
    # The check the kernel started anyway refused at once, in one line, with its own status.
    status, said = (tmp_path / "inner.txt").read_text().split("\n", 1)
    assert status == "3", said
    assert said.strip().splitlines() == [
        f"tfcourse check: not run here: this is the kernel of the check of {notebook.resolve()}, "
        f"and a check does not start another one"], said


# -- issue 25, item 10: small things ------------------------------------------------------------
def _modules_after(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    code = ("import sys\nfrom tfcourse.cli import main\ntry:\n    status = main(%r)\n"
            "except SystemExit as stop:\n    status = stop.code\n"
            "print('torch imported:', 'torch' in sys.modules, 'status:', status)" % argv)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


@pytest.mark.parametrize("argv", [["check", "x.ipynb"], ["--help"], ["check", "--help"]])
def test_refusals_and_help_answer_without_loading_torch(argv):
    """`tfcourse check` spent 7 s importing (torch, the grader, the hub) before it could refuse."""
    done = _modules_after(argv, {"TFCOURSE_CHECK_KERNEL": "outer.ipynb"})
    assert "torch imported: False" in done.stdout, done.stdout + done.stderr


def test_the_notebook_without_training_is_not_said_to_take_minutes(tmp_path):
    """Issue 25: `tfcourse check` warned "a minute or two" for a notebook that takes 14 s."""
    notebook = tmp_path / "attention.ipynb"
    shutil.copy(ROOT / "solutions" / "01-attention" / "attention.ipynb", notebook)
    done = check(notebook)
    assert "running" in done.stdout and "minute" not in done.stdout, done.stdout


# -- issue 25, items 1-2: the visible checks agree with the grade, and Run All goes on ----------
READY_MADE = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
              "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None "
              "else ~mask)\n"
              "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
              "    if mask is not None:\n"
              "        scores = scores.masked_fill(mask, float('-inf'))\n"
              "    return out, scores.softmax(-1)\n")
SPLIT = "x.view(x.shape[0], x.shape[1], self.num_heads, self.d_k).transpose(1, 2)"


def _rule_break_and_wrong_split(folder: Path) -> Path:
    from conftest import replace_in, solution_cells
    mha = replace_in(solution_cells("01-attention")["mha-code"], SPLIT,
                     "x.view(x.shape[0], self.num_heads, x.shape[1], self.d_k)")
    make_submission(folder, "01-attention", answers={"sdpa-code": READY_MADE, "mha-code": mha})
    numbers = ROOT / "source" / "01-attention" / "visible_checks.json"   # as the release has it
    (folder / numbers.name).write_text(numbers.read_text())
    return folder / "attention.ipynb"


def test_run_all_reaches_the_last_cell_past_failing_checks_and_validate_sees_them(tmp_path):
    from nbclient import NotebookClient
    from tfcourse import notebook as nbtools
    path = _rule_break_and_wrong_split(tmp_path)
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if nbtools.is_test(cell):
            cell.source = nbtools.strip_hidden_tests(cell.source)
    # allow_errors=False stops where JupyterLab's Run All stops: at a cell whose run failed
    NotebookClient(nb, timeout=300, allow_errors=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code[-1].execution_count is not None, "Run All did not reach the last cell"
    errors = {nbtools.grade_id(cell): [o for o in cell.outputs if o.output_type == "error"]
              for cell in nb.cells if nbtools.is_test(cell)}
    assert [o.ename for o in errors["sdpa"]] == ["CheckFailed"]
    assert "torch.nn.functional.scaled_dot_product_attention" in errors["sdpa"][0].evalue
    assert "course's rules do not allow this" in errors["sdpa"][0].evalue
    assert "transpose" in errors["mha"][0].evalue
    assert errors["masks"] == []
    done = check(path)                       # `tfcourse check` reports both, in plain words
    found = blocks(done.stdout)
    assert done.returncode == 1 and found["masks"].startswith("[PASS]"), done.stdout
    assert found["sdpa"].startswith("[FAIL]") and "course's rules" in found["sdpa"], done.stdout
    assert found["mha"].startswith("[FAIL]") and "transpose" in found["mha"], done.stdout
    validate = subprocess.run([str(TFCOURSE.with_name("nbgrader")), "validate", str(path)],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert "VALIDATION FAILED" in validate.stdout + validate.stderr, validate.stdout


# -- the notebook alone is enough: its visible checks travel inside it -----------------------------
@pytest.mark.parametrize("beside", [True, False], ids=["with-json", "notebook-alone"])
def test_a_released_notebook_checks_as_strictly_without_the_json_beside_it(tmp_path, beside):
    """Downloaded alone, moved, or copied by a set-up that takes only the notebook, a released
    notebook ran weaker checks: [PASS] sdpa for an attention that calls torch's, [PASS] mha for
    heads split without a transpose. Its metadata now carries the checks and their numbers."""
    made = _rule_break_and_wrong_split(tmp_path / "made")
    folder = tmp_path / "student"
    folder.mkdir()
    shutil.copy(made, folder / "attention.ipynb")              # the notebook, and nothing else
    if beside:
        shutil.copy(made.with_name("visible_checks.json"), folder / "visible_checks.json")
    done = check(folder / "attention.ipynb")
    found = blocks(done.stdout)
    assert done.returncode == 1 and found["masks"].startswith("[PASS]"), done.stdout
    assert found["sdpa"].startswith("[FAIL]") and "course's rules" in found["sdpa"], done.stdout
    assert found["mha"].startswith("[FAIL]") and "transpose" in found["mha"], done.stdout


def test_a_notebook_without_its_visible_checks_says_which_could_not_run(tmp_path):
    """A notebook that carries no checks (its metadata stripped, no json beside it) passes none:
    each check says it could not run, and why."""
    notebook = tmp_path / "attention.ipynb"
    nb = nbformat.read(str(ROOT / "solutions" / "01-attention" / "attention.ipynb"), as_version=4)
    nb.metadata["tfcourse"].pop("visible_checks")
    nbformat.write(nb, str(notebook))
    done = check(notebook)
    found = blocks(done.stdout)
    assert done.returncode == 1 and list(found) == GROUPS, done.stdout
    for group, block in found.items():
        assert block.startswith(f"[NOT CHECKED] {group}: "), block
        assert f"check.{group} could not run: this notebook's visible checks were not found" \
            in block, block
    assert "PASS" not in done.stdout.replace("visible checks pass", ""), done.stdout


def _error_sections(validated: str) -> list[str]:
    """The text under each "The error was:" of `nbgrader validate`'s report, one string each."""
    sections = []
    for block in validated.split("The error was:")[1:]:
        lines = block.split("=" * 20)[0].strip().splitlines()
        sections.append(lines)
    return sections


def test_nbgrader_validate_shows_a_visible_checks_whole_message(tmp_path):
    """`nbgrader validate` (the notebook's Validate button) cut each check's message at about 80
    characters (each traceback line is cut at its width, 90, less 3), so the hint, which comes
    last, was lost; `tfcourse check` shows it whole. The message now comes in lines that fit."""
    import math as _math

    import torch
    from torch import nn

    from conftest import replace_in, solution_cells, visible_checks
    path = _rule_break_and_wrong_split(tmp_path)
    mha = replace_in(solution_cells("01-attention")["mha-code"], SPLIT,
                     "x.view(x.shape[0], self.num_heads, x.shape[1], self.d_k)")
    namespace = {"torch": torch, "nn": nn, "math": _math, "F": torch.nn.functional}
    exec(solution_cells("01-attention")["sdpa-code"] + "\n" + mha, namespace)
    checks = visible_checks()
    checks.use_sources([])
    os.chdir(path.parent)
    try:
        with checks.raising(), pytest.raises(checks.CheckFailed) as failed:
            checks.mha(namespace["MultiHeadAttention"])
    finally:
        os.chdir(ROOT)
        checks.use_sources(None)
    message = " ".join(str(failed.value).split())
    assert len(message) > 120, message             # long enough to have been cut
    validate = subprocess.run([str(TFCOURSE.with_name("nbgrader")), "validate", str(path)],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    sections = _error_sections(validate.stdout)
    assert sections, validate.stdout + validate.stderr
    shown = [" ".join(" ".join(lines).split()) for lines in sections]
    assert any(message in text for text in shown), (message, validate.stdout)
    for lines in sections:
        assert not any(line.rstrip().endswith("...") for line in lines), validate.stdout
