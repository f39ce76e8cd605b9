"""`tfcourse similarity`: a disguised copy is listed, an independent style is not, and the released
notebook's code counts for nobody.

bench/similarity.py measures the same on a larger synthetic class (recall, false positives, cost).
"""
import csv
import re
import shutil

import nbformat
import pytest

from alternatives import ANNOTATED_LAYERS
from conftest import NOTEBOOK_OF, ROOT, make_submission, solution_cells
from tfcourse import notebook
from tfcourse.cli import main
from tfcourse.insights.similarity import Pair, clusters, written_code

A = "02-layers"


def disguised(cells: dict[str, str]) -> tuple[dict[str, str], str]:
    """The cells with names changed, comments and spacing added, and the positions cell moved
    into a cell of its own before the feed-forward one (as a student who splits cells)."""
    out = {}
    for cell, code in cells.items():
        for old, new in (("x", "hidden"), ("mask", "blocked"), ("tokens", "ids"),
                         ("table", "pe"), ("position", "where")):
            code = re.sub(rf"\b{old}\b", new, code)
        out[cell] = "# my own work\n" + code.replace("\n", "\n\n")
    return out, out.pop("positions-code")


def write_copy(folder, cells):
    answers, moved = disguised(cells)
    answers["positions-code"] = "# see the cell above\n"

    def add(nb):
        index = next(i for i, cell in enumerate(nb.cells) if notebook.grade_id(cell) == "ffn-code")
        nb.cells.insert(index, nbformat.v4.new_code_cell(moved))
    return make_submission(folder, A, answers=answers, edit=add)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("similarity")
    cells = solution_cells(A)
    make_submission(root / "class" / "alice", A)
    write_copy(root / "class" / "bob", cells)
    make_submission(root / "class" / "carol", A, answers=ANNOTATED_LAYERS.answers)
    released = notebook.read(ROOT / "release" / A / "layers.ipynb")
    as_released = {notebook.grade_id(cell): notebook.text(cell) for cell in released.cells
                   if notebook.is_solution(cell)}
    for name in ("dave", "erin"):                   # handed in the release as it was
        make_submission(root / "class" / name, A, answers=as_released)
    (root / "class" / "frank").mkdir()
    (root / "class" / "frank" / "layers.ipynb").write_text("{broken")
    assert main(["similarity", str(root / "class"), "--out", str(root / "out")]) == 0
    rows = list(csv.DictReader((root / "out" / "pairs.csv").open()))
    return root, {tuple(sorted((row["first"], row["second"]))): float(row["similarity"])
                  for row in rows}


def test_a_disguised_copy_is_listed(compared):
    _, pairs = compared
    assert pairs.get(("alice", "bob"), 0) >= 0.9, pairs


def test_an_independent_style_is_not(compared):
    _, pairs = compared
    assert not [pair for pair in pairs if "carol" in pair], pairs


def test_the_released_code_counts_for_nobody(compared):
    _, pairs = compared
    assert ("dave", "erin") not in pairs, pairs
    root, _ = compared
    index = (root / "out" / "index.html").read_text()
    assert "dave: too little code" in index.split("Not compared")[1]


def test_pages_say_what_similarity_means(compared):
    root, _ = compared
    index = (root / "out" / "index.html").read_text()
    assert "does not say that anyone copied" in index and "frank" in index
    page = (root / "out" / "pair-0001.html").read_text()
    assert "<mark>" in page and "<script" not in page


def test_written_code_leaves_out_released_cells():
    released = {"import torch"}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch"),
                                         nbformat.v4.new_code_cell("helper = 1")])
    assert written_code(nb, released).strip() == "helper = 1"


def test_clusters_of_three_or_more():
    pairs = [Pair("a", "b", 1, 1, ()), Pair("b", "c", 1, 1, ()), Pair("d", "e", 1, 1, ())]
    assert clusters(pairs) == [["a", "b", "c"]]


def test_a_flat_class_folder_is_compared_as_grade_grades_it(tmp_path, capsys):
    """The guide's flat layout (alice.ipynb, bob.ipynb): the assignment is told from the cells, as
    `tfcourse grade` tells it, and what is not compared is said on the terminal, not only on the
    page (it said '0 pair(s)' with every submission unread)."""
    cells = solution_cells(A)
    for name, folder in (("alice", make_submission(tmp_path / "a", A)),
                         ("bob", write_copy(tmp_path / "b", cells))):
        (folder / "layers.ipynb").rename(tmp_path / f"{name}.ipynb")
    (tmp_path / "frank.ipynb").write_text("{broken")
    for folder in ("a", "b"):
        shutil.rmtree(tmp_path / folder)
    assert main(["similarity", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "pairs.csv").open()))
    assert [(row["first"], row["second"]) for row in rows] == [("alice", "bob")], rows
    printed = capsys.readouterr().out
    assert "not compared: frank" in printed and "1 pair(s)" in printed, printed


def test_each_assignment_is_compared_without_its_own_released_code(tmp_path, capsys):
    """A class of several assignments in nbgrader's layout, with no --assignment: each
    submission is read as its own assignment's and compared with that assignment's submissions,
    its released code (stubs, the code given in answer cells) left out. It read every submission
    as the first one's assignment, so two students who handed in 02-layers and 03-sorting as
    released were listed as alike."""
    submitted = tmp_path / "submitted"
    for student in ("dave", "erin"):                # every release handed in as it was
        for assignment in NOTEBOOK_OF:
            shutil.copytree(ROOT / "release" / assignment, submitted / student / assignment)
    for student in ("alice", "bob"):                # one solution, handed in by two
        make_submission(submitted / student / A, A)
    assert main(["similarity", str(submitted), "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "pairs.csv").open()))
    assert [(row["first"], row["second"]) for row in rows] == [(f"alice/{A}", f"bob/{A}")], rows
    printed = capsys.readouterr().out
    for student in ("dave", "erin"):
        for assignment in NOTEBOOK_OF:
            assert f"not compared: {student}/{assignment}: too little code" in printed, printed
    # with --assignment, a submission of another one is said, not read as this one's
    assert main(["similarity", str(submitted), "--assignment", A, "--out",
                 str(tmp_path / "one")]) == 0
    printed = capsys.readouterr().out
    assert "not compared: dave/01-attention: a submission of 01-attention, not 02-layers" \
        in printed, printed
