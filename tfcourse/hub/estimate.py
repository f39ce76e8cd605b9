"""How long a queued submission will wait for its results: the service's queue played forward, turn
by turn as the workers take it (service.next_turn), each grading lasting what the last gradings of
its assignment took.

The estimate is the time from now until its results are written, not until its grading starts:
what the student waits for. Until a grading of an assignment was measured, the waits of its
submissions, and of those after them, are not known (math.inf), and the page gives none.
"""
from __future__ import annotations

import heapq
import math
import statistics
from collections import deque
from dataclasses import dataclass

from .ledger import HOUR, Record

KEPT = 20                   # the last gradings of each assignment whose median is its time


class Timing:
    """The wall time of the last KEPT gradings of each assignment, measured by the service."""

    def __init__(self):
        self.times: dict[str, deque] = {}

    def add(self, assignment: str, seconds: float | None) -> None:
        if seconds is not None and seconds >= 0:
            self.times.setdefault(assignment, deque(maxlen=KEPT)).append(float(seconds))

    def of(self, assignment: str) -> float:
        """The median of its last gradings; math.inf before one was measured (another
        assignment's time is no guide: here 01's takes 3.5 s, 02's 30 s, 03's minutes)."""
        mine = self.times.get(assignment)
        return statistics.median(mine) if mine else math.inf


@dataclass(frozen=True)
class Wait:
    ahead: int                  # queued submissions that will start before it
    seconds: float              # until its results are written (math.inf: not known yet)


def play(queued: list[Record], running: dict[str, tuple[Record, float]], graded: list[Record],
         jobs: int, timing: Timing, now: float) -> dict[str, Wait]:
    """The wait of each of `queued`, playing the queue forward as `jobs` workers take turns:
    among submissions whose student has none being graded, that of the student graded least in
    the last hour, then the oldest. `running`: key -> (record, when its grading began);
    `graded`: the records graded so far (their last hour counts)."""
    recent: dict[str, int] = {}
    for record in graded:
        if record.graded_at and record.graded_at > now - HOUR:
            recent[record.student] = recent.get(record.student, 0) + 1
    slots, student_free = [], {}
    for record, began in running.values():
        end = max(now, began + timing.of(record.assignment))
        slots.append(end)
        student_free[record.student] = end
    slots = sorted(slots)[:jobs] + [now] * max(0, jobs - len(slots))
    heapq.heapify(slots)
    waits, pending = {}, sorted(queued, key=lambda r: r.received)
    while pending:
        free = heapq.heappop(slots)
        ready = [r for r in pending if student_free.get(r.student, now) <= free]
        if not ready:                           # every one waits for its own student's grading
            heapq.heappush(slots, min(student_free[r.student] for r in pending))
            continue
        record = min(ready, key=lambda r: (recent.get(r.student, 0), r.received))
        pending.remove(record)
        end = free + timing.of(record.assignment)
        heapq.heappush(slots, end)
        student_free[record.student] = end
        recent[record.student] = recent.get(record.student, 0) + 1
        waits[record.key] = Wait(len(waits), end - now)
    return waits
