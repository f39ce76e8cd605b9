"""The import graph among tfcourse's modules: who imports whom, its levels, and its cycles
(tests/test_imports.py keeps it free of cycles; `python bench/imports.py` prints it).

Every import counts, those inside functions too (a cycle hidden in a function is still a cycle).
A module's level is 0 when it imports no other tfcourse module, else one more than the highest
level it imports; the modules of a cycle share one level. graph(packages=True) is the graph
between tfcourse's packages and top-level modules instead (tfcourse.sandbox, tfcourse.course, ...).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfcourse"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The tfcourse modules that the file at `path` imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:      # `from .x import name`: module x
                target = target.rpartition(".")[0]
            if target and target != name and target != "tfcourse":
                found.add(target)
    return found


def graph(packages: bool = False) -> dict[str, set[str]]:
    """module -> the tfcourse modules it imports (or package -> packages, with `packages`)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    edges = {name: imported(path, set(files)) for name, path in files.items()}
    if not packages:
        return edges
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])
    grouped: dict[str, set[str]] = {}
    for name, targets in edges.items():
        grouped.setdefault(top(name), set()).update(top(t) for t in targets if top(t) != top(name))
    return grouped


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def levels(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each module's level (see the module's docstring)."""
    component = {m: min(c) for c in cycles(edges) for m in c}
    level: dict[str, int] = {}

    def of(node: str, seen: frozenset) -> int:
        key = component.get(node, node)
        if key in level:
            return level[key]
        members = [m for m in edges if component.get(m, m) == key]
        targets = {t for m in members for t in edges[m] if component.get(t, t) != key}
        level[key] = max((of(t, seen | {key}) + 1 for t in targets), default=0)
        return level[key]

    return {node: of(node, frozenset()) for node in edges}
