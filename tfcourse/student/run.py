"""`tfcourse check NOTEBOOK`: run a notebook as Jupyter would and report its visible checks.

The notebook is run in a fresh kernel in its own folder, on a copy (the file is not changed), as it
is saved on disk. Each test cell's outcome is reported: its ✓ lines when it passed, its message when
it did not. An answer or setup cell that raised is reported first, since every check after it fails
for that reason. Hidden checks are not run here; they run when the notebook is graded.

A check never starts another check. A cell whose code runs `tfcourse check` itself (the self-check
cell a student keeps in the notebook: `!tfcourse check attention.ipynb`, `%run -m tfcourse check`,
`subprocess.run([..., "-m", "tfcourse", "check", ...])`) is skipped and reported as skipped; and the
kernel a check starts carries TFCOURSE_CHECK_KERNEL in its environment, so that a `tfcourse check`
started from it anyway (by code this module did not recognise) refuses at once, with one line and
exit status 3, instead of running the notebook again in a kernel of its own, and so on without end.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

KERNEL_MARK = "TFCOURSE_CHECK_KERNEL"   # set in the kernel a check starts, to the notebook checked
REFUSED = 3                             # the exit status of a check started inside that kernel

# `tfcourse check` or `-m tfcourse check` on a command line, or "tfcourse", "check" in a list of
# arguments; only in code that starts a command (a `!` line, a magic, a function that runs one).
_CHECK_COMMAND = re.compile(r"""\btfcourse(?:[ \t]+|['"][ \t]*,\s*['"])check\b""")
_STARTS_A_COMMAND = re.compile(r"^\s*[!%]|\b(?:subprocess|Popen|system|popen|spawn\w*|exec[lvpe]*|"
                               r"getoutput|getstatusoutput|check_output|check_call|run_line_magic|"
                               r"run_cell_magic)\b", re.MULTILINE)


def _error(outputs) -> str | None:
    """The cell's error in plain words, or None. A failing visible check leaves an error output
    named CheckFailed (without raising: the notebook goes on), whose message is meant for the
    student and stands alone."""
    for output in outputs:
        if output.get("output_type") == "error":
            name, value = output.get("ename"), output.get("evalue")
            return value if name in ("CheckFailed", "CheckNotRun") and value else \
                f"{name}: {value}"
    return None


def _not_checked(outputs) -> bool:
    """Whether the cell's check could not run (CheckNotRun): reported as such, never a pass."""
    return any(output.get("output_type") == "error" and output.get("ename") == "CheckNotRun"
               for output in outputs)


def _printed(outputs) -> list[str]:
    return [line for output in outputs
            if output.get("output_type") == "stream" and output.get("name") == "stdout"
            for line in output.get("text", "").splitlines() if line.strip()]


def _first_line(cell) -> str:
    from .. import notebook

    lines = [line for line in notebook.text(cell).splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def check_command(source: str) -> str | None:
    """The line of a code cell that runs `tfcourse check` (comment lines aside), or None."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    found = _CHECK_COMMAND.search(code)
    if not found or not _STARTS_A_COMMAND.search(code):
        return None
    start = code.rfind("\n", 0, found.start()) + 1
    return code[start:].split("\n", 1)[0].strip()


def run_visible_checks(path: Path, timeout: int = 600) -> int:
    """Run the notebook and print each visible check; 0 when all pass, 1 otherwise, 2 if
    unreadable, 3 (REFUSED) when started inside the kernel of another check."""
    if os.environ.get(KERNEL_MARK):             # at once: nothing imported for it
        print(f"tfcourse check: not run here: this is the kernel of the check of "
              f"{os.environ[KERNEL_MARK]}, and a check does not start another one")
        return REFUSED
    from ..i18n import render
    needs_kernel = render("tfcourse check runs the notebook in a Jupyter kernel: run it where "
                          "JupyterLab is installed, or pip install nbclient ipykernel", {}, "en")
    if importlib.util.find_spec("nbclient") is None:
        print(needs_kernel)
        return 2
    try:            # a file that is not there is said at once, before nbformat and nbclient load
        path.open("rb").close()
        import nbformat
        nb = nbformat.read(str(path), as_version=4)
    except (OSError, ValueError) as error:
        print(render("cannot read {path}: {error}", {"path": path, "error": error}, "en"))
        return 2
    try:        # a Jupyter kernel runs the notebook: nbclient comes with JupyterLab
        from nbclient import NotebookClient
        from nbclient.exceptions import CellTimeoutError, DeadKernelError
    except ImportError:
        print(needs_kernel)
        return 2
    lang = (nb.metadata.get("tfcourse") or {}).get("lang", "en")

    def say(template: str, **params) -> str:
        return render(template, params, lang)

    tests, skipped = _prepare(nb)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    _announce(nb, path, say)
    stopped = None
    try:
        # The kernel's own log (transport warnings) is noise to a student; outputs come by messages.
        client.execute(stderr=subprocess.DEVNULL,
                       env={**os.environ, KERNEL_MARK: str(path.resolve())})
    except CellTimeoutError:
        stopped = say("a cell ran longer than {seconds} s, so the run stopped there",
                      seconds=timeout)
    except DeadKernelError:
        stopped = say("the kernel died (out of memory?), so the run stopped there")
    return _report(nb, tests, skipped, stopped, say)


def _prepare(nb) -> tuple[list, list[str]]:
    """The notebook as a fresh run sees it: no saved outputs, no hidden tests, and no cell that
    starts another check. Returns its test cells and the check commands left out."""
    from .. import notebook

    for cell in nb.cells:               # saved outputs would pass for cells a stopped run missed
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    tests = [cell for cell in nb.cells if notebook.is_test(cell)]
    for cell in tests:
        cell.source = notebook.strip_hidden_tests(cell.source)
    skipped = []
    for cell in nb.cells:
        command = check_command(cell.source) if cell.cell_type == "code" else None
        if command is not None:
            skipped.append(command)
            cell.source = ""            # nbclient runs no cell without code
    return tests, skipped


def _announce(nb, path: Path, say) -> None:
    from .. import notebook

    if notebook.cells_with_role(nb, "recipe"):
        print(say("running {path} as it is saved on disk (its training cells too, so this can "
                  "take a few minutes)...", path=path))
    else:
        print(say("running {path} as it is saved on disk...", path=path))


def _report(nb, tests: list, skipped: list[str], stopped: str | None, say) -> int:
    """Print what the run did: cells skipped, answer cells that raised, each visible check."""
    from .. import notebook

    for line in skipped:
        print(f"\n[{say('SKIPPED')}] " + say("the cell with `{line}` was not run: a check does not "
                                               "start another check", line=line))
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
        elif _not_checked(outputs):
            mark, lines = say("NOT CHECKED"), [error]
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
