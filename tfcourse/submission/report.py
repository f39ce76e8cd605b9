"""What grading produces, as plain data: the results of each test, notes, timings.

Light on purpose (no torch), so that nbgrader's configuration and the batch runner can read reports
without loading the grader.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


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


@dataclass
class SubmissionReport:
    assignment: str
    submission: str
    notebooks: list[NotebookReport] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None      # the grader itself failed: nothing was scored

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
                   seconds=data.get("seconds", 0.0), error=data.get("error"))
