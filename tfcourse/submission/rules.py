"""The course's rule against torch's ready-made attention, read from the student's source code.

Every cell the student wrote is read (answer cells, cells they added, helpers, top-level
statements), and the course's own set-up cells too, for what their imports mean (`F` is
torch.nn.functional). Each top-level statement is a unit; the units make a graph of top-level
names: a unit *binds* the names it defines or assigns, and those it changes (`X.forward = ...`,
`setattr(X, ...)`, `lst.append(...)`, a helper called with X that changes its argument); it
*reads* the global names its code uses. A stub breaks the rule when a unit that binds it, or one
it reaches through the names it reads, holds a flagged construct (docs/rules.md lists them):

- torch's ready-made attention (course.yaml `rules.forbidden`) or one of its relatives in torch
  (`torch._C._nn.scaled_dot_product_attention`, `torch.ops.aten._scaled_dot_product_attention_math`,
  `nn.modules.activation.MultiheadAttention`, ...), however it was imported or aliased;
- dynamic access that can hide a name from this reading (`getattr(F, "scaled_" + "dot...")`,
  `globals()`, `exec`, `importlib`, `sys.modules`, `__dict__`, `__wrapped__`, pickles, ctypes, ...).

Honest code is left alone: a scratch statement comparing with `F.scaled_dot_product_attention`
binds nothing a stub uses, and `getattr(self, "w_" + name)` looks only at the student's own object.
Another stub called by its name (`scaled_dot_product_attention(q, k, v)` inside MultiHeadAttention)
is judged on its own: the checks call a stand-in in its place.

This is static analysis of a dynamic language: it reports what it can see, and flags the constructs
that could hide the rest. The sandbox's tripwire (sandbox/worker.py) is the second net, at run time.
Nothing here recurses over the student's syntax tree, so no nesting depth can crash it.
"""
from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Iterable

# course.yaml forbidden name (its last part) -> the other names in torch that reach the same code:
# private entry points (torch._C, torch._VF, torch.ops.aten), kernels and toggles. Kept equal to
# the table in sandbox/worker.py `_tripwire` (tests/test_rules.py checks that they agree).
RELATIVES = {
    "scaled_dot_product_attention": r"scaled_dot|sdpa|(?:^|_)sdp(?:_|$)|flash_attention|"
                                    r"efficient_attention|cudnn_attention|fused_attention|"
                                    r"flex_attention|CausalBias|causal_lower_right|"
                                    r"causal_upper_left",
    "multi_head_attention_forward": r"multi_head_attention",
    "MultiheadAttention": r"MultiheadAttention",
    "TransformerEncoderLayer": r"TransformerEncoderLayer|transformer_encoder_layer",
    "TransformerDecoderLayer": r"TransformerDecoderLayer|transformer_decoder_layer",
}

READY_MADE = "torch's ready-made attention"
HIDES = "which can hide torch's ready-made attention from this check"


def _hiding(why: str) -> str:
    return f"which {why}, and so can hide {READY_MADE} from this check"


# torch's operator tables: every operator, attention's kernels too, by name. No answer needs them.
PRIVATE = "a private table of torch's operators"
PRIVATE_TABLES = ("torch.ops", "torch._ops", "torch._C", "torch._VF", "torch.library",
                  "torch._library", "torch._refs", "torch._decomp", "torch._prims",
                  "torch.overrides", "torch._overrides")
# Modules (or their members) whose use is flagged, with why; `True`: it can change anything in the
# process (so it counts against every stub, wherever it is run).
DYNAMIC_PATHS = {
    "importlib": ("imports a module by a name given at run time", False),
    "builtins.__import__": ("imports a module by a name given at run time", False),
    "runpy": ("runs code given at run time", True),
    "pkgutil": ("imports modules by names given at run time", False),
    "zipimport": ("imports code given at run time", True),
    "code": ("runs code given at run time", True),
    "codeop": ("compiles code given at run time", True),
    "pydoc": ("looks up objects by a name given at run time", False),
    "builtins.exec": ("runs code given as a string", True),
    "builtins.eval": ("runs code given as a string", True),
    "builtins.compile": ("compiles code given as a string", True),
    "builtins.globals": ("reaches the notebook's names as a dictionary", True),
    "builtins.locals": ("reaches names as a dictionary", True),
    "builtins.breakpoint": ("starts a debugger that runs any code", True),
    "sys.modules": ("reaches modules as a dictionary", True),
    "sys._getframe": ("reaches the running frames and their names", True),
    "sys.meta_path": ("changes how modules are imported", True),
    "sys.path_hooks": ("changes how modules are imported", True),
    "sys.settrace": ("runs code on every line", True),
    "sys.setprofile": ("runs code on every call", True),
    "inspect.currentframe": ("reaches the running frames and their names", True),
    "inspect.stack": ("reaches the running frames and their names", True),
    "inspect.getmembers": ("lists an object's members by name", False),
    "inspect.getmembers_static": ("lists an object's members by name", False),
    "inspect.getattr_static": ("looks up a member by name", False),
    "inspect.unwrap": ("unwraps a function to what it wraps", False),
    "operator.attrgetter": ("looks up a member by a name given at run time", False),
    "string.Formatter": ("looks up a member by a name given at run time (get_field)", False),
    "logging.config": ("looks up objects by a dotted name given at run time", False),
    "_frozen_importlib": ("reaches the import machinery", False),
    "_frozen_importlib_external": ("reaches the import machinery", False),
    "_imp": ("reaches the import machinery", False),
    "operator.methodcaller": ("calls a method by a name given at run time", False),
    "codecs": ("decodes text at run time", False),
    "base64": ("decodes text at run time", False),
    "binascii": ("decodes text at run time", False),
    "zlib": ("decompresses data at run time", False),
    "bz2": ("decompresses data at run time", False),
    "lzma": ("decompresses data at run time", False),
    # A pickle loaded can call any function (setattr on torch, exec): it can change anything
    **{f"{module}.{name}": ("loads pickled objects (any function can hide in one, and run)",
                            True)
       for module in ("pickle", "_pickle") for name in ("load", "loads", "Unpickler")},
    "pickle": ("loads pickled objects (any function can hide in one)", False),
    "_pickle": ("loads pickled objects (any function can hide in one)", False),
    "copyreg": ("changes how objects are pickled", False),
    "marshal": ("loads compiled code", False),
    "shelve": ("loads pickled objects (any function can hide in one)", False),
    "dill": ("loads pickled objects (any function can hide in one)", False),
    "cloudpickle": ("loads pickled objects (any function can hide in one)", False),
    "torch.load": ("loads pickled objects (any function can hide in one)", False),
    "torch.jit.load": ("loads compiled code", False),
    "torch.package": ("loads pickled objects (any function can hide in one)", False),
    "torch.hub": ("loads code from elsewhere", False),
    "ctypes": ("reaches the process's memory directly", True),
    "_ctypes": ("reaches the process's memory directly", True),
    "cffi": ("reaches the process's memory directly", True),
    "types.FunctionType": ("builds a function from a code object", False),
    "types.LambdaType": ("builds a function from a code object", False),
    "types.CodeType": ("builds a code object", False),
    "subprocess": ("runs another program, out of reach of this check and of the tripwire",
                   False),
    "multiprocessing": ("runs code in another process, out of reach of this check and of the "
                        "tripwire", False),
    "concurrent.futures.ProcessPoolExecutor": ("runs code in another process, out of reach of "
                                               "this check and of the tripwire", False),
    "pty": ("runs another program", False),
    "os.system": ("runs another program", False),
    "os.popen": ("runs another program", False),
    "os.fork": ("runs code in another process", False),
    "os.forkpty": ("runs code in another process", False),
    "os.posix_spawn": ("runs another program", False),
    "os.posix_spawnp": ("runs another program", False),
    # The grader's harness in the student's process (worker.py runs as __main__, beside channel.py
    # and standins.py): through it every reply to the grader could be rewritten.
    "__main__": ("reaches the grader's harness in this process", True),
    "worker": ("reaches the grader's harness in this process", True),
    "channel": ("reaches the grader's harness in this process", True),
    "standins": ("reaches the grader's harness in this process", True),
    "gc.get_objects": ("walks every object of the process, the grader's harness included", True),
    "gc.get_referrers": ("walks every object of the process, the grader's harness included",
                         True),
    "gc.get_referents": ("walks every object of the process, the grader's harness included",
                         True),
}
for _name in ("execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
              "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp",
              "spawnvpe"):
    DYNAMIC_PATHS[f"os.{_name}"] = ("runs another program", False)

# Attributes that reach around names; (why, writes). Those in OWN_OK are fine on the student's
# own objects (self, their classes).
DUNDERS = {
    "__dict__": ("reaches an object's members as a dictionary", True),
    "__globals__": ("reaches a function's global names", True),
    "__builtins__": ("reaches Python's built-in names", True),
    "__code__": ("reaches a function's compiled code", True),
    "__closure__": ("reaches what a function closes over", False),
    "cell_contents": ("reaches what a function closes over", True),
    "__getattribute__": ("looks up a member by name", False),
    "__getattr__": ("looks up a member by name", False),
    "__setattr__": ("changes a member by name", True),
    "__delattr__": ("removes a member by name", True),
    "__subclasses__": ("lists classes of the whole process", False),
    "__wrapped__": ("unwraps a function to what it wraps", False),
    "__import__": ("imports a module by a name given at run time", False),
    "__loader__": ("reaches the module loader", True),
    "__spec__": ("reaches the module loader", True),
    "f_globals": ("reaches a frame's global names", True),
    "f_locals": ("reaches a frame's names", True),
    "f_builtins": ("reaches Python's built-in names", True),
    "f_back": ("reaches the calling frame", True),
    "tb_frame": ("reaches a frame and its names", True),
    "gi_frame": ("reaches a frame and its names", True),
    "cr_frame": ("reaches a frame and its names", True),
}
OWN_OK = {"__dict__", "__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
# Builtins that reach members by a name; the name must be a constant, or the object their own.
BY_NAME = {"getattr", "hasattr", "setattr", "delattr"}
# Builtins that list or reach members wholesale, fine on the student's own objects.
WHOLESALE = {"vars": ("reaches an object's members as a dictionary", True),
             "dir": ("lists an object's members by name", False)}
# String methods whose argument is compared with a name (a search through members by name).
MATCHING = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count",
            "removeprefix", "removesuffix", "__eq__", "__contains__", "match", "fullmatch",
            "search"}
# Files an import loads: code that names one may write a module to import (and hide a name in it).
CODE_FILES = (".py", ".pyc", ".pth", ".so")
# Methods through which reading a dictionary of names stays a read.
READING = {"get", "keys", "items", "values", "__contains__", "__getitem__", "copy"}

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
OWN = "<own>"


# -- what comes out ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One flagged construct in the student's code."""
    what: str           # "torch.nn.functional.scaled_dot_product_attention", "getattr with ..."
    why: str            # "torch's ready-made attention", "which can hide ..."
    cell: str           # the cell's label, as students see it ("sdpa-code", "7")
    line: int
    api: bool = True    # a forbidden API (True), or dynamic access that can hide one
    writes: bool = False  # it can change any name in the process

    @property
    def where(self) -> str:
        cell = f"cell {self.cell}" if self.cell else "a cell"
        return f"{cell}, line {self.line}"

    def describe(self) -> str:
        return f"uses {self.what} ({self.where}), {self.why}"


@dataclass(frozen=True)
class Violation:
    """A finding charged to a stub, and the names through which the stub reaches it."""
    finding: Finding
    via: tuple[str, ...] = ()     # top-level names from the stub to the finding's unit
    everywhere: bool = False      # it was in code that can change anything (exec, a pickle...)

    def message(self) -> str:
        text = self.finding.describe()
        for name in reversed(self.via):
            text = f"uses {name}, which {text}"
        if self.everywhere:
            text = "may be changed by code that " + text
        return text


@dataclass
class Result:
    """What `check` found: violations by top-level name, and the cells it could not read."""
    by_name: dict[str, list[Violation]] = field(default_factory=dict)
    unchecked: list[tuple[str, str]] = field(default_factory=list)   # (cell label, why)

    def get(self, name: str, default=()):
        return self.by_name.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def messages(self, names: Iterable[str]) -> list[str]:
        """`name message` for each violation of these names, without repeats."""
        seen: dict[str, None] = {}
        for name in names:
            for violation in self.by_name.get(name, ()):
                seen.setdefault(f"{name} {violation.message()}")
        return list(seen)


def violations(sources, forbidden: list[str], *, context: Iterable[str] = (),
               stubs: Iterable[str] | None = None, known_modules: Iterable[str] = ()
               ) -> dict[str, list[Violation]]:
    """Top-level name -> the violations charged to it (see `check`)."""
    return check(sources, forbidden, context=context, stubs=stubs,
                 known_modules=known_modules).by_name


def check(sources, forbidden: list[str], *, context: Iterable[str] = (),
          stubs: Iterable[str] | None = None, known_modules: Iterable[str] = ()) -> Result:
    """Read the student's cells against the rule.

    sources: the student's cells, in notebook order: source strings, or (label, source) pairs.
    forbidden: course.yaml `rules.forbidden` less `allowed` (Course.forbidden_names()).
    context: the course's own cells run before them (their imports give names their meaning).
    stubs: the names the checks grade; each is judged on its own code, so another stub it calls by
        name does not pass its violations on (the checks call a stand-in there). None: no stubs.
    known_modules: modules the course ships beside the notebook (attention_parts, ...).
    """
    cells = [(str(index + 1), item) if isinstance(item, str) else (str(item[0]), item[1])
             for index, item in enumerate(sources)]
    return _Analysis(list(forbidden), set(stubs or ()), set(known_modules)).run(
        [("setup", text) for text in context], cells)


# -- reading cells ---------------------------------------------------------------------------
def parse(source: str) -> tuple[ast.Module | None, str | None]:
    """The cell's syntax tree, or why there is none. Never raises."""
    try:
        return ast.parse(source), None
    except SyntaxError as error:
        return None, f"it is not valid Python ({error.msg}, line {error.lineno})"
    except (ValueError, TypeError) as error:
        return None, f"it is not valid Python ({error})"
    except (RecursionError, MemoryError):
        pass
    # Python builds the tree recursively: deeply nested code needs more stack than the default.
    # Try again on a thread with a large stack, where the student's process could not go deeper.
    box: list = []

    def deep():
        try:
            box.append(ast.parse(source))
        except BaseException as error:    # noqa: BLE001 - anything is "could not read it"
            box.append(error)
    limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(512 << 20)
        try:
            sys.setrecursionlimit(max(limit, 200_000))
            worker = threading.Thread(target=deep, daemon=True)
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(limit)
            threading.stack_size(old_size)
    except (RuntimeError, ValueError, MemoryError) as error:
        box.append(error)
    if box and isinstance(box[0], ast.Module):
        return box[0], None
    return None, "it is nested too deeply to be read"


class _Scope:
    __slots__ = ("kind", "parent", "bound", "declared_global", "bindings", "own")

    def __init__(self, kind: str, parent: "_Scope | None"):
        self.kind, self.parent = kind, parent
        self.bound: set[str] = set()
        self.declared_global: set[str] = set()
        self.bindings: dict[str, list] = {}       # name -> [(kind, value)]
        self.own: set[str] = set()                # self / cls of a method

    def bind(self, name: str, kind: str, value=None) -> None:
        self.bound.add(name)
        self.bindings.setdefault(name, []).append((kind, value))


@dataclass(eq=False)
class _Unit:
    """One top-level statement (or the header of a top-level if/for/with/try/match)."""
    cell: str
    line: int
    roots: list
    trusted: bool
    nodes: list = field(default_factory=list)        # (node, scope) pairs, every node once
    parents: dict = field(default_factory=dict)      # id(node) -> parent node
    binds: set = field(default_factory=set)          # module-level names bound
    reads: dict = field(default_factory=dict)        # global name -> True when only called
    mutates: set = field(default_factory=set)        # module-level names it may change
    everywhere: bool = False                         # it changes torch, Python or the untraced
    findings: list = field(default_factory=list)


class _Analysis:
    def __init__(self, forbidden: list[str], stubs: set[str], known_modules: set[str]):
        self.stubs = stubs
        self.known_modules = known_modules
        self.matchers = []
        for api in forbidden:
            last = api.rsplit(".", 1)[-1]
            pattern = RELATIVES.get(last)
            self.matchers.append((api, last, re.compile(pattern) if pattern else None))
        self.units: list[_Unit] = []
        self.module_bindings: list[tuple[str, str, object, _Unit]] = []
        self.module_paths: dict[str, set[str]] = {}
        self.imported: set[str] = set()       # module-level names bound by an import
        self.own_names: set[str] = set()      # bound only by the student's def and class
        self.star_modules: set[str] = set()
        self.param_mutations: dict[str, set[int]] = {}
        self._outer_iters: set[int] = set()
        self._handled: set[int] = set()
        self._named: set[int] = set()
        self._memo: dict = {}
        self._resolved: dict = {}

    # -- matching names against the rule ------------------------------------------------------
    def api_of(self, name: str, *, exact_or_private: bool = False) -> str | None:
        """The forbidden API one name (one part of a path) belongs to, if any."""
        for api, last, relatives in self.matchers:
            if name == last:
                return api
            if relatives is not None and relatives.search(name) and \
                    (not exact_or_private or name.startswith("_")):
                return api
        return None

    def api_of_path(self, path: str) -> str | None:
        if not (path == "torch" or path.startswith("torch.")):
            return None
        for part in path.split(".")[1:]:
            api = self.api_of(part)
            if api:
                return api
        return None

    def api_of_string(self, text: str, strict: bool = False) -> str | None:
        """The forbidden API a string names, when it is a name ("aten::_scaled_dot_product_
        attention_math", "MultiheadAttention"): no spaces, as prose has."""
        text = text.strip()
        if not text or len(text) > 300 or any(c.isspace() for c in text):
            return None
        for part in re.split(r"\W+", text):
            api = self.api_of(part, exact_or_private=strict) if part else None
            if api:
                return api
        return None

    @staticmethod
    def ready_made(shown: str, api: str) -> str:
        return READY_MADE if shown == api else f"{READY_MADE} ({api})"

    # -- the whole run --------------------------------------------------------------------------
    def run(self, context: list[tuple[str, str]], cells: list[tuple[str, str]]) -> Result:
        result = Result()
        for label, source in context:
            tree, _ = parse(source)
            if tree is not None:
                self._add_units(label, tree, trusted=True)
        for label, source in cells:
            tree, why = parse(source)
            if tree is None:
                result.unchecked.append((label, why))
            else:
                self._add_units(label, tree, trusted=False)
        if not self.matchers:                       # everything allowed: no rule to break
            return result
        for unit in self.units:
            self._scan(unit)
        self._module_names()
        students = [unit for unit in self.units if not unit.trusted]
        for unit in students:
            self._param_mutations(unit)
        for unit in students:
            self._inspect(unit)
        self._charge(students, result)
        return result

    def _add_units(self, label: str, tree: ast.Module, trusted: bool) -> None:
        pending = deque(tree.body)
        while pending:
            statement = pending.popleft()
            line = getattr(statement, "lineno", 0)
            body: list = []
            roots: list = [statement]
            if isinstance(statement, (ast.Import, ast.ImportFrom)) and len(statement.names) > 1:
                for alias in statement.names:        # `import a, b`: a unit for each name
                    single = ast.copy_location(ast.Import(names=[alias]) if isinstance(
                        statement, ast.Import) else ast.ImportFrom(
                            module=statement.module, names=[alias], level=statement.level),
                        statement)
                    self.units.append(_Unit(label, line, [single], trusted))
                continue
            if isinstance(statement, (ast.If, ast.While)):
                roots, body = [statement.test], statement.body + statement.orelse
            elif isinstance(statement, (ast.For, ast.AsyncFor)):
                roots = [statement.target, statement.iter]
                body = statement.body + statement.orelse
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                roots, body = list(statement.items), statement.body
            elif isinstance(statement, _TRIES):
                roots = list(statement.handlers)     # their types and names; bodies below
                body = statement.body + statement.orelse + statement.finalbody
                body += [s for handler in statement.handlers for s in handler.body]
            elif isinstance(statement, ast.Match):
                roots = [statement.subject] + [part for case in statement.cases
                                               for part in (case.pattern, case.guard) if part]
                body = [s for case in statement.cases for s in case.body]
            unit = _Unit(label, line, roots, trusted)
            self.units.append(unit)
            pending.extendleft(reversed(body))

    # -- pass 1: scopes, bindings, reads --------------------------------------------------------
    def _scan(self, unit: _Unit) -> None:
        module = _Scope("module", None)
        loads = []
        roots = {id(root) for root in unit.roots}
        stack = [(root, module, None) for root in reversed(unit.roots)]
        while stack:
            node, scope, parent = stack.pop()
            unit.nodes.append((node, scope))
            if parent is not None:
                unit.parents[id(node)] = parent
            inner = self._enter(node, scope, unit) if isinstance(node, _SCOPES) else scope
            if isinstance(node, ast.ExceptHandler) and id(node) in roots:
                children = [(node.type, scope)] if node.type else []   # its body: other units
            else:
                children = self._children(node, scope, inner)
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    loads.append((node, scope))
                elif id(node) not in self._handled:
                    self._bind(scope, node.id, unit)
            elif isinstance(node, ast.NamedExpr):
                target = scope
                while target.kind == "comprehension":
                    target = target.parent
                self._handled.add(id(node.target))
                self._bind(target, node.target.id, unit, "assign", node.value)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._bind_import(node, scope, unit)
            elif isinstance(node, ast.Global):
                scope.declared_global.update(node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bind(scope, node.name, unit)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                self._bind(scope, node.name, unit)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self._bind(scope, node.rest, unit)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind_value(scope, target, node.value, unit)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                self._bind_value(scope, node.target, node.value if isinstance(
                    node, ast.AnnAssign) else None, unit)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._bind_loop(scope, node.target, node.iter, unit)
            for child, child_scope in reversed(children):
                stack.append((child, child_scope, node))
        for node, scope in loads:
            if _is_global(node.id, scope):
                parent = unit.parents.get(id(node))
                called = isinstance(parent, ast.Call) and parent.func is node
                unit.reads[node.id] = unit.reads.get(node.id, True) and called

    def _children(self, node, scope: _Scope, inner: _Scope) -> list:
        """Child nodes, each with the scope it is evaluated in."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            outer = [*args.defaults, *[d for d in args.kw_defaults if d is not None]]
            if not isinstance(node, ast.Lambda):
                outer += node.decorator_list
                outer += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                 args.vararg, args.kwarg)
                          if a is not None and a.annotation is not None]
                if node.returns is not None:
                    outer.append(node.returns)
            body = [node.body] if isinstance(node, ast.Lambda) else node.body
            return [(n, scope) for n in outer] + [(n, inner) for n in body]
        if isinstance(node, ast.ClassDef):
            outer = [*node.decorator_list, *node.bases, *node.keywords]
            return [(n, scope) for n in outer] + [(n, inner) for n in node.body]
        if isinstance(node, _COMPREHENSIONS):
            out = []
            if node.generators:
                first = node.generators[0].iter
                self._outer_iters.add(id(first))
                out.append((first, scope))
            out += [(generator, inner) for generator in node.generators]
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return out + [(part, inner) for part in parts]
        if isinstance(node, ast.comprehension):
            kids = [node.target, *node.ifs]
            if id(node.iter) not in self._outer_iters:
                kids.append(node.iter)
            return [(kid, scope) for kid in kids]
        return [(child, scope) for child in ast.iter_child_nodes(node)]

    def _enter(self, node, scope: _Scope, unit: _Unit) -> _Scope:
        if isinstance(node, _COMPREHENSIONS):
            return _Scope("comprehension", scope)
        if isinstance(node, ast.ClassDef):
            self._bind(scope, node.name, unit, "class", node)
            return _Scope("class", scope)
        inner = _Scope("function", scope)
        if not isinstance(node, ast.Lambda):
            self._bind(scope, node.name, unit, "def", node)
        args = node.args
        for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
            if arg is not None:
                inner.bind(arg.arg, "param", arg)
        positional = [*args.posonlyargs, *args.args]
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                     for d in getattr(node, "decorator_list", ()))
        if scope.kind == "class" and positional and not static:
            inner.own.add(positional[0].arg)
        return inner

    def _bind(self, scope: _Scope, name: str, unit: _Unit, kind: str = "other", value=None):
        if scope.kind != "module" and name not in scope.declared_global:
            scope.bind(name, kind, value)
            return
        scope.bind(name, kind, value)
        unit.binds.add(name)
        self.module_bindings.append((name, kind, value, unit))

    def _bind_import(self, node, scope: _Scope, unit: _Unit) -> None:
        for alias in node.names:
            if alias.name == "*":
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    self.star_modules.add(node.module)
                    if scope.kind == "module":
                        for name in self._star_names(node.module):
                            self._bind(scope, name, unit, "star", node.module)
                continue
            name = alias.asname or alias.name.split(".")[0]
            self._bind(scope, name, unit, "import", (node, alias))

    def _bind_value(self, scope: _Scope, target, value, unit: _Unit) -> None:
        """Names bound by `target = value`; a tuple target unpacks a tuple value item by item."""
        pending = [(target, value)]
        while pending:
            target, value = pending.pop()
            if isinstance(target, ast.Name):
                self._handled.add(id(target))
                self._bind(scope, target.id, unit, "assign" if value is not None else "other",
                           value)
            elif isinstance(target, (ast.Tuple, ast.List)):
                values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and \
                    len(value.elts) == len(target.elts) else [None] * len(target.elts)
                pending.extend(zip(target.elts, values))
            elif isinstance(target, ast.Starred):
                pending.append((target.value, None))

    def _bind_loop(self, scope: _Scope, target, iterable, unit: _Unit) -> None:
        if isinstance(target, ast.Name):
            self._handled.add(id(target))
            self._bind(scope, target.id, unit, "for", iterable)

    def _star_names(self, module: str) -> set[str]:
        return {last for api, last, _ in self.matchers if api.rsplit(".", 1)[0] == module}

    # -- pass 2: what the notebook's global names are -------------------------------------------
    def _module_names(self) -> None:
        kinds: dict[str, set[str]] = {}
        for name, kind, _, unit in self.module_bindings:
            kinds.setdefault(name, set()).add(
                "own" if kind in ("def", "class") and not unit.trusted else kind)
        self.own_names = {name for name, found in kinds.items() if found == {"own"}}
        self.imported = {name for name, found in kinds.items() if found & {"import", "star"}}
        for name in self.own_names:
            self.module_paths[name] = {OWN}
        for _ in range(8):                          # aliases of aliases, a few levels deep
            changed = False
            self._memo.clear()
            self._resolved.clear()
            for name, kind, value, _ in self.module_bindings:
                if name in self.own_names:
                    continue
                paths = self._binding_paths(kind, value, None, 0)
                known = self.module_paths.setdefault(name, set())
                if not paths <= known:
                    known |= paths
                    changed = True
            if not changed:
                break
        self._memo.clear()
        self._resolved.clear()

    def _binding_paths(self, kind: str, value, scope, depth: int) -> set[str]:
        if kind == "import":
            node, alias = value
            if isinstance(node, ast.Import):
                return {alias.name if alias.asname else alias.name.split(".")[0]}
            if node.level or not node.module:
                return set()
            return {f"{node.module}.{alias.name}"}
        if kind == "star":
            return set()
        if kind == "assign" and value is not None:
            return set(self.resolve(value, scope, depth + 1))
        if kind == "for" and value is not None:
            return {OWN} if OWN in self.resolve(value, scope, depth + 1) else set()
        return set()

    # -- resolving an expression to what it is --------------------------------------------------
    def resolve(self, expr, scope: _Scope | None, depth: int = 0) -> frozenset:
        """The dotted paths an expression may be ("torch.nn.functional"; OWN for the student's own
        objects); empty when unknown. Attribute chains are walked in a loop and remembered, so a
        chain thousands long costs little; other nesting is followed a few levels only."""
        if expr is None or depth > 12:
            return frozenset()
        key = (id(expr), id(scope))
        if key in self._resolved:
            return self._resolved[key]
        chain = []
        node = expr
        while isinstance(node, ast.Attribute) and (id(node), id(scope)) not in self._resolved:
            chain.append(node)
            node = node.value
        if (id(node), id(scope)) in self._resolved:
            base = self._resolved[(id(node), id(scope))]
        elif isinstance(node, ast.Name):
            base = self._lookup(node.id, scope, depth)
        elif isinstance(node, ast.Subscript):
            base = self._subscript(node, scope, depth)
        elif isinstance(node, ast.Call):
            base = self._call_result(node, scope, depth)
        else:
            base = frozenset()
        if not chain:
            self._resolved[key] = base
            return base
        self._resolved[(id(node), id(scope))] = base
        for attribute in reversed(chain):
            base = frozenset(OWN if path == OWN else _shorten(f"{path}.{attribute.attr}")
                             for path in base)
            self._resolved[(id(attribute), id(scope))] = base
        return base

    def _subscript(self, node: ast.Subscript, scope, depth: int) -> frozenset:
        inner = self.resolve(node.value, scope, depth + 1)
        key = node.slice.value if isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, str) else None
        if OWN in inner and len(inner) == 1:
            return frozenset({OWN})
        if key is None:
            return frozenset()
        if "sys.modules" in inner:
            return frozenset({key})
        return frozenset(path[:-len(".__dict__")] + "." + key for path in inner
                         if path.endswith(".__dict__"))

    def _call_result(self, node: ast.Call, scope, depth: int) -> frozenset:
        callee = self.resolve(node.func, scope, depth + 1)
        args = node.args
        if "builtins.getattr" in callee and len(args) >= 2:
            names = self.constant_strings(args[1], scope)
            if not names:
                return frozenset()
            target = self.resolve(args[0], scope, depth + 1)
            return frozenset(OWN if p == OWN else f"{p}.{n}" for p in target for n in names)
        if callee & {"importlib.import_module", "builtins.__import__"} and args:
            return frozenset(self.constant_strings(args[0], scope) or ())
        if "builtins.super" in callee:
            return frozenset({OWN})
        if "builtins.vars" in callee and args:
            return frozenset(p if p == OWN else p + ".__dict__"
                             for p in self.resolve(args[0], scope, depth + 1))
        if isinstance(node.func, ast.Call) and args:      # attrgetter("a.b")(x)
            maker = self.resolve(node.func.func, scope, depth + 1)
            if "operator.attrgetter" in maker and node.func.args:
                names = self.constant_strings(node.func.args[0], scope)
                if names:
                    target = self.resolve(args[0], scope, depth + 1)
                    return frozenset(OWN if p == OWN else f"{p}.{n}" for p in target
                                     for n in names)
        if callee == frozenset({OWN}) and isinstance(node.func, ast.Name) and \
                node.func.id in self.own_names:
            return frozenset({OWN})                     # an instance of their own class
        return frozenset()

    def _lookup(self, name: str, scope: _Scope | None, depth: int) -> frozenset:
        first = True
        while scope is not None and scope.kind != "module":
            if name in scope.declared_global:
                break
            if name in scope.bound and (first or scope.kind != "class"):
                if name in scope.own:
                    return frozenset({OWN})
                key = (id(scope), name)
                if key not in self._memo:
                    self._memo[key] = frozenset()        # a cycle resolves to unknown
                    paths: set[str] = set()
                    for kind, value in scope.bindings.get(name, ()):
                        paths |= self._binding_paths(kind, value, scope, depth)
                    self._memo[key] = frozenset(paths)
                return self._memo[key]
            first = False
            scope = scope.parent
        if name in self.module_paths:
            return frozenset(self.module_paths[name])
        if name == "__builtins__":
            return frozenset({"builtins"})
        if hasattr(builtins, name):
            return frozenset({f"builtins.{name}"})
        return frozenset(f"{module}.{name}" for module in self.star_modules)

    def constant_strings(self, expr, scope, depth: int = 0) -> set[str] | None:
        """The strings an expression can be, when all are known: constants, loops over constant
        tuples, f-strings and sums of those. None otherwise."""
        if expr is None or depth > 8:
            return None
        if isinstance(expr, ast.Constant):
            return {expr.value} if isinstance(expr.value, str) else None
        if isinstance(expr, ast.JoinedStr):
            parts = []
            for value in expr.values:
                if isinstance(value, ast.Constant):
                    parts.append({str(value.value)})
                    continue
                if not isinstance(value, ast.FormattedValue) or value.format_spec is not None \
                        or value.conversion != -1:
                    return None
                found = self.constant_strings(value.value, scope, depth + 1)
                if found is None:
                    return None
                parts.append(found)
            return _combine(parts)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left = self.constant_strings(expr.left, scope, depth + 1)
            right = self.constant_strings(expr.right, scope, depth + 1)
            return None if left is None or right is None else _combine([left, right])
        if not isinstance(expr, ast.Name) or scope is None:
            return None
        current = scope
        while current.kind != "module" and expr.id not in current.bound:
            current = current.parent
        if current.kind == "module":
            return None
        values: set[str] = set()
        for kind, value in current.bindings.get(expr.id, ()):
            if kind == "assign":
                found = self.constant_strings(value, current, depth + 1)
            elif kind == "for" and isinstance(value, (ast.Tuple, ast.List, ast.Set)):
                found = set()
                for element in value.elts:
                    item = self.constant_strings(element, current, depth + 1)
                    if item is None:
                        return None
                    found |= item
            elif kind == "for" and isinstance(value, ast.Constant) and isinstance(value.value, str):
                found = set(value.value)
            else:
                return None
            if found is None:
                return None
            values |= found
        return values or None

    def is_own(self, expr, scope) -> bool:
        paths = self.resolve(expr, scope)
        return paths == frozenset({OWN})

    def describe(self, expr, scope) -> str:
        paths = sorted(p for p in self.resolve(expr, scope) if p != OWN)
        if paths:
            return paths[0]
        root = _root(expr)
        if isinstance(root, ast.Name):
            return f"`{root.id}`, an object this check cannot trace"
        return "an object this check cannot trace"

    @staticmethod
    def how_computed(expr) -> str:
        if isinstance(expr, ast.BinOp):
            return "%-formatting" if isinstance(expr.op, ast.Mod) else "string concatenation"
        if isinstance(expr, ast.JoinedStr):
            return "an f-string"
        if isinstance(expr, ast.Call):
            func = expr.func
            method = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            return {"format": "str.format", "join": "str.join", "decode": "a decode",
                    "chr": "chr()", "fromhex": "bytes.fromhex", "b64decode": "base64"}.get(
                        method, f"{method}()" if method else "a call")
        if isinstance(expr, ast.Name):
            return f"held in `{expr.id}`"
        if isinstance(expr, ast.Subscript):
            return "taken from a container"
        return "computed"

    # -- pass 3: findings and changes, unit by unit ---------------------------------------------
    def _param_mutations(self, unit: _Unit) -> None:
        """For each top-level function, the positions of the parameters it may change."""
        for node, scope in unit.nodes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                    scope.kind != "module":
                continue
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            changed = set()
            for inner in ast.walk(node):
                root = None
                if isinstance(inner, (ast.Attribute, ast.Subscript)) and \
                        isinstance(inner.ctx, (ast.Store, ast.Del)):
                    root = _root(inner)
                elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                        (inner.args or inner.keywords):
                    root = _root(inner.func.value)
                elif isinstance(inner, ast.Call) and inner.args:
                    root = _root(inner.args[0]) if isinstance(inner.func, ast.Name) and \
                        inner.func.id in ("setattr", "delattr") else None
                    for argument in inner.args:         # passed on: it may be changed there
                        if isinstance(argument, ast.Name) and argument.id in params and \
                                not (isinstance(inner.func, ast.Attribute) and
                                     self._is_module_name(_root(inner.func))):
                            changed.add(params.index(argument.id))
                if isinstance(root, ast.Name) and root.id in params:
                    changed.add(params.index(root.id))
            self.param_mutations[node.name] = self.param_mutations.get(node.name, set()) | changed

    def _is_module_name(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.imported and \
            node.id not in self.own_names

    def _inspect(self, unit: _Unit) -> None:
        texts = {id(n.value) for n, _ in unit.nodes
                 if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node, scope in unit.nodes:
            if isinstance(node, ast.Attribute):
                self._attribute(unit, node, scope)
            elif isinstance(node, ast.Name):
                self._name(unit, node, scope)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._import(unit, node)
            elif isinstance(node, ast.Call):
                self._call(unit, node, scope)
            elif isinstance(node, ast.Compare):
                for operand in (node.left, *node.comparators):
                    self._name_string(unit, operand, "in a comparison", strict=True)
            elif isinstance(node, ast.Subscript) and not self.is_own(node.value, scope):
                self._name_string(unit, node.slice, "as a key", strict=True)
            elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and \
                    id(node) not in texts:
                self._code_in_string(unit, node)
            if isinstance(node, (ast.Attribute, ast.Subscript)) and \
                    isinstance(node.ctx, (ast.Store, ast.Del)):
                self._changes(unit, node, scope)

    def _flag(self, unit: _Unit, node, what: str, why: str, api: bool = True,
              writes: bool = False) -> None:
        unit.findings.append(Finding(what, why, unit.cell, getattr(node, "lineno", unit.line),
                                     api, writes))

    def _attribute(self, unit: _Unit, node: ast.Attribute, scope) -> None:
        if node.attr in DUNDERS:
            why, writes = DUNDERS[node.attr]
            if node.attr in OWN_OK and self.is_own(node.value, scope):
                return
            parent = unit.parents.get(id(node))
            if node.attr in OWN_OK and "builtins.object" in self.resolve(node.value, scope) and \
                    isinstance(parent, ast.Call) and parent.args and \
                    self.is_own(parent.args[0], scope):
                return                                   # object.__setattr__(self, ...)
            if writes and node.attr == "__dict__" and self._only_read(unit, node):
                writes = False
            self._flag(unit, node, f"{node.attr} on {self.describe(node.value, scope)}",
                       _hiding(why), api=False, writes=writes)
            return
        base = self.resolve(node.value, scope)
        if base == frozenset({OWN}):
            return
        paths = self.resolve(node, scope)
        for path in sorted(paths):
            api = self.api_of_path(path)
            if api:
                if not any(self.api_of_path(p) for p in base):
                    self._flag(unit, node, path, self.ready_made(path, api))
                return
            table = _table_of(path)
            if table:
                if not any(_table_of(p) for p in base):
                    self._flag(unit, node, f"{path} ({PRIVATE})", _hiding(
                        "reaches any operator by its name"), api=False)
                return
            dynamic = _dynamic_path(path)
            if dynamic:
                parent = unit.parents.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    writes = dynamic[1] and not (path == "sys.modules" and
                                                 self._only_read(unit, node))
                    self._flag(unit, node, path, _hiding(dynamic[0]), api=False,
                               writes=writes)               # the whole path, at its outermost
                return
        if not paths:
            api = self.api_of(node.attr, exact_or_private=True)
            if api:
                self._flag(unit, node, f".{node.attr} of {self.describe(node.value, scope)}",
                           f"named like {READY_MADE} ({api})")

    def _name(self, unit: _Unit, node: ast.Name, scope) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        paths = self.resolve(node, scope)
        parent = unit.parents.get(id(node))
        called = isinstance(parent, ast.Call) and parent.func is node
        for path in sorted(paths):
            if path == "builtins" and node.id == "__builtins__":
                self._flag(unit, node, "__builtins__", _hiding("reaches Python's built-in names"),
                           api=False, writes=True)
                return
            short = path[len("builtins."):] if path.startswith("builtins.") else None
            if short in BY_NAME and not called:
                self._flag(unit, node, f"{short} as a value", _hiding(
                    "hides the name it looks up"), api=False)
                return
            if short in WHOLESALE and called:
                if parent.args and self.is_own(parent.args[0], scope):
                    return
                why, writes = WHOLESALE[short]
                target = self.describe(parent.args[0], scope) if parent.args else \
                    "the notebook's names"
                self._flag(unit, node, f"{short}() on {target}", _hiding(why), api=False,
                           writes=writes and not self._only_read(unit, parent))
                return
            dynamic = _dynamic_path(path)
            if dynamic:
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    return                                # flagged with the attribute's path
                why, writes = dynamic
                if short in ("globals", "locals") and called and self._only_read(unit, parent):
                    writes = False
                shown = f"{short}()" if short else path
                self._flag(unit, node, shown, _hiding(why), api=False, writes=writes)
                return
            api = self.api_of_path(path)
            if api and node.id not in self.module_paths and not _is_local(node.id, scope):
                self._flag(unit, node, path, self.ready_made(path, api))   # from a star import
                return

    def _import(self, unit: _Unit, node) -> None:
        if isinstance(node, ast.ImportFrom) and node.level:
            self._flag(unit, node, "a relative import", _hiding("loads code this check cannot "
                                                                "read"), api=False)
            return
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            members = []
        else:
            modules = [node.module or ""]
            members = [f"{node.module}.{alias.name}" for alias in node.names]
        for full in members:
            if full.endswith(".*"):
                if _table_of(full[:-2]) or full.startswith("torch."):
                    self._flag(unit, node, f"a star import from {full[:-2]}",
                               f"which can bring in {READY_MADE}")
                continue
            api = self.api_of_path(full)
            if api:
                self._flag(unit, node, full, self.ready_made(full, api))
            dynamic = _dynamic_path(full)         # an import changes nothing; what uses it may
            if dynamic and not _dynamic_path(full.rsplit(".", 1)[0]):
                self._flag(unit, node, full, _hiding(dynamic[0]), api=False)
        for module in modules:
            api = self.api_of_path(module)
            if api:
                self._flag(unit, node, module, self.ready_made(module, api))
            dynamic = _dynamic_path(module)
            if dynamic:
                self._flag(unit, node, f"the module {module}", _hiding(dynamic[0]), api=False)
            if _table_of(module):
                self._flag(unit, node, f"{module} ({PRIVATE})", _hiding(
                    "reaches any operator by its name"), api=False)
            top = module.split(".")[0]
            if top and top not in self.known_modules and not _installed(top):
                self._flag(unit, node, f"the module {module}", _hiding(
                    "is not part of Python, torch or the course (a file written while the "
                    "notebook runs?)"), api=False)

    def _call(self, unit: _Unit, node: ast.Call, scope) -> None:
        callee = self.resolve(node.func, scope)
        by_name = sorted(p[len("builtins."):] for p in callee
                         if p.startswith("builtins.") and p[len("builtins."):] in BY_NAME)
        if by_name:
            self._by_name(unit, node, scope, by_name[0])
        elif callee and all(p == "torch" or p.startswith("torch.") for p in callee):
            for argument in (*node.args, *(k.value for k in node.keywords)):
                self._name_string(unit, argument, f"given to {sorted(callee)[0]}")
        for argument in node.args:
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str) and \
                    argument.value.strip().endswith(CODE_FILES):
                self._flag(unit, node, f'the file "{argument.value.strip()}"', _hiding(
                    "is a file of code, which an import can load once written"), api=False,
                    writes=True)
        if isinstance(node.func, ast.Attribute) and node.func.attr in MATCHING:
            for argument in node.args:
                self._name_string(unit, argument, f"given to {node.func.attr}", strict=True)
        if isinstance(node.func, ast.Attribute) and (node.args or node.keywords):
            self._changes(unit, node.func.value, scope, method=True)
        self._argument_changes(unit, node, scope, callee)

    def _by_name(self, unit: _Unit, node: ast.Call, scope, function: str) -> None:
        """getattr, hasattr, setattr, delattr."""
        writes = function in ("setattr", "delattr")
        if len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            self._flag(unit, node, f"{function} with unpacked arguments", HIDES, api=False,
                       writes=writes)
            return
        target, name = node.args[0], node.args[1]
        if writes:
            self._changes(unit, target, scope, store=True)
        own = self.is_own(target, scope)
        names = self.constant_strings(name, scope)
        if names is None:
            if not own:
                self._flag(unit, node, f"{function} with a computed name "
                           f"({self.how_computed(name)}) on {self.describe(target, scope)}",
                           HIDES, api=False, writes=writes)
            return
        for text in sorted(names):
            if text in DUNDERS and not (own and text in OWN_OK):
                why, dunder_writes = DUNDERS[text]
                self._flag(unit, node, f'{function} of "{text}" on {self.describe(target, scope)}',
                           _hiding(why), api=False, writes=dunder_writes or writes)
                return
            api = self.api_of_string(text)
            if api and not own:
                shown = self.describe(target, scope)
                self._flag(unit, node, f'{function}({shown}, "{text}")',
                           self.ready_made(f"{shown}.{text}", api))
                return

    def _argument_changes(self, unit: _Unit, node: ast.Call, scope, callee) -> None:
        """The top-level names given to a call that may change them."""
        if any(p.startswith("builtins.") for p in callee):
            return                                        # setattr/delattr: see _by_name
        if callee and all(p != OWN for p in callee):
            return                                        # a module's function
        positions = None
        if isinstance(node.func, ast.Name) and node.func.id in self.own_names and \
                _is_global(node.func.id, scope):
            positions = self.param_mutations.get(node.func.id)
        for index, argument in enumerate(node.args):
            if positions is not None and index not in positions:
                continue
            argument = argument.value if isinstance(argument, ast.Starred) else argument
            if isinstance(argument, ast.Name):
                self._changes(unit, argument, scope, argument=True)
        if positions is None:
            for keyword in node.keywords:
                if isinstance(keyword.value, ast.Name):
                    self._changes(unit, keyword.value, scope, argument=True)

    def _changes(self, unit: _Unit, target, scope, method: bool = False, argument: bool = False,
                 store: bool = False) -> None:
        """The unit changes what `target` is rooted at: a store target (`X.forward = ...`), the
        object of a method call with arguments, a call's argument, setattr's object."""
        store = store or not (method or argument)
        chain, through_class = target, False
        while isinstance(chain, (ast.Attribute, ast.Subscript)):
            through_class |= isinstance(chain, ast.Attribute) and chain.attr == "__class__"
            chain = chain.value
        if not isinstance(chain, ast.Name):
            if store and isinstance(chain, ast.Call):
                unit.everywhere = True                    # type(x).forward = ..., getattr(..).y =
            return
        if not _is_global(chain.id, scope):
            return
        if self._is_module_name(chain) or "builtins" in self.resolve(chain, scope):
            if store:
                unit.everywhere = True                    # torch.x = ..., F.y = ..., builtins
            return                                        # F.softmax(x) changes nothing
        if through_class:
            unit.everywhere = True
        unit.mutates.add(chain.id)

    def _only_read(self, unit: _Unit, node) -> bool:
        """Whether what `node` gives (a dictionary of names) is only read where it is used."""
        parent = unit.parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return isinstance(parent.ctx, ast.Load)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return parent.attr in READING
        return isinstance(parent, ast.Compare)

    def _name_string(self, unit: _Unit, node, how: str, strict: bool = False) -> None:
        """A constant where a name goes (given to torch, compared, a key) naming an API; with
        `strict`, only its exact name or a private relative counts (a dictionary of the student's
        may well have a key "multi_head_attention")."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in self._named:
            api = self.api_of_string(node.value, strict=strict)
            if api:
                self._named.add(id(node))
                self._flag(unit, node, f'the name "{node.value.strip()}" {how}',
                           f"which names {READY_MADE} ({api})")

    def _code_in_string(self, unit: _Unit, node: ast.Constant) -> None:
        if id(node) in self._named:
            return
        text = node.value if isinstance(node.value, str) else \
            node.value.decode("latin-1", "replace")
        code_like = "\n" in text or ";" in text or "=" in text or "import " in text
        for found in _CODE_IN_TEXT.finditer(text):
            api = self.api_of(found.group(1))
            if api and (code_like or text[found.end():].lstrip().startswith("(")):
                self._flag(unit, node, f'code in a string ("{found.group(0).strip()}")',
                           f"naming {READY_MADE} ({api})")
                return

    # -- the graph: which stub reaches which finding ------------------------------------------
    def _charge(self, students: list[_Unit], result: Result) -> None:
        binding: dict[str, list[_Unit]] = {}
        for unit in students:
            for name in unit.binds | unit.mutates:
                binding.setdefault(name, []).append(unit)
        # Code that can change anything when it runs (exec, a pickle, a change to torch itself),
        # as the notebook loads or when a check calls it: what it holds, and what it reaches,
        # counts against every stub.
        everywhere = [unit for unit in students
                      if unit.everywhere or any(f.writes for f in unit.findings)]
        names = sorted(self.stubs) if self.stubs else sorted(binding)
        for name in names:
            found = self._reach(name, binding, everywhere)
            if found:
                result.by_name[name] = found

    def _reach(self, stub: str, binding, everywhere) -> list[Violation]:
        out: dict[tuple, Violation] = {}
        seen_units: set[int] = set()
        seen_names = {stub}
        queue = deque((unit, (), False) for unit in binding.get(stub, ()))
        queue.extend((unit, (), True) for unit in everywhere)
        while queue:
            unit, via, global_ = queue.popleft()
            if id(unit) in seen_units:
                continue
            seen_units.add(id(unit))
            for finding in unit.findings:
                out.setdefault((finding.what, finding.cell, finding.line),
                               Violation(finding, via, global_))
            for name, only_called in unit.reads.items():
                if name in seen_names or name not in binding:
                    continue
                if only_called and name in self.stubs and name != stub:
                    continue                   # judged on its own: the checks call a stand-in
                seen_names.add(name)
                queue.extend((u, via + (name,), global_) for u in binding[name])
        places = {(v.finding.cell, v.finding.line) for v in out.values() if v.finding.api}
        kept = [v for v in out.values()
                if v.finding.api or (v.finding.cell, v.finding.line) not in places]
        return sorted(kept, key=lambda v: (v.everywhere, len(v.via), not v.finding.api,
                                           v.finding.cell, v.finding.line))


_TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
_CODE_IN_TEXT = re.compile(r"(?:[\w\])]\s*\.\s*|\bimport\s+|aten::)(\w+)")


def _shorten(path: str) -> str:
    """A path of an absurdly long attribute chain, kept to its start and its end."""
    return path if len(path) <= 400 else path[:200] + "..." + path[-150:]


def _combine(parts: list[set[str]]) -> set[str] | None:
    total = 1
    for part in parts:
        total *= max(1, len(part))
    if total > 256:
        return None
    return {"".join(items) for items in product(*parts)}


def _is_global(name: str, scope: _Scope) -> bool:
    return not _is_local(name, scope)


def _is_local(name: str, scope: _Scope) -> bool:
    first = True
    while scope is not None and scope.kind != "module":
        if name in scope.declared_global:
            return False
        if name in scope.bound and (first or scope.kind != "class"):
            return True
        first = False
        scope = scope.parent
    return False


def _table_of(path: str) -> str | None:
    return next((t for t in PRIVATE_TABLES if path == t or path.startswith(t + ".")), None)


def _dynamic_path(path: str):
    for prefix, value in DYNAMIC_PATHS.items():
        if path == prefix or path.startswith(prefix + "."):
            return value
    return None


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node


@lru_cache(maxsize=None)
def _installed(top: str) -> bool:
    """Whether a top-level module can be imported here (the student's process has the same
    Python and packages): the standard library, or found on the path without importing it."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError, AttributeError):
        return False
