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
    label: str          # what a student recognises: a grade id, or its position ("7": cell 7)
    source: str
    from_student: bool = True


@dataclass
class Program:
    cells: list[Cell]
    notes: list[Note]
    readable: bool = True              # False: nothing in the file could be graded
    solution_ids: set[str] = field(default_factory=set)


# -- reading the file ----------------------------------------------------------------------------
_STRUCTURE = re.compile(rb'["\[\]]')
_OUTPUTS_VALUE = re.compile(rb"\s*:\s*\[")


def _string_end(data: bytes, quote: int) -> int:
    """The index after the JSON string whose opening quote is at `quote`; -1 if it never ends.
    bytes.find does the walking, so a string of hundreds of megabytes costs a fraction of a second."""
    position = quote + 1
    while True:
        close = data.find(b'"', position)
        if close < 0:
            return -1
        backslashes = 0
        while data[close - 1 - backslashes] == 0x5C:     # a quote after an odd run of \ is escaped
            backslashes += 1
        if backslashes % 2 == 0:
            return close + 1
        position = close + 1


def _array_end(data: bytes, position: int) -> int:
    """The index after the `]` that closes an array whose contents start at `position`, or -1."""
    depth = 1
    while found := _STRUCTURE.search(data, position):
        if found.group() == b'"':
            position = _string_end(data, found.start())
            if position < 0:
                return -1
            continue
        position = found.end()
        depth += 1 if found.group() == b"[" else -1
        if depth == 0:
            return position
    return -1


def strip_outputs(data: bytes) -> bytes:
    """Drop every `"outputs": [...]` array from notebook JSON without parsing it whole."""
    pieces, kept, position = [], 0, 0
    while (quote := data.find(b'"', position)) >= 0:
        position = _string_end(data, quote)
        if position < 0:
            return data                      # broken: leave it to the JSON parser to complain
        opening = (_OUTPUTS_VALUE.match(data, position)
                   if data[quote:position] == b'"outputs"' else None)
        if opening:
            end = _array_end(data, opening.end())
            if end < 0:
                return data
            pieces += [data[kept:quote], b'"outputs": []']
            kept = position = end
    return b"".join(pieces) + data[kept:]


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


_LANGUAGE = re.compile(r'use_language\("\w*"\)')


def _as_released(source: str) -> str:
    """A read-only cell as students get it, in any edition: hidden tests out, language unset."""
    return _LANGUAGE.sub("use_language()", notebook.strip_hidden_tests(source)).strip()


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
        label = gid if gid in kinds else str(index)      # students see "cell 12"
        known = kinds.get(gid) if gid else None
        if gid and gid in seen:
            notes.append(Note("the cell {gid} appears more than once; the copy at position "
                              "{index} counts as a cell you added", {"gid": gid, "index": index}))
            if known != "solution":
                continue
            known, label = None, str(index)
        elif gid and gid not in kinds:
            notes.append(Note("the cell at position {index} has a grade id ({gid}) that is not in "
                              "the assignment; it counts as a cell you added",
                              {"index": index, "gid": gid}))
        elif gid:
            seen.add(gid)
        if known in ("test", "locked"):
            if _as_released(source) != _as_released(originals.get(gid, "")):
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
        others = sorted(p.name for p in submitted_path.parent.glob("*.ipynb"))
        program.notes.append(Note("the notebook {name} is missing from the submission (notebooks "
                                  "found there: {others}); was it renamed?",
                                  {"name": submitted_path.name,
                                   "others": ", ".join(others) or "none"}, "error"))
        return program
    raw, notes = read_notebook(submitted_path, size_limit_mb)
    if submitted_path.name != source_path.name:
        notes.insert(0, Note("there is no {name}; {found} was graded in its place",
                             {"name": source_path.name, "found": submitted_path.name}))
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
    wanted = assignment.notebooks
    if len(wanted) == 1 and wanted[0] not in candidates and len(candidates) == 1:
        # the one notebook, under another name ("attention (1).ipynb", or a file given alone)
        found = {wanted[0]: next(iter(candidates.values()))}
    else:
        found = {name: candidates.get(name, (submission if submission.is_dir() else
                                             submission.parent) / name)
                 for name in assignment.notebooks}
    return assignment_id, found
