"""Whether a change to the engine leaves grading as it was: the same submissions graded by an older
commit and by the working tree, results.json and feedback compared byte for byte (timings aside).

    python bench/identical.py [--base cd53126] [--new COMMIT] [--every 4] [--work /tmp/identical]

The submissions are every alternative of tests/alternatives.py and every `--every`-th bug of
tests/catalogue (the training check skipped: its seconds are what changes from run to run). Each
side grades them with `python -m tfcourse grade` in its own checkout, course and engine (the base in
a `git archive` of --base, with its own PYTHONPATH; the new side in this one, or in an archive of
--new). Differences
are printed; the exit status is 1 when there is one.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = "trained.accuracy"
TIMES = re.compile(r"(\d+(\.\d+)?) ?(s|seconds|segundos)\b")


def build(folder: Path, every: int) -> list[str]:
    """Write the submissions under `folder`; their names."""
    sys.path[:0] = [str(ROOT / "tests")]
    from alternatives import ALTERNATIVES
    from test_alternatives import build as build_alternative
    from test_catalogue import BUGS, build as build_bug

    names = []
    for item, make in [(a, build_alternative) for a in ALTERNATIVES] + \
            [(b, build_bug) for b in BUGS[::every]]:
        name = f"{item.assignment}-{item.name}"
        make(folder / name, item)
        names.append(name)
    return names


def grade(checkout: Path, submissions: Path, out: Path) -> tuple[float, float]:
    """Grade every submission with the course and engine of `checkout`; (wall s, CPU s of the
    children)."""
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    before, started = os.times(), time.monotonic()
    subprocess.run(["nice", "-n", "10", sys.executable, "-m", "tfcourse", "grade", str(submissions),
                    "--out", str(out), "--jobs", "2", "--skip", SKIP, "--no-progress", "--force"],
                   cwd=checkout, env=environment, check=True, stdout=subprocess.DEVNULL)
    after = os.times()
    cpu = after.children_user - before.children_user + after.children_system - \
        before.children_system
    return time.monotonic() - started, cpu


# (the regressor's check draws its evaluation seed afresh at every grading, by design)
MEASURED = ("fingerprint", "execution_time", "seconds", "peak_memory_mb", "regressor_eval_seed",
            "regressor_error")


def without_measures(value):
    """`value` without what is measured or drawn rather than decided: the fingerprint (it hashes
    the engine's code), seconds, peak memory, the regressor's fresh seed and its error on it."""
    if isinstance(value, dict):
        return {key: without_measures(item) for key, item in value.items()
                if key not in MEASURED}
    if isinstance(value, list):
        return [without_measures(item) for item in value]
    return value


def normalised(path: Path) -> str:
    """A result file with what legitimately changes between runs taken out (`without_measures`;
    in text, any number of seconds)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        text = json.dumps(without_measures(json.loads(text)), indent=1, sort_keys=True)
    return TIMES.sub("N s", text)


def compare(base: Path, new: Path) -> list[str]:
    """What differs between two results folders, file by file."""
    problems = []
    files = sorted({p.relative_to(base) for p in base.rglob("*") if p.is_file()} |
                   {p.relative_to(new) for p in new.rglob("*") if p.is_file()})
    for name in files:
        if not (base / name).is_file() or not (new / name).is_file():
            problems.append(f"{name}: only in {'the base' if (base / name).is_file() else 'new'}")
            continue
        old_text, new_text = normalised(base / name), normalised(new / name)
        if old_text != new_text:
            diff = difflib.unified_diff(old_text.splitlines(), new_text.splitlines(), "base",
                                        "new", lineterm="", n=1)
            problems.append(f"{name}:\n" + "\n".join(list(diff)[:30]))
    return problems


def checkout(commit: str, folder: Path) -> Path:
    """A copy of `commit` at `folder` (made once)."""
    if not folder.is_dir():
        folder.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="cd53126")
    parser.add_argument("--new", help="a commit to grade with instead of the working tree (so that "
                        "the tree may change while it grades)")
    parser.add_argument("--every", type=int, default=4, help="grade every N-th catalogue bug")
    parser.add_argument("--work", type=Path, default=Path("/tmp/identical"))
    parser.add_argument("--only", choices=("base", "new"), help="grade one side only (the other "
                        "side's results are kept from an earlier run)")
    options = parser.parse_args()
    work = options.work
    submissions = work / "submissions"
    if not submissions.is_dir():
        names = build(submissions, options.every)
        print(f"built {len(names)} submissions in {submissions}")
    base_checkout = checkout(options.base, work / "base-checkout")
    new_checkout = checkout(options.new, work / "new-checkout") if options.new else ROOT
    for side, engine in (("base", base_checkout), ("new", new_checkout)):
        if options.only not in (None, side):
            continue
        wall, cpu = grade(engine, submissions, work / side)
        print(f"{side}: graded in {wall:.0f} s wall, {cpu:.0f} CPU s")
    problems = compare(work / "base", work / "new") if (work / "new").is_dir() else []
    count = len(list((work / "base").glob("*/results.json")))
    for problem in problems:
        print(problem)
    print(f"{count} submissions compared (results.json, feedback.md, feedback.html): "
          f"{len(problems)} files differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
