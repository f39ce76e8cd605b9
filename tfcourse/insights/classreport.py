"""`tfcourse report graded/ --out report/`: what a class got right and wrong, per assignment.

It reads the results.json that grading wrote for each submission (`tfcourse grade`, nbgrader's
autograde through tfcourse, the feedback service) and writes, for each assignment, a page that
opens from disk and prints (HTML and PNG figures, no script) and CSV files for a spreadsheet:

- the score distribution, its median and quartiles;
- each check's pass rate, the most failed first, with its points; a check no submission was
  graded on (`tfcourse grade --skip`) is listed apart, with no pass rate;
- each check's most frequent messages, counted by kind (`i18n.message_kind`: the message with what
  differs between submissions left out), each with one example and no submission's name: what to
  explain in the next lecture;
- which checks fail together (one root cause shows as one block);
- what grading cost: time by the clock and peak memory per submission, and the submissions that
  hit a limit.

An unstarted submission (the release handed in untouched: every check "not written yet") fails
every check; the page says how many there were, and `skip_unstarted` leaves them out.
"""
from __future__ import annotations

import csv
import json
import statistics
import string
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfcourse.course import Course
from tfcourse.batch.graded import RESULTS_MB, results_files
from tfcourse.batch.results import folders_of, write_atomically
from tfcourse.i18n import render, translate
from tfcourse.pages import render as render_page

# The kinds of message that mean a submission hit a limit of the sandbox (submission/framework.py).
# "took longer than": results graded before time limits were CPU time.
LIMIT_KINDS = ("used more than", "did not finish within", "took longer than", "waited ",
               "used more memory than allowed", "went over a limit of the sandbox",
               "your code ended the grading process")
# The kind of a check whose stub still raises NotImplementedError (submission/framework.py).
UNWRITTEN = "not written yet"


@dataclass(frozen=True)
class Check:
    id: str
    score: float
    max_score: float
    passed: bool
    kind: str               # the failure's kind ("" when passed)
    message: str            # what the student read


@dataclass(frozen=True)
class Graded:
    """One submission's results, as read from its results.json and checked."""
    name: str               # its folder's name below the results ("alice", "alice/hw1"):
                            # in scores.csv, never on the page
    assignment: str
    score: float
    max_score: float
    checks: tuple[Check, ...]
    seconds: float
    peak_memory_mb: float

    @property
    def limits(self) -> list[str]:
        """The checks of this submission that stopped at a limit of the sandbox."""
        return [check.id for check in self.checks if check.kind.startswith(LIMIT_KINDS)]

    @property
    def unstarted(self) -> bool:
        """Handed in as released: every check graded failed as "not written yet"."""
        return bool(self.checks) and all(not check.passed and check.kind.startswith(UNWRITTEN)
                                         for check in self.checks)


def _number(value, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else default


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def read_graded(path: Path, name: str | None = None) -> Graded:
    """A results.json, read and checked (ValueError says what is wrong with it); `name`: the
    submission's (by default its folder's)."""
    if path.stat().st_size > RESULTS_MB << 20:
        raise ValueError(f"larger than {RESULTS_MB} MB")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise ValueError("not the results of a grading (no list of tests)")
    extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
    skipped = extra.get("not_graded") if isinstance(extra.get("not_graded"), list) else []
    checks = []
    for test in data["tests"]:                  # a check skipped or deselected is not counted
        if not isinstance(test, dict) or not _text(test.get("number")) or \
                test["number"] in skipped:
            continue
        details = test.get("extra_data") if isinstance(test.get("extra_data"), dict) else {}
        passed = test.get("status") == "passed"
        message = _text(test.get("output"))
        checks.append(Check(test["number"], _number(test.get("score")),
                            _number(test.get("max_score")), passed,
                            "" if passed else _text(details.get("kind")) or message, message))
    notebooks = [nb for nb in extra.get("notebooks", []) if isinstance(nb, dict)] \
        if isinstance(extra.get("notebooks"), list) else []
    return Graded(name or path.parent.name, _text(extra.get("assignment")),
                  _number(data.get("score")), _number(data.get("max_score")), tuple(checks),
                  _number(data.get("execution_time")),
                  max((_number(nb.get("peak_memory_mb")) for nb in notebooks), default=0.0))


def read_class(folder: Path) -> tuple[list[Graded], list[str]]:
    """Every graded submission under `folder` (one results.json per submission folder, in
    either layout grading writes: batch/graded.py), and a line for each results.json that could
    not be read."""
    graded, problems = [], []
    for name, path in results_files(Path(folder)):
        try:
            graded.append(read_graded(path, name))
        except (OSError, ValueError) as error:
            problems.append(f"{name}: {error}")
    return graded, problems


def unstarted_among(folder: Path, names) -> int:
    """How many of the results under `folder` of the submissions `names` are unstarted
    (Graded.unstarted); one that cannot be read counts for none."""
    wanted, count = set(names), 0
    for name, path in results_files(Path(folder)):
        if name in wanted:
            try:
                count += read_graded(path, name).unstarted
            except (OSError, ValueError):
                continue                # said by `tfcourse report`, which reads them all
    return count


# -- the feedback service's state: every submission, by time -------------------------------------
@dataclass(frozen=True)
class Attempt:
    """One submission the feedback service received, and its grading when there was one."""
    student: str
    assignment: str
    received: float                 # seconds since the epoch
    graded: Graded | None


def read_service(state: Path) -> tuple[list[Attempt], list[str]]:
    """Every submission in a feedback service's state folder (records/<key>.json, results/<key>/
    results.json), oldest first, and a line for each record that could not be read."""
    attempts, problems = [], []
    for path in sorted((Path(state) / "records").glob("*.json")):
        try:
            if path.stat().st_size > RESULTS_MB << 20:
                raise ValueError(f"larger than {RESULTS_MB} MB")
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or not isinstance(record.get("received"),
                                                                 (int, float)):
                raise ValueError("not a record of the service")
            results = Path(state) / "results" / path.stem / "results.json"
            graded = read_graded(results) if results.is_file() else None
            attempts.append(Attempt(_text(record.get("student")),
                                    _text(record.get("assignment")), float(record["received"]),
                                    graded))
        except (OSError, ValueError) as error:
            problems.append(f"{path.stem}: {error}")
    return sorted(attempts, key=lambda attempt: attempt.received), problems


def latest(attempts: list[Attempt]) -> list[Graded]:
    """Each student's last graded submission of each assignment: the class as it stands."""
    last = {}
    for attempt in attempts:
        if attempt.graded is not None:
            last[attempt.student, attempt.assignment] = attempt.graded
    return [replace(graded, name=student) for (student, _), graded in last.items()]


@dataclass(frozen=True)
class Tries:
    """How many graded submissions students needed before a check passed."""
    check: str
    first: int              # students who passed it on their first graded submission
    later: tuple[int, ...]  # for each student who passed it later: the submission that did
    never: int              # students whose submissions never passed it


def tries(attempts: list[Attempt], assignment: str, order: list[str]) -> list[Tries]:
    by_student: dict[str, list[Graded]] = {}
    for attempt in attempts:
        if attempt.assignment == assignment and attempt.graded is not None:
            by_student.setdefault(attempt.student, []).append(attempt.graded)
    out = []
    for check in order:
        first, later, never = 0, [], 0
        for gradings in by_student.values():
            held = [graded for graded in gradings if any(c.id == check for c in graded.checks)]
            if not held:                    # not graded for this student (skipped, say)
                continue
            passed = [number for number, graded in enumerate(held, 1)
                      if any(c.id == check and c.passed for c in graded.checks)]
            if not passed:
                never += 1
            elif passed[0] == 1:
                first += 1
            else:
                later.append(passed[0])
        if first or later or never:
            out.append(Tries(check, first, tuple(later), never))
    return out


# -- what the class did --------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    kind: str
    count: int
    example: str            # one message of this kind, as a student read it


@dataclass(frozen=True)
class CheckSummary:
    id: str
    points: float
    graded: int
    passed: int
    kinds: tuple[Kind, ...]         # the most frequent first

    @property
    def failed(self) -> int:
        return self.graded - self.passed

    @property
    def pass_rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


@dataclass(frozen=True)
class ClassSummary:
    assignment: str
    submissions: int
    max_score: float
    scores: tuple[float, ...]
    checks: tuple[CheckSummary, ...]                # those graded, the most failed first
    together: dict = field(default_factory=dict)    # (check, check) -> submissions failing both
    seconds: tuple[float, ...] = ()
    memory_mb: tuple[float, ...] = ()
    limits: tuple[tuple[str, tuple[str, ...]], ...] = ()    # (submission, its checks at a limit)
    unstarted: int = 0              # unstarted submissions (Graded.unstarted) among them...
    left_out: int = 0               # ...or, with skip_unstarted, left out of every figure
    # checks graded in no submission (skipped with --skip, deselected): no pass rate to rank,
    # shown apart so that they never read as the most failed
    not_graded: tuple[CheckSummary, ...] = ()

    @property
    def quartiles(self) -> tuple[float, float, float]:
        """The first quartile, the median and the third quartile of the scores."""
        if len(self.scores) < 2:
            only = self.scores[0] if self.scores else 0.0
            return only, only, only
        low, median, high = statistics.quantiles(self.scores, n=4, method="inclusive")
        return low, median, high


def _anonymous(message: str, names: list[str]) -> str:
    """`message` with no submission's name in it (a student's folder name may be in a path)."""
    for name in names:
        if len(name) > 2:
            message = message.replace(name, "…")
    return message


def summarize(graded: list[Graded], assignment: str, order: list[str] | None = None,
              points: dict | None = None, skip_unstarted: bool = False) -> ClassSummary:
    """What the submissions of `assignment` did. `order` lists the assignment's checks (the
    course's order; by default those found) and `points` their points; `skip_unstarted` leaves
    the unstarted submissions out (counted in `left_out`)."""
    mine = [item for item in graded if item.assignment == assignment]
    unstarted = sum(item.unstarted for item in mine)
    if skip_unstarted:
        mine = [item for item in mine if not item.unstarted]
    names = [item.name for item in mine]
    found = list(dict.fromkeys(check.id for item in mine for check in item.checks))
    order = list(order or [])
    order += [check for check in found if check not in order]
    summaries = []
    failing: dict[str, set[str]] = {check: set() for check in order}
    for check_id in order:
        results = [(item.name, check) for item in mine for check in item.checks
                   if check.id == check_id]
        counts, examples = Counter(), {}
        for name, check in results:
            if not check.passed:
                failing[check_id].add(name)
                counts[check.kind] += 1
                examples.setdefault(check.kind, _anonymous(check.message, names))
        most = (points or {}).get(check_id)
        most = most if most is not None else max((check.max_score for _, check in results),
                                                 default=0.0)
        summaries.append(CheckSummary(
            check_id, most, len(results), sum(check.passed for _, check in results),
            tuple(Kind(kind, count, examples[kind]) for kind, count in
                  sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))))
    not_graded = tuple(summary for summary in summaries if not summary.graded)
    summaries = sorted((summary for summary in summaries if summary.graded),
                       key=lambda summary: (summary.pass_rate, order.index(summary.id)))
    failed = [check for check in order if failing[check]]
    together = {(a, b): len(failing[a] & failing[b]) for a in failed for b in failed}
    return ClassSummary(
        assignment, len(mine), max((item.max_score for item in mine), default=0.0),
        tuple(item.score for item in mine), tuple(summaries), together,
        tuple(item.seconds for item in mine), tuple(item.peak_memory_mb for item in mine),
        tuple((item.name, tuple(item.limits)) for item in mine if item.limits),
        0 if skip_unstarted else unstarted, unstarted if skip_unstarted else 0,
        not_graded=not_graded)


# -- the page, the figures, the CSV files ----------------------------------------------------------
def _figures(summary: ClassSummary, folder: Path, say, hours=(), deadline=None) -> dict[str, str]:
    """The page's figures as PNG files in `folder`: name -> file name. `hours`: when each
    submission arrived (feedback service), in hours from `deadline` (0) or from the first."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    files = {}
    drawn = [("scores", "scores.png", True, lambda: _scores_figure(plt, summary, say)),
             ("together", "together.png", bool(summary.together),
              lambda: _together_figure(plt, summary, say)),
             ("per_hour", "per-hour.png", bool(hours),
              lambda: _hours_figure(plt, hours, deadline, say)),
             ("cost", "cost.png", bool(summary.seconds), lambda: _cost_figure(plt, summary, say))]
    for name, file, wanted, draw in drawn:
        if wanted:
            figure = draw()
            figure.tight_layout()
            figure.savefig(folder / file, dpi=110)
            plt.close(figure)
            files[name] = file
    return files


def _scores_figure(plt, summary: ClassSummary, say):
    """The scores' histogram, with the quartiles."""
    figure, axes = plt.subplots(figsize=(7, 3))
    top = summary.max_score or max(summary.scores, default=1.0) or 1.0
    axes.hist(summary.scores, bins=min(20, max(5, int(top) + 1)), range=(0, top),
              color="#4a78b5", edgecolor="white")
    axes.set_xlabel(say("score"))
    axes.set_ylabel(say("submissions"))
    _whole(axes.yaxis)
    low, median, high = summary.quartiles
    for value, style in ((low, ":"), (median, "--"), (high, ":")):
        axes.axvline(value, color="#333", linestyle=style, linewidth=1)
    return figure


def _together_figure(plt, summary: ClassSummary, say):
    """How many submissions fail each pair of checks together, as a grid."""
    failed = list(dict.fromkeys(a for a, _ in summary.together))
    size = max(3.0, 0.45 * len(failed) + 1.5)
    figure, axes = plt.subplots(figsize=(size + 1, size))
    grid = [[summary.together[(a, b)] for b in failed] for a in failed]
    image = axes.imshow(grid, cmap="Reds", vmin=0)
    axes.set_xticks(range(len(failed)), failed, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(len(failed)), failed, fontsize=8)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value:
                axes.text(j, i, str(value), ha="center", va="center", fontsize=7,
                          color="white" if value > 0.6 * max(map(max, grid)) else "black")
    bar = figure.colorbar(image, ax=axes, shrink=0.7, label=say("submissions failing both"))
    _whole(bar.ax.yaxis)
    return figure


def _hours_figure(plt, hours, deadline, say):
    """Submissions per hour, from the deadline (0) or from the first."""
    figure, axes = plt.subplots(figsize=(7, 2.8))
    start, end = min(hours) // 1, max(hours) // 1 + 1
    axes.hist(hours, bins=max(1, int(end - start)), range=(start, end), color="#6a9f58",
              edgecolor="white")
    if deadline is not None:
        axes.axvline(deadline, color="#c62828", linewidth=1.5)
    axes.set_xlabel(say("hours from the deadline") if deadline is not None
                    else say("hours from the first submission"))
    axes.set_ylabel(say("submissions"))
    _whole(axes.yaxis)
    return figure


def _whole(axis) -> None:
    """Ticks at whole numbers only: a count of submissions has no halves."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _cost_figure(plt, summary: ClassSummary, say):
    """Grading time by the clock and peak memory per submission, as boxes."""
    figure, (left, right) = plt.subplots(1, 2, figsize=(8, 3))
    left.boxplot(summary.seconds, widths=0.5)
    left.set_ylabel(say("grading time, wall clock (s)"))
    left.set_xticks([])
    right.boxplot(summary.memory_mb, widths=0.5)
    right.set_ylabel(say("peak memory (MB)"))
    right.set_xticks([])
    return figure


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    import io
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


def write_csv(summary: ClassSummary, graded: list[Graded], folder: Path) -> None:
    _write_csv(folder / "checks.csv", ["check", "points", "graded", "passed", "pass_rate"],
               [[check.id, f"{check.points:g}", check.graded, check.passed,
                 f"{check.pass_rate:.4f}" if check.graded else ""]
                for check in summary.checks + summary.not_graded])
    _write_csv(folder / "messages.csv", ["check", "count", "kind", "example"],
               [[check.id, kind.count, kind.kind, kind.example]
                for check in summary.checks for kind in check.kinds])
    _write_csv(folder / "scores.csv", ["submission", "score", "max_score", "seconds",
                                       "peak_memory_mb", "limits"],
               [[item.name, f"{item.score:g}", f"{item.max_score:g}", f"{item.seconds:g}",
                 f"{item.peak_memory_mb:g}", " ".join(item.limits)]
                for item in graded if item.assignment == summary.assignment])
    failed = list(dict.fromkeys(a for a, _ in summary.together))
    _write_csv(folder / "together.csv", ["check", *failed],
               [[a, *(summary.together[(a, b)] for b in failed)] for a in failed])


def readable(kind: str, lang: str = "en", folders=None) -> str:
    """A message's kind as a reader takes it in, in `lang`: each {placeholder} (what differs
    between submissions) as "…" ("your code raised … (cell …, line …): …"). A kind that is no
    template (results from before kinds were recorded: the message itself) is shown as it is."""
    text = translate(kind, lang, folders) if folders else kind
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:
        return text
    return "".join(literal + ("…" if name is not None else "") for literal, name, _, _ in parts)


def page(summary: ClassSummary, title: str, figures: dict[str, str], lang: str, say,
         shown_kinds: int = 5, tries: list | None = None, deadline: bool = False,
         folders=None) -> str:
    """The assignment's report as one HTML page (see templates/report.html)."""
    low, median, high = summary.quartiles
    return render_page(
        "report.html", summary=summary, title=title, figures=figures, lang=lang, say=say,
        shown_kinds=shown_kinds, low=low, median=median, high=high, tries=tries or [],
        deadline=deadline, median_of=lambda values: statistics.median(values) if values else 0,
        readable=lambda kind: readable(kind, lang, folders))


def _hours(attempts: list[Attempt], assignment: str, due) -> tuple[list[float], float | None]:
    times = [attempt.received for attempt in attempts if attempt.assignment == assignment]
    if not times:
        return [], None
    zero = due.timestamp() if due is not None else min(times)
    return [(time - zero) / 3600 for time in times], (0.0 if due is not None else None)


def write_report(course: Course | None, graded: list[Graded], out: Path, lang: str = "en",
                 problems: list[str] | None = None, attempts: list[Attempt] | None = None,
                 skip_unstarted: bool = False) -> list[Path]:
    """A folder per assignment under `out` (page, figures, CSV files) and an index page; returns
    the pages written, the index first. With `attempts` (a feedback service's submissions), the
    page also shows submissions per hour and how many submissions each check took to pass;
    `skip_unstarted` leaves unstarted submissions out (see `summarize`)."""
    folders = folders_of(course)

    def say(template, params=None):
        return render(template, params, lang, folders)

    pages, entries = [], []
    for assignment in sorted({item.assignment for item in graded if item.assignment}):
        order = points = None
        title = assignment
        if course is not None and assignment in [a.id for a in course.assignments]:
            spec = course.assignment(assignment)
            order = spec.test_ids()
            points = {test: spec.points_of(test) for test in order}
            title = f"{spec.title(lang)} ({assignment})"
        summary = summarize(graded, assignment, order, points, skip_unstarted)
        folder = Path(out) / assignment
        folder.mkdir(parents=True, exist_ok=True)
        due = course.assignment(assignment).due if points is not None else None
        hours, deadline = _hours(attempts or [], assignment, due)
        figures = _figures(summary, folder, say, hours, deadline)
        write_csv(summary, [item for item in graded if not (skip_unstarted and item.unstarted)],
                  folder)
        counted = tries(attempts, assignment, [check.id for check in summary.checks]) \
            if attempts else None
        if counted:
            _write_csv(folder / "tries.csv", ["check", "first_try", "later", "never"],
                       [[t.check, t.first, " ".join(map(str, t.later)), t.never]
                        for t in counted])
        write_atomically(folder / "index.html", page(summary, title, figures, lang, say,
                                                     tries=counted,
                                                     deadline=deadline is not None,
                                                     folders=folders))
        pages.append(folder / "index.html")
        entries.append({"folder": assignment, "title": title, "summary": summary,
                        "median": summary.quartiles[1]})
    write_atomically(Path(out) / "index.html", render_page(
        "report-index.html", lang=lang, say=say, pages=entries, problems=problems or []))
    return [Path(out) / "index.html", *pages]
