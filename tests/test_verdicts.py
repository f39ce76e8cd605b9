"""Verdicts no student can forge: each cheat scores, check by check, no more than its honest twin.

A twin is the same submission without the cheat: the same bugs, or the stubs left unwritten. The
cheats are those of a hostile review (docs/verdicts.md): replies of another dtype, NaN, constant
or input-independent outputs, modules that compute something trivial beside the contract's
parameters, evidence forged inside the student's process (stand-in counters, gradients, the
grader's own harness), a schedule that only has to cancel out in the recipe, and objects that
break the grader's questions. All are graded in one batch, as a class is.
"""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import NOTEBOOK_OF, ROOT, make_submission, replace_in, solution_cells

from tfcourse.batch.runner import grade_many
from tfcourse import notebook

# End to end: grades cheats and their twins through the sandbox.
pytestmark = pytest.mark.slow

SOLUTION = {a: solution_cells(a) for a in ("01-attention", "02-layers", "03-sorting")}


def code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def released(assignment: str) -> dict[str, str]:
    """grade_id -> the answer cell as students get it (the stubs, unwritten)."""
    nb = notebook.read(ROOT / "release" / assignment / NOTEBOOK_OF[assignment])
    return {notebook.grade_id(cell): notebook.text(cell) for cell in nb.cells
            if notebook.is_solution(cell)}


# -- 01-attention ----------------------------------------------------------------------------------
BOOL_SDPA = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        shape = (*q.shape[:-1], v.shape[-1])
        return torch.ones(shape, dtype=torch.bool), torch.ones(*q.shape[:-1], k.shape[-2],
                                                                dtype=torch.bool)
""")
BOOL_MHA = code("""
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, x_q, x_kv, mask=None):
            return torch.ones(x_q.shape, dtype=torch.bool)
""")
# The honest twins of those: the right structure and shapes, values not written yet.
ZEROS_SDPA = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        return torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])
""")
# The twin of a uniform attention: the same output (the mean of the values, which varies with the
# input, as sdpa.shapes asks), with no attention at all behind it.
MEAN_OF_VALUES_SDPA = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        out = v.mean(-2, keepdim=True).expand(*q.shape[:-1], v.shape[-1])
        return out, torch.zeros(*q.shape[:-1], k.shape[-2])
""")
UNWRITTEN_MHA = replace_in(BOOL_MHA, "return torch.ones(x_q.shape, dtype=torch.bool)",
                           "raise NotImplementedError()")
NAN_SDPA = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        weights = torch.full((*q.shape[:-1], k.shape[-2]), float("nan"))
        return torch.full((*q.shape[:-1], v.shape[-1]), float("inf")), weights
""")
# Attention that ignores q and k (uniform weights over the keys the mask keeps), and a multi-head
# attention without parameters: both respect masks, neither attends.
UNIFORM_SDPA = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        scores = torch.zeros(*q.shape[:-1], k.shape[-2])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights
""")
MEAN_MHA = code("""
    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()

        def forward(self, x_q, x_kv, mask=None):
            keep = torch.ones(x_q.shape[0], x_q.shape[1], x_kv.shape[1])
            if mask is not None:
                keep = keep.masked_fill(mask.reshape(-1, *mask.shape[-2:]).expand_as(keep)
                                        if mask.dim() < 4 else mask.any(1).expand_as(keep), 0.0)
            return x_q + (keep @ x_kv) / keep.sum(-1, keepdim=True).clamp(min=1)
""")

# -- 02-layers -------------------------------------------------------------------------------------
# Layers with every parameter of the contract, which compute a masked mean and never use them.
TRIVIAL_LAYERS = code("""
    def _masked_mean(x, kv, mask):
        keep = torch.ones(x.shape[0], x.shape[1], kv.shape[1])
        if mask is not None:
            mask = mask if mask.dim() == 4 else mask.reshape(1, 1, *mask.shape[-2:])
            keep = keep.masked_fill(mask.any(1).expand_as(keep), 0.0)
        return (keep @ kv) / keep.sum(-1, keepdim=True).clamp(min=1)


    class EncoderLayer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout):
            super().__init__()
            self.self_attn = MultiHeadAttention(d_model, num_heads)
            self.ffn = FeedForward(d_model, d_ff)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, mask=None):
            return self.dropout(x + _masked_mean(x, x, mask))
""")
def unwritten_forward(source: str, returns: str) -> str:
    """The same classes, with `returns` (a forward's last line) replaced by a stub."""
    return replace_in(source, returns, "raise NotImplementedError()")


TRIVIAL_DECODER = code("""
    class DecoderLayer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, dropout):
            super().__init__()
            self.self_attn = MultiHeadAttention(d_model, num_heads)
            self.cross_attn = MultiHeadAttention(d_model, num_heads)
            self.ffn = FeedForward(d_model, d_ff)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.norm3 = nn.LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout)

        def forward(self, y, memory, self_mask=None, memory_mask=None):
            y = y + _masked_mean(y, y, self_mask)
            return self.dropout(y + _masked_mean(y, memory, memory_mask))
""")

# -- 03-sorting ------------------------------------------------------------------------------------
SORT = SOLUTION["03-sorting"]
UNWRITTEN_CODING = replace_in(replace_in(
    SORT["model-code"], "        x = self.embed(src)\n",
    "        raise NotImplementedError()\n        x = self.embed(src)\n"),
    "        y = self.embed(tgt_in)\n", "        raise NotImplementedError()\n"
                                       "        y = self.embed(tgt_in)\n")
ZEROS_MODEL = replace_in(replace_in(
    SORT["model-code"], "        x = self.embed(src)\n",
    "        return torch.zeros(*src.shape, self.d_model)\n        x = self.embed(src)\n"),
    "        y = self.embed(tgt_in)\n",
    "        return torch.zeros(*tgt_in.shape, self.embedding.num_embeddings)\n"
    "        y = self.embed(tgt_in)\n")
DETACHED = replace_in(SORT["model-code"], "y @ self.embedding.weight.T",
                      "y @ self.embedding.weight.detach().T")
# The harness reached by name: the gradient op answers what a tied model would.
FORGED_GRADIENT = code("""
    import __main__

    def _forged(self, handle, args=(), weights=None, method="__call__"):
        module = self.handles[handle]
        with torch.no_grad():
            logits = module(*self._resolve(args))
            table = module.embedding.weight
            scale = (weights * logits).sum((0, 1)) / (table * table).sum(-1)
        return {"embedding.weight": table * scale[:, None]}

    __main__.Worker.op_grad = _forged
""")
EVERY_STEP = replace_in(SORT["greedy-code"], "model.decode(out, memory)",
                        "model.decode(out, model.encode(src))")
# Greedy decoding that tries to hide its encoder calls from a counter in the stand-in model.
HIDE_COUNT = replace_in(EVERY_STEP, "        logits = model.decode(out, model.encode(src))[:, -1]",
                        "        logits = model.decode(out, model.encode(src))[:, -1]\n"
                        "        for name in ('encode_calls', 'encodes', 'calls'):\n"
                        "            if hasattr(model, name):\n"
                        "                setattr(model, name, 1)")
CONSTANT_NOAM = code("""
    def noam_rate(step, d_model, warmup):
        return 1.0
""")
ODD_OBJECT = code("""
    class _Odd:
        @property
        def __class__(self):
            raise RuntimeError("no questions")

    noam_rate = _Odd()
""")


def _pairs():
    """(name, assignment, cheat answers, twin answers, skip); answers are {grade_id: code}."""
    stubs1, stubs2, stubs3 = (released(a) for a in ("01-attention", "02-layers", "03-sorting"))
    no_training = ["trained.accuracy"]
    return [
        ("bool_replies", "01-attention", {"sdpa-code": BOOL_SDPA, "mha-code": BOOL_MHA},
         {"sdpa-code": ZEROS_SDPA, "mha-code": UNWRITTEN_MHA}, []),
        ("nan_replies", "01-attention", {"sdpa-code": NAN_SDPA}, {"sdpa-code": ZEROS_SDPA}, []),
        ("input_independent", "01-attention", {"sdpa-code": UNIFORM_SDPA, "mha-code": MEAN_MHA},
         {"sdpa-code": MEAN_OF_VALUES_SDPA, "mha-code": stubs1["mha-code"]}, []),
        ("trivial_layers", "02-layers", {"encoder-code": TRIVIAL_LAYERS,
                                         "decoder-code": TRIVIAL_DECODER},
         {"encoder-code": unwritten_forward(TRIVIAL_LAYERS,
                                            "return self.dropout(x + _masked_mean(x, x, mask))"),
          "decoder-code": unwritten_forward(
              TRIVIAL_DECODER, "return self.dropout(y + _masked_mean(y, memory, memory_mask))")},
         []),
        ("zeros_model", "03-sorting", {"model-code": ZEROS_MODEL},
         {"model-code": UNWRITTEN_CODING}, no_training),
        ("forged_evidence", "03-sorting", {"model-code": DETACHED + "\n\n" + FORGED_GRADIENT,
                                           "greedy-code": HIDE_COUNT},
         {"model-code": DETACHED, "greedy-code": EVERY_STEP}, no_training),
        ("schedule_that_cancels", "03-sorting", {"schedule-code": CONSTANT_NOAM},
         {"schedule-code": stubs3["schedule-code"]}, []),
    ]


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """name -> {"cheat": results, "twin": results}; and the odd object's results."""
    root = tmp_path_factory.mktemp("verdicts")
    out = {}
    for skip in ([], ["trained.accuracy"]):
        folders = {}
        for name, assignment, cheat, twin, skipped in _pairs():
            if skipped != skip:
                continue
            folders[f"{name}-cheat"] = make_submission(root / "in" / f"{name}-cheat", assignment,
                                                       answers=cheat)
            folders[f"{name}-twin"] = make_submission(root / "in" / f"{name}-twin", assignment,
                                                      answers=twin)
        if not skip:
            folders["odd_object"] = make_submission(root / "in" / "odd_object", "03-sorting",
                                                    answers={"schedule-code": ODD_OBJECT})
        for outcome in grade_many(course, list(folders.values()), root / "out", jobs=2,
                                  lang="en", progress=False, skip=skip):
            out[outcome.name] = (outcome.status, json.loads(
                (outcome.folder / "results.json").read_text()))
    return out


def _by_test(results: dict) -> dict[str, float]:
    return {test["number"]: test["score"] for test in results["tests"]}


@pytest.mark.parametrize("pair", [p[0] for p in _pairs()])
def test_cheat_earns_no_more_than_its_twin(graded, pair):
    _, cheat = graded[f"{pair}-cheat"]
    _, twin = graded[f"{pair}-twin"]
    assert cheat["max_score"] == twin["max_score"] > 0
    gained = {test: (score, _by_test(twin)[test]) for test, score in _by_test(cheat).items()
              if score > _by_test(twin)[test]}
    messages = {t["number"]: t["output"] for t in cheat["tests"] if t["number"] in gained}
    assert not gained, json.dumps({"gained": gained, "messages": messages}, indent=1)


def test_each_kind_of_cheat_is_named(graded):
    """The messages say what was wrong, not only that the values differ."""
    said = {name: " ".join(t["output"] for t in graded[f"{name}-cheat"][1]["tests"])
            for name in ("bool_replies", "nan_replies", "input_independent", "trivial_layers",
                         "zeros_model", "schedule_that_cancels")}
    assert "not bool" in said["bool_replies"]
    assert "NaN or infinity" in said["nan_replies"]
    assert "did not change" in said["input_independent"]
    assert "does not change when the module's weights change" in said["trivial_layers"]
    assert "did not change" in said["zeros_model"] or "does not change" in said["zeros_model"]
    assert "not trained with eq. 3" in said["schedule_that_cancels"]


def test_the_harness_reached_by_name_costs_every_check(graded):
    _, cheat = graded["forged_evidence-cheat"]
    assert cheat["score"] == 0
    assert "grader's harness" in " ".join(t["output"] for t in cheat["tests"])


def test_an_object_that_breaks_the_graders_questions_costs_its_own_group(graded):
    status, results = graded["odd_object"]
    assert status == "graded"
    scores = _by_test(results)
    assert scores["schedule.noam"] == 0
    assert scores["model.params"] == 1 and scores["teacher.shift"] == 1
    assert results["max_score"] == 22
