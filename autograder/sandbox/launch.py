"""Starting, watching and killing the student's process.

Two ways to isolate, chosen by `sandbox.isolation` in course.yaml:

- `bwrap` (bubblewrap): the student's process sees a read-only filesystem with the course folder,
  the submissions, the results and home folders hidden, a private /tmp, no network, and no other
  process (its own PID namespace, so everything it starts dies with it). Run as root, it also drops
  to `sandbox.user`.
- `process`: a plain child in its own session with resource limits; as root it drops to
  `sandbox.user` when that user can run the interpreter. Weaker: use it where bubblewrap cannot run.

`auto` takes bwrap when it works on this machine. In both, a watchdog sums the memory of every
process the student started and kills them all past the limit, and output is capped.
"""
from __future__ import annotations

import ctypes
import functools
import os
import pwd
import resource
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

HARNESS = ("worker.py", "channel.py", "standins.py")
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
TMP = Path("/tmp")                   # emptied in the sandbox
# Where sandboxes are made (else in the system's temporary folder): the runner sets it.
SANDBOX_FOLDER = "TFCOURSE_SANDBOX_FOLDER"
SIGNAL_WORDS = {      # how a student's process ended, in words that follow "it"
    "SIGSEGV": "crashed with a segmentation fault (SIGSEGV: native code read memory it must not)",
    "SIGBUS": "crashed with a bus error (SIGBUS)",
    "SIGFPE": "crashed with an arithmetic error (SIGFPE)",
    "SIGILL": "crashed on an illegal instruction (SIGILL)",
    "SIGABRT": "aborted (SIGABRT)",
    "SIGKILL": "was killed (SIGKILL)",
}


@dataclass
class SandboxConfig:
    isolation: str = "auto"
    user: str = "nobody"
    memory_mb: int = 3072
    output_kb: int = 256
    threads: int = 1
    hide: list[Path] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)    # name in the work folder -> text

    @classmethod
    def from_course(cls, course, files: dict[str, str], threads: int,
                    hide: list[Path]) -> "SandboxConfig":
        """The sandbox course.yaml asks for, with the course folder and `hide` out of sight."""
        return cls(isolation=str(course.sandbox.get("isolation", "auto")),
                   user=str(course.sandbox.get("user", "nobody")),
                   memory_mb=int(course.limit("memory_mb")),
                   output_kb=int(course.limit("output_kb")),
                   threads=threads, hide=[course.root, *hide], files=files)


@functools.lru_cache(maxsize=None)
def bwrap_works() -> bool:
    """Whether bubblewrap can make the namespaces we need on this machine (asked once)."""
    if not shutil.which("bwrap") or (os.geteuid() == 0 and not shutil.which("setpriv")):
        return False
    try:
        return subprocess.run(["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                               *_unshare_flags(), "--", "true"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _unshare_flags() -> list[str]:
    flags = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    return flags if os.geteuid() == 0 else ["--unshare-user", *flags]


@functools.lru_cache(maxsize=None)
def _user_can_run_python(uid: int, gid: int) -> bool:
    try:
        return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True,
                              timeout=60, user=uid, group=gid, extra_groups=[],
                              cwd="/").returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def choose_mode(config: SandboxConfig) -> tuple[str, tuple[int, int] | None, str | None]:
    """(mode, (uid, gid) to drop to or None, warning when isolation is weaker than asked)."""
    wanted = config.isolation
    warning = None
    if wanted not in ("auto", "bwrap", "process"):
        warning, wanted = f"unknown sandbox.isolation {wanted!r}; using a plain process", "process"
    mode = "bwrap" if wanted in ("auto", "bwrap") and bwrap_works() else "process"
    if wanted == "bwrap" and mode == "process":
        warning = ("bubblewrap is not usable here (install the `bubblewrap` package, and allow "
                   "user namespaces); student code runs as a plain process instead")
    if os.geteuid() != 0:
        return mode, None, warning
    uid, gid = _user_ids(config.user)
    if uid is None:
        return mode, None, f"sandbox.user {config.user!r} does not exist: student code runs as root"
    if mode == "process" and not _user_can_run_python(uid, gid):
        return mode, None, (f"student code runs as root: user {config.user!r} cannot run "
                            f"{sys.executable}. Install bubblewrap, or put Python where that "
                            f"user can reach it.")
    return mode, (uid, gid), warning


def _user_ids(name: str):
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return None, None


def _interpreter_paths() -> list[Path]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable),
             os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()}
    return sorted(Path(p) for p in paths if p and os.path.isdir(p))


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _reveal(paths: list[Path], hidden: list[Path]) -> list[str]:
    """bwrap arguments that show `paths` (read-only) inside hidden folders. The folders leading
    to them are made searchable by everyone: bwrap would make them 0700 and root's, so that the
    sandbox user could start the interpreter but not find its standard library or run it again."""
    inside = [p for p in paths if any(_under(p, h) for h in hidden)]
    outermost = [p for p in inside if not any(p != q and _under(p, q) for q in inside)]
    arguments, made = [], set()
    for path in outermost:
        cover = max((h for h in hidden if _under(path, h)), key=lambda h: len(h.parts))
        for folder in reversed(path.parents):
            if folder not in made and folder != cover and _under(folder, cover):
                arguments += ["--perms", "0755", "--dir", str(folder)]
                made.add(folder)
        arguments += ["--ro-bind", str(path), str(path)]
    return arguments


def set_subreaper() -> None:
    """Make orphans of our children (a student's daemon, say) become our children, so we find them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _process_table() -> dict[int, int]:
    """pid -> parent pid, for every process we can see."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            table[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return table


def descendants(root: int, table: dict[int, int] | None = None) -> list[int]:
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, parent in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _rss_kb(pid: int) -> int:
    # RSS, not PSS: /proc/PID/smaps_rollup walks every page (a fifth of a second for a 1 GB
    # process), and the watchdog reads it five times a second while a model trains.
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Sandbox:
    """One student process. `start()` returns the two ends of the request channel."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.mode, self.drop_to, self.warning = choose_mode(config)
        self.process: subprocess.Popen | None = None
        self.base = Path(tempfile.mkdtemp(prefix="tfgrade-", dir=os.environ.get(SANDBOX_FOLDER)))
        self.work, self.lib = self.base / "work", self.base / "lib"
        self.output = bytearray()
        self.output_dropped = 0
        self.memory_exceeded = False
        self.peak_rss_kb = 0
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._prepare_folders()

    # -- folders ------------------------------------------------------------------------------
    def _prepare_folders(self):
        here = Path(__file__).parent
        self.work.mkdir()
        self.lib.mkdir()
        (self.work / "tmp").mkdir()
        for name in HARNESS:
            shutil.copy(here / name, self.lib / name)
        public = Path(__file__).resolve().parents[2] / "tfcourse"
        if not public.is_dir():
            import tfcourse
            public = Path(tfcourse.__file__).parent
        shutil.copytree(public, self.lib / "tfcourse",
                        ignore=shutil.ignore_patterns("__pycache__", "build"))
        for name, text in self.config.files.items():
            (self.work / name).write_text(text, encoding="utf-8")
        os.chmod(self.base, 0o711)
        if self.drop_to:
            for path in (self.work, self.work / "tmp", *self.work.iterdir()):
                os.chown(path, *self.drop_to)

    # -- starting -----------------------------------------------------------------------------
    def _command(self, fd_in: int, fd_out: int) -> list[str]:
        python = [sys.executable, "-E", "-s", "-B", str(self.lib / "worker.py"),
                  "--fd-in", str(fd_in), "--fd-out", str(fd_out)]
        if self.mode != "bwrap":
            return python
        # An empty /tmp, then an empty folder over each hidden one outside it; the interpreter is
        # shown again where it lies under one of them (a course folder in /tmp with its venv, say).
        command = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                   "--tmpfs", str(TMP)]
        hidden = sorted({Path(p).resolve() for p in self.config.hide if Path(p).exists()}
                        | {Path(p) for p in ("/root", "/home") if Path(p).is_dir()}
                        | {Path(os.path.expanduser("~")).resolve()},
                        key=lambda p: len(p.parts))
        hidden = [p for p in hidden if p != Path("/") and not _under(p, TMP)]
        for path in hidden:
            command += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null",
                                                                      str(path)]
        command += _reveal(_interpreter_paths(), [*hidden, TMP])
        command += ["--perms", "0755", "--dir", str(self.base),
                    "--bind", str(self.work), str(self.work),
                    "--ro-bind", str(self.lib), str(self.lib), "--chdir", str(self.work),
                    *_unshare_flags()]
        if self.drop_to:
            uid, gid = self.drop_to
            command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                        "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all"]
            return command + python
        return command + ["--"] + python

    def _environment(self) -> dict[str, str]:
        threads = str(self.config.threads)
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.work),
                "TMPDIR": str(self.work / "tmp"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
                "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}

    def _limits(self):
        try:                     # die with the grader, even if it is killed
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        # Address space is only the backstop (against one huge allocation): torch alone reserves
        # some 700 MB of it. Nearer the limit, it and the watchdog would race to stop a growing
        # process, and the watchdog's kill could land on the next check instead.
        memory = (2 * self.config.memory_mb + 1024) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if self.mode == "process" and self.drop_to:
            uid, gid = self.drop_to
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

    def start(self) -> tuple[int, int]:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.process = subprocess.Popen(
            self._command(to_child_r, from_child_w), pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=self.work, env=self._environment(), start_new_session=True,
            preexec_fn=self._limits)
        os.close(to_child_r)
        os.close(from_child_w)
        self.fd_in, self.fd_out = to_child_w, from_child_r
        self._stop.clear()
        threading.Thread(target=self._drain, daemon=True).start()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()
        return to_child_w, from_child_r

    # -- watching -----------------------------------------------------------------------------
    def _drain(self):
        limit = self.config.output_kb * 1024
        stream = self.process.stdout
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            room = limit - len(self.output)
            if room > 0:
                self.output += chunk[:room]
            self.output_dropped += max(0, len(chunk) - max(room, 0))

    def _watch(self):
        limit_kb = self.config.memory_mb * 1024
        while not self._stop.wait(0.2):
            process = self.process
            if process is None or process.poll() is not None:
                return
            table = _process_table()           # one look at /proc: it is not free
            pids = {process.pid, *descendants(process.pid, table), *self._orphans(table)}
            total = sum(_rss_kb(pid) for pid in pids)
            self.peak_rss_kb = max(self.peak_rss_kb, total)
            if total > limit_kb:
                self.memory_exceeded = True
                self.kill()
                return

    # -- ending -------------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def settle(self, seconds: float = 1.0) -> None:
        """Give a process that is ending on its own a moment, so that its own way of ending, not
        our kill, is what `exit_description` reports."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def exit_description(self) -> str:
        """How the process ended, in words that follow "it": "exited with status 3"."""
        code = self.process.poll() if self.process else None
        if code is None:
            return "is still running"
        if self.mode == "bwrap" and code > 128:   # bwrap exits with 128 + the signal that ended
            code = 128 - code                      # its child, as a shell does
        if code >= 0:
            return f"exited with status {code}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return SIGNAL_WORDS.get(name, f"was killed by {name}")

    def kill(self):
        """Kill the student's process and everything it started, wherever it went."""
        process = self.process
        if process is None:
            return
        for _ in range(5):
            victims = [process.pid, *descendants(process.pid)] if process.poll() is None else []
            victims += self._orphans()
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                continue
            self._reap()
            if not self._orphans():
                break
        self._stop.set()

    def _orphans(self, table: dict[int, int] | None = None) -> list[int]:
        """Processes that escaped to us as their subreaper (double-forked daemons).

        The grader process that owns a sandbox has no other children, so any child but the
        sandbox itself is something the student left behind.
        """
        table = _process_table() if table is None else table
        me = os.getpid()
        known = {self.process.pid} if self.process else set()
        found = []
        for pid, parent in table.items():
            if parent == me and pid not in known:
                found.append(pid)
                found += descendants(pid, table)
        return found

    def _reap(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def close(self):
        self.kill()
        # The watchdog may still be killing (after a memory overrun): let it finish, or it would
        # take the next sandbox's process, a child of ours too, for a daemon left behind.
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join()
        shutil.rmtree(self.base, ignore_errors=True)

