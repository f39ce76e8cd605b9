"""What the harness asks of a student's module is answered by torch's own functions, captured
before any student code ran (tfcourse/sandbox/worker.py), and a trained check's points go only to a
model that is the student's code, trained (autograder/test_sorting.py `test_trained_accuracy`).

- In a worker run in a child process: a module that overrides parameters(), named_parameters(),
  load_state_dict(), _load_from_state_dict(), train() and zero_grad() is loaded, described, put in
  eval mode and differentiated all the same, and the recipe's `prepare` hands the optimiser the
  parameters torch registered, from the grader's initial weights.
- End to end (slow): the two ways of winning 03's trained points without a working model: the
  reference's trained weights pasted into __init__ with a forward that ignores them, and an
  untied output layer handed to the optimiser by an overridden parameters() and refilled from the
  embedding by an overridden load_state_dict."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import (ROOT, WORKER_IN_A_THREAD, make_submission, replace_in, scores,
                      solution_cells)

HARNESS = WORKER_IN_A_THREAD + r'''
def ask(op, ask=ask, **args):
    reply = ask(op, **args)
    assert reply["ok"], reply
    return reply["value"]
ask("init", threads=1, forbidden=[])
ask("exec", label="cell", source=sys.argv[2])
out = {}
ask("new", handle="m", cls="Liar")
state = {"weight": torch.full((2, 2), 7.0), "bias": torch.full((2,), 7.0)}
out["load"] = ask("load", handle="m", state=state)
out["state"] = {k: v.tolist() for k, v in ask("state", handle="m").items()}
grads = ask("grad", handle="m", args=[torch.ones(1, 2)], weights=torch.ones(1, 2))
out["grads"] = {k: v.tolist() for k, v in grads.items()}
out["training"] = ask("call", fn="was_training")
ask("exec", label="recipe", source=sys.argv[3])
init = {"weight": torch.full((2, 2), 0.5), "bias": torch.zeros(2)}
ask("train", recipe=sys.argv[3], entry="train", kwargs={}, handle="t", init=init)
out["trained"] = {k: v.tolist() for k, v in ask("state", handle="t").items()}
print(json.dumps(out))
'''
LIAR = '''
import torch
from torch import nn

class Liar(nn.Module):
    """Every method the harness might ask, overridden to lie."""
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(2, 2))
        self.bias = nn.Parameter(torch.zeros(2))
        self.hidden = torch.ones(2, 2)               # not a parameter
    def forward(self, x):
        global TRAINING
        TRAINING = self.training
        return x @ (self.weight + self.hidden).T + self.bias
    def parameters(self, recurse=True):
        return iter([self.hidden.requires_grad_()])
    def named_parameters(self, *args, **kwargs):
        return iter([("weight", self.hidden)])
    def load_state_dict(self, state, strict=True, assign=False):
        return nn.modules.module._IncompatibleKeys([], [])
    def _load_from_state_dict(self, *args, **kwargs):
        pass
    def train(self, mode=True):
        return self
    def zero_grad(self, set_to_none=True):
        pass

TRAINING = None
def was_training():
    return TRAINING
'''
RECIPE = '''
def train(prepare=None):
    model = Liar()
    parameters = prepare(model) if prepare is not None else model.parameters()
    optimizer = torch.optim.SGD(parameters, lr=1.0)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    return model, [0.0]
'''


def test_the_harness_asks_a_module_through_torchs_own_functions_not_its_overrides():
    run = subprocess.run([sys.executable, "-c", HARNESS, str(ROOT / "tfcourse" / "sandbox"), LIAR,
                          RECIPE], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["load"] == {"missing": [], "unexpected": []}
    assert out["state"] == {"weight": [[7.0, 7.0], [7.0, 7.0]], "bias": [7.0, 7.0]}
    assert set(out["grads"]) == {"weight", "bias"}       # the registered ones, not `hidden`
    assert out["training"] is False                       # eval mode, whatever train() does
    # trained from the grader's 0.5s, by SGD on the registered parameters (x = [1, 1]: the
    # gradient of each weight is 1, of each bias 1)
    assert out["trained"] == {"weight": [[-0.5, -0.5], [-0.5, -0.5]], "bias": [-1.0, -1.0]}


# -- end to end -----------------------------------------------------------------------------------
A = "03-sorting"
MODEL = solution_cells(A)["model-code"]


@pytest.fixture(scope="module")
def trained_hex():
    """The reference's weights after the course's recipe, as a student would paste them: hex of
    their float32 bytes, in named_parameters order."""
    from tfcourse.course import load_course
    from tfcourse.submission.reference import _namespace, recipe_source

    course = load_course(ROOT)
    scope = dict(_namespace(course, A))
    exec(compile(recipe_source(course, A), "<recipe>", "exec"), scope)
    torch.set_num_threads(1)
    model, _ = scope["train_sorter"](seed=course.parameter("training").seed, progress=False)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat.numpy().astype("<f4").tobytes().hex()


def _pasted(hex_text: str) -> str:
    load = ("\n        flat = torch.frombuffer(bytearray(bytes.fromhex(WEIGHTS)), "
            "dtype=torch.float32)\n"
            "        start = 0\n"
            "        with torch.no_grad():\n"
            "            for p in self.parameters():\n"
            "                p.copy_(flat[start:start + p.numel()].view_as(p))\n"
            "                start += p.numel()\n")
    code = replace_in(MODEL, "        self.dropout = nn.Dropout(dropout)\n",
                      "        self.dropout = nn.Dropout(dropout)" + load)
    code = replace_in(code, "return self.decode(tgt_in, self.encode(src))",
                      "return self.decode(tgt_in, self.encode(src)) * 0")
    return f"WEIGHTS = {hex_text!r}\n\n" + code


UNTIED = replace_in(replace_in(replace_in(
    MODEL, "        self.dropout = nn.Dropout(dropout)\n",
    "        self.dropout = nn.Dropout(dropout)\n"
    "        self.out = self.embedding.weight.detach().clone()\n"),
    "return y @ self.embedding.weight.T",
    "return y @ (self.out + self.embedding.weight - self.embedding.weight.detach()).T"),
    "    def forward(self, src, tgt_in):",
    "    def parameters(self, recurse=True):\n"
    "        yield from super().parameters(recurse)\n"
    "        yield self.out.requires_grad_()\n\n"
    "    def load_state_dict(self, state, strict=True, assign=False):\n"
    "        result = super().load_state_dict(state, strict, assign)\n"
    "        self.out = self.embedding.weight.detach().clone()\n"
    "        return result\n\n"
    "    def forward(self, src, tgt_in):")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, trained_hex):
    import shutil

    from tfcourse.batch.runner import grade_many
    from tfcourse.course import load_course

    # A course whose limits let the pasted weights in, so that only the trained check judges them
    copy = tmp_path_factory.mktemp("course") / "course"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "graded",
                                                              "__pycache__", "*.db"))
    text = (copy / "course.yaml").read_text()
    text = text.replace("  code_kb: ", "  code_kb: 4096 #", 1)
    text = text.replace("  literal_kb: ", "  literal_kb: 4096 #", 1)
    (copy / "course.yaml").write_text(text)
    course = load_course(copy)
    folder = tmp_path_factory.mktemp("class")
    make_submission(folder / "pasted", A, {"model-code": _pasted(trained_hex)})
    make_submission(folder / "untied", A, {"model-code": UNTIED})
    out = tmp_path_factory.mktemp("graded")
    grade_many(course, [folder], out, jobs=1, lang=course.language, progress=False)
    return {name: json.loads((out / name / "results.json").read_text())
            for name in ("pasted", "untied")}


def _message(results, check):
    return next(test.get("output", "") for test in results["tests"] if test["number"] == check)


@pytest.mark.slow
def test_trained_weights_pasted_into_init_earn_no_training_points(graded):
    results = graded["pasted"]
    assert scores(results)["trained.accuracy"] == 0, _message(results, "trained.accuracy")
    assert "exactly at the weights the grader started it from" in \
        _message(results, "trained.accuracy")


@pytest.mark.slow
def test_an_untied_output_layer_behind_overridden_methods_earns_no_tied_or_training_points(graded):
    results = graded["untied"]
    assert scores(results)["model.tied"] == 0, _message(results, "model.tied")
    assert scores(results)["trained.accuracy"] == 0, _message(results, "trained.accuracy")


def test_an_exception_is_data_of_bounded_size_whatever_its_class_is_named():
    """The student's code names its exception classes: a class named with 1,900 characters of a
    file it read would carry them into the feedback."""
    from tfcourse.sandbox.session import StudentError

    error = StudentError({"type": "@0@" + "x" * 1900, "message": "m" * 10_000, "where": "<cell 3>",
                          "line": 2, "traceback": "t" * 10_000, "extra": "kept out"})
    assert error.type == "an exception"
    assert len(error.info["message"]) == 3000 and len(error.info["traceback"]) == 3000
    assert error.info["line"] == 2 and "extra" not in error.info
    assert StudentError({"type": "ValueError", "line": True}).info == {
        "type": "ValueError", "message": None, "traceback": None, "where": None, "line": None}
    assert StudentError({"type": "Bad name!"}).type == "an exception"
    assert StudentError("not a dict").info["message"] == "not a dict"
