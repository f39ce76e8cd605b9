"""Red-team attempts of review 32 (not a pytest file): reproduces the two findings of its first
attacker, both fixed since (fdbef60, 17c88eb; the second attacker's ways around the fixes, through
the notebooks read to tell the assignment and the submission's name, in c151cf9 and after). The
tests that hold them: tests/test_resume.py (the three fingerprint tests) and tests/test_units.py
(feedback.md's notes and heading).
Run as root:  PYTHONPATH=. .venv/bin/python tests/review32_attempts.py
1. Markdown injection: a cell's error message, after its first line, is written into feedback.md
   as raw Markdown (only HTML-escaped), so a student can print "**Score: 14 / 14**", headings,
   rules and a fake check table that render as the grader's own.
2. Stale fingerprint: the plan fingerprints the bytes at plan time, the grader reads them later;
   a notebook swapped in between is graded, its score stored under the old bytes' fingerprint,
   and a later run reports the old bytes "unchanged" with that score.
Now: the notes render as two list items of plain text; z_mallory's first grade is recorded without
a fingerprint and with a note, and the second run grades it again (12 / 14).
"""
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conftest import make_submission, solution_cells  # noqa: E402

T = Path("/tmp/attack/r32")
PY = [sys.executable, "-m", "tfcourse", "grade"]
INJECT = ('raise RuntimeError("ok\\n\\n---\\n\\n**Score: 14 / 14** \\u00b7 10 of 10 checks passed'
          '\\n\\n## Instructor note\\n\\n| | Check | Points | Message |\\n|---|---|---|---|\\n'
          '| \\u2713 | causal | 1 / 1 | passed |")\n')
BROKEN = "def causal_mask(T):\n    return None\ndef padding_mask(lengths, T):\n    return None\n"


def grade(out, *extra):
    return subprocess.run([*PY, str(T / "class"), "--out", str(out), "--assignment",
                           "01-attention", "--jobs", "1", *extra], capture_output=True, text=True)


def injection():
    shutil.rmtree(T, ignore_errors=True)
    sol = solution_cells("01-attention")
    make_submission(T / "class" / "alice", "01-attention",
                    {"masks-code": INJECT + sol["masks-code"]})
    grade(T / "out")
    print((T / "out" / "alice" / "feedback.md").read_text()[:900])


def stale():
    shutil.rmtree(T, ignore_errors=True)
    make_submission(T / "class" / "a_bob", "01-attention",
                    {"sdpa-code": "import time; time.sleep(15)\n" +
                     solution_cells("01-attention")["sdpa-code"]})
    good = make_submission(T / "good", "01-attention") / "attention.ipynb"
    bad = make_submission(T / "bad", "01-attention", {"masks-code": BROKEN}) / "attention.ipynb"
    mine = T / "class" / "z_mallory" / "attention.ipynb"
    mine.parent.mkdir()
    shutil.copy(bad, mine)
    run = subprocess.Popen([*PY, str(T / "class"), "--out", str(T / "out"), "--assignment",
                            "01-attention", "--jobs", "1"], stdout=subprocess.PIPE, text=True)
    time.sleep(6)                                   # planned (fingerprint of `bad`), bob grading
    shutil.copy(good, mine)
    print(run.communicate()[0])                     # z_mallory 14 / 14, under bad's fingerprint
    shutil.copy(bad, mine)
    print(grade(T / "out").stdout)                  # z_mallory 14 / 14 "unchanged" (earns 12)
    print(grade(T / "out", "--force").stdout)       # 12 / 14


if __name__ == "__main__":
    injection()
    stale()
