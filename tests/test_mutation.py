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


def call_mutants(assignment, cell):
    code = solution_cells(assignment)[cell]
    made = mutation.cell_mutants(assignment, cell, cell.removesuffix("-code"), code,
                                 family="calls")
    for mutant in made:
        ast.parse(mutant.code)
        assert mutant.code != code and mutant.operator in mutation.KINDS
    assert len({m.id for m in made}) == len(made)
    return {(m.operator, m.before, m.after) for m in made}


def test_the_call_operators_make_the_bugs_cosmic_ray_does_not():
    """bench/call_operators.py: a call or a method removed, arguments swapped, an axis changed, a
    slice moved, an operation in place on an argument, a constructor's arguments exchanged; each
    changes only the characters of its place (the line keeps its layout)."""
    scores = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
    sdpa = call_mutants("01-attention", "sdpa-code")
    assert ("DropMethod", scores, "scores = q @ k / math.sqrt(q.shape[-1])") in sdpa
    assert ("DropMethod", "weights = scores.softmax(dim=-1)", "weights = scores") in sdpa
    assert ("ChangeAxis", "weights = scores.softmax(dim=-1)",
            "weights = scores.softmax(dim=-2)") in sdpa
    assert ("InPlace", scores, scores.replace("transpose", "transpose_")) in sdpa
    assert ("SwapArguments", 'scores = scores.masked_fill(mask, float("-inf"))',
            'scores = scores.masked_fill(float("-inf"), mask)') in sdpa
    assert not any(op == "SwapArguments" and "transpose(-1, -2)" in after
                   for op, _, after in sdpa)            # transpose's two dims: either order
    split = ("return x.view(x.shape[0], x.shape[1], self.num_heads, self.d_k).transpose(1, 2)")
    assert ("ChangeAxis", split, split.replace("transpose(1, 2)", "transpose(0, 2)")) in \
        call_mutants("01-attention", "mha-code")
    ffn = call_mutants("02-layers", "ffn-code")
    assert ("RemoveCall", "return self.linear2(F.relu(self.linear1(x)))",
            "return self.linear2(self.linear1(x))") in ffn
    assert ("SwapConstructorArguments", "self.linear1 = nn.Linear(d_model, d_ff)",
            "self.linear1 = nn.Linear(d_ff, d_model)") in ffn
    encoder = call_mutants("02-layers", "encoder-code")
    assert ("SwapConstructorArguments", "self.ffn = FeedForward(d_model, d_ff)",
            "self.ffn = FeedForward(d_ff, d_model)") in encoder
    assert ("InPlace", "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))",
            "x = self.norm1(x.add_(self.dropout(self.self_attn(x, x, mask))))") in encoder
    assert not any(op == "InPlace" and "norm2" in before for op, before, _ in encoder)
    teacher = call_mutants("03-sorting", "teacher-code")
    cat = "return torch.cat([start, y[:, :-1]], dim=1)"
    assert ("ShiftSlice", cat, cat.replace(":-1", "1:")) in teacher
    assert ("SwapArguments", cat, "return torch.cat([y[:, :-1], start], dim=1)") in teacher
    assert ("ChangeAxis", cat, cat.replace("dim=1", "dim=0")) in teacher


def test_the_in_place_operator_on_a_statement_and_the_cause_words():
    code = "def f(x, z):\n    y = x + z\n    return y\n"
    made = mutation.cell_mutants("01-attention", "sdpa-code", "sdpa", code, family="calls")
    assert [m.after for m in made if m.operator == "InPlace"] == ["x += z; y = x"]
    assert mutation.names_cause("DropMethod", "transpose", {"sdpa.values": "use k.T"})
    assert not mutation.names_cause("DropMethod", "transpose", {"sdpa.values": "wrong values"})
    assert mutation.names_cause("ChangeAxis", "softmax", {"sdpa.values": "over the queries"})
    assert mutation.names_cause("SwapConstructorArguments", "Linear",
                                {"ffn.shapes": "FeedForward(d_model, d_ff) got"})
    assert mutation.names_cause("ReplaceBinaryOperator_Mul_Div", "", {"x": "y"}) is None
    # a RuntimeError's "dimension" is not the cause of an axis changed
    assert not mutation.names_cause("ChangeAxis", "view",
                                    {"mha.self": "a must match b at non-singleton dimension 1"})
    schedule = call_mutants("03-sorting", "schedule-code")
    assert not any(op == "SwapArguments" for op, _, _ in schedule)      # min's arguments commute
    row = {"verdict": "killed", "named": False, "id": "sdpa-code/DropMethod/L8C17", "note": "T",
           "before": "a", "after": "b", "group": "sdpa",
           "lost": {"sdpa.values": "not the expected values", "mha.self": "elsewhere"}}
    text = mutation.unnamed_markdown("01-attention", [row])
    assert "1 of 1 killed" in text and "sdpa.values: not the expected" in text
    assert "elsewhere" not in text
