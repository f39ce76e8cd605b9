"""Hostile and broken submissions: grading survives each one, says what happened in plain words,
and scores only what the honest part of the submission earns.

Submissions are built from the released notebook and graded as a class is graded: `grade_many`
over a folder of them, one trusted grader process each, on a copy of the course whose course.yaml
sets limits of a few seconds and 768 MB (so that the limits are seen to come from there, quickly).

- Batch 1, the default sandbox (bubblewrap): crashes, leftover processes, endless loops, memory,
  cheats, broken notebooks, re-runs. It lives outside /tmp, so that what hides the course, the
  submissions and the results from student code is the sandbox's own list, not its private /tmp.
- Batch 2, `sandbox.isolation: process` with `sandbox.accept_weaker: same-user`: the key cases
  again, asserting what that weaker mode guarantees. Where the sandbox user cannot run the
  interpreter (as here: the venv is under /root), student code runs as root there: it can read
  anything and kill the grader, so those tests assert only what still holds. Without the opt-in,
  grading refuses to run student code at all, and each submission says why (`refused`).
- `process_as_nobody`: process mode with an interpreter the sandbox user can run (a copy of this
  one under /var/tmp, as Gradescope's setup.sh installs one under /opt): student code runs as
  `nobody`.

Each cheat sits in a submission with real bugs beside it, and is scored test by test against
`twin`: the same bugs without the cheats.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import nbformat
import pytest
import yaml

from conftest import ROOT, lost, make_submission, replace_in, scores, solution_cells, survivors

from tfcourse.batch.runner import grade_many
from tfcourse.sandbox import launch, plan
from tfcourse.sandbox.launch import bwrap_works
from tfcourse.course import load_course

# End to end: grades batches of hostile submissions through the sandbox.
pytestmark = pytest.mark.slow

A = "01-attention"
NOTEBOOK = "attention.ipynb"
TOKEN = f"tfhostile{uuid.uuid4().hex[:10]}"      # in the command line of every process we start
SOLUTION = solution_cells(A)
# course.yaml limits of the course copies graded here
LIMITS = {"check_seconds": 6, "cell_seconds": 5, "memory_mb": 768, "submission_seconds": 120}


# -- building submissions ------------------------------------------------------------------------
def code(text: str, **values) -> str:
    """A cell's source: `text` dedented, with TOKEN and the names in `values` filled in."""
    text = textwrap.dedent(text).strip() + "\n"
    for key, value in {"TOKEN": TOKEN, **values}.items():
        text = text.replace(key, str(value))
    return text


def gid_of(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def inserted(*sources, remove=()):
    """An edit: student code cells right after the course's set-up cells (positions 4, 5, ...),
    so that everything the grader checks comes after them; `remove` drops cells by grade id."""
    def edit(nb):
        nb.cells = [cell for cell in nb.cells if gid_of(cell) not in remove]
        for offset, source in enumerate(sources):
            nb.cells.insert(3 + offset, nbformat.v4.new_code_cell(source))
    return edit


# A correct solution with bugs, and the same code with cheats added.
SDPA_ZEROS = code("""
    def scaled_dot_product_attention(q, k, v, mask=None):
        weights = torch.full((*q.shape[:-1], k.shape[-2]), 1.0 / k.shape[-2])
        return torch.zeros(*q.shape[:-1], v.shape[-1]), weights
""")
# The same stub, but it looks through its process's memory for a tensor shaped like the answer.
SDPA_MEMORY_SEARCH = code("""
    import gc

    def scaled_dot_product_attention(q, k, v, mask=None):
        weights = torch.full((*q.shape[:-1], k.shape[-2]), 1.0 / k.shape[-2])
        shape = (*q.shape[:-1], v.shape[-1])
        for thing in gc.get_objects():
            if isinstance(thing, torch.Tensor) and tuple(thing.shape) == shape \\
                    and thing is not q and thing is not v:
                return thing.detach().clone(), weights
        return torch.zeros(shape), weights
""")
MHA_BUG = replace_in(SOLUTION["mha-code"], "return self.w_o(out)", "return out")
MASKS_BUG = replace_in(SOLUTION["masks-code"], "(tokens == pad_id)", "(tokens != pad_id)")
TWIN = {"sdpa-code": SDPA_ZEROS, "mha-code": MHA_BUG, "masks-code": MASKS_BUG}

PATCH_EVERYTHING = code("""
    import builtins
    import torch

    torch.allclose = lambda *args, **kwargs: True
    torch.equal = lambda *args, **kwargs: True
    torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(a, dtype=torch.bool)
    torch.Tensor.__eq__ = lambda self, other: True
    torch.Tensor.allclose = lambda self, *args, **kwargs: True
    builtins.abs = lambda value: 0
    builtins.all = builtins.any = lambda values: True
    try:                                    # the grader's own modules, were they importable here
        import tfcourse.submission.framework
        tfcourse.submission.framework.close = lambda *args, **kwargs: True
    except ImportError:
        pass
    try:
        import tfcourse.submission.plugin
        tfcourse.submission.plugin.verdict = lambda error: ("", {}, False)
    except ImportError:
        pass
""")

# Processes that ignore SIGTERM and SIGALRM: a child, a child in a new session, and a daemon
# (double fork, setsid). The cell says how many it saw running, and where it ran.
LINGER = code("""
    import os, signal, subprocess, sys, time

    for number in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    signal.alarm(1)
    HOG = ("import signal, time\\n"
           "for n in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP):\\n"
           "    signal.signal(n, signal.SIG_IGN)\\n"
           "while True:\\n    time.sleep(0.05)")
    pids = [subprocess.Popen([sys.executable, "-c", HOG, "TOKEN"]).pid,
            subprocess.Popen([sys.executable, "-c", HOG, "TOKEN"], start_new_session=True).pid]
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode())
            os.execv(sys.executable, [sys.executable, "-c", HOG, "TOKEN"])
        os._exit(0)
    os.wait()
    pids.append(int(os.read(read_end, 20)))
    time.sleep(0.5)
    running = [pid for pid in pids if "TOKEN" in open(f"/proc/{pid}/cmdline").read()]
    raise RuntimeError(f"{len(running)} processes ignore SIGTERM; sandbox at {os.getcwd()}")
""")

CRASHES = [
    code("import sys; sys.exit(0)"),
    code("import os; os._exit(0)"),                    # a success status: no forged success
    code("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"),
]
KILL_PARENT = code("import os, signal; os.kill(os.getppid(), signal.SIGKILL)")


def snoop(course_root: Path, submitted: Path, out: Path, name: str, other: str, write: bool):
    """Reads what must stay hidden, forges results, prints fake ones and 20 MB more, looks for
    the grader's modules; says what it managed.

    With `write`, it also tries to change the inputs and the graders (only where that must fail).
    """
    secrets = [course_root / "autograder" / "test_attention.py",
               course_root / "source" / A / NOTEBOOK, course_root / "solutions" / A / NOTEBOOK,
               course_root / "course.yaml", submitted / other / NOTEBOOK, out / other]
    targets = [submitted / name / NOTEBOOK, submitted / other / "forged.txt",
               course_root / "autograder" / "forged.py"] if write else []
    return code("""
        import importlib.util, json, os, sys
        fake = {"score": 14.0, "max_score": 14.0, "tests": [], "output": "all passed"}
        print(json.dumps(fake))
        sys.stdout.write(json.dumps({"assignment": "01-attention", "notebooks": []}) + "\\n")
        for _ in range(20):
            print("x" * (1 << 20))
        graders = importlib.util.find_spec("autograder") is not None
        read, wrote = [], []
        try:                                # where the grader writes this submission's results
            os.makedirs("OUT", exist_ok=True)
            with open(os.path.join("OUT", "results.json"), "w") as handle:
                json.dump(fake, handle)
        except OSError:
            pass
        for path in SECRETS:
            try:
                if os.path.isdir(path):
                    if os.listdir(path):
                        read.append(path)
                else:
                    with open(path, "rb") as handle:
                        handle.read()
                    read.append(path)
            except OSError:
                pass
        for path in TARGETS:
            try:
                with open(path, "w") as handle:
                    handle.write("forged")
                wrote.append(path)
            except OSError:
                pass
        raise RuntimeError(f"cwd {sorted(os.listdir())}; uid {os.getuid()}; graders {graders}; "
                           f"wrote {wrote}; read {read}")
    """, SECRETS=repr([str(p) for p in secrets]), TARGETS=repr([str(p) for p in targets]),
        OUT=str(out / name))


# Limits (see LIMITS).
STUBBORN_LOOP = code("""
    import signal, subprocess, sys
    for number in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT):
        signal.signal(number, signal.SIG_IGN)
    SLEEPER = ("import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
               "while True:\\n    time.sleep(0.05)")
    subprocess.Popen([sys.executable, "-c", SLEEPER, "TOKEN"], start_new_session=True)
    while True:
        pass
""")
SDPA_LOOPS_UNBATCHED = replace_in(          # an endless loop in one check's call only
    SOLUTION["sdpa-code"], "    scores = q @ k",
    "    while q.dim() == 2:\n        pass\n    scores = q @ k")
MEMORY_HOGS = code("""
    import os, subprocess, sys, time
    HOG = "block = b'x' * (260 << 20)\\nimport time\\ntime.sleep(60)"
    subprocess.Popen([sys.executable, "-c", HOG, "TOKEN"])
    for _ in range(2):                      # two daemons, outside the worker's process tree
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", HOG, "TOKEN"])
            os._exit(0)
        os.wait()
    time.sleep(60)
""")
CAUSAL_HOGS = replace_in(                    # 40 MB more at a time until the watchdog stops it
    SOLUTION["masks-code"], '    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)',
    "    hog = []\n    while True:\n        hog.append(torch.ones(10 << 20))")
LOOP_FOREVER = {         # every function loops forever when called
    "sdpa-code": replace_in(SOLUTION["sdpa-code"], "    scores = q @ k",
                            "    while True:\n        pass\n    scores = q @ k"),
    "mha-code": replace_in(SOLUTION["mha-code"], "        super().__init__()",
                           "        super().__init__()\n        while True:\n            pass"),
    "masks-code": replace_in(replace_in(
        SOLUTION["masks-code"], "    return torch.ones(", "    while True:\n        pass\n"
                                                         "    return torch.ones("),
        "    return (tokens", "    while True:\n        pass\n    return (tokens"),
}


# -- grading -------------------------------------------------------------------------------------
def course_copy(folder: Path, sandbox: dict | None = None, limits: dict | None = None):
    """A copy of the course whose course.yaml asks for another sandbox or other limits."""
    shutil.copytree(ROOT, folder, ignore=shutil.ignore_patterns(
        ".venv", ".git", "graded", "__pycache__", ".pytest_cache", "*.egg-info"))
    path = folder / "course.yaml"
    data = yaml.safe_load(path.read_text())
    data["sandbox"].update(sandbox or {})
    data["limits"].update(limits or {})
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return load_course(folder)


class Batch:
    """A folder of submissions graded together, and what came of it."""

    def __init__(self, course, submitted: Path, out: Path):
        self.course, self.submitted, self.out = course, submitted, out

    def grade(self) -> dict[str, str]:
        """Grade the folder (as `tfcourse grade`); each submission's status."""
        jobs = 1 if self.course.sandbox.isolation == "process" else 2   # (refused side by side)
        outcomes = grade_many(self.course, [self.submitted], self.out, jobs=jobs, lang="en",
                              assignment=A, progress=False)
        return {o.name: o.status for o in outcomes}

    def grade_and_watch(self) -> None:
        """The first grading, and what it left: the input's hashes before it, each submission's
        status, the processes still running, the sandbox folders still there (graded with a
        temporary folder of its own, so that other gradings on the machine do not count)."""
        self.before = hashes(self.submitted)
        private = Path(tempfile.mkdtemp(prefix="tftemp-", dir=self.out.parent))
        os.chmod(private, 0o755)
        shared, tempfile.tempdir = tempfile.tempdir, str(private)
        try:
            folders = sandbox_folders()
            self.statuses = self.grade()
            self.survivors = survivors(TOKEN)
            self.leftovers = sandbox_folders() - folders
        finally:
            tempfile.tempdir = shared

    def results(self, name: str) -> dict:
        return json.loads((self.out / name / "results.json").read_text(encoding="utf-8"))

    def messages(self, name: str) -> dict[str, str]:
        return {test["number"]: test["output"] for test in self.results(name)["tests"]}


def hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sandbox_folders() -> set[str]:
    """The folders in the system's temporary folder that grading makes for its sandboxes."""
    return {str(path) for path in Path(tempfile.gettempdir()).glob("tfgrade-*")}


def cell_note(results: dict, label: int) -> str:
    """The note about one cell (by its position in the notebook)."""
    lines = [line for line in results["output"].splitlines() if f"cell {label} " in line]
    assert len(lines) == 1, results["output"]
    return lines[0]


# -- batch 1: bubblewrap ------------------------------------------------------------------------
def damaged(folder: Path, name: str, change, **build) -> None:
    change(make_submission(folder / name, A, **build) / NOTEBOOK)


def old_and_latin1(path: Path) -> None:
    """Saved in nbformat 3, with one comment in Latin-1 rather than UTF-8."""
    old = nbformat.convert(nbformat.read(str(path), as_version=4), 3)
    data = json.dumps(old, ensure_ascii=False, indent=1).encode()
    assert "café".encode() in data
    path.write_bytes(data.replace("café".encode(), "café".encode("latin-1")))


def reshape(nb) -> None:
    """Cells moved about: a duplicated answer, an answer turned into markdown, a changed grade id,
    edited read-only cells, and 200 MB of output in a demo cell (see `huge_output`)."""
    cells = []
    for cell in nb.cells:
        gid = gid_of(cell)
        if gid == "mha-code":
            cell = nbformat.v4.new_markdown_cell(cell.source, metadata=cell.metadata)
        elif gid == "masks-code":
            cell.metadata["nbgrader"]["grade_id"] = "masks-code-mine"
        elif gid == "setup":
            cell.source += "\ntorch.allclose = lambda *args, **kwargs: True"
        elif gid == "mha":
            cell.source = "print('all checks passed')"
        elif gid == "demo-sdpa":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="HUGE")]
        cells.append(cell)
    duplicate = next(cell for cell in nb.cells if gid_of(cell) == "sdpa-code").copy()
    duplicate["id"] = "pasted-copy"
    nb.cells = cells + [duplicate]


def huge_output(path: Path) -> None:
    """Replace the demo cell's output "HUGE" by 200 MB of text, written as a stream."""
    before, after = path.read_text(encoding="utf-8").split('"HUGE"')
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(before + '"')
        chunk = "0123456789abcdef" * 65536          # 1 MB
        for _ in range(200):
            handle.write(chunk)
        handle.write('"' + after)


def over_the_limits(submitted: Path) -> None:
    """An endless loop and a memory hog, each in a cell and in a checked function."""
    make_submission(submitted / "limits", A, answers={"sdpa-code": SDPA_LOOPS_UNBATCHED,
                                                      "masks-code": CAUSAL_HOGS},
                    edit=inserted(STUBBORN_LOOP, MEMORY_HOGS))


def check_limits(batch) -> None:
    results, messages = batch.results("limits"), batch.messages("limits")
    # the stub that hung in sdpa.shapes costs that one timeout; its other checks fail at once
    later = {"sdpa.softmax", "sdpa.values", "sdpa.mask"}
    assert lost(results) == {"sdpa.shapes", "masks.causal", *later}
    assert messages["sdpa.shapes"] == ("used more than 6 CPU seconds (an endless loop, or very "
                                       "slow code?)")
    assert {messages[check] for check in later} == {
        "not run: scaled_dot_product_attention already used more than 6 CPU seconds in "
        "sdpa.shapes"}
    assert messages["masks.causal"] == ("used more memory than allowed (used more than 768 MB of "
                                        "memory)")
    assert cell_note(results, 4).endswith("cell 4 used more than 5 CPU seconds (an endless "
                                          "loop?); it was left out and the rest was graded")
    assert cell_note(results, 5).endswith("cell 5 ended the grading process: it used more than "
                                          "768 MB of memory; it was left out and the rest was "
                                          "graded")


@pytest.fixture(scope="module")
def main_batch():
    if not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    base = Path(tempfile.mkdtemp(prefix="tfhostile-", dir="/var/tmp"))
    try:
        submitted, out = base / "submitted", base / "graded"
        batch = Batch(course_copy(base / "course", limits=LIMITS), submitted, out)
        make_submission(submitted / "twin", A, answers=TWIN)
        make_submission(submitted / "cheats", A, answers={**TWIN, "sdpa-code": SDPA_MEMORY_SEARCH},
                        edit=inserted(snoop(batch.course.root, submitted, out, "cheats", "twin",
                                            write=True), PATCH_EVERYTHING))
        make_submission(submitted / "crashes", A, edit=inserted(LINGER, *CRASHES, KILL_PARENT))
        over_the_limits(submitted)
        damaged(submitted, "reshaped", huge_output, edit=reshape)
        make_submission(submitted / "deleted", A, edit=inserted(
            remove=("masks-code", "sdpa", "demo-sdpa", "demo-masks")))
        damaged(submitted, "truncated",
                lambda p: p.write_bytes(p.read_bytes()[:p.stat().st_size // 2]))
        damaged(submitted, "empty", lambda p: p.write_bytes(b""))
        damaged(submitted, "old-latin1", old_and_latin1,
                answers={"sdpa-code": SOLUTION["sdpa-code"] + "# café\n"})
        damaged(submitted, "renamed", lambda p: p.rename(p.with_name("attention (1).ipynb")))
        (submitted / "exported").mkdir()
        (submitted / "exported" / "attention.py").write_text(SOLUTION["sdpa-code"])
        batch.grade_and_watch()
        yield batch
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def twin(main_batch):
    return main_batch.results("twin")


def test_every_submission_ends_with_results_and_feedback(main_batch):
    names = {"twin", "cheats", "crashes", "limits", "reshaped", "deleted", "truncated", "empty",
             "old-latin1", "renamed", "exported"}
    assert main_batch.statuses == dict.fromkeys(names, "graded")
    for name in names:
        results = main_batch.results(name)
        assert results["max_score"] == 14 and len(results["tests"]) == 10
        assert results["extra_data"]["grader_error"] is None
        assert "Score" in (main_batch.out / name / "feedback.md").read_text()
        assert "<table>" in (main_batch.out / name / "feedback.html").read_text()
    assert main_batch.results("twin")["extra_data"]["notebooks"][0]["sandbox"] == "bwrap"


def test_the_twin_loses_points_for_each_bug(twin):
    assert {"sdpa.values", "mha.self", "masks.padding"} <= lost(twin)


def no_more_than(cheat: dict, twin: dict) -> bool:
    """Check by check, the cheat scores at most what its twin scores. (The cheats here walk the
    process's objects with gc, which the course's rule flags against every stub: they earn less.)"""
    return all(score <= twin[test] for test, score in cheat.items()) and cheat.keys() == twin.keys()


def test_cheats_earn_no_more_than_the_same_bugs_earn_without_them(main_batch, twin):
    assert no_more_than(scores(main_batch.results("cheats")), scores(twin))


def test_monkeypatches_were_live_while_checked(main_batch):
    output = main_batch.results("cheats")["output"]
    assert "cell 5 " not in output and "ended the grading process" not in output


def test_printed_output_is_capped(main_batch):
    output = main_batch.results("cheats")["output"]
    dropped = re.search(r"your code printed more than 256 KB of output; the rest \((\d+\.\d) MB\) "
                        r"was dropped", output)
    assert dropped and 19 < float(dropped.group(1)) < 21, output


def test_hidden_files_cannot_be_read_nor_inputs_and_graders_written(main_batch):
    note = cell_note(main_batch.results("cheats"), 4)
    assert "cwd ['tmp']; uid 65534; graders False; wrote []; read []" in note
    assert not (main_batch.course.root / "autograder" / "forged.py").exists()


def test_the_input_folder_is_never_changed(main_batch):
    assert hashes(main_batch.submitted) == main_batch.before


def test_crashing_cells_are_left_out_and_the_rest_is_graded(main_batch):
    results = main_batch.results("crashes")
    assert results["score"] == 14, results["output"]
    assert "3 processes ignore SIGTERM" in cell_note(results, 4)
    assert "cell 5 raised SystemExit: 0" in cell_note(results, 5)
    assert cell_note(results, 6).endswith("ended the grading process: it exited with status 0; it "
                                          "was left out and the rest was graded")
    assert "it crashed with a segmentation fault (SIGSEGV" in cell_note(results, 7)
    # Killing its parent fails in bubblewrap: the parent is the namespace's init, and the worker
    # runs as another user. Whatever it did, the rest was graded.
    assert "cell 8 raised PermissionError" in cell_note(results, 8)


def test_no_process_outlives_its_grading(main_batch):
    assert main_batch.survivors == [], main_batch.survivors
    note = cell_note(main_batch.results("crashes"), 4)
    assert "sandbox at /sandbox/work" in note       # no path of the machine's, seen from inside
    assert main_batch.leftovers == set()


def test_endless_loops_and_memory_hogs_cost_their_cell_and_their_check(main_batch):
    check_limits(main_batch)


@pytest.mark.parametrize("name, words", [
    ("truncated", "attention.ipynb is not valid JSON (line "),
    ("empty", "attention.ipynb is an empty file"),
    ("exported", "attention.ipynb is missing from the submission (notebooks found there: "
                 "none)"),
])
def test_unreadable_notebooks_score_nothing_and_say_why(main_batch, name, words):
    results = main_batch.results(name)
    assert results["score"] == 0
    assert words in results["output"]
    assert set(main_batch.messages(name).values()) == {
        "not graded: the notebook could not be read"}


def test_an_old_notebook_with_bad_bytes_is_repaired_and_graded(main_batch):
    results = main_batch.results("old-latin1")
    assert results["score"] == 14
    assert "attention.ipynb is not valid UTF-8 text (byte 0xe9 at position " in results["output"]
    assert "attention.ipynb was saved in the old format version 3; it was converted" in \
        results["output"]


def test_a_renamed_notebook_is_graded_in_place_of_the_missing_one(main_batch):
    results = main_batch.results("renamed")
    assert results["score"] == 14
    assert "there is no attention.ipynb; attention (1).ipynb was graded in its place" in \
        results["output"]


def test_moved_and_edited_cells_are_restored_or_run(main_batch):
    results = main_batch.results("reshaped")
    assert results["score"] == 14, results["output"]
    for words in ["attention.ipynb is 200 MB, mostly cell outputs; it was read without them",
                  "the cell sdpa-code appears more than once; the copy at position ",
                  "counts as a cell you added",     # positions move with the notebook's prose
                  "your answer cell mha-code had been turned into a markdown cell; it was run "
                  "as code",
                  "has a grade id (masks-code-mine) that is not in the assignment",
                  "the read-only cell setup was edited; the grader used the original",
                  "the read-only cell mha was edited; the grader used the original"]:
        assert words in results["output"]


def test_deleted_cells_cost_only_their_own_points(main_batch):
    results = main_batch.results("deleted")
    assert lost(results) == {"masks.causal", "masks.padding"}
    said = main_batch.messages("deleted")                # each test names its own stub
    assert {test: said[test] for test in lost(results)} == {
        f"masks.{test}": f"{stub} is not defined: was its cell deleted, renamed or left with an "
                         f"error?" for test, stub in (("causal", "causal_mask"),
                                                      ("padding", "padding_mask"))}
    assert "the answer cell masks-code is not in the notebook" in results["output"]


def test_a_second_run_grades_only_what_changed(main_batch):
    assert set(main_batch.grade().values()) == {"unchanged"}
    make_submission(main_batch.submitted / "empty", A)           # the student hands it in again
    statuses = main_batch.grade()
    assert statuses.pop("empty") == "graded"
    assert set(statuses.values()) == {"unchanged"}
    assert main_batch.results("empty")["score"] == 14


def test_the_notebook_deadline_stops_grading(tmp_path):
    if not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    limits = {"check_seconds": 2, "cell_seconds": 2, "submission_seconds": 6}
    batch = Batch(course_copy(tmp_path / "course", limits=limits), tmp_path / "submitted",
                  tmp_path / "graded")
    make_submission(batch.submitted / "endless", A, answers=LOOP_FOREVER)
    assert batch.grade() == {"endless": "graded"}
    results = batch.results("endless")
    messages = set(batch.messages("endless").values())
    assert results["score"] == 0
    assert "not graded: the time for this notebook (6 s) ran out" in messages
    assert results["extra_data"]["notebooks"][0]["seconds"] < 6 + 10


MHA_LOOPS = replace_in(SOLUTION["mha-code"], "    def forward(self, x_q, x_kv, mask=None):\n",
                       "    def forward(self, x_q, x_kv, mask=None):\n        while True:\n"
                       "            pass\n")


def test_a_stub_that_hangs_costs_one_timeout_not_one_per_check(tmp_path):
    """MultiHeadAttention.forward loops forever: its first check that calls it waits out the
    check's time, its other checks fail at once and say why, the other stubs are graded."""
    if not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    limits = {"check_seconds": 3, "cell_seconds": 3, "submission_seconds": 120}
    batch = Batch(course_copy(tmp_path / "course", limits=limits), tmp_path / "submitted",
                  tmp_path / "graded")
    make_submission(batch.submitted / "hangs", A, answers={"mha-code": MHA_LOOPS})
    assert batch.grade() == {"hangs": "graded"}
    results, messages = batch.results("hangs"), batch.messages("hangs")
    assert lost(results) == {"mha.self", "mha.cross", "mha.mask"}
    assert messages["mha.self"] == ("used more than 3 CPU seconds (an endless loop, or very slow "
                                    "code?)")
    for check in ("mha.cross", "mha.mask"):
        assert messages[check] == ("not run: MultiHeadAttention already used more than 3 CPU "
                                   "seconds in mha.self")
    assert results["score"] == 14 - 5


def test_an_interpreter_under_tmp_is_shown_in_the_sandbox(monkeypatch, tmp_path):
    """A course folder in /tmp with its Python (a CI checkout, say): the machine's /tmp is not
    shown to the sandbox, but the interpreter under it must be, or the student's process cannot
    start."""
    base = tmp_path / "course" / "python"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3").write_text("")
    for name in ("base_prefix", "prefix"):
        monkeypatch.setattr(sys, name, str(base))
    monkeypatch.setattr(sys, "executable", str(base / "bin" / "python3"))
    sandbox = launch.Sandbox(launch.SandboxConfig(isolation="bwrap", hide=[tmp_path / "course"]))
    try:
        arguments, python = plan.bwrap_options(sandbox.config, sandbox.base, sandbox.drop_to)
    finally:
        sandbox.close()
    flags = list(zip(arguments, arguments[1:], arguments[2:]))
    assert python == base / "bin" / "python3"
    assert ("--ro-bind", str(base), str(base)) in flags
    assert not [flag for flag in flags if flag[0] == "--symlink" and flag[2] == "/tmp"]


# -- batch 2: a plain process (sandbox.isolation: process) -------------------------------------
PROCESS_MODE = {"isolation": "process", "accept_weaker": "same-user"}


@pytest.fixture(scope="module")
def process_batch(tmp_path_factory):
    base = tmp_path_factory.mktemp("process")
    submitted, out = base / "submitted", base / "graded"
    batch = Batch(course_copy(base / "course", sandbox=PROCESS_MODE, limits=LIMITS),
                  submitted, out)
    make_submission(submitted / "twin", A, answers=TWIN)
    make_submission(submitted / "cheats", A, answers={**TWIN, "sdpa-code": SDPA_MEMORY_SEARCH},
                    edit=inserted(snoop(batch.course.root, submitted, out, "cheats", "twin",
                                        write=False), PATCH_EVERYTHING))
    make_submission(submitted / "crashes", A, edit=inserted(LINGER, *CRASHES))
    make_submission(submitted / "kill-parent", A, edit=inserted(KILL_PARENT))
    over_the_limits(submitted)
    batch.grade_and_watch()
    return batch


def test_process_mode_grades_everyone_else_when_a_parent_is_killed(process_batch):
    """Student code's parent is the sandbox's keeper, not the grader. Run as root (same-user), it
    kills the keeper, and its own process dies with it (when that shows only at the next request,
    on a busy machine, a later cell is blamed: same-user accepts code that can do such things).
    Run as the sandbox user, it cannot, and everything is graded."""
    statuses = dict(process_batch.statuses)
    results = process_batch.results("kill-parent")
    assert statuses.pop("kill-parent") == "graded"
    if "student code runs as root" in results["output"]:
        assert "ended the grading process: it was killed (SIGKILL)" in results["output"]
    else:
        assert results["score"] == 14
    assert set(statuses.values()) == {"graded"}
    assert process_batch.results("twin")["extra_data"]["notebooks"][0]["sandbox"] == "process"
    assert process_batch.leftovers == set()          # not even from the grader that was killed


def test_process_mode_crashes_and_leftovers(process_batch):
    results = process_batch.results("crashes")
    assert results["score"] == 14, results["output"]
    assert "3 processes ignore SIGTERM" in cell_note(results, 4)
    assert "it exited with status 0" in cell_note(results, 6)
    assert "it crashed with a segmentation fault (SIGSEGV" in cell_note(results, 7)
    assert process_batch.survivors == [], process_batch.survivors


def test_process_mode_cheats_earn_nothing(process_batch):
    results = process_batch.results("cheats")
    assert no_more_than(scores(results), scores(process_batch.results("twin")))
    assert "ended the grading process" not in results["output"]
    # The graders are never in the student's folder; whether student code can read them
    # elsewhere depends on its user, and running as root is announced.
    note = cell_note(results, 4)
    assert "cwd ['tmp'];" in note and "graders False;" in note
    if "uid 0;" in note:
        assert "student code runs as root" in results["output"]


def test_process_mode_limits(process_batch):
    check_limits(process_batch)


def test_process_mode_leaves_inputs_alone_and_retries_failures(process_batch):
    assert hashes(process_batch.submitted) == process_batch.before
    again = process_batch.grade()
    failed = {name for name, status in process_batch.statuses.items() if status == "failed"}
    assert {name for name, status in again.items() if status != "unchanged"} == failed


# -- weaker isolation without the opt-in: refused ----------------------------------------------
def test_without_the_opt_in_a_plain_process_is_refused_and_each_result_says_why(tmp_path):
    """course.yaml asks for a plain process but does not accept weaker isolation: no student code
    runs, and every submission gets the assignment's full max_score, 0 points and the reason,
    for the student and the instructor alike."""
    batch = Batch(course_copy(tmp_path / "course", sandbox={"isolation": "process"},
                              limits=LIMITS), tmp_path / "submitted", tmp_path / "graded")
    make_submission(batch.submitted / "solution", A)
    make_submission(batch.submitted / "snoop", A, edit=inserted(code("""
        open("/tmp/TOKEN-ran", "w").close()
    """)))
    try:
        assert batch.grade() == {"solution": "graded", "snoop": "graded"}
        assert not Path(f"/tmp/{TOKEN}-ran").exists()
    finally:
        Path(f"/tmp/{TOKEN}-ran").unlink(missing_ok=True)
    for name in ("solution", "snoop"):
        results = batch.results(name)
        assert results["score"] == 0 and results["max_score"] == 14
        assert len(results["tests"]) == 10
        assert set(batch.messages(name).values()) == {
            "not graded: the grader could not run this notebook"}
        assert "student code was not run: course.yaml asks for sandbox.isolation: process" in \
            results["output"]
        assert "sandbox.accept_weaker: process" in results["output"]
        assert "student code was not run" in (batch.out / name / "feedback.md").read_text()


# -- process mode as nobody, with an interpreter that user can run -----------------------------
def copy_of_this_python(folder: Path) -> Path:
    """This interpreter and its venv, copied under `folder` as hard links (seconds, no space),
    with the links and pyvenv.cfg rewritten (never written through: they are the originals'
    inodes) and every folder readable by all. Returns the copy's python."""
    base, venv = folder / "python", folder / "venv"
    subprocess.run(["cp", "-al", os.path.realpath(sys.base_prefix), str(base)], check=True)
    subprocess.run(["cp", "-al", sys.prefix, str(venv)], check=True)
    config = venv / "pyvenv.cfg"
    text = config.read_text().replace(os.path.realpath(sys.base_prefix), str(base))
    config.unlink()
    config.write_text(text)
    for link in (venv / "bin").iterdir():
        if link.is_symlink() and os.path.isabs(os.readlink(link)):
            target = Path(os.readlink(link))
            link.unlink()
            link.symlink_to(base / "bin" / target.name)
    subprocess.run(["find", str(folder), "-type", "d", "-exec", "chmod", "a+rx", "{}", "+"],
                   check=True)
    return venv / "bin" / "python"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to the sandbox user needs root")
def test_process_mode_runs_student_code_as_nobody_with_a_python_it_can_run(tmp_path):
    """As in a Gradescope container without user namespaces: a plain process, accepted by
    `sandbox.accept_weaker: process`, runs student code as `nobody` once that user can run the
    interpreter (setup.sh installs it under /opt/tfcourse, readable by all)."""
    folder = Path(tempfile.mkdtemp(prefix="tfpython-", dir="/var/tmp"))
    try:
        os.chmod(folder, 0o755)
        python = copy_of_this_python(folder)
        course = course_copy(tmp_path / "course", sandbox={"isolation": "process",
                                                           "accept_weaker": "process"},
                             limits=LIMITS)
        submission = make_submission(tmp_path / "submitted" / "student", A, edit=inserted(
            snoop(course.root, tmp_path / "submitted", tmp_path / "graded", "student", "other",
                  write=False), KILL_PARENT))
        report = tmp_path / "report.json"
        subprocess.run([str(python), "-m", "tfcourse.submission", str(submission), "--course",
                        str(course.root), "--out", str(report)], cwd=course.root, check=True,
                       env={**os.environ, "PYTHONPATH": str(course.root)}, timeout=600)
        notebook = json.loads(report.read_text())["notebooks"][0]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert notebook["sandbox"] == "process"
    cells = {cell["label"]: cell for cell in notebook["cells"]}
    snooped = cells["4"]["error"]["message"]
    assert "uid 65534;" in snooped and "graders False;" in snooped
    assert "PermissionError" == cells["5"]["error"]["type"]      # it cannot kill the grader
    notes = " ".join(note["template"].format(**note["params"]) for note in notebook["notes"])
    assert "student code runs as a plain process, not in bubblewrap" in notes
