"""The course's visible checks in the student's kernel: `check.sdpa(...)` runs the check the
notebook carries.

The checks are the course's, not tfcourse's (the course folder's `visible/`: an entry module
`checks.py`, the modules it imports, and their messages in `visible/locale/<lang>.yaml`).
`tfcourse build` writes them, with the numbers they compare with, as one payload into every
released notebook's metadata (`tfcourse.visible_checks`) and into the visible_checks.json beside
it (tfcourse/build/examples.py):

    modules   module name -> its source (the folder's *.py; `checks` is the entry)
    locale    language -> English template -> translation
    checks    the `check.X` that this notebook's test cells call
    rules     what the checks need of course.yaml's rule against torch's attention
    examples  the solution's numbers on each fixed example

So the notebook alone is enough. `check.X` looks, in order, in the notebook the kernel runs (named
by `tfcourse check`, Jupyter's session, VS Code), in the notebooks of the kernel's working folder
(newest first) and in a visible_checks.json there, and takes the first payload whose `checks` name
X. Where none has it, `check.X(...)` reports that the check could not run and why: it never
passes. The modules are loaded from the payload's text under a private package name, one per
payload, so two notebooks of one kernel do not mix their checks.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import linecache
import os
import sys
from pathlib import Path

from . import checking

FOLDER = "visible"                   # the course's folder of visible checks, beside autograder/
ENTRY = "checks"                     # its module whose names are `check.X`
KEY = "visible_checks"               # the payload's key in a notebook's `tfcourse` metadata
GENERIC = ("CheckFailed", "CheckNotRun", "current_language", "failures", "raising",
           "use_language", "use_sources")


# -- the course's folder (the build, and tests) ---------------------------------------------------
def course_payload(root: str | Path) -> dict:
    """The modules and messages of the course's visible checks, read from `root`/visible."""
    import yaml

    folder = Path(root) / FOLDER
    modules = {path.stem: path.read_text(encoding="utf-8")
               for path in sorted(folder.glob("*.py")) if path.stem != "__init__"}
    locale = {}
    for path in sorted((folder / "locale").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        locale[path.stem] = {str(key): str(value) for key, value in data.items()}
    return {"modules": modules, "locale": locale}


# -- loading a payload's modules ------------------------------------------------------------------
class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `package.<name>` from the payload's text (relative imports between them work)."""

    def __init__(self, package: str, sources: dict[str, str], origin: str):
        self.package, self.sources, self.origin = package, sources, origin

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.package:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        head, _, name = fullname.rpartition(".")
        if head == self.package and name in self.sources:
            return importlib.machinery.ModuleSpec(fullname, self,
                                                  origin=f"{self.origin}/{name}.py")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ == self.package:
            return
        name = module.__name__.rpartition(".")[2]
        text, filename = self.sources[name], f"{self.origin}/{name}.py"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        module.__file__ = filename
        exec(compile(text, filename, "exec"), module.__dict__)


class Bundle:
    """One payload's checks, loaded: `attribute(name)` gives check.<name>, running with the
    payload's numbers and messages."""

    def __init__(self, payload: dict, origin: str):
        self.payload, self.origin = payload, origin
        modules = payload.get("modules") or {}
        if ENTRY not in modules:
            raise LookupError(checking.say("{origin} carries no visible checks (no module {entry})",
                                           {"origin": origin, "entry": ENTRY}))
        digest = hashlib.sha1(json.dumps(modules, sort_keys=True).encode()).hexdigest()[:12]
        self.package = f"_tfcourse_visible_{digest}"
        if self.package not in sys.modules:
            sys.meta_path.append(_Sources(self.package, modules, origin))
        self.modules = [importlib.import_module(f"{self.package}.{name}") for name in modules]
        self.entry = importlib.import_module(f"{self.package}.{ENTRY}")
        self.examples = {value.example_name: value for module in self.modules
                         for value in vars(module).values()
                         if callable(value) and hasattr(value, "example_name")}

    def names(self) -> list[str]:
        return list(getattr(self.entry, "__all__", [n for n in vars(self.entry)
                                                   if not n.startswith("_")]))

    def attribute(self, name: str):
        value = getattr(self.entry, name)
        if not callable(value) or isinstance(value, type):
            return value

        @functools.wraps(value)
        def run(*args, **kwargs):
            checking.use_catalog(self.payload.get("locale"))
            from . import examples
            with examples.active(self.payload, self.examples):
                return value(*args, **kwargs)
        return run


_BUNDLES: dict[str, Bundle] = {}


def bundle(payload: dict, origin: str) -> Bundle:
    key = hashlib.sha1(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    if key not in _BUNDLES:
        _BUNDLES[key] = Bundle(payload, origin)
    return _BUNDLES[key]


# -- finding the notebook's payload ---------------------------------------------------------------
_READ: dict[str, tuple[tuple, dict | None]] = {}


def _read(path: Path) -> dict | None:
    """The payload a notebook's metadata or a visible_checks.json holds (None: none)."""
    try:
        info = path.stat()
        stamp = (info.st_mtime_ns, info.st_size)
        if str(path) in _READ and _READ[str(path)][0] == stamp:
            return _READ[str(path)][1]
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if path.suffix == ".ipynb":
        data = ((data.get("metadata") or {}).get("tfcourse") or {}).get(KEY) \
            if isinstance(data, dict) else None
    payload = data if isinstance(data, dict) and data.get("modules") else None
    _READ[str(path)] = (stamp, payload)
    return payload


def _named_notebooks() -> list[Path]:
    """The notebook this kernel runs, where something says which."""
    named = [os.environ.get(checking_kernel) for checking_kernel in
             ("TFCOURSE_CHECK_KERNEL", "JPY_SESSION_NAME")]
    shell = checking._shell()
    if shell is not None:
        named += [shell.user_ns.get(name) for name in ("__session__", "__vsc_ipynb_file__")]
    return [Path(name) for name in named if isinstance(name, str) and name.endswith(".ipynb")]


def _candidates(folder: Path) -> list[Path]:
    here = sorted(folder.glob("*.ipynb"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    return [*_named_notebooks(), *here, folder / "visible_checks.json"]


def payloads(folder: str | Path | None = None) -> list[tuple[str, dict]]:
    """(where, payload) of every payload the kernel can see, in the order they are looked at."""
    found, seen = [], set()
    for path in _candidates(Path(folder or Path.cwd())):
        payload = _read(path)
        if payload is not None and str(path.resolve()) not in seen:
            seen.add(str(path.resolve()))
            found.append((str(path), payload))
    return found


def _cannot(name: str, why: str):
    def run(*args, **kwargs):
        checking._report_failure(checking.say("check.{name} could not run: {reason}",
                                              {"name": name, "reason": why}),
                                 checking.CheckNotRun)
    run.__name__ = name
    return run


class Checks:
    """`check` in a notebook: check.X is the course's visible check X for this notebook.

    `override` (tests, the build) replaces parts of the payload found: the course folder's
    modules and messages (course_payload), say, to run the checks as they are now."""

    def __init__(self, override: dict | None = None, folder: str | Path | None = None):
        self._override, self._folder = override, folder

    def _bundles(self, name: str | None = None):
        found = payloads(self._folder)
        if self._override is not None:
            found = [(where, {**payload, **self._override}) for where, payload in found] or \
                [("the course folder", dict(self._override))]
        listed = [item for item in found if name in (item[1].get("checks") or [])]
        for where, payload in listed + [item for item in found if item not in listed]:
            yield bundle(payload, where)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in GENERIC:
            return getattr(checking, name)
        problems = []
        try:
            for each in self._bundles(name):
                if hasattr(each.entry, name):
                    return each.attribute(name)
        except LookupError as error:
            problems.append(str(error))
        folder = Path(self._folder or Path.cwd())
        why = checking.say(
            "this notebook's visible checks were not found: neither the notebook (in {folder}) "
            "nor a visible_checks.json beside it carries them. Open the notebook from the folder "
            "of its release, or get the release again", {"folder": str(folder)})
        return _cannot(name, "; ".join(problems) or why)

    def __dir__(self):
        names = set(GENERIC)
        for each in self._bundles():
            names |= set(each.names())
        return sorted(names)


def use_language(lang: str) -> None:
    """The language of the checks' messages and the pictures' titles (the notebook's edition sets
    it); the course's messages come with the notebook's visible checks."""
    checking.use_language(lang)
    for _, payload in payloads():
        checking.use_catalog(payload.get("locale"))
        break


check = Checks()
