"""The course's rule against torch's ready-made attention, read from the student's source code.

A stub that mentions a forbidden API (course.yaml `rules.forbidden`), by attribute (`F.scaled_dot_
product_attention`), by import (`from torch.nn import MultiheadAttention as M`) or by name in a string
(`getattr(F, "scaled_dot_product_attention")`), breaks the rule. The sandbox also trips a wire when
one is called at run time; either way the stub's checks earn nothing.
"""
from __future__ import annotations

import ast


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def violations(sources: list[str], forbidden: list[str]) -> dict[str, set[str]]:
    """Top-level function or class name -> the forbidden APIs used inside it."""
    banned = {_last(name): name for name in forbidden}
    found: dict[str, set[str]] = {}
    aliases: dict[str, str] = {}
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except (SyntaxError, ValueError):
            continue
    defined = {top.name for tree in trees for top in tree.body
               if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for tree in trees:                      # imports anywhere make aliases of forbidden names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    name = alias.asname or alias.name
                    if alias.name in banned and name not in defined:
                        aliases[name] = banned[alias.name]
    for tree in trees:
        for top in tree.body:
            if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            uses = _uses(top, banned, aliases)
            if uses:
                found.setdefault(top.name, set()).update(uses)
    return found


def _uses(tree: ast.AST, banned: dict[str, str], aliases: dict[str, str]) -> set[str]:
    uses = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in banned:
            uses.add(banned[node.attr])
        elif isinstance(node, ast.Name) and node.id in aliases:
            uses.add(aliases[node.id])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value.strip()           # a name in a string, as for getattr or importlib
            for short, full in banned.items():
                if word == short or word.endswith("." + short):
                    uses.add(full)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in banned:
                    uses.add(banned[alias.name])
    return uses

