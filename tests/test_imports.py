"""The engine's import graph (bench/imports.py): no module imports one that imports it back, not
even inside a function, and no package of tfcourse imports one that imports it back."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import imports  # noqa: E402  (bench/imports.py)


def test_no_module_is_in_an_import_cycle():
    assert imports.cycles(imports.graph()) == []


def test_no_package_is_in_an_import_cycle():
    assert imports.cycles(imports.graph(packages=True)) == []


def test_the_cycle_finder_finds_a_cycle_and_its_levels():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert imports.cycles(edges) == [["a", "b", "c"]]
    assert imports.levels(edges) == {"a": 0, "b": 0, "c": 0, "d": 1, "e": 0}


def test_imports_inside_functions_count(tmp_path):
    """A lazy import is still an edge: it is how the two cycles of grading/ were hidden."""
    edges = imports.graph()
    assert "tfcourse.batch.runner" in edges["tfcourse.cli"]           # imported in cmd_grade
    assert "tfcourse.batch.cluster" in edges["tfcourse.batch.runner"]  # imported in grade_many


def test_the_batch_runner_imports_no_torch():
    """`tfcourse grade` prints its first line once the runner is imported: torch (2 s or more) is
    for the graders and the students' processes, not for the command that starts them. (Reading a
    notebook's cells took it in through sandbox.session's channel.)"""
    import subprocess
    import sys

    probe = ("import sys, tfcourse.batch.runner, tfcourse.submission.failures; "
             "print(sorted(m for m in ('torch', 'nbformat', 'nbconvert') if m in sys.modules))")
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True).stdout
    assert said.strip() == "[]"
