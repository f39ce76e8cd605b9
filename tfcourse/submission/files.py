"""The files of a student's submission, read as root and never through a link.

Files of a submission are read as root, so they are read only as regular files of their own: a
symbolic link anywhere below the submission's root, a named pipe, a device, a file with other names
(hard links) or one larger than the hard limit is refused with a note, never followed or opened for
reading. Every open is relative to the folder above it and does not follow links (`open_inside`), so
a folder swapped for a link between the listing and the reading is refused too. notebooks.py reads
a notebook found here into the code the grader runs; finding.py finds a submission's notebooks.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tfcourse.course import Course
from tfcourse.i18n import phrase

from .report import Note

FILE_LIMIT_MB = 256         # a notebook file larger than this is refused (limits.notebook_file_mb)
WALK_DEPTH = 8              # folders below a submission's root that are looked into
WALK_ENTRIES = 20000        # entries of a submission that are looked at, at most
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_CHUNK = 1 << 20


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

    def __init__(self, template: str, params: dict, kind: str = "", why: str = ""):
        super().__init__(template.format(**params))
        self.note = Note(template, params, "error")
        self.kind = kind                    # what the entry was, when that is the reason
        # the reason in a word and a number ("kind link", "links 2", "size 300000000"): what
        # the runner compares with the file as it fingerprinted it (batch/fingerprint.py)
        self.why = why or (f"kind {kind}" if kind else "")


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
                          {"name": shown, "links": info.st_nlink}, why=f"links {info.st_nlink}")
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
                                                     "limit": limit_mb}, why=f"size {size}")


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


def file_limit_mb(course: Course) -> float:
    """The hard limit on a notebook file (course.yaml `limits.notebook_file_mb`, else 256 MB)."""
    return course.limit("notebook_file_mb")
