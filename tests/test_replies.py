"""What the student's process sends back is data: whatever it is, a check either passes or fails
it as the student's doing, naming what came back. Only the grader's own faults are internal errors
("could not be checked").

Each check of the three assignments runs here in this process, against the course's solution run
by the sandbox's own worker code (tfcourse/sandbox/worker.py, in process: no sandbox, no notebook),
every reply packed and unpacked by the channel as in grading. One reply at a time is replaced with a
typical bad return (a huge int, NaN, a string, nested lists, None, an unsendable object, a complex
or bool tensor, a 0-d or ragged value): the check must end in a `Fail` (or pass), never in another
exception. A few milliseconds a check; the training checks stop before training.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from tfcourse.sandbox import channel
from tfcourse.sandbox.session import StudentError
from tfcourse.submission.framework import Context, verdict
from tfcourse.submission.reference import reference
from tfcourse.source import assignment_source

ASSIGNMENTS = {"01-attention": "test_attention", "02-layers": "test_layers",
               "03-sorting": "test_sorting"}

BAD = {
    "a huge int": lambda: 10 ** 400,
    "a negative huge int": lambda: -(10 ** 400),
    "NaN": lambda: float("nan"),
    "infinity": lambda: float("inf"),
    "a string": lambda: "a tensor, honestly",
    "nested lists": lambda: [[1, [2, [3]]], "x"],
    "a ragged list": lambda: [[1.0, 2.0], [3.0]],
    "None": lambda: None,
    "an unsendable object": lambda: {"$unsendable": "generator"},
    "a dict": lambda: {"value": 1.0},
    "a bool": lambda: True,
    "a complex tensor": lambda: torch.ones(2, 3, dtype=torch.complex64),
    "a bool tensor": lambda: torch.ones(2, 3, dtype=torch.bool),
    "a 0-d tensor": lambda: torch.tensor(float("nan")),
    "an empty tensor": lambda: torch.empty(0),
    "a pair of NaN tensors": lambda: (torch.full((2, 3), float("nan")),) * 2,
    "huge ints inside": lambda: {"losses": [1.0, 10 ** 400], "seconds": -(10 ** 400),
                                 "missing": [], "unexpected": []},
    "NaN inside": lambda: {"losses": [float("nan")], "seconds": float("nan"),
                           "embedding.weight": torch.full((2, 3), float("nan"))},
    "a record of junk": lambda: [{"x": "x", "mask": 10 ** 400}, None],
}


class Stop(Exception):
    """The fake session will not train a model: the check stops here, not as a failure."""


def _worker_module():
    """worker.py as the sandbox runs it: channel, rulebook and standins importable beside it."""
    if "tfcourse_replies_worker" in sys.modules:
        return sys.modules["tfcourse_replies_worker"]
    for folder in (ROOT / "tfcourse" / "sandbox", ROOT / "autograder"):
        sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("tfcourse_replies_worker",
                                                      ROOT / "tfcourse" / "sandbox" / "worker.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del sys.path[:2]
    sys.modules["tfcourse_replies_worker"] = module
    return module


def _across(value):
    """`value` as the other side reads it: packed and unpacked by the channel."""
    data = channel.pack({"value": value})
    header_size, _ = channel._FRAME.unpack(data[:channel._FRAME.size])
    start = channel._FRAME.size
    header = json.loads(data[start:start + header_size])
    offset, buffers = start + header_size, []
    for size in header["sizes"]:
        buffers.append(bytearray(data[offset:offset + size]))
        offset += size
    return channel._decode(header["body"], buffers)["value"]


class FakeSession:
    """The student's process in this one: the worker's own code answers each request, and the
    `at`-th reply (counting from 1) is replaced with `bad`."""

    def __init__(self, worker_class, solution: str, bad=None, at: int = 0):
        self.worker = worker_class(-1, -1)
        self.worker._remote = self._remote
        self.worker.answer({"op": "exec", "args": {"label": "solution", "source": solution}})
        self.callbacks, self.tripped = {}, set()
        self.bad, self.at, self.count = bad, at, 0

    def _remote(self, handle, method, args):
        return _across(self.callbacks[handle](method, _across(list(args))))

    def request(self, op, timeout, **args):
        self.count += 1
        trains = op in ("train", "state") or (op == "call" and args.get("grad"))
        if trains and self.count != self.at:
            raise Stop
        if not trains:                  # done, so that the next requests find its handles
            reply = _across(self.worker.answer({"op": op, "args": _across(args)}))
        if self.count == self.at:
            return self.bad()
        if not reply["ok"]:
            raise StudentError(reply["error"])
        return reply["value"]


def _cases(module):
    """(name, function, keyword arguments) of each check of a grader module, a case each."""
    for name, function in vars(module).items():
        if not name.startswith("test_") or not callable(function):
            continue
        marks = [mark for mark in getattr(function, "pytestmark", [])
                 if mark.name == "parametrize"]
        if not marks:
            yield name, function, {}
            continue
        argument, values = marks[0].args
        for value in values:
            yield f"{name}[{value}]", function, {argument: value}


def _graders(course):
    worker = _worker_module()
    found = {}
    for assignment_id, module_name in ASSIGNMENTS.items():
        assignment = course.assignment(assignment_id)
        namespace = reference(course, assignment_id)
        module = importlib.import_module(f"autograder.{module_name}")
        found[assignment_id] = (assignment, namespace, module,
                                assignment_source(course, assignment_id).solution_code)
    return worker, found


@pytest.fixture(scope="module")
def graders(course):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)            # as the student's process runs (and far faster here)
    try:
        yield _graders(course)
    finally:
        torch.set_num_threads(threads)


def _run(course, worker, assignment, namespace, module, solution, function, kwargs, bad=None,
         at=0):
    """How the check ends: (None, requests made) when it passed or stopped before training,
    else (its exception, requests made)."""
    session = FakeSession(worker.Worker, solution, bad, at)
    ctx = Context(session, namespace, course, assignment, 30.0, module.standins)
    try:
        function(ctx, **kwargs)
    except Stop:
        return None, session.count
    except BaseException as error:               # what the plugin would report
        return error, session.count
    return None, session.count


def internal_errors(course, graders, assignment_id, every: bool = True):
    """(check, reply, words, exception) for each bad reply that one check of the assignment
    reports as the grader's internal error. Each reply of each check is replaced in turn with
    every bad return (`every`), or with one, taken in rotation (each kind is tried at many
    replies, every reply with one kind: a sixteenth of the time)."""
    worker, found = graders
    assignment, namespace, module, solution = found[assignment_id]
    internal, kinds, turn = [], list(BAD.items()), 0
    for name, function, kwargs in _cases(module):
        _, requests = _run(course, worker, assignment, namespace, module, solution, function,
                           kwargs)
        for at in range(1, requests + 1):
            tried = kinds if every else [kinds[turn % len(kinds)]]
            turn += 1
            for words, make in tried:
                error, _ = _run(course, worker, assignment, namespace, module, solution,
                                function, kwargs, make, at)
                if error is not None and verdict(error)[2]:
                    internal.append((name, at, words, error))
    return internal


def test_the_solution_passes_every_check_through_the_fake_session(course, graders):
    """The harness itself: with no bad reply, the course's solution passes each check."""
    worker, found = graders
    for assignment_id, (assignment, namespace, module, solution) in found.items():
        for name, function, kwargs in _cases(module):
            error, count = _run(course, worker, assignment, namespace, module, solution,
                                function, kwargs)
            assert error is None, f"{assignment_id} {name}: {error!r}"
            assert count > 0, name


def _shown(internal) -> str:
    lines = [f"{name}, reply {at} {words}: {error!r}" for name, at, words, error in internal]
    return "\n".join(lines[:40]) + f"\n({len(lines)} in all)"


@pytest.mark.parametrize("assignment_id", sorted(ASSIGNMENTS))
def test_no_bad_reply_makes_a_check_an_internal_error(course, graders, assignment_id):
    internal = internal_errors(course, graders, assignment_id, every=False)
    assert not internal, _shown(internal)


@pytest.mark.slow           # every bad return at every reply of every check: a minute
@pytest.mark.parametrize("assignment_id", sorted(ASSIGNMENTS))
def test_no_bad_reply_anywhere_makes_a_check_an_internal_error(course, graders, assignment_id):
    internal = internal_errors(course, graders, assignment_id)
    assert not internal, _shown(internal)


def test_a_number_that_cannot_be_read_is_named_with_what_was_expected():
    from tfcourse.submission.framework import Fail, expect_number

    def message(value):
        with pytest.raises(Fail) as caught:
            expect_number(value, "noam_rate")
        assert not verdict(caught.value)[2]
        return str(caught.value)

    assert message(10 ** 400) == "noam_rate returned an int too large for a float (10**400)"
    assert message(-3 * 10 ** 400 - 7) == \
        "noam_rate returned an int too large for a float (-3 * 10**400)"
    assert message(float("nan")) == "noam_rate returned nan, not a finite number"
    assert message("0.1") == "noam_rate should return a number, not str"
    assert message(True) == "noam_rate should return a number, not bool"
    assert message({"$unsendable": "generator"}) == "noam_rate should return a number, not generator"
    assert message(torch.ones(2, dtype=torch.complex64)) == \
        "noam_rate should return a number, not a complex64 tensor of shape [2]"
    assert message(torch.ones(2)) == \
        "noam_rate should return a number, not a float32 tensor of shape [2]"
    assert expect_number(torch.tensor(3), "noam_rate") == 3.0
    assert expect_number(10 ** 300, "noam_rate") == 1e300


def test_a_stub_returning_a_huge_int_fails_its_checks_as_the_students(course, graders):
    """noam_rate returning 10 ** 400: schedule.noam and trained.accuracy (which reads the
    schedule's shape first) fail, naming the int; neither is the grader's error."""
    worker, found = graders
    assignment, namespace, module, solution = found["03-sorting"]
    solution += "\n\ndef noam_rate(step, d_model, warmup):\n    return 10 ** 400\n"
    for name in ("test_schedule_noam", "test_trained_accuracy"):
        error, _ = _run(course, worker, assignment, namespace, module, solution,
                        getattr(module, name), {})
        template, params, internal = verdict(error)
        assert not internal, name
        assert str(error) == "noam_rate returned an int too large for a float (10**400)", name


def test_a_huge_int_anywhere_in_a_reply_fails_the_check(course):
    from tfcourse.submission.framework import Fail

    class Session:
        def request(self, op, timeout, **args):
            return {"losses": [0.5, [1, 2, -(10 ** 400)]], "seconds": 1.0}

    ctx = Context(Session(), {}, course, course.assignment("03-sorting"), 1.0)
    with pytest.raises(Fail) as caught:
        ctx.request("train", recipe="", entry="train_sorter", kwargs={}, handle="trained")
    assert str(caught.value) == "your code returned an int too large for a float (-10**400)"
    with pytest.raises(Fail) as caught:
        ctx.call("noam_rate", 1, 32, 100)
    assert str(caught.value).startswith("noam_rate returned an int too large")
