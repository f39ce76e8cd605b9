"""A stub may not write into what it is given: every call a check makes into the student's process
(ctx.call, a handle's run) has its tensor arguments compared, bit for bit, with a copy the worker
took before student code ran on the call, and the paths of those that changed come back with the
result (worker.py `_run`). The trusted side turns that report into a failure of the check
(framework.py `unchanged_arguments`); a reply without it is only the value, which grants nothing.
"""
import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from tfcourse.submission.framework import Fail, unchanged_arguments

# The worker, imported as the sandbox imports it (its own folder on the path), asked directly.
WORKER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, worker
w = worker.Worker(-1, -1)
w.answer({"op": "exec", "args": {"label": "stubs", "source": sys.argv[2]}})
out = {}
for name, (op, args) in json.loads(sys.argv[3]).items():
    tensor = (lambda a: torch.tensor(a) if isinstance(a, list) else
              [torch.tensor(b) for b in a["$list"]] if isinstance(a, dict) and "$list" in a else
              torch.Generator().manual_seed(0) if a == "$generator" else
              {k: torch.tensor(v) for k, v in a.items()} if isinstance(a, dict) else a)
    args["args"] = [tensor(a) for a in args["args"]]
    args["kwargs"] = {k: tensor(v) for k, v in args.get("kwargs", {}).items()}
    if op == "method":
        w.answer({"op": "new", "args": {"handle": "h", "cls": args.pop("cls")}})
    reply = w.answer({"op": op, "args": args})
    value = reply.get("value")
    out[name] = {"ok": reply["ok"], "changed": value.get("$changed")
                 if isinstance(value, dict) and "$changed" in value else None}
print(json.dumps(out))
'''

STUBS = '''
import torch
from torch import nn

def shift_right(y, bos):
    out = y
    out[:, 1:] = y[:, :-1].clone()
    out[:, 0] = bos
    return out

def shift_right_ok(y, bos):
    return torch.cat([torch.full_like(y[:, :1], bos), y[:, :-1]], dim=1)

def fill_mask(scores, mask):
    return scores.masked_fill_(mask, float("-inf"))

def in_a_list(pair):
    pair[1].mul_(2)
    return pair[0]

def in_a_dict(parts):
    parts["b"] += 1
    return parts["a"]

def star(*tensors):
    tensors[1].zero_()
    return tensors[0]

def takes_a_generator(x, generator):
    return x + torch.randn(x.shape, generator=generator)

class Layer(nn.Module):
    def forward(self, x, mask=None):
        x += 1
        return x
'''

CALLS = {
    "shift_in_place": ("call", {"fn": "shift_right", "args": [[[5, 6, 7]], 1]}),
    "shift_fine": ("call", {"fn": "shift_right_ok", "args": [[[5, 6, 7]], 1]}),
    "mask_fill_": ("call", {"fn": "fill_mask", "args": [[[0.5, 1.0]], [[False, True]]]}),
    "list": ("call", {"fn": "in_a_list", "args": [{"$list": [[1.0], [2.0]]}]}),
    "dict": ("call", {"fn": "in_a_dict", "args": [{"a": [1.0], "b": [2.0]}]}),
    "star": ("call", {"fn": "star", "args": [[1.0], [2.0]]}),
    "module": ("method", {"cls": "Layer", "handle": "h", "method": "__call__",
                          "args": [[[1.0, 2.0]]]}),
    "keyword": ("call", {"fn": "fill_mask", "args": [[[0.5, 1.0]]],
                         "kwargs": {"mask": [[True, False]]}}),
    "generator": ("call", {"fn": "takes_a_generator", "args": [[1.0, 2.0], "$generator"]}),
}


@pytest.fixture(scope="module")
def replies():
    run = subprocess.run([sys.executable, "-c", WORKER, str(ROOT / "tfcourse" / "sandbox"),
                          STUBS, json.dumps(CALLS)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name, changed", [
    ("shift_in_place", ["y"]), ("shift_fine", None), ("mask_fill_", ["scores"]),
    ("list", ["pair[1]"]), ("dict", ["parts['b']"]), ("star", ["args[1]"]), ("module", ["x"]),
    ("keyword", ["scores"]), ("generator", None)])
def test_the_worker_reports_the_arguments_a_call_changed(replies, name, changed):
    assert replies[name] == {"ok": True, "changed": changed}


def test_a_report_of_a_change_fails_the_check_naming_the_argument():
    with pytest.raises(Fail) as failed:
        unchanged_arguments({"$value": torch.zeros(1, 3), "$changed": ["y"]}, "shift_right")
    message = str(failed.value)
    assert message.startswith("shift_right changed its argument y in place")
    assert "y.clone()" in message


def test_a_report_is_data_an_odd_one_still_fails_and_names_nothing_it_cannot_check():
    for paths in (["y; rm -rf", 3], "y", None, [{"x": 1}]):
        with pytest.raises(Fail) as failed:
            unchanged_arguments({"$value": 1, "$changed": paths}, "shift_right")
        assert str(failed.value).startswith("shift_right changed one of its arguments in place")


def test_a_reply_without_a_report_is_its_value():
    value = torch.ones(2)
    assert unchanged_arguments(value, "f") is value
    assert unchanged_arguments({"$value": 3, "$changed": []}, "f") == 3
    assert unchanged_arguments({"out": 1}, "f") == {"out": 1}
