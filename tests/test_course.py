"""course.yaml, the checks that implement it and the notebooks agree with each other."""
import importlib
import inspect

import pytest

from tfcourse import notebook
from tfcourse.course import CourseError, parse_course

from conftest import ROOT


def test_every_test_in_course_yaml_has_a_grader_and_back(course):
    """One pytest test function per check id: test_<group>_<test> in the module course.yaml
    names as the assignment's graders."""
    for assignment in course.assignments:
        module = importlib.import_module(f"autograder.{assignment.graders.removesuffix('.py')}")
        defined = {name for name, value in vars(module).items()
                   if name.startswith("test_") and inspect.isfunction(value)}
        declared = {f"test_{test_id.replace('.', '_')}" for test_id in assignment.test_ids()}
        assert declared == defined, (
            f"{assignment.id}: in course.yaml only: {sorted(declared - defined)}; "
            f"in autograder/{assignment.graders} only: {sorted(defined - declared)}")


def test_each_group_has_one_test_cell_with_its_points(course):
    for assignment in course.assignments:
        nb = notebook.read(ROOT / "source" / assignment.id / assignment.notebooks[0])
        cells = {notebook.grade_id(c): c for c in nb.cells if notebook.is_test(c)}
        assert set(cells) == {group.id for group in assignment.checks}
        for group in assignment.checks:
            assert cells[group.id].metadata.nbgrader.points == group.points


def test_each_stub_named_in_course_yaml_is_defined_by_an_answer_cell(course):
    for assignment in course.assignments:
        nb = notebook.read(ROOT / "source" / assignment.id / assignment.notebooks[0])
        code = "\n".join(notebook.text(c) for c in nb.cells if notebook.is_solution(c))
        for group in assignment.checks:
            for stub in group.stubs:
                assert f"def {stub}(" in code or f"class {stub}(" in code, stub


def test_provided_names_exist_in_the_helper_modules(course):
    for assignment in course.assignments:
        if assignment.provides_module:
            consumer = next(a for a in course.assignments if assignment.provides_module in a.uses)
            text = (ROOT / "source" / consumer.id / f"{assignment.provides_module}.py").read_text()
            for name in assignment.provides_names:
                assert f"def {name}(" in text or f"class {name}(" in text, name


def test_course_yaml_errors_are_plain_words(course):
    with pytest.raises(CourseError, match="uses 'nowhere'"):
        parse_course({**course.raw, "assignments": [
            {**course.raw["assignments"][0], "uses": ["nowhere"]}]}, ROOT)
    with pytest.raises(CourseError, match="points must be a number"):
        parse_course({**course.raw, "assignments": [
            {"id": "x", "notebooks": ["x.ipynb"],
             "checks": {"g": {"tests": {"t": "many"}}}}]}, ROOT)


def test_the_readmes_points_are_course_yamls(course):
    """The table of assignments in README.md gives each assignment's points from course.yaml."""
    import re

    rows = re.findall(r"^\| `([\w-]+)` \|.*\| (\d+) \|$", (ROOT / "README.md").read_text(),
                      re.MULTILINE)
    assert {name: float(points) for name, points in rows} == {
        a.id: a.points for a in course.assignments}
