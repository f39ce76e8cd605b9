"""`tfcourse feedback-service`'s command: its options, starting and stopping the service
(service.py), and serving its page (app.py) on the hub's address: a port below 1024, kept by this
process alone, and retried while another process holds it."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from tfcourse.course import Course, CourseError
from tfcourse.batch import runner
from tfcourse.batch.cluster import ClusterError, require_distributed
from tfcourse.batch.runner import SideBySideRefused

from . import page
from .ledger import AlreadyRunning
from .service import Service

log = logging.getLogger("tfcourse.feedback")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--exchange", type=Path, required=True,
                        help="nbgrader's exchange root (c.Exchange.root)")
    parser.add_argument("--state", type=Path,
                        help="where the service keeps its queue and results (default: "
                             "COURSE/feedback-service)")
    parser.add_argument("--jobs", type=int,
                        help="submissions graded at once (default: 1; with --scheduler, the "
                             "cluster's worker threads when the service starts)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on the workers of this Dask scheduler (tcp://host:8786, or a "
                             "scheduler file), as `tfcourse grade --scheduler` does")
    parser.add_argument("--skip", nargs="*", default=[],
                        help="checks not graded on submit, shown as such (e.g. "
                             "trained.accuracy: a training too long for the hub's machine)")
    parser.add_argument("--poll", type=float, default=2.0,
                        help="seconds between looks at the exchange (default: 2)")
    parser.add_argument("--lang", help="language of the feedback (default: course.yaml's)")
    parser.add_argument("--instructor", action="append", default=[],
                        help="a hub user who may see every student's page (?student=NAME)")
    parser.add_argument("--trust-names", action="store_true",
                        help="take the student from the submission's name, not its owner: only "
                             "where every server writes as one account (containers). A folder "
                             "is then the named student's only when it holds feedback-key.txt "
                             "with their key (shown on their page, and at api/key); any other "
                             "is recorded as nobody's, ungraded, on no student's page and "
                             "counted against no one's fair use. A key is as safe as students "
                             "keep it: delete STATE/submission-secret to give everyone new keys")
    parser.add_argument("--no-page", action="store_true",
                        help="grade only, serve no page (without a hub)")


def run(course: Course, options) -> int:
    runner.hide_command_line("tfcourse feedback-service")   # no path for student code to read
    keep_port_right_to_self()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    state = options.state or course.root / "feedback-service"
    service = Service(course, options.exchange, state, jobs=options.jobs,
                      lang=options.lang, poll=options.poll, trust_names=options.trust_names,
                      scheduler=options.scheduler, skip=options.skip)
    try:
        if options.scheduler:
            require_distributed()
        service.start()
    except (AlreadyRunning, SideBySideRefused, ClusterError) as error:
        print(f"tfcourse feedback-service: {error}", file=sys.stderr)
        return 2
    log.info("watching %s, %d grader(s), state in %s", service.inbox, service.jobs, state)
    done = threading.Event()

    def stop(number, frame):
        service.stop()
        done.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, stop)
    try:
        if options.no_page:
            done.wait()
            return 0
        return _serve(service, set(options.instructor), done)
    finally:
        service.stop()
        service.give_back()


def _serve(service: Service, instructors: set[str], done: threading.Event) -> int:
    from urllib.parse import urlparse

    try:
        import jupyterhub.services.auth  # noqa: F401  (the hub's login)
        from tornado.ioloop import IOLoop
    except ImportError:
        print("tfcourse feedback-service: the page needs JupyterHub's package: pip install "
              "'tfcourse[hub]' (or pass --no-page)", file=sys.stderr)
        return 2
    url = os.environ.get("JUPYTERHUB_SERVICE_URL")
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
    if not url or not prefix:
        print("tfcourse feedback-service: JUPYTERHUB_SERVICE_URL is not set: start it from "
              "jupyterhub_config.py as a managed service (docs/jupyterhub.md), or pass "
              "--no-page", file=sys.stderr)
        return 2
    from .app import make_app

    address = urlparse(url)
    app = make_app(service, prefix, instructors)
    if not listen(app, address.hostname, address.port or 80, service, done):
        return 0                                # stopped before it could listen
    loop = IOLoop.current()
    threading.Thread(target=lambda: (done.wait(), loop.add_callback(loop.stop)),
                     daemon=True).start()
    loop.start()
    return 0


def keep_port_right_to_self() -> None:
    """The recipe starts the service with the right to bind a port below 1024 (setpriv's ambient
    capability, docs/hub/jupyterhub_config.py): kept by this process, passed to no program it
    starts (graders, students' code). Called before any thread starts (capabilities are each
    thread's)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(47, 4, 0, 0, 0)              # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    except (OSError, AttributeError):
        pass


UNPRIVILEGED = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")
LISTEN_SECONDS = 10         # between tries to listen on a port another process holds


def port_warning(port: int) -> str:
    """Why `port` is not safe for the service ("" when it is): any account on the machine may
    bind it (from net.ipv4.ip_unprivileged_port_start up), so a student's process that holds it
    while the service restarts would receive every student's requests, and their hub cookies."""
    try:
        first = int(UNPRIVILEGED.read_text().strip())
    except (OSError, ValueError):
        first = 1024
    if port < first:
        return ""
    return (f"port {port} can be bound by any account on this machine (from {first} up: "
            f"net.ipv4.ip_unprivileged_port_start): a student's process holding it while the "
            f"service restarts would receive every student's requests, with their login "
            f"cookies; give the service a port below {first} (docs/jupyterhub.md)")


def listen(app, host: str | None, port: int, service: Service, done: threading.Event) -> bool:
    """Listen on host:port; while another process holds it, say so (the log, the instructor's
    page once it is served) and try again every LISTEN_SECONDS, the graders working meanwhile.
    False: stopped before it could."""
    warning = port_warning(port)
    if warning:
        log.error("UNSAFE: %s", warning)
    since = page.when(service.clock())
    while not done.is_set():
        try:
            app.listen(port, host)
        except OSError as error:
            service.listen = (f"Could not listen on {host}:{port} ({error.strerror}) since "
                              f"{since}: another process holds the "
                              f"port? Tried again every {LISTEN_SECONDS} s; grading goes on.")
            log.error("%s", service.listen)
            done.wait(LISTEN_SECONDS)
            continue
        service.listen = f"Unsafe: {warning}" if warning else ""
        return True
    return False


def main(course: Course, options) -> int:
    try:
        return run(course, options)
    except CourseError as error:
        print(f"tfcourse feedback-service: {error}", file=sys.stderr)
        return 2
