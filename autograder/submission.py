"""Reading a student's notebook into the code the grader runs, whatever state the file is in.

The source notebook says what each cell is. From the submission the grader takes the student's
solution cells and any cells the student added; the course's own cells (imports, recipe) always come
from the source, as nbgrader restores locked cells; test cells never come from the student. Every
repair is noted in words a student understands, and nothing in the input file is changed.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse import notebook
from tfcourse.course import Course

from .report import Note


@dataclass
class Cell:
    """One piece of code to run in the student's process."""
    label: str          # what a student recognises: a grade id, or "cell 7"
    source: str
    from_student: bool = True


@dataclass
class Program:
    cells: list[Cell]
    notes: list[Note]
    readable: bool = True              # False: nothing in the file could be graded
    solution_ids: set[str] = field(default_factory=set)


# -- reading the file ----------------------------------------------------------------------------
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(_STRING + rb"|[\[\]]")
_OUTPUTS_KEY = re.compile(rb'"outputs"\s*:\s*\[')


def strip_outputs(data: bytes) -> bytes:
    """Drop every `"outputs": [...]` array from notebook JSON without parsing it whole."""
    pieces, position = [], 0
    while True:
        found = _OUTPUTS_KEY.search(data, position)
        if not found:
            break
        depth = 1
        end = found.end()
        for token in _TOKEN.finditer(data, found.end()):
            if token.group() == b"[":
                depth += 1
            elif token.group() == b"]":
                depth -= 1
            if depth == 0:
                end = token.end()
                break
        else:
            return data                      # unbalanced: leave it to the JSON parser to complain
        pieces += [data[position:found.start()], b'"outputs": []']
        position = end
    return b"".join(pieces) + data[position:]


def read_notebook(path: Path, size_limit_mb: float) -> tuple[dict | None, list[Note]]:
    """The notebook as nbformat v4 JSON, or None, and notes on what was wrong with the file."""
    notes: list[Note] = []
    try:
        data = path.read_bytes()
    except OSError as error:
        return None, [Note("the notebook {name} could not be read: {error}",
                           {"name": path.name, "error": error.strerror}, "error")]
    if not data.strip():
        return None, [Note("the notebook {name} is an empty file", {"name": path.name}, "error")]
    if len(data) > size_limit_mb * 1024 * 1024:
        notes.append(Note("the notebook {name} is {mb:.0f} MB, mostly cell outputs; it was read "
                          "without them", {"name": path.name, "mb": len(data) / 1048576}))
        data = strip_outputs(data)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        notes.append(Note("the notebook {name} is not valid UTF-8 text (byte {byte} at position "
                          "{position}); the bad bytes were replaced",
                          {"name": path.name, "byte": f"0x{data[error.start]:02x}",
                           "position": error.start}))
        text = data.decode("utf-8", errors="replace")
    try:
        raw = json.loads(text, strict=False)
    except (ValueError, RecursionError) as error:
        where = (f"line {error.lineno}, column {error.colno}"
                 if isinstance(error, json.JSONDecodeError) else "somewhere")
        return None, notes + [Note(
            "the notebook {name} is not valid JSON ({where}): was it edited outside Jupyter or "
            "cut short? Nothing in it could be graded", {"name": path.name, "where": where},
            "error")]
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", raw.get("worksheets")), list):
        return None, notes + [Note("the file {name} is not a Jupyter notebook", {"name": path.name},
                                   "error")]
    major = raw.get("nbformat")
    if major != 4:
        import nbformat                       # only old notebooks need it (it is slow to import)
        try:
            raw = nbformat.convert(nbformat.from_dict(raw), 4)
            notes.append(Note("the notebook {name} was saved in the old format version {version}; "
                              "it was converted", {"name": path.name, "version": major}))
        except Exception:                     # nbformat raises many kinds here
            return None, notes + [Note("the notebook {name} uses a notebook format ({version}) "
                                       "that cannot be read", {"name": path.name,
                                                               "version": major}, "error")]
    cells = [cell for cell in raw.get("cells", []) if isinstance(cell, dict)]
    return {"cells": cells}, notes


# -- from cells to a program ---------------------------------------------------------------------
_MAGIC = re.compile(r"^(\s*)([%!].*)$", re.MULTILINE)


def without_magics(source: str) -> str:
    """Notebook magics are not Python: `%time`, `!pip` lines become `pass` (indentation kept)."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].split()[0]
        lines = lines[1:] if magic in ("%%time", "%%timeit", "%%capture") else []
    return _MAGIC.sub(lambda m: f"{m.group(1)}pass  # notebook magic skipped: {m.group(2)[:40]}",
                      "\n".join(lines))


def _compiles(source: str) -> bool:
    try:
        compile(source, "<check>", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def build_program(source_nb, submitted: dict | None) -> Program:
    """The cells to run for a submission, given its trusted source notebook."""
    setup = [Cell(f"setup {n + 1}" if n else "setup", notebook.text(cell), from_student=False)
             for n, cell in enumerate(notebook.cells_with_role(source_nb, "setup"))]
    kinds = {}
    for cell in source_nb.cells:
        gid = notebook.grade_id(cell)
        if gid:
            kinds[gid] = ("solution" if notebook.is_solution(cell) else
                          "test" if notebook.is_test(cell) else "locked")
    solution_ids = {gid for gid, kind in kinds.items() if kind == "solution"}
    if submitted is None:
        return Program(setup, [], readable=False, solution_ids=solution_ids)

    notes, cells, seen = [], list(setup), set()
    originals = {notebook.grade_id(c): notebook.text(c) for c in source_nb.cells
                 if notebook.grade_id(c)}
    for index, cell in enumerate(submitted["cells"], start=1):
        kind_of_cell = cell.get("cell_type")
        source = notebook.text(cell)
        gid = notebook.grade_id(cell)
        label = gid or f"cell {index}"
        known = kinds.get(gid) if gid else None
        if gid and gid in seen:
            notes.append(Note("the cell {gid} appears more than once; the copy at position "
                              "{index} counts as a cell you added", {"gid": gid, "index": index}))
            if known != "solution":
                continue
            known, label = None, f"cell {index}"
        elif gid and gid not in kinds:
            notes.append(Note("the cell at position {index} has a grade id ({gid}) that is not in "
                              "the assignment; it counts as a cell you added",
                              {"index": index, "gid": gid}))
        elif gid:
            seen.add(gid)
        if known == "test":
            continue
        if known == "locked":
            if source.strip() != originals.get(gid, "").strip():
                notes.append(Note("the read-only cell {gid} was edited; the grader used the "
                                  "original", {"gid": gid}))
            continue
        if known == "solution" and kind_of_cell != "code":
            if _compiles(source):
                notes.append(Note("your answer cell {gid} had been turned into a {kind} cell; it "
                                  "was run as code", {"gid": gid, "kind": kind_of_cell}))
                cells.append(Cell(gid, without_magics(source)))
            else:
                notes.append(Note("your answer cell {gid} had been turned into a {kind} cell "
                                  "and is not valid Python, so it was not run",
                                  {"gid": gid, "kind": kind_of_cell}, "error"))
            continue
        if kind_of_cell != "code":
            continue
        cells.append(Cell(label, without_magics(source)))
    for gid in sorted(solution_ids - seen):
        notes.append(Note("the answer cell {gid} is not in the notebook (no cell has its grade "
                          "id); code for it in other cells was still run", {"gid": gid}))
    return Program(cells, notes, solution_ids=solution_ids)


def load_program(source_path: Path, submitted_path: Path, size_limit_mb: float) -> Program:
    source_nb = notebook.read(source_path)
    if not submitted_path.exists():
        program = build_program(source_nb, None)
        program.notes.append(Note("the notebook {name} is missing from the submission",
                                  {"name": submitted_path.name}, "error"))
        return program
    raw, notes = read_notebook(submitted_path, size_limit_mb)
    program = build_program(source_nb, raw)
    program.notes[:0] = notes
    return program


def find_notebooks(course: Course, submission: Path, assignment_id: str | None):
    """(assignment id, {notebook name: path}) for a folder or a single notebook."""
    if submission.is_file():
        candidates = {submission.name: submission}
    elif submission.is_dir():
        candidates = {p.name: p for p in sorted(submission.rglob("*.ipynb"))
                      if ".ipynb_checkpoints" not in p.parts}
    else:
        candidates = {}
    if assignment_id is None:
        scores = [(sum(name in candidates for name in a.notebooks), a.id) for a in course.assignments]
        best = max(scores)
        if best[0] == 0:
            return None, candidates
        assignment_id = best[1]
    assignment = course.assignment(assignment_id)
    if submission.is_file() and len(assignment.notebooks) == 1:
        found = {assignment.notebooks[0]: submission}
    else:
        found = {name: candidates.get(name, (submission if submission.is_dir() else
                                             submission.parent) / name)
                 for name in assignment.notebooks}
    return assignment_id, found
