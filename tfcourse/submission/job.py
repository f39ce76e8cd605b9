"""One grading job: what the runner resolved for one submission, handed to the grader process that
grades it as one document.

The runner (batch/child.py) resolves the job once: the submission and the folder it was found in,
its notebooks as found (the grader reads those, and searches no more), its assignment (as given,
or as those notebooks' names tell it), the checks skipped, and the settings of the grader's
sandboxes (where they go, the cgroups they are made beside, the memory the grader may use where no
cgroup holds it, and the key of the runner's zygote when it fits them). It writes the job as JSON
into a folder only it and the grader can read, and the grader (`python -m tfcourse.submission
--job FILE`) reads it back, checked field by field: a job that is not one fails with a message
that names the field. Descriptors cannot travel in a file: the zygote's control socket comes on
the command line (`--zygote-fd N`), as the grader has it. Nothing else passes between them: the
grader reads no variable of the runner's environment.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.settings import SandboxConfig

VERSION = 1
# What a notebook of a submission may be, as listed (finding.candidates_in): never a folder
NOTEBOOK_KINDS = ("file", "link", "fifo", "socket", "device", "other")


class JobError(ValueError):
    """A job document that is not one (written by another version, or damaged)."""


@dataclass(frozen=True)
class Job:
    submission: Path                    # as given, from /
    course: Path                        # the course folder
    out: Path                           # where the grader writes its report
    within: Path | None = None          # the instructor's folder it was found in (no link below)
    assignment: str | None = None       # given, or told by the notebooks' names; else by content
    threads: int = 1                    # torch threads of the student's process
    skip: tuple[str, ...] = ()          # checks not graded
    hide: tuple[Path, ...] = ()         # kept out of the sandbox's sight, besides the course
    parent: int | None = None           # the pid the grader dies with
    memory_mb: int | None = None        # the grader's own memory limit, where no cgroup holds it
    sandbox_folder: Path | None = None  # where its sandboxes are made (the runner removes it)
    cgroup_parents: dict[str, str] = field(default_factory=dict)   # controller -> folder
    # The runner's zygote (--zygote-fd) fits this job's sandboxes: its key, and theirs
    zygote_key: str | None = None
    # Its notebooks as found (the shallowest of each name), from /, with what each is (a file, a
    # link...), and the links below it not followed; None: not looked for yet (a job made by hand)
    notebooks: dict[str, str] | None = None
    unfollowed: tuple[str, ...] = ()

    def sandbox_config(self, course, files: dict[str, str]) -> SandboxConfig:
        """The settings of this job's sandboxes: the course's, with the job's threads, what it
        hides, and where its sandboxes and their cgroups are made. The runner asks them too, to
        tell whether its zygote fits them."""
        config = SandboxConfig.from_course(course, files, self.threads,
                                           [self.submission, *self.hide])
        config.folder, config.cgroup_parents = self.sandbox_folder, dict(self.cgroup_parents)
        return config

    def write(self, path: Path) -> None:
        data = {"version": VERSION, **{f.name: _plain(getattr(self, f.name))
                                       for f in dataclasses.fields(self)}}
        path.write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> "Job":
        """The job written at `path`; JobError says which field is wrong."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise JobError(f"the job {path} cannot be read: {error}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data) -> "Job":
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise JobError(f"not a grading job of version {VERSION}")
        unknown = set(data) - {"version"} - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise JobError(f"the job has unknown fields: {', '.join(sorted(unknown))}")
        values = {}
        for name, (kind, optional) in _KINDS.items():
            if name not in data:
                if name in _REQUIRED:
                    raise JobError(f"the job has no {name}")
                continue
            values[name] = _checked(name, data[name], kind, optional)
        return cls(**values)


_REQUIRED = ("submission", "course", "out")
_KINDS = {"submission": (Path, False), "course": (Path, False), "out": (Path, False),
          "within": (Path, True), "assignment": (str, True), "threads": (int, False),
          "skip": ((str,), False), "hide": ((Path,), False), "parent": (int, True),
          "memory_mb": (int, True), "sandbox_folder": (Path, True),
          "cgroup_parents": (dict, False), "zygote_key": (str, True),
          "notebooks": ("notebooks", True), "unfollowed": ((str,), False)}


def _plain(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def _checked(name: str, value, kind, optional: bool):
    """`value` as field `name` holds it, or JobError."""
    if value is None and optional:
        return None
    if isinstance(kind, tuple):                     # a list of one kind
        if not isinstance(value, list):
            raise JobError(f"the job's {name} is not a list")
        return tuple(_checked(name, item, kind[0], False) for item in value)
    if kind is Path:
        if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
            raise JobError(f"the job's {name} is not an absolute path: {value!r:.80}")
        return Path(value)
    if kind is int:
        if type(value) is not int or value < 0:
            raise JobError(f"the job's {name} is not a whole number: {value!r:.80}")
        return value
    if kind == "notebooks":
        if not isinstance(value, dict) or not all(
                isinstance(path, str) and path.startswith("/") and "\0" not in path and
                found in NOTEBOOK_KINDS for path, found in value.items()):
            raise JobError(f"the job's {name} is not a map of paths to what they are")
        return dict(value)
    if kind is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
            raise JobError(f"the job's {name} is not a map of names to folders")
        return dict(value)
    if not isinstance(value, kind):
        raise JobError(f"the job's {name} is not {kind.__name__}: {value!r:.80}")
    return value
