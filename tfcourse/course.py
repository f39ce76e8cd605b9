"""The course as `course.yaml` describes it: assignments, their checks and points, limits.

Everything else reads the course through `load_course`; nothing here is repeated elsewhere.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

COURSE_FILE = "course.yaml"


class CourseError(Exception):
    """course.yaml is missing or says something tfcourse cannot use."""


@dataclass(frozen=True)
class CheckGroup:
    """One graded part: an nbgrader test cell whose grade_id is `id`, made of named tests."""
    id: str
    stubs: tuple[str, ...]
    tests: dict[str, float]

    @property
    def points(self) -> float:
        return float(sum(self.tests.values()))

    def test_ids(self) -> list[str]:
        return [f"{self.id}.{name}" for name in self.tests]


@dataclass(frozen=True)
class Assignment:
    id: str
    titles: dict[str, str]
    notebooks: tuple[str, ...]
    provides_module: str | None
    provides_names: tuple[str, ...]
    uses: tuple[str, ...]
    checks: tuple[CheckGroup, ...]

    def title(self, lang: str) -> str:
        return self.titles.get(lang) or self.titles.get("en") or self.id

    @property
    def points(self) -> float:
        return sum(group.points for group in self.checks)

    def group(self, group_id: str) -> CheckGroup:
        for group in self.checks:
            if group.id == group_id:
                return group
        raise KeyError(group_id)

    def points_of(self, test_id: str) -> float:
        group_id, _, name = test_id.partition(".")
        return float(self.group(group_id).tests[name])

    def test_ids(self) -> list[str]:
        return [test_id for group in self.checks for test_id in group.test_ids()]


@dataclass(frozen=True)
class Course:
    root: Path
    id: str
    titles: dict[str, str]
    language: str
    languages: tuple[str, ...]
    assignments: tuple[Assignment, ...]
    training: dict
    tolerance: dict
    limits: dict
    sandbox: dict
    rules: dict
    raw: dict = field(repr=False, default_factory=dict)

    def title(self, lang: str | None = None) -> str:
        lang = lang or self.language
        return self.titles.get(lang) or self.titles.get("en") or self.id

    def assignment(self, assignment_id: str) -> Assignment:
        for assignment in self.assignments:
            if assignment.id == assignment_id:
                return assignment
        known = ", ".join(a.id for a in self.assignments)
        raise CourseError(f"no assignment {assignment_id!r} in {COURSE_FILE} (known: {known})")

    def assignment_of_notebook(self, notebook_name: str) -> Assignment | None:
        for assignment in self.assignments:
            if notebook_name in assignment.notebooks:
                return assignment
        return None

    def provider_of(self, module: str) -> Assignment:
        for assignment in self.assignments:
            if assignment.provides_module == module:
                return assignment
        raise CourseError(f"no assignment provides the module {module!r}")

    @property
    def source_dir(self) -> Path:
        return self.root / "source"

    @property
    def release_dir(self) -> Path:
        return self.root / "release"

    @property
    def solutions_dir(self) -> Path:
        return self.root / "solutions"

    def limit(self, name: str) -> float:
        return float(self.limits[name])

    def forbidden_names(self) -> list[str]:
        allowed = set(self.rules.get("allowed") or [])
        return [name for name in self.rules.get("forbidden") or [] if name not in allowed]


def find_course_root(start: str | os.PathLike | None = None) -> Path:
    """The nearest folder at or above `start` (default: the working directory) with course.yaml."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / COURSE_FILE).is_file():
            return folder
    raise CourseError(f"no {COURSE_FILE} in {here} or any folder above it; "
                      f"run tfcourse inside the course folder or pass --course")


def _titles(value, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {"en": value}
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    raise CourseError(f"{where}: a title is a string or a mapping from language to string")


def _as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _check_group(group_id: str, spec: dict, where: str) -> CheckGroup:
    if not isinstance(spec, dict) or not isinstance(spec.get("tests"), dict) or not spec["tests"]:
        raise CourseError(f"{where}.{group_id}: needs `tests`, a mapping from test name to points")
    tests = {}
    for name, points in spec["tests"].items():
        if not isinstance(points, (int, float)) or points < 0:
            raise CourseError(f"{where}.{group_id}.{name}: points must be a number >= 0")
        tests[str(name)] = float(points)
    return CheckGroup(id=group_id, stubs=_as_tuple(spec.get("stub")), tests=tests)


def parse_course(data: dict, root: Path) -> Course:
    if not isinstance(data, dict):
        raise CourseError(f"{COURSE_FILE} must be a mapping")
    for key in ("id", "assignments", "training", "tolerance", "limits", "sandbox", "rules"):
        if key not in data:
            raise CourseError(f"{COURSE_FILE} has no `{key}`")
    languages = _as_tuple(data.get("languages") or ["en"])
    language = data.get("language", "en")
    if language not in languages:
        raise CourseError(f"language {language!r} is not among languages {list(languages)}")
    assignments = []
    for index, spec in enumerate(data["assignments"]):
        where = f"assignments[{index}]"
        if "id" not in spec or "notebooks" not in spec:
            raise CourseError(f"{where}: needs `id` and `notebooks`")
        provides = spec.get("provides") or {}
        checks = tuple(_check_group(gid, gspec, f"{where}.checks")
                       for gid, gspec in (spec.get("checks") or {}).items())
        assignments.append(Assignment(
            id=str(spec["id"]),
            titles=_titles(spec.get("title", spec["id"]), where),
            notebooks=_as_tuple(spec["notebooks"]),
            provides_module=provides.get("module"),
            provides_names=_as_tuple(provides.get("names")),
            uses=_as_tuple(spec.get("uses")),
            checks=checks,
        ))
    modules = {a.provides_module for a in assignments if a.provides_module}
    for assignment in assignments:
        for module in assignment.uses:
            if module not in modules:
                raise CourseError(f"{assignment.id} uses {module!r}, which no assignment provides")
    return Course(
        root=root,
        id=str(data["id"]),
        titles=_titles(data.get("title", data["id"]), "title"),
        language=language,
        languages=languages,
        assignments=tuple(assignments),
        training=dict(data["training"]),
        tolerance=dict(data["tolerance"]),
        limits=dict(data["limits"]),
        sandbox=dict(data["sandbox"]),
        rules=dict(data["rules"]),
        raw=data,
    )


def load_course(root: str | os.PathLike | None = None) -> Course:
    """Read course.yaml from `root`, or from the nearest course folder above the working directory."""
    root = Path(root).resolve() if root else find_course_root()
    path = root / COURSE_FILE
    if not path.is_file():
        raise CourseError(f"{path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CourseError(f"{path} is not valid YAML: {error}") from None
    return parse_course(data, root)
