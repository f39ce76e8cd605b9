"""bench/mutation.py's generator and its file of reviewed equivalent mutants (no grading here: the
mutation run itself is a benchmark, bench/README.md)."""
import ast
import importlib.util
import sys
import textwrap

import pytest

from conftest import ROOT, solution_cells

spec = importlib.util.spec_from_file_location("mutation", ROOT / "bench" / "mutation.py")
mutation = sys.modules["mutation"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)


def test_the_generator_makes_mutants_of_a_solution_cell():
    code = solution_cells("01-attention")["masks-code"]
    made = mutation.cell_mutants("01-attention", "masks-code", "masks", code)
    assert len(made) >= 5
    for mutant in made:
        ast.parse(mutant.code)                                   # a mutant is valid Python
        assert mutant.code != code and mutant.before in code
        assert mutant.stub in ("causal_mask", "padding_mask")
    found = {(m.stub, m.operator, m.after) for m in made}
    assert ("padding_mask", "ReplaceComparisonOperator_Eq_NotEq",
            "return (tokens != pad_id)[:, None, None, :]") in found
    assert ("causal_mask", "NumberReplacer",
            "return torch.ones(T, T, dtype=torch.bool).triu(diagonal= 0)") in found
    assert len({m.id for m in made}) == len(made)                # ids tell mutants apart


def test_an_equivalents_file_that_went_stale_or_is_malformed_is_caught(tmp_path):
    code = "def f(x):\n    return x * 2\n"
    made = mutation.cell_mutants("01-attention", "sdpa-code", "sdpa", code)
    entry = {"id": "sdpa-code/x", "cell": "sdpa-code", "stub": "f",
             "operator": "ReplaceBinaryOperator_Mul_Div", "before": "return x * 2",
             "after": "return x / 2", "reason": "r"}
    assert mutation.unmatched([entry], made) == []
    stale = {**entry, "before": "return x * 3"}
    assert mutation.unmatched([stale], made) == [stale]
    path = tmp_path / "equivalents.yaml"
    path.write_text(textwrap.dedent("""\
        - id: a
          cell: sdpa-code
          stub: f
          operator: NumberReplacer
          before: x
          after: y
        """))
    with pytest.raises(ValueError, match="entry 1"):
        mutation.load_equivalents(path)


def test_every_reviewed_equivalent_mutant_is_still_generated():
    """Each entry of bench/equivalent-mutants.yaml names a mutant the generator makes today of the
    course's solution: a solution that changed cannot leave the file stale silently."""
    entries = mutation.load_equivalents()
    assert len({entry["id"] for entry in entries}) == len(entries)
    assert len({mutation.entry_key(entry) for entry in entries}) == len(entries)
    made = []
    for assignment in ("01-attention", "02-layers", "03-sorting"):
        for cell, code in solution_cells(assignment).items():
            named = {entry["operator"] for entry in entries if entry["cell"] == cell}
            if named:
                made += mutation.cell_mutants(assignment, cell, cell.removesuffix("-code"), code,
                                              only=named)
    stale = mutation.unmatched(entries, made)
    assert stale == [], f"entries no mutant matches: {[entry['id'] for entry in stale]}"
    stubs = {mutant.key: mutant.stub for mutant in made}
    assert all(stubs[mutation.entry_key(entry)] == entry["stub"] for entry in entries)
