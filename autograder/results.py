"""What a grade looks like on the outside: Gradescope's results.json, and feedback for the student.

The report from `grade.py` holds English templates and their values; here they are rendered in the
course's language. Neither file contains any of the hidden checks' code.
"""
from __future__ import annotations

import contextlib
import html
import json
import math
import os
import tempfile
from pathlib import Path

from tfcourse.course import Course, CourseError
from tfcourse.i18n import LOCALE, phrase, render

from .report import SubmissionReport

AUTOGRADER_LOCALE = Path(__file__).with_name("locale")
FOLDERS = (AUTOGRADER_LOCALE, LOCALE)


def say(template: str, params: dict | None, lang: str) -> str:
    return render(template, params, lang, FOLDERS)


def _stubs(course: Course, assignment_id: str, group_id: str) -> str:
    """What a check group tests, in the student's words: the names of the stubs it covers."""
    try:
        return ", ".join(course.assignment(assignment_id).group(group_id).stubs)
    except (KeyError, CourseError):
        return group_id


def _title(course: Course, assignment_id: str, test_id: str, lang: str) -> str:
    group_id, _, name = test_id.partition(".")
    return f"{_stubs(course, assignment_id, group_id)}: {say(name, None, lang)}"


def _notes(report: SubmissionReport, lang: str) -> list[str]:
    lines = []
    for note in report.notes:
        lines.append(say(note.template, note.params, lang))
    for notebook in report.notebooks:
        for note in notebook.notes:
            lines.append(f"{notebook.name}: " + say(note.template, note.params, lang))
    return lines


def max_points(course: Course, report: SubmissionReport) -> float:
    if report.assignment:
        return course.assignment(report.assignment).points
    return 0.0


def gradescope_json(course: Course, report: SubmissionReport, lang: str) -> dict:
    """Results in Gradescope's format (also what `tfcourse grade` writes for every submission)."""
    tests = []
    assignment = report.assignment
    graded = {test.id: test for test in report.tests}
    wanted = course.assignment(assignment).test_ids() if assignment else []
    for test_id in wanted:
        test = graded.get(test_id)
        points = course.assignment(assignment).points_of(test_id)
        if test is None:
            template = "not graded: {reason}"
            params = {"reason": phrase("the grader failed") if report.error
                      else phrase("no notebook held it")}
            score, passed = 0.0, False
        else:
            template, params, score, passed = test.template, test.params, test.points, test.passed
        output = (say("passed", None, lang) if passed else say(template, params, lang))
        tests.append({"name": _title(course, assignment, test_id, lang), "number": test_id,
                      "score": score, "max_score": points,
                      "status": "passed" if passed else "failed", "output": output,
                      "visibility": "visible"})
    score = round(sum(t["score"] for t in tests), 4)
    notes = _notes(report, lang)
    if report.error:
        notes.insert(0, say("the grader failed on this submission, so nothing was scored; your "
                            "instructor has the details", None, lang))
    data = {
        "score": score,
        "max_score": max_points(course, report),
        "output": "\n".join(notes),
        "tests": tests,
        "visibility": "visible",
        "execution_time": round(report.seconds, 1),
        "extra_data": {
            "assignment": assignment,
            "submission": report.submission,
            "notebooks": [{"name": nb.name, "seconds": nb.seconds, "sandbox": nb.sandbox,
                           "peak_memory_mb": nb.peak_memory_mb,
                           **{k: v for k, v in nb.extra.items() if k != "output_tail"}}
                          for nb in report.notebooks],
            "grader_error": report.error,
            "internal_errors": [t.id for t in report.tests if t.internal],
        },
    }
    return data


def _parts(course: Course, results: dict, lang: str) -> list[tuple[str, float, float, list]]:
    """The checks under the part of the notebook they test: (stubs, points, max points, rows),
    each row (passed, check name, points, max points, message), in the course's order."""
    groups: dict[str, list] = {}
    for test in results["tests"]:
        groups.setdefault(test["number"].partition(".")[0], []).append(test)
    parts = []
    for group_id, tests in groups.items():
        rows = [(t["status"] == "passed", say(t["number"].partition(".")[2], None, lang),
                 t["score"], t["max_score"], t["output"]) for t in tests]
        parts.append((_stubs(course, results["extra_data"]["assignment"], group_id),
                      sum(t["score"] for t in tests), sum(t["max_score"] for t in tests), rows))
    return parts


def _summary(results: dict, lang: str) -> str:
    passed = sum(t["status"] == "passed" for t in results["tests"])
    return say("{passed} of {total} checks passed", {"passed": passed,
                                                     "total": len(results["tests"])}, lang)


ABOUT_CHECKS = ("The hidden checks ran your code on inputs you have not seen. Each message says what "
                "they found; the checks themselves stay with your instructor.")


def feedback_markdown(course: Course, results: dict, lang: str) -> str:
    """The student's feedback as Markdown: score, notes, and a table of checks per part."""
    def cell(text: str) -> str:         # a table cell: one line, no column breaks, no raw HTML
        return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")

    lines = [f"# {say('Feedback', None, lang)}: {results['extra_data']['submission']}", ""]
    assignment = results["extra_data"]["assignment"]
    if assignment:
        lines += [f"**{course.assignment(assignment).title(lang)}** ({assignment})", ""]
    lines.append(f"**{say('Score', None, lang)}: {results['score']:g} / {results['max_score']:g}**"
                 + (f" · {_summary(results, lang)}" if results["tests"] else ""))
    lines.append("")
    if results["output"]:
        lines.append(f"## {say('About your notebook', None, lang)}")
        lines += [f"- {html.escape(line, quote=False)}" for line in results["output"].splitlines()]
        lines.append("")
    for stubs, score, most, rows in _parts(course, results, lang):
        lines += [f"## {stubs}: {score:g} / {most:g}", "",
                  f"| | {say('Check', None, lang)} | {say('Points', None, lang)} | "
                  f"{say('Message', None, lang)} |", "|---|---|---|---|"]
        lines += [f"| {'✓' if passed else '✗'} | {cell(name)} | {points:g} / {top:g} | "
                  f"{cell(message)} |" for passed, name, points, top, message in rows]
        lines.append("")
    if results["tests"]:
        lines.append(say(ABOUT_CHECKS, None, lang))
    return "\n".join(lines).rstrip("\n") + "\n"


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.4; }
h2 { font-size: 1.15rem; margin-top: 1.8rem; }
h2 code { font-size: 1rem; }
h2 .points { font-weight: normal; color: #555; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
td, th { border-bottom: 1px solid #ddd; padding: .4rem .5rem; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; }
th.mark { width: 1.5rem; } th.name { width: 9rem; } th.points { width: 5rem; }
td.mark { font-weight: bold; } td.points { white-space: nowrap; } td { overflow-wrap: anywhere; }
tr.passed td.mark { color: #1a7f37; } tr.failed td.mark { color: #c62828; }
tr.failed td.message { color: #7a1a1a; }
.score { font-size: 1.4rem; margin-bottom: .2rem; }
progress { width: 100%; height: .8rem; }
.notes { background: #fff8e1; border-left: 4px solid #f0b400; padding: .1rem 1rem; }
.notes h2 { margin-top: .8rem; }
.about { color: #555; margin-top: 2rem; }
"""


def feedback_html(course: Course, results: dict, lang: str) -> str:
    """The same feedback as a page of its own (plain HTML and CSS, nothing to load)."""
    esc = html.escape
    assignment = results["extra_data"]["assignment"]
    title = f"{esc(say('Feedback', None, lang))}: {esc(results['extra_data']['submission'])}"
    heading = (f"<p>{esc(course.assignment(assignment).title(lang))} ({esc(assignment)})</p>"
               if assignment else "")
    score = f"{results['score']:g} / {results['max_score']:g}"
    summary = f" · {esc(_summary(results, lang))}" if results["tests"] else ""
    notes = "".join(f"<li>{esc(line)}</li>" for line in results["output"].splitlines())
    blocks = []
    if notes:
        blocks.append(f'<div class="notes"><h2>{esc(say("About your notebook", None, lang))}'
                      f"</h2><ul>{notes}</ul></div>")
    header = (f'<tr><th class="mark"></th><th class="name">{esc(say("Check", None, lang))}</th>'
              f'<th class="points">{esc(say("Points", None, lang))}</th>'
              f'<th>{esc(say("Message", None, lang))}</th></tr>')
    for stubs, got, most, rows in _parts(course, results, lang):
        body = "\n".join(
            f'<tr class="{"passed" if passed else "failed"}"><td class="mark">'
            f'{"✓" if passed else "✗"}</td><td>{esc(name)}</td>'
            f'<td class="points">{points:g} / {top:g}</td><td class="message">{esc(message)}</td>'
            f"</tr>" for passed, name, points, top, message in rows)
        blocks.append(f'<h2><code>{esc(stubs)}</code> <span class="points">{got:g} / {most:g}'
                      f"</span></h2>\n<table>\n{header}\n{body}\n</table>")
    if results["tests"]:
        blocks.append(f'<p class="about">{esc(say(ABOUT_CHECKS, None, lang))}</p>')
    body = "\n".join(blocks)
    return f"""<!DOCTYPE html>
<html lang="{esc(lang)}"><head><meta charset="utf-8">
<title>{title}</title>
<style>{STYLE}</style></head><body>
<h1>{title}</h1>
{heading}
<p class="score">{esc(say('Score', None, lang))}: <b>{score}</b>{summary}</p>
<progress value="{results['score']:g}" max="{results['max_score'] or 1:g}">{score}</progress>
{body}
</body></html>
"""


def private_folder(path: Path) -> None:
    """Make `path` and any missing folder above it, each readable by its owner only (0700): later
    sandboxes and other users must not read results. Folders already there are left as they are."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)                     # whatever the umask


def finite(value):
    """`value` with every float that is not finite (NaN, infinity: a diverging loss, say) made
    None, in dicts and lists: JSON has no such numbers, and Gradescope's parser refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def strict_json(data) -> str:
    """Valid JSON whatever numbers the report holds (see `finite`)."""
    return json.dumps(finite(data), indent=1, ensure_ascii=False, allow_nan=False)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` (UTF-8; what cannot be encoded is replaced) to `path` all at once, readable by
    its owner only (0600), in a folder made 0700 if it is new."""
    private_folder(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o600)
            stream.write(text.encode("utf-8", errors="replace"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_results(course: Course, report: SubmissionReport, folder: Path, lang: str,
                  fingerprint: str = "") -> dict:
    """A submission's results.json, feedback.md and feedback.html in `folder` (0600 files in a 0700
    folder); returns the results."""
    results = gradescope_json(course, report, lang)
    private_folder(folder)
    os.chmod(folder, 0o700)
    if fingerprint:
        results["extra_data"]["fingerprint"] = fingerprint
    write_atomically(folder / "feedback.md", feedback_markdown(course, results, lang))
    write_atomically(folder / "feedback.html", feedback_html(course, results, lang))
    write_atomically(folder / "results.json", strict_json(results))
    return results
