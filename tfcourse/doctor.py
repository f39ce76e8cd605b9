"""`tfcourse doctor`: can another account (a student's) run this environment?

Students who fetch, check and submit on the instructor's machine or hub run nbgrader and
`tfcourse check` from an environment that is not theirs. An environment made under a private home
(`.ci/install` makes `.venv` in the checkout, and a venv runs the Python it was made from, often a
pyenv under `/root`, mode 700) gives them *Permission denied*. This check walks every folder on
the way to the interpreter, its standard library and the packages students import (the link a
venv's `bin/python` is, and what it points to), and says which one another account cannot search
or read; as root it also runs the interpreter as `nobody`, as docs/hub/install.sh does.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

# What a student's commands import: the course's package, the notebooks' torch, nbgrader.
PACKAGES = ("tfcourse", "torch", "nbgrader")


def blocked(path: Path, execute: bool = False) -> str | None:
    """Why an account that is neither the owner nor in the group cannot reach `path` (read it, or
    run it where `execute`): the first folder it cannot search, or the file it cannot read or run;
    through every link on the way, and the link's target. None when it can."""
    path = Path(os.path.abspath(path))
    for where in dict.fromkeys([path, Path(os.path.realpath(path))]):
        for folder in reversed(where.parents):
            try:
                mode = os.stat(folder).st_mode
            except OSError as error:
                return f"{folder}: {error.strerror}"
            if not mode & stat.S_IXOTH:
                return (f"{folder} is not searchable by other accounts (mode "
                        f"{stat.filemode(mode)})")
        try:
            mode = os.stat(where).st_mode
        except OSError as error:
            return f"{where}: {error.strerror}"
        wanted = stat.S_IXOTH if execute else stat.S_IROTH
        if stat.S_ISDIR(mode):
            wanted = stat.S_IXOTH | stat.S_IROTH
        if mode & wanted != wanted:
            return (f"{where} is not {'runnable' if execute else 'readable'} by other accounts "
                    f"(mode {stat.filemode(mode)})")
    return None


def _origin(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def _package_files(origin: Path, most: int = 400) -> list[Path]:
    """The package's own files, its folder first (for a large one such as torch: the first
    `most` of its top-level modules)."""
    folder = origin.parent
    files = [folder] + sorted(folder.glob("*.py"))[:most]
    return files


def findings(executable: str | Path | None = None,
             packages: dict[str, Path | None] | None = None) -> list[tuple[bool, str]]:
    """(ok, line) for each thing a student's account needs of this environment."""
    own = executable is None and packages is None          # this very environment
    executable = Path(executable or sys.executable)
    if packages is None:
        packages = {name: _origin(name) for name in PACKAGES}
        packages["the standard library"] = Path(os.__file__)
    found = []
    why = blocked(executable, execute=True)
    found.append((why is None, f"the interpreter {executable}" + (
        f" (it is {os.path.realpath(executable)})" if os.path.realpath(executable)
        != str(executable) else "") + (f": {why}" if why else ": other accounts can run it")))
    for name, origin in packages.items():
        if origin is None:
            found.append((False, f"{name}: not installed in this environment"))
            continue
        why = next(filter(None, (blocked(path) for path in _package_files(origin))), None)
        found.append((why is None, f"{name} ({origin.parent}): " +
                      (why if why else "other accounts can read it")))
    tfcourse_origin = packages.get("tfcourse")
    if own and tfcourse_origin is not None and \
            Path(sys.prefix).resolve() not in Path(tfcourse_origin).resolve().parents:
        found.append((False, f"tfcourse is imported from {Path(tfcourse_origin).parent.parent} "
                             f"(an editable install, pip install -e): students would have to "
                             f"read that checkout, solutions and graders included; install it "
                             f"into their environment without -e"))
    return found


def run_as_nobody(executable: Path) -> tuple[bool, str] | None:
    """As root, where setpriv is: whether `nobody` can run the interpreter and import tfcourse."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--reset-env", "sh", "-c", '"$0" -c "import tfcourse"', str(executable)],
                          capture_output=True, text=True, timeout=120, cwd="/")
    if done.returncode == 0:
        return True, "run as nobody, the interpreter imports tfcourse"
    said = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return False, f"run as nobody, the interpreter fails: {said}"


# As root types it: /opt is root's to write (through sudo where the instructor is not root).
ADVICE = ("Make an environment every account can run, from a Python every account can run, as "
          "root with the default umask: bash docs/hub/install.sh . (or by hand: python3 -m venv "
          "/opt/tfcourse && /opt/tfcourse/bin/pip install '.[instructor]' && chmod -R a+rX "
          "/opt/tfcourse), then give students /opt/tfcourse/bin on their PATH "
          "(docs/instructor-guide.md, \"The students' environment\").")


def main() -> int:
    found = findings()
    nobody = run_as_nobody(Path(sys.executable))
    if nobody is not None:
        found.append(nobody)
    for ok, line in found:
        print(f"{'ok' if ok else 'PROBLEM'}: {line}")
    if all(ok for ok, _ in found):
        print("other accounts (students) can run this environment")
        return 0
    print(f"other accounts (students) cannot run this environment. {ADVICE}")
    return 1
