"""The night before the deadline: a class submits at once to the real `tfcourse feedback-service`.

An nbgrader exchange (inbound/ as nbgrader makes it, 0733), the service started as the hub starts
it (without its page), and N students who submit over T minutes as `nbgrader submit` does: most
once, some two or three times, a few past fair use, a few broken (not JSON) or hostile (writing
forged results where the service keeps its own) notebooks; the others correct or with a bug of the
catalogue. Faults on demand: the service SIGKILLed mid-rush and restarted (--kill, how many times),
and its state folder's disk filled for a while (--fill: the state folder is a small tmpfs).

Reported per run, from the service's own records and log:
  submissions per CPU-second    graded submissions / CPU seconds of the service and all it started
  submit to feedback            median, 95th percentile and worst (s), from the copy into inbound/
  behind others' repeats        the longest any submission waited while another student's
                                second or later submission was graded (s)
  idle slots                    slot-seconds a job slot stood idle while a submission waited
  estimate                      the wait the page gave when it was queued vs the real wait:
                                median and worst relative error, and the share within 25%
  faults                        submissions lost (no record), graded twice (two gradings logged),
                                records unreadable, and what the log said while the disk was full

    nice -n 10 python bench/rush.py --assignment 01-attention --students 20 --minutes 2 \
        --jobs 2 --kill 2 --fill 20
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctree import ROOT, CpuAccount

sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from conftest import make_submission, replace_in, solution_cells  # noqa: E402

INBOUND = "tfcourse/inbound"


def variants(assignment: str, scratch: Path) -> dict[str, Path]:
    """Prepared student folders: correct, three bugs of the catalogue, broken, hostile."""
    from catalogue import attention, layers, sorting

    made = {"correct": make_submission(scratch / "correct", assignment)}
    every = attention.BUGS + layers.BUGS + sorting.BUGS
    bugs = [b for b in every if b.assignment == assignment and not b.port and not b.train][:3]
    for bug in bugs:
        cells = solution_cells(assignment)
        answers = {}
        for cell, pairs in bug.edits.items():
            source = answers.get(cell, cells.get(cell, ""))
            for old, new in pairs:
                source = replace_in(source, old, new)
            answers[cell] = source
        made[f"bug-{bug.name}"] = make_submission(scratch / bug.name, assignment, answers)
    broken = make_submission(scratch / "broken", assignment)
    notebook = next(broken.glob("*.ipynb"))
    notebook.write_bytes(notebook.read_bytes()[: 5000])            # cut short: not JSON
    made["broken"] = broken
    first = next(cell for cell in solution_cells(assignment) if cell.endswith("-code"))
    hostile = ("import os, glob, json\n"
               "for folder in glob.glob('/tmp/*rush*/state/*') + glob.glob('/tmp/*/state/*'):\n"
               "    try:\n"
               "        open(os.path.join(folder, 'forged.json'), 'w').write(json.dumps("
               "{'score': 99, 'status': 'graded'}))\n"
               "    except OSError:\n"
               "        pass\n" + solution_cells(assignment)[first])
    made["hostile"] = make_submission(scratch / "hostile", assignment, {first: hostile})
    return made


def plan(students: int, minutes: float, seed: int) -> list[tuple[float, str, str]]:
    """(seconds after the start, student, variant) of every submission, in order of time."""
    rng = random.Random(seed)
    events = []
    for number in range(students):
        name = f"s{number:02d}"
        if number < 2:                      # past fair use: six submissions in the rush
            count = 6
        else:
            count = rng.choices([1, 2, 3], weights=[55, 30, 15])[0]
        kinds = ["broken"] if number == 2 else ["hostile"] if number == 3 else \
            [rng.choice(["bug", "bug", "correct"]) for _ in range(count - 1)] + ["correct"]
        kinds = (kinds * count)[:count]
        times = sorted(rng.uniform(0, minutes * 60) for _ in range(count))
        events += [(t, name, kind) for t, kind in zip(times, kinds)]
    return sorted(events)


def submit(made: dict[str, Path], inbound: Path, student: str, assignment: str, kind: str,
           rng: random.Random) -> str:
    """What `nbgrader submit` does: copy, timestamp.txt, then open the folder to everyone."""
    source = made[kind] if kind in made else made[rng.choice(
        [k for k in made if k.startswith("bug-")] or ["correct"])]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()) + f".{time.time_ns() % 10**6:06d} UTC"
    key = f"{student}+{assignment}+{stamp}+{rng.randrange(16**8):08x}"
    folder = inbound / key
    shutil.copytree(source, folder)
    (folder / "timestamp.txt").write_text(stamp)
    os.chmod(folder, 0o777)
    return key


def start(state: Path, exchange: Path, jobs: int, log: Path, account, skip=()
          ) -> subprocess.Popen:
    command = [sys.executable, "-m", "tfcourse", "--course", str(ROOT),
               "feedback-service", "--exchange", str(exchange), "--state", str(state),
               "--no-page", "--poll", "1", "--trust-names", "--jobs", str(jobs),
               *(["--skip", *skip] if skip else [])]
    return subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=ROOT,
                            preexec_fn=account.enter if account else None)


def records(state: Path) -> tuple[dict[str, dict], list[str]]:
    found, unreadable = {}, []
    for path in (state / "records").glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_text())
        except ValueError:
            unreadable.append(path.name)
    return found, unreadable


def fill(folder: Path) -> Path:
    """Fill the disk of `folder` (already full: a file of nothing)."""
    filler = folder / "filler"
    try:
        with open(filler, "wb") as stream:
            while True:
                stream.write(b"\0" * 65536)
                stream.flush()
    except OSError:
        pass
    return filler


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def started_at(log: str) -> list[float]:
    """When each service process began watching (the log's times are local)."""
    return [stamp(when)
            for when in re.findall(r"^(\S+ \S+) tfcourse\.feedback watching ", log, re.M)]


def estimate_errors(records: list[dict]) -> dict:
    errors = [abs(r["estimate"] - (r["graded_at"] - r["received"])) /
              max(1.0, r["graded_at"] - r["received"])
              for r in records if r.get("estimate") is not None]
    if not errors:
        return {"count": 0}
    return {"count": len(errors), "median": round(statistics.median(errors), 3),
            "p95": round(percentile(errors, 0.95), 3), "worst": round(max(errors), 3),
            "within_25": round(sum(e <= 0.25 for e in errors) / len(errors), 3)}


def stamp(text: str) -> float:
    """A time of the service's log (local time) as seconds since the epoch."""
    import datetime

    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def occupancy(log: str, kills: list[float]) -> dict[str, list[tuple[float, float]]]:
    """When each submission held a job slot, from the service's log: from "grading" to its
    result, or to the kill that ended that service process."""
    spans: dict[str, list[tuple[float, float]]] = {}
    lines = re.findall(r"^(\S+ \S+) tfcourse\.feedback (.+?): (grading \(attempt|\S+ / \S+ in )",
                       log, re.M)
    begun: dict[str, float] = {}
    for when, key, what in lines:
        at = stamp(when)
        if what.startswith("grading"):
            if key in begun:                    # graded again after a restart: the kill ended it
                spans.setdefault(key, []).append((begun[key], at))
            begun[key] = at
        elif key in begun:
            spans.setdefault(key, []).append((begun.pop(key), at))
    for key, at in begun.items():               # still grading when a kill came
        end = min([k for k in kills if k > at] or [at])
        spans.setdefault(key, []).append((at, end))
    for key in spans:                           # a kill ends what it interrupted
        spans[key] = [(b, min([e] + [k for k in kills if b < k < e])) for b, e in spans[key]]
    return spans


def analyse(found: dict, sent: dict[str, float], log: str, jobs: int, cpu: float,
            windows: list[tuple[float, float]], kills: list[float]) -> dict:
    graded = {k: r for k, r in found.items() if r["status"] in ("graded", "failed")
              and r.get("graded_at")}
    waits = [r["graded_at"] - sent[k] for k, r in graded.items() if k in sent]
    starts = {k: r["graded_at"] - (r.get("seconds") or 0) for k, r in graded.items()}
    first = {}
    for key, r in sorted(found.items(), key=lambda item: item[1]["received"]):
        first.setdefault(r["student"], key)
    repeats = {k for k, r in graded.items() if first[r["student"]] != k}
    behind = 0.0
    for key, r in graded.items():
        overlap = sum(max(0.0, min(graded[o]["graded_at"], starts[key])
                          - max(starts[o], r["received"]))
                      for o in repeats if graded[o]["student"] != r["student"])
        behind = max(behind, overlap / jobs)
    busy = occupancy(log, kills)
    idle = idle_clear = 0.0         # slot-seconds idle while a submission waited
    where = {"one student at a time": 0.0, "fault: a kill until the restart, or disk full": 0.0,
             "other": 0.0}
    if graded:
        t, end = min(r["received"] for r in graded.values()), max(r["graded_at"]
                                                                   for r in graded.values())
        while t < end:
            running = {k for k, spans in busy.items() if any(b <= t < e for b, e in spans)}
            students = {found[k]["student"] for k in running if k in found}
            waiting = [r["student"] for k, r in graded.items()
                       if r["received"] <= t < r["graded_at"] and k not in running]
            lost = 0.5 * max(0, min(jobs, len(running) + len(waiting)) - len(running))
            free = 0.5 * max(0, min(jobs, len(running) + len(set(waiting) - students))
                             - len(running))
            idle += lost
            where["one student at a time"] += lost - free
            if any(begin <= t < until for begin, until in windows):
                where["fault: a kill until the restart, or disk full"] += free
            else:
                idle_clear += lost
                where["other"] += free
            t += 0.5
    lost_to_kills = sum(e - b for spans in busy.values() for b, e in spans
                        if any(b < k <= e for k in kills))
    clear = [r for r in graded.values()
             if not any(r["received"] < end and begin < r["graded_at"] for begin, end in windows)]
    logged = re.findall(r"tfcourse\.feedback (.+?): \S+ / \S+ in [\d.]+ s$", log, re.M)
    twice = sorted({k for k in logged if logged.count(k) > 1})
    return {
        "submitted": len(sent), "recorded": len(set(sent) & set(found)),
        "lost": sorted(set(sent) - set(found)), "graded_twice": twice,
        "statuses": {s: sum(r["status"] == s for r in found.values())
                     for s in sorted({r["status"] for r in found.values()})},
        "graded": len(graded), "cpu_seconds": round(cpu, 1),
        "per_cpu_second": round(len(graded) / cpu, 3) if cpu else None,
        "wait_median": round(statistics.median(waits), 1) if waits else None,
        "wait_p95": round(percentile(waits, 0.95), 1) if waits else None,
        "wait_worst": round(max(waits), 1) if waits else None,
        "behind_repeats_worst": round(behind, 1),
        "idle_slot_seconds": idle, "idle_slot_seconds_clear_of_faults": idle_clear,
        "idle_slot_seconds_by_cause": where,
        "slot_seconds_lost_to_kills": round(lost_to_kills, 1),
        "estimate_error_all": estimate_errors(list(graded.values())),
        "estimate_error_clear_of_faults": estimate_errors(clear),
        "grading_seconds_median": round(statistics.median(
            [r["seconds"] for r in graded.values() if r.get("seconds")]), 1) if graded else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="01-attention")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--kill", type=int, default=0, help="SIGKILLs of the service mid-rush")
    parser.add_argument("--fill", type=float, default=0,
                        help="seconds the state folder's disk stays full, mid-rush")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--state-mb", type=int, default=64,
                        help="size of the state folder's tmpfs (03-sorting's notebooks: 512)")
    parser.add_argument("--skip", nargs="*", default=[],
                        help="checks the service does not grade (its --skip)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    options = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="tfcourse-rush-"))
    exchange, state, log = scratch / "exchange", scratch / "state", scratch / "service.log"
    (exchange / INBOUND).mkdir(parents=True)
    os.chmod(exchange / INBOUND, 0o733)
    state.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={options.state_mb}m,mode=0700",
                              "tmpfs",
                              str(state)], capture_output=True).returncode == 0
    if options.fill and not mounted:
        print("rush: --fill needs a tmpfs for the state folder (root)", file=sys.stderr)
        return 2
    account = CpuAccount.make()
    made = variants(options.assignment, scratch / "made")
    events = plan(options.students, options.minutes, options.seed)
    rng = random.Random(options.seed)
    kills = [len(events) * (k + 1) // (options.kill + 2) for k in range(options.kill)]
    fill_at = len(events) * 2 // 3 if options.fill else -1
    notes: list[str] = []
    windows: list[tuple[float, float]] = []     # (begin, end) of each fault, by the clock
    sent: dict[str, float] = {}
    kills_at: list[float] = []
    service = start(state, exchange, options.jobs, log, account, options.skip)
    began = time.monotonic()
    try:
        for index, (when, student, kind) in enumerate(events):
            time.sleep(max(0.0, began + when - time.monotonic()))
            key = submit(made, exchange / INBOUND, student, options.assignment, kind, rng)
            sent[key] = time.time()
            if index in kills:
                time.sleep(3)
                windows.append((time.time(), 0.0))
                kills_at.append(time.time())
                service.send_signal(signal.SIGKILL)
                service.wait()
                notes.append(f"SIGKILL after {index + 1} submissions, at "
                             f"{time.monotonic() - began:.0f} s; restarted")
                service = start(state, exchange, options.jobs, log, account, options.skip)
            if index == fill_at:
                filler = fill(state)
                windows.append((time.time(), time.time() + options.fill))
                time.sleep(options.fill)
                said = [line for line in log.read_text().splitlines()
                        if "cannot be written" in line]
                filler.unlink(missing_ok=True)
                notes.append(f"state disk full for {options.fill:g} s at "
                             f"{time.monotonic() - began:.0f} s; the log said: "
                             f"{said[0].split('feedback ', 1)[-1][:160] if said else 'nothing'}")
        deadline = time.monotonic() + options.timeout
        while time.monotonic() < deadline:
            found, _ = records(state)
            if set(sent) <= set(found) and not any(
                    r["status"] in ("queued", "grading") for r in found.values()):
                break
            time.sleep(1)
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(60)
        except subprocess.TimeoutExpired:
            service.kill()
    cpu = account.seconds() if account else 0.0
    found, unreadable = records(state)
    text = log.read_text()
    starts = started_at(text)
    windows = [(begin, end or next((t for t in starts if t > begin), time.time()))
               for begin, end in windows]
    figures = analyse(found, sent, text, options.jobs, cpu, windows, kills_at)
    figures.update(assignment=options.assignment, students=options.students,
                   minutes=options.minutes, jobs=options.jobs, skip=options.skip,
                   unreadable_records=unreadable,
                   forged=sorted(str(p) for p in state.rglob("forged.json")), faults=notes,
                   wall_seconds=round(time.monotonic() - began), load=os.getloadavg())
    print(json.dumps(figures, indent=1))
    if options.json:
        options.json.write_text(json.dumps(figures, indent=1))
        shutil.copy(log, options.json.with_suffix(".log"))       # the service's own words
    if account:
        account.close()
    if mounted:
        subprocess.run(["umount", "-l", str(state)], check=False)
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
