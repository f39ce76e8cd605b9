"""Which cells `tfcourse check` skips: those that run `tfcourse check` themselves, and no other."""
import pytest

from tfcourse.student.run import check_command

RUNS_A_CHECK = {
    "import sys\n!{sys.executable} -m tfcourse check attention.ipynb":
        "!{sys.executable} -m tfcourse check attention.ipynb",
    "!tfcourse check attention.ipynb": "!tfcourse check attention.ipynb",
    "%%bash\ntfcourse check attention.ipynb": "tfcourse check attention.ipynb",
    "%run -m tfcourse check attention.ipynb": "%run -m tfcourse check attention.ipynb",
    'import subprocess, sys\nsubprocess.run([sys.executable, "-m", "tfcourse", "check", "a"])':
        'subprocess.run([sys.executable, "-m", "tfcourse", "check", "a"])',
    'subprocess.run([sys.executable, "-m", "tfcourse",\n                "check", "a.ipynb"])':
        'subprocess.run([sys.executable, "-m", "tfcourse",',
    "import os\nos.system('tfcourse check attention.ipynb')":
        "os.system('tfcourse check attention.ipynb')",
    'get_ipython().system("tfcourse check attention.ipynb")':
        'get_ipython().system("tfcourse check attention.ipynb")',
}
RUNS_NO_CHECK = [
    "from tfcourse.student import check, show, use_language\ncheck.sdpa(f)",
    "# run `tfcourse check attention.ipynb` before you submit\nx = 1",
    'print("run tfcourse check before you submit")',
    "!pip install tfcourse\ncheck.mha(MultiHeadAttention)",
    "!pip install tfcourse\nfrom tfcourse.student import check",
]


@pytest.mark.parametrize("source", RUNS_A_CHECK)
def test_a_cell_that_runs_tfcourse_check_is_found_by_its_line(source):
    assert check_command(source) == RUNS_A_CHECK[source]


@pytest.mark.parametrize("source", RUNS_NO_CHECK)
def test_other_cells_run(source):
    assert check_command(source) is None


def test_a_check_started_inside_the_kernel_of_a_check_refuses_at_once(tmp_path):
    import os
    import subprocess
    import sys

    outer = str(tmp_path / "attention.ipynb")
    done = subprocess.run([sys.executable, "-m", "tfcourse", "check", "attention.ipynb"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TFCOURSE_CHECK_KERNEL": outer})
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"tfcourse check: not run here: this is the kernel of the check of {outer}, and a check "
        f"does not start another one"], done.stdout
