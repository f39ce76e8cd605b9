"""The exchange's inbound folder, as the feedback service reads it.

`nbgrader submit` copies a student's assignment folder to <exchange>/<course>/inbound/ under the
name `student+assignment+timestamp+random`. Anyone may write there, and the name is the student's
to choose, so the service takes the student from the folder's owner (its uid's account), not from
its name, and refuses one whose name says someone else. It copies the assignment's notebooks
into its own state folder the first time it sees the submission: what is graded is what was
submitted then, whatever happens to the exchange's copy afterwards. Each file is opened as the
grader opens files (no link followed), and its owner, names (hard links) and size are checked on
the open file itself, so nothing swapped in between is read.

The service takes nothing from an inbound folder that is not the instructor's own (`check_inbound`):
in an exchange root without the sticky bit, a student could replace the course's folder with one
of their own and read everyone's submissions there.
"""
from __future__ import annotations

import os
import pwd
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from tfcourse.course import Course
from tfcourse.batch.results import private_folder
from tfcourse.submission.files import Refused, file_limit_mb, read_inside
from tfcourse.submission.finding import candidates_in
from tfcourse.submission.notebooks import strip_outputs, strippable

from .ledger import remove_tree

KEY_BYTES = 200             # longer names are not nbgrader's (and "<name>.json" must fit in 255)
# nbgrader copies the notebooks, writes timestamp.txt, then opens the folder to everyone (0777):
# until then it is still being written, unless it has been there this long (made by another tool).
SETTLE_SECONDS = 60
JUNK = 100_000              # names of entries that are never submissions, remembered at most
# The inbound folder is listed again when it changed (its mtime), and at least this often; a listing
# made within CHANGE_SECONDS of its last change is not trusted to have seen that change (file
# systems whose times are coarse).
RELIST_SECONDS = 30
CHANGE_SECONDS = 2


@dataclass(frozen=True)
class Arrival:
    """One entry of the inbound folder: its name (unique: nbgrader adds the time and a random
    part), the student it names, the assignment, and the account that owns it."""
    key: str
    path: Path
    named: str              # the student in its name
    assignment: str
    owner: str              # the account that owns it ("uid N" when it has no name)
    uid: int = -1


def inbound(exchange: Path, course_id: str) -> Path:
    return Path(exchange) / course_id / "inbound"


def owner_of(info: os.stat_result) -> str:
    try:
        return pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        return f"uid {info.st_uid}"


def check_inbound(folder: Path) -> str:
    """Why the inbound folder cannot be trusted ("" when it can): it and the course's folder above
    it must be folders (not links) of this process's account, the inbound one unreadable by
    others (nbgrader makes it 0733)."""
    for path in (folder.parent, folder):
        try:
            info = os.lstat(path)
        except OSError as error:
            return f"{path}: {error.strerror} (nothing released yet?)"
        if not stat.S_ISDIR(info.st_mode):
            return f"{path} is not a folder"
        if info.st_uid != os.geteuid():
            return (f"{path} belongs to {owner_of(info)}, not to this service's account: someone "
                    f"may have replaced it (give the exchange root the sticky bit: chmod 1777)")
    if info.st_mode & 0o044:                    # the inbound folder's, the last looked at
        return f"{folder} can be listed by others: every student could read every submission"
    return ""


class Watcher:
    """Finds new entries in the inbound folder. Names that will never be a submission (a file, a
    link, a name nbgrader does not make) are remembered, so that a folder full of them costs one
    look each, not one per poll. While the folder itself is unchanged (its modification time, no
    entry added, removed or renamed), only the entries still being written are looked at again,
    with a whole listing at least every RELIST_SECONDS."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.junk: set[str] = set()
        self.listed: tuple[int, float] | None = None    # (folder's mtime_ns, when it was listed)
        self.unfinished: dict[str, str] = {}           # still being written: name -> path

    def arrivals(self, seen, now: float | None = None) -> list[Arrival]:
        """The entries not `seen` yet (a predicate on the name) and complete (SETTLE_SECONDS),
        oldest first by modification time."""
        now = time.time() if now is None else now
        try:
            stamp = os.lstat(self.folder).st_mtime_ns
            names = self._names(stamp, now)
        except OSError:
            return []
        found, self.unfinished = [], {}
        for key, path in names:
            if key in self.junk or seen(key):
                continue
            arrival = self._look(key, path, now)
            if arrival is not None:
                found.append(arrival)
        return [arrival for _, arrival in sorted(found, key=lambda item: (item[0], item[1].key))]

    def _names(self, stamp: int, now: float) -> list[tuple[str, str]]:
        """(name, path) of the entries to look at: every entry, or, while the folder is unchanged
        since a listing made well after its last change, those that were still being written."""
        if self.listed is not None and self.listed[0] == stamp and \
                self.listed[1] - stamp / 1e9 > CHANGE_SECONDS and \
                now - self.listed[1] < RELIST_SECONDS:
            return list(self.unfinished.items())
        names = [(entry.name, entry.path) for entry in os.scandir(self.folder)]
        self.listed = (stamp, now)
        return names

    def _look(self, key: str, path: str, now: float) -> tuple[float, Arrival] | None:
        """An entry: a complete submission (its mtime, the Arrival), or None (junk, remembered;
        or still being written, looked at again at the next poll)."""
        parts = key.split("+")
        if key.startswith(".") or len(os.fsencode(key)) > KEY_BYTES or \
                not key.isprintable() or len(parts) < 3 or not parts[0] or not parts[1]:
            self._junk(key)
            return None
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            self._junk(key)
            return None
        done = os.path.lexists(os.path.join(path, "timestamp.txt")) and \
            stat.S_IMODE(info.st_mode) & 0o777 == 0o777
        if not done and now - info.st_mtime < SETTLE_SECONDS:
            self.unfinished[key] = path                 # still being copied
            return None
        return info.st_mtime, Arrival(key, Path(path), parts[0], parts[1], owner_of(info),
                                      info.st_uid)

    def _junk(self, key: str) -> None:
        if len(self.junk) < JUNK:
            self.junk.add(key)


def snapshot(course: Course, arrival: Arrival, destination: Path) -> list[str]:
    """Copy the assignment's notebooks from `arrival` into `destination` (a new folder, 0700).
    A notebook larger than limits.notebook_mb is copied without its outputs, as the grader reads
    it; one still larger is not copied. One that would take too long to strip (millions of tiny
    strings: submission.strippable) is copied as it is, for the grader to refuse, saying why.
    Returns what was not copied, and why (the grader then says the notebook is missing)."""
    partial = destination.with_name(f".partial-{destination.name}")   # keys never start with .
    for old in (partial, destination):          # left by a service that stopped halfway
        remove_tree(old)
    private_folder(partial)
    skipped = []
    wanted = set(course.assignment(arrival.assignment).notebooks)
    base, parts = arrival.path.parent, (arrival.path.name,)
    try:
        candidates, links = candidates_in(course, base, parts)
    except (Refused, OSError) as error:         # not readable by the service: graded as empty
        candidates, links = {}, []
        skipped.append(f"{arrival.key}: {error}")
    small = course.limit("notebook_mb") * 1048576
    for name, notebook in candidates.items():
        if name not in wanted:
            continue
        try:
            data = bytes(read_inside(base, notebook.parts, file_limit_mb(course), len(parts),
                                     owner=arrival.uid))
            if len(data) > small and strippable(data):
                data = strip_outputs(data)
                if len(data) > small:
                    raise Refused("{name} is larger than {limit:g} MB without its outputs",
                                  {"name": name, "limit": course.limit("notebook_mb")})
        except (Refused, OSError) as error:
            skipped.append(f"{name}: {error}")
            continue
        with open(partial / name, "wb") as stream:
            os.fchmod(stream.fileno(), 0o600)
            stream.write(data)
    skipped += [f"{link}: a link, not followed" for link in links]
    os.replace(partial, destination)
    return skipped
