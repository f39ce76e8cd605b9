"""What a student sees on the feedback service's page: their submissions, newest first, and for
each graded one its score and checks, each shown as course.yaml's `feedback` section says.

Before the assignment's deadline (`due` in course.yaml; without one, always), a check is
`visible` (points and message), `score_only` (points; its message waits for the deadline) or
`after_deadline` (not listed, and its points are out of the score shown, which says so). After
the deadline every check is shown in full. The page is made from the results.json the service
wrote, which holds no code of the hidden checks.
"""
from __future__ import annotations

import datetime
import html
import math
from dataclasses import dataclass

from tfcourse.course import Course, CourseError
from tfcourse.batch.results import STYLE, part_html, say

from tfcourse.i18n import phrase

from .estimate import Wait
from .keys import KEY_FILE
from .ledger import FAILED, GRADED, GRADING, LIMITED, QUEUED, REFUSED, SAME, SUPERSEDED, Record

REFRESH_SECONDS = 5         # the page reloads itself while a submission is waiting


@dataclass(frozen=True)
class Shown:
    """A graded submission as its student may see it now."""
    score: float
    max_score: float
    rows: tuple[dict, ...]          # title, score, max_score, passed, message ("" if held back)
    held_points: float              # points of checks not listed before the deadline
    held_checks: int
    notes: str                      # about the notebook ("" while held back, see `shown`)
    complete: bool                  # everything is shown (after the deadline)


def before_deadline(course: Course, assignment: str, now: float) -> bool:
    try:
        due = course.assignment(assignment).due
    except CourseError:
        return True
    return due is None or now < due.timestamp()


def shown(course: Course, assignment: str, results: dict, now: float, lang: str) -> Shown:
    """`results` (results.json) as the student may see it at `now`. Before the deadline, when
    any check holds something back, so do the notes about the notebook: they are written while
    every check runs (how much output was dropped, say) and could carry what a held-back check's
    inputs were."""
    early = before_deadline(course, assignment, now)
    rows, score, max_score, held_points, held = [], 0.0, 0.0, 0.0, 0
    later = say("shown after the deadline", None, lang, course)
    for test in results.get("tests", []):
        visibility = course.feedback.visibility(str(test.get("number", ""))) if early \
            else "visible"
        points, most = float(test.get("score") or 0), float(test.get("max_score") or 0)
        if visibility == "after_deadline":
            held_points += most
            held += 1
            continue
        score, max_score = score + points, max_score + most
        rows.append({"title": str(test.get("name", "")), "score": points, "max_score": most,
                     "passed": test.get("status") == "passed",
                     "message": str(test.get("output", "")) if visibility == "visible"
                     else later})
    holding = early and any(course.feedback.visibility(str(test.get("number", ""))) != "visible"
                            for test in results.get("tests", []))
    notes = say("notes about your notebook are shown after the deadline", None, lang, course) \
        if holding and results.get("output") else str(results.get("output", ""))
    return Shown(round(score, 4), max_score, tuple(rows), held_points, held, notes, not early)


def when(seconds: float) -> str:
    """A moment as the page writes it: in UTC, to the minute."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: float) -> str:
    """A wait as the page writes it: seconds under a minute and a half, else minutes."""
    return f"{max(5, round(seconds / 5) * 5):.0f} s" if seconds < 90 else \
        f"{round(seconds / 60):.0f} min"


def status_line(record: Record, lang: str, course: Course, wait: Wait | None) -> str:
    if record.status == QUEUED and wait is not None and math.isinf(wait.seconds):
        return say("queued, {ahead} ahead of you", {"ahead": wait.ahead}, lang, course)
    if record.status == QUEUED and wait is not None:
        return say("queued, {ahead} ahead of you, results in about {wait}",
                   {"ahead": wait.ahead, "wait": duration(wait.seconds)}, lang, course)
    if record.status == QUEUED:
        return say("waiting to be graded", None, lang, course)
    if record.status == GRADING and wait is not None and not math.isinf(wait.seconds):
        return say("being graded now, results in about {wait}",
                   {"wait": duration(wait.seconds)}, lang, course)
    if record.status == GRADING:
        return say("being graded now", None, lang, course)
    if record.status == LIMITED and record.next_allowed:
        return say(record.why, {**record.params, "when": when(record.next_allowed)}, lang,
                   course)
    if record.status in (LIMITED, REFUSED, FAILED, SUPERSEDED, SAME):
        return say(record.why, record.params, lang, course)
    return ""


def _tables(view: Shown, lang: str, course: Course) -> str:
    """The checks shown, a table for each part of the notebook (its stubs), as feedback.html."""
    parts: dict[str, list[tuple]] = {}
    for row in view.rows:
        stubs, _, name = row["title"].rpartition(": ")
        parts.setdefault(stubs, []).append((row["passed"], name, row["score"], row["max_score"],
                                            row["message"]))
    return "\n".join(part_html(stubs, rows, lambda text: say(text, None, lang), "h3")
                     for stubs, rows in parts.items())


def submission_block(record: Record, results: dict | None, course: Course, now: float,
                     lang: str, wait: Wait | None = None) -> str:
    esc = html.escape
    try:
        title = course.assignment(record.assignment).title(lang)
    except CourseError:
        title = record.assignment
    head = (f'<h2>{esc(title)} <span class="points">({esc(record.assignment)}) · '
            f'{esc(say("submitted", None, lang, course))} {esc(when(record.received))}</span></h2>')
    line = status_line(record, lang, course, wait)
    parts = [head]
    if line:
        parts.append(f'<p class="status {esc(record.status)}">{esc(line)}</p>')
    if record.status == GRADED and results is not None:
        view = shown(course, record.assignment, results, now, lang)
        parts.append(f'<p class="score">{esc(say("Score", None, lang))}: '
                     f'<b>{view.score:g} / {view.max_score:g}</b></p>')
        if view.held_checks:
            parts.append("<p>" + esc(say(
                "checks shown after the deadline: {checks}, worth {points:g} points",
                {"checks": view.held_checks, "points": view.held_points}, lang, course))
                + "</p>")
        if view.notes:
            items = "".join(f"<li>{esc(line)}</li>" for line in view.notes.splitlines())
            parts.append(f'<div class="notes"><ul>{items}</ul></div>')
        parts.append(_tables(view, lang, course))
    return '<section class="submission">\n' + "\n".join(parts) + "\n</section>"


KEY_TEXT = phrase("Your submission key is {key}: put it in a file named {file} in each assignment "
                  "folder before you submit. A submission without it is not graded: anyone can "
                  "give a folder your name, but only you see your key. Keep it to yourself.")


def page(course: Course, student: str, records: list[Record], results: dict, now: float,
         lang: str, waits: dict[str, Wait] | None = None,
         not_recorded: list[tuple[str, dict]] = (), key: str | None = None) -> str:
    """The whole page for `student`: `records` are theirs, newest first; `results` by key;
    `waits` of those queued or being graded; `not_recorded`: why some folders have no record
    (template, params); `key`: their submission key, where the service needs one (--trust-names,
    keys.py). It reloads itself while one is waiting."""
    esc = html.escape
    waits = waits or {}
    title = say("Feedback on your submissions", None, lang, course)
    waiting = any(r.status in (QUEUED, GRADING) for r in records)
    refresh = (f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if waiting else "")
    intro = say("Each submission is graded by the hidden checks within minutes, up to "
                "{hour} times an hour and {day} times a day for each assignment. Your "
                "instructor's grading after the deadline is your grade.",
                {"hour": course.feedback.per_hour, "day": course.feedback.per_day}, lang, course)
    blocks = [submission_block(r, results.get(r.key), course, now, lang, waits.get(r.key))
              for r in records]
    said = sorted({say(why, params, lang, course) for why, params in not_recorded})
    blocks[:0] = [f'<p class="status refused">{esc(line)}</p>' for line in said]
    if not records:
        nothing = say('No submission yet: submit in the Assignments tab.', None, lang, course)
        blocks += [f"<p>{esc(nothing)}</p>"]
    if key is not None:
        text = say(KEY_TEXT, {"key": key, "file": KEY_FILE}, lang, course)
        blocks[:0] = [f'<p class="key">{esc(text)}</p>']
    body = "\n".join(blocks)
    return f"""<!DOCTYPE html>
<html lang="{esc(lang)}"><head><meta charset="utf-8">{refresh}
<title>{esc(title)}</title>
<style>{STYLE}
section.submission {{ border-top: 2px solid #ddd; margin-top: 1.5rem; }}
h3 {{ font-size: 1rem; margin: 1.2rem 0 .3rem; }} h3 .points {{ font-weight: normal; color: #555; }}
p.status {{ font-weight: 600; }} p.status.limited, p.status.refused, p.status.failed {{ color: #7a1a1a; }}
</style></head><body>
<h1>{esc(title)}</h1>
<p>{esc(student)} · {esc(course.title(lang))}</p>
<p class="about">{esc(intro)}</p>
{body}
</body></html>
"""  # noqa: E501  (CSS sent as it is written)


def summary(record: Record, results: dict | None, course: Course, now: float, lang: str,
            wait: Wait | None = None) -> dict:
    """One submission as the page's JSON gives it (for scripts and tests): the same view."""
    data = {"key": record.key, "assignment": record.assignment, "received": record.received,
            "status": record.status, "message": status_line(record, lang, course, wait)}
    if wait is not None:
        data.update(ahead=wait.ahead,
                    wait=None if math.isinf(wait.seconds) else round(wait.seconds, 1))
    if record.status == GRADED and results is not None:
        view = shown(course, record.assignment, results, now, lang)
        data.update(score=view.score, max_score=view.max_score, checks=list(view.rows),
                    held_checks=view.held_checks, held_points=view.held_points)
    if record.status == LIMITED:
        data["next_allowed"] = record.next_allowed
    return data


def instructor(course: Course, overview: dict, lang: str) -> str:
    """The instructor's view (service.overview): what keeps the service from its work, the rate,
    the queue in the order it will be graded, and the failures. It reloads itself."""
    esc = html.escape
    now = overview["now"]
    alerts = []
    if overview["problem"]:
        alerts.append(f"The state folder cannot be written since "
                      f"{when(overview['problem_since'])}: {overview['problem']}. Grading "
                      f"waits, and resumes by itself once it can.")
    if overview["distrust"]:
        alerts.append(f"The exchange is not looked into: {overview['distrust']}")
    if overview.get("listen"):
        alerts.append(overview["listen"])
    alerts += [f"At the last start: {note}" for note in overview.get("notes", [])]
    times = ", ".join(f"{name} {seconds:g} s" for name, seconds in
                      overview["seconds_per_grading"].items())
    counts = ", ".join(f"{status} {n}" for status, n in overview["counts"].items())
    rows = "".join(
        f"<tr><td>{item['ahead'] + 1 if item['status'] == QUEUED else 'now'}</td>"
        f"<td>{esc(item['student'])}</td><td>{esc(item['assignment'])}</td>"
        f"<td>{esc(when(item['received']))}</td><td>{esc(item['status'])}</td>"
        f"<td>{esc(duration(item['wait']) if item['wait'] is not None else '-')}</td></tr>"
        for item in overview["queue"])
    failures = "".join(
        f"<li>{esc(item['student'])} · {esc(item['key'])}: "
        f"{esc(say(item['why'], item['params'], lang, course))}</li>"
        for item in overview["failures"] + overview["not_recorded"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_SECONDS}">
<title>Feedback service: the queue</title><style>{STYLE}
p.alert {{ color: #7a1a1a; font-weight: 600; }}</style></head><body>
<h1>Feedback service · {esc(course.title(lang))}</h1>
{"".join(f'<p class="alert">{esc(alert)}</p>' for alert in alerts)}
<p>{esc(when(now))} · {overview['jobs']} job slot(s) · graded in the last 10 minutes:
{overview['graded_last_10_minutes']}, in the last hour: {overview['graded_last_hour']} ·
a grading takes (median of the last ones): {esc(times)}</p>
<p>Submissions: {esc(counts) or "none yet"}</p>
<h2>Queue ({len(overview['queue'])})</h2>
<table><tr><th>turn</th><th>student</th><th>assignment</th><th>received</th><th>status</th>
<th>results in about</th></tr>{rows}</table>
<h2>Failures and submissions not recorded</h2>
<ul>{failures or "<li>none</li>"}</ul>
<p>A student's page: ?student=NAME · the same as JSON: api/queue · the class so far (scores,
checks, messages, submissions per hour): <a href="report/">the class report</a></p>
</body></html>
"""
