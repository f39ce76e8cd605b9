"""Which notebooks a submission holds, and which assignment they are: by their names, else (in the
grader) by their cells. A grading job's are listed once, by the runner (`list_submission`: the
fingerprint of a batch's submission, its job's notebooks and what a cluster is sent all come from
that one listing), and matched by the grader on that list (`job_notebooks`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfcourse import notebook
from tfcourse.course import Course

from .files import (Entry, NotebookFile, Refused, file_limit_mb, is_notebook_name, kind_inside,
                    listing, split_submission)
from .job import Job
from .notebooks import read_notebook


@dataclass(frozen=True)
class Listing:
    """A submission as listed once: what `base/parts...` is, and, for a folder, the entries
    below it that grading looks at (its notebooks, which are never folders, and its links), in
    the order `listing` gives them. `unreadable`: why the folder could not be listed (then it
    has no entries)."""
    base: Path
    parts: tuple[str, ...]
    kind: str
    entries: tuple[Entry, ...] = ()
    unreadable: Refused | OSError | None = None

    @property
    def notebooks(self) -> list[Entry]:
        return [entry for entry in self.entries if is_notebook_name(entry.name)]

    @property
    def links(self) -> list[str]:
        return ["/".join(entry.parts) for entry in self.entries if entry.kind == "link"]


def list_submission(submission: Path, within: Path | None = None) -> Listing:
    """The submission at `submission`, listed (no link followed below `within`, by default the
    folder above it; ValueError: it is not inside `within`)."""
    return list_at(*split_submission(submission, within))


def list_at(base: Path, parts: tuple[str, ...]) -> Listing:
    kind = kind_inside(base, parts)
    if kind != "folder":
        return Listing(base, parts, kind)
    try:
        found = listing(base, parts)
    except (Refused, OSError) as error:        # swapped for a link after the look, or unreadable
        return Listing(base, parts, kind, unreadable=error)
    return Listing(base, parts, kind, tuple(
        entry for entry in found if entry.kind == "link" or
        (entry.kind != "folder" and is_notebook_name(entry.name))))


def candidates_in(course: Course, base: Path, parts: tuple[str, ...]
                  ) -> tuple[dict[str, NotebookFile], list[str]]:
    """`candidates_of` the submission `base/parts...`, listed now."""
    return candidates_of(course, list_at(base, parts))


def candidates_of(course: Course, listed: Listing) -> tuple[dict[str, NotebookFile], list[str]]:
    """The notebooks of a listed submission by name (the shallowest of each name), and the links
    below it that were not followed. A submission that is not a folder is its own one candidate
    (a link or a pipe too: reading it says why it is refused). OSError: it could not be listed."""
    base, parts = listed.base, listed.parts
    limit, skip = file_limit_mb(course), len(parts)
    if listed.kind == "missing":
        return {}, []
    if listed.kind != "folder" or isinstance(listed.unreadable, Refused):
        # not a folder; or it was swapped for a link after the look
        kind = "link" if listed.kind == "folder" else listed.kind
        return {parts[-1]: NotebookFile(base, parts, skip, kind, limit_mb=limit)}, []
    if listed.unreadable is not None:
        raise listed.unreadable
    notebooks = sorted(listed.notebooks, key=lambda e: (len(e.parts), e.parts))
    candidates: dict[str, NotebookFile] = {}
    for entry in notebooks:
        candidates.setdefault(entry.name, NotebookFile(base, (*parts, *entry.parts), skip,
                                                       entry.kind, limit_mb=limit))
    return candidates, listed.links


CONTENT_CANDIDATES = 8      # notebooks read to tell an assignment by their cells, at most


def assignment_by_content(course: Course, candidates: dict[str, NotebookFile],
                          read: dict[str, str | None] | None = None
                          ) -> tuple[str, dict[str, NotebookFile]] | None:
    """When no notebook's name tells the assignment (a class folder of alice.ipynb, bob.ipynb):
    the one whose source notebook shares the most grade ids (nbgrader's cell metadata, which a
    student's notebook keeps) with a candidate, and {its notebook's name: that candidate}. Each
    candidate is read as the grader reads it, within its limits (what each gave noted in `read`,
    as read_notebook does). None when no candidate shares one, or two assignments share as
    many."""
    from tfcourse.source import assignment_source

    known = {(a.id, source.name): set(source.kinds) for a in course.assignments
             for source in assignment_source(course, a.id).notebooks}
    matches = []
    for name, found in sorted(candidates.items())[:CONTENT_CANDIDATES]:
        raw, _ = read_notebook(found, course.limit("notebook_mb"), read)
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
    return match_notebooks(course, base, parts, candidates, links, assignment_id, by_content)


def assignment_by_names(course: Course, names) -> str | None:
    """The assignment with the most notebooks named among `names` (of two as many, the last
    id); None when no name is one of the course's."""
    best = max((sum(name in names for name in a.notebooks), a.id) for a in course.assignments)
    return best[1] if best[0] else None


def match_notebooks(course: Course, base: Path, parts: tuple[str, ...],
                    candidates: dict[str, NotebookFile], links: list[str],
                    assignment_id: str | None, by_content: bool = False,
                    read: dict[str, str | None] | None = None):
    """`find_notebooks` on the candidates found in the submission `base/parts...`: which is
    which of the assignment's notebooks (nothing is listed again)."""
    matched: dict[str, NotebookFile] = {}
    if assignment_id is None:
        assignment_id = assignment_by_names(course, candidates)
    if assignment_id is None:
        found = assignment_by_content(course, candidates, read) if by_content else None
        if found is None:
            return None, candidates
        assignment_id, matched = found
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


# -- a grading job's notebooks: found once, by the runner (job.py) --------------------------------
def listed(course: Course, submission: Path | Listing, within: Path | None = None
           ) -> tuple[dict[str, str], tuple[str, ...]]:
    """The notebooks of a submission as a job lists them: {path from /: what it is} of each
    candidate (`candidates_of`, in its order), and the links below it that were not followed.
    `submission`: its path (listed now), or its listing."""
    found = submission if isinstance(submission, Listing) else list_submission(submission, within)
    candidates, links = candidates_of(course, found)
    return ({str(found.base.joinpath(*file.parts)): file.kind for file in candidates.values()},
            tuple(links))


def job_candidates(course: Course, job: Job
                   ) -> tuple[Path, tuple[str, ...], dict[str, NotebookFile], list[str]]:
    """(base, parts, candidates, links) of the job's submission, as `candidates_in` found them
    when the runner listed them (job.notebooks), or found now when the job lists none."""
    base, parts = split_submission(job.submission, job.within)
    if job.notebooks is None:
        candidates, links = candidates_in(course, base, parts)
        return base, parts, candidates, links
    limit, candidates = file_limit_mb(course), {}
    for path, kind in job.notebooks.items():
        inner = Path(path).relative_to(base).parts      # ValueError: not in the submission
        if inner[:len(parts)] != parts:
            raise ValueError(f"the job's notebook {path} is not in {job.submission}")
        candidates[inner[-1]] = NotebookFile(base, inner, len(parts), kind, limit_mb=limit)
    return base, parts, candidates, list(job.unfollowed)


def job_notebooks(course: Course, job: Job, by_content: bool = False,
                  read: dict[str, str | None] | None = None):
    """`find_notebooks` for a job: on the notebooks it lists, without looking for them again
    (`read`: as assignment_by_content notes them)."""
    base, parts, candidates, links = job_candidates(course, job)
    return match_notebooks(course, base, parts, candidates, links, job.assignment, by_content,
                           read)


def listed_root_kind(job: Job) -> str | None:
    """What the job's submission itself was when its notebooks were listed: a notebook file, a
    link, a pipe... ("folder" for a folder or nothing there); None when the job lists none."""
    if job.notebooks is None:
        return None
    base, parts = split_submission(job.submission, job.within)
    return job.notebooks.get(str(base.joinpath(*parts)), "folder")
