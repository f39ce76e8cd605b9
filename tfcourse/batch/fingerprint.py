"""Fingerprints: what a submission's grading depends on, so that a second run grades only what is
new or changed. A fingerprint hashes the grader's version (child.grader_version), the options and
each notebook of the submission, read as the grader reads it (no link followed), as listed once
for both (finding.list_submission): the grade is recorded under the fingerprint of the files that
were graded.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tfcourse.course import Course

from ..submission.files import Refused, open_inside
from ..submission.finding import Listing, assignment_by_names, candidates_of, list_submission

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


def _hash_file(digest, base: Path, parts: tuple[str, ...], budget: list[int]) -> None:
    """Add a notebook file's bytes to `digest`, read as the grader reads it (no link followed);
    past the limits, its size, time and inode stand in for them. `budget`: bytes left to read."""
    try:
        fd = open_inside(base, parts)
    except (Refused, OSError) as error:
        digest.update(f"unreadable {error}".encode("utf-8", "replace"))
        return
    try:
        info = os.fstat(fd)
        digest.update(f"{info.st_size} {info.st_nlink}".encode())
        if info.st_size > min(HASH_LIMIT, budget[0]):
            digest.update(f"{info.st_mtime_ns} {info.st_ino}".encode())
            return
        budget[0] -= info.st_size
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)


def fingerprint(listed: Listing | Path, version: str, options: str, within: Path | None = None
                ) -> str:
    """What grading depends on: the grader, the options, and each notebook of the listed
    submission (its path, what it is, its bytes), read as the grader reads them. `listed`: the
    submission's listing, or its path (listed now, within `within`)."""
    if not isinstance(listed, Listing):
        listed = list_submission(listed, within)
    digest = hashlib.sha256(f"{version}|{options}".encode())
    base, parts, budget = listed.base, listed.parts, [HASH_BUDGET]
    digest.update(listed.kind.encode())
    if listed.kind == "file":
        _hash_file(digest, base, parts, budget)
    elif listed.kind == "folder":
        if listed.unreadable is not None:
            digest.update(f"unreadable {listed.unreadable}".encode("utf-8", "replace"))
        for entry in listed.notebooks:
            digest.update("/".join(entry.parts).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(entry.kind.encode())
            if entry.kind == "file":
                _hash_file(digest, base, (*parts, *entry.parts), budget)
    return digest.hexdigest()[:24]


def previous_fingerprint(folder: Path) -> str | None:
    try:
        return json.loads((folder / "results.json").read_text())["extra_data"]["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
