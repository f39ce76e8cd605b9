"""How much literal data the student's code holds: course.yaml `limits.literal_kb` (run.py).

Data can pose as code: trained weights pasted into a notebook as a hex or base64 string, a bytes
literal, `bytes.fromhex("...")`, or a long list of floats, loaded in `__init__`, would pass the
checks without the student having written what they check. So the literal data in the student's
cells is counted, per notebook over all of them, and a notebook holding more than the limit is not
graded. Counted: the bytes of every string and bytes constant (f-strings' text too) except
docstrings, and the source characters of every number literal. Honest code holds little: its
prose (messages, asserts, prints) and a few shapes and constants.

Nothing here recurses over the student's syntax tree (ast.walk is a loop); cells that are not
valid Python hold nothing that can run, and count nothing.
"""
from __future__ import annotations

import ast
from typing import Iterable

from .rules import parse

_BODIES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def literal_bytes(sources: Iterable[str]) -> int:
    """The literal data of these cells, in bytes (see the module's docstring)."""
    return sum(_of_tree(tree) for tree, _ in map(parse, sources) if tree is not None)


def _of_tree(tree: ast.Module) -> int:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, _BODIES) and node.body and
                  isinstance(node.body[0], ast.Expr) and
                  isinstance(node.body[0].value, ast.Constant) and
                  isinstance(node.body[0].value.value, str)}
    total = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in docstrings:
            continue
        value = node.value
        if isinstance(value, str):
            total += len(value.encode("utf-8", "replace"))
        elif isinstance(value, bytes):
            total += len(value)
        elif isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            total += _written(node)
    return total


def _written(node: ast.Constant) -> int:
    """The characters a number literal takes in the source (`0.0625`: 6, `1_000`: 5)."""
    start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if start is not None and end is not None and node.lineno == node.end_lineno and end > start:
        return end - start
    return len(repr(node.value))
