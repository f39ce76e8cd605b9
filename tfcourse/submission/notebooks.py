"""Reading a student's notebook into the code the grader runs, whatever state the file is in.

The source notebook says what each cell is. From the submission the grader takes the student's
solution cells and any cells the student added; the course's own cells (imports, recipe) always come
from the source, as nbgrader restores locked cells; test cells never come from the student. Every
repair is noted in words a student understands, and nothing in the input file is changed. The file
itself is read as files.py reads every file of a submission: never through a link.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse import notebook
from tfcourse.source import SourceNotebook, source_notebook

from ..sandbox.cell import Cell
from .files import NotebookFile, Refused, read_inside
from .report import Note


@dataclass
class Program:
    cells: list[Cell]
    notes: list[Note]
    readable: bool = True              # False: nothing in the file could be graded
    solution_ids: set[str] = field(default_factory=set)
    read: dict[str, str | None] = field(default_factory=dict)     # read_notebook's: SHA-256s


# -- reading the file ----------------------------------------------------------------------------
_STRUCTURE = re.compile(rb'["\[\]]')
_OUTPUTS_VALUE = re.compile(rb"\s*:\s*\[")


def _string_end(data: bytes, quote: int) -> int:
    """The index after the JSON string whose opening quote is at `quote`; -1 if it never ends.
    bytes.find does the walking, so a string of hundreds of megabytes costs a fraction of a
    second."""
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


def read_notebook(path: NotebookFile | Path, size_limit_mb: float,
                  read: dict[str, str | None] | None = None) -> tuple[dict | None, list[Note]]:
    """The notebook as nbformat v4 JSON, or None, and notes on what was wrong with the file. A
    file larger than `size_limit_mb` is read without its outputs; one that is not a regular file
    of its own, or is larger than the hard limit, is not read at all. `read`: where to note what
    reading gave (`_note_read`), by the file's path in the submission ("" for the submission
    itself), so that the runner can tell it read what the runner fingerprinted."""
    found = path if isinstance(path, NotebookFile) else NotebookFile.at(path)
    name = found.shown
    try:
        data = read_inside(found.base, found.parts, max(found.limit_mb, size_limit_mb),
                           found.skip)
    except Refused as refused:
        _note_read(read, found, f"refused: {refused.why}")
        return None, [refused.note]
    except OSError as error:
        _note_read(read, found, None)
        return None, [Note("the notebook {name} could not be read: {error}",
                           {"name": name, "error": error.strerror}, "error")]
    _note_read(read, found, hashlib.sha256(data).hexdigest())
    return parse_notebook(data, name, size_limit_mb)


CHANGED = "changed while read"          # a file read twice, with another outcome the second time


def _note_read(read: dict[str, str | None] | None, found: NotebookFile, digest: str | None):
    """Note in `read` what reading `found` gave: the SHA-256 of its bytes, "refused: " and why
    when it was not read (Refused.why), None when it could not be; CHANGED when it was read
    before and gave something else."""
    if read is not None:
        path = "/".join(found.parts[found.skip:])
        read[path] = CHANGED if read.get(path, digest) != digest else digest


# A notebook built to be expensive to read (60 MB of empty objects cost the parser 1.45 GB and
# minutes) is refused before it is parsed. The course's notebooks hold about 1,000 JSON values each;
# past JSON_VALUES, a notebook is read without its outputs, and refused when even that leaves too
# many. Dropping the outputs walks every string and array of the file in Python (5 us each):
# past STRIP_TOKENS of them (about 10 s), the notebook is refused without that walk.
JSON_VALUES = 200_000
STRIP_TOKENS = 2_000_000


def json_values(data: bytes | bytearray) -> int:
    """At most how many values the JSON `data` holds: each follows a comma or opens an object or
    an array (those inside strings count too). Counted at the speed of bytes.count."""
    return data.count(b",") + data.count(b"{") + data.count(b"[") + 1


def _strip_tokens(data: bytes | bytearray) -> int:
    """How many steps `strip_outputs` may take on `data`: its strings and arrays."""
    return data.count(b'"') // 2 + data.count(b"[")


def strippable(data: bytes | bytearray) -> bool:
    """Whether `strip_outputs` takes at most about 10 s on `data` (STRIP_TOKENS steps); a file
    of 20 million short strings takes 100 s."""
    return _strip_tokens(data) <= STRIP_TOKENS


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')


def values_outside_strings(data: bytes | bytearray) -> int:
    """At most how many values `data` holds, not counting commas and brackets inside its strings
    (a cell of code may hold many): a pass of the regular expression engine over each string, about
    2 us a string, so only for data `strippable` allows."""
    return json_values(_STRING.sub(b'""', data))


def _too_many_values(name: str) -> Note:
    return Note("the notebook {name} holds more than {limit} JSON values (a notebook of this "
                "course holds about a thousand), more than the grader reads; nothing in it could "
                "be graded", {"name": name, "limit": JSON_VALUES}, "error")


def parse_notebook(data: bytes | bytearray, name: str, size_limit_mb: float
                   ) -> tuple[dict | None, list[Note]]:
    """The notebook in `data` (a file's bytes) as nbformat v4 JSON, or None, and notes. A file
    larger than `size_limit_mb`, or holding more than JSON_VALUES values, is read without its
    outputs; one that still holds too many, or would take too long to strip, is not read."""
    notes: list[Note] = []
    if not data.strip():
        return None, [Note("the notebook {name} is an empty file", {"name": name}, "error")]
    large = len(data) > size_limit_mb * 1024 * 1024
    if large or json_values(data) > JSON_VALUES:
        if not strippable(data):
            return None, [_too_many_values(name)]
        if large:
            notes.append(Note("the notebook {name} is {mb:.0f} MB, mostly cell outputs; it was "
                              "read without them", {"name": name, "mb": len(data) / 1048576}))
        data = strip_outputs(data)
        if json_values(data) > JSON_VALUES and values_outside_strings(data) > JSON_VALUES:
            return None, notes + [_too_many_values(name)]
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        notes.append(Note("the notebook {name} is not valid UTF-8 text (byte {byte} at position "
                          "{position}); the bad bytes were replaced",
                          {"name": name, "byte": f"0x{data[error.start]:02x}",
                           "position": error.start}))
        text = data.decode("utf-8", errors="replace")
    del data
    try:
        raw = json.loads(text, strict=False)
    except RecursionError:
        return None, notes + [Note("the notebook {name} is nested more deeply than any notebook "
                                   "is; nothing in it could be graded", {"name": name}, "error")]
    except (ValueError, MemoryError) as error:
        where = (f"line {error.lineno}, column {error.colno}"
                 if isinstance(error, json.JSONDecodeError) else "somewhere")
        return None, notes + [Note(
            "the notebook {name} is not valid JSON ({where}): was it edited outside Jupyter or "
            "cut short? Nothing in it could be graded", {"name": name, "where": where},
            "error")]
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", raw.get("worksheets")), list):
        return None, notes + [Note("the file {name} is not a Jupyter notebook", {"name": name},
                                   "error")]
    major = raw.get("nbformat")
    if major != 4:
        import nbformat                       # only old notebooks need it (it is slow to import)
        try:
            raw = nbformat.convert(nbformat.from_dict(raw), 4)
            notes.append(Note("the notebook {name} was saved in the old format version {version}; "
                              "it was converted", {"name": name, "version": major}))
        except Exception:                     # nbformat raises many kinds here
            return None, notes + [Note("the notebook {name} uses a notebook format ({version}) "
                                       "that cannot be read", {"name": name,
                                                               "version": str(major)[:40]},
                                       "error")]
    cells = [_plain_cell(cell) for cell in raw.get("cells", []) if isinstance(cell, dict)]
    return {"cells": cells}, notes


def _plain_cell(cell: dict) -> dict:
    """A cell with the types the grader expects, whatever the file held: a string source, a
    string cell type, and metadata that is a mapping."""
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(part if isinstance(part, str) else "" for part in source)
    elif not isinstance(source, str):
        source = ""
    kind = cell.get("cell_type")
    metadata = cell.get("metadata")
    return {"cell_type": kind if isinstance(kind, str) else "",
            "source": source, "metadata": metadata if isinstance(metadata, dict) else {}}


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
    """Whether `source` is Python; code nested too deeply to compile (RecursionError,
    MemoryError from the parser) is not."""
    try:
        compile(source, "<check>", "exec")
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def _as_released(source: str) -> str:
    """A read-only cell as students get it, in any edition: hidden tests out, language unset."""
    return notebook.set_language(notebook.strip_hidden_tests(source), None).strip()


def build_program(source: SourceNotebook | notebook.Node, submitted: dict | None) -> Program:
    """The cells to run for a submission, given its trusted source notebook (its model, or the
    parsed notebook)."""
    if not isinstance(source, SourceNotebook):
        source = SourceNotebook.parse(Path("source.ipynb"), source)
    setup = [Cell(f"setup {n + 1}" if n else "setup", text, from_student=False)
             for n, text in enumerate(source.setup)]
    kinds = source.kinds
    solution_ids = source.solution_ids
    if submitted is None:
        return Program(setup, [], readable=False, solution_ids=solution_ids)

    notes, cells, seen = [], list(setup), set()
    originals = source.originals
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


def load_program(source_path: Path, submitted: NotebookFile | Path,
                 size_limit_mb: float, source: SourceNotebook | None = None) -> Program:
    """The program for one notebook of a submission, as found by `find_notebooks`. `source` is
    the model of the source notebook at `source_path` (read from there, once, when not given:
    tfcourse/source.py)."""
    source_nb = source if source is not None else source_notebook(source_path)
    found = submitted if isinstance(submitted, NotebookFile) else NotebookFile.at(submitted)
    if found.kind == "missing":
        program = build_program(source_nb, None)
        program.notes.append(Note("the notebook {name} is missing from the submission (notebooks "
                                  "found there: {others}); was it renamed?",
                                  {"name": found.name, "others": ", ".join(found.others) or
                                   "none"}, "error"))
        if found.unfollowed:
            program.notes.append(Note("{names}: symbolic links are not followed; only regular "
                                      "files and folders are graded",
                                      {"names": ", ".join(found.unfollowed)}, "error"))
        return program
    read: dict[str, str | None] = {}
    raw, notes = read_notebook(found, size_limit_mb, read)
    # A notebook under another name in the student's folder is worth a note; a file that is the
    # submission itself (a class folder of alice.ipynb, bob.ipynb) was named by the instructor.
    if found.name != source_path.name and len(found.parts) > found.skip:
        notes.insert(0, Note("there is no {name}; {found} was graded in its place",
                             {"name": source_path.name, "found": found.shown}))
    program = build_program(source_nb, raw)
    program.notes[:0] = notes
    program.read = read
    return program
