"""Which way imports go: read from the source (ast), nothing imported, so it takes no time.

- The engine (tfcourse/) never imports the course folder (`autograder`, `visible`): it reads a
  course's hidden graders by their path, through pytest, and its visible checks as text that the
  notebooks carry, so the installed package works for any course.
- The student library (tfcourse/student/, the course's visible checks in visible/ that run beside
  it in the student's kernel, and whatever of tfcourse they import) imports nothing
  of the instructor's side: not the grader, the sandbox, the adapters or the build, nor nbgrader,
  nbclient, JupyterLab or pytest, which a student's install does not have. An optional import
  that says what to install when it is missing (inside `try: ... except ImportError`) is allowed
  for the third-party tools only.
- No file of the engine or of the course folder edits the import path (`sys.path`, PYTHONPATH):
  the engine is an installed package, and a course's graders are found by pytest from the course
  folder. The one exception is the sandbox's worker (below).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from conftest import ROOT

ENGINE = ROOT / "tfcourse"
COURSE = ROOT / "autograder"
VISIBLE = ROOT / "visible"             # the course's visible checks: they run in students' kernels
STUDENT = ENGINE / "student"
GRADING_SIDE = ("tfcourse.submission", "tfcourse.batch", "tfcourse.sandbox", "tfcourse.adapters",
                "tfcourse.build")
INSTRUCTOR_TOOLS = ("nbgrader", "nbclient", "jupyterlab", "pytest", "_pytest")
# The modules of the grading side the visible checks use: the course's rule, read from the code
# the student ran, as the grader reads it (issue 25), in its pieces (the binding graph, the flagged
# constructs, the tables). They import the standard library alone.
SHARED_WITH_STUDENTS = ("tfcourse.submission.rules", "tfcourse.submission.bindings",
                        "tfcourse.submission.findings", "tfcourse.sandbox.rulebook")
# tfcourse/sandbox/worker.py runs inside the sandbox, as the student's process: it puts the
# student's own folder (its working directory) first on sys.path, as Jupyter does for a notebook,
# so that a submission's own helper modules import as they did in the student's kernel. It is the
# student's path, in the student's process, not the engine's.
MAY_EDIT_PATH = {ENGINE / "sandbox" / "worker.py"}


def sources(*folders: Path) -> list[Path]:
    found = sorted(path for folder in folders for path in folder.rglob("*.py")
                   if "__pycache__" not in path.parts)
    assert found, f"no Python files under {folders}"
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _guarded(node: ast.AST, parents: dict) -> bool:
    """Whether `node` lies in the body of a `try` that catches ImportError (an optional import)."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = handler.type
                names = [caught] if not isinstance(caught, ast.Tuple) else caught.elts
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
                       for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.lru_cache(maxsize=None)
def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, optional) for every import in the file, wherever it is (in a function too),
    relative imports resolved; `from a import b` names both a and a.b (b may be a module). Calls
    of importlib.import_module and __import__ with a constant name count too."""
    tree = parsed(path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(path).split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            function = node.func
            called = function.attr if isinstance(function, ast.Attribute) else \
                getattr(function, "id", None)
            if called in ("import_module", "__import__"):
                names = [node.args[0].value]
        optional = bool(names) and _guarded(node, parents)
        found += [(name, node.lineno, optional) for name in names if name]
    return found


def within(name: str, packages) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}"


def test_the_module_names_are_read_right():
    """The resolver itself: relative imports of tfcourse/student/plots.py land in tfcourse."""
    found = {name for name, _, _ in imports(STUDENT / "plots.py")}
    assert {"tfcourse.i18n", "tfcourse.student.checking", "torch"} <= found
    assert _package(STUDENT / "__init__.py") == "tfcourse.student"
    assert module_name(ENGINE / "sandbox" / "worker.py") == "tfcourse.sandbox.worker"


def test_optional_imports_are_told_from_plain_ones(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import nbclient\n"
                      "def run():\n"
                      "    try:\n"
                      "        from nbgrader.apps import api\n"
                      "    except (OSError, ImportError):\n"
                      "        import pytest\n"
                      "    importlib.import_module('jupyterlab')\n")
    assert sorted(imports(sample), key=lambda found: found[1]) == [
        ("nbclient", 1, False), ("nbgrader.apps", 4, True), ("nbgrader.apps.api", 4, True),
        ("pytest", 6, False), ("jupyterlab", 7, False)]


def test_the_engine_never_imports_the_course_folder():
    wrong = [f"{where(path, line)} imports {name}" for path in sources(ENGINE)
             for name, line, _ in imports(path) if within(name, ["autograder", "visible"])]
    assert not wrong, "the engine must read a course's graders by path:\n" + "\n".join(wrong)


def _student_modules() -> list[Path]:
    """tfcourse/student/, visible/ and every module of tfcourse they import, directly or not."""
    by_name = {module_name(path): path for path in sources(ENGINE)}
    todo, seen = sorted(sources(STUDENT, VISIBLE)), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, _, _ in imports(path):
            while name:                            # a.b.c loads a and a.b first
                if name in by_name and by_name[name] not in seen:
                    todo.append(by_name[name])
                name = name.rpartition(".")[0]
    return sorted(seen)


def test_the_student_library_imports_nothing_of_the_instructors_side():
    modules = _student_modules()
    assert STUDENT / "visible.py" in modules and VISIBLE / "checks.py" in modules
    assert ENGINE / "i18n.py" in modules
    wrong = []
    for path in modules:
        for name, line, optional in imports(path):
            if within(name, SHARED_WITH_STUDENTS) or name == "tfcourse.submission":
                continue
            if within(name, GRADING_SIDE) or (within(name, INSTRUCTOR_TOOLS) and not optional):
                wrong.append(f"{where(path, line)} imports {name}")
    assert not wrong, ("what students import must not need the instructor's side "
                       "(tfcourse[instructor]):\n" + "\n".join(wrong))


def test_the_rule_students_share_imports_the_standard_library_alone():
    import sys
    for name in SHARED_WITH_STUDENTS:
        path = ENGINE.joinpath(*name.split(".")[1:]).with_suffix(".py")
        outside = [imported for imported, _, _ in imports(path)
                   if imported.split(".")[0] not in sys.stdlib_module_names
                   and not within(imported, SHARED_WITH_STUDENTS)]
        assert not outside, f"{name} imports {outside}"


def _path_edits(path: Path) -> list[str]:
    """Where a file changes sys.path (a call of one of its methods, an assignment to it or to a
    slice of it) or names the PYTHONPATH variable."""
    tree = parsed(path)

    def is_sys_path(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "path" and \
            isinstance(node.value, ast.Name) and node.value.id == "sys"

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                is_sys_path(node.func.value):
            found.append((node.lineno, f"sys.path.{node.func.attr}(...)"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if is_sys_path(target) or (isinstance(target, ast.Subscript) and
                                           is_sys_path(target.value)):
                    found.append((node.lineno, "sys.path changed"))
        elif isinstance(node, ast.Constant) and node.value == "PYTHONPATH":
            found.append((node.lineno, "PYTHONPATH"))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "addsitedir":
            found.append((node.lineno, "site.addsitedir(...)"))
    return [f"{where(path, line)}: {what}" for line, what in sorted(found)]


def test_the_path_edit_finder_finds_them(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os, sys\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\n"
                      "sys.path += ['z']\nos.environ['PYTHONPATH'] = 'w'\nprint(sys.path[0])\n")
    assert [line.split(":", 2)[2].strip() for line in _path_edits(sample)] == [
        "sys.path.insert(...)", "sys.path changed", "sys.path changed", "PYTHONPATH"]


@pytest.mark.parametrize("folder", [ENGINE, COURSE, VISIBLE], ids=["tfcourse", "autograder",
                                                                   "visible"])
def test_nothing_edits_the_import_path(folder):
    wrong = [edit for path in sources(folder) if path not in MAY_EDIT_PATH
             for edit in _path_edits(path)]
    assert not wrong, ("the engine is an installed package and the graders are found by pytest; "
                       "no file edits the import path:\n" + "\n".join(wrong))


def test_the_worker_is_the_one_exception_and_edits_only_the_students_path():
    edits = _path_edits(ENGINE / "sandbox" / "worker.py")
    assert [edit.split(": ", 1)[1] for edit in edits] == ["sys.path.insert(...)"]
    source = (ENGINE / "sandbox" / "worker.py").read_text()
    assert "sys.path.insert(0, os.getcwd())" in source          # the student's own folder
