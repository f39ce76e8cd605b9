"""The engine's import graph (tests/import_graph.py): no module imports one that imports it back,
not even inside a function, and no package of tfcourse imports one that imports it back. And its
sizes, as a warning only: a file of tfcourse/ over 600 lines or a function over 60 is worth a look,
but modules are cut by concern, not by size."""
import ast
import warnings
from pathlib import Path

import import_graph as imports


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


FILE_LINES, FUNCTION_LINES = 600, 60


def long_parts(package: Path) -> list[str]:
    """The files of `package` over FILE_LINES lines and its functions over FUNCTION_LINES (from
    `def` to the function's last line, its docstring included)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > FILE_LINES:
            found.append(f"{path.name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{path.name}: {node.name} is {length} lines")
    return found


class LongPart(UserWarning):
    """A file or function of the engine longer than FILE_LINES or FUNCTION_LINES."""


def test_a_long_file_or_function_of_the_engine_is_a_warning(tmp_path):
    for part in long_parts(imports.PACKAGE):
        warnings.warn(f"{part} (over {FILE_LINES} lines a file or {FUNCTION_LINES} a function: "
                      f"is it one concern?)", LongPart)
    (tmp_path / "long.py").write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES)
    assert long_parts(tmp_path) == ["long.py: f is 61 lines"]
