"""The feedback pages a student gets: their score, a row per check with points and message, valid
HTML, and nothing of the hidden checks' code or of the solution."""
import html
import json
from html.parser import HTMLParser

import pytest

from conftest import ROOT, lost, make_submission, replace_in, solution_cells

# End to end: every test reads a submission graded through the sandbox.
pytestmark = pytest.mark.slow

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"}
HOSTILE = "<script>alert('feedback')</script>"


class Page(HTMLParser):
    """Checks that every element is closed in order; collects the table rows' cell texts."""

    def __init__(self):
        super().__init__()
        self.open, self.rows, self.problems = [], [], []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.open.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag == "td":
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data):
        self.text += data
        if self.open and self.open[-1] == "td":
            self.rows[-1][-1] += data


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """One partly right submission, graded by grade_many as `tfcourse grade` does: no scaling in
    the attention scores, and a causal_mask whose error message is HTML."""
    from tfcourse.batch.runner import grade_many

    tmp = tmp_path_factory.mktemp("feedback")
    solution = solution_cells("01-attention")
    unscaled = replace_in(solution["sdpa-code"], " / math.sqrt(q.shape[-1])", "")
    hostile = replace_in(solution["masks-code"], '"""Bool [T, T], True above the diagonal: query i '
                         'may not look at keys after i."""',
                         f'"""Raises."""\n    raise ValueError("{HOSTILE}")')
    make_submission(tmp / "submitted" / "alice", "01-attention",
                    answers={"sdpa-code": unscaled, "masks-code": hostile})
    outcomes = grade_many(course, [tmp / "submitted"], tmp / "graded", jobs=1, lang="en",
                          progress=False)
    assert [o.status for o in outcomes] == ["graded"], outcomes
    folder = tmp / "graded" / "alice"
    return (json.loads((folder / "results.json").read_text()),
            (folder / "feedback.md").read_text(), (folder / "feedback.html").read_text())


def hidden_code():
    """Lines of the hidden checks (code, not message text) and of the solution, none of which may
    reach a student."""
    source = (ROOT / "autograder" / "test_attention.py").read_text()
    lines = [line.strip() for line in source.splitlines()]
    code = [line for line in lines if len(line) >= 25 and '"' not in line and "'" not in line]
    solution = [line.strip() for cell in solution_cells("01-attention").values()
                for line in cell.splitlines() if len(line.strip()) >= 25]
    return code + solution + ["def sdpa_values", "hidden_checks", "Fail(", "BEGIN HIDDEN TESTS",
                              "ctx."]


def test_the_submission_is_partly_right(graded):
    results, _, _ = graded
    assert 0 < results["score"] < results["max_score"]
    assert {"sdpa.values", "masks.causal"} <= lost(results), lost(results)
    assert not any(test_id.startswith("mha.") for test_id in lost(results))


def test_markdown_shows_score_and_a_row_per_check(graded):
    results, markdown, _ = graded
    assert f"Score: {results['score']:g} / {results['max_score']:g}" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ✓ |")
            or line.startswith("| ✗ |")]
    assert len(rows) == len(results["tests"])
    for row, test in zip(rows, results["tests"]):
        mark = "✓" if test["status"] == "passed" else "✗"
        name = test["number"].partition(".")[2]
        assert row.startswith(f"| {mark} | {name} | {test['score']:g} / {test['max_score']:g} | ")
        assert html.escape(test["output"], quote=False).replace("|", "\\|") in row
    failed = [t for t in results["tests"] if t["number"] == "sdpa.values"][0]
    assert "sqrt(d_k)" in failed["output"], "the message should name the missing scale"
    assert "## scaled_dot_product_attention:" in markdown and "## MultiHeadAttention:" in markdown


def test_html_is_valid_and_shows_the_same(graded):
    results, _, page_text = graded
    page = Page()
    page.feed(page_text)
    page.close()
    assert not page.problems and not page.open, (page.problems, page.open)
    assert f"{results['score']:g} / {results['max_score']:g}" in page.text
    rows = [row for row in page.rows if row]
    assert len(rows) == len(results["tests"])
    for row, test in zip(rows, results["tests"]):
        assert row == ["✓" if test["status"] == "passed" else "✗",
                       test["number"].partition(".")[2],
                       f"{test['score']:g} / {test['max_score']:g}", test["output"]]


def test_student_text_is_escaped(graded):
    results, markdown, page_text = graded
    causal = [t for t in results["tests"] if t["number"] == "masks.causal"][0]
    assert HOSTILE in causal["output"], "the error message should reach the student"
    assert HOSTILE not in page_text and HOSTILE not in markdown
    assert html.escape(HOSTILE, quote=False) in markdown


def test_no_hidden_test_code_or_solution_in_feedback(graded):
    results, markdown, page_text = graded
    for text in (markdown, page_text, json.dumps(results, ensure_ascii=False)):
        leaks = [line for line in hidden_code() if line in text]
        assert not leaks, leaks
