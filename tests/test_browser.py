"""What a student sees, in a real browser: JupyterLab on a released notebook, in headless Chromium.

The test starts `jupyter lab` on a copy of release/01-attention (plus the solved notebook as
solved.ipynb), drives Debian's chromium through chromedriver, runs the first cells of the released
notebook as a student would (Shift+Enter), and reads the page: the title, and the visible check's
plain-words message about the unwritten stub. Then it opens the solved notebook and finds a rendered
plot. Screenshots are left in the test's tmp folder (last.png: the page when the test ended).

Without chromium or chromedriver the test is skipped, unless TFCOURSE_REQUIRE_BROWSER=1 (CI).
"""
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
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


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on the student's folder: (base url, token). Stopped afterwards."""
    browser_or_skip()
    folder = tmp_path / "student"
    shutil.copytree(ROOT / "release" / "01-attention", folder)
    shutil.copy(ROOT / "solutions" / "01-attention" / "attention.ipynb", folder / "solved.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    home = tmp_path / "home"                # settings, workspaces and runtime files of this run
    news = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false"}')   # no "get Jupyter news?" prompt over the page
    environment = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / "config"),
                   "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = (tmp_path / "jupyter.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", "--allow-root",
         "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folder}",
         f"--LabApp.workspaces_dir={home / 'workspaces'}",
         f"--LabApp.user_settings_dir={home / 'settings'}"],
        env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start:\n{(tmp_path / 'jupyter.log').read_text()}")
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
    assert "scaled_dot_product_attention is not written yet" in message.text
    assert "raise NotImplementedError()" in message.text
    assert "Traceback" not in message.text and "checks.py" not in message.text, message.text
    browser.save_screenshot(str(tmp_path / "released.png"))

    browser.get(f"{url}/lab/tree/solved.ipynb?token={token}")
    plot = wait_for(browser, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output "
                             "img[src^='data:image/png']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
    time.sleep(0.5)                         # let the scroll settle before the screenshot
    assert plot.size["width"] > 200 and plot.size["height"] > 100, plot.size
    browser.save_screenshot(str(tmp_path / "solved.png"))
