"""Reading a student's notebook into the code the grader runs, whatever state the file is in.

The source notebook says what each cell is. From the submission the grader takes the student's
solution cells and any cells the student added; the course's own cells (imports, recipe) always come
from the source, as nbgrader restores locked cells; test cells never come from the student. Every
repair is noted in words a student understands, and nothing in the input file is changed.

Files of a submission are read as root, so they are read only as regular files of their own: a
symbolic link anywhere below the submission's root, a named pipe, a device, a file with other names
(hard links) or one larger than the hard limit is refused with a note, never followed or opened for
reading. Every open is relative to the folder above it and does not follow links (`open_inside`), so
a folder swapped for a link between the listing and the reading is refused too.
"""
from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tfcourse import notebook
from tfcourse.course import Course
from tfcourse.source import SourceNotebook, source_notebook
from tfcourse.i18n import phrase

from .report import Note

FILE_LIMIT_MB = 256         # a notebook file larger than this is refused (limits.notebook_file_mb)
WALK_DEPTH = 8              # folders below a submission's root that are looked into
WALK_ENTRIES = 20000        # entries of a submission that are looked at, at most
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_CHUNK = 1 << 20


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


# -- the files of a submission, never following a link -------------------------------------------
# A file of a submission is named by a folder of the instructor's (`base`: the class folder, or the
# folder holding the submission given to the grader) and the names below it (`parts`). The base is
# opened as it is; each name below it is opened from the folder above it, never following a link.
KIND_WORDS = {"link": phrase("a symbolic link"), "fifo": phrase("a named pipe (FIFO)"),
              "socket": phrase("a socket"), "device": phrase("a device file"),
              "other": phrase("not a regular file"), "folder": phrase("a folder"),
              "file": phrase("a file")}


def kind_of(mode: int) -> str:
    """What an lstat's st_mode says an entry is: file, folder, link, fifo, socket, device, other."""
    for kind, test in (("file", stat.S_ISREG), ("folder", stat.S_ISDIR), ("link", stat.S_ISLNK),
                       ("fifo", stat.S_ISFIFO), ("socket", stat.S_ISSOCK),
                       ("device", stat.S_ISCHR), ("device", stat.S_ISBLK)):
        if test(mode):
            return kind
    return "other"


class Refused(Exception):
    """A file of the submission that is not read, and the note that says why."""

    def __init__(self, template: str, params: dict, kind: str = ""):
        super().__init__(template.format(**params))
        self.note = Note(template, params, "error")
        self.kind = kind                    # what the entry was, when that is the reason


def _refusal(shown: str, kind: str, wanted: str) -> Refused:
    if kind == "missing":
        return Refused("{name} is not in the submission", {"name": shown}, kind)
    if wanted == "folder":
        return Refused("{name} is {what}, not a folder; only regular files and folders are "
                       "graded", {"name": shown, "what": KIND_WORDS[kind]}, kind)
    return Refused("{name} is {what}; only regular files are graded",
                   {"name": shown, "what": KIND_WORDS[kind]}, kind)


def _changed(shown: str, why: str) -> Refused:
    return Refused("{name} changed while it was being read ({error})", {"name": shown,
                                                                         "error": why})


def _open_checked(name: str, wanted: str, shown: str, dir_fd: int) -> int:
    """Open the entry `name` of the folder `dir_fd` without following it, after an lstat says it
    is `wanted` (file or folder), and check that what was opened is that same entry. O_NONBLOCK:
    a named pipe put there in between cannot block the grader."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _refusal(shown, "missing", wanted) from None
    if kind_of(before.st_mode) != wanted:
        raise _refusal(shown, kind_of(before.st_mode), wanted)
    try:
        fd = os.open(name, _OPEN | (os.O_DIRECTORY if wanted == "folder" else 0), dir_fd=dir_fd)
    except OSError as error:               # ELOOP: it became a link; ENOTDIR: it was swapped
        raise _changed(shown, error.strerror or "gone") from None
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) or \
            kind_of(after.st_mode) != wanted:
        os.close(fd)
        raise _changed(shown, "replaced")
    return fd


def open_inside(base: Path, parts: tuple[str, ...], wanted: str = "file",
                skip: int = 0) -> int:
    """A file descriptor of `base/parts...`, which must be a `wanted` (file or folder). `base` is
    the instructor's folder; no name of `parts` may be a link, nor anything but a folder on the
    way (Refused otherwise). Messages name the path from `parts[skip]` on."""
    if not parts and wanted != "folder":
        raise ValueError("a file is named by the folder above it and its name")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, name in enumerate(parts, start=1):
            inner = _open_checked(name, wanted if index == len(parts) else "folder",
                                  shown_name(parts[:index], skip), fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def shown_name(parts: tuple[str, ...], skip: int = 0) -> str:
    """How an entry is named in messages: its path below the submission's root (the first `skip`
    names lead to the root), or the root's own name."""
    return "/".join(parts[skip:]) if parts[skip:] else (parts[-1] if parts else ".")


def read_inside(base: Path, parts: tuple[str, ...], limit_mb: float, skip: int = 0,
                owner: int | None = None) -> bytearray:
    """The bytes of the regular file `base/parts...`, opened as `open_inside` opens it. A file with
    other names (hard links: it may be someone else's), larger than `limit_mb`, or (given an
    `owner` uid) another account's is refused: each is checked on the file opened."""
    shown = shown_name(parts, skip)
    fd = open_inside(base, parts, "file", skip)
    try:
        info = os.fstat(fd)
        limit = int(limit_mb * 1024 * 1024)
        if owner is not None and info.st_uid != owner:
            raise Refused("{name} belongs to another account", {"name": shown})
        if info.st_nlink > 1:
            raise Refused("{name} has {links} names on disk (hard links); only a file of its own "
                          "is graded: copy it rather than link it",
                          {"name": shown, "links": info.st_nlink})
        if info.st_size > limit:
            raise _too_large(shown, info.st_size, limit_mb)
        data, size = bytearray(info.st_size + 1), 0      # one byte more: to see it grow
        while True:
            if size == len(data):                          # it grew while being read
                if size > limit:
                    raise _too_large(shown, size, limit_mb)
                data.extend(bytes(min(_CHUNK, limit + 1 - size)))
            count = os.readv(fd, [memoryview(data)[size:size + _CHUNK]])
            if not count:
                break
            size += count
        del data[size:]
        return data
    finally:
        os.close(fd)


def _too_large(shown: str, size: int, limit_mb: float) -> Refused:
    return Refused("the notebook {name} is {mb:.0f} MB, more than the {limit:.0f} MB a notebook "
                   "file may be; it was not read", {"name": shown, "mb": size / 1048576,
                                                     "limit": limit_mb})


def kind_inside(base: Path, parts: tuple[str, ...]) -> str:
    """What `base/parts...` is, by an lstat that follows no link below `base` (`link` for one on
    the way); `missing` when there is nothing."""
    if not parts:
        return "folder" if base.is_dir() else root_kind(base)
    try:
        fd = open_inside(base, parts[:-1], "folder")
    except Refused as refused:
        return refused.kind or "link"
    except OSError:
        return "missing"
    try:
        return kind_of(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return "missing"
    finally:
        os.close(fd)


def root_kind(path: Path) -> str:
    """What `path` itself is (an lstat: a link is a link); `missing` when there is nothing."""
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return "missing"


@dataclass(frozen=True)
class Entry:
    """Something below a folder of a submission, as an lstat saw it (links are never followed)."""
    parts: tuple[str, ...]          # below the folder listed
    kind: str
    size: int = 0

    @property
    def name(self) -> str:
        return self.parts[-1]


def listing(base: Path, parts: tuple[str, ...] = (), depth: int = WALK_DEPTH,
            most: int = WALK_ENTRIES) -> list[Entry]:
    """Every entry below the folder `base/parts...` (opened as `open_inside` does), sorted by
    path, without following links: a link is listed as a link and never looked into; hidden
    folders (.ipynb_checkpoints, .git) are not looked into. At most `most` entries, `depth` deep."""
    found: list[Entry] = []
    todo = [((), open_inside(base, parts, "folder"))]
    try:
        while todo and len(found) < most:
            below, fd = todo.pop()
            try:
                with os.scandir(fd) as entries:
                    items = sorted(entries, key=lambda item: item.name)
                for item in items[:most - len(found)]:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    entry = Entry((*below, item.name), kind_of(info.st_mode), info.st_size)
                    found.append(entry)
                    if entry.kind == "folder" and not item.name.startswith(".") and \
                            len(entry.parts) < depth:
                        try:
                            todo.append((entry.parts, _open_checked(item.name, "folder",
                                                                    item.name, fd)))
                        except (Refused, OSError):      # swapped, or not ours to read
                            pass
            finally:
                os.close(fd)
    finally:
        for _, fd in todo:
            os.close(fd)
    return sorted(found, key=lambda entry: entry.parts)


def is_notebook_name(name: str) -> bool:
    return name.endswith(".ipynb")


def split_submission(submission: Path, within: Path | None = None) -> tuple[Path, tuple[str, ...]]:
    """(base, parts) naming a submission: `within` (by default the folder above it) is the
    instructor's folder it was found in, and the names from there on are the submission's."""
    submission = Path(os.path.abspath(submission))
    base = Path(os.path.abspath(within)) if within is not None else submission.parent
    try:
        parts = submission.relative_to(base).parts
    except ValueError:
        raise ValueError(f"{submission} is not inside {base}") from None
    if not parts:                        # the submission is the base itself: name it from above
        return submission.parent, (submission.name,)
    return base, parts


@dataclass(frozen=True)
class NotebookFile:
    """A notebook of a submission: `base/parts...`, the first `skip` names leading to the
    submission's root. Read it with `read_notebook`, which never follows a link."""
    base: Path
    parts: tuple[str, ...]
    skip: int = 0
    kind: str = "file"                      # as listed; `missing` when the notebook is not there
    others: tuple[str, ...] = ()            # for a missing one: the notebooks found instead
    unfollowed: tuple[str, ...] = ()        # for a missing one: the links not looked into
    limit_mb: float = FILE_LIMIT_MB

    @classmethod
    def at(cls, path: Path) -> "NotebookFile":
        """A notebook file given alone (its folder is taken as the instructor's)."""
        path = Path(os.path.abspath(path))
        return cls(path.parent, (path.name,), 1)

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def shown(self) -> str:
        return shown_name(self.parts, self.skip)


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


def read_notebook(path: NotebookFile | Path, size_limit_mb: float
                  ) -> tuple[dict | None, list[Note]]:
    """The notebook as nbformat v4 JSON, or None, and notes on what was wrong with the file. A
    file larger than `size_limit_mb` is read without its outputs; one that is not a regular file
    of its own, or is larger than the hard limit, is not read at all."""
    found = path if isinstance(path, NotebookFile) else NotebookFile.at(path)
    name = found.shown
    try:
        data = read_inside(found.base, found.parts, max(found.limit_mb, size_limit_mb),
                           found.skip)
    except Refused as refused:
        return None, [refused.note]
    except OSError as error:
        return None, [Note("the notebook {name} could not be read: {error}",
                           {"name": name, "error": error.strerror}, "error")]
    return parse_notebook(data, name, size_limit_mb)


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
    raw, notes = read_notebook(found, size_limit_mb)
    if found.name != source_path.name:
        notes.insert(0, Note("there is no {name}; {found} was graded in its place",
                             {"name": source_path.name, "found": found.shown}))
    program = build_program(source_nb, raw)
    program.notes[:0] = notes
    return program


def file_limit_mb(course: Course) -> float:
    """The hard limit on a notebook file (course.yaml `limits.notebook_file_mb`, else 256 MB)."""
    return course.limit("notebook_file_mb")


def candidates_in(course: Course, base: Path, parts: tuple[str, ...]
                  ) -> tuple[dict[str, NotebookFile], list[str]]:
    """The notebooks of the submission `base/parts...` by name (the shallowest of each name), and
    the links below it that were not followed. A submission that is not a folder is its own one
    candidate (a link or a pipe too: reading it says why it is refused)."""
    limit, skip = file_limit_mb(course), len(parts)
    kind = kind_inside(base, parts)
    if kind == "missing":
        return {}, []
    if kind != "folder":
        return {parts[-1]: NotebookFile(base, parts, skip, kind, limit_mb=limit)}, []
    try:
        entries = listing(base, parts)
    except Refused:                              # it was swapped for a link after the look
        return {parts[-1]: NotebookFile(base, parts, skip, "link", limit_mb=limit)}, []
    notebooks = sorted((e for e in entries if e.kind != "folder" and is_notebook_name(e.name)),
                       key=lambda e: (len(e.parts), e.parts))
    candidates: dict[str, NotebookFile] = {}
    for entry in notebooks:
        candidates.setdefault(entry.name, NotebookFile(base, (*parts, *entry.parts), skip,
                                                       entry.kind, limit_mb=limit))
    links = ["/".join(e.parts) for e in entries if e.kind == "link"]
    return candidates, links


CONTENT_CANDIDATES = 8      # notebooks read to tell an assignment by their cells, at most


def assignment_by_content(course: Course, candidates: dict[str, NotebookFile]
                          ) -> tuple[str, dict[str, NotebookFile]] | None:
    """When no notebook's name tells the assignment (a class folder of alice.ipynb, bob.ipynb):
    the one whose source notebook shares the most grade ids (nbgrader's cell metadata, which a
    student's notebook keeps) with a candidate, and {its notebook's name: that candidate}. Each
    candidate is read as the grader reads it, within its limits. None when no candidate shares
    one, or two assignments share as many."""
    from tfcourse.source import assignment_source

    known = {(a.id, source.name): set(source.kinds) for a in course.assignments
             for source in assignment_source(course, a.id).notebooks}
    matches = []
    for name, found in sorted(candidates.items())[:CONTENT_CANDIDATES]:
        raw, _ = read_notebook(found, course.limit("notebook_mb"))
        if raw is None:
            continue
        ids = {notebook.grade_id(cell) for cell in raw["cells"]} - {None}
        matches += [(len(ids & gids), assignment_id, source, name)
                    for (assignment_id, source), gids in known.items() if ids & gids]
    if not matches:
        return None
    matches.sort(reverse=True)
    shared, assignment_id, source, name = matches[0]
    if any(other[0] == shared and other[1] != assignment_id for other in matches[1:]):
        return None
    return assignment_id, {source: candidates[name]}


def find_notebooks(course: Course, submission: Path, assignment_id: str | None,
                   within: Path | None = None, by_content: bool = False):
    """(assignment id, {notebook name: NotebookFile}) for a folder or a single notebook; the
    assignment is told from the notebooks' names when not given, else, with `by_content`, from
    their cells (`assignment_by_content`; None: neither tells it). `within` is the instructor's
    folder the submission lies in (by default the one above it): no link is followed below it."""
    base, parts = split_submission(submission, within)
    candidates, links = candidates_in(course, base, parts)
    matched: dict[str, NotebookFile] = {}
    if assignment_id is None:
        scores = [(sum(name in candidates for name in a.notebooks), a.id)
                  for a in course.assignments]
        best = max(scores)
        found = assignment_by_content(course, candidates) if best[0] == 0 and by_content \
            else None
        if best[0] == 0 and found is None:
            return None, candidates
        assignment_id, matched = found or (best[1], {})
    wanted = course.assignment(assignment_id).notebooks
    if matched:
        return assignment_id, {name: matched.get(name) or candidates.get(name) or
                               NotebookFile(base, (*parts, name), len(parts), "missing")
                               for name in wanted}
    if len(wanted) == 1 and wanted[0] not in candidates and len(candidates) == 1:
        # the one notebook, under another name ("attention (1).ipynb", or a file given alone)
        return assignment_id, {wanted[0]: next(iter(candidates.values()))}
    others = tuple(sorted(name for name in candidates if name not in wanted))
    return assignment_id, {name: candidates.get(name) or
                           NotebookFile(base, (*parts, name), len(parts), "missing", others,
                                        tuple(links[:20]))
                           for name in wanted}
