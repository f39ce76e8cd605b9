"""The notebooks' demo cells while their stubs are not written: one line each, not a traceback.

`show.needs` wraps a demo cell's code. A stub that raises NotImplementedError becomes one line
naming it, in the notebook's language; so does a name the cell reads that an earlier demo never
got to define. Any other error is raised as usual. The released notebooks are run here with every
stub in place, as a student first opens them: each demo cell prints its one line and raises nothing.
"""
import re

import matplotlib
import nbformat
import pytest
import torch

from tfcourse import notebook
from tfcourse.student import show, use_language

from conftest import NOTEBOOK_OF, ROOT

matplotlib.use("Agg")
WITH_NEEDS = ["01-attention", "02-layers", "03-sorting"]


def positional_encoding(T, d_model):
    raise NotImplementedError()


class Transformer(torch.nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, 4)

    def forward(self, src):
        # YOUR CODE HERE
        raise NotImplementedError()


def test_a_stub_says_so_in_one_line(capsys):
    with show.needs("positional_encoding"):
        show.positions(positional_encoding(64, 32))
    out, err = capsys.readouterr()
    assert out.splitlines() == ["✗ write positional_encoding first: this cell uses it"]
    assert "Traceback" not in out + err and err == ""


def test_a_method_stub_is_named_by_its_class(capsys):
    model = Transformer(11)
    with show.needs():
        model(torch.zeros(1, 3, dtype=torch.long))
    assert capsys.readouterr().out.splitlines() == ["✗ write Transformer first: this cell uses it"]


def test_a_name_an_earlier_demo_did_not_define_is_one_line_too(capsys):
    with show.needs("greedy_decode"):
        print(model_never_trained)  # noqa: F821
    assert capsys.readouterr().out.splitlines() == [
        "✗ model_never_trained is not defined yet: it comes from a cell above that has not run to "
        "the end"]


def test_in_spanish(capsys):
    try:
        use_language("es")
        with show.needs("positional_encoding"):
            positional_encoding(4, 2)
    finally:
        use_language("en")
    assert capsys.readouterr().out.splitlines() == [
        "✗ primero escribe positional_encoding: esta celda lo usa"]


def broken(T, d_model):
    return torch.zeros(T, d_model) @ torch.zeros(T + 1, d_model)


def uses_an_undefined_name():
    return undefined_helper()  # noqa: F821


@pytest.mark.parametrize("error, run", [
    (RuntimeError, lambda: broken(4, 2)),                              # a real bug: shown as is
    (ValueError, lambda: int("twelve")),
    (NameError, uses_an_undefined_name),                               # inside the student's code
    (NotImplementedError, lambda: torch.nn.Module()(1)),               # torch's own, not a stub
], ids=["bug", "value", "name-in-code", "torch"])
def test_other_errors_are_raised(capsys, error, run):
    with pytest.raises(error):
        with show.needs("positional_encoding"):
            run()
    assert capsys.readouterr().out == ""


def test_nothing_happens_when_nothing_goes_wrong(capsys):
    with show.needs("positional_encoding") as needed:
        value = 3
    assert value == 3 and needed is not None and capsys.readouterr().out == ""


# -- the released notebooks, every stub in place ---------------------------------------------------
SOLUTION = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*$",
                      re.S | re.M)


def stubbed(source: str) -> str:
    """A solution cell as nbgrader releases it: each solution region a NotImplementedError."""
    return SOLUTION.sub(lambda m: f"{m['indent']}# YOUR CODE HERE\n"
                                  f"{m['indent']}raise NotImplementedError()", source)


def demo_cells(assignment):
    nb = nbformat.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment], as_version=4)
    return [cell for cell in nb.cells if (notebook.grade_id(cell) or "").startswith("demo-")]


@pytest.mark.parametrize("assignment", WITH_NEEDS)
def test_every_demo_cell_uses_needs(assignment):
    cells = demo_cells(assignment)
    assert cells
    for cell in cells:
        assert "with show.needs(" in cell.source, notebook.grade_id(cell)


@pytest.mark.parametrize("assignment", WITH_NEEDS)
def test_the_released_demos_say_one_line_each(assignment, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    folder = ROOT / "source" / assignment
    nb = nbformat.read(folder / NOTEBOOK_OF[assignment], as_version=4)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    threads = torch.get_num_threads()
    namespace = {"__name__": "__main__"}
    try:
        for cell in nb.cells:
            if cell.cell_type != "code" or notebook.is_test(cell):
                continue
            source = stubbed(cell.source) if notebook.is_solution(cell) else cell.source
            capsys.readouterr()
            exec(compile(source, f"<{notebook.grade_id(cell)}>", "exec"), namespace)
            out, _ = capsys.readouterr()
            if (notebook.grade_id(cell) or "").startswith("demo-"):
                lines = out.splitlines()
                assert len(lines) == 1 and lines[0].startswith("✗ "), (notebook.grade_id(cell), out)
                assert "first: this cell uses it" in lines[0] or "is not defined yet" in lines[0]
    finally:
        torch.set_num_threads(threads)
        use_language("en")
        plt.close("all")
