"""`tfcourse report`: the class report counts what grading wrote, exactly.

The fast tests read hand-made results; the slow one grades a few catalogue bugs and alternatives
once, makes a class of 200 from them with known frequencies, and checks that every pass rate and
every count of messages on the report is the one the frequencies give.
"""
import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tfcourse.cli import main
from tfcourse.i18n import render
from tfcourse.insights.classreport import (page, read_class, summarize, unstarted_among,
                                            write_csv, write_report)


def results(folder: Path, assignment: str, checks: dict, seconds=1.0, memory=20.0) -> Path:
    """A results.json as grading writes it: check id -> None (passed) or (kind, message)."""
    tests = []
    for check, failure in checks.items():
        test = {"number": check, "name": check, "score": 0.0 if failure else 1.0,
                "max_score": 1.0, "status": "failed" if failure else "passed",
                "output": failure[1] if failure else "passed", "visibility": "visible"}
        if failure:
            test["extra_data"] = {"kind": failure[0]}
        tests.append(test)
    folder.mkdir(parents=True)
    data = {"score": sum(t["score"] for t in tests), "max_score": float(len(tests)),
            "tests": tests, "execution_time": seconds,
            "extra_data": {"assignment": assignment,
                           "notebooks": [{"name": "x.ipynb", "peak_memory_mb": memory}]}}
    (folder / "results.json").write_text(json.dumps(data))
    return folder


NO_SCALE = ("not divided by sqrt(d_k)", "off by 0.3 in alice's run: not divided by sqrt(d_k)")
SLOW = ("took longer than {seconds} s (an endless loop, or very slow code?)",
        "took longer than 30 s (an endless loop, or very slow code?)")


def small_class(root: Path) -> Path:
    graded = root / "graded"
    results(graded / "alice", "01", {"a": NO_SCALE, "b": None}, seconds=2.0, memory=30.0)
    results(graded / "bob", "01", {"a": NO_SCALE, "b": SLOW})
    results(graded / "carol", "01", {"a": None, "b": None})
    results(graded / "dave", "02", {"c": None})
    (graded / "eve").mkdir()
    (graded / "eve" / "results.json").write_text("{not json")
    return graded


def test_summary_counts_kinds_quartiles_and_limits(tmp_path):
    graded, problems = read_class(small_class(tmp_path))
    assert [line.split(":")[0] for line in problems] == ["eve"]
    summary = summarize(graded, "01")
    assert summary.submissions == 3 and sorted(summary.scores) == [0.0, 1.0, 2.0]
    assert summary.quartiles == (0.5, 1.0, 1.5)
    assert [check.id for check in summary.checks] == ["a", "b"]       # the most failed first
    a, b = summary.checks
    assert (a.passed, a.graded, b.passed) == (1, 3, 2)
    assert [(kind.kind, kind.count) for kind in a.kinds] == [(NO_SCALE[0], 2)]
    assert "alice" not in a.kinds[0].example and "…" in a.kinds[0].example
    assert summary.together == {("a", "a"): 2, ("a", "b"): 1, ("b", "a"): 1, ("b", "b"): 1}
    assert summary.limits == (("bob", ("b",)),)


def test_report_pages_figures_and_csv(tmp_path):
    graded = small_class(tmp_path)
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "report")]) == 0
    for assignment in ("01", "02"):
        folder = tmp_path / "report" / assignment
        assert (folder / "index.html").is_file() and (folder / "scores.png").stat().st_size
    page = (tmp_path / "report" / "01" / "index.html").read_text()
    assert "<script" not in page and "alice" not in page.split("Submission")[0]
    assert NO_SCALE[0] in page and "bob" in page                # bob hit a limit: named
    rows = list(csv.DictReader((tmp_path / "report" / "01" / "checks.csv").open()))
    assert [(row["check"], row["passed"], row["graded"]) for row in rows] == \
        [("a", "1", "3"), ("b", "2", "3")]
    assert "eve" in (tmp_path / "report" / "index.html").read_text()


def test_the_index_is_styled_and_its_path_is_printed(tmp_path, capsys):
    """report/index.html was an unstyled list of folder names, and the command did not say it
    wrote it: it is styled as the assignments' pages and lists each with its class in brief."""
    graded = small_class(tmp_path)
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [f"wrote {tmp_path / 'report' / name}" for name in
                           ("index.html", "01/index.html", "02/index.html")], printed
    index = (tmp_path / "report" / "index.html").read_text()
    page = (tmp_path / "report" / "01" / "index.html").read_text()
    style = page.split("<style>")[1].split("</style>")[0]
    assert style.strip() and style in index                     # the pages' own style
    rows = index.split("<tr>")[2:]
    assert '<a href="01/index.html">01</a>' in rows[0] and ">3<" in rows[0]  # 3 submissions
    assert ">1 / 2<" in rows[0] and '<a href="02/index.html">02</a>' in rows[1]
    assert "eve" in index.split("Not read")[1]


def test_report_in_spanish(tmp_path):
    graded = small_class(tmp_path)
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "report"), "--lang", "es"]) == 0
    page = (tmp_path / "report" / "01" / "index.html").read_text()
    assert "Informe de la clase" in page and "Class report" not in page


def test_nbgrader_layout_is_read_as_grading_writes_it(tmp_path, capsys):
    """`tfcourse grade submitted/` writes nbgrader's layout as graded/<student>/<assignment>/."""
    graded = tmp_path / "graded"
    results(graded / "alice" / "01", "01", {"a": NO_SCALE, "b": None})
    results(graded / "alice" / "02", "02", {"c": None})
    results(graded / "bob" / "01", "01", {"a": None, "b": None})
    results(graded / "carol", "01", {"a": None, "b": SLOW})          # and the flat layout beside
    found, problems = read_class(graded)
    assert problems == []
    assert sorted(item.name for item in found) == ["alice/01", "alice/02", "bob/01", "carol"]
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "report")]) == 0
    rows = list(csv.DictReader((tmp_path / "report" / "01" / "scores.csv").open()))
    assert [row["submission"] for row in rows] == ["alice/01", "bob/01", "carol"]
    assert "carol" in (tmp_path / "report" / "01" / "index.html").read_text()    # at a limit


def test_a_check_graded_by_nobody_is_listed_apart_never_as_failing(tmp_path):
    """`tfcourse grade --skip c`: c is in the course's order but in no submission's results. It
    had a pass rate of 0 of 0, so it came first among the most failed, graded by nobody."""
    graded = tmp_path / "graded"
    for name, failure in (("alice", NO_SCALE), ("bob", None)):
        folder = results(graded / name, "01", {"a": failure, "b": None, "c": None})
        data = json.loads((folder / "results.json").read_text())
        data["extra_data"]["not_graded"] = ["c"]                    # as grading writes a skip
        (folder / "results.json").write_text(json.dumps(data))
    found, _ = read_class(graded)
    summary = summarize(found, "01", order=["c", "b", "a"], points={"a": 1, "b": 1, "c": 6})
    assert [check.id for check in summary.checks] == ["a", "b"]        # a: 1 of 2 passed
    assert [(check.id, check.points) for check in summary.not_graded] == [("c", 6)]
    html = page(summary, "01", {}, "en",
                lambda template, params=None: render(template, params, "en"))
    ranked, rest = html.split("What to explain")
    assert "<code>c</code>" not in ranked and "<code>a</code>" in ranked
    assert "Not graded in any submission (skipped with tfcourse grade --skip, or deselected), " \
        "so neither passed nor failed: c." in ranked
    assert "<code>c</code>" not in rest
    write_csv(summary, found, tmp_path)
    rows = list(csv.DictReader((tmp_path / "checks.csv").open()))
    assert [(row["check"], row["graded"], row["pass_rate"]) for row in rows] == \
        [("a", "2", "0.5000"), ("b", "2", "1.0000"), ("c", "0", "")]


UNWRITTEN = ("not written yet: the code raises NotImplementedError",
             "not written yet: the code raises NotImplementedError")
RAISED = ("your code raised {kind} (cell {cell}, line {line}): {message}",
          "your code raised ValueError (cell sdpa-code, line 3): bad shape")


def test_unstarted_submissions_are_counted_and_can_be_left_out(tmp_path):
    graded = tmp_path / "graded"
    results(graded / "alice", "01", {"a": RAISED, "b": None})
    results(graded / "bob", "01", {"a": UNWRITTEN, "b": UNWRITTEN})          # the release
    results(graded / "carol", "01", {"a": UNWRITTEN, "b": None})              # started
    found, _ = read_class(graded)
    assert [item.unstarted for item in found] == [False, True, False]
    summary = summarize(found, "01")
    assert (summary.submissions, summary.unstarted, summary.left_out) == (3, 1, 0)
    assert summary.together[("b", "b")] == 1                  # bob fails every check
    summary = summarize(found, "01", skip_unstarted=True)
    assert (summary.submissions, summary.unstarted, summary.left_out) == (2, 0, 1)
    assert summary.together.get(("b", "b")) is None and sorted(summary.scores) == [1.0, 1.0]
    for option, said in (([], "Unstarted among them (handed in as released"),
                         (["--skip-unstarted"], "Left out of every figure (--skip-unstarted)")):
        out = tmp_path / ("report" + "".join(option))
        assert main(["--course", str(tmp_path), "report", str(graded), "--out", str(out),
                     *option]) == 0
        page = (out / "01" / "index.html").read_text()
        assert said in page and ": 1" in page.split(said)[1].split("</p>")[0]
        rows = list(csv.DictReader((out / "01" / "scores.csv").open()))
        assert ("bob" in [row["submission"] for row in rows]) == (not option)


def test_grade_counts_the_unstarted_among_what_it_graded(tmp_path):
    """What `tfcourse grade` says once at its end, pointing at --skip-unstarted."""
    graded = tmp_path / "graded"
    results(graded / "alice", "01", {"a": RAISED, "b": None})
    results(graded / "bob", "01", {"a": UNWRITTEN, "b": UNWRITTEN})          # the release
    results(graded / "carol" / "01", "01", {"a": UNWRITTEN, "b": UNWRITTEN})  # nbgrader's layout
    results(graded / "dave", "01", {"a": UNWRITTEN, "b": UNWRITTEN})          # not this batch's
    (graded / "erin").mkdir()
    (graded / "erin" / "results.json").write_text("{not json")
    assert unstarted_among(graded, ["alice", "bob", "carol/01", "erin"]) == 2
    assert unstarted_among(graded, ["alice"]) == 0


def test_kinds_read_as_messages_and_the_cost_says_its_time(tmp_path):
    graded = tmp_path / "graded"
    results(graded / "alice", "01", {"a": RAISED, "b": SLOW})
    results(graded / "bob", "01", {"a": RAISED, "b": None})
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "01" / "index.html").read_text()
    assert "your code raised … (cell …, line …): …" in page and "{kind}" not in page
    assert "took longer than … s (an endless loop" in page and "{seconds}" not in page
    assert "bad shape" in page                                     # the example, filled in
    assert "by the wall clock" in page and "not CPU time" in page
    assert main(["--course", str(tmp_path), "report", str(graded), "--out",
                 str(tmp_path / "es"), "--lang", "es"]) == 0
    assert "tu código lanzó … (celda …, línea …): …" in \
        (tmp_path / "es" / "01" / "index.html").read_text()


def test_counts_of_submissions_have_whole_ticks(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from tfcourse.insights.classreport import _scores_figure, _together_figure

    graded = tmp_path / "graded"
    results(graded / "alice", "01", {"a": NO_SCALE, "b": None})
    results(graded / "bob", "01", {"a": NO_SCALE, "b": SLOW})
    summary = summarize(read_class(graded)[0], "01")
    for figure, axis in ((_scores_figure(plt, summary, str), lambda f: f.axes[0].yaxis),
                         (_together_figure(plt, summary, str), lambda f: f.axes[1].yaxis)):
        figure.canvas.draw()
        low, high = axis(figure).get_view_interval()
        ticks = [tick for tick in axis(figure).get_ticklocs() if low <= tick <= high]
        assert len(ticks) >= 2 and all(tick == int(tick) for tick in ticks), ticks
        plt.close(figure)


def test_no_results_is_a_clear_refusal(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["--course", str(tmp_path), "report", str(tmp_path / "empty"), "--out",
                 str(tmp_path / "r")]) == 2
    said = capsys.readouterr().err
    assert "no results.json" in said and "<student>/<assignment>/" in said


# -- a synthetic class of 200 from the catalogue -----------------------------------------------
@pytest.mark.slow
def test_report_of_a_class_drawn_from_the_catalogue(course, tmp_path):
    from alternatives import EINSUM, HELPERS
    from catalogue import attention
    from conftest import grade_batches
    from test_alternatives import build as build_alternative
    from test_catalogue import build as build_bug

    bugs = [bug for bug in attention.BUGS if not bug.port][:8]
    items = bugs + [EINSUM, HELPERS]

    def build(folder, item):
        return build_bug(folder, item) if item in bugs else build_alternative(folder, item)
    once = grade_batches(course, items, tmp_path / "once", build)
    frequency = {item.name: 5 + 3 * index for index, item in enumerate(items)}
    frequency[items[-1].name] += 200 - sum(frequency.values())
    assert sum(frequency.values()) == 200 and min(frequency.values()) > 0
    graded = tmp_path / "class"
    for item in items:
        for copy in range(frequency[item.name]):
            shutil.copytree(tmp_path / "once" / "graded" / item.name,
                            graded / f"{item.name}-{copy}")
    assert main(["--course", str(course.root), "report", str(graded), "--out",
                 str(tmp_path / "report")]) == 0

    passed, kinds = Counter(), Counter()
    for item in items:
        for test in once[item.name][0]["tests"]:
            if test["status"] == "passed":
                passed[test["number"]] += frequency[item.name]
            else:
                kinds[test["number"], test["extra_data"]["kind"]] += frequency[item.name]
    folder = tmp_path / "report" / "01-attention"
    rows = {row["check"]: row for row in csv.DictReader((folder / "checks.csv").open())}
    assert set(rows) == set(course.assignment("01-attention").test_ids())
    for check, row in rows.items():
        assert (int(row["graded"]), int(row["passed"])) == (200, passed[check]), check
    counted = {(row["check"], row["kind"]): int(row["count"])
               for row in csv.DictReader((folder / "messages.csv").open())}
    assert counted == dict(kinds)
    # each bug's cause, in the catalogue's words, is among the kinds of its checks, counted at
    # least as often as the bug was drawn
    for bug in bugs:
        for check, words in bug.says.items():
            if words:
                assert sum(count for (test, kind), count in counted.items() if test == check
                           and all(word.lower() in kind.lower() for word in words)) >= \
                    frequency[bug.name], (bug.name, check)


def test_report_of_a_feedback_services_state(tmp_path):
    """A service's state folder: the class as it stands (each student's last graded submission),
    submissions per hour, and how many submissions each check took to pass."""
    state = tmp_path / "state"
    (state / "records").mkdir(parents=True)
    submissions = [("alice", 1000.0, {"a": NO_SCALE, "b": None}),
                   ("alice", 5000.0, {"a": None, "b": None}),
                   ("bob", 2000.0, {"a": None, "b": SLOW}),
                   ("carol", 3000.0, None)]                     # not graded (limited, say)
    for number, (student, received, checks) in enumerate(submissions):
        key = f"{student}+01+{number}"
        (state / "records" / f"{key}.json").write_text(json.dumps(
            {"key": key, "student": student, "assignment": "01", "received": received}))
        if checks:
            results(state / "results" / key, "01", checks)
    (state / "records" / "junk.json").write_text("[]")
    assert main(["--course", str(tmp_path), "report", str(state), "--out",
                 str(tmp_path / "report")]) == 0
    folder = tmp_path / "report" / "01"
    rows = {row["check"]: row for row in csv.DictReader((folder / "checks.csv").open())}
    assert (rows["a"]["passed"], rows["a"]["graded"]) == ("2", "2")     # alice's last, and bob
    tries = {row["check"]: row for row in csv.DictReader((folder / "tries.csv").open())}
    assert (tries["a"]["first_try"], tries["a"]["later"], tries["a"]["never"]) == ("1", "2", "0")
    assert (tries["b"]["first_try"], tries["b"]["never"]) == ("1", "1")
    assert (folder / "per-hour.png").stat().st_size > 0
    assert "junk" in (tmp_path / "report" / "index.html").read_text()
