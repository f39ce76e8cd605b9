"""What bubblewrap shows the student's process: an allow-list, built as bwrap arguments.

The system's programs and libraries (/usr, and /bin, /lib... beside it), the few files of /etc the
dynamic linker reads, the interpreter (its base installation where it lies, since a venv names it
there; the venv itself at INSIDE_PYTHON, so that no path of the course shows in the student's
command line), the harness at INSIDE_LIB and the work folder at INSIDE_WORK. Nothing else of the
machine is there: not the course, the submissions, the results, /root or /home (but the way to the
interpreter), nor the machine's /tmp. launch.py adds the work folder, the users and the namespaces.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Where the sandbox's own folders are, as student code sees them in bubblewrap: no path of the
# machine's appears in its command line, environment or working folder.
INSIDE = Path("/sandbox")
INSIDE_PYTHON, INSIDE_LIB, INSIDE_WORK = INSIDE / "python", INSIDE / "lib", INSIDE / "work"
SYSTEM_FOLDERS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")   # besides /usr
SYSTEM_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime")


def under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def symlink_chain(path: Path) -> list[Path]:
    """`path` and every path its symbolic links lead through, in order, ending at the file."""
    chain, seen = [], set()
    while path not in seen:
        seen.add(path)
        chain.append(path)
        parent_real = Path(os.path.realpath(path.parent))
        if not (parent_real / path.name).is_symlink():
            break
        target = os.readlink(parent_real / path.name)
        path = Path(os.path.normpath(parent_real / target))
    return chain


@dataclass
class Binds:
    """bwrap arguments under construction, and the trees bound so far (host path -> inside)."""
    arguments: list[str] = field(default_factory=list)
    trees: dict[Path, Path] = field(default_factory=dict)
    made: set[Path] = field(default_factory=set)         # folders made on the way to a bind

    def bind(self, host: Path, inside: Path, flag: str = "--ro-bind") -> None:
        self.add(flag, str(host), inside)
        self.trees[host] = inside

    def add(self, flag: str, source: str, inside: Path) -> None:
        """`flag source inside`, after making the folders that lead to `inside` searchable by
        everyone (bwrap would make them root's alone: the sandbox user could not reach what is
        bound below them)."""
        for folder in reversed(inside.parents):
            if folder != Path("/") and folder not in self.made and \
                    not any(under(folder, tree) for tree in self.trees.values()):
                self.arguments += ["--perms", "0755", "--dir", str(folder)]
                self.made.add(folder)
        self.arguments += [flag, source, str(inside)]

    def inside(self, host: Path) -> Path | None:
        """Where `host` is seen in the sandbox, if a bound tree holds it."""
        for tree, inside in sorted(self.trees.items(), key=lambda item: -len(item[0].parts)):
            if under(host, tree):
                return inside / host.relative_to(tree)
        return None


def system_binds(binds: Binds) -> None:
    """/usr and the folders beside it that hold programs and libraries (links where they are
    links), and the few files of /etc the dynamic linker reads."""
    binds.bind(Path("/usr"), Path("/usr"))
    for name in SYSTEM_FOLDERS:
        path = Path("/") / name
        if path.is_symlink():
            binds.add("--symlink", os.readlink(path), path)
        elif path.is_dir():
            binds.bind(path, path)
    for name in SYSTEM_ETC:
        binds.add("--ro-bind-try", f"/etc/{name}", Path("/etc", name))


def interpreter_binds(binds: Binds) -> Path:
    """Bind the interpreter: its base installation where it lies (a venv names it), the venv (if
    any) at INSIDE_PYTHON, and each link on the way to the executable. Returns the executable's
    path inside the sandbox."""
    base = Path(sys.base_prefix)
    for place in {base, Path(os.path.realpath(base))}:
        if binds.inside(place) is None:
            binds.bind(Path(os.path.realpath(base)), place)
    executable = Path(sys.executable)
    if sys.prefix != sys.base_prefix and under(executable, Path(sys.prefix)):
        binds.bind(Path(os.path.realpath(sys.prefix)), INSIDE_PYTHON)
        inside = INSIDE_PYTHON / executable.relative_to(sys.prefix)
    else:
        inside = executable
    for hop in symlink_chain(executable)[1:]:
        if binds.inside(hop) is not None:
            continue
        if hop.is_symlink():
            binds.add("--symlink", os.readlink(hop), hop)
        else:
            binds.bind(hop, hop)
    return inside


def mask_hidden(binds: Binds, hidden: list[Path]) -> None:
    """An empty read-only folder over each hidden path that a bound tree would show (a course
    kept under /usr/local, say)."""
    for path in hidden:
        for tree, inside in list(binds.trees.items()):
            if path != tree and under(path, tree) and path.is_dir():
                target = str(inside / path.relative_to(tree))
                binds.arguments += ["--perms", "0000", "--size", "4096", "--tmpfs", target,
                                    "--remount-ro", target]


def gpu_binds(binds: Binds) -> None:
    """The GPU's device files and what its driver reads in /sys (only with sandbox.gpu)."""
    for device in sorted(Path("/dev").glob("nvidia*")) + [Path("/dev/dri")]:
        binds.arguments += ["--dev-bind-try", str(device), str(device)]
    binds.arguments += ["--ro-bind-try", "/sys", "/sys"]
