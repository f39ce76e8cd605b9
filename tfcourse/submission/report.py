"""What grading produces, as plain data: the results of each test, notes, timings; and how a
message of one is said in a language (`say`).

Light on purpose (no torch), so that nbgrader's configuration and the batch runner can read reports
without loading the grader.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tfcourse.i18n import LOCALE, render


PARAM_CHARS = 2000               # the longest value put into a message (a student's text is
                                 # cut shorter where it is read: 300 to 400 characters)
_CONTROL = dict.fromkeys([*range(0, 9), *range(11, 32), 127, *range(128, 160)])


def shown(value):
    """A value as it may appear in a message: text without control characters (no terminal
    escape reaches the instructor's screen) and at most PARAM_CHARS long; numbers as they are."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    text = value if isinstance(value, str) else repr(value)
    text = text.translate(_CONTROL)
    return text if len(text) <= PARAM_CHARS else text[:PARAM_CHARS] + "…"


@dataclass
class Note:
    """Something the student should know about their notebook (a template and its values)."""
    template: str
    params: dict = field(default_factory=dict)
    severity: str = "warning"          # warning: graded anyway; error: a part could not be graded


@dataclass
class TestResult:
    __test__ = False                # not a pytest test class
    id: str                         # "sdpa.values"
    points: float
    max_points: float
    template: str = ""              # why it failed (empty when it passed)
    params: dict = field(default_factory=dict)
    seconds: float = 0.0
    internal: bool = False          # the grader itself could not run this check
    graded: bool = True             # False: not graded by choice (skipped, deselected); its
                                    # points are left out of the total, which says so

    @property
    def passed(self) -> bool:
        return self.points >= self.max_points


@dataclass
class NotebookReport:
    name: str
    tests: list[TestResult] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)        # how each cell went when loaded
    seconds: float = 0.0
    peak_memory_mb: float = 0.0
    sandbox: str = ""
    extra: dict = field(default_factory=dict)
    # the SHA-256 of the notebook's bytes as the grader read them, by the file's path in the
    # submission: the runner records its fingerprint only if they are those it fingerprinted
    read: dict = field(default_factory=dict)


@dataclass
class SubmissionReport:
    assignment: str
    submission: str
    notebooks: list[NotebookReport] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None      # the grader itself failed: nothing was scored
    # what telling the assignment by the notebooks' cells read (as NotebookReport.read)
    read: dict = field(default_factory=dict)

    @property
    def tests(self) -> list[TestResult]:
        return [test for report in self.notebooks for test in report.tests]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionReport":
        notebooks = []
        for item in data.get("notebooks", []):
            item = dict(item)
            item["tests"] = [TestResult(**t) for t in item.get("tests", [])]
            item["notes"] = [Note(**n) for n in item.get("notes", [])]
            notebooks.append(NotebookReport(**item))
        return cls(assignment=data["assignment"], submission=data["submission"],
                   notebooks=notebooks, notes=[Note(**n) for n in data.get("notes", [])],
                   seconds=data.get("seconds", 0.0), error=data.get("error"),
                   read=data.get("read", {}))


# -- said, and written --------------------------------------------------------------------------
def _course_locale(root: Path) -> Path:
    """The catalog of a course's own messages (its graders'): autograder/locale."""
    return Path(root) / "autograder" / "locale"


# The course folder this package sits in (tfcourse/ beside autograder/), for `say` without a course.
FOLDERS = (_course_locale(Path(__file__).resolve().parents[2]), LOCALE)


def folders_of(course) -> tuple[Path, ...]:
    """Where messages are translated: the course's catalog (autograder/locale), then tfcourse's."""
    return FOLDERS if course is None else (_course_locale(course.root), LOCALE)


def say(template: str, params: dict | None, lang: str, course=None) -> str:
    """`template` in `lang` (see `folders_of`), each value as `shown` allows (whatever a report
    holds, no control character or page of student text reaches a page or a terminal)."""
    params = {key: shown(value) for key, value in (params or {}).items()}
    return render(template, params, lang, folders_of(course))


def finite(value):
    """`value` with every float that is not finite (NaN, infinity: a diverging loss, say) made
    None, in dicts and lists: JSON has no such numbers, and Gradescope's parser refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value
