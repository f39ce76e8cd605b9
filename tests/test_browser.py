"""What a student and an instructor see, in a real browser: JupyterLab and nbgrader's formgrader, in
headless Chromium.

The student: `jupyter lab` on a copy of release/01-attention (plus the solved notebook as
solved.ipynb), set up as the instructor guide tells a hub's admin to set up the students' servers
(nbgrader's instructor tools and JupyterLab's news disabled, here at the user level of the test's
own Jupyter config folder). The test drives Debian's chromium through chromedriver, runs the first
cells of the released notebook as a student would (Shift+Enter), and reads the page: the title, the
visible check's plain-words message about the unwritten stub, and no formgrader, Create Assignment
or news anywhere. Then it opens the solved notebook and finds a rendered plot.

The instructor: `jupyter lab` started in a copy of the course folder, with the exchange configured
as the guide says (`c.Exchange.root` in ~/.jupyter/nbgrader_config.py). The formgrader's Manage
Assignments page shows no warning and a Release button; releasing, a student's fetch and submit
(on the command line), and the Collect button bring the submission into the course's submitted/.

Screenshots are left in the test's tmp folder (last.png: the page when the test ended).
Without chromium or chromedriver the test is skipped, unless TFCOURSE_REQUIRE_BROWSER=1 (CI).
"""
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

# End to end: drives JupyterLab in a browser.
pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000"]
WAIT = 60                                   # seconds for any one thing to show up


def browser_or_skip():
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if missing:
        message = (f"the browser test needs {', '.join(missing)}: run .ci/install "
                   f"(apt-get install chromium chromium-driver; pip install -e '.[dev]')")
        if os.environ.get("TFCOURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


JUPYTER = Path(sys.executable).with_name("jupyter")
NBGRADER = Path(sys.executable).with_name("nbgrader")
# What the instructor guide has a hub's admin disable in the students' servers: nbgrader's
# instructor tools (nbgrader's own table: students keep only the Assignment List) and JupyterLab's
# news. The guide gives them at --level=sys_prefix for the students' image; here, --level=user.
HIDDEN_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                  "@jupyter/nbgrader:course-list", "@jupyterlab/apputils-extension:announcements"]
HIDDEN_SERVER_EXTENSIONS = ["nbgrader.server_extensions.formgrader",
                            "nbgrader.server_extensions.course_list"]
COURSE_ONLY = shutil.ignore_patterns(".venv", ".git", ".pytest_cache", "build", "*.egg-info",
                                     "__pycache__", "gradebook.db", "graded", "autograded",
                                     "submitted", "feedback", "bench")


def clean_environment(home: Path, **extra) -> dict:
    """The environment of a user whose home is `home`: no Jupyter folder of the caller's."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("JUPYTER")}
    return {**environment, "HOME": str(home),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


@contextlib.contextmanager
def jupyter_lab(log_path: Path, cwd: Path, environment: dict, *options: str):
    """`jupyter lab` started in `cwd`: (base url, token) while it runs; stopped afterwards."""
    port, token = free_port(), secrets.token_hex(16)
    log = log_path.open("w")
    server = subprocess.Popen(
        [str(JUPYTER), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", *options],
        cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start:\n{log_path.read_text()}")
                time.sleep(0.3)
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def run(command: list, environment: dict, cwd: Path) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(map(str, command))}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def student_config(tmp_path_factory) -> Path:
    """The Jupyter configuration the guide's commands give the students' servers, made once for
    the module (five `jupyter labextension` commands, 5.5 CPU s each): each lab copies it."""
    browser_or_skip()
    home = tmp_path_factory.mktemp("student-config")
    config = home / "config"
    environment = clean_environment(home, JUPYTER_CONFIG_DIR=str(config),
                                    JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    # The guide's commands for the students' servers, at this test's user level.
    guide = (ROOT / "docs" / "instructor-guide.md").read_text()
    assert all(name in guide for name in HIDDEN_PLUGINS + HIDDEN_SERVER_EXTENSIONS)
    for plugin in HIDDEN_PLUGINS:
        run([JUPYTER, "labextension", "disable", "--level=user", plugin], environment, home)
    run([JUPYTER, "labextension", "lock", "--level=user", *HIDDEN_PLUGINS], environment, home)
    # `jupyter server extension disable --user` refuses an extension that this level does not
    # list yet (jupyter_server 2): the same setting, written as that command would write it.
    (config / "jupyter_server_config.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": {name: False for name in HIDDEN_SERVER_EXTENSIONS}}}))
    return config


@pytest.fixture
def lab(tmp_path, student_config):
    """A student's JupyterLab on the student's folder: (base url, token). Stopped afterwards."""
    browser_or_skip()
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "release" / "01-attention", folder)
    shutil.copy(ROOT / "solutions" / "01-attention" / "attention.ipynb", folder / "solved.ipynb")
    home = tmp_path / "home"                # settings, workspaces and runtime files of this run
    home.mkdir()
    shutil.copytree(student_config, home / "config")
    environment = clean_environment(home, JUPYTER_CONFIG_DIR=str(home / "config"),
                                    JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    with jupyter_lab(tmp_path / "jupyter.log", folder, environment,
                     f"--ServerApp.root_dir={folder}",
                     f"--LabApp.workspaces_dir={home / 'workspaces'}",
                     f"--LabApp.user_settings_dir={home / 'settings'}") as server:
        yield server


def nbgrader_config(home: Path, exchange: Path) -> None:
    """What the instructor guide has every user's Jupyter read: the exchange's place."""
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\n")


@pytest.fixture
def instructor(tmp_path):
    """The instructor's JupyterLab, started in a copy of the course folder with the exchange set
    up as the guide says: (base url, token, course folder, exchange). Stopped afterwards."""
    browser_or_skip()
    course, exchange, home = tmp_path / "course", tmp_path / "exchange", tmp_path / "instructor"
    shutil.copytree(ROOT, course, ignore=COURSE_ONLY)
    exchange.mkdir()
    exchange.chmod(0o777)                   # every user writes into it (nbgrader's docs)
    nbgrader_config(home, exchange)
    environment = clean_environment(home)
    run([NBGRADER, "generate_assignment", "01-attention", "--force"], environment, course)
    run([NBGRADER, "db", "student", "add", "alice"], environment, course)
    with jupyter_lab(tmp_path / "jupyter-instructor.log", course, environment) as (url, token):
        yield url, token, course, exchange


@pytest.fixture
def browser(tmp_path):
    browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.save_screenshot(str(tmp_path / "last.png"))     # what the page showed at the end
        driver.quit()


def wait_for(driver, css: str, text: str = "", timeout: float = WAIT):
    """The first element matching `css` (whose text contains `text`), once the page shows it."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(driver):
        try:
            return next((element for element in driver.find_elements(By.CSS_SELECTOR, css)
                         if text in element.text), False)
        except StaleElementReferenceException:
            return False
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(found)
    except TimeoutException:
        pytest.fail(f"the page never showed {css!r} with {text!r}")


def cells(driver):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")


def test_a_student_runs_the_first_cells_and_sees_plots(lab, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    url, token = lab
    browser.get(f"{url}/lab/tree/attention.ipynb?token={token}")
    title = wait_for(browser, ".jp-NotebookPanel .jp-MarkdownOutput h1", "Assignment 1")
    assert "Attention" in title.text
    wait_for(browser, ".jp-Notebook-ExecutionIndicator[data-status='idle']")

    # Setup, language, the first section's text, the first answer cell and its check: cells 0-5.
    cells(browser)[0].click()
    for _ in range(6):
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    check = cells(browser)[5]
    assert "check.sdpa(scaled_dot_product_attention)" in check.text
    message = wait_for(check, ".jp-OutputArea-output", "is not written yet")
    shown = " ".join(message.text.split())      # wrapped to fit nbgrader's Validate dialog
    assert "scaled_dot_product_attention is not written yet" in shown
    assert "raise NotImplementedError()" in shown
    assert "Traceback" not in message.text and "checks.py" not in message.text, message.text
    browser.save_screenshot(str(tmp_path / "released.png"))

    # Set up as the guide says, the student's JupyterLab shows no instructor tool and no news: the
    # Nbgrader menu holds the Assignment List alone, no Create Assignment sidebar, no formgrader.
    from selenium.webdriver.common.by import By
    tabs = [tab.get_attribute("title") or "" for tab in
            browser.find_elements(By.CSS_SELECTOR, ".jp-SideBar .lm-TabBar-tab")]
    assert tabs and not [title for title in tabs if "Create Assignment" in title], tabs
    wait_for(browser, ".lm-MenuBar-item", "Nbgrader").click()
    wait_for(browser, ".lm-Menu .lm-Menu-itemLabel", "Assignment List")
    items = [label.text for label in browser.find_elements(By.CSS_SELECTOR, ".lm-Menu-itemLabel")
             if label.text]
    assert items == ["Assignment List"], items
    browser.save_screenshot(str(tmp_path / "student-menu.png"))
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "Jupyter news" not in page and "Formgrader" not in page, page[-500:]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/formgrader?token={token}", timeout=10)
    assert refused.value.code == 404

    browser.get(f"{url}/lab/tree/solved.ipynb?token={token}")
    plot = wait_for(browser, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output "
                             "img[src^='data:image/png']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
    time.sleep(0.5)                         # let the scroll settle before the screenshot
    assert plot.size["width"] > 200 and plot.size["height"] > 100, plot.size
    browser.save_screenshot(str(tmp_path / "solved.png"))


def assignment_row(driver, name: str):
    """The formgrader's Manage Assignments row of an assignment, once it shows."""
    from selenium.webdriver.common.by import By
    wait_for(driver, "#main-table tr td.name", name)
    return next(row for row in driver.find_elements(By.CSS_SELECTOR, "#main-table tr")
                if row.find_element(By.CSS_SELECTOR, "td.name").text == name)


def close_modal(driver, text: str):
    """Read the formgrader's pop-up, which must say `text`, and close it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    modal = wait_for(driver, ".modal .modal-body", text)
    assert "error" not in modal.text.split("Log Output")[0].lower(), modal.text
    driver.find_element(By.CSS_SELECTOR, ".modal .modal-footer button").click()
    WebDriverWait(driver, WAIT).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".modal"))


def test_the_instructor_releases_and_collects_in_the_formgrader(instructor, browser, tmp_path):
    from selenium.webdriver.common.by import By

    url, token, course, exchange = instructor
    browser.get(f"{url}/formgrader?token={token}")
    row = assignment_row(browser, "01-attention")
    warnings = [alert.text for alert in browser.find_elements(By.CSS_SELECTOR, ".alert-warning")]
    assert not warnings, warnings             # "The exchange directory ... does not exist"
    release = wait_for(row, "td.release a span.glyphicon-cloud-upload")
    browser.save_screenshot(str(tmp_path / "formgrader.png"))
    release.click()
    close_modal(browser, "Successfully released '01-attention'.")
    assert (exchange / "tfcourse" / "outbound" / "01-attention" / "attention.ipynb").is_file()

    # alice fetches and submits on her own server, which reads the same exchange setting.
    alice = tmp_path / "alice"
    nbgrader_config(alice, exchange)
    student = clean_environment(alice)
    run([NBGRADER, "fetch_assignment", "01-attention", "--course", "tfcourse"], student, alice)
    run([NBGRADER, "submit", "01-attention", "--course", "tfcourse", "--student", "alice"],
        student, alice)

    row = assignment_row(browser, "01-attention")
    wait_for(row, "td.collect a span.glyphicon-cloud-download").click()
    close_modal(browser, "Successfully collected submissions of '01-attention'.")
    wait_for(assignment_row(browser, "01-attention"), "td.num-submissions", "1")
    browser.save_screenshot(str(tmp_path / "formgrader-collected.png"))
    submitted = course / "submitted" / "alice" / "01-attention" / "attention.ipynb"
    assert submitted.read_bytes() == (alice / "01-attention" / "attention.ipynb").read_bytes()


# The instructor guide's self-check cell, as a student keeps it in the notebook it checks.
SELF_CHECK = "import sys\n!{sys.executable} -m tfcourse check attention.ipynb"


def checks_running(folder: Path) -> list[int]:
    """`tfcourse check` processes (and kernels they started) working in `folder`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            where = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if b"tfcourse check" in command and where == str(folder):
            found.append(int(entry))
    return found


def test_a_student_runs_the_guides_self_check_cell_and_it_ends(lab, browser, tmp_path):
    """The guide's self-check cell, run in JupyterLab from the notebook it checks: the check it
    starts skips that cell (no chain of checks), reports, and nothing of it keeps running."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    assert SELF_CHECK in (ROOT / "docs" / "instructor-guide.md").read_text()
    folder = tmp_path / "student"
    nb = json.loads((folder / "attention.ipynb").read_text())
    nb["cells"].insert(1, {"cell_type": "code", "execution_count": None, "id": "selfcheck",
                           "metadata": {}, "outputs": [], "source": SELF_CHECK})
    (folder / "attention.ipynb").write_text(json.dumps(nb))     # saved, as the guide says

    url, token = lab
    browser.get(f"{url}/lab/tree/attention.ipynb?token={token}")
    wait_for(browser, ".jp-NotebookPanel .jp-MarkdownOutput h1", "Assignment 1")
    wait_for(browser, ".jp-Notebook-ExecutionIndicator[data-status='idle']")
    cells(browser)[1].click()
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    output = wait_for(cells(browser)[1], ".jp-OutputArea-output", "visible checks pass",
                      timeout=300)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", output)
    browser.save_screenshot(str(tmp_path / "self-check.png"))
    assert "[SKIPPED] the cell with `!{sys.executable} -m tfcourse check attention.ipynb`" \
        in output.text, output.text
    assert output.text.count("[SKIPPED]") == 1, output.text
    deadline = time.monotonic() + 30                 # the check's kernel shuts down as it ends
    while checks_running(folder) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not checks_running(folder), "a tfcourse check is still running after the cell ended"


def test_run_all_shows_a_rule_break_and_a_wrong_head_split_and_goes_on(lab, browser, tmp_path):
    """Issue 25, items 1-2: the visible checks fail what the grade fails (an attention that calls
    torch's, heads split without a transpose), in red, and Run All reaches the last cell."""
    from selenium.webdriver.common.by import By
    from test_student_check import _rule_break_and_wrong_split

    url, token = lab
    made = _rule_break_and_wrong_split(tmp_path / "made")
    folder = tmp_path / "student"
    shutil.copy(made, folder / "broken.ipynb")
    shutil.copy(made.with_name("visible_checks.json"), folder / "visible_checks.json")
    browser.get(f"{url}/lab/tree/broken.ipynb?token={token}")
    wait_for(browser, ".jp-NotebookPanel .jp-MarkdownOutput h1", "Assignment 1")
    wait_for(browser, ".jp-Notebook-ExecutionIndicator[data-status='idle']")
    wait_for(browser, ".lm-MenuBar-item", "Run").click()
    wait_for(browser, ".lm-Menu .lm-Menu-itemLabel", "Run All Cells").click()

    def last_prompt():
        code = [cell for cell in cells(browser) if "jp-CodeCell" in cell.get_attribute("class")]
        return code[-1].find_element(By.CSS_SELECTOR, ".jp-InputPrompt").text

    deadline = time.monotonic() + 300
    while not re.fullmatch(r"\[\d+\]:", last_prompt().strip()):
        assert time.monotonic() < deadline, f"Run All never reached the last cell: {last_prompt()}"
        time.sleep(1)
    shown = {}
    for cell in cells(browser):
        for name in ("check.sdpa(", "check.mha(", "check.masks("):
            if name in cell.text:
                shown[name] = cell
    sdpa = wait_for(shown["check.sdpa("], ".jp-OutputArea-output", "course's rules")
    assert "torch.nn.functional.scaled_dot_product_attention" in sdpa.text
    assert "Traceback" not in sdpa.text
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", sdpa)
    time.sleep(0.5)
    browser.save_screenshot(str(tmp_path / "rule-break.png"))
    mha = wait_for(shown["check.mha("], ".jp-OutputArea-output", "transpose")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", mha)
    time.sleep(0.5)
    browser.save_screenshot(str(tmp_path / "head-split.png"))
    wait_for(shown["check.masks("], ".jp-OutputArea-output", "✓")
    code = [cell for cell in cells(browser) if "jp-CodeCell" in cell.get_attribute("class")]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", code[-1])
    time.sleep(0.5)
    browser.save_screenshot(str(tmp_path / "last-cell.png"))
    shots = Path(os.environ.get("TFCOURSE_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    for name in ("rule-break.png", "head-split.png", "last-cell.png"):
        if shots != tmp_path:
            shutil.copy(tmp_path / name, shots / name)
