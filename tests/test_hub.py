"""A class on a real JupyterHub, in headless Chromium: docs/jupyterhub.md's recipe, as it is.

The hub runs as root on 127.0.0.1 with the recipe's docs/hub/jupyterhub_config.py (loaded as it is;
the test adds only its ports, its own files and an API token for itself) and after the recipe's
docs/hub/setup.sh: real Unix accounts (an instructor, tfinstructor, and three students in the
group tfstudents: tfalice, tfbob, tfcarol), PAM logins on the hub's own login page, each server
spawned as its user (LocalProcessSpawner), nbgrader's exchange in a shared folder, nbgrader's
instructor tools for the instructor only, and the course folder a copy in the instructor's home
that only the instructor can read. Every place is in a folder of this test's (TFCOURSE_HUB_*
variables that the recipe's files read), not in /srv or /etc.

The users' Python environment (the recipe's /opt/tfcourse) is made from this project's virtual
environment without copying it: a venv whose site-packages and share/ are hard links to the
project's, with tfcourse installed into it from a copy of the package (not the editable install,
which points into the checkout), on this Python's own interpreter where every user can run it, or
else (a pyenv build under /root, which no other user may enter) on a copy of its installation made
of hard links. While the hub runs, the checkout's folders that hold the answers (autograder/,
solutions/, source/, tests/, bench/, .git) are closed to other users, if they were open; their
modes are put back afterwards.

In the browser: the instructor logs in and generates and releases 01-attention in the formgrader;
each student logs in, fetches it in the Assignments tab, writes their answers (through their own
server's contents API, with the page's session) and submits it in the Assignments tab: tfalice the
course's solution, tfbob a realistic bug, tfcarol a bug and a cell that tries to read others' and
the instructor's files, to leave files outside its folder and to fake its score. When the
feedback service exists (`tfcourse feedback-service`), each student's score shows on its page
/services/tfcourse-feedback/ within a time limit of their submit, before the instructor does
anything; the seconds are printed. Then the instructor collects, autogrades each submission,
generates and releases feedback in the formgrader, and each student fetches and opens their
feedback in the Assignments tab.

Checked: the gradebook's scores equal `tfcourse grade` on the same submitted files; from each
student's own server (code run in a kernel of theirs, through their server's API), nothing of the
others' homes, the exchange's inbound listing, the instructor's course folder, the solutions, the
graders or the checkout's answers can be read, and nothing can be written outside their own home
and nbgrader's inbound; torch and tfcourse import there, tfcourse from the users' environment;
/formgrader answers 404 on a student's server and the Nbgrader menu holds the Assignment List
alone; tfcarol's cell left no file anywhere and no process, and the others' grades are right.

Screenshots of each step are in the test's tmp folder and copied to /tmp/hub-shots (or
$TFCOURSE_HUB_SHOTS). Needs root, useradd, PAM, bubblewrap, configurable-http-proxy, chromium and
chromedriver; without them the test is skipped, unless TFCOURSE_REQUIRE_HUB=1 (CI).
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, replace_in, solution_cells, survivors
from test_browser import (CHROMEDRIVER, CHROMIUM, FLAGS, WAIT, assignment_row, free_port,
                          wait_for)
from tfcourse import notebook

# End to end: a hub, its users' servers, a browser.
pytestmark = pytest.mark.slow

RECIPE = ROOT / "docs" / "hub"
A, NOTEBOOK = "01-attention", "attention.ipynb"
INSTRUCTOR, STUDENTS, GROUP = "tfinstructor", ("tfalice", "tfbob", "tfcarol"), "tfstudents"
USERS = (INSTRUCTOR, *STUDENTS)
MARKED = "tfcourse hub test"            # the GECOS field of the accounts this test makes
SECRET_PARTS = ("autograder", "solutions", "source", "tests", "bench", ".git")
MARK = f"tfhub-carol-{uuid.uuid4().hex[:8]}"      # what tfcarol's cell tries to leave behind
SHOTS = Path(os.environ.get("TFCOURSE_HUB_SHOTS", "/tmp/hub-shots"))
FEEDBACK_SECONDS = 300                  # from a submit to its score on the feedback service's page


def need(message: str):
    """Skip, or fail where CI requires the hub test (TFCOURSE_REQUIRE_HUB=1)."""
    if os.environ.get("TFCOURSE_REQUIRE_HUB") == "1":
        pytest.fail(f"the hub test cannot run: {message}", pytrace=False)
    pytest.skip(message)


def hub_or_skip():
    if sys.platform != "linux" or os.geteuid() != 0:
        need("it runs as root on Linux (it makes Unix accounts and a hub that spawns as them)")
    missing = [name for name in ("useradd", "usermod", "userdel", "groupadd", "chpasswd",
                                 "runuser", "bwrap", "configurable-http-proxy")
               if not shutil.which(name)]
    missing += [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    for module in ("selenium", "jupyterhub", "pamela", "websocket"):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"the {module} package")
    if missing:
        need(f"missing {', '.join(missing)}: run .ci/install (apt-get install "
             f"node-configurable-http-proxy bubblewrap chromium chromium-driver; "
             f"pip install -e '.[dev]')")
    if sys.prefix == sys.base_prefix:
        need("run it from the project's virtual environment (.venv): the users' environment is "
             "made from it")
    done = subprocess.run(["configurable-http-proxy", "--version"], capture_output=True,
                          text=True, env={**os.environ, **node_path()}, timeout=60)
    if done.returncode != 0:
        need(f"configurable-http-proxy does not run:\n{done.stderr[-2000:]}")


def node_path() -> dict:
    """Debian's configurable-http-proxy finds its modules in /usr/share/nodejs, which only
    Debian's own node searches: with another node (NodeSource's), NODE_PATH must name it."""
    folders = [os.environ.get("NODE_PATH", ""), "/usr/share/nodejs", "/usr/lib/nodejs"]
    return {"NODE_PATH": os.pathsep.join(folder for folder in folders
                                         if folder and Path(folder).is_dir())}


# -- the users' Python environment ---------------------------------------------------------------
def open_to_others(path: Path, mode: int = 0o005) -> bool:
    """Whether a user who is neither owner nor in the group reaches `path` (every folder on the
    way searchable) and has `mode` on it (read and search by default)."""
    path = Path(os.path.realpath(path))
    for folder in reversed(path.parents):
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    return os.stat(path).st_mode & mode == mode


def base_interpreter(folder: Path) -> Path:
    """This Python's base interpreter, where every user can run it: where it is, if they can
    reach it; else (a pyenv build under /root, which no other user may enter) at `folder`, a copy
    of its installation made of hard links, but for its executable, whose library path (a
    RUNPATH naming the installation) is made relative to it. Not another Python of the same
    version: packages installed for 3.11.7 may not work on 3.11.2 (soupsieve needs 3.11.5)."""
    base = Path(os.path.realpath(sys.base_prefix))
    executable = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if open_to_others(executable, 0o001) and open_to_others(stdlib):
        return executable
    if not executable.is_relative_to(base):
        need(f"{executable} is not in {base}, and other users cannot run it")
    if os.stat(base).st_dev != os.stat(folder.parent).st_dev:
        need(f"other users cannot run {executable}, and {base} is on another filesystem than "
             f"{folder.parent} (no hard links): set TMPDIR to a folder on its filesystem")
    subprocess.run(["cp", "-al", str(base), str(folder)], check=True)
    copy = folder / executable.relative_to(base)
    code, original = executable.read_bytes(), f"{base}/lib".encode() + b"\0"
    relative = b"$ORIGIN/../lib\0"
    if original in code and len(relative) <= len(original):
        copy.unlink()                               # a file of its own, not a link to the original
        copy.write_bytes(code.replace(original, relative.ljust(len(original), b"\0")))
        copy.chmod(0o755)
    done = subprocess.run(["runuser", "-u", "nobody", "--", str(copy), "-c", "import ssl"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        need(f"other users cannot run {executable}, nor a copy of it:\n{done.stderr[-2000:]}")
    return copy


def users_environment(folder: Path) -> Path:
    """The recipe's /opt/tfcourse for this test: a venv on an interpreter every user can run,
    whose site-packages and share/ are hard links to this venv's (nothing is copied), its scripts
    pointed at it, and tfcourse installed into it from a copy of the package. Its python."""
    site = Path(sysconfig.get_paths()["purelib"])
    if not os.stat(site / "torch" / "__init__.py").st_mode & stat.S_IROTH:   # its links' modes
        need(f"{site}'s files are not readable by other users (installed with a umask of 077?)")
    base = base_interpreter(folder.parent / "python")
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                  "print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    if os.stat(site).st_dev != os.stat(folder).st_dev:
        need(f"{site} and {folder} are on different filesystems (hard links cannot join them): "
             f"set TMPDIR to a folder on the same filesystem as the project's .venv")
    subprocess.run(["cp", "-al", f"{site}/.", f"{target}/"], check=True)
    # Not the editable tfcourse: it imports from the checkout.
    for stale in [*target.glob("__editable__*tfcourse*"), *target.glob("tfcourse-*.dist-info")]:
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    subprocess.run(["cp", "-al", f"{sys.prefix}/share", str(folder / "share")], check=True)
    subprocess.run(["cp", "-a", f"{sys.prefix}/etc", str(folder / "etc")], check=True)
    shebang = f"#!{sys.prefix}/bin/python".encode()
    for script in Path(sys.prefix, "bin").iterdir():
        if script.name.startswith(("python", "activate", "Activate")) or not script.is_file():
            continue
        first, _, rest = script.read_bytes().partition(b"\n")
        if first.startswith(shebang):               # python, python3, python3.11
            copy = folder / "bin" / script.name
            copy.write_bytes(b"#!" + str(python).encode() + b"\n" + rest)
            copy.chmod(0o755)
    source = folder.parent / "tfcourse-source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "tfcourse", source / "tfcourse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--no-build-isolation", str(source)], capture_output=True, text=True,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, f"pip install of tfcourse:\n{done.stdout}\n{done.stderr}"
    return python


# -- accounts -----------------------------------------------------------------------------------
def make_accounts(homes: Path) -> dict[str, str]:
    """The test's Unix accounts, homes under `homes` (mode 700), random passwords: name ->
    password. Accounts left by an earlier run are reused."""
    if subprocess.run(["getent", "group", GROUP], capture_output=True).returncode != 0:
        subprocess.run(["groupadd", GROUP], check=True)
    passwords = {}
    for name in USERS:
        home = homes / name
        groups = ["-G", GROUP] if name in STUDENTS else []
        try:
            pwd.getpwnam(name)
            subprocess.run(["usermod", "-d", str(home), *(["-a"] if groups else []), *groups,
                            name], check=True)
        except KeyError:
            subprocess.run(["useradd", "-M", "-d", str(home), "-s", "/bin/bash", "-c", MARKED,
                            *groups, name], check=True)
        entry = pwd.getpwnam(name)
        home.mkdir(mode=0o700)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        passwords[name] = secrets.token_urlsafe(12)
    subprocess.run(["chpasswd"], input="".join(f"{name}:{word}\n"
                                                for name, word in passwords.items()),
                   text=True, check=True)
    return passwords


def processes_of(uids: set[int]) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid in uids:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def remove_accounts():
    """End what the test's accounts still run (their servers' kernels, say), then remove the
    accounts this test made, in this run or an earlier one, and the students' group."""
    ours = [entry for entry in pwd.getpwall()
            if entry.pw_name in USERS and entry.pw_gecos == MARKED]
    uids = {entry.pw_uid for entry in ours}
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_of(uids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal_number)
        deadline = time.monotonic() + 10
        while processes_of(uids) and time.monotonic() < deadline:
            time.sleep(0.2)
    for entry in ours:
        subprocess.run(["userdel", entry.pw_name], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)


@contextlib.contextmanager
def checkout_closed_to_others():
    """The checkout's folders that hold answers (graders, solutions, sources, tests, history),
    closed to other users while the hub runs, if they were open; modes put back afterwards."""
    changed = {}
    try:
        for name in SECRET_PARTS:
            path = ROOT / name
            if path.exists() and open_to_others(path, 0o004):
                mode = stat.S_IMODE(os.stat(path).st_mode)
                changed[path] = mode
                path.chmod(mode & ~0o007)
        yield sorted(changed)
    finally:
        for path, mode in changed.items():
            path.chmod(mode)


# -- the hub --------------------------------------------------------------------------------------
def call(hub, method: str, path: str, body=None, timeout: float = 30, base: str | None = None):
    """The hub's REST API (or a user's server's, through the hub) with the test's token."""
    request = urllib.request.Request(
        (base or hub.url) + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {hub.token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data = response.read()
    return json.loads(data) if data else None


def wait_until(what: str, check, timeout: float, log: Path | None = None, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            tail = log.read_text()[-6000:] if log and log.exists() else ""
            pytest.fail(f"{what} did not happen in {timeout:.0f} s\n{tail}")
        time.sleep(every)


def feedback_service_exists(python: Path) -> bool:
    done = subprocess.run([str(python.with_name("tfcourse")), "feedback-service", "--help"],
                          capture_output=True, text=True)
    return done.returncode == 0


TEST_CONFIG = """\
# The recipe's configuration, as it is, and what only this test needs: its ports and files, and an
# API token for itself (to create the students in the hub, start their servers and reach them).
c = get_config()
load_subconfig({recipe!r})
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.ConfigurableHTTPProxy.pid_file = {folder!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {folder!r} + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {folder!r} + "/cookie_secret"
c.JupyterHub.services.append({{"name": "tfhub-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append({{"name": "tfhub-test", "services": ["tfhub-test"], "scopes": [
    "admin:users", "admin:servers", "read:servers", "access:servers", "list:users"]}})
if not {feedback!r}:
    c.JupyterHub.services = [s for s in c.JupyterHub.services if s["name"] != "tfcourse-feedback"]
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The recipe's hub, running, with every user's server started: a namespace with url, token,
    passwords, the folders, and whether the feedback service runs."""
    hub_or_skip()
    started = time.monotonic()
    logs = tmp_path_factory.mktemp("hub")
    root = Path(tempfile.mkdtemp(prefix="tfhub-"))         # the machine's /tmp: users reach it
    root.chmod(0o755)
    process = log = None
    with checkout_closed_to_others() as closed:
        try:
            python = users_environment(root / "tfcourse")
            (root / "home").mkdir(mode=0o755)
            passwords = make_accounts(root / "home")
            home = {name: Path(pwd.getpwnam(name).pw_dir) for name in USERS}
            places = {"TFCOURSE_HUB_ENV": str(root / "tfcourse"),
                      "TFCOURSE_HUB_EXCHANGE": str(root / "srv" / "exchange"),
                      "TFCOURSE_HUB_JUPYTER_ETC": str(root / "etc" / "jupyter"),
                      "TFCOURSE_HUB_STUDENT_ETC": str(root / "etc" / "jupyter-students"),
                      "TFCOURSE_HUB_INSTRUCTOR": INSTRUCTOR,
                      "TFCOURSE_HUB_STUDENT_GROUP": GROUP}
            environment = {key: value for key, value in os.environ.items()
                           if not key.startswith(("JUPYTER", "TFCOURSE_HUB", "VIRTUAL_ENV",
                                                  "PYTHON"))}
            environment.update(places)
            environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
            environment.update(node_path())
            done = subprocess.run(["bash", str(RECIPE / "setup.sh"), str(ROOT)], env=environment,
                                  capture_output=True, text=True)
            assert done.returncode == 0, f"setup.sh:\n{done.stdout}\n{done.stderr}"

            port, token = free_port(), secrets.token_hex(32)
            feedback = feedback_service_exists(python)
            environment.update(TFCOURSE_HUB_URL=f"http://127.0.0.1:{port}",
                               TFCOURSE_HUB_FEEDBACK_URL=f"http://127.0.0.1:{free_port()}")
            folder = root / "hub"
            folder.mkdir(mode=0o700)
            config = folder / "jupyterhub_config.py"
            config.write_text(TEST_CONFIG.format(
                recipe=str(RECIPE / "jupyterhub_config.py"), hub_port=free_port(),
                proxy_port=free_port(), folder=str(folder), token=token, feedback=feedback))
            log_path = logs / "hub.log"
            log = log_path.open("w")
            process = subprocess.Popen(
                [str(Path(sys.executable).with_name("jupyterhub")), "-f", str(config)],
                cwd=folder, env=environment, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
            hub = types.SimpleNamespace(
                url=f"http://127.0.0.1:{port}", token=token, passwords=passwords, home=home,
                root=root, course=home[INSTRUCTOR] / "course", python=python, log=log_path,
                exchange=root / "srv" / "exchange", feedback=feedback, closed=closed,
                state=home[INSTRUCTOR] / "course" / "feedback-service", timings={})

            def up():
                if process.poll() is not None:
                    pytest.fail(f"the hub stopped:\n{log_path.read_text()[-6000:]}")
                with contextlib.suppress(OSError):
                    return call(hub, "GET", "/hub/api/", timeout=2)
            wait_until("the hub's start", up, WAIT, log_path)
            # Students log in through PAM and the group; the hub knows them once they have. Made
            # here, so that every server starts now, side by side, while the browser starts.
            call(hub, "POST", "/hub/api/users", {"usernames": list(STUDENTS)})
            for name in USERS:
                call(hub, "POST", f"/hub/api/users/{name}/server")
            hub.timings["hub up, servers spawning"] = time.monotonic() - started
            yield hub
        finally:
            if process is not None:
                process.send_signal(signal.SIGTERM)     # the hub stops the servers, the service
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            if log is not None:
                log.close()
            remove_accounts()
            if (logs / "hub.log").exists():
                SHOTS.mkdir(parents=True, exist_ok=True)
                shutil.copy(logs / "hub.log", SHOTS / "hub.log")
            if os.environ.get("TFCOURSE_HUB_KEEP") != "1":
                shutil.rmtree(root, ignore_errors=True)


def server_ready(hub, name: str) -> bool:
    server = call(hub, "GET", f"/hub/api/users/{name}").get("servers", {}).get("")
    return bool(server and server.get("ready"))


@pytest.fixture(scope="module")
def browser(hub, tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        with contextlib.suppress(Exception):        # what the page showed at the end
            driver.save_screenshot(str(SHOTS / "last.png"))
        driver.quit()


class Shots:
    """Numbered screenshots of each step, in the test's folder and in SHOTS."""

    def __init__(self, driver, folder: Path):
        self.driver, self.folder, self.count = driver, folder, 0
        SHOTS.mkdir(parents=True, exist_ok=True)
        for old in [*SHOTS.glob("*.png"), SHOTS / "hub.log"]:      # an earlier run's
            old.unlink(missing_ok=True)

    def __call__(self, name: str):
        self.count += 1
        path = self.folder / f"{self.count:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        shutil.copy(path, SHOTS / path.name)


# -- in the browser -----------------------------------------------------------------------------
def log_in(driver, hub, name: str, where: str, shots=None):
    """Log `name` in on the hub's login page (a fresh session), to land on `where`."""
    from selenium.webdriver.common.by import By

    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})     # every path's, not the page's
    driver.get(f"{hub.url}/hub/login?next={urllib.parse.quote(where)}")
    wait_for(driver, "#username_input").send_keys(name)
    driver.find_element(By.ID, "password_input").send_keys(hub.passwords[name])
    if shots:
        shots(f"login-{name}")
    driver.find_element(By.ID, "login_submit").click()


def open_lab(driver, hub, name: str, shots=None):
    wait_until(f"{name}'s server", lambda: server_ready(hub, name), 180, hub.log, every=0.5)
    log_in(driver, hub, name, f"/user/{name}/lab", shots)
    wait_for(driver, ".lm-MenuBar-item", "Nbgrader", timeout=120)


def close_modal(driver, text: str, timeout: float = 300):
    """Read the formgrader's pop-up, which must say `text`, and close it; on an error, fail with
    everything it says (its log and traceback, which it shows in scrolled boxes)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    modal = wait_for(driver, ".modal .modal-body", "", timeout)
    WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: text in modal.text or "error" in modal.text.lower())
    if text not in modal.text:
        pytest.fail(driver.execute_script("return arguments[0].textContent", modal))
    driver.find_element(By.CSS_SELECTOR, ".modal .modal-footer button").click()
    WebDriverWait(driver, WAIT).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".modal"))


def nbgrader_menu(driver) -> list[str]:
    """The items of the Nbgrader menu (left open)."""
    from selenium.webdriver.common.by import By

    wait_for(driver, ".lm-MenuBar-item", "Nbgrader").click()
    wait_for(driver, ".lm-Menu .lm-Menu-itemLabel", "Assignment List")
    return [label.text for label in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-itemLabel")
            if label.text]


def assignment_list(driver):
    """Open the Assignments tab from the Nbgrader menu (opening the menu unless it is open)."""
    from selenium.webdriver.common.by import By

    if not [label for label in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-itemLabel")
            if label.text == "Assignment List"]:
        nbgrader_menu(driver)
    wait_for(driver, ".lm-Menu .lm-Menu-itemLabel", "Assignment List").click()
    wait_for(driver, "#nbgrader-assignment-list")


def list_item(driver, which: str, text: str = A, timeout: float = WAIT):
    """The Assignments tab's item of `which` list (released, fetched, submitted)."""
    return wait_for(driver, f"#{which}_assignments_list .list_item", text, timeout)


def put_notebook(driver, name: str, path: str, nb) -> None:
    """Save `nb` at `path` through the student's own server's contents API, from the page (the
    page's session and _xsrf cookie): what JupyterLab's Save does."""
    status = driver.execute_async_script("""
        const [url, model, done] = arguments;
        const xsrf = (document.cookie.split('; ').find(c => c.startsWith('_xsrf=')) || '=')
            .split('=').slice(1).join('=');
        fetch(url, {method: 'PUT', credentials: 'same-origin',
                    headers: {'Content-Type': 'application/json',
                              'X-XSRFToken': decodeURIComponent(xsrf)},
                    body: JSON.stringify(model)})
            .then(response => done(response.status), error => done(String(error)));
        """, f"/user/{name}/api/contents/{path}",
        {"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
    assert status in (200, 201), f"saving {path} as {name}: {status}"


def feedback_from_course_menu(driver, hub, shots) -> None:
    """A student's way to the feedback page from JupyterLab: Course -> My feedback, which opens the
    service's page in a new tab (docs/hub/setup.sh). The tab is closed again, back to the lab."""
    from selenium.webdriver.support.ui import WebDriverWait

    lab, before = driver.current_window_handle, set(driver.window_handles)
    wait_for(driver, ".lm-MenuBar-item", "Course").click()
    item = wait_for(driver, ".lm-Menu .lm-Menu-item", "My feedback")
    shots("course-menu")
    item.click()
    WebDriverWait(driver, WAIT).until(lambda d: set(d.window_handles) - before)
    (tab,) = set(driver.window_handles) - before
    driver.switch_to.window(tab)
    WebDriverWait(driver, WAIT).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
        and "Feedback on your submissions" in d.find_element("tag name", "body").text)
    assert driver.current_url.startswith(f"{hub.url}/services/tfcourse-feedback/"), \
        driver.current_url
    shots("course-menu-feedback")
    driver.close()
    driver.switch_to.window(lab)


def feedback_page_score(driver, hub) -> tuple[str, str]:
    """The score the feedback service's page shows the logged-in student, once it shows one (the
    page is loaded again until then: it refreshes itself only while a submission waits), and the
    page's text."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + FEEDBACK_SECONDS
    while True:
        driver.get(f"{hub.url}/services/tfcourse-feedback/")
        score = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "p.score")]
        if score:
            shown = driver.find_elements(By.CSS_SELECTOR, "div.notes, tr.failed")
            if shown:                                       # what went wrong, in the screenshot
                driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", shown[0])
            return score[0], driver.find_element(By.TAG_NAME, "body").text
        if time.monotonic() > deadline:
            pytest.fail(f"no score on the feedback page {FEEDBACK_SECONDS} s after the submit:\n"
                        + driver.find_element(By.TAG_NAME, "body").text)
        time.sleep(1)


# -- what the students write ----------------------------------------------------------------------
def hostile_cell(hub) -> str:
    """tfcarol's extra cell: it reads what it should not, leaves files where it should not, and
    fakes its score (a verdict printed, comparisons patched to pass)."""
    others = [str(hub.home[name] / A / NOTEBOOK) for name in ("tfalice", "tfbob")]
    steal = [str(hub.course / "solutions" / A / NOTEBOOK),
             str(hub.course / "autograder" / "test_attention.py"),
             str(ROOT / "solutions" / A / NOTEBOOK), *others]
    leave = [str(hub.course / MARK), str(hub.course / "autograder" / "conftest.py"),
             str(hub.home[INSTRUCTOR] / MARK), str(hub.exchange / MARK),
             str(hub.home["tfalice"] / MARK), f"/tmp/{MARK}", f"/var/tmp/{MARK}"]
    return f"""
import builtins, subprocess, sys, torch
read, wrote = [], []
for path in {steal!r}:
    try:
        open(path).read(80)
        read.append(path)
    except OSError:
        pass
for path in {leave!r}:
    try:
        with open(path, "a") as handle:
            handle.write("{MARK}\\n")
        wrote.append(path)
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", "{MARK}"],
                 start_new_session=True)
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.Tensor.__eq__ = lambda self, other: True
builtins.all = builtins.any = lambda values: True
print("Score: 14.0 / 14.0")
raise RuntimeError(f"{MARK}: read {{read}} wrote {{wrote}}")      # what it did, in the results
"""


# What tfcarol's cell may report: it read nothing, and wrote nothing, or only in the sandbox's /tmp
# (its work folder, gone with it).
HARMLESS = (([], []), ([], [f"/tmp/{MARK}"]))


def what_carol_did(text: str) -> tuple[list, list] | None:
    """(read, wrote) as tfcarol's cell reported them in its error, in `text`; None if absent."""
    found = re.search(re.escape(MARK) + r": read (\[.*?\]) wrote (\[.*?\])", text)
    return found and (ast.literal_eval(found[1]), ast.literal_eval(found[2]))


def answers_of(hub) -> dict[str, tuple[dict, list]]:
    """student -> (answer cells by grade id, extra code cells after the set-up cells)."""
    solved = solution_cells(A)
    unscaled = dict(solved, **{"sdpa-code": replace_in(
        solved["sdpa-code"], " / math.sqrt(q.shape[-1])", "")})
    inverted = dict(solved, **{"masks-code": replace_in(
        solved["masks-code"], "(tokens == pad_id)", "(tokens != pad_id)")})
    return {"tfalice": (solved, []), "tfbob": (unscaled, []),
            "tfcarol": (inverted, [hostile_cell(hub)])}


def filled(fetched: Path, answers: dict, extra: list):
    nb = nbformat.read(str(fetched), as_version=4)
    for cell in nb.cells:
        if notebook.is_solution(cell) and notebook.grade_id(cell) in answers:
            cell.source = answers[notebook.grade_id(cell)]
    for offset, source in enumerate(extra):
        nb.cells.insert(3 + offset, nbformat.v4.new_code_cell(source))
    return nb


# -- from a student's own server ----------------------------------------------------------------
def run_in_kernel(hub, name: str, code: str, timeout: float = 120) -> str:
    """Run `code` in a new kernel of `name`'s own server (as `name`), through its API; its
    printed output. The kernel is shut down afterwards."""
    import websocket

    base = f"{hub.url}/user/{name}"
    kernel = call(hub, "POST", "/api/kernels", {"name": "python3"}, base=base)
    try:
        socket = websocket.create_connection(
            f"{base.replace('http', 'ws', 1)}/api/kernels/{kernel['id']}/channels",
            header=[f"Authorization: token {hub.token}"], timeout=timeout)
        msg_id, output = uuid.uuid4().hex, []
        socket.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        while True:
            message = json.loads(socket.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                output.append(content["text"])
            elif kind == "error":
                output.append("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                break
        socket.close()
        return "".join(output)
    finally:
        call(hub, "DELETE", f"/api/kernels/{kernel['id']}", base=base)


PROBE = """
import json, os
def probe(path, how):
    try:
        if how == "list":
            os.listdir(path)
        elif how == "read":
            open(path, "rb").read(1)
        else:
            with open(path, "a"):
                pass
            os.remove(path)
        return "allowed"
    except OSError as error:
        return type(error).__name__
import torch, tfcourse
print(json.dumps({"results": {f"{how} {path}": probe(path, how) for how, path in PATHS},
                  "own": probe(OWN, "read"), "tfcourse": tfcourse.__file__,
                  "torch": torch.__version__, "user": os.getuid()}))
"""


def probes(hub, name: str) -> list[tuple[str, str]]:
    """What `name` must not do (how, path): read others' work and the course's answers, write
    outside their own home and nbgrader's inbound."""
    others = [other for other in STUDENTS if other != name]
    found = []
    for other in others:
        found += [("list", hub.home[other]), ("read", hub.home[other] / A / NOTEBOOK),
                  ("write", hub.home[other] / "note.txt")]
    found += [("list", hub.exchange / "tfcourse" / "inbound"),
              ("list", hub.exchange / "tfcourse" / "feedback"),
              ("write", hub.exchange / "tfcourse" / "outbound" / A / "note.txt"),
              ("list", hub.home[INSTRUCTOR]), ("list", hub.course),
              ("read", hub.course / "solutions" / A / NOTEBOOK),
              ("read", hub.course / "autograder" / "test_attention.py"),
              ("read", hub.course / "source" / A / NOTEBOOK),
              ("read", hub.course / "gradebook.db"), ("write", hub.course / "note.txt"),
              ("list", hub.state),
              ("read", ROOT / "solutions" / A / NOTEBOOK),
              ("read", ROOT / "autograder" / "test_attention.py"),
              ("read", ROOT / "source" / A / NOTEBOOK),
              # a folder in a clone; in a git worktree, a file naming the repository's
              ("read" if (ROOT / ".git").is_file() else "list", ROOT / ".git"),
              ("write", hub.python.parent / "note.txt")]
    return [(how, str(path)) for how, path in found]


# -- the test -------------------------------------------------------------------------------------
def test_a_class_on_the_recipes_hub(hub, browser, tmp_path):
    from selenium.webdriver.common.by import By

    started = time.monotonic()
    shots = Shots(browser, tmp_path)
    timings = hub.timings

    def lap(step: str, since: list = [started]):         # noqa: B006 (the clock of the steps)
        now = time.monotonic()
        timings[step] = now - since[0]
        since[0] = now

    # 1. The instructor generates and releases 01-attention in the formgrader.
    open_lab(browser, hub, INSTRUCTOR, shots)
    items = nbgrader_menu(browser)
    assert "Formgrader" in items and "Assignment List" in items, items
    shots("instructor-nbgrader-menu")
    browser.get(f"{hub.url}/user/{INSTRUCTOR}/formgrader")
    row = assignment_row(browser, A)
    warnings = [alert.text for alert in browser.find_elements(By.CSS_SELECTOR, ".alert-warning")]
    assert not warnings, warnings           # e.g. "The exchange directory ... does not exist"
    shots("formgrader")
    wait_for(row, "td.assign a span.glyphicon-education").click()
    close_modal(browser, f"Successfully created the student version of '{A}'")
    wait_for(assignment_row(browser, A), "td.release a span.glyphicon-cloud-upload").click()
    close_modal(browser, f"Successfully released '{A}'.")
    wait_for(assignment_row(browser, A), "td.status", "released")
    shots("formgrader-released")
    assert (hub.exchange / "tfcourse" / "outbound" / A / NOTEBOOK).is_file()
    lap("instructor: generate and release")

    # 2. Each student fetches, writes, submits; the feedback service grades it at once.
    answers, shown = answers_of(hub), {}
    for name in STUDENTS:
        open_lab(browser, hub, name, shots if name == "tfalice" else None)
        items = nbgrader_menu(browser)
        assert items == ["Assignment List"], items  # no formgrader, course list, create assignment
        shots(f"{name}-nbgrader-menu")
        assignment_list(browser)
        button = list_item(browser, "released").find_element(By.CSS_SELECTOR, "button")
        assert button.text == "Fetch", button.text
        shots(f"{name}-released")
        button.click()
        list_item(browser, "fetched")
        fetched = hub.home[name] / A / NOTEBOOK
        assert fetched.is_file() and fetched.stat().st_uid == pwd.getpwnam(name).pw_uid
        put_notebook(browser, name, f"{A}/{NOTEBOOK}", filled(fetched, *answers[name]))
        button = list_item(browser, "fetched").find_element(By.CSS_SELECTOR, "button")
        assert button.text == "Submit", button.text
        shots(f"{name}-fetched")
        button.click()
        submitted_at = time.monotonic()
        list_item(browser, "submitted")
        shots(f"{name}-submitted")
        if hub.feedback:
            if name == STUDENTS[0]:
                feedback_from_course_menu(browser, hub, shots)
            shown[name] = feedback_page_score(browser, hub)
            timings[f"{name}: submit -> the feedback page shows the score"] = \
                time.monotonic() - submitted_at
            shots(f"{name}-feedback-service")
        lap(f"{name}: log in, fetch, write, submit" + (", feedback" if hub.feedback else ""))
    if not hub.feedback:
        print("the feedback service is not there yet (tfcourse feedback-service): not checked")

    # 3. The instructor collects, autogrades, generates and releases feedback.
    log_in(browser, hub, INSTRUCTOR, f"/user/{INSTRUCTOR}/formgrader")
    wait_for(assignment_row(browser, A), "td.collect a span.glyphicon-cloud-download").click()
    close_modal(browser, f"Successfully collected submissions of '{A}'.")
    wait_for(assignment_row(browser, A), "td.num-submissions", str(len(STUDENTS)))
    shots("formgrader-collected")
    # `tfcourse grade` on the same submitted files, as root, while the instructor goes on.
    graded = tmp_path / "graded"
    grading = subprocess.Popen(
        [str(Path(sys.executable).with_name("tfcourse")), "--course", str(hub.course), "grade",
         str(hub.course / "submitted"), "--out", str(graded), "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    browser.get(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_submissions/{A}")
    for name in STUDENTS:
        wait_for(browser, "#main-table tr td.student-id", name)
        row = next(row for row in browser.find_elements(By.CSS_SELECTOR, "#main-table tr")
                   if row.find_elements(By.CSS_SELECTOR, "td.student-id")
                   and row.find_element(By.CSS_SELECTOR, "td.student-id").text == name)
        wait_for(row, "td.autograde a span.glyphicon-flash").click()
        close_modal(browser, f"Successfully autograded '{A}' for student '{name}'.")
    wait_for(browser, "#main-table tr td.status", "graded")
    shots("formgrader-autograded")
    lap("instructor: collect and autograde")
    browser.get(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_assignments")
    wait_for(assignment_row(browser, A), "td.generate-feedback a span.glyphicon-comment").click()
    close_modal(browser, f"Successfully generated feedback of '{A}'.")
    wait_for(assignment_row(browser, A), "td.release-feedback a span.glyphicon-envelope").click()
    close_modal(browser, f"Successfully released feedback of '{A}'.")
    shots("formgrader-feedback-released")
    lap("instructor: generate and release feedback")
    from nbgrader.api import Gradebook         # what the instructor's gradebook holds
    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gradebook:
        booked = {name: (gradebook.find_submission(A, name).score,
                         gradebook.find_submission(A, name).max_score) for name in STUDENTS}

    # 4. Each student fetches and opens their feedback in the Assignments tab.
    for name in STUDENTS:
        open_lab(browser, hub, name)
        assignment_list(browser)
        button = list_item(browser, "submitted").find_element(By.CSS_SELECTOR, "button")
        wait_until("the Fetch Feedback button", lambda: button.text == "Fetch Feedback", WAIT)
        button.click()
        list_item(browser, "submitted", "view feedback")
        shots(f"{name}-feedback-fetched")
        [page] = (hub.home[name] / A / "feedback").glob(f"*/{Path(NOTEBOOK).stem}.html")
        browser.get(f"{hub.url}/user/{name}/files/{page.relative_to(hub.home[name])}")
        score, most = booked[name]
        wait_for(browser, "body", f"Score: {score:.1f} / {most:.1f}")
        shots(f"{name}-feedback-page")
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "BEGIN HIDDEN TESTS" not in text and "hidden_checks" not in text
    lap("students: fetch and read feedback")

    # The gradebook's scores are `tfcourse grade`'s on the same submitted files.
    printed, _ = grading.communicate(timeout=900)
    assert grading.returncode == 0, f"tfcourse grade:\n{printed}"
    results = {name: json.loads((graded / name / A / "results.json").read_text())
               for name in STUDENTS}
    for name in STUDENTS:
        assert booked[name] == (results[name]["score"], results[name]["max_score"]), \
            (name, booked[name], results[name]["score"])
    total = results["tfalice"]["max_score"]
    assert results["tfalice"]["score"] == total
    assert 0 < results["tfbob"]["score"] < total
    lost = {test["number"] for test in results["tfcarol"]["tests"]
            if test["score"] < test["max_score"]}
    assert "masks.padding" in lost, results["tfcarol"]["tests"]      # the cheats earned nothing
    # Her cell ran (its error says what it did), read nothing, and wrote nothing but, at most,
    # into the sandbox's own /tmp.
    assert what_carol_did(results["tfcarol"]["output"]) in HARMLESS, results["tfcarol"]["output"]
    if hub.feedback:                    # what the service showed each student on submit
        from tfcourse.course import load_course
        from tfcourse.hub.page import shown as visible

        course = load_course(hub.course)
        for name in STUDENTS:
            view = visible(course, A, results[name], time.time(), course.language)
            score, page = shown[name]
            assert score.endswith(f"{view.score:g} / {view.max_score:g}"), (name, score, view)
            assert "hidden_checks" not in page and "BEGIN HIDDEN TESTS" not in page
        assert what_carol_did(shown["tfcarol"][1]) in HARMLESS, shown["tfcarol"][1]
        assert MARK not in shown["tfalice"][1] + shown["tfbob"][1]     # each sees their own
    lap("gradebook against tfcourse grade")

    # 5. From each student's own server: what they can reach.
    inbound_root = hub.exchange / "tfcourse" / "inbound"
    inbound = {}
    for entry in inbound_root.iterdir():
        # student+assignment+time+random: nbgrader's 12 random characters, which only the
        # instructor, who may list inbound/, sees (the folder itself is open to whoever names it).
        student, assignment, _, random_part = entry.name.split("+")
        assert assignment == A and len(random_part) == 12, entry.name
        inbound[student] = entry
    assert sorted(inbound) == sorted(STUDENTS), sorted(inbound)
    wanted = {name: probes(hub, name) for name in STUDENTS}
    for how, path in sum(wanted.values(), []):      # each probe aims at something that is there
        assert Path(path if how != "write" else Path(path).parent).exists() \
            or path == str(hub.state), path
    with ThreadPoolExecutor(len(STUDENTS)) as pool:     # the three kernels side by side
        outputs = dict(zip(STUDENTS, pool.map(
            lambda name: run_in_kernel(hub, name, f"PATHS = {wanted[name]!r}\n"
                                                  f"OWN = {str(hub.home[name] / A / NOTEBOOK)!r}\n"
                                                  f"{PROBE}"), STUDENTS)))
    for name in STUDENTS:
        report = json.loads(outputs[name].strip().splitlines()[-1])
        assert report["user"] == pwd.getpwnam(name).pw_uid
        assert report["own"] == "allowed"
        assert report["tfcourse"].startswith(str(hub.python.parent.parent)), report["tfcourse"]
        allowed = {what: result for what, result in report["results"].items()
                   if result != "PermissionError" and not (
                       what == f"list {hub.state}" and result == "FileNotFoundError")}
        assert not allowed, f"{name} may: {allowed}"
        print(f"{name}'s server (torch {report['torch']}, {report['tfcourse']}): "
              f"{len(report['results'])} attempts, all refused")
        with pytest.raises(urllib.error.HTTPError) as refused:
            call(hub, "GET", "/formgrader", base=f"{hub.url}/user/{name}")
        assert refused.value.code == 404
    lap("students' servers: what they reach")

    # tfcarol's cell left nothing anywhere and runs nowhere; the others' grades are right.
    places = [hub.course, hub.home[INSTRUCTOR], hub.exchange, hub.home["tfalice"],
              Path("/tmp"), Path("/var/tmp")]
    left = [str(place / MARK) for place in places if (place / MARK).exists()]
    assert not left, left
    assert not (hub.course / "autograder" / "conftest.py").exists()
    assert not survivors(MARK)

    print("\nhub test timings (s):")
    for step, seconds in timings.items():
        print(f"  {seconds:7.1f}  {step}")
    print(f"closed to other users while the hub ran: {[str(path) for path in hub.closed]}")
    print(f"screenshots: {tmp_path} and {SHOTS}")
