"""The fast unit layer for the engine's pieces: nothing here grades, builds or starts a sandbox.

- Channel framing (tfcourse/sandbox/channel.py): messages with tensors go through a pipe and come
  back equal; what cannot be sent is refused on the sender's side; a message over the receiver's
  limit raises TooLarge before any of it is read; a frame cut short, a header that is not JSON and
  sizes that do not add up are ChannelErrors, never a crash.
- Notebook reading (tfcourse/notebook.py, tfcourse/submission/files.py): small notebooks written
  with nbformat in a temporary folder are parsed and turned into the program the grader runs, with
  a note (never a traceback) for what is wrong with the file.
- Submission discovery (submission.find_notebooks, runner.survey and runner.expand) on small
  folder trees: a class folder, a student's folder, a single notebook, links refused.

Config parsing is in test_config.py and the rule checker in test_rules.py (their fast parts).
"""
from __future__ import annotations

import json
import math
import os
import threading

import nbformat
import pytest
import torch

from tfcourse import notebook
from tfcourse.batch import runner
from tfcourse.submission.files import NotebookFile
from tfcourse.submission.finding import find_notebooks
from tfcourse.submission.notebooks import (JSON_VALUES, build_program, parse_notebook,
                                           read_notebook, strip_outputs, without_magics)
from tfcourse.sandbox import channel


# -- channel framing ---------------------------------------------------------------------------
def through_pipe(message, **recv_options):
    """`message` sent through a pipe and received on the other end (sent from a thread: a
    message larger than the pipe's buffer does not block the test)."""
    read, write = os.pipe()
    data = channel.pack(message)

    def send():
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(write, view):]
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        return channel.recv(read, timeout=10, **recv_options)
    finally:
        os.close(read)
        sender.join()
        os.close(write)


def raw_pipe(data: bytes, close: bool = True) -> int:
    """A pipe's reading end holding `data` (its writing end closed when `close`)."""
    read, write = os.pipe()
    os.write(write, data)
    if close:
        os.close(write)
    return read


def test_a_message_with_tensors_comes_back_equal():
    matrix = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    message = {"id": 7, "op": "call", "args": {
        "tensors": [matrix, matrix.t(), torch.tensor([True, False]),
                    torch.tensor([1, -2], dtype=torch.int64),
                    torch.ones(2, dtype=torch.float16), torch.empty(0, 3)],
        "pair": (1, "two"), "floats": [0.5, float("inf"), float("-inf"), float("nan")],
        "nested": {"none": None, "flag": False, "text": "é\n\0"}}}
    got = through_pipe(message)
    assert got["id"] == 7 and got["op"] == "call"
    tensors = got["args"]["tensors"]
    assert [t.dtype for t in tensors] == [torch.float32, torch.float32, torch.bool, torch.int64,
                                          torch.float16, torch.float32]
    assert [list(t.shape) for t in tensors] == [[3, 4], [4, 3], [2], [2], [2], [0, 3]]
    assert torch.equal(tensors[0], matrix) and torch.equal(tensors[1], matrix.t())
    assert tensors[2].tolist() == [True, False] and tensors[3].tolist() == [1, -2]
    assert got["args"]["pair"] == (1, "two")                    # a tuple stays a tuple
    floats = got["args"]["floats"]
    assert floats[:3] == [0.5, math.inf, -math.inf] and math.isnan(floats[3])
    assert got["args"]["nested"] == {"none": None, "flag": False, "text": "é\n\0"}


def test_tensors_of_other_dtypes_are_sent_widened_and_detached():
    odd = getattr(torch, "uint16", torch.int16)          # not one of channel.DTYPES (torch >= 2.3)
    got = through_pipe({"a": torch.tensor([1, 2], dtype=odd),
                        "b": torch.tensor([0.25], dtype=torch.bfloat16),
                        "c": torch.ones(2, 2, requires_grad=True) * 3})
    assert got["a"].tolist() == [1, 2]
    assert got["a"].dtype == (torch.int16 if odd is torch.int16 else torch.int64)
    assert got["b"].dtype == torch.bfloat16 and got["b"].item() == 0.25
    assert not got["c"].requires_grad and got["c"].tolist() == [[3.0, 3.0], [3.0, 3.0]]


@pytest.mark.parametrize("value, words", [
    ({1, 2}, "cannot send a value of type set"),
    (object(), "cannot send a value of type object"),
    ({1: "a"}, "only dicts with string keys can be sent"),
    (torch.ones(2, 2).to_sparse(), "cannot send a tensor of dtype torch.float32, layout "
                                   "torch.sparse_coo"),
], ids=["set", "object", "int-key", "sparse"])
def test_what_cannot_be_sent_is_refused_by_the_sender(value, words):
    with pytest.raises(ValueError, match="^" + words.replace(".", r"\.") + "$"):
        channel.pack({"value": value})


def test_a_complex_tensor_is_refused_not_sent_as_integers():
    with pytest.raises(ValueError, match="^cannot send a tensor of dtype torch.complex64"):
        channel.pack({"value": torch.tensor([1.5 + 2j], dtype=torch.complex64)})


def test_a_value_nested_deeper_than_the_limit_is_not_sent():
    value = "leaf"                  # the message is at depth 0, its values at depth 1, ...
    for _ in range(channel.MAX_DEPTH - 1):
        value = [value]
    assert through_pipe({"v": value})["v"] == value            # at the limit: fine
    with pytest.raises(ValueError, match="^value nested too deeply to send$"):
        channel.pack({"v": [value]})


def test_a_message_over_the_limit_raises_too_large_before_reading_it():
    message = channel.pack({"id": 1, "value": torch.zeros(300_000)})      # 1.2 MB of tensor
    read = raw_pipe(message[:channel._FRAME.size])           # only the frame: nothing else read
    try:
        with pytest.raises(channel.TooLarge) as raised:
            channel.recv(read, timeout=5, max_bytes=1 << 20)
    finally:
        os.close(read)
    assert raised.value.size == len(message) - channel._FRAME.size
    assert raised.value.limit == 1 << 20
    assert str(raised.value) == "the reply was 1.2 MB; at most 1 MB"
    assert isinstance(raised.value, channel.ChannelError)


def test_a_header_too_large_on_its_own_is_too_large():
    message = channel.pack({"text": "x" * 1_500_000})        # JSON only, no tensor
    read = raw_pipe(message[:channel._FRAME.size])
    try:                             # the header may take an eighth of the limit: 1 MB of 8
        with pytest.raises(channel.TooLarge, match=r"^the reply without its tensors was 1\.5 MB; "
                                                   r"at most 1 MB$"):
            channel.recv(read, timeout=5, max_bytes=8 << 20)
    finally:
        os.close(read)


def test_sizes_are_said_as_a_person_reads_them():
    assert [channel._megabytes(n) for n in (8 << 20, (8 << 20) + 1, 9 << 18, 1)] == \
        ["8", "8.1", "2.3", "0.1"]


@pytest.mark.parametrize("cut", [3, channel._FRAME.size + 5, -2],
                         ids=["in-frame", "in-header", "in-tensor"])
def test_a_truncated_frame_is_a_channel_error(cut):
    data = channel.pack({"value": torch.arange(4, dtype=torch.int32)})
    read = raw_pipe(data[:cut])                               # the other side went away
    try:
        with pytest.raises(channel.ChannelError, match="the other side closed the channel"):
            channel.recv(read, timeout=5)
    finally:
        os.close(read)


def test_a_frame_cut_short_by_a_silent_sender_times_out():
    data = channel.pack({"value": 1})
    read, write = os.pipe()
    os.write(write, data[:-1])
    try:
        with pytest.raises(channel.ChannelTimeout):
            channel.recv(read, timeout=0.2)
    finally:
        os.close(read)
        os.close(write)


def frame(header: bytes, payload: bytes = b"") -> bytes:
    return channel._FRAME.pack(len(header), len(payload)) + header + payload


@pytest.mark.parametrize("data, words", [
    (frame(b"{not json"), "message header is not valid JSON"),
    (frame(b'{"body": {}, "sizes": [3]}', b"ab"), "malformed message sizes"),
    (frame(b'{"body": {}}'), "malformed message sizes"),
    (frame(json.dumps({"body": [1, 2], "sizes": []}).encode()), "a message must be a mapping"),
    (frame(json.dumps({"body": {"__dict__": {"t": {"__tensor__": 0, "dtype": "float32",
                                                    "shape": [2]}}},
                       "sizes": [4]}).encode(), bytes(4)), "tensor size does not match its shape"),
    (frame(json.dumps({"body": {"__dict__": {"t": {"__tensor__": 0, "dtype": "complex64",
                                                    "shape": [1]}}},
                       "sizes": [8]}).encode(), bytes(8)), "malformed tensor in message"),
    (frame(json.dumps({"body": {"__dict__": {"t": {"__tensor__": 0, "dtype": "uint8",
                                                    "shape": [-1]}}},
                       "sizes": [1]}).encode(), bytes(1)), "malformed tensor shape in message"),
    (frame(json.dumps({"body": {"__set__": []}, "sizes": []}).encode()), "malformed message"),
], ids=["json", "sizes", "no-sizes", "not-mapping", "tensor-size", "dtype", "shape", "unknown"])
def test_a_malformed_message_is_a_channel_error(data, words):
    read = raw_pipe(data)
    try:
        with pytest.raises(channel.ChannelError, match="^" + words + "$"):
            channel.recv(read, timeout=5)
    finally:
        os.close(read)


# -- notebook reading --------------------------------------------------------------------------
def code_cell(source, grade_id=None, solution=False, grade=False, locked=False, **tfcourse):
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": grade,
                                     "locked": locked, "schema_version": 3}
        if grade:
            cell.metadata["nbgrader"]["points"] = 1
    if tfcourse:
        cell.metadata["tfcourse"] = tfcourse
    return cell


def small_source() -> nbformat.NotebookNode:
    """A source notebook: prose, a setup cell, an answer cell, its test cell, a locked cell."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Assignment", metadata={"tfcourse": {"lang": "en"}}),
        code_cell("import math\n", "setup", locked=True, role="setup"),
        code_cell("def area(r):\n    ### BEGIN SOLUTION\n    return math.pi * r * r\n"
                  "    ### END SOLUTION\n", "area-code", solution=True),
        code_cell("assert area(1) > 3\n### BEGIN HIDDEN TESTS\nassert area(2) > 12\n"
                  "### END HIDDEN TESTS\n", "area-test", grade=True, locked=True),
        code_cell("print('plot')\n", "demo", locked=True),
    ]
    return nb


def written(path, nb) -> bytes:
    nbformat.write(nb, str(path))
    return path.read_bytes()


def test_the_course_notebook_model_reads_its_markup(tmp_path):
    path = tmp_path / "source.ipynb"
    written(path, small_source())
    raw = json.loads(path.read_text())
    assert isinstance(raw["cells"][2]["source"], list)       # nbformat writes a list of lines
    nb = notebook.read(path)
    assert isinstance(nb.cells[2].source, str) and nb.cells[2].source.startswith("def area(r):")
    assert [notebook.grade_id(c) for c in nb.cells] == [None, "setup", "area-code", "area-test",
                                                        "demo"]
    assert [notebook.is_solution(c) for c in nb.cells] == [False, False, True, False, False]
    assert [notebook.is_test(c) for c in nb.cells] == [False, False, False, True, False]
    assert notebook.role(nb.cells[1]) == "setup" and notebook.lang(nb.cells[0]) == "en"
    assert notebook.cells_with_role(nb, "setup") == [nb.cells[1]]
    assert notebook.solution_code(nb) == \
        "import math\n\n\ndef area(r):\n    return math.pi * r * r\n"
    assert notebook.strip_hidden_tests(nb.cells[3].source) == "assert area(1) > 3\n"
    # metadata of odd types reads as none
    odd = {"cell_type": "code", "source": ["x", "\n"], "metadata": {"nbgrader": ["grade_id"]}}
    assert notebook.grade_id(odd) is None and notebook.text(odd) == "x\n"
    assert notebook.grade_id({"metadata": None}) is None and notebook.role({"metadata": 3}) is None


@pytest.mark.parametrize("written_as, lang, becomes", [
    ('use_language("en")', "es", 'use_language("es")'),
    ("use_language( 'es' )", None, "use_language()"),
    ("use_language ()", "en", 'use_language("en")'),
    ("reuse_language('en')", "es", "reuse_language('en')"),
])
def test_the_language_call_is_found_however_it_is_written(written_as, lang, becomes):
    assert notebook.set_language(f"x = 1\n{written_as}\n", lang) == f"x = 1\n{becomes}\n"


def test_a_notebook_file_is_parsed_into_plain_cells(tmp_path):
    submitted = small_source()
    submitted.cells[0].attachments = {}
    raw, notes = parse_notebook(written(tmp_path / "a.ipynb", submitted), "a.ipynb", 64)
    assert notes == []
    assert [c["cell_type"] for c in raw["cells"]] == ["markdown", "code", "code", "code", "code"]
    assert raw["cells"][2]["metadata"]["nbgrader"]["grade_id"] == "area-code"
    assert set(raw["cells"][2]) == {"cell_type", "source", "metadata"}     # outputs left out
    bom, notes = parse_notebook(b"\xef\xbb\xbf" + written(tmp_path / "a.ipynb", submitted),
                                "a.ipynb", 64)
    assert notes == [] and bom == raw


@pytest.mark.parametrize("data, template, params", [
    (b"", "the notebook {name} is an empty file", {}),
    (b"  \n", "the notebook {name} is an empty file", {}),
    (b'{"cells": [{"cell_type": "code", "source": "x', "the notebook {name} is not valid JSON "
     "({where}): was it edited outside Jupyter or cut short? Nothing in it could be graded",
     {"where": "line 1, column 44"}),
    (b"[1, 2]", "the file {name} is not a Jupyter notebook", {}),
    (b'{"metadata": {}}', "the file {name} is not a Jupyter notebook", {}),
    (b'{"cells": [], "nbformat": 99}', "the notebook {name} uses a notebook format ({version}) "
     "that cannot be read", {"version": "99"}),
], ids=["empty", "blank", "cut-short", "a-list", "no-cells", "unknown-format"])
def test_an_unreadable_notebook_gives_a_note_not_a_traceback(data, template, params):
    raw, notes = parse_notebook(data, "mine.ipynb", 64)
    assert raw is None
    assert [(n.template, n.params, n.severity) for n in notes] == [
        (template, {"name": "mine.ipynb", **params}, "error")]


def test_bad_bytes_are_replaced_and_said():
    data = json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": "x = 'AB'",
                                                 "metadata": {}}]}).encode().replace(b"AB",
                                                                                      b"A\xe9B")
    at = data.index(b"\xe9")
    raw, notes = parse_notebook(data, "mine.ipynb", 64)
    assert raw["cells"][0]["source"] == "x = 'A\ufffdB'"
    assert [(n.template, n.params) for n in notes] == [(
        "the notebook {name} is not valid UTF-8 text (byte {byte} at position {position}); the "
        "bad bytes were replaced", {"name": "mine.ipynb", "byte": "0xe9", "position": at})]


def test_an_old_notebook_is_converted():
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [
        {"cell_type": "code", "input": "x = 1", "language": "python", "outputs": [],
         "metadata": {}}]}]}
    raw, notes = parse_notebook(json.dumps(v3).encode(), "old.ipynb", 64)
    assert [c["source"] for c in raw["cells"]] == ["x = 1"]
    assert [(n.template, n.params) for n in notes] == [(
        "the notebook {name} was saved in the old format version {version}; it was converted",
        {"name": "old.ipynb", "version": 3})]


def _notebook_around(cells: bytes) -> bytes:
    return b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [' + cells + b"]}"


@pytest.mark.parametrize("data", [
    _notebook_around(b"{}," * 2_000_000 + b"{}"),                       # 6 MB of empty objects
    _notebook_around(b'{"source": [' + b'"",' * 3_000_000 + b'""]}'),   # 9 MB of empty strings
    _notebook_around(b'{"outputs": [' + b'[],' * 2_500_000 + b'[]]}'),  # arrays in its outputs
], ids=["empty-objects", "empty-strings", "arrays-in-outputs"])
def test_a_notebook_built_to_be_expensive_to_read_is_not_parsed(data):
    """Too many JSON values to read, found before parsing: a note, no cells, little memory (the
    60 MB version of the first cost the grader 1.45 GB and 97 s)."""
    import tracemalloc

    tracemalloc.start()
    try:
        raw, notes = parse_notebook(data, "mine.ipynb", 64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert raw is None
    assert [(n.template, n.params, n.severity) for n in notes] == [(
        "the notebook {name} holds more than {limit} JSON values (a notebook of this course "
        "holds about a thousand), more than the grader reads; nothing in it could be graded",
        {"name": "mine.ipynb", "limit": JSON_VALUES}, "error")]
    assert peak < 2 * len(data) + (8 << 20)


def test_a_notebook_nested_too_deeply_says_so():
    raw, notes = parse_notebook(_notebook_around(b"[" * 100_000), "mine.ipynb", 64)
    assert raw is None and [(n.template, n.severity) for n in notes] == [(
        "the notebook {name} is nested more deeply than any notebook is; nothing in it could be "
        "graded", "error")]


def test_many_values_in_outputs_are_dropped_and_the_cells_read():
    """Printed lines are values of the outputs: a notebook of many is read without them."""
    cell = {"cell_type": "code", "source": "x = 1", "metadata": {}, "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout",
                         "text": ["a, b\n"] * 300_000}]}
    data = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [cell]}).encode()
    raw, notes = parse_notebook(data, "mine.ipynb", 64)
    assert notes == [] and [c["source"] for c in raw["cells"]] == ["x = 1"]


def test_a_large_notebook_is_read_without_its_outputs():
    cell = {"cell_type": "code", "source": 'print("[]\\"]")', "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "x]" * 400_000 + '"[\\"'}],
        "execution_count": 1}
    data = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [cell, {**cell, "outputs": []}]}).encode()
    assert json.loads(strip_outputs(data))["cells"][0]["outputs"] == []
    raw, notes = parse_notebook(data, "big.ipynb", 0.5)
    assert [c["source"] for c in raw["cells"]] == ['print("[]\\"]")'] * 2
    assert [(n.template, round(n.params["mb"], 1)) for n in notes] == [
        ("the notebook {name} is {mb:.0f} MB, mostly cell outputs; it was read without them",
         0.8)]
    assert strip_outputs(b'{"outputs": [') == b'{"outputs": ['       # broken: left to the parser


def test_read_notebook_reads_a_file_and_says_what_is_missing(tmp_path):
    written(tmp_path / "mine.ipynb", small_source())
    raw, notes = read_notebook(tmp_path / "mine.ipynb", 64)
    assert notes == [] and len(raw["cells"]) == 5
    raw, notes = read_notebook(tmp_path / "gone.ipynb", 64)
    assert raw is None
    assert [(n.template, n.params) for n in notes] == [
        ("{name} is not in the submission", {"name": "gone.ipynb"})]
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "mine.ipynb")
    raw, notes = read_notebook(tmp_path / "link.ipynb", 64)
    assert raw is None and notes[0].params == {"name": "link.ipynb", "what": "a symbolic link"}


def program_of(tmp_path, edit=None):
    source = tmp_path / "source.ipynb"
    written(source, small_source())
    submitted = small_source()
    submitted.cells[2].source = "def area(r):\n    return 3 * r * r\n"
    if edit is not None:
        edit(submitted)
    raw, notes = parse_notebook(written(tmp_path / "mine.ipynb", submitted), "mine.ipynb", 64)
    assert notes == []
    return build_program(notebook.read(source), raw)


def test_build_program_runs_the_courses_setup_and_the_students_code(tmp_path):
    program = program_of(tmp_path)
    assert program.readable and program.notes == [] and program.solution_ids == {"area-code"}
    assert [(c.label, c.source, c.from_student) for c in program.cells] == [
        ("setup", "import math\n", False),
        ("area-code", "def area(r):\n    return 3 * r * r", True)]
    # the locked demo cell (5) is the course's: not taken from the submission, not run


def test_build_program_restores_what_a_student_must_not_change(tmp_path):
    def edit(nb):
        nb.cells[1].source = "import os\n"                        # the setup, edited
        nb.cells[3].source = "pass\n"                             # the test, edited
        nb.cells.append(code_cell("%time y = 2\n!pip install x\n"))
        nb.cells.append(code_cell("z = 3\n", "area-code", solution=True))   # a second copy
        nb.cells.append(code_cell("w = 4\n", "not-ours"))
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("x = 1", metadata={}))
    program = program_of(tmp_path, edit)
    # the cells added are named by their position (a markdown cell was put first)
    assert [(c.label, c.source) for c in program.cells] == [
        ("setup", "import math\n"), ("area-code", "def area(r):\n    return 3 * r * r"),
        ("7", "pass  # notebook magic skipped: %time y = 2\n"
              "pass  # notebook magic skipped: !pip install x"),
        ("8", "z = 3"), ("9", "w = 4")]
    assert [(n.template, n.params) for n in program.notes] == [
        ("the read-only cell {gid} was edited; the grader used the original", {"gid": "setup"}),
        ("the read-only cell {gid} was edited; the grader used the original",
         {"gid": "area-test"}),
        ("the cell {gid} appears more than once; the copy at position {index} counts as a cell "
         "you added", {"gid": "area-code", "index": 8}),
        ("the cell at position {index} has a grade id ({gid}) that is not in the assignment; it "
         "counts as a cell you added", {"index": 9, "gid": "not-ours"})]


def test_build_program_on_a_lost_answer_cell_and_an_unreadable_file(tmp_path):
    def edit(nb):
        nb.cells[2].cell_type = "markdown"
        nb.cells[2].pop("outputs")
        nb.cells[2].pop("execution_count")
    program = program_of(tmp_path, edit)
    assert [c.label for c in program.cells] == ["setup", "area-code"]
    assert [n.template for n in program.notes] == [
        "your answer cell {gid} had been turned into a {kind} cell; it was run as code"]
    unreadable = build_program(notebook.read(tmp_path / "source.ipynb"), None)
    assert not unreadable.readable and [c.label for c in unreadable.cells] == ["setup"]
    dropped = build_program(notebook.read(tmp_path / "source.ipynb"), {"cells": []})
    assert [(n.template, n.params) for n in dropped.notes] == [(
        "the answer cell {gid} is not in the notebook (no cell has its grade id); code for it in "
        "other cells was still run", {"gid": "area-code"})]


def test_magics_become_pass_and_cell_magics_are_dropped_or_kept():
    assert without_magics("  %matplotlib inline\nx = 1") == \
        "  pass  # notebook magic skipped: %matplotlib inline\nx = 1"
    assert without_magics("%%time\nx = 1") == "x = 1"
    assert without_magics("%%bash\nls") == ""


# -- submission discovery ----------------------------------------------------------------------
def notebook_file(path, text: str = "{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_find_notebooks_tells_the_assignment_from_the_names(course, tmp_path):
    folder = tmp_path / "alice"
    notebook_file(folder / "work" / "attention.ipynb")
    notebook_file(folder / "attention.ipynb")                 # the shallowest one counts
    notebook_file(folder / "scratch.ipynb")
    assignment, found = find_notebooks(course, folder, None)
    assert assignment == "01-attention" and list(found) == ["attention.ipynb"]
    assert found["attention.ipynb"] == NotebookFile(tmp_path, ("alice", "attention.ipynb"), 1,
                                                    "file", limit_mb=256)
    assert found["attention.ipynb"].shown == "attention.ipynb"
    assignment, found = find_notebooks(course, folder, "02-layers")
    missing = found["layers.ipynb"]
    assert assignment == "02-layers" and missing.kind == "missing"
    assert missing.others == ("attention.ipynb", "scratch.ipynb")


def test_a_single_notebook_under_another_name_is_the_assignments(course, tmp_path):
    alone = notebook_file(tmp_path / "attention (1).ipynb")
    assert find_notebooks(course, alone, None)[0] is None            # no name fits
    assignment, found = find_notebooks(course, alone, "01-attention")
    assert assignment == "01-attention"
    assert found == {"attention.ipynb": NotebookFile(tmp_path, ("attention (1).ipynb",), 1,
                                                     "file", limit_mb=256)}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_notebooks(course, empty, None) == (None, {})


def test_links_in_a_submission_are_listed_not_followed(course, tmp_path):
    elsewhere = notebook_file(tmp_path / "elsewhere" / "attention.ipynb")
    folder = tmp_path / "mallory"
    folder.mkdir()
    (folder / "work").symlink_to(elsewhere.parent)
    assignment, found = find_notebooks(course, folder, "01-attention")
    assert found["attention.ipynb"].kind == "missing"
    assert found["attention.ipynb"].unfollowed == ("work",)
    (folder / "attention.ipynb").symlink_to(elsewhere)
    assignment, found = find_notebooks(course, folder, None)
    assert assignment == "01-attention" and found["attention.ipynb"].kind == "link"


def test_expand_finds_each_submission_of_a_class_folder(course, tmp_path):
    room = tmp_path / "class"
    notebook_file(room / "alice" / "attention.ipynb")
    notebook_file(room / "bob.ipynb")
    notebook_file(room / "carol" / "01-attention" / "attention.ipynb")     # nbgrader's layout
    notebook_file(room / "carol" / "02-layers" / "layers.ipynb")
    for assignment in ("01-attention", "02-layers"):                     # as nbgrader collects
        (room / "carol" / assignment / "timestamp.txt").write_text("2026-12-01 10:00:00 UTC")
        (room / "carol" / assignment / "submission_secret.txt").write_text("s3cr3t")
    notebook_file(room / ".ipynb_checkpoints" / "attention-checkpoint.ipynb")
    notebook_file(room / "README.md")
    notebook_file(tmp_path / "elsewhere" / "attention.ipynb")
    (room / "dave").symlink_to(tmp_path / "elsewhere")
    (room / "graded").mkdir()
    assert runner.expand(course, [room], exclude=room / "graded") == [
        ("alice", room / "alice"), ("bob", room / "bob.ipynb"),
        ("carol/01-attention", room / "carol" / "01-attention"),
        ("carol/02-layers", room / "carol" / "02-layers"), ("dave", room / "dave")]
    found = runner.survey(course, [room], exclude=room / "graded")
    assert {item.name: item.note for item in found.submissions}["dave"] == \
        "a symbolic link: not followed; graded 0 with a note saying so"
    assert found.ignored == [(str(room / "README.md"),
                              "a file, not a notebook nor a folder: ignored")]
    assert found.warnings == []


def test_a_submission_nbgrader_did_not_collect_is_named_with_what_nbgrader_needs(course,
                                                                                 tmp_path):
    """A folder placed by hand in submitted/ lacks timestamp.txt, at which nbgrader's
    release_feedback stops for the whole class: grading says so, before and under the table."""
    room = tmp_path / "submitted"
    notebook_file(room / "carol" / "01-attention" / "attention.ipynb")
    (room / "carol" / "01-attention" / "timestamp.txt").write_text("2026-12-01 10:00:00 UTC")
    (room / "carol" / "01-attention" / "submission_secret.txt").write_text("s3cr3t")
    notebook_file(room / "erin" / "01-attention" / "attention.ipynb")       # placed by hand
    notebook_file(room / "gail" / "01-attention" / "attention.ipynb")       # a stamp, no secret
    (room / "gail" / "01-attention" / "timestamp.txt").write_text("2026-12-01 10:00:00 UTC")
    notebook_file(room / "frank" / "attention.ipynb")                  # not nbgrader's layout
    found = runner.survey(course, [room])
    assert [item.name for item in found.submissions] == ["carol/01-attention",
                                                         "erin/01-attention", "frank",
                                                         "gail/01-attention"]
    assert len(found.warnings) == 2
    (path, what), (gail, secret) = found.warnings
    assert path == str(room / "erin" / "01-attention")
    assert "no timestamp.txt and submission_secret.txt" in what
    assert "nbgrader release_feedback 01-attention" in what
    assert "--CourseDirectory.student_id_exclude=erin" in what
    assert gail == str(room / "gail" / "01-attention")
    assert secret.startswith("no submission_secret.txt")    # release_feedback reads it too
    assert "warning: no timestamp.txt" in runner.table([], [], found.warnings)


def test_expand_takes_a_students_folder_and_a_single_notebook_as_one(course, tmp_path):
    alice = tmp_path / "alice"
    notebook_file(alice / "attention.ipynb")
    notebook_file(alice / "helpers" / "notes.txt")
    single = notebook_file(tmp_path / "bob" / "layers.ipynb")
    assert runner.expand(course, [alice, single]) == [("alice", alice), ("layers", single)]


def test_a_link_or_a_missing_path_on_the_command_line_is_refused(course, tmp_path):
    notebook_file(tmp_path / "real" / "attention.ipynb")
    (tmp_path / "latest").symlink_to(tmp_path / "real")
    found = runner.survey(course, [tmp_path / "latest", tmp_path / "nowhere"])
    assert [(item.name, item.path, item.note) for item in found.submissions] == [
        ("latest", tmp_path / "latest",
         "a symbolic link: not followed; graded 0 with a note saying so"),
        ("nowhere", tmp_path / "nowhere", "does not exist")]


def test_two_submissions_of_the_same_name_get_results_folders_of_their_own(course, tmp_path):
    first = notebook_file(tmp_path / "solutions" / "01-attention" / "attention.ipynb").parent
    second = notebook_file(tmp_path / "release" / "01-attention" / "attention.ipynb").parent
    assert runner.expand(course, [first, second]) == [
        ("solutions/01-attention", first), ("release/01-attention", second)]


def test_skipped_checks_are_not_graded_and_the_total_says_what_it_counts(course):
    """`tfcourse grade --skip`: sdpa's 6 points are not graded, not 0 of 6; the total is that of
    the checks graded, and says what it leaves out."""
    from tfcourse.submission.report import NotebookReport, SubmissionReport, TestResult
    from tfcourse.batch.results import feedback, feedback_html, feedback_markdown, results_json
    from tfcourse.batch.runner import _not_graded

    assignment = course.assignment("01-attention")
    tests = [TestResult(test_id, 0.0, assignment.points_of(test_id), "not graded: skipped",
                        graded=False) if test_id.startswith("sdpa.") else
             TestResult(test_id, assignment.points_of(test_id), assignment.points_of(test_id))
             for test_id in assignment.test_ids()]
    report = SubmissionReport("01-attention", "alice",
                              [NotebookReport("attention.ipynb", tests=tests)])
    view = feedback(course, report, "en")
    assert (view.score, view.max_score) == (8, 8)
    assert view.total == "8 / 8 (6 points not graded: skipped)"
    assert view.summary == "6 of 6 checks passed"
    results = results_json(view)
    assert (results["score"], results["max_score"]) == (8, 8)
    assert results["extra_data"]["not_graded"] == ["sdpa.shapes", "sdpa.softmax", "sdpa.values",
                                                   "sdpa.mask"]
    assert _not_graded(results) == "6 points not graded: skipped"
    markdown = feedback_markdown(view)
    assert "**Score: 8 / 8 (6 points not graded: skipped)**" in markdown
    assert "## scaled_dot_product_attention: – / 6" in markdown
    assert "| – | shapes | – / 1 | not graded: skipped |" in markdown
    assert "0 / 6" not in markdown and "0 / 1" not in markdown
    page = feedback_html(view)
    assert "8 / 8 (6 points not graded: skipped)" in page and "0 / 6" not in page
    spanish = feedback(course, report, "es")
    assert spanish.total == "8 / 8 (6 puntos sin calificar: omitida)"


def test_a_note_of_several_lines_is_one_item_of_the_feedbacks_list(course):
    """A note stays one list item in feedback.md and feedback.html, whatever its lines (a cell's
    error message, a notebook whose name holds a line break), and whatever Markdown they hold:
    a student's exception message of a rule, a bold score, a heading and a table read as the
    grader's own words when each line was an item, or a line of the item (review 32)."""
    import mistune

    from tfcourse.batch.results import feedback, feedback_html, feedback_markdown
    from tfcourse.submission.report import Note, NotebookReport, SubmissionReport

    name = "attention\n**Score: 14 / 14**.ipynb"
    forged = ("ok\n\n---\n\n**Score: 14 / 14** · 10 of 10 checks passed\n\n## Instructor note\n\n"
              "| | Check | Points | Message |\n|---|---|---|---|\n| ✓ | causal | 1 / 1 | passed |\n"
              "[x]: http://example.com\n1. [see](http://example.com) `code` __init__ ~~no~~")
    report = SubmissionReport("01-attention", "alice", [NotebookReport(name, notes=[
        Note("the notebook {name} is an empty file", {"name": name}, "error"),
        Note("cell {label} raised {kind}: {message}",
             {"label": 3, "kind": "RuntimeError", "message": forged})])])
    view = feedback(course, report, "en")
    markdown = feedback_markdown(view)
    notes = markdown.split("## About your notebook\n", 1)[1].split("\n## ", 1)[0]
    shown = mistune.create_markdown(plugins=["table", "strikethrough"])(notes)
    assert shown.count("<li>") == 2 and shown.count("<ul>") == 1, shown
    for tag in ("<hr", "<h1", "<h2", "<strong", "<em", "<table", "<code", "<a ", "<del", "<ol"):
        assert tag not in shown, (tag, shown)
    assert "**Score: 14 / 14** · 10 of 10 checks passed" in shown
    assert "attention<br />\n**Score: 14 / 14**.ipynb is an empty file" in shown
    page = feedback_html(view)
    assert page.count("<li>") == 2, page
    assert "attention<br>**Score: 14 / 14**.ipynb is an empty file" in page


def test_the_submissions_name_in_feedback_md_is_only_text(course):
    """A folder's or file's name is the feedback's heading: emphasis, strikethrough, a link, an
    image or HTML in it rendered as such (review 32's second attacker)."""
    import mistune

    from tfcourse.batch.results import feedback, feedback_markdown
    from tfcourse.submission.report import SubmissionReport

    name = "eve **Score 14 ∕ 14** ~~0 ∕ 14~~ [x](https:∕∕x.example) ![i](x.png) <h2>Score\r# 14"
    view = feedback(course, SubmissionReport("01-attention", name), "en")
    heading = feedback_markdown(view).splitlines()[0]
    shown = mistune.create_markdown(plugins=["table", "strikethrough"])(heading)
    assert shown.startswith("<h1>Feedback: eve **Score 14 ∕ 14** ~~0 ∕ 14~~ [x]"), shown
    for tag in ("<strong", "<del", "<a ", "<img", "<h2"):
        assert tag not in shown, (tag, shown)


def test_the_feedback_heading_names_the_student_in_nbgraders_layout(course, tmp_path):
    """submitted/<student>/<assignment>/: the heading names the student, not the assignment's
    folder (the page names the assignment on its own), whether the class folder or the one
    assignment folder was given."""
    from tfcourse.batch.results import feedback, feedback_html, feedback_markdown
    from tfcourse.batch.runner import shown_name
    from tfcourse.batch.survey import Found
    from tfcourse.submission.report import SubmissionReport

    for name, heading in (("alice/01-attention", "alice"), ("alice", "alice"),
                          ("alice/02-layers", "alice/02-layers")):     # not this assignment's
        view = feedback(course, SubmissionReport("01-attention", name), "en")
        assert feedback_markdown(view).splitlines()[0] == f"# Feedback: {heading}", name
        assert f"<h1>Feedback: {heading}</h1>" in feedback_html(view)
    folder = tmp_path / "submitted" / "bob" / "01-attention"
    assert shown_name(course, Found("01-attention", folder)) == "bob/01-attention"
    assert shown_name(course, Found("bob/01-attention", folder)) == "bob/01-attention"
    released = course.release_dir / "01-attention"
    assert shown_name(course, Found("01-attention", released)) == "01-attention"
    assert shown_name(course, Found("alice", tmp_path / "alice")) == "alice"
