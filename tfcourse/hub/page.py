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
import math
from dataclasses import dataclass

from tfcourse.course import Course, CourseError
from tfcourse.batch.results import part_view, say

from tfcourse.i18n import phrase
from tfcourse.pages import macro, render as render_page

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


def _parts(view: Shown) -> list[dict]:
    """The checks shown, a table for each part of the notebook (its stubs), as feedback.html."""
    parts: dict[str, list[tuple]] = {}
    for row in view.rows:
        stubs, _, name = row["title"].rpartition(": ")
        parts.setdefault(stubs, []).append((row["passed"], name, row["score"], row["max_score"],
                                            row["message"]))
    return [part_view(stubs, rows) for stubs, rows in parts.items()]


def submission_view(record: Record, results: dict | None, course: Course, now: float,
                    lang: str, wait: Wait | None = None) -> dict:
    """One submission as templates/hub-page.html shows it."""
    try:
        title = course.assignment(record.assignment).title(lang)
    except CourseError:
        title = record.assignment
    block = {"title": title, "assignment": record.assignment, "status": record.status,
             "submitted": say("submitted", None, lang, course), "when": when(record.received),
             "line": status_line(record, lang, course, wait), "view": None}
    if record.status == GRADED and results is not None:
        view = shown(course, record.assignment, results, now, lang)
        block.update(
            view=view, score_word=say("Score", None, lang), parts=_parts(view),
            say=lambda text: say(text, None, lang),
            held=say("checks shown after the deadline: {checks}, worth {points:g} points",
                     {"checks": view.held_checks, "points": view.held_points}, lang, course)
            if view.held_checks else "")
    return block


def submission_block(record: Record, results: dict | None, course: Course, now: float,
                     lang: str, wait: Wait | None = None) -> str:
    """One submission as HTML, as the student's page shows it."""
    return macro("hub-submission.html", "submission",
                 submission_view(record, results, course, now, lang, wait))


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
    waits = waits or {}
    waiting = any(r.status in (QUEUED, GRADING) for r in records)
    intro = say("Each submission is graded by the hidden checks within minutes, up to "
                "{hour} times an hour and {day} times a day for each assignment. Your "
                "instructor's grading after the deadline is your grade.",
                {"hour": course.feedback.per_hour, "day": course.feedback.per_day}, lang, course)
    return render_page(
        "hub-page.html", lang=lang, refresh=REFRESH_SECONDS if waiting else None,
        title=say("Feedback on your submissions", None, lang, course), student=student,
        course_title=course.title(lang), intro=intro,
        key=say(KEY_TEXT, {"key": key, "file": KEY_FILE}, lang, course) if key is not None
        else None,
        refused=sorted({say(why, params, lang, course) for why, params in not_recorded}),
        submissions=[submission_view(r, results.get(r.key), course, now, lang, waits.get(r.key))
                     for r in records],
        nothing=None if records else say('No submission yet: submit in the Assignments tab.',
                                         None, lang, course))


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
    return render_page(
        "hub-instructor.html", refresh=REFRESH_SECONDS, course_title=course.title(lang),
        alerts=alerts, overview=overview, when=when, duration=duration,
        queued=QUEUED,
        times=", ".join(f"{name} {seconds:g} s" for name, seconds in
                        overview["seconds_per_grading"].items()),
        counts=", ".join(f"{status} {n}" for status, n in overview["counts"].items()),
        failures=[{"student": item["student"], "key": item["key"],
                   "why": say(item["why"], item["params"], lang, course)}
                  for item in overview["failures"] + overview["not_recorded"]])
