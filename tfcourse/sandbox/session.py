"""The trusted side's handle on a running submission: load its cells, send requests, survive it.

A `StudentSession` starts the worker in a sandbox, executes the submission's cells one by one, and
then answers requests from the checks. When the student's process dies, hangs or runs out of memory,
the session says so with an exception the checks turn into a message, and the next request starts a
fresh process (leaving out any cell that killed the last one).

A request's time limit is CPU time: the CPU seconds the student's processes spend while it runs
(Sandbox.cpu_seconds: their cgroup's count, else their own in /proc), read every POLL_SECONDS
while the reply is awaited, so that a busy machine, which slows the student's code without its
spending more, never stops it. Code that spends no CPU (a sleep, a lock, input()) is stopped by
its idle seconds: at each of those reads the session also looks at the state of every thread of
the student's processes (limits.busy), and a stretch between two looks at which none of them was
runnable, less the CPU they spent in it, is time spent waiting on nothing. A process that waits
for a CPU on a busy machine is runnable ('R'), so load never counts as idle; one that sleeps,
reads input() or waits on a lock is not. `idle_seconds` is the most a request may wait so,
`idle_total` the most all of a notebook's requests together may (course.yaml `limits`). Behind
both stays a backstop on waiting, `wait_factor` times the CPU limit plus `wait_floor` seconds,
so generous that load alone does not reach it: it ends what the idle count leaves alone, a
process stopped by a signal or stuck in an uninterruptible wait. The notebook's own time,
`cpu_budget`, is CPU seconds too, its requests' together; `deadline` is its backstop.
"""
from __future__ import annotations

import math
import os
import re
import select
import time
from dataclasses import dataclass, field

from . import channel
from . import limits as measure
from .cell import Cell  # noqa: F401 (the session runs Cells; callers import it from here)
from .forked import open_sandbox
from .launch import Sandbox, SandboxConfig

POLL_SECONDS = 0.2          # how often the CPU the student's processes spent is read, and
                            # whether any of their threads is runnable
START_SECONDS = 60          # for a new process to come up (import torch), CPU seconds


@dataclass
class CellOutcome:
    label: str
    ok: bool
    error: dict | None = None
    seconds: float = 0.0
    ended_process: str | None = None    # how the process ended while this cell ran, if it did
    timed_out: bool = False
    waited: bool = False                # timed out by the backstop on waiting, not by its CPU
    idle: dict | None = None            # or by its waiting on nothing: the seconds it waited,
                                        # the limit, whether the notebook's ("total")


class StudentError(Exception):
    """Student code raised: `info` has type, message, traceback, where (cell) and line, as the
    student's process sent them, each made plain and short here (`error_info`)."""

    def __init__(self, info: dict):
        info = error_info(info)
        super().__init__(f"{info.get('type')}: {info.get('message')}")
        self.info = info

    @property
    def type(self) -> str:
        return str(self.info.get("type"))


# What an error's fields may hold: the student's code chose them all (an exception class can be
# named with any text), and they reach feedback, so each is text of a bounded length.
ERROR_FIELDS = {"type": 80, "message": 3000, "traceback": 3000, "where": 80}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def error_info(info) -> dict:
    """A student error as data: each known field a string of at most its ERROR_FIELDS length
    (an exception's class name a Python name, or "an exception"), the line a small integer."""
    info = info if isinstance(info, dict) else {"message": str(info)}
    plain = {}
    for name, limit in ERROR_FIELDS.items():
        value = info.get(name)
        plain[name] = None if value is None else str(value)[:limit]
    kind = plain["type"] or ""
    if not _NAME.fullmatch(kind) or len(str(info.get("type"))) > ERROR_FIELDS["type"]:
        plain["type"] = "an exception"
    line = info.get("line")
    plain["line"] = line if isinstance(line, int) and not isinstance(line, bool) and \
        0 <= line < 10 ** 7 else None
    return plain


class ProcessEnded(Exception):
    """The student's process died (exit, signal), was killed at a limit, or was never started
    (the sandbox refused to run student code on this machine).

    `limit` names the limit it went over ("memory", "processes", "disk"); `memory` is kept for
    the checks that word a memory overrun their own way.
    """

    def __init__(self, description: str, memory: bool = False, limit: str | None = None):
        super().__init__(description)
        self.description, self.memory, self.limit = description, memory, limit


class NotStarted(ProcessEnded):
    """The sandbox did not come up: its worker died or gave no answer before any student code
    ran in it. The machine's trouble (load, a full disk), not the student's: the grader tries
    once more, then fails the grading rather than score it."""


# What a request stopped for waiting on nothing says (framework.py and run.py word it for the
# student, in these words): the request's own limit, or the notebook's.
IDLE_MESSAGE = ("waited {seconds:.0f} s doing nothing (sleeping, or waiting on input() or a "
                "lock): the grader allows {limit:.0f} s of waiting")
IDLE_TOTAL_MESSAGE = ("waited {seconds:.0f} s in all doing nothing (sleeping, or waiting on "
                      "input() or a lock): the grader allows {limit:.0f} s of waiting per "
                      "notebook")


class TimedOut(Exception):
    """A request was stopped: its student's processes spent more than `seconds` of CPU time on
    it, or (`waiting`, the backstop) it waited `seconds` while they spent less than that, or
    (`idle`, a limit of `idle` seconds; `waiting` too) they waited `seconds` on nothing: with
    `total`, the notebook's requests together did."""

    def __init__(self, seconds: float, waiting: bool = False, idle: float | None = None,
                 total: bool = False):
        if idle is not None:
            text = (IDLE_TOTAL_MESSAGE if total else IDLE_MESSAGE).format(seconds=seconds,
                                                                          limit=idle)
        else:
            text = (f"no answer within {seconds:.0f} s of waiting" if waiting else
                    f"used more than {seconds:.0f} CPU seconds")
        super().__init__(text)
        self.seconds, self.waiting = seconds, waiting or idle is not None
        self.idle, self.total = idle, total

    @property
    def template(self) -> tuple[str, dict] | None:
        """The idle stop's message, as a template and its values; None for the others."""
        if self.idle is None:
            return None
        return (IDLE_TOTAL_MESSAGE if self.total else IDLE_MESSAGE,
                {"seconds": self.seconds, "limit": self.idle})


class OutOfTime(Exception):
    """The submission's whole time budget is spent."""


class _Spent(Exception):
    """A request's CPU time, its idle seconds or its backstop on waiting ran out (TimedOut's
    words)."""

    def __init__(self, seconds: float, waiting: bool):
        super().__init__(seconds, waiting)
        self.seconds, self.waiting = seconds, waiting


class _Idle(_Spent):
    """A request's idle seconds ran out: it waited `seconds` on nothing."""

    def __init__(self, seconds: float):
        super().__init__(seconds, waiting=True)


def _student_pids(sandbox: Sandbox) -> list[int]:
    """The student's processes: its cgroup's members where it has one (all of them are there,
    and reading one file is cheaper than the process table), else as the sandbox finds them."""
    found = sandbox.cgroup.members() if sandbox.cgroup is not None else set()
    return sorted(found) if found else sandbox._members()


class _Clock:
    """The limits of one request: `seconds` of the student's CPU time from now, `idle` seconds
    spent waiting on nothing, and `wall` seconds of waiting."""

    def __init__(self, sandbox: Sandbox, seconds: float, wall: float, idle: float = math.inf):
        self.sandbox, self.seconds, self.wall, self.idle_limit = sandbox, seconds, wall, idle
        self.deadline = time.monotonic() + wall
        self.start = sandbox.cpu_seconds()
        self.idle = 0.0                  # seconds the student's processes waited on nothing
        self._look: tuple[float, float, bool] | None = None   # the last: clock, CPU, idle?

    def used(self) -> float:
        return max(self.sandbox.cpu_seconds() - self.start, 0.0)

    def check(self) -> None:
        """_Spent when a limit is reached: the CPU seconds first, then the idle ones, then the
        backstop."""
        cpu = self.sandbox.cpu_seconds()
        if cpu - self.start > self.seconds:
            raise _Spent(self.seconds, waiting=False)
        if self.idle_limit < math.inf:
            self._count_idle(cpu)
            if self.idle > self.idle_limit:
                raise _Idle(self.idle)
        if time.monotonic() >= self.deadline:
            raise _Spent(self.wall, waiting=True)

    def _count_idle(self, cpu: float) -> None:
        """Look at the student's threads: the time since the last look is idle when neither
        look found one of them doing anything, less the CPU they spent meanwhile (what ran
        between the looks). A stretch seen idle at one end only counts nothing: a process that
        comes and goes between a short wait and its work is not counted against."""
        now = time.monotonic()
        idle = measure.busy(_student_pids(self.sandbox)) is False
        if self._look is not None and self._look[2] and idle:
            self.idle += max(now - self._look[0] - (cpu - self._look[1]), 0.0)
        self._look = (now, cpu, idle)

    def pause(self) -> None:
        """The grader itself works now (it answers a stand-in's call): the student's process
        waits for it, which is not its idling. The next look starts afresh."""
        self._look = None

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)


@dataclass
class StudentSession:
    cells: list[Cell]
    config: SandboxConfig
    forbidden: list[str]
    cell_seconds: float                  # CPU seconds for one cell
    deadline: float                      # time.monotonic() by which all grading must end
    outcomes: list[CellOutcome] = field(default_factory=list)
    tripped: set[str] = field(default_factory=set)
    prestarted: Sandbox | None = None    # a sandbox already started for this session
    warning: str | None = None
    peak_rss_kb: int = 0
    output_tail: str = ""
    output_dropped: int = 0              # bytes of the student's output beyond the cap
    # handle -> handler(method, args) of the stand-ins whose answers this side computes
    callbacks: dict = field(default_factory=dict)
    cpu_budget: float | None = None      # CPU seconds for all requests together (None: no limit)
    wait_factor: float = 4.0             # the backstop on waiting: this times a request's CPU
    wait_floor: float = 60.0             # seconds, plus these
    cpu_used: float = 0.0                # CPU seconds the requests spent so far (not the starts)
    idle_seconds: float = math.inf       # seconds one request may wait on nothing
    idle_total: float = math.inf         # seconds all requests together may (not the starts)
    idle_used: float = 0.0               # seconds the requests waited on nothing so far

    def __post_init__(self):
        self._sandbox: Sandbox | None = None
        self._fd_in = self._fd_out = -1
        self._next_id = 0
        self._skip: set[str] = set()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start a worker and run every cell; remember how each went (the first time it ran)."""
        while True:
            self._spawn()
            died_in = self._load_cells()
            if died_in is None:
                return
            self._skip.add(died_in)          # that cell kills the process: leave it out

    def _spawn(self) -> None:
        self.close()
        if self.prestarted is not None:
            self._sandbox, self.prestarted = self.prestarted, None
            self._fd_in, self._fd_out = self._sandbox.fd_in, self._sandbox.fd_out
        else:
            self._sandbox = open_sandbox(self.config)
            self._fd_in, self._fd_out = self._sandbox.start()
        self.warning = self._sandbox.warning
        if self._sandbox.refusal:            # this machine cannot isolate student code enough
            raise ProcessEnded(self._sandbox.refusal)
        try:
            self._request("init", self._timeout(START_SECONDS), threads=self.config.threads,
                          forbidden=self.forbidden)
        except ProcessEnded as error:        # the sandbox itself did not come up: say why
            said = self._sandbox.output.decode("utf-8", "replace").strip().splitlines()
            raise self._not_started(f"{error.description}: {said[-1] if said else 'no output'}")
        except TimedOut as error:
            raise self._not_started(f"the sandbox's worker gave no answer to its start ({error})")

    def _not_started(self, description: str) -> ProcessEnded:
        """NotStarted while no student code has run in this session: the machine's trouble. Once a
        cell has run (and ended its process), a new process that does not come up may be the
        student's doing (what the last one left behind): scored as the process ending."""
        return ProcessEnded(description) if self.outcomes else NotStarted(description)

    def _load_cells(self) -> str | None:
        """Run the cells; return the label of a cell that ended the process, if one did."""
        for cell in self.cells:
            if cell.label in self._skip:
                continue
            started = time.monotonic()
            outcome = CellOutcome(cell.label, ok=True)
            try:
                self._request("exec", self._timeout(self.cell_seconds), label=cell.label,
                              source=cell.source)
            except StudentError as error:
                outcome.ok, outcome.error = False, error.info
            except TimedOut as error:
                outcome.ok, outcome.timed_out, outcome.waited = False, True, error.waiting
                outcome.ended_process = str(error)
                if error.idle is not None:
                    outcome.idle = {"seconds": error.seconds, "limit": error.idle,
                                    "total": error.total}
            except ProcessEnded as error:
                outcome.ok, outcome.ended_process = False, error.description
            outcome.seconds = time.monotonic() - started
            known = next((o for o in self.outcomes if o.label == cell.label), None)
            if known is None:
                self.outcomes.append(outcome)
            elif outcome.ended_process and not known.ended_process:
                known.ok, known.ended_process = False, outcome.ended_process
                known.timed_out, known.waited = outcome.timed_out, outcome.waited
                known.idle = outcome.idle
            if outcome.ended_process:
                return cell.label
        return None

    def ensure_running(self) -> None:
        if self._sandbox is None or not self._sandbox.alive():
            self.start()

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()        # first: it reads its cgroup's peak one last time
            self.peak_rss_kb = max(self.peak_rss_kb, self._sandbox.peak_rss_kb)
            self.output_tail = self._sandbox.output[-4000:].decode("utf-8", "replace")
            self.output_dropped += self._sandbox.output_dropped
            self._sandbox = None

    # -- requests -----------------------------------------------------------------------------
    def _timeout(self, seconds: float) -> float:
        """`seconds` of CPU time, or what is left of the notebook's, whichever is less."""
        left = self.deadline - time.monotonic()
        cpu_left = math.inf if self.cpu_budget is None else self.cpu_budget - self.cpu_used
        if left <= 0 or cpu_left <= 0:
            raise OutOfTime()
        return min(seconds, cpu_left)

    def backstop(self, seconds: float) -> float:
        """How long a request of `seconds` of CPU time may wait: `wait_factor` times as long,
        plus `wait_floor` seconds."""
        return seconds * self.wait_factor + self.wait_floor

    def _request(self, op: str, timeout: float, **args):
        """Send `op` and wait for its reply, for `timeout` CPU seconds of the student's processes,
        `idle_seconds` of their waiting on nothing (or what is left of `idle_total`, if less) and
        the backstop on waiting (at most until `deadline`); its value. What they spent counts
        against `cpu_budget` and `idle_total`, but for a new process's start (the harness
        importing torch: the grader's, not the student's, and no student code waits in it)."""
        start = op == "init"
        idle_left = max(self.idle_total - self.idle_used, 0.0)
        clock = _Clock(self._sandbox, timeout, min(self.backstop(timeout),
                                                   max(self.deadline - time.monotonic(), 0.001)),
                       idle=math.inf if start else min(self.idle_seconds, idle_left))
        try:
            return self._exchange(op, clock, **args)
        except TimedOut as error:
            if error.idle is not None and idle_left < self.idle_seconds:   # the notebook's
                raise TimedOut(self.idle_used + error.seconds, idle=self.idle_total,
                               total=True) from None
            raise
        finally:
            if not start:
                self.cpu_used += clock.used()
                self.idle_used += clock.idle

    def _exchange(self, op: str, clock: _Clock, **args):
        self._next_id += 1
        request_id = self._next_id
        try:
            self._send({"id": request_id, "op": op, "args": args}, clock.left())
            while True:
                left = self._await_reply(clock)
                reply = channel.recv(self._fd_out, timeout=left, max_bytes=channel.REPLY_LIMIT)
                if "callback" not in reply:
                    break
                self._answer_callback(reply["callback"], clock.deadline)
        except _Idle as spent:
            self._sandbox.kill()
            raise TimedOut(spent.seconds, idle=clock.idle_limit) from None
        except _Spent as spent:
            self._sandbox.kill()
            raise TimedOut(spent.seconds, spent.waiting) from None
        except channel.ChannelTimeout:       # it stopped reading, or a reply came in part only
            self._sandbox.kill()
            raise TimedOut(clock.wall, waiting=True) from None
        except channel.TooLarge as error:
            self._sandbox.kill()
            raise ProcessEnded(f"sent the grader a reply too large ({error})") from None
        except (channel.ChannelError, OSError) as error:
            self._sandbox.settle()
            alive = self._sandbox.alive()
            over = self._sandbox.limit_exceeded()        # before the kill: the disk is seen
            self._sandbox.kill()                         # through a live process
            over = over or self._sandbox.limit_exceeded()
            if over:
                raise self._over_limit(over) from None
            if alive:                        # it lives, but the channel is closed or garbled
                raise ProcessEnded(f"broke its connection to the grader ({error})") from None
            raise ProcessEnded(self._sandbox.exit_description()) from None
        over = self._sandbox.limit_exceeded()     # a fork refused, a disk full: say that,
        if over:                                  # not the error it caused
            self._sandbox.kill()
            raise self._over_limit(over)
        if op != "quit" and not self._sandbox.alive():   # it answered, then ended (code that
            self._sandbox.kill()                         # kills its keeper, say): this request
            raise ProcessEnded(self._sandbox.exit_description())   # did it, not the next one
        if reply.get("id") != request_id:
            self._sandbox.kill()
            raise ProcessEnded("sent a reply out of turn")
        tripwires = reply.get("tripwires")
        if isinstance(tripwires, list):
            self.tripped.update(str(name) for name in tripwires)
        if not reply.get("ok"):
            error = reply.get("error")
            raise StudentError(error if isinstance(error, dict) else {"type": "Error",
                                                                      "message": str(error)})
        return reply.get("value")

    def _answer_callback(self, call, deadline: float) -> None:
        """A remote stand-in in the student's process asks for its answer: compute it here with
        the handler registered for it (which also counts and records, on this side)."""
        handler = self.callbacks.get(call.get("handle")) if isinstance(call, dict) else None
        if handler is None:
            answer = {"ok": False, "error": "no such stand-in"}
        else:
            try:
                answer = {"ok": True, "value": handler(str(call.get("method")), call.get("args"))}
            except (TypeError, ValueError, IndexError, RuntimeError) as error:
                answer = {"ok": False, "error": f"the stand-in model could not answer: {error}"}
        self._send(answer, max(deadline - time.monotonic(), 0.001))

    def _over_limit(self, description: str) -> ProcessEnded:
        kind = self._sandbox.exceeded
        return ProcessEnded(description, memory=kind == "memory", limit=kind)

    def _send(self, message: dict, timeout: float) -> None:
        """channel.send with a deadline: student code may stop its side from reading, and a
        blocking write to a full pipe would then hang the grader."""
        data = memoryview(channel.pack(message))
        deadline = time.monotonic() + timeout
        os.set_blocking(self._fd_in, False)
        while data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._fd_in], [], left)[1]:
                raise channel.ChannelTimeout("the student's process stopped reading")
            try:
                data = data[os.write(self._fd_in, data):]
            except BlockingIOError:
                continue

    def _await_reply(self, clock: _Clock) -> float:
        """Wait until a reply starts to arrive (woken as it does), reading every POLL_SECONDS the
        CPU time the student's processes spent; the seconds of waiting left. _Spent when the
        request's CPU time, its idle seconds or its waiting runs out. Gives up early when the
        student's process has died: what it started may hold the pipe open, so no end of file
        would come."""
        clock.pause()                        # what came before was the grader's own work
        while not select.select([self._fd_out], [], [], POLL_SECONDS)[0]:
            if not self._sandbox.alive():
                raise channel.ChannelError("the student's process ended")
            clock.check()
        return clock.left()

    def request(self, op: str, timeout: float, **args):
        """Ask the running submission to do `op`; restarts it first if it is not running."""
        self.ensure_running()
        return self._request(op, self._timeout(timeout), **args)
