"""The visible checks catch the common wrong architectures of a layer and say which, and check
greedy decoding before the student's Transformer exists (they run in the student's kernel: here
they are called directly on the course's solution and on wrong versions of it)."""
import math

import pytest
import torch
from torch import nn

from conftest import ROOT, replace_in, solution_cells, visible_checks

checks = visible_checks()


@pytest.fixture(autouse=True)
def numbers(monkeypatch, request):
    """The checks read their numbers from the working folder, the notebook's; the code that ran
    is given (no kernel keeps it here): none, unless a test gives its cells."""
    assignment = ("03-sorting" if any(word in request.node.name
                                      for word in ("sqrt", "greedy", "log_softmax"))
                  else "02-layers" if "layer" in request.node.name else "01-attention")
    monkeypatch.chdir(ROOT / "source" / assignment)
    checks.use_sources([])
    yield
    checks.use_sources(None)


@pytest.fixture(scope="module")
def parts():
    """The names the course's solution of 01 and 02 defines, as a notebook has them."""
    namespace = {"torch": torch, "nn": nn, "math": math, "F": torch.nn.functional}
    for assignment in ("01-attention", "02-layers"):
        code = "\n\n".join(solution_cells(assignment).values())
        exec(compile(code, f"<{assignment}>", "exec"), namespace)
    return namespace


DEC = {
    "post": None,
    "pre": ("y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
            "        y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory_mask)))\n"
            "        return self.norm3(y + self.dropout(self.ffn(y)))",
            "y = y + self.dropout(self.self_attn(self.norm1(y), self.norm1(y), self_mask))\n"
            "        y = y + self.dropout(self.cross_attn(self.norm2(y), memory, memory_mask))\n"
            "        return y + self.dropout(self.ffn(self.norm3(y)))"),
    "no_cross_residual": ("y = self.norm2(y + self.dropout(self.cross_attn(",
                          "y = self.norm2(self.dropout(self.cross_attn("),
    "norms_swapped": ("y = self.norm1(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
                      "        y = self.norm2(",
                      "y = self.norm2(y + self.dropout(self.self_attn(y, y, self_mask)))\n"
                      "        y = self.norm1("),
}
SAYS = {"pre": "pre-norm", "no_cross_residual": "cross_attn has no residual connection",
        "norms_swapped": "LayerNorms are in each other's places"}


@pytest.mark.parametrize("variant", list(DEC))
def test_the_decoder_layer_check_names_the_wiring(parts, variant, capsys):
    code = solution_cells("02-layers")["decoder-code"]
    if DEC[variant]:
        code = replace_in(code, *DEC[variant])
    namespace = dict(parts)
    exec(code, namespace)
    if variant == "post":
        checks.decoder_layer(namespace["DecoderLayer"])
        assert "post-norm wiring" in capsys.readouterr().out
    else:
        with checks.raising(), pytest.raises(checks.CheckFailed, match=SAYS[variant]):
            checks.decoder_layer(namespace["DecoderLayer"])


def test_the_encoder_layer_check_names_pre_norm(parts):
    code = replace_in(solution_cells("02-layers")["encoder-code"],
                      "x = self.norm1(x + self.dropout(self.self_attn(x, x, mask)))\n"
                      "        return self.norm2(x + self.dropout(self.ffn(x)))",
                      "x = x + self.dropout(self.self_attn(self.norm1(x), self.norm1(x), mask))\n"
                      "        return x + self.dropout(self.ffn(self.norm2(x)))")
    namespace = dict(parts)
    exec(code, namespace)
    with checks.raising(), pytest.raises(checks.CheckFailed, match="pre-norm"):
        checks.encoder_layer(namespace["EncoderLayer"])


def test_greedy_is_checked_on_a_stand_in_model_before_the_transformer_exists(capsys):
    namespace = {"torch": torch}
    exec(solution_cells("03-sorting")["greedy-code"], namespace)
    checks.greedy(namespace["greedy_decode"])             # no Transformer needed
    assert "never BOS" in capsys.readouterr().out
    every_step = replace_in(solution_cells("03-sorting")["greedy-code"],
                            "model.decode(out, memory)", "model.decode(out, model.encode(src))")
    exec(every_step, namespace)
    with checks.raising(), pytest.raises(checks.CheckFailed, match="ran the encoder 7 times"):
        checks.greedy(namespace["greedy_decode"])


def test_the_notebook_calls_the_greedy_check_without_a_model():
    text = (ROOT / "source" / "03-sorting" / "sorting.ipynb").read_text()
    assert "check.greedy(greedy_decode)" in text and "check.greedy(greedy_decode, Transformer" \
        not in text


# -- what the grade fails, the visible checks fail (issue 25) -------------------------------------
def _run_cells(cells: list[str]) -> dict:
    """Run cells as a kernel would, in order, with the code that ran given to the rule check."""
    namespace = {"__name__": "__main__"}
    checks.use_sources(cells)
    for code in cells:
        exec(compile(code, "<cell>", "exec"), namespace)
    return namespace


@pytest.fixture
def sources():
    yield
    checks.use_sources([])


SETUP = "import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"


def test_a_rule_break_fails_the_visible_check_as_it_fails_the_grade(sources):
    ready_made = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
                  "    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
                  "\n        .masked_fill(mask, float('-inf')) if mask is not None else\n"
                  "        q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)\n"
                  "    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is "
                  "None else ~mask), weights\n")
    namespace = _run_cells([SETUP, ready_made])
    with checks.raising(), pytest.raises(checks.CheckFailed,
                                         match="torch.nn.functional.scaled_dot_product_attention"
                                               ".*the course's rules do not allow this"):
        checks.sdpa(namespace["scaled_dot_product_attention"])
    honest = solution_cells("01-attention")["sdpa-code"]
    namespace = _run_cells([SETUP, ready_made, honest])       # rewritten and run again
    with checks.raising():
        checks.sdpa(namespace["scaled_dot_product_attention"])


def test_heads_split_without_transpose_fail_the_visible_check(sources):
    cells = solution_cells("01-attention")
    wrong = replace_in(cells["mha-code"], "x.view(x.shape[0], x.shape[1], self.num_heads, "
                       "self.d_k).transpose(1, 2)",
                       "x.view(x.shape[0], self.num_heads, x.shape[1], self.d_k)")
    namespace = _run_cells([SETUP, cells["sdpa-code"], wrong])
    with checks.raising(), pytest.raises(checks.CheckFailed, match="transpose") as failed:
        checks.mha(namespace["MultiHeadAttention"])
    # The failing output is named in words: "`self`" read as Python's self (issue 25, newcomer).
    assert "the output of self-attention is not what" in str(failed.value), failed.value
    assert "`self`" not in str(failed.value), failed.value


def test_a_missing_sqrt_d_model_fails_the_visible_check(parts, sources):
    code = replace_in(solution_cells("03-sorting")["model-code"],
                      "self.embedding(tokens) * math.sqrt(self.d_model)", "self.embedding(tokens)")
    namespace = dict(parts)
    exec(code, namespace)
    with checks.raising(), pytest.raises(checks.CheckFailed, match=r"sqrt\(d_model\)"):
        checks.transformer(namespace["Transformer"])


@pytest.mark.parametrize("output, fails", [
    ("F.log_softmax(y @ self.embedding.weight.T, dim=-1)", None),
    ("F.log_softmax(y @ self.embedding.weight.detach().T, dim=-1)", "gradient")],
    ids=["log_softmax", "log_softmax_detached"])
def test_a_log_softmax_output_passes_the_visible_check_as_it_passes_the_grade(parts, output, fails):
    """Log-probabilities are the logits up to a constant per row (the Annotated Transformer's
    Generator): the visible check takes them, and still finds an output layer whose gradient does
    not reach the embedding."""
    code = replace_in(solution_cells("03-sorting")["model-code"],
                      "return y @ self.embedding.weight.T", "return " + output)
    namespace = dict(parts)
    exec(code, namespace)
    with checks.raising():
        if fails:
            with pytest.raises(checks.CheckFailed, match=fails):
                checks.transformer(namespace["Transformer"])
        else:
            checks.transformer(namespace["Transformer"])


def test_a_failing_check_reports_in_red_and_the_notebook_goes_on(capsys):
    def scaled_dot_product_attention(q, k, v, mask=None):
        raise NotImplementedError()
    before = len(checks.failures())
    assert checks.sdpa(scaled_dot_product_attention) is None        # no exception, no Out[ ]
    printed = capsys.readouterr().out
    assert "\x1b[1;31m✗ scaled_dot_product_attention is not written yet" in printed
    assert len(checks.failures()) == before + 1


def test_expected_numbers_carry_the_course_rule_and_an_example_per_check(course):
    from tfcourse.student import examples, visible
    found = set()
    for assignment in course.assignments:
        data = examples.expected(ROOT / "source" / assignment.id)
        assert data["rules"]["forbidden"] == course.forbidden_names()
        assert set(data["rules"]["stubs"]) == {stub for a in course.assignments
                                               for g in a.checks for stub in g.stubs}
        found |= set(data["examples"])
    assert found == set(visible.Bundle(visible.course_payload(ROOT), "visible").examples)


def test_parameter_counts_are_written_alike(parts, sources):
    """Issue 25: "should have 59,744 parameters, has 60107"."""
    code = replace_in(solution_cells("03-sorting")["model-code"],
                      "self.embedding = nn.Embedding(vocab_size, d_model)",
                      "self.embedding = nn.Embedding(vocab_size, d_model)\n"
                      "        self.lm_head = nn.Linear(d_model, vocab_size)")
    namespace = dict(parts)
    exec(code, namespace)
    with checks.raising(), pytest.raises(checks.CheckFailed, match="59,744 parameters, has 60,107"):
        checks.transformer(namespace["Transformer"])


# -- a check never says PASS for less than it says ------------------------------------------------
def test_without_its_numbers_a_check_says_it_could_not_run(monkeypatch, tmp_path):
    """No numbers (no notebook or visible_checks.json that carries them): the checks used to skip
    the comparison and the rule and pass; now each says it could not run, and why."""
    monkeypatch.chdir(tmp_path)
    cells = solution_cells("01-attention")
    namespace = _run_cells([SETUP, cells["sdpa-code"]])
    with checks.raising(), pytest.raises(checks.CheckNotRun,
                                         match="check.sdpa could not run: the course.s rule is missing"):
        checks.sdpa(namespace["scaled_dot_product_attention"])


def test_a_missing_example_or_rule_is_not_a_pass(monkeypatch, tmp_path):
    import json
    data = json.loads((ROOT / "source" / "01-attention" / "visible_checks.json").read_text())
    data["examples"].pop("mha")
    (tmp_path / "visible_checks.json").write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    cells = solution_cells("01-attention")
    namespace = _run_cells([SETUP, cells["sdpa-code"], cells["mha-code"]])
    checks.sdpa(namespace["scaled_dot_product_attention"])                    # still passes
    with checks.raising(), pytest.raises(checks.CheckNotRun, match="'mha' are missing"):
        checks.mha(namespace["MultiHeadAttention"])
    del data["rules"]
    (tmp_path / "visible_checks.json").write_text(json.dumps(data))
    with checks.raising(), pytest.raises(checks.CheckNotRun, match="rule is missing"):
        checks.sdpa(namespace["scaled_dot_product_attention"])


def test_outside_a_kernel_the_rule_cannot_be_read_and_the_check_says_so(sources):
    checks.use_sources(None)                # no kernel, no cells given: nothing to read
    namespace = _run_cells([SETUP, solution_cells("01-attention")["sdpa-code"]])
    checks.use_sources(None)
    with checks.raising(), pytest.raises(checks.CheckNotRun, match="outside a Jupyter kernel"):
        checks.sdpa(namespace["scaled_dot_product_attention"])


def test_a_masked_fill_whose_result_is_dropped_is_told_the_fill_had_no_effect(sources):
    """`scores.masked_fill(mask, -inf)` alone leaves scores as they were: "fill those scores with
    -inf" is what the student believes they did, so the check says the fill changed nothing."""
    cells = solution_cells("01-attention")
    wrong = replace_in(cells["sdpa-code"], 'scores = scores.masked_fill(mask, float("-inf"))',
                       'scores.masked_fill(mask, float("-inf"))')
    namespace = _run_cells([SETUP, wrong])
    with checks.raising(), pytest.raises(checks.CheckFailed) as failed:
        checks.sdpa(namespace["scaled_dot_product_attention"])
    said = str(failed.value)
    assert "no effect" in said and "new tensor" in said and "masked_fill_" in said, said
    assert "fill those scores with -inf" not in said, said


def test_a_softmax_whose_result_is_dropped_is_told_to_keep_it(sources):
    """`scores.softmax(dim=-1)` alone, then the scores returned as the weights: "take the
    softmax" is what the student believes they did."""
    cells = solution_cells("01-attention")
    wrong = replace_in(cells["sdpa-code"], "weights = scores.softmax(dim=-1)",
                       "scores.softmax(dim=-1)\n    weights = scores")
    namespace = _run_cells([SETUP, wrong])
    with checks.raising(), pytest.raises(checks.CheckFailed) as failed:
        checks.sdpa(namespace["scaled_dot_product_attention"])
    said = str(failed.value)
    assert "new tensor" in said and "keep its result" in said, said
