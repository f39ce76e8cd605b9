"""A catalogue of the bugs a real class writes, each a small edit of a correct submission.

Each bug names the checks it must lose and, for each, the words its message must contain: the
cause, in the words a correct message uses ("sqrt(d_k)" for a missing scale, "pre-norm" for a
pre-norm layer, "diagonal" for a causal mask that blocks the diagonal). A message that loses the
points but blames something else (a mask "inverted" when it blocks the diagonal) sends the student
the wrong way, so it fails the catalogue too.

A precise grader makes a bug lose points in its own part only, its check group ("sdpa", "mha",
"masks", ...): a bug in MultiHeadAttention may cost any `mha.*` point, and no `sdpa.*` or `masks.*`.
Each bug's checks lie in one group, but for the few in TWO_PARTS below, which truly break two.
A bug marked `exact` loses exactly its checks and no other, even in its own group: the cause is one,
so it is reported once (a missing scale costs sdpa.values, not sdpa.mask too).

Most bugs edit the course's solution; a bug with a `port` edits one of the ports in
`alternatives.py` instead (a student who ported public code and kept one of its conventions).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str
    assignment: str
    edits: dict            # cell -> [(old, new), ...]; a cell is an answer cell's grade_id, or
    #                        "+<grade_id>" for the cell a port adds before that answer cell
    says: dict             # test id ("group.test") -> the words its message must contain (all of
    #                        them, in any case); every test named must lose points; () asks none
    train: bool = False    # graded with the training check (losing trained.accuracy is the point)
    exact: bool = False    # loses exactly the tests in `says`, no other even in its group
    port: object = None    # the Alternative it edits (None: the course's solution)
    es: dict | None = None  # test id -> the words its message must contain in Spanish (the
    #                        message as the Spanish feedback renders it; a test of `says` only)

    @property
    def expect(self) -> frozenset:
        """The tests this bug must lose."""
        return frozenset(self.says)

    @property
    def own(self) -> frozenset:
        """The check groups this bug may lose points in: those of the tests it must lose."""
        return frozenset(groups(self.says))


def words(said) -> tuple:
    """A message's required words from "one phrase" or ("several", "phrases") or None."""
    if not said:
        return ()
    return (said,) if isinstance(said, str) else tuple(said)


def bug(name, assignment, cell, old, new, says, *, more=(), train=False, exact=False, port=None,
        also=None, es=None):
    """One bug: `old` -> `new` in cell `cell`; `more` adds (old, new) pairs in that cell and `also`
    maps other cells to their pairs. `says` maps each test the bug must lose to the words its
    message must contain (a set of test ids names no words, which test_catalogue refuses)."""
    if not isinstance(says, dict):
        says = dict.fromkeys(says)
    edits = {cell: [(old, new), *more], **(also or {})}
    return Bug(name, assignment, edits, {test: words(said) for test, said in says.items()}, train,
               exact, port, {test: words(said) for test, said in (es or {}).items()} or None)


def groups(test_ids) -> set[str]:
    return {test.split(".")[0] for test in test_ids}


# The only bugs that may lose points in two check groups, each because its one mistake truly lives
# in both parts. Every other bug's tests, and every point it loses, lie in one group.
TWO_PARTS = {
    # The training check trains the student's Transformer with the student's own shift_right: a
    # decoder input that is not shifted lets the model copy its target, so it does not learn.
    "shift_missing": {"teacher", "trained"},
    # The same model, trained: a decoder that sees the future learns to copy and cannot decode.
    "model_decoder_without_causal_mask": {"model", "trained"},
    # One SublayerConnection class, written once, wires both layers: left pre-norm (as the
    # Annotated Transformer writes it), it makes the encoder layer and the decoder layer pre-norm.
    "annotated_sublayer_left_pre_norm": {"encoder", "decoder"},
}


def every_bug() -> list:
    """The BUGS of every module of the catalogue (one per notebook; lazy.py holds the twins): a
    new assignment's catalogue is a new module here, found without editing the tests."""
    import importlib
    import pkgutil

    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if info.name != "lazy":
            found += getattr(module, "BUGS", [])
    return found
