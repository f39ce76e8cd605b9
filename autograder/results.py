"""What a grade looks like on the outside: Gradescope's results.json, and feedback for the student.

The report from `grade.py` holds English templates and their values; here they are rendered in the
course's language. Neither file contains any of the hidden checks' code.
"""
from __future__ import annotations

import html
import json
import os
from pathlib import Path

from tfcourse.course import Course
from tfcourse.i18n import LOCALE, render

from .report import SubmissionReport

AUTOGRADER_LOCALE = Path(__file__).with_name("locale")
FOLDERS = (AUTOGRADER_LOCALE, LOCALE)


def say(template: str, params: dict | None, lang: str) -> str:
    return render(template, params, lang, FOLDERS)


def _title(course: Course, assignment_id: str, test_id: str, lang: str) -> str:
    group_id, _, name = test_id.partition(".")
    try:
        group = course.assignment(assignment_id).group(group_id)
        stubs = ", ".join(group.stubs)
    except (KeyError, Exception):
        stubs = group_id
    return f"{stubs}: {say(name, None, lang)}"


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
            params = {"reason": report.error and "the grader failed" or "no notebook held it"}
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


def feedback_markdown(course: Course, results: dict, lang: str) -> str:
    title = say("Feedback", None, lang)
    lines = [f"# {title}: {results['extra_data']['submission']}", ""]
    assignment = results["extra_data"]["assignment"]
    if assignment:
        lines.append(f"**{course.assignment(assignment).title(lang)}** ({assignment})")
        lines.append("")
    lines.append(f"**{say('Score', None, lang)}: {results['score']:g} / "
                 f"{results['max_score']:g}**")
    lines.append("")
    if results["output"]:
        lines.append(f"## {say('About your notebook', None, lang)}")
        lines += [f"- {line}" for line in results["output"].splitlines()]
        lines.append("")
    if results["tests"]:
        lines.append(f"## {say('Checks', None, lang)}")
        lines.append("")
        lines.append(f"| | {say('Check', None, lang)} | {say('Points', None, lang)} | "
                     f"{say('Message', None, lang)} |")
        lines.append("|---|---|---|---|")
        for test in results["tests"]:
            mark = "✓" if test["status"] == "passed" else "✗"
            message = test["output"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {mark} | {test['name']} | {test['score']:g} / {test['max_score']:g} "
                         f"| {message} |")
    return "\n".join(lines) + "\n"


def feedback_html(course: Course, results: dict, lang: str) -> str:
    esc = html.escape
    assignment = results["extra_data"]["assignment"]
    heading = esc(course.assignment(assignment).title(lang)) if assignment else ""
    rows = "\n".join(
        f"<tr class=\"{t['status']}\"><td>{'✓' if t['status'] == 'passed' else '✗'}</td>"
        f"<td>{esc(t['name'])}</td><td>{t['score']:g} / {t['max_score']:g}</td>"
        f"<td>{esc(t['output'])}</td></tr>" for t in results["tests"])
    notes = "".join(f"<li>{esc(line)}</li>" for line in results["output"].splitlines())
    notes_block = (f"<h2>{esc(say('About your notebook', None, lang))}</h2><ul>{notes}</ul>"
                   if notes else "")
    return f"""<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8">
<title>{esc(say('Feedback', None, lang))}: {esc(results['extra_data']['submission'])}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .4rem; text-align: left; vertical-align: top; }}
tr.passed td:first-child {{ color: #2a7; }} tr.failed td:first-child {{ color: #c33; }}
.score {{ font-size: 1.4rem; }}
</style></head><body>
<h1>{esc(say('Feedback', None, lang))}: {esc(results['extra_data']['submission'])}</h1>
<p>{heading}</p>
<p class="score">{esc(say('Score', None, lang))}: <b>{results['score']:g} / {results['max_score']:g}</b></p>
{notes_block}
<h2>{esc(say('Checks', None, lang))}</h2>
<table><tr><th></th><th>{esc(say('Check', None, lang))}</th><th>{esc(say('Points', None, lang))}</th>
<th>{esc(say('Message', None, lang))}</th></tr>
{rows}
</table></body></html>
"""


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def write_results(course: Course, report: SubmissionReport, folder: Path, lang: str,
                  fingerprint: str = "") -> dict:
    results = gradescope_json(course, report, lang)
    if fingerprint:
        results["extra_data"]["fingerprint"] = fingerprint
    write_atomically(folder / "feedback.md", feedback_markdown(course, results, lang))
    write_atomically(folder / "feedback.html", feedback_html(course, results, lang))
    write_atomically(folder / "results.json", json.dumps(results, indent=1, ensure_ascii=False))
    return results
