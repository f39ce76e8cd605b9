"""A catalogue of the bugs a real class writes, each a small edit of the course's solution.

Each bug names the checks it must lose (`expect`) and the check groups that are its own part
(`own`: the groups of `expect`). A precise grader makes a bug lose points in its own
part only: a bug in MultiHeadAttention may cost any `mha.*` point, and no `sdpa.*` or `masks.*`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str
    assignment: str
    edits: dict            # answer cell grade_id -> [(old, new), ...] applied to its solution
    expect: frozenset      # test ids ("group.test") this bug must lose
    own: frozenset         # check groups this bug may lose points in
    train: bool = False    # graded with the training check (losing trained.accuracy is the point)


def bug(name, assignment, cell, old, new, expect, *, more=(), train=False):
    """One bug: `old` -> `new` in answer cell `cell`; `more` adds (old, new) pairs in that cell.
    Its own part is the check groups of what it must lose."""
    expect = frozenset(expect)
    return Bug(name, assignment, {cell: [(old, new), *more]}, expect, frozenset(groups(expect)),
               train)


def groups(test_ids) -> set[str]:
    return {test.split(".")[0] for test in test_ids}
