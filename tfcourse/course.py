"""The course as `course.yaml` describes it: assignments, their checks and points, limits.

Everything else reads the course through `load_course`; nothing here is repeated elsewhere.

course.yaml is read once, into frozen objects, and checked while it is read: a key this module
does not know, a value of the wrong type, out of range or missing is a `CourseError` that names the
key's path (`course.yaml: limits.check_secnds: unknown key (known: check_seconds, ...)`), before
anything is graded. Each section is a frozen dataclass whose fields are its keys (`setting`
says how a field is read); `read_mapping` checks a mapping from course.yaml against one.
"""
from __future__ import annotations

import contextlib
import datetime
import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import yaml

from .schema import (COURSE_FILE, CourseError, _at, _path, _read_only, _show, read_mapping,
                     read_value, setting)



# -- the sections --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """Numerics against the reference (course.yaml `tolerance`)."""
    atol: float = setting(low=0, help="absolute tolerance of values compared with the reference")
    rtol: float = setting(low=0, help="relative tolerance of values compared with the reference")


@dataclass(frozen=True)
class Limits:
    """course.yaml `limits`; `Course.limit(name)` gives one as a float."""
    check_seconds: float = setting(above=0, help="CPU seconds of the student's processes for "
                                                  "one check (the training check has its own "
                                                  "limit)")
    training_seconds: float = setting(above=0, help="CPU seconds for the training check")
    submission_seconds: float = setting(above=0, help="CPU seconds for one notebook, all checks "
                                                       "together")
    cell_seconds: float = setting(above=0, help="CPU seconds for one notebook cell while the "
                                                 "submission's code is loaded")
    notebook_mb: float = setting(above=0, help="larger notebook files are read without their "
                                                "outputs")
    memory_mb: int = setting(3072, above=0, help="MB for the student's processes together, shared "
                                                 "memory and memfd included")
    disk_mb: int = setting(256, above=0, help="MB they may write, work folder and temporary files "
                                              "together; also the largest single file")
    processes: int = setting(64, above=0, help="processes and threads the student's code may run")
    output_kb: int = setting(256, above=0, help="what the student's code may print (KB)")
    notebook_file_mb: float = setting(256.0, above=0, help="larger notebook files are refused")
    code_kb: float = setting(256.0, above=0, help="the student's code in one notebook, at most")
    literal_kb: float = setting(4.0, above=0, help="the literal data in the student's code in "
                                                   "one notebook, at most: string and bytes "
                                                   "constants but docstrings, number literals")
    grader_memory_mb: int = setting(2048, above=0, help="memory of the trusted grader of one "
                                                         "submission (MB)")
    wait_factor: float = setting(4.0, low=1, help="a request whose time is CPU seconds is also "
                                                  "stopped after waiting this many times as long "
                                                  "(plus wait_floor_seconds) while using little "
                                                  "CPU: code that sleeps or blocks")
    wait_floor_seconds: float = setting(60.0, low=0, help="seconds added to that wait")
    idle_seconds: float = setting(10.0, above=0, help="seconds one request (a cell, a check's "
                                                      "call) may wait doing nothing: none of the "
                                                      "student's threads runnable (a sleep, "
                                                      "input(), a lock); waiting for a CPU on a "
                                                      "busy machine does not count")
    idle_total_seconds: float = setting(60.0, above=0, help="seconds all of a notebook's "
                                                            "requests together may wait so")


IsolationMode = Literal["auto", "bwrap", "process"]
CpuKernels = Literal["avx2", "auto"]
AcceptWeaker = Literal[False, "process", "same-user"]


@dataclass(frozen=True)
class SandboxSettings:
    """How student code is isolated (course.yaml `sandbox`; tfcourse/sandbox/launch.py)."""
    isolation: IsolationMode = setting("auto", help="auto or bwrap: bubblewrap, which shows "
                                                     "student code only the interpreter and its "
                                                     "own folder; process: a plain process")
    accept_weaker: AcceptWeaker = setting(False, aliases=((True, "process"), ("no", False)),
                                          help="how much weaker than bubblewrap isolation may be; "
                                               "true means process, \"no\" false")
    user: str = setting("nobody", help="when grading as root, student code runs as this user")
    gpu: bool = setting(False, help="student code may use the machine's GPUs")
    threads: int = setting(1, low=1, help="torch threads of the student's process")
    cpu_kernels: CpuKernels = setting("avx2", help="torch's CPU kernels there "
                                                   "(tfcourse/sandbox/launch.py says why)")


@dataclass(frozen=True)
class Rules:
    """course.yaml `rules`: torch's names a stub must not reach, and exceptions to them."""
    forbidden: tuple[str, ...] = setting(help="torch's names a stub must not reach (its last "
                                              "part is matched anywhere under torch)")
    allowed: tuple[str, ...] = setting((), help="names of `forbidden` that are allowed after all")


Visibility = Literal["visible", "score_only", "after_deadline"]


def _visibilities(value, where: str) -> Mapping[str, str]:
    """feedback.checks: a check (group.test) or a group, to what it shows before the deadline."""
    if value is None:
        return _read_only({})
    if not isinstance(value, Mapping):
        raise CourseError(f"{_at(where)}must be a mapping from a check (group.test) or a group "
                          f"to visible, score_only or after_deadline, not {_show(value)}")
    return _read_only({str(check): read_value(shown, Visibility, {}, _path(where, check))
                       for check, shown in value.items()})


@dataclass(frozen=True)
class FeedbackOnSubmit:
    """course.yaml `feedback`: the hub's feedback on submit (tfcourse/hub/, docs/jupyterhub.md).
    Fair use: gradings per student and assignment in any hour and any 24 hours; what each check
    shows before its assignment's deadline (after it, everything)."""
    per_hour: int = setting(3, low=0, help="gradings per student and assignment in any hour")
    per_day: int = setting(12, low=0, help="gradings per student and assignment in any 24 hours")
    before_deadline: Visibility = setting("visible", help="what a check shows before the "
                                                          "deadline")
    checks: Mapping[str, str] = setting(factory=lambda: MappingProxyType({}), read=_visibilities,
                                        what="a mapping from check to visibility",
                                        help="a check (group.test) or a group, to what it shows "
                                             "before the deadline, where not before_deadline")

    def visibility(self, test_id: str) -> str:
        """What the check `test_id` (group.test) shows before the deadline."""
        group = test_id.partition(".")[0]
        return self.checks.get(test_id) or self.checks.get(group) or self.before_deadline


def _deadline(value, where: str) -> datetime.datetime | None:
    """An assignment's `due`: a date and time with its UTC offset (YAML reads
    2027-01-15T23:59:00+01:00 as one)."""
    if value is None:
        return None
    written = value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.datetime.fromisoformat(value)
    if not isinstance(value, datetime.datetime):
        raise CourseError(f"{_at(where)}must be a date and time such as "
                          f"2027-01-15T23:59:00+01:00, not {_show(written)}")
    if value.tzinfo is None:
        raise CourseError(f"{_at(where)}needs its UTC offset (2027-01-15T23:59:00+01:00, or Z "
                          f"for UTC): without it, the deadline depends on the server's clock zone")
    return value


# -- assignments -----------------------------------------------------------------------------------
def _titles(value, where: str) -> Mapping[str, str]:
    if isinstance(value, str) and value:
        return _read_only({"en": value})
    if isinstance(value, Mapping) and value:
        for lang, title in value.items():
            if not isinstance(lang, str) or not isinstance(title, str) or not title:
                raise CourseError(f"{_at(_path(where, lang))}must be a non-empty string, "
                                  f"not {_show(title)}")
        return _read_only(value)
    raise CourseError(f"{_at(where)}must be a string or a mapping from language to string, "
                      f"not {_show(value)}")


def _name_in(value, where: str, what: str) -> str:
    """A key of course.yaml that names a check group or a test: a Python name, since the check
    `group.test` is graded by the test function test_<group>_<test>."""
    if not isinstance(value, str) or not value.isidentifier():
        raise CourseError(f"{_at(where)}{what} must be a name made of letters, digits and _ "
                          f"(its grader is the function test_<group>_<test>), not {_show(value)}")
    return value


def _tests(value, where: str) -> Mapping[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise CourseError(f"{_at(where)}must be a mapping from test name to points, "
                          f"not {_show(value)}")
    tests = {}
    for name, points in value.items():
        _name_in(name, _path(where, name), "a test's name")
        if type(points) not in (int, float) or not math.isfinite(points) or points < 0:
            raise CourseError(f"{_at(_path(where, name))}points must be a number >= 0, "
                              f"not {_show(points)}")
        tests[name] = float(points)
    return _read_only(tests)


def _stub_of(value, where: str) -> Mapping[str, str]:
    if value is None:
        return _read_only({})
    if not isinstance(value, Mapping) or not all(
            isinstance(name, str) and isinstance(stub, str) and stub
            for name, stub in value.items()):
        raise CourseError(f"{_at(where)}must be a mapping from test name to the one stub it "
                          f"checks, not {_show(value)}")
    return _read_only(dict(value))


@dataclass(frozen=True)
class CheckGroup:
    """One graded part: an nbgrader test cell whose grade_id is `id`, made of named tests."""
    id: str                                      # its key in `checks`
    tests: Mapping[str, float] = setting(read=_tests, what="a mapping from test name to points")
    stubs: tuple[str, ...] = setting((), key="stub")
    # In a group of several stubs, the tests that each check one of them: a missing stub, or one
    # that breaks the rules, then costs only its own tests
    stub_of: Mapping[str, str] = setting(factory=dict, read=_stub_of)

    @property
    def points(self) -> float:
        return float(sum(self.tests.values()))

    def part(self, test: str) -> tuple[str, tuple[str, ...]]:
        """What test `test` is judged with (whether its stubs are there and keep the rules): the
        group and the stubs it checks, the one `stub_of` names or else all of the group's."""
        return self.id, (self.stub_of[test],) if test in self.stub_of else self.stubs

    def test_ids(self) -> list[str]:
        return [f"{self.id}.{name}" for name in self.tests]


def _checks(value, where: str) -> tuple[CheckGroup, ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise CourseError(f"{_at(where)}must be a mapping from group to its stub and tests, "
                          f"not {_show(value)}")
    groups = tuple(CheckGroup(id=_name_in(gid, _path(where, gid), "a group's name"),
                              **read_mapping(CheckGroup, spec, _path(where, gid)))
                   for gid, spec in value.items())
    for group in groups:
        for test, stub in group.stub_of.items():
            at = _path(_path(_path(where, group.id), "stub_of"), test)
            if test not in group.tests:
                raise CourseError(f"{_at(at)}names no test of the group (its tests: "
                                  f"{', '.join(group.tests)})")
            if stub not in group.stubs:
                raise CourseError(f"{_at(at)}{stub} is not one of the group's stubs "
                                  f"({', '.join(group.stubs)})")
    return groups


def _notebooks(value, where: str) -> tuple[str, ...]:
    names = read_value(value, tuple[str, ...], {}, where)
    if not names:
        raise CourseError(f"{_at(where)}must name at least one notebook")
    for index, name in enumerate(names):
        if not name.endswith(".ipynb") or "/" in name or "\\" in name or name.startswith("."):
            raise CourseError(f"{_at(f'{where}[{index}]')}must be a notebook's file name "
                              f"(name.ipynb), not {_show(name)}")
    return names


def _graders(value, where: str) -> str:
    if not isinstance(value, str) or not value.endswith(".py") or len(value) <= 3 or \
            "/" in value or "\\" in value or value.startswith("."):
        raise CourseError(f"{_at(where)}must be the file name of a module in autograder/ "
                          f"(test_name.py), not {_show(value)}")
    return value


@dataclass(frozen=True)
class Provides:
    """What an assignment's solution gives later ones: a module of these names."""
    module: str = setting()
    names: tuple[str, ...] = setting()


@dataclass(frozen=True)
class Assignment:
    id: str = setting()
    notebooks: tuple[str, ...] = setting(read=_notebooks, what="a list of notebook file names")
    # autograder/<graders>: its pytest graders (default: test_<first notebook's stem>.py)
    graders: str = setting(optional=True, read=_graders, what="a file name in autograder/")
    titles: Mapping[str, str] = setting(key="title", factory=lambda: MappingProxyType({}),
                                        read=_titles,
                                        what="a string or a mapping from language to string")
    provides: Provides | None = setting(None)
    uses: tuple[str, ...] = setting(())
    checks: tuple[CheckGroup, ...] = setting((), read=_checks)
    # the deadline: feedback on submit shows some checks only after it (course.yaml `feedback`)
    due: datetime.datetime | None = setting(None, read=_deadline, what="a date and time")

    @property
    def provides_module(self) -> str | None:
        return self.provides.module if self.provides else None

    @property
    def provides_names(self) -> tuple[str, ...]:
        return self.provides.names if self.provides else ()

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


def _assignment(spec, where: str) -> Assignment:
    values = read_mapping(Assignment, spec, where)
    values.setdefault("graders", f"test_{Path(values['notebooks'][0]).stem}.py")
    values["titles"] = values.get("titles") or _read_only({"en": values["id"]})
    return Assignment(**values)


def _assignments(value, where: str) -> tuple[Assignment, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise CourseError(f"{_at(where)}must be a list of assignments, not {_show(value)}")
    assignments = tuple(_assignment(spec, f"{where}[{index}]") for index, spec in enumerate(value))
    seen: dict[str, int] = {}
    for index, assignment in enumerate(assignments):
        if assignment.id in seen:
            raise CourseError(f"{_at(f'{where}[{index}].id')}{assignment.id!r} is also "
                              f"{where}[{seen[assignment.id]}]'s id")
        seen[assignment.id] = index
    notebooks: dict[str, str] = {}
    for index, assignment in enumerate(assignments):
        for name in assignment.notebooks:
            if notebooks.setdefault(name, assignment.id) != assignment.id:
                raise CourseError(f"{_at(f'{where}[{index}].notebooks')}{name!r} is also a "
                                  f"notebook of {notebooks[name]}")
    modules = {a.provides_module for a in assignments if a.provides_module}
    for index, assignment in enumerate(assignments):
        for module in assignment.uses:
            if module not in modules:
                raise CourseError(f"{_at(f'{where}[{index}].uses')}{assignment.id} uses "
                                  f"{module!r}, which no assignment provides")
    return assignments


def _parameter_sections(value, where: str) -> Mapping[str, Mapping]:
    """course.yaml's `parameters`: a mapping of sections, each a mapping; what each section
    holds is checked against the graders' declarations (`check_parameters`)."""
    if not isinstance(value, Mapping):
        raise CourseError(f"{_at(where)}must be a mapping of sections, not {_show(value)}")
    for section, settings in value.items():
        if not isinstance(settings, Mapping):
            raise CourseError(f"{_at(_path(where, section))}must be a mapping (key: value lines), "
                              f"not {_show(settings)}")
    return _read_only({str(section): _read_only(dict(settings))
                       for section, settings in value.items()})


PARAMETERS_FILE = Path("autograder") / "parameters.py"


def declared_parameters(root: Path) -> Mapping[str, tuple]:
    """The graders' declared parameter sections (autograder/parameters.py's PARAMETERS: section
    -> (dataclass, help)); none where the course has no such file."""
    path = Path(root) / PARAMETERS_FILE
    if not path.is_file():
        return {}
    import importlib.util
    import sys

    name = f"_tfcourse_parameters_{abs(hash(str(path.resolve())))}"
    module = sys.modules.get(name)
    imported = sys.modules.get("autograder.parameters")     # the graders' own import of it
    if imported is not None and Path(getattr(imported, "__file__", "")).resolve() == \
            path.resolve():
        module = imported
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return dict(getattr(module, "PARAMETERS", {}))


def check_parameters(course: "Course") -> None:
    """Every declared section is in course.yaml's `parameters` and valid; no other is there."""
    declared = declared_parameters(course.root)
    if not declared:
        return
    for section in course.parameters:
        if section not in declared:
            close = difflib.get_close_matches(section, list(declared), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise CourseError(f"{_at(_path('parameters', section))}no grader declares it "
                              f"(declared: {', '.join(declared)}){hint}")
    for section in declared:
        course.parameter(section)


# -- the course ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Course:
    root: Path
    id: str = setting(help="the course's id")
    assignments: tuple[Assignment, ...] = setting(read=_assignments, what="a list of assignments",
                                                  help="the assignments, in order")
    tolerance: Tolerance = setting(help="numerics against the reference")
    limits: Limits = setting(help="time, memory and size limits of grading")
    sandbox: SandboxSettings = setting(help="how student code is isolated")
    rules: Rules = setting(help="torch's ready-made attention, which stubs must not reach")
    titles: Mapping[str, str] = setting(key="title", optional=True, read=_titles,
                                        what="a string or a mapping from language to string",
                                        help="the course's title, or one per language")
    language: str = setting("en", help="the edition `tfcourse build` writes")
    languages: tuple[str, ...] = setting(("en",), help="the languages of the course's editions")
    feedback: FeedbackOnSubmit = setting(factory=FeedbackOnSubmit,
                                         help="the hub's feedback on submit")
    parameters: Mapping[str, Mapping] = setting(
        factory=lambda: MappingProxyType({}), read=_parameter_sections,
        what="a mapping of sections", help="the graders' own settings, one section each, as "
        "the course's autograder/parameters.py declares them")
    # course.yaml as read, read-only at its top (for a test or a tool that writes a variant)
    raw: Mapping = field(repr=False, compare=False, default_factory=lambda: MappingProxyType({}))

    def title(self, lang: str | None = None) -> str:
        lang = lang or self.language
        return self.titles.get(lang) or self.titles.get("en") or self.id

    def assignment(self, assignment_id: str) -> Assignment:
        for assignment in self.assignments:
            if assignment.id == assignment_id:
                return assignment
        known = ", ".join(a.id for a in self.assignments)
        raise CourseError(f"no assignment {assignment_id!r} in {COURSE_FILE} (known: {known})")

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
        """One of course.yaml's `limits`, as a float."""
        known = [f.name for f in fields(Limits)]
        if name not in known:
            raise CourseError(f"no limit {name!r} in {COURSE_FILE} (known: {', '.join(known)})")
        return float(getattr(self.limits, name))

    def parameter(self, section: str):
        """One section of course.yaml's `parameters`, read as the graders declare it
        (autograder/parameters.py): a frozen dataclass of its settings."""
        declared = declared_parameters(self.root)
        if section not in declared:
            raise CourseError(f"{_at(_path('parameters', section))}no grader declares it "
                              f"(autograder/parameters.py declares: "
                              f"{', '.join(declared) or 'nothing'})")
        if section not in self.parameters:
            raise CourseError(f"{_at(_path('parameters', section))}is missing")
        cls = declared[section][0]
        return cls(**read_mapping(cls, self.parameters[section], _path("parameters", section)))

    def forbidden_names(self) -> list[str]:
        allowed = set(self.rules.allowed)
        return [name for name in self.rules.forbidden if name not in allowed]


def find_course_root(start: str | os.PathLike | None = None) -> Path:
    """The nearest folder at or above `start` (default: the working directory) with course.yaml."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / COURSE_FILE).is_file():
            return folder
    raise CourseError(f"no {COURSE_FILE} in {here} or any folder above it; "
                      f"run tfcourse inside the course folder or pass --course")


def parse_course(data: Mapping, root: Path) -> Course:
    """The course that `data` (course.yaml, as YAML reads it) describes; a CourseError naming the
    key's path for anything unknown, of the wrong type or missing."""
    values = read_mapping(Course, data, "")
    values["titles"] = values.get("titles") or _read_only({"en": values["id"]})
    course = Course(root=Path(root), **values, raw=_read_only(data))
    known = {name for a in course.assignments for group in a.checks
             for name in (group.id, *group.test_ids())}
    for check in course.feedback.checks:
        if check not in known:
            close = difflib.get_close_matches(check, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise CourseError(f"{_at(f'feedback.checks.{check}')}no assignment has this check "
                              f"or group{hint}")
    if course.language not in course.languages:
        raise CourseError(f"{_at('language')}{course.language!r} is not among languages "
                          f"({', '.join(course.languages)})")
    check_parameters(course)
    return course


def load_course(root: str | os.PathLike | None = None) -> Course:
    """Read course.yaml from `root`, or from the nearest course folder above the working
    directory."""
    root = Path(root).resolve() if root else find_course_root()
    path = root / COURSE_FILE
    if not path.is_file():
        raise CourseError(f"{path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise CourseError(f"{path} is not valid YAML: {error}") from None
    return parse_course(data, root)
