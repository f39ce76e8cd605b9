"""The solutions get full marks and the released stubs get nothing, end to end."""
import json

import pytest

from conftest import ROOT, lost

# End to end: grades submissions through the sandbox (grade_one).
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("assignment", ["01-attention", "02-layers", "03-sorting"])
def test_solutions_get_full_marks(grade, assignment):
    results = grade(ROOT / "solutions" / assignment)
    assert results["score"] == results["max_score"] > 0, json.dumps(results, indent=1)[:3000]
    assert not lost(results)


@pytest.mark.parametrize("assignment", ["01-attention", "02-layers", "03-sorting"])
def test_release_stubs_get_nothing(grade, assignment):
    results = grade(ROOT / "release" / assignment)
    assert results["score"] == 0
    assert all("not written yet" in t["output"] for t in results["tests"]), results["tests"]


def test_one_notebook_file_is_a_submission(grade):
    results = grade(ROOT / "solutions" / "01-attention" / "attention.ipynb")
    assert results["score"] == results["max_score"]
    assert results["extra_data"]["assignment"] == "01-attention"


def test_a_folder_without_course_notebooks_gets_a_clear_message(grade, tmp_path):
    (tmp_path / "notes.ipynb").write_text("{}")
    results = grade(tmp_path)
    assert results["score"] == 0
    assert "no notebook of this course" in results["output"]


def test_misnamed_parameters_are_named_and_behaviour_still_graded(grade, tmp_path):
    """A working MultiHeadAttention whose projections have other names: the checks that need the
    reference's weights say which names are missing; the masking behaviour is still graded."""
    from conftest import make_submission, solution_cells

    code = solution_cells("01-attention")["mha-code"]
    for name in ("w_q", "w_k", "w_v", "w_o"):
        code = code.replace(f"self.{name}", f"self.{name[-1]}_proj")
    folder = make_submission(tmp_path / "misnamed", "01-attention", answers={"mha-code": code})
    results = grade(folder)
    assert lost(results) == {"mha.structure", "mha.self", "mha.cross"}
    messages = {t["number"]: t["output"] for t in results["tests"]}
    assert "w_q.weight" in messages["mha.self"] and "q_proj.weight" in messages["mha.self"]
