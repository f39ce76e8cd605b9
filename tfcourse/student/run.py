"""`tfcourse check NOTEBOOK`: run a notebook as Jupyter would and report its visible checks.

The notebook is run in a fresh kernel in its own folder, on a copy (the file is not changed), as it
is saved on disk. Each test cell's outcome is reported: its ✓ lines when it passed, its message when
it did not. An answer or setup cell that raised is reported first, since every check after it fails
for that reason. Hidden checks are not run here; they run when the notebook is graded.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat

from .. import notebook
from ..i18n import render


def _error(outputs) -> str | None:
    """The cell's error in plain words, or None. A visible check raises CheckFailed with a message
    meant for the student, so that message stands alone."""
    for output in outputs:
        if output.get("output_type") == "error":
            name, value = output.get("ename"), output.get("evalue")
            return value if name == "CheckFailed" and value else f"{name}: {value}"
    return None


def _printed(outputs) -> list[str]:
    return [line for output in outputs
            if output.get("output_type") == "stream" and output.get("name") == "stdout"
            for line in output.get("text", "").splitlines() if line.strip()]


def _first_line(cell) -> str:
    lines = [line for line in notebook.text(cell).splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def run_visible_checks(path: Path, timeout: int = 600) -> int:
    """Run the notebook and print each visible check; 0 when all pass, 1 otherwise, 2 if unreadable."""
    try:        # a Jupyter kernel runs the notebook: nbclient comes with JupyterLab
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
    except ImportError:
        print(render("tfcourse check runs the notebook in a Jupyter kernel: run it where "
                     "JupyterLab is installed, or pip install nbclient ipykernel", {}, "en"))
        return 2
    try:
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, ValueError) as error:
        print(render("cannot read {path}: {error}", {"path": path, "error": error}, "en"))
        return 2
    lang = (nb.metadata.get("tfcourse") or {}).get("lang", "en")

    def say(template: str, **params) -> str:
        return render(template, params, lang)

    for cell in nb.cells:               # saved outputs would pass for cells a stopped run missed
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    tests = [cell for cell in nb.cells if notebook.is_test(cell)]
    for cell in tests:
        cell.source = notebook.strip_hidden_tests(cell.source)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    print(say("running {path} as it is saved on disk (its training cells too, so this can take a "
              "minute or two)...", path=path))
    stopped = None
    try:
        # The kernel's own log (transport warnings) is noise to a student; outputs come by messages.
        client.execute(stderr=subprocess.DEVNULL)
    except CellTimeoutError:
        stopped = say("a cell ran longer than {seconds} s, so the run stopped there", seconds=timeout)
    except DeadKernelError:
        stopped = say("the kernel died (out of memory?), so the run stopped there")

    for cell in nb.cells:
        error = _error(cell.get("outputs", []))
        answer_or_setup = notebook.is_solution(cell) or notebook.role(cell) in ("setup", "language")
        if error and answer_or_setup and not error.startswith("KeyboardInterrupt"):  # timed out
            print(f"\n[{say('ERROR')}] " + say("the cell that starts with `{line}` raised {error}",
                                               line=_first_line(cell), error=error))
    failures = 0
    for cell in tests:
        outputs = cell.get("outputs", [])
        error = _error(outputs)
        if cell.get("execution_count") is None:
            mark, lines = say("NOT RUN"), []
        elif error:
            mark, lines = say("FAIL"), [error]
        else:
            mark, lines = say("PASS"), _printed(outputs)
        failures += mark != say("PASS")
        print(f"\n[{mark}] {notebook.grade_id(cell)}: {_first_line(cell)}")
        for line in "\n".join(lines).splitlines():
            print(f"    {line}")
    if stopped:
        print("\n" + stopped)
    print("\n" + say("{passed} of {total} visible checks pass. The hidden checks test more when "
                     "you submit.", passed=len(tests) - failures, total=len(tests)))
    return 1 if failures else 0
