"""The solutions get full marks and the released stubs get nothing, end to end."""
import json

import nbformat
import pytest

from conftest import ROOT, lost, make_submission

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


@pytest.mark.slow
def test_a_grader_over_its_memory_limit_is_stopped_and_says_so(course, monkeypatch, tmp_path):
    """limits.grader_memory_mb holds the trusted grader (in a cgroup of its own, where the machine
    lets us make one); over it, the submission fails with that reason and every check at 0. The
    grader here is a stand-in that takes 300 MB (a real one stays far below any limit)."""
    import dataclasses
    import sys

    from tfcourse.batch import child
    from tfcourse.sandbox.limits import Cgroup, Limits

    probe = Cgroup.create(Limits(64, 0, 16))
    if probe is None:
        pytest.skip("no cgroup can be made here")
    probe.remove()
    greedy = [sys.executable, "-c",        # once moved into its cgroup, 300 MB
              "import time; time.sleep(1); held = bytearray(300 << 20); time.sleep(30)"]
    started = child.GRADERS.start
    monkeypatch.setattr(child.GRADERS, "fork", lambda *args, **kwargs: None)
    monkeypatch.setattr(child.GRADERS, "start",
                        lambda command, **options: started(greedy, **options))
    small = dataclasses.replace(course, limits=dataclasses.replace(course.limits,
                                                                    grader_memory_mb=100))
    report = child.grade_in_child(small, ROOT / "solutions" / "01-attention", None, 1, [], [])
    assert "used more than 100 MB of memory (limits.grader_memory_mb)" in report.error
    assert len(report.tests) == 10 and not any(test.points for test in report.tests)
    monkeypatch.undo()
    # The students' processes are not the grader's: 400 MB of a student's does not count against
    # a grader's 300 (their cgroups are made beside the grader's, not below it).
    hog = nbformat.v4.new_code_cell("import torch\n_hog = torch.ones(400 << 18)")
    folder = make_submission(tmp_path / "hog", "01-attention",
                             edit=lambda nb: nb.cells.insert(3, hog))
    roomy = dataclasses.replace(course, limits=dataclasses.replace(course.limits,
                                                                    grader_memory_mb=300))
    report = child.grade_in_child(roomy, folder, None, 1, [], [])
    assert report.error is None and sum(test.points for test in report.tests) == 14
    assert report.notebooks[0].peak_memory_mb > 400
