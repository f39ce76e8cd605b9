"""What a trusted process of the engine asks of the kernel about itself: to die with its parent, to
adopt its orphans, and to hide its command line.

The grader (`python -m tfcourse.submission`), the fork server and the keeper of each sandbox die
with the process that started them (PR_SET_PDEATHSIG), so that nothing outlives a runner killed
by SIGKILL. The keeper itself (sandbox/keeper.py) and the zygote (sandbox/zygote.py) run as files
with `python -I -S`, without this package: each asks the kernel in its own two lines.
"""
from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PARENT_OPTION = "--parent"      # the command-line option that names the pid to die with


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def signal_on_parent_death(number: int = signal.SIGKILL) -> None:
    """The signal `number` for this process when the thread that started it ends (usable in a
    `preexec_fn`: nothing but one system call)."""
    _prctl(PR_SET_PDEATHSIG, number)


def die_with_parent(parent: int | None) -> None:
    """SIGKILL for this process when its parent `parent` (a pid; None: nothing asked) ends. A
    parent that ended before this was set is seen in getppid (this process has another parent by
    then): this process exits at once."""
    if parent is None:
        return
    signal_on_parent_death(signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def set_subreaper() -> None:
    """Make orphans of our children (a student's daemon, say) become ours, so we find them."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def hide_command_line(shown: str = "tfcourse") -> bool:
    """Overwrite this process's command line as /proc/PID/cmdline shows it to every user (the
    sandbox user too, in process mode) with `shown`: the class folder's path is not there to be
    read. Python keeps its own copy (sys.argv). Whether it could."""
    try:
        after = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(after[45]), int(after[46])          # arg_start, arg_end (fields 48, 49)
    except (OSError, IndexError, ValueError):
        return False
    text = shown.encode()[:max(end - start - 1, 0)]
    if end <= start:
        return False
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, text, len(text))
    return True
