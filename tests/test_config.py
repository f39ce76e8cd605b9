"""course.yaml is read into frozen, typed objects, and anything wrong in it is a CourseError that
names the key's path, before any grading starts (fast: no torch, no subprocess)."""
from __future__ import annotations

import copy
import dataclasses
import re

import pytest
import yaml

from tfcourse.course import (COURSE_FILE, Course, CourseError, Limits, Rules, SandboxSettings,
                             Tolerance, Training, load_course, parse_course)

from conftest import ROOT


@pytest.fixture(scope="module")
def data() -> dict:
    return yaml.safe_load((ROOT / COURSE_FILE).read_text(encoding="utf-8"))


def changed(data: dict, path: str, value=None, *, delete: bool = False) -> dict:
    """A copy of course.yaml's data with the key at `path` (`limits.memory_mb`,
    `assignments[1].checks.ffn.tests.values`) set to `value`, or deleted."""
    data = copy.deepcopy(data)
    steps = [int(step) if step.isdigit() else step for step in re.findall(r"[^.\[\]]+", path)]
    target = data
    for step in steps[:-1]:
        target = target[step]
    if delete:
        del target[steps[-1]]
    else:
        target[steps[-1]] = value
    return data


def error_of(data: dict) -> str:
    with pytest.raises(CourseError) as raised:
        parse_course(data, ROOT)
    return str(raised.value)


def test_the_course_loads_into_typed_objects():
    course = load_course(ROOT)
    assert isinstance(course, Course)
    assert course.training == Training(seed=0, eval_sequences=1000, eval_length=10,
                                       threshold=0.99)
    assert course.tolerance == Tolerance(atol=1e-5, rtol=1e-4)
    assert isinstance(course.limits, Limits) and course.limits.check_seconds == 30.0
    assert course.limits.memory_mb == 3072 and type(course.limits.memory_mb) is int
    assert course.limit("submission_seconds") == 900.0
    assert course.limits.notebook_file_mb == 256.0           # not in course.yaml: its default
    assert course.sandbox == SandboxSettings(isolation="auto", accept_weaker=False, user="nobody",
                                             gpu=False, threads=1)
    assert isinstance(course.rules, Rules) and course.rules.allowed == ()
    assert "torch.nn.MultiheadAttention" in course.forbidden_names()
    assert [a.graders for a in course.assignments] == [
        "test_attention.py", "test_layers.py", "test_sorting.py"]
    layers = course.assignment("02-layers")
    assert layers.provides_module == "layer_parts" and "FeedForward" in layers.provides_names
    assert layers.group("ffn").tests == {"structure": 1.0, "values": 1.0}
    assert layers.group("ffn").stubs == ("FeedForward",)
    assert course.assignment("03-sorting").provides_module is None
    assert course.assignment("03-sorting").provides_names == ()
    assert course.title("es").startswith("Attention Is All You Need, desde")


def test_the_graders_of_each_assignment_are_in_autograder(course):
    for assignment in course.assignments:
        assert (ROOT / "autograder" / assignment.graders).is_file(), assignment.graders


def test_the_objects_are_frozen(course):
    with pytest.raises(dataclasses.FrozenInstanceError):
        course.limits.check_seconds = 1                              # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        course.training = None                                       # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        course.assignments[0].graders = "test_other.py"              # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        course.sandbox.isolation = "process"                         # type: ignore[misc]
    with pytest.raises(TypeError):
        course.assignments[0].checks[0].tests["new"] = 1             # type: ignore[index]
    with pytest.raises(TypeError):
        course.assignments[0].titles["fr"] = "?"                     # type: ignore[index]
    with pytest.raises(TypeError):
        course.raw["id"] = "other"                                   # type: ignore[index]
    assert isinstance(course.assignments, tuple) and isinstance(course.rules.forbidden, tuple)
    assert isinstance(course.assignments[0].notebooks, tuple)


def test_an_unknown_limit_is_named(course):
    with pytest.raises(CourseError, match="no limit 'check_secnds' in course.yaml "
                                          r"\(known: check_seconds, "):
        course.limit("check_secnds")


@pytest.mark.parametrize("path", [
    "limits.check_secnds", "training.treshold", "tolerance.abs", "sandbox.isolaton",
    "rules.forbiden", "trainig", "assignments[0].grader", "assignments[1].checks.ffn.stubs",
    "assignments[0].provides.name"])
def test_an_unknown_key_is_named(data, path):
    message = error_of(changed(data, path, 1))
    assert message.startswith(f"course.yaml: {path}: unknown key (known: "), message


def test_an_unknown_key_says_what_is_known_and_what_was_meant(data):
    message = error_of(changed(data, "limits.check_secnds", 30))
    assert message.startswith("course.yaml: limits.check_secnds: unknown key (known: "
                              "check_seconds, training_seconds, submission_seconds, cell_seconds,")
    assert message.endswith("did you mean check_seconds?")


@pytest.mark.parametrize("path, value, says", [
    ("training.seed", "zero", "must be an integer >= 0, not 'zero'"),
    ("training.eval_length", 10.5, "must be an integer > 0, not 10.5"),
    ("training.threshold", 1.5, "must be a number >= 0 and <= 1, not 1.5"),
    ("tolerance.atol", "1e-5", "must be a number >= 0, not '1e-5'"),
    ("tolerance.rtol", -1, "must be a number >= 0, not -1"),
    ("limits.check_seconds", 0, "must be a number > 0, not 0"),
    ("limits.memory_mb", "3 GB", "must be an integer > 0, not '3 GB'"),
    ("limits.output_kb", [256], "must be an integer > 0, not [256]"),
    ("sandbox.isolation", "docker", "must be one of auto, bwrap or process, not 'docker'"),
    ("sandbox.accept_weaker", "yes", "must be one of false, process or same-user, not 'yes'"),
    ("sandbox.user", 65534, "must be a non-empty string, not 65534"),
    ("sandbox.gpu", "no", "must be true or false, not 'no'"),
    ("sandbox.threads", 0, "must be an integer >= 1, not 0"),
    ("rules.forbidden", {"torch.nn.Transformer": True}, "must be a list of strings, not a mapping"),
    ("training", [0, 1000], "must be a mapping (key: value lines), not [0, 1000]"),
    ("assignments[2].uses", 5, "must be a list of strings, not 5"),
    ("assignments[0].graders", "../checks.py", "must be the file name of a module in autograder/"),
    ("assignments[0].title", ["a"], "must be a string or a mapping from language to string"),
])
def test_a_wrong_type_is_named(data, path, value, says):
    message = error_of(changed(data, path, value))
    assert message.startswith(f"course.yaml: {path}: {says}"), message


def test_a_wrong_item_of_a_list_is_named(data):
    message = error_of(changed(data, "rules.allowed", ["torch.nn.Transformer", 3]))
    assert message == "course.yaml: rules.allowed[1]: must be a non-empty string, not 3"
    message = error_of(changed(data, "assignments[0].notebooks", ["attention.py"]))
    assert message.startswith("course.yaml: assignments[0].notebooks[0]: must be a notebook's "
                              "file name (name.ipynb), not 'attention.py'")


@pytest.mark.parametrize("value, says", [
    ({"causal": "causal_mask", "paddding": "padding_mask"},
     "stub_of.paddding: names no test of the group (its tests: causal, padding)"),
    ({"causal": "causal_mask", "padding": "pad_mask"},
     "stub_of.padding: pad_mask is not one of the group's stubs (causal_mask, padding_mask)"),
    (["causal_mask"], "stub_of: must be a mapping from test name to the one stub it checks"),
])
def test_a_test_s_stub_must_be_the_group_s(data, value, says):
    message = error_of(changed(data, "assignments[0].checks.masks.stub_of", value))
    assert message.startswith(f"course.yaml: assignments[0].checks.masks.{says}"), message


def test_each_test_of_a_group_of_stubs_is_judged_with_its_own(course):
    masks = course.assignment("01-attention").group("masks")
    assert masks.part("causal") == ("masks", ("causal_mask",))
    assert masks.part("padding") == ("masks", ("padding_mask",))
    sdpa = course.assignment("01-attention").group("sdpa")
    assert sdpa.part("values") == ("sdpa", ("scaled_dot_product_attention",))


def test_points_that_are_not_numbers_are_named(data):
    message = error_of(changed(data, "assignments[1].checks.ffn.tests.values", "two"))
    assert message == ("course.yaml: assignments[1].checks.ffn.tests.values: points must be a "
                       "number >= 0, not 'two'")
    message = error_of(changed(data, "assignments[1].checks.ffn.tests.values", -1))
    assert "points must be a number >= 0, not -1" in message


@pytest.mark.parametrize("path, says", [
    ("training.threshold", "course.yaml: training.threshold: is missing; it must be a number"),
    ("tolerance.atol", "course.yaml: tolerance.atol: is missing; it must be a number >= 0"),
    ("limits.check_seconds", "course.yaml: limits.check_seconds: is missing"),
    ("limits.notebook_mb", "course.yaml: limits.notebook_mb: is missing"),
    ("rules.forbidden", "course.yaml: rules.forbidden: is missing; it must be a list of strings"),
    ("sandbox", "course.yaml: sandbox: is missing; it must be a mapping"),
    ("training", "course.yaml: training: is missing"),
    ("id", "course.yaml: id: is missing; it must be a non-empty string"),
    ("assignments", "course.yaml: assignments: is missing; it must be a list of assignments"),
    ("assignments[0].id", "course.yaml: assignments[0].id: is missing"),
    ("assignments[1].notebooks", "course.yaml: assignments[1].notebooks: is missing"),
    ("assignments[1].checks.ffn.tests", "course.yaml: assignments[1].checks.ffn.tests: is "
                                        "missing; it must be a mapping from test name to points"),
    ("assignments[0].provides.module", "course.yaml: assignments[0].provides.module: is missing"),
])
def test_a_missing_value_is_named(data, path, says):
    assert error_of(changed(data, path, delete=True)).startswith(says)


@pytest.mark.parametrize("path, says", [
    ("training.seed", "course.yaml: training.seed: has no value; it must be an integer >= 0"),
    ("sandbox.isolation", "course.yaml: sandbox.isolation: has no value; it must be one of auto"),
    ("limits.cell_seconds", "course.yaml: limits.cell_seconds: has no value; it must be a number"),
    ("tolerance", "course.yaml: tolerance: must be a mapping (key: value lines), not null"),
])
def test_a_key_without_a_value_is_named(data, path, says):
    assert error_of(changed(data, path, None)).startswith(says)


def test_the_sandbox_keys_have_the_defaults_launch_had(data):
    course = parse_course(changed(data, "sandbox", {}), ROOT)
    assert course.sandbox == SandboxSettings()
    assert course.sandbox.isolation == "auto" and course.sandbox.accept_weaker is False
    assert course.sandbox.user == "nobody" and course.sandbox.threads == 1
    limits = {k: v for k, v in data["limits"].items()
              if k not in ("memory_mb", "disk_mb", "processes", "output_kb")}
    course = parse_course(changed(data, "limits", limits), ROOT)
    assert (course.limits.memory_mb, course.limits.disk_mb, course.limits.processes,
            course.limits.output_kb) == (3072, 256, 64, 256)


def test_bools_are_not_numbers_nor_numbers_bools(data):
    for path, value in [("sandbox.gpu", 1), ("sandbox.gpu", 0), ("training.seed", True),
                        ("limits.memory_mb", True), ("limits.check_seconds", True),
                        ("tolerance.atol", False), ("sandbox.accept_weaker", 0),
                        ("sandbox.accept_weaker", 1), ("sandbox.threads", True),
                        ("assignments[0].checks.sdpa.tests.values", True)]:
        message = error_of(changed(data, path, value))
        assert message.startswith(f"course.yaml: {path}: "), message
    assert parse_course(changed(data, "sandbox.gpu", True), ROOT).sandbox.gpu is True


def test_numbers_are_read_as_their_type(data):
    course = parse_course(changed(changed(data, "tolerance.atol", 0), "limits.check_seconds",
                                  2.5), ROOT)
    assert course.tolerance.atol == 0.0 and type(course.tolerance.atol) is float
    assert course.limit("check_seconds") == 2.5


@pytest.mark.parametrize("written, meant", [
    (False, False), ("process", "process"), ("same-user", "same-user"), (True, "process"),
    ("no", False)])
def test_accept_weaker_takes_what_the_sandbox_takes(data, written, meant):
    course = parse_course(changed(data, "sandbox.accept_weaker", written), ROOT)
    assert course.sandbox.accept_weaker == meant
    assert type(course.sandbox.accept_weaker) is type(meant)


@pytest.mark.parametrize("isolation", ["auto", "bwrap", "process"])
def test_each_isolation_is_read(data, isolation):
    assert parse_course(changed(data, "sandbox.isolation", isolation),
                        ROOT).sandbox.isolation == isolation


def test_graders_default_to_the_first_notebooks_name(data):
    bare = copy.deepcopy(data)
    for spec in bare["assignments"]:
        spec.pop("graders", None)
    course = parse_course(bare, ROOT)
    assert [a.graders for a in course.assignments] == [
        "test_attention.py", "test_layers.py", "test_sorting.py"]
    course = parse_course(changed(data, "assignments[1].graders", "test_blocks.py"), ROOT)
    assert course.assignment("02-layers").graders == "test_blocks.py"


def test_a_minimal_assignment_reads(data):
    data = changed(data, "feedback", {})        # its exceptions name the course's checks
    course = parse_course(changed(data, "assignments", [
        {"id": "x", "notebooks": "x.ipynb", "checks": {"g": {"tests": {"t": 1}}}}]), ROOT)
    (only,) = course.assignments
    assert only.graders == "test_x.py" and only.title("es") == "x" and only.uses == ()
    assert only.provides is None and only.group("g").stubs == () and only.points == 1.0


def test_what_the_course_says_must_agree(data):
    message = error_of(changed(data, "assignments[1].id", "01-attention"))
    assert message.startswith("course.yaml: assignments[1].id: '01-attention' is also ")
    message = error_of(changed(data, "assignments[1].notebooks", ["attention.ipynb"]))
    assert message.startswith("course.yaml: assignments[1].notebooks: 'attention.ipynb' is also")
    message = error_of(changed(data, "assignments[2].uses", ["nowhere"]))
    assert message.startswith("course.yaml: assignments[2].uses: 03-sorting uses 'nowhere', "
                              "which no assignment provides")
    message = error_of(changed(data, "language", "fr"))
    assert message.startswith("course.yaml: language: 'fr' is not among languages (en, es)")
    message = error_of(changed(data, "assignments[1].checks.ffn.tests", {"a.b": 1}))
    assert message.startswith("course.yaml: assignments[1].checks.ffn.tests.a.b: a test's name "
                              "must be a name made of letters, digits and _")
    assert error_of(changed(data, "assignments", [])).startswith(
        "course.yaml: assignments: must be a list of assignments, not []")


def test_a_course_yaml_that_is_not_a_mapping(tmp_path):
    (tmp_path / COURSE_FILE).write_text("- one\n- two\n", encoding="utf-8")
    with pytest.raises(CourseError, match=r"^course.yaml: must be a mapping"):
        load_course(tmp_path)


def test_the_sandbox_page_quotes_the_grader_limit_of_course_yaml(course):
    """docs/sandbox.md names limits.grader_memory_mb's value; it must be course.yaml's."""
    page = (ROOT / "docs" / "sandbox.md").read_text()
    value = course.limits.grader_memory_mb
    assert f"`limits.grader_memory_mb` ({value} by" in page
    assert f"used more than {value} MB of memory\n(limits.grader_memory_mb)" in page


def test_the_settings_page_is_generated_from_the_schema_and_current():
    """docs/course-yaml.md is `tfcourse config --markdown`: each setting's meaning is written
    where the setting is defined (course.py's setting(help=...)), and the page follows it."""
    from tfcourse import config

    assert (ROOT / config.DOC).read_text(encoding="utf-8") == config.markdown(), (
        "docs/course-yaml.md is stale: run `tfcourse config --markdown > docs/course-yaml.md`")


def test_every_setting_says_what_it_means_and_config_prints_it(capsys):
    from tfcourse import config
    from tfcourse.cli import main

    missing = [item["key"] for item in config.settings() if not item["help"]]
    assert not missing, f"settings without help= in course.py: {missing}"
    assert main(["config", "limits.memory_mb"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("limits.memory_mb: MB for the student's processes")
    assert "default: 3072" in printed and "range: > 0" in printed
    assert main(["config", "limits.memroy_mb"]) == 2
    assert "no setting of course.yaml" in capsys.readouterr().err
