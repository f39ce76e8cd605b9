"""Fingerprints: what a submission's grading depends on, so that a second run grades only what is
new or changed. A fingerprint hashes the grader's version (child.grader_version), the options and
each notebook of the submission, read as the grader reads it (no link followed), as listed once
for both (finding.list_submission). The grade is recorded under the fingerprint only when the
grader read the very bytes it hashed (graded_as_stamped).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from tfcourse.course import Course

from ..submission.files import Refused, open_inside
from ..submission.finding import Listing, assignment_by_names, candidates_of, list_submission
from ..submission.report import SubmissionReport

HASH_LIMIT = 256 << 20          # a notebook larger than this is fingerprinted by size and time,
HASH_BUDGET = 1 << 30           # and so are those beyond this much read for one submission



def graded_as(course: Course, listed: Listing, assignment: str | None) -> str:
    """The assignment a listed submission is graded as: the one given, else the one its
    notebooks' names tell (as the grader will find it), however the command was spelt."""
    if assignment:
        return assignment
    try:
        candidates, _ = candidates_of(course, listed)
    except (Refused, OSError, ValueError):
        return ""
    return assignment_by_names(course, candidates) or ""


def _hash_file(digest, base: Path, parts: tuple[str, ...], budget: list[int]) -> Seen:
    """Add a notebook file's bytes to `digest`, read as the grader reads it (no link followed);
    past the limits, its size, time and inode stand in for them. `budget`: bytes left to read.
    What was seen of the file (its SHA-256 None when its bytes were not all read)."""
    try:
        fd = open_inside(base, parts)
    except (Refused, OSError) as error:
        digest.update(f"unreadable {error}".encode("utf-8", "replace"))
        return Seen(None, -1, 0)
    try:
        info = os.fstat(fd)
        digest.update(f"{info.st_size} {info.st_nlink}".encode())
        if info.st_size > min(HASH_LIMIT, budget[0]):
            digest.update(f"{info.st_mtime_ns} {info.st_ino}".encode())
            return Seen(None, info.st_size, info.st_nlink)
        budget[0] -= info.st_size
        whole = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
            whole.update(chunk)
        return Seen(whole.hexdigest(), info.st_size, info.st_nlink)
    finally:
        os.close(fd)


class Seen(NamedTuple):
    """A notebook file as a fingerprint saw it: the SHA-256 of its bytes (None: not all read), its
    size and its number of names on disk."""
    sha256: str | None
    size: int
    links: int


@dataclass(frozen=True)
class Stamp:
    """A submission's fingerprint (`value`), and each regular notebook file as it was when it was
    taken (`files`: by its path in the submission, "" for a file submission): what the grader
    must have read for the grade to be recorded under `value` (`graded_as_stamped`)."""
    value: str
    files: dict[str, Seen] = field(default_factory=dict)


def stamp(listed: Listing, version: str, options: str) -> Stamp:
    """What grading depends on: the grader, the options, and each notebook of the listed
    submission (its path, what it is, its bytes), read as the grader reads them."""
    digest = hashlib.sha256(f"{version}|{options}".encode())
    base, parts, budget, files = listed.base, listed.parts, [HASH_BUDGET], {}
    digest.update(listed.kind.encode())
    if listed.kind == "file":
        files[""] = _hash_file(digest, base, parts, budget)
    elif listed.kind == "folder":
        if listed.unreadable is not None:
            digest.update(f"unreadable {listed.unreadable}".encode("utf-8", "replace"))
        for entry in listed.notebooks:
            path = "/".join(entry.parts)
            digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(entry.kind.encode())
            if entry.kind == "file":
                files[path] = _hash_file(digest, base, (*parts, *entry.parts), budget)
    return Stamp(digest.hexdigest()[:24], files)


def fingerprint(listed: Listing | Path, version: str, options: str, within: Path | None = None
                ) -> str:
    """The fingerprint of `stamp`; `listed`: the submission's listing, or its path (listed now,
    within `within`)."""
    if not isinstance(listed, Listing):
        listed = list_submission(listed, within)
    return stamp(listed, version, options).value


def graded_as_stamped(report: SubmissionReport, taken: Stamp) -> bool:
    """Whether every notebook the grader read, to tell the assignment by content
    (`SubmissionReport.read`) or to grade it (`NotebookReport.read`), was as `taken` saw it: the
    same bytes, or, where the grader refused it, for a reason the file had then too (not a
    regular file, its hard links, its size). When not (the files changed between the plan and
    the grading, or were too large to hash), the grade must not be recorded under `taken.value`,
    or a later run would keep it for files that were not graded."""
    reads = [report.read, *(notebook.read for notebook in report.notebooks)]
    if not all(isinstance(read, dict) for read in reads):
        return False
    return all(_as_seen(said, taken.files.get(path))
               for read in reads for path, said in read.items())


def _as_seen(said, seen: Seen | None) -> bool:
    """Whether what the grader said of reading a file (notebooks._note_read) is what `seen` (None:
    not a regular file when fingerprinted) leads to."""
    if not isinstance(said, str):
        return False
    if not said.startswith("refused: "):
        return seen is not None and seen.sha256 == said
    why = said.removeprefix("refused: ")
    if seen is None:
        return why.startswith("kind ")
    return why in (f"links {seen.links}", f"size {seen.size}") and why != "links 1"


def previous_fingerprint(folder: Path) -> str | None:
    try:
        return json.loads((folder / "results.json").read_text())["extra_data"]["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
