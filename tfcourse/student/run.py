"""`tfcourse check NOTEBOOK`: run a notebook as Jupyter would and report its visible checks.

The notebook is run in a fresh kernel in its own folder, on a copy (the file is not changed). Each
test cell's outcome is reported: its ✓ lines when it passed, its message when it did not. Hidden
checks are not run here; they run when the notebook is graded.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from .. import notebook

_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)


def _text(outputs) -> tuple[bool, str]:
    passed, lines = True, []
    for output in outputs:
        if output.get("output_type") == "error":
            passed = False
            lines.append(f"{output.get('ename')}: {output.get('evalue')}")
        elif output.get("output_type") == "stream" and output.get("name") == "stdout":
            lines += [line for line in output.get("text", "").splitlines() if line.strip()]
    return passed, "\n".join(lines)


def run_visible_checks(path: Path, timeout: int = 600) -> int:
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and notebook.is_test(cell):
            cell.source = _HIDDEN.sub("", cell.source)
    client = NotebookClient(nb, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(path.resolve().parent)}})
    print(f"running {path} (its training cells too, so this can take a minute or two)...")
    client.execute()
    failures = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or not notebook.is_test(cell):
            continue
        passed, text = _text(cell.get("outputs", []))
        failures += not passed
        mark = "PASS" if passed else "FAIL"
        print(f"\n[{mark}] {notebook.grade_id(cell)}")
        for line in text.splitlines():
            print(f"    {line}")
    total = sum(1 for c in nb.cells if c.cell_type == "code" and notebook.is_test(c))
    print(f"\n{total - failures} of {total} visible checks pass. The hidden checks test more when "
          f"you submit.")
    return 1 if failures else 0
