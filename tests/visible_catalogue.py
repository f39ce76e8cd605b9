"""Which bugs of the catalogue the visible checks catch, and that they pass every correct style.

The visible checks run in the student's kernel; here each submission (a catalogue bug, an
alternative, the solution) runs in-process as a kernel would run it: its setup, answer and added
cells in order, then each test cell's visible part, with the code that ran given to the rule check.
A bug is caught when at least one visible check fails. `python tests/visible_catalogue.py` prints
the rates per notebook (docs/instructor-guide.md quotes them); tests/test_visible_catalogue.py
holds them to it.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
sys.path.append(str(HERE.parent))         # after PYTHONPATH: a tfcourse given there is measured

from catalogue import every_bug  # noqa: E402
from tfcourse import notebook  # noqa: E402
from tfcourse.student import checking as checks  # noqa: E402

BUGS = every_bug()
HELPERS = ("attention_parts", "layer_parts")
SKIPPED_CHECKS = ("check.trained(",)     # needs a trained model: not a catalogue bug's point


def _cells(folder: Path, assignment: str) -> list[tuple[str, str]]:
    """(kind, code) of the notebook's cells a kernel runs for the checks, in order."""
    from conftest import NOTEBOOK_OF
    nb = nbformat.read(str(folder / NOTEBOOK_OF[assignment]), as_version=4)
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if notebook.is_test(cell):
            code = notebook.strip_hidden_tests(cell.source)
            if not any(skipped in code for skipped in SKIPPED_CHECKS):
                cells.append(("test", code))
        elif notebook.role(cell) in ("setup", "language") or notebook.is_solution(cell) or \
                not notebook.nbgrader(cell):       # the course's set-up, answers, added cells
            cells.append(("code", cell.source))
    return cells


def failing_checks(folder: Path, assignment: str) -> list[str]:
    """The visible checks that fail on the submission in `folder` (their first lines)."""
    for name in HELPERS:
        sys.modules.pop(name, None)
    numbers = HERE.parent / "source" / assignment / "visible_checks.json"
    if numbers.exists() and not (folder / numbers.name).exists():    # as the release has it
        (folder / numbers.name).write_text(numbers.read_text())
    sys.path.insert(0, str(folder))
    here = os.getcwd()
    os.chdir(folder)
    namespace = {"__name__": "__main__"}
    ran, failed = [], []
    raising = getattr(checks, "raising", contextlib.nullcontext)
    try:
        for kind, code in _cells(folder, assignment):
            ran.append(code)
            if hasattr(checks, "use_sources"):
                checks.use_sources(ran)
            try:
                with contextlib.redirect_stdout(io.StringIO()), raising():
                    exec(compile(code, "<cell>", "exec"), namespace)
            except Exception as error:          # noqa: BLE001 - a failing check or cell
                if kind == "test":
                    failed.append(code.strip().splitlines()[0] + f": {error}"[:200])
    finally:
        os.chdir(here)
        sys.path.remove(str(folder))
        if hasattr(checks, "use_sources"):
            checks.use_sources(None)
    return failed


def measure(bugs=BUGS):
    from test_catalogue import build
    caught: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for bug in bugs:
            folder = build(Path(scratch) / bug.name, bug)
            caught.setdefault(bug.assignment, []).append((bug.name,
                                                          failing_checks(folder, bug.assignment)))
    return caught


def false_alarms() -> dict[str, list[str]]:
    """The visible checks that fail on a correct submission: the solution, and every style in
    alternatives.py (name -> failing checks; empty lists when none fails)."""
    from alternatives import ALTERNATIVES
    from conftest import make_submission
    from test_alternatives import build as build_alternative
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for assignment in ("01-attention", "02-layers", "03-sorting"):
            folder = make_submission(Path(scratch) / assignment, assignment)
            out[f"solution {assignment}"] = failing_checks(folder, assignment)
        for alternative in ALTERNATIVES:
            folder = build_alternative(Path(scratch) / alternative.name, alternative)
            out[alternative.name] = failing_checks(folder, alternative.assignment)
    return out


def main() -> None:
    if "--correct" in sys.argv:
        for name, failed in false_alarms().items():
            print(f"{'FAILS' if failed else 'passes'} {name}" + (f": {failed}" if failed else ""))
        return
    for assignment, results in measure().items():
        hits = [name for name, failed in results if failed]
        print(f"{assignment}: {len(hits)} of {len(results)} bugs caught")
        for name, failed in results:
            print(f"    {'caught' if failed else 'MISSED'} {name}"
                  + (f": {failed[0]}" if "-v" in sys.argv and failed else ""))


if __name__ == "__main__":
    main()
