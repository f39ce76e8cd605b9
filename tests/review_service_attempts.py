"""A hostile review of the feedback service (tfcourse/hub/): attempts to make it lose, delay or
mis-attribute a classmate's submission, grade one twice, or show one student another's feedback.

Not part of the suite (its name is not test_*): run it on purpose, as root (owners are changed):

    PYTHONPATH=. nice -n 10 python -m pytest tests/review_service_attempts.py -p no:cacheprovider -s

Each test asserts what the service should do; a failing test is a harm found (its docstring says
how it was made). The printed lines are the figures measured.

Outcomes at 15:30 UTC on the shared 2-core machine (load 14-20), code at bb4cd1a:
  HARM  11 a student binds the service's fixed local port while it is down: it exits at listen,
           graders with it (bob queued, never graded); the proxy sends pages and cookies to her
  HARM  10 one empty results.json (a crash before the rename reached disk) and the service
           never starts again (JSONDecodeError out of Ledger.load), for everyone
  HARM   2 three stops of the service while a submission is graded (any cause: a classmate's,
           a hub restart) fail it for good, and a failure counts against fair use
  HARM   8 an owner the name service cannot name for a moment: refused under "uid N", on
           nobody's page, not among the instructor's failures, never looked at again
  HARM  1b 76 MB notebooks slow to strip: each holds the single watcher ~3.6 s before fair use
           is looked at; 100 a day (FLOOD) at the deadline: ~6 min with nobody queued
  minor 1c 153,000 junk entries in inbound/: each look ~1 s (poll 2 s)
  minor  1 200 MB notebooks: ~1 s each of the watcher's time
  defended 3 (another's name), 4 (markup in names), 5 (same second, resubmission while graded),
           6 (HTTP routes as a student), 7 (sandbox spy with a classmate graded beside),
           9 (spinning processes left behind), 12 (symlink, hard link, pipe as the notebook:
           nothing of the classmate's copied; but the classmate's own notebook, now with 2 names,
           is refused and graded as missing: needs their folder's random name, and root or
           fs.protected_hardlinks=0, to make the link)
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tfcourse.course import load_course
from tfcourse.hub import page
from tfcourse.hub.ledger import FAILED, GRADED, GRADING, QUEUED, REFUSED, Record
from tfcourse.hub.service import Service

from conftest import ROOT, make_submission, solution_cells
from test_feedback_service import T0, Clock, full_marks, grade_next, submit

ASSIGNMENT = "01-attention"


@pytest.fixture
def course():
    return load_course(ROOT)


def service(course, tmp_path, clock=None, grade=full_marks, **options) -> Service:
    options.setdefault("trust_names", True)
    return Service(course, tmp_path / "exchange", tmp_path / "state", clock=clock or Clock(),
                   grade=grade, **options)


def status_of(feedback: Service, student: str) -> list[str]:
    return [r.status for r in feedback.ledger.of_student(student)]


# -- 1. the watcher held up by one student's large notebooks -------------------------------------
def big_notebook(megabytes: int) -> bytes:
    """A notebook whose outputs make it `megabytes` large: over limits.notebook_mb (64), under
    notebook_file_mb (256), so the watcher reads it whole and strips its outputs before queueing
    anything else (and before fair use is even looked at)."""
    text = "x" * 1_000_000
    outputs = ",".join(json.dumps({"output_type": "stream", "name": "stdout", "text": text})
                       for _ in range(megabytes))
    cell = {"cell_type": "code", "metadata": {}, "source": "print(1)", "execution_count": 1,
            "outputs": json.loads(f"[{outputs}]")}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                       "nbformat_minor": 5}).encode()


def test_1_one_students_large_notebooks_delay_a_classmates_queueing(course, tmp_path):
    """mallory submits three 200 MB notebooks (over her fair use already: they will be limited),
    then bob submits. The watcher takes entries one at a time, copying (and stripping) each
    before fair use is looked at; bob is queued only after all of mallory's are copied. A day
    allows 100 records per student (FLOOD), each up to 256 MB."""
    exchange = tmp_path / "exchange"
    feedback = service(course, tmp_path)
    data = big_notebook(200)
    for n in range(3):
        folder = submit(exchange, "mallory", stamp=f"m{n}", notebook=data)
        os.utime(folder, (T0 - 100 + n, T0 - 100 + n))     # earlier than bob's: taken first
    submit(exchange, "bob", stamp="b")
    began = time.monotonic()
    feedback.scan()
    took = time.monotonic() - began
    print(f"\n[1] one scan with 3 x 200 MB of mallory's notebooks before bob's: {took:.1f} s "
          f"(bob queued only after it); 100 a day: about {took * 100 / 3 / 60:.0f} min of the watcher")
    assert status_of(feedback, "bob") == [QUEUED]
    assert took < 10, f"bob's submission waited {took:.0f} s behind mallory's copies"


def test_1b_notebooks_slow_to_strip_hold_up_the_watcher(course, tmp_path):
    """As 1, with notebooks of 65 MB made of ~1.9 million short strings in outputs (just under
    STRIP_TOKENS, so stripped, the slowest path allowed)."""
    exchange = tmp_path / "exchange"
    feedback = service(course, tmp_path)
    strings = ",".join(['"ab' + "c" * 36 + '"'] * 1_950_000)
    cell = ('{"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, '
            '"outputs": [{"output_type": "stream", "name": "stdout", "text": [' + strings +
            ']}]}')
    data = ('{"cells": [' + cell + '], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
            ).encode()
    print(f"\n[1b] notebook of {len(data) / 1048576:.0f} MB")
    for n in range(2):
        folder = submit(exchange, "mallory", stamp=f"m{n}", notebook=data)
        os.utime(folder, (T0 - 100 + n, T0 - 100 + n))
    submit(exchange, "bob", stamp="b")
    began = time.monotonic()
    feedback.scan()
    took = time.monotonic() - began
    print(f"[1b] one scan with 2 of them before bob's: {took:.1f} s; 100 a day: about "
          f"{took * 50 / 60:.0f} min of the watcher")
    assert status_of(feedback, "bob") == [QUEUED]
    assert took < 5, f"bob's submission waited {took:.0f} s behind mallory's copies"


def test_1c_a_folder_full_of_junk_slows_every_look(course, tmp_path):
    """mallory fills inbound/ with 150,000 empty files (names nbgrader never makes) and 3,000
    folders named as submissions, never finished (no timestamp.txt, touched again and again):
    the junk past the 100,000 remembered, and the unfinished folders, are looked at on every
    poll (2 s)."""
    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="b")
    inbox = exchange / "tfcourse" / "inbound"
    for n in range(150_000):
        os.close(os.open(inbox / f"j{n}", os.O_CREAT | os.O_WRONLY, 0o600))
    for n in range(3000):
        (inbox / f"mallory+01-attention+u{n}").mkdir()
    feedback = service(course, tmp_path)
    looks = []
    for _ in range(3):
        began = time.monotonic()
        feedback.scan()
        looks.append(round(time.monotonic() - began, 2))
    print(f"\n[1c] looks at inbound/: {looks} s (poll every 2 s)")
    assert status_of(feedback, "bob") == [QUEUED]
    assert max(looks[1:]) < 1.0


# -- 2. restarts of the service count against a classmate's submission ---------------------------
def test_2_three_restarts_fail_an_innocent_submission_being_graded(course, tmp_path):
    """Two job slots grade mallory's and bob's submissions; the service stops (a hub restart, a
    SIGKILL, or anything mallory's submission makes happen) while both are being graded, three
    times. Each stop counts an attempt against both, and after the third bob's submission is
    FAILED, never graded, though nothing in it stopped anything."""
    exchange = tmp_path / "exchange"
    submit(exchange, "mallory", stamp="m")
    submit(exchange, "bob", stamp="b")
    feedback = service(course, tmp_path, jobs=2)
    feedback.scan()
    for stop in range(3):
        taken = [feedback.next_turn(), feedback.next_turn()]       # both slots busy
        assert {r.student for r in taken} == {"mallory", "bob"}
        # the process ends here (SIGKILL): a new service reads the same state folder
        feedback = service(course, tmp_path, jobs=2)
        feedback.ledger.load()
    print(f"\n[2] after 3 stops mid-grading: bob {status_of(feedback, 'bob')} "
          f"{feedback.ledger.of_student('bob')[0].why!r}")
    assert status_of(feedback, "bob") != [FAILED], "bob's submission lost to three restarts"


# -- 3. another student's name on a folder ---------------------------------------------------------
def test_3_a_folder_named_for_a_classmate_is_refused_and_not_shown_to_them(course, tmp_path):
    """mallory (account `daemon`) makes `nobody+01-attention+...` (nobody is the classmate): a
    REFUSED record of hers, nothing on the classmate's page, their own submission unaffected."""
    exchange = tmp_path / "exchange"
    submit(exchange, "nobody", stamp="1", owner="daemon")
    submit(exchange, "nobody", stamp="2", owner="nobody")
    feedback = service(course, tmp_path, trust_names=False)
    feedback.scan()
    assert status_of(feedback, "daemon") == [REFUSED]
    assert status_of(feedback, "nobody") == [QUEUED]


# -- 4. markup in a folder name on the instructor's and the student's page ----------------------------
def test_4_markup_in_names_is_escaped_on_the_pages(course, tmp_path):
    exchange = tmp_path / "exchange"
    evil = "<img src=x onerror=fetch(location+1)>"
    inbox = exchange / "tfcourse" / "inbound"
    submit(exchange, "mallory", stamp="1")
    os.rename(inbox / "mallory+01-attention+1+r1", inbox / f"mallory+01-attention+{evil}")
    submit(exchange, f"mallory{evil}", stamp="2")
    submit(exchange, "mallory", stamp="3")
    os.rename(inbox / "mallory+01-attention+3+r3", inbox / f"mallory+{evil}+3")
    feedback = service(course, tmp_path)
    feedback.scan()
    # a record that FAILED (the stand-in grader sees no notebook) is listed with its key
    feedback.ledger.save(Record(f"mallory+x+{evil}", "mallory", "x", T0, status=FAILED,
                                why="{x}", params={"x": evil}))
    shown = page.instructor(course, feedback.overview(), "en")
    records, results = feedback.view("mallory")
    mine = page.page(course, "mallory", records, results, T0, "en", feedback.waits())
    assert "<img" not in shown and "<img" not in mine


# -- 5. resubmitting while graded; two students in the same second -----------------------------------
def test_5_same_second_and_resubmission_while_graded(course, tmp_path):
    """bob and alice submit in the same second with the same stamp; bob resubmits while his first
    is being graded, twice. Each of bob's is graded or superseded once, alice's is graded, and
    nobody's record holds another's."""
    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="s")
    submit(exchange, "alice", stamp="s")
    feedback = service(course, tmp_path, jobs=1)
    feedback.scan()
    first = feedback.next_turn()
    submit(exchange, "bob", stamp="s2", notebook=b'{"cells": [1]}')
    submit(exchange, "bob", stamp="s3", notebook=b'{"cells": [2]}')
    feedback.scan()
    feedback.grade_one(first)
    feedback.busy.discard(first.student)
    while any(r.status == QUEUED for r in feedback.ledger.all()):
        grade_next(feedback)
    states = {r.key: (r.student, r.status) for r in feedback.ledger.all()}
    print(f"\n[5] {states}")
    assert all(key.startswith(student) for key, (student, _) in states.items())
    assert sorted(s for k, (_, s) in states.items() if k.startswith("bob")) == \
        ["graded", "graded", "superseded"]
    assert states["alice+01-attention+s+rs"][1] == GRADED


# -- 6. the HTTP routes: another's page, another's JSON, the instructor's routes ------------------------
def test_6_a_student_cannot_read_another_students_page_or_the_queue(course, tmp_path):
    """The tornado app of make_app with the hub's login replaced by a fixed user (mallory):
    ?student=bob, the JSON, the queue and the class report."""
    from jupyterhub.services import auth
    from tornado.testing import AsyncHTTPTestCase

    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="1")
    feedback = service(course, tmp_path)
    feedback.scan()
    grade_next(feedback)
    original = auth.HubOAuthenticated.get_current_user
    auth.HubOAuthenticated.get_current_user = lambda self: {"name": "mallory"}
    try:
        from tfcourse.hub.app import make_app

        seen = {}

        class Case(AsyncHTTPTestCase):
            def get_app(self):
                return make_app(feedback, "/services/feedback/", {"teacher"})

            def runTest(self):
                for path in ["?student=bob", "api/feedback?student=bob", "api/queue",
                             "report/", "report/index.html", "report/../../records",
                             "?student=bob&student=mallory"]:
                    response = self.fetch("/services/feedback/" + path)
                    seen[path] = (response.code, response.body.decode(errors="replace"))

        case = Case()
        case.setUp()
        try:
            case.runTest()
        finally:
            case.tearDown()
    finally:
        auth.HubOAuthenticated.get_current_user = original
    print("\n[6] " + ", ".join(f"{path}: {code}" for path, (code, _) in seen.items()))
    for path, (code, body) in seen.items():
        assert "bob+01-attention" not in body and '"bob"' not in body, path


# -- 7. a hostile notebook in the real sandbox, looking for classmates ----------------------------------
SPY = r'''
import os, glob
found = []
for pattern in ["/tmp/*", "/root/*", "/home/*", "/dev/shm/*", "/sandbox/*", "/proc/*/cwd/*",
                "/proc/*/cmdline", "/work/*", "/var/tmp/*"]:
    try:
        for path in glob.glob(pattern)[:40]:
            found.append(path)
    except OSError:
        pass
secrets = []
for path in found:
    if "cmdline" in path:
        try:
            secrets.append(open(path, "rb").read()[:200].decode(errors="replace"))
        except OSError:
            pass
raise RuntimeError("SPY cwd=" + os.getcwd() + " found=" + " ".join(found)[:3000] +
                   " cmdlines=" + " | ".join(secrets)[:1500])
'''


@pytest.mark.slow
def test_7_a_hostile_notebook_sees_no_classmate(course, tmp_path):
    """mallory's sdpa cell lists what the sandbox shows (/, /tmp, the folders above its own, other
    processes' command lines and cwd) and raises it as its error, so that the feedback carries
    it; bob is graded in the other job slot at the same time."""
    exchange = tmp_path / "exchange"
    inbox = exchange / "tfcourse" / "inbound"
    for name, answers in {"bob": {}, "mallory": {"sdpa-code": SPY}}.items():
        made = make_submission(tmp_path / "made" / name, ASSIGNMENT, answers)
        folder = inbox / f"{name}+{ASSIGNMENT}+2026-12-01 10:00:00.000000 UTC+r{name}"
        shutil.copytree(made, folder)
        (folder / "timestamp.txt").write_text("x")
        os.chmod(folder, 0o777)
    os.chmod(inbox, 0o733)
    feedback = Service(course, exchange, tmp_path / "state", trust_names=True, jobs=2)
    feedback.scan()
    import threading

    workers = []
    for _ in range(2):
        record = feedback.next_turn()
        workers.append(threading.Thread(target=feedback.grade_one, args=(record,)))
        workers[-1].start()
    for worker in workers:
        worker.join(300)
    records = {r.student: r for r in feedback.ledger.all()}
    mine = feedback.ledger.results(records["mallory"].key)
    said = json.dumps(mine)
    print(f"\n[7] bob {records['bob'].status} {records['bob'].score}; mallory "
          f"{records['mallory'].score}; what her feedback carries:\n" +
          "\n".join(f"{t['number']} {t['status']}: {t.get('output', '')[:1500]}"
                    for t in mine["tests"]) + "\nnotes: " + str(mine.get("output", ""))[:1500])
    assert records["bob"].status == GRADED and records["bob"].score == \
        course.assignment(ASSIGNMENT).points
    assert "bob" not in said and str(tmp_path) not in said


# -- 8. an owner without an account name (the name service down for a moment) ------------------------
def test_8_a_submission_whose_owner_has_no_name_for_a_moment(course, tmp_path):
    """bob's folder is owned by a uid the name service does not know at that moment (sssd/LDAP
    down during the rush; here: uid 54321, in no passwd file). It is refused as submitted
    "under the name bob from the account uid 54321", on no student's page (bob's is empty), not
    in the instructor's failures, and its key is seen for ever: when the name service is back,
    it is not looked at again."""
    exchange = tmp_path / "exchange"
    folder = submit(exchange, "bob", stamp="1")
    for path in (folder, *folder.iterdir()):
        os.chown(path, 54321, 54321)
    feedback = service(course, tmp_path, trust_names=False)
    feedback.scan()
    overview = feedback.overview()
    print(f"\n[8] records: {[(r.student, r.status) for r in feedback.ledger.all()]}; "
          f"instructor's failures: {overview['failures']}; counts {overview['counts']}")
    assert status_of(feedback, "bob") or any(
        "bob" in json.dumps(item) for item in overview["failures"] + overview["not_recorded"])


# -- 9. a process left behind by a hostile notebook, to slow the next student's grading -----------
ORPHAN = r'''
import os, subprocess, sys, time
for way in range(2):
    try:
        if way == 0:
            subprocess.Popen([sys.executable, "-c",
                              "import time\nwhile True: pass  # ORPHANMARK"],
                             start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        elif os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c",
                                          "while True: pass  # ORPHANMARK"])
            os._exit(0)
    except Exception:
        pass
time.sleep(1.0)
running = [p for p in os.listdir("/proc") if p.isdigit() and
           b"ORPHANMARK" in open(f"/proc/{p}/cmdline", "rb").read()]
if len(running) < 2:
    raise RuntimeError(f"ORPHAN only {len(running)} started")
''' + "\n"


def marked() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and b"ORPHANMARK" in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


@pytest.mark.slow
def test_9_a_hostile_notebook_leaves_no_process_behind(course, tmp_path):
    """mallory's sdpa cell starts two spinning processes in new sessions (Popen, double fork);
    once her grading is over, none may run on (they would take CPU from bob's grading, whose
    checks have time limits)."""
    exchange = tmp_path / "exchange"
    inbox = exchange / "tfcourse" / "inbound"
    answers = {"sdpa-code": ORPHAN + solution_cells(ASSIGNMENT)["sdpa-code"]}
    made = make_submission(tmp_path / "made", ASSIGNMENT, answers)
    folder = inbox / f"mallory+{ASSIGNMENT}+2026-12-01 10:00:00.000000 UTC+r"
    shutil.copytree(made, folder)
    (folder / "timestamp.txt").write_text("x")
    os.chmod(folder, 0o777)
    os.chmod(inbox, 0o733)
    feedback = Service(course, exchange, tmp_path / "state", trust_names=True, jobs=1)
    feedback.scan()
    grade_next(feedback)
    time.sleep(2)
    left = marked()
    for pid in left:                                # ours to end: started by this test
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    record = feedback.ledger.all()[0]
    print(f"\n[9] mallory {record.status} {record.score} (14: both spinners ran in the "
          f"sandbox); processes left running: {left}")
    assert not left


# -- 10. a results file left empty by a crash (no fsync before the rename) -------------------------
def test_10_an_empty_results_file_does_not_stop_the_service(course, tmp_path):
    """The machine loses power after a grading's results were renamed into place but before they
    reached the disk (write_atomically does not fsync; a new file renamed can come back empty on
    ext4), and the record still says grading. On the restart, Ledger.load parses results.json
    outside its try: one such file stops the service from starting at all, for everyone."""
    exchange = tmp_path / "exchange"
    submit(exchange, "mallory", stamp="m")
    submit(exchange, "bob", stamp="b")
    feedback = service(course, tmp_path)
    feedback.scan()
    taken = feedback.next_turn()
    results = feedback.ledger.results_file(taken.key)
    results.parent.mkdir(parents=True)
    results.write_bytes(b"")                     # as a crash may leave it
    again = service(course, tmp_path)
    try:
        again.ledger.load()
        outcome = "started"
    except ValueError as error:
        outcome = f"load raised {type(error).__name__}: {error}"
    import subprocess
    import sys

    again.ledger._lock_file = None
    command = [sys.executable, "-m", "tfcourse", "--course", str(ROOT), "feedback-service",
               "--exchange", str(exchange), "--state", str(tmp_path / "state"), "--no-page",
               "--trust-names"]
    try:
        ran = subprocess.run(command, capture_output=True, text=True, timeout=60)
        outcome += f"; the real command exits {ran.returncode}: {ran.stderr.strip()[-160:]!r}"
    except subprocess.TimeoutExpired:
        outcome += "; the real command runs"
    print(f"\n[10] restart with one empty results.json: {outcome}")
    assert outcome == "started"


# -- 11. a student holds the service's local port ------------------------------------------------------
def test_11_a_student_holding_the_port_stops_the_service(course, tmp_path):
    """docs/jupyterhub.md gives the service a fixed local URL (http://127.0.0.1:10101). Any shell
    account on the hub may bind that port while the service is down (a restart, a crash): the
    hub's proxy then sends every student's page (and their service cookie) to the student's
    process, and the real service, whose listen() fails, exits, its graders with it."""
    import socket
    import subprocess
    import sys

    exchange = tmp_path / "exchange"
    submit(exchange, "bob", stamp="b")
    os.chmod(tmp_path, 0o755)
    holder = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
         "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
         "print(s.getsockname()[1], flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        port = int(holder.stdout.readline())
        env = {**os.environ, "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
               "JUPYTERHUB_SERVICE_PREFIX": "/services/tfcourse-feedback/",
               "JUPYTERHUB_API_TOKEN": "x" * 32, "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api",
               "JUPYTERHUB_CLIENT_ID": "service-tfcourse-feedback"}
        command = [sys.executable, "-m", "tfcourse", "--course", str(ROOT), "feedback-service",
                   "--exchange", str(exchange), "--state", str(tmp_path / "state"),
                   "--trust-names", "--poll", "0.2"]
        try:
            ran = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env)
            outcome = f"exits {ran.returncode}: {ran.stderr.strip()[-200:]!r}"
        except subprocess.TimeoutExpired:
            outcome = "runs"
    finally:
        holder.kill()
        holder.wait()
    records = list((tmp_path / "state" / "records").glob("*.json"))
    print(f"\n[11] port {port} held by nobody: the service {outcome}; records: "
          f"{[json.loads(p.read_text())['status'] for p in records]}")
    assert outcome == "runs"


# -- 12. links and pipes in place of the notebook ----------------------------------------------------
def test_12_links_and_pipes_read_nothing_of_a_classmate(course, tmp_path):
    """mallory (account daemon) submits three folders whose attention.ipynb is a symbolic link
    to a classmate's (nobody's) notebook, a hard link to it, and a named pipe (which would
    block a plain open for ever). Nothing of the classmate's is copied and the watcher goes on
    to the classmate's own submission."""
    exchange = tmp_path / "exchange"
    victim = submit(exchange, "nobody", stamp="v", owner="nobody",
                    notebook=b'{"cells": [], "secret": "BOBSECRET"}')
    os.utime(victim, (T0 + 100, T0 + 100))                  # taken after mallory's
    theirs = victim / "attention.ipynb"
    for n, make in enumerate([lambda p: p.symlink_to(theirs), lambda p: os.link(theirs, p),
                              lambda p: os.mkfifo(p)]):
        folder = submit(exchange, "daemon", stamp=f"d{n}", owner="daemon")
        (folder / "attention.ipynb").unlink()
        make(folder / "attention.ipynb")
        os.utime(folder, (T0 + n, T0 + n))
    feedback = service(course, tmp_path, trust_names=False)
    began = time.monotonic()
    feedback.scan()
    copied = [p.read_bytes() for p in (tmp_path / "state" / "snapshots").rglob("*.ipynb")]
    print(f"\n[12] scan {time.monotonic() - began:.1f} s; daemon: {status_of(feedback, 'daemon')}"
          f"; nobody: {status_of(feedback, 'nobody')}; copies holding the secret: "
          f"{sum(b'BOBSECRET' in c for c in copied)} of {len(copied)}")
    own = list(feedback.ledger.snapshot_folder(feedback.ledger.of_student("nobody")[0].key).glob("*"))
    print(f"[12] the classmate's own snapshot: {[p.name for p in own]} (empty: their notebook, "
          f"hard-linked by mallory, has 2 names and is refused: graded as missing)")
    assert status_of(feedback, "nobody") == [QUEUED]
    mine = [r.key for r in feedback.ledger.of_student("daemon")]
    assert not any(b"BOBSECRET" in p.read_bytes() for key in mine
                   for p in feedback.ledger.snapshot_folder(key).glob("*"))
