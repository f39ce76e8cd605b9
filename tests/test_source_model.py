"""The one model of an assignment's source, the one rendering of a graded report, the one function
that sets a notebook's language, and the helpers the graders share. Fast: no sandbox, no process."""
import html
import json
import os
import shutil

import pytest
import torch

from conftest import NOTEBOOK_OF, ROOT

from tfcourse import notebook
from tfcourse.course import load_course
from tfcourse.submission import framework
from tfcourse.submission.framework import (Fail, Handle, first_match, outside, parameter_shapes,
                                           under)
from tfcourse.submission.report import Note, NotebookReport, SubmissionReport, TestResult
from tfcourse.batch.results import (feedback, feedback_html, feedback_markdown, gradescope_json,
                                    markdown_text, results_json)
from tfcourse.submission.notebooks import build_program, load_program, parse_notebook
from tfcourse.source import assignment_source, groups_by_notebook, helper_files, source_notebook

EDITED = "the read-only cell {gid} was edited; the grader used the original"


# -- the source model ----------------------------------------------------------------------------
@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_the_source_model_holds_what_the_notebook_says(course, assignment):
    source = assignment_source(course, assignment)
    assert assignment_source(course, assignment) is source, "read once, then cached"
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    tests = [notebook.grade_id(c) for c in nb.cells if notebook.is_test(c)]
    one = source.notebook(NOTEBOOK_OF[assignment])
    assert one is source_notebook(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    assert list(one.test_ids) == tests
    assert [g.id for g in source.groups_in(one.name)] == [g.id for g in source.assignment.checks]
    assert groups_by_notebook(course, assignment) == source.groups_by_notebook()
    assert one.setup == tuple(notebook.text(c) for c in notebook.cells_with_role(nb, "setup"))
    assert source.recipe == "\n\n".join(notebook.text(c)
                                        for c in notebook.cells_with_role(nb, "recipe"))
    assert source.solution_code == notebook.solution_code(nb)
    assert one.solution_ids == {notebook.grade_id(c) for c in nb.cells if notebook.is_solution(c)}
    with pytest.raises(TypeError):
        one.kinds["x"] = "test"                       # shared: read-only


def test_helper_modules_come_from_their_providers_source(course):
    files = helper_files(course, "03-sorting")
    assert set(files) == {"attention_parts.py", "layer_parts.py"}
    assert files["attention_parts.py"] == (
        ROOT / "source" / "02-layers" / "attention_parts.py").read_text(encoding="utf-8")
    assert assignment_source(course, "03-sorting").module_text is None


def copied_course(tmp_path):
    """A course folder of its own: course.yaml and the first two assignments' source."""
    shutil.copy(ROOT / "course.yaml", tmp_path / "course.yaml")
    for assignment in ("01-attention", "02-layers"):
        shutil.copytree(ROOT / "source" / assignment, tmp_path / "source" / assignment)
    return load_course(tmp_path)


def rewrite(path, edit):
    """Change a notebook on disk: `edit(nb)` on its JSON, a later modification time."""
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    before = path.stat().st_mtime_ns
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_changed_source_notebook_is_read_again(tmp_path):
    course = copied_course(tmp_path)
    path = tmp_path / "source" / "01-attention" / "attention.ipynb"
    first = assignment_source(course, "01-attention")
    assert "MARKER" not in first.solution_code

    def add_marker(data):
        for cell in data["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == "masks-code":
                cell["source"] = "".join(cell["source"]) + "\nMARKER = 41\n"
    rewrite(path, add_marker)
    second = assignment_source(course, "01-attention")
    assert second is not first and "MARKER = 41" in second.solution_code
    assert "MARKER = 41" in helper_files(course, "02-layers")["attention_parts.py"]
    assert assignment_source(course, "01-attention") is second


def test_the_reference_follows_its_source(tmp_path):
    from tfcourse.submission.reference import reference

    course = copied_course(tmp_path)
    before = reference(course, "02-layers")
    assert reference(course, "02-layers") is before
    path = tmp_path / "source" / "01-attention" / "attention.ipynb"

    def add_marker(data):
        for cell in data["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == "masks-code":
                cell["source"] = "".join(cell["source"]) + "\nMARKER = 42\n"
    rewrite(path, add_marker)
    assert reference(course, "01-attention")["MARKER"] == 42
    after = reference(course, "02-layers")            # built on 01's module: built again
    assert after is not before
    import attention_parts
    assert attention_parts.MARKER == 42


def test_the_build_edits_a_copy(course):
    path = ROOT / "source" / "01-attention" / "attention.ipynb"
    shared = source_notebook(path)
    mine = shared.copy()
    mine.cells[0].source = "changed"
    assert shared.nb.cells[0].source != "changed"
    assert isinstance(mine, notebook.Node) and mine.cells[0].source == "changed"


# -- the language call ---------------------------------------------------------------------------
@pytest.mark.parametrize("written", ['use_language("en")', "use_language('en')",
                                     'use_language( "en" )', 'use_language ("en")',
                                     'use_language("es")', "use_language()"])
def test_one_function_recognises_and_sets_the_language(written):
    source = f"from tfcourse.student import check, show, use_language\n\n{written}\nx = 1"
    assert notebook.set_language(source, "es") == (
        'from tfcourse.student import check, show, use_language\n\nuse_language("es")\nx = 1')
    assert notebook.set_language(source, None).endswith("\nuse_language()\nx = 1")
    assert notebook.set_language("my_use_language('en')", "es") == "my_use_language('en')"


def test_the_build_sets_a_spaced_language_call():
    from tfcourse.build.language import select_language

    nb = notebook.read(ROOT / "source" / "01-attention" / "attention.ipynb")
    for cell in nb.cells:
        if notebook.role(cell) == "language":
            cell.source = cell.source.replace('use_language("en")', "use_language( 'en' )")
    nb = select_language(nb, "es")
    language = [c for c in nb.cells if notebook.role(c) == "language"][0]
    assert 'use_language("es")' in language.source


def released_with_language_call(call: str) -> dict:
    nb = json.loads((ROOT / "release" / "01-attention" / "attention.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "language":
            source = "".join(cell["source"])
            assert 'use_language("en")' in source
            cell["source"] = source.replace('use_language("en")', call)
    raw, notes = parse_notebook(json.dumps(nb).encode(), "attention.ipynb", 64)
    assert raw is not None and not notes
    return raw


@pytest.mark.parametrize("call", ['use_language( "en")', "use_language('es')",
                                  'use_language ( "es" )'])
def test_a_spaced_language_call_is_not_an_edited_read_only_cell(call):
    source = source_notebook(ROOT / "source" / "01-attention" / "attention.ipynb")
    program = build_program(source, released_with_language_call(call))
    assert not [n for n in program.notes if n.template == EDITED], program.notes


def test_an_edited_language_cell_still_is():
    source = source_notebook(ROOT / "source" / "01-attention" / "attention.ipynb")
    program = build_program(source, released_with_language_call('use_language("en")\nx = 1'))
    assert [n.params for n in program.notes if n.template == EDITED] == [{"gid": "language"}]


def test_load_program_takes_the_source_model(course):
    path = ROOT / "source" / "01-attention" / "attention.ipynb"
    submitted = ROOT / "solutions" / "01-attention" / "attention.ipynb"
    by_path = load_program(path, submitted, 64)
    given = load_program(path, submitted, 64, source=source_notebook(path))
    from_node = build_program(notebook.read(path), parse_notebook(submitted.read_bytes(),
                                                                  "attention.ipynb", 64)[0])
    for program in (given, from_node):
        assert [(c.label, c.source, c.from_student) for c in program.cells] == \
            [(c.label, c.source, c.from_student) for c in by_path.cells]
        assert program.solution_ids == by_path.solution_ids
    assert by_path.cells[0].label == "setup" and not by_path.cells[0].from_student


# -- one rendering of a report -------------------------------------------------------------------
HOSTILE = "<script>alert('x')</script> | a pipe"


def partly_right(course) -> SubmissionReport:
    assignment = course.assignment("01-attention")
    tests = []
    for index, test_id in enumerate(assignment.test_ids()):
        points = assignment.points_of(test_id)
        if test_id == "masks.causal":
            tests.append(TestResult(test_id, 0.0, points, "your code raised {kind}: {message}",
                                    {"kind": "ValueError", "message": HOSTILE}))
        elif index % 2:
            tests.append(TestResult(test_id, points, points))
        elif test_id != "sdpa.shapes":             # that one is missing from the report
            tests.append(TestResult(test_id, 0.0, points, "{what}: shape {got}, expected "
                                    "{expected}", {"what": "the output", "got": [1],
                                                   "expected": [2]}))
    notebook_report = NotebookReport("attention.ipynb", tests=tests, notes=[
        Note("cell {label} raised {kind}: {message}", {"label": "7", "kind": "E",
                                                        "message": "two\nlines"})])
    return SubmissionReport("01-attention", "alice", [notebook_report], seconds=3.21)


@pytest.mark.parametrize("lang", ["en", "es"])
def test_every_rendering_shows_the_same_rows(course, lang):
    report = partly_right(course)
    view = feedback(course, report, lang)
    results = results_json(view)
    assert results == gradescope_json(course, report, lang)
    assert [t["number"] for t in results["tests"]] == course.assignment("01-attention").test_ids()
    assert results["score"] == sum(row.score for row in view.rows)
    assert results["max_score"] == 14
    missing = [t for t in results["tests"] if t["number"] == "sdpa.shapes"][0]
    assert missing["status"] == "failed" and missing["score"] == 0
    markdown = feedback_markdown(view)
    rows = [line for line in markdown.splitlines() if line.startswith(("| ✓ |", "| ✗ |"))]
    assert len(rows) == len(results["tests"])
    for row, test in zip(rows, results["tests"]):
        assert f"{test['score']:g} / {test['max_score']:g}" in row
        assert markdown_text(test["output"]) in row
    page = feedback_html(view)
    assert HOSTILE not in page and HOSTILE not in markdown
    assert html.escape(HOSTILE) in page
    assert page.count('<tr class="') == len(results["tests"])
    assert [line for line in results["output"].splitlines()] == [
        line for note in view.notes for line in note.splitlines()]


def test_the_course_catalog_translates_the_feedback(course):
    results = gradescope_json(course, partly_right(course), "es")
    passed = [t for t in results["tests"] if t["status"] == "passed"]
    assert passed and all(t["output"] == "aprobado" for t in passed)
    missing = [t for t in results["tests"] if t["number"] == "sdpa.shapes"][0]
    assert missing["output"] == "sin calificar: ningún notebook la contenía"


def test_nbgrader_cells_show_the_same_rows(course):
    pytest.importorskip("nbgrader")
    from tfcourse.adapters.nbgrader import cell_outputs

    report = partly_right(course)
    view = feedback(course, report, "en")
    for group in course.assignment("01-attention").checks:
        outputs = cell_outputs(view, group)
        text = outputs[0].get("text") or "\n".join(outputs[0].get("traceback", []))
        part = view.part(group.id)
        for row in part.rows:
            assert f"{row.name} ({row.score:g}/{row.max_score:g})" in text
            assert row.passed or row.failure.splitlines()[0] in text
        kinds = [output["output_type"] for output in outputs]
        assert kinds == (["stream"] if part.score >= group.points else
                         ["stream", "execute_result"] if part.score else ["error"])
    shapes = cell_outputs(view, course.assignment("01-attention").group("sdpa"))[0]["text"]
    assert "✗ shapes (0/1): not graded: no notebook held it" in shapes


def test_a_report_without_an_assignment_renders(course):
    report = SubmissionReport("", "carol", notes=[Note("no notebook", {}, "error")])
    view = feedback(course, report, "en")
    assert view.parts == () and view.max_score == 0
    assert "no notebook" in feedback_markdown(view) and "no notebook" in feedback_html(view)
    assert results_json(view)["tests"] == []


# -- the graders' helpers ------------------------------------------------------------------------
class Student:
    """A context whose 'student process' is a module here: loads go into it (strict=False)."""

    def __init__(self, module):
        self.module = module

    def request(self, op, timeout=None, **args):
        assert op == "load"
        result = self.module.load_state_dict(args["state"], strict=False)
        return {"missing": list(result.missing_keys), "unexpected": list(result.unexpected_keys)}


def handle_of(module) -> Handle:
    """A Handle described as the student's process describes a module."""
    params = [[name, list(p.shape), id(p)] for name, p in
              module.named_parameters(remove_duplicate=False)]
    return Handle(Student(module), "h1", {"module": True, "type": type(module).__name__,
                                          "params": params, "children": []})


class Layer(torch.nn.Module):
    def __init__(self, first="linear1"):
        super().__init__()
        setattr(self, first, torch.nn.Linear(3, 4))
        self.inner = torch.nn.Linear(4, 2)


def test_first_match_names_the_first_variant_that_fits():
    got = torch.ones(2, 3)
    variants = [(torch.zeros(2, 3), "zeros"), (torch.ones(3, 2), "wrong shape"),
                (torch.ones(2, 3), "ones"), (torch.ones(2, 3), "ones again")]
    assert first_match(got, variants, 1e-5, 1e-4) == "ones"
    assert first_match(got, variants[:2], 1e-5, 1e-4) == ""
    assert first_match("not a tensor", variants, 1e-5, 1e-4) == ""


def test_parameters_outside_skipped_submodules():
    assert under("inner.weight", ["inner"]) and not under("inner2.weight", ["inner"])
    assert outside({"inner.weight": 1, "linear1.bias": 2}, ["inner"]) == {"linear1.bias": 2}
    assert parameter_shapes(Layer(), ["inner"]) == {"linear1.weight": [4, 3], "linear1.bias": [4]}
    handle = handle_of(Layer("other"))
    assert handle.compare(parameter_shapes(Layer()), ["inner"]) == (
        ["linear1.bias", "linear1.weight"], ["other.bias", "other.weight"], [])
    assert handle.compare(parameter_shapes(Layer("other"))) == ([], [], [])
    with pytest.raises(Fail) as failed:
        handle.expect_parameters(parameter_shapes(Layer()), "{what}: {missing}; {unexpected}; "
                                 "{wrong}", what="Layer")
    assert str(failed.value) == ("Layer: ['linear1.bias', 'linear1.weight']; ['other.bias', "
                                 "'other.weight']; none")


def test_load_reference_by_name_then_by_position():
    torch.manual_seed(0)
    reference = Layer()
    same, renamed = Layer(), Layer("other")
    options = dict(unmatched=Fail("cannot be checked"),
                   by_name=lambda missing, unexpected: Fail("by name: {missing} {unexpected}",
                                                            missing=missing,
                                                            unexpected=unexpected))
    handle_of(same).load_reference(reference, **options)
    assert torch.equal(same.linear1.weight, reference.linear1.weight)
    with pytest.raises(Fail) as failed:                       # strict: the names must match
        handle_of(renamed).load_reference(reference, **options)
    assert failed.value.template == "by name: {missing} {unexpected}"
    assert failed.value.params == {"missing": ["other.weight", "other.bias"],
                                   "unexpected": ["linear1.weight", "linear1.bias"]}
    handle_of(renamed).load_reference(reference, strict=False, **options)   # in their order
    assert torch.equal(renamed.other.weight, reference.linear1.weight)
    assert torch.equal(renamed.inner.weight, reference.inner.weight)
    skipped = Layer()
    skipped.inner = torch.nn.Linear(4, 5)                     # graded on its own: left aside
    handle_of(skipped).load_reference(reference, skipped=["inner"], **options)
    assert torch.equal(skipped.linear1.bias, reference.linear1.bias)

    class Unlike(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(5, 5)
    with pytest.raises(Fail) as failed:
        handle_of(Unlike()).load_reference(reference, strict=False, **options)
    assert failed.value.template == "cannot be checked"


def test_framework_keeps_the_graders_helpers_once():
    """The graders use the framework's helpers rather than copies of their own."""
    import autograder.test_attention as attention
    import autograder.test_layers as layers
    import autograder.test_sorting as sorting

    for module in (attention, layers, sorting):
        assert not {"_hint", "_match_hint", "_under", "_outside"} & set(vars(module))
        assert module.first_match is framework.first_match


def described(module) -> Handle:
    """A Handle on the description that the student's process (the worker) gives of `module`."""
    import importlib
    import sys
    sys.path.insert(0, str(ROOT / "tfcourse" / "sandbox"))
    try:
        worker = importlib.import_module("worker")
    finally:
        sys.path.remove(str(ROOT / "tfcourse" / "sandbox"))
    return Handle(None, "h1", worker.Worker.__new__(worker.Worker)._describe(module))


def test_frozen_parameters_of_the_contract_fail_and_others_do_not():
    contract = parameter_shapes(Layer())
    layer = Layer()
    layer.linear1.requires_grad_(False)
    with pytest.raises(Fail) as failed:
        described(layer).expect_parameters(contract, "{missing} {unexpected} {wrong}")
    assert "linear1.bias, linear1.weight cannot learn (requires_grad is False)" in str(failed.value)
    described(layer).expect_parameters(contract, "{missing}", skipped=["linear1"])
    # a frozen tensor that is not one of the contract's (a table of positions) is no concern here
    layer = Layer()
    layer.table = torch.nn.Embedding(5, 4).requires_grad_(False)
    assert described(layer).frozen(contract) == []
    assert described(layer).frozen(["table.weight"]) == ["table.weight"]
    # frozen under one name is frozen under all; a description without the list freezes nothing
    layer.alias = layer.inner.requires_grad_(False)
    assert described(layer).frozen(["alias.weight"]) == ["alias.weight"]
    old = handle_of(layer)                  # described without the list of frozen names
    assert old.frozen(["alias.weight", "inner.weight"]) == []


def test_two_names_of_the_contract_on_one_module_are_named_as_modules():
    class Projections(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w_q = torch.nn.Linear(4, 4)
            self.w_k = self.w_q
            self.w_v = torch.nn.Linear(4, 4)

    class Layer2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = Projections()
            self.cross_attn = self.self_attn

    names = ["w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias", "w_v.weight", "w_v.bias"]
    assert described(Projections()).shared(names) == [("w_k", "w_q"), ("w_k", "w_q")]
    names = [f"{attn}.{name}" for attn in ("self_attn", "cross_attn") for name in names]
    assert described(Layer2()).shared(names)[:2] == [("self_attn.w_k", "self_attn.w_q")] * 2
    assert ("cross_attn", "self_attn") in described(Layer2()).shared(names)
    assert described(Layer()).shared(list(parameter_shapes(Layer()))) == []
