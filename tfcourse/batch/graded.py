"""What grading wrote under its --out folder, found one way for every command that reads it.

`tfcourse grade` writes a submission's results to `OUT/<submission>/results.json`, and those of
nbgrader's `submitted/<student>/<assignment>/` layout to `OUT/<student>/<assignment>/results.json`.
`results_files` finds both: the report and anything else that reads graded results goes through
it.
"""
from __future__ import annotations

import os
from pathlib import Path


RESULTS = "results.json"
RESULTS_MB = 8          # a results.json is a few KB; a larger file is not one grading wrote


def _folders(folder: Path) -> list[Path]:
    """The folders in `folder`, by name: not hidden, not links (a results folder holds neither)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return []
    return [Path(entry.path) for entry in entries
            if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False)]


def results_files(folder: Path) -> list[tuple[str, Path]]:
    """(name, path) of each results.json grading wrote under `folder`, in either layout:
    `<submission>/results.json` (named "submission") and nbgrader's
    `<student>/<assignment>/results.json` (named "student/assignment"), sorted by name."""
    found = []
    for first in _folders(Path(folder)):
        if (first / RESULTS).is_file():
            found.append((first.name, first / RESULTS))
        for second in _folders(first):
            if (second / RESULTS).is_file():
                found.append((f"{first.name}/{second.name}", second / RESULTS))
    return sorted(found)


def layouts(names: list[str]) -> list[str]:
    """The layouts of these results' names, as `OUT/...` paths say them."""
    shapes = {"<student>/<assignment>" if "/" in name else "<submission>" for name in names}
    return sorted(shapes, reverse=True) or ["<submission>"]
