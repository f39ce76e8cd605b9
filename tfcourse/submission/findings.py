"""The constructs the course's rule flags in the student's code, unit by unit (rules.py).

A Detector reads each unit of the binding graph (bindings.py) and records a Finding for each use
of torch's ready-made attention or one of its relatives, and for each dynamic access that can hide
one (the tables in sandbox/rulebook.py); it also notes which global names a unit may change.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import lru_cache

from ..sandbox.rulebook import (BY_NAME, CODE_FILES, DUNDERS, HIDES, MATCHING, OWN_OK, PRIVATE,
                                READING, READY_MADE, WHOLESALE, dynamic_path, hiding, matchers,
                                table_of)
from .bindings import OWN, BindingGraph, Unit, is_global, is_local, outside

_CODE_IN_TEXT = re.compile(r"(?:[\w\])]\s*\.\s*|\bimport\s+|aten::)(\w+)")


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


class Detector:
    """Flags constructs in the units of `graph` (after the graph has named its modules)."""

    def __init__(self, graph: BindingGraph, forbidden: list[str], known_modules: set[str]):
        self.graph = graph
        self.known_modules = known_modules
        self.matchers = matchers(forbidden)
        self._named: set[int] = set()

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


    def inspect(self, unit: Unit) -> None:
        """Flag the unit's constructs, and note what it changes."""
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
            elif isinstance(node, ast.Subscript) and not self.graph.is_own(node.value, scope):
                self._name_string(unit, node.slice, "as a key", strict=True)
            elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and \
                    id(node) not in texts:
                self._code_in_string(unit, node)
            if isinstance(node, (ast.Attribute, ast.Subscript)) and \
                    isinstance(node.ctx, (ast.Store, ast.Del)):
                self._changes(unit, node, scope)

    def _flag(self, unit: Unit, node, what: str, why: str, api: bool = True,
              writes: bool = False) -> None:
        unit.findings.append(Finding(what, why, unit.cell, getattr(node, "lineno", unit.line),
                                     api, writes))

    def _attribute(self, unit: Unit, node: ast.Attribute, scope) -> None:
        if node.attr in DUNDERS:
            why, writes = DUNDERS[node.attr]
            if node.attr in OWN_OK and self.graph.is_own(node.value, scope):
                return
            parent = unit.parents.get(id(node))
            if node.attr in OWN_OK and "builtins.object" in self.graph.resolve(node.value,
                                                                               scope) and \
                    isinstance(parent, ast.Call) and parent.args and \
                    self.graph.is_own(parent.args[0], scope):
                return                                   # object.__setattr__(self, ...)
            if writes and node.attr == "__dict__" and self._only_read(unit, node):
                writes = False
            self._flag(unit, node, f"{node.attr} on {self.graph.describe(node.value, scope)}",
                       hiding(why), api=False, writes=writes)
            return
        base = self.graph.resolve(node.value, scope)
        if base == frozenset({OWN}):
            return
        paths = self.graph.resolve(node, scope)
        for path in sorted(paths):
            api = self.api_of_path(path)
            if api:
                if not any(self.api_of_path(p) for p in base):
                    self._flag(unit, node, path, self.ready_made(path, api))
                return
            table = table_of(path)
            if table:
                if not any(table_of(p) for p in base):
                    self._flag(unit, node, f"{path} ({PRIVATE})", hiding(
                        "reaches any operator by its name"), api=False)
                return
            dynamic = dynamic_path(path)
            if dynamic:
                parent = unit.parents.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    writes = dynamic[1] and not (path == "sys.modules" and
                                                 self._only_read(unit, node))
                    self._flag(unit, node, path, hiding(dynamic[0]), api=False,
                               writes=writes)               # the whole path, at its outermost
                return
        if not paths:
            api = self.api_of(node.attr, exact_or_private=True)
            if api:
                self._flag(unit, node, f".{node.attr} of {self.graph.describe(node.value, scope)}",
                           f"named like {READY_MADE} ({api})")

    def _name(self, unit: Unit, node: ast.Name, scope) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        paths = self.graph.resolve(node, scope)
        parent = unit.parents.get(id(node))
        called = isinstance(parent, ast.Call) and parent.func is node
        for path in sorted(paths):
            if path == "builtins" and node.id == "__builtins__":
                self._flag(unit, node, "__builtins__", hiding("reaches Python's built-in names"),
                           api=False, writes=True)
                return
            short = path[len("builtins."):] if path.startswith("builtins.") else None
            if short in BY_NAME and not called:
                self._flag(unit, node, f"{short} as a value", hiding(
                    "hides the name it looks up"), api=False)
                return
            if short in WHOLESALE and called:
                if parent.args and self.graph.is_own(parent.args[0], scope):
                    return
                why, writes = WHOLESALE[short]
                target = self.graph.describe(parent.args[0], scope) if parent.args else \
                    "the notebook's names"
                self._flag(unit, node, f"{short}() on {target}", hiding(why), api=False,
                           writes=writes and not self._only_read(unit, parent))
                return
            dynamic = dynamic_path(path)
            if dynamic:
                if isinstance(parent, ast.Attribute) and parent.value is node:
                    return                                # flagged with the attribute's path
                why, writes = dynamic
                if short in ("globals", "locals") and called and self._only_read(unit, parent):
                    writes = False
                shown = f"{short}()" if short else path
                self._flag(unit, node, shown, hiding(why), api=False, writes=writes)
                return
            api = self.api_of_path(path)
            if api and node.id not in self.graph.module_paths and not is_local(node.id, scope):
                self._flag(unit, node, path, self.ready_made(path, api))   # from a star import
                return

    def _import(self, unit: Unit, node) -> None:
        if isinstance(node, ast.ImportFrom) and node.level:
            self._flag(unit, node, "a relative import", hiding("loads code this check cannot "
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
                if table_of(full[:-2]) or full.startswith("torch."):
                    self._flag(unit, node, f"a star import from {full[:-2]}",
                               f"which can bring in {READY_MADE}")
                continue
            api = self.api_of_path(full)
            if api:
                self._flag(unit, node, full, self.ready_made(full, api))
            dynamic = dynamic_path(full)         # an import changes nothing; what uses it may
            if dynamic and not dynamic_path(full.rsplit(".", 1)[0]):
                self._flag(unit, node, full, hiding(dynamic[0]), api=False)
        for module in modules:
            api = self.api_of_path(module)
            if api:
                self._flag(unit, node, module, self.ready_made(module, api))
            dynamic = dynamic_path(module)
            if dynamic:
                self._flag(unit, node, f"the module {module}", hiding(dynamic[0]), api=False)
            if table_of(module):
                self._flag(unit, node, f"{module} ({PRIVATE})", hiding(
                    "reaches any operator by its name"), api=False)
            top = module.split(".")[0]
            if top and top not in self.known_modules and not _installed(top):
                self._flag(unit, node, f"the module {module}", hiding(
                    "is not part of Python, torch or the course (a file written while the "
                    "notebook runs?)"), api=False)

    def _call(self, unit: Unit, node: ast.Call, scope) -> None:
        callee = self.graph.resolve(node.func, scope)
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
                self._flag(unit, node, f'the file "{argument.value.strip()}"', hiding(
                    "is a file of code, which an import can load once written"), api=False,
                    writes=True)
        if isinstance(node.func, ast.Attribute) and node.func.attr in MATCHING:
            for argument in node.args:
                self._name_string(unit, argument, f"given to {node.func.attr}", strict=True)
        if isinstance(node.func, ast.Attribute) and (node.args or node.keywords):
            self._changes(unit, node.func.value, scope, method=True)
        self._argument_changes(unit, node, scope, callee)

    def _by_name(self, unit: Unit, node: ast.Call, scope, function: str) -> None:
        """getattr, hasattr, setattr, delattr."""
        writes = function in ("setattr", "delattr")
        if len(node.args) < 2 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            self._flag(unit, node, f"{function} with unpacked arguments", HIDES, api=False,
                       writes=writes)
            return
        target, name = node.args[0], node.args[1]
        own = self.graph.is_own(target, scope)
        names = self.graph.constant_strings(name, scope)
        if writes:
            self._changes(unit, target, scope, store=True,
                          member=next(iter(names)) if names and len(names) == 1 else None)
        if names is None:
            if not own:
                self._flag(unit, node, f"{function} with a computed name "
                           f"({self.graph.how_computed(name)}) on "
                           f"{self.graph.describe(target, scope)}", HIDES, api=False,
                           writes=writes)
            return
        for text in sorted(names):
            if text in DUNDERS and not (own and text in OWN_OK):
                why, dunder_writes = DUNDERS[text]
                shown = self.graph.describe(target, scope)
                self._flag(unit, node, f'{function} of "{text}" on {shown}', hiding(why),
                           api=False, writes=dunder_writes or writes)
                return
            api = self.api_of_string(text)
            if api and not own:
                shown = self.graph.describe(target, scope)
                self._flag(unit, node, f'{function}({shown}, "{text}")',
                           self.ready_made(f"{shown}.{text}", api))
                return

    def _argument_changes(self, unit: Unit, node: ast.Call, scope, callee) -> None:
        """The top-level names given to a call that may change them."""
        if any(p.startswith("builtins.") for p in callee):
            return                                        # setattr/delattr: see _by_name
        if callee and all(p != OWN for p in callee):
            return                                        # a module's function
        positions, stores = None, set()
        if isinstance(node.func, ast.Name) and node.func.id in self.graph.own_names and \
                is_global(node.func.id, scope):
            positions = self.graph.param_mutations.get(node.func.id)
            stores = self.graph.param_stores.get(node.func.id, set())
        for index, argument in enumerate(node.args):
            if positions is not None and index not in positions:
                continue
            argument = argument.value if isinstance(argument, ast.Starred) else argument
            if index in stores:                 # the helper sets its attributes: given torch?
                if self._changes_outside(unit, argument, scope,
                                         f", given to {node.func.id}"):
                    continue
            if isinstance(argument, ast.Name):
                self._changes(unit, argument, scope, argument=True)
        if positions is None:
            for keyword in node.keywords:
                if isinstance(keyword.value, ast.Name):
                    self._changes(unit, keyword.value, scope, argument=True)

    def _changes(self, unit: Unit, target, scope, method: bool = False, argument: bool = False,
                 store: bool = False, member: str | None = None) -> None:
        """The unit changes what `target` is rooted at: a store target (`X.forward = ...`), the
        object of a method call with arguments, a call's argument, setattr's object (`member`:
        the name it sets, when known). What is set on is followed by value: torch, one of its
        modules or classes, builtins or any module, under whatever name or in whatever container
        (`T = torch.Tensor; T.x = ...`, `[torch][0].Tensor.x = ...`), is a change to it."""
        direct = not (method or argument or store)
        store = store or direct
        if direct and isinstance(target, ast.Attribute):
            if self._changes_outside(unit, target.value, scope, "." + target.attr):
                return
        elif direct and isinstance(target, ast.Subscript):
            if self._changes_outside(unit, target.value, scope, "[...]"):
                return
        elif store and self._changes_outside(unit, target, scope,
                                             f".{member}" if member else ""):
            return
        chain, through_class = target, False
        while isinstance(chain, (ast.Attribute, ast.Subscript)):
            through_class |= isinstance(chain, ast.Attribute) and chain.attr == "__class__"
            chain = chain.value
        if not isinstance(chain, ast.Name):
            if store and isinstance(chain, ast.Call):
                self._everywhere(unit, target, "an object a call returns")
            return                                        # type(x).forward = ..., getattr(..).y =
        if not is_global(chain.id, scope):
            return
        if self.graph.is_module_name(chain) or "builtins" in self.graph.resolve(chain, scope):
            if store:
                self._everywhere(unit, target, chain.id)  # torch.x = ..., F.y = ..., builtins
            return                                        # F.softmax(x) changes nothing
        if through_class:
            self._everywhere(unit, target, f"the class of {chain.id}")
        unit.mutates.add(chain.id)

    def _changes_outside(self, unit: Unit, changed, scope, how: str) -> bool:
        """Whether `changed`, which the unit sets an attribute or item of, may be a module's
        object (torch.Tensor, torch.nn.functional, builtins); if so the unit changes everywhere."""
        paths = outside(self.graph.resolve(changed, scope))
        if paths:
            self._everywhere(unit, changed, paths[0] + how)
        return bool(paths)

    @staticmethod
    def _everywhere(unit: Unit, node, what: str) -> None:
        unit.everywhere = True
        unit.changes.append((what, getattr(node, "lineno", unit.line)))

    def _only_read(self, unit: Unit, node) -> bool:
        """Whether what `node` gives (a dictionary of names) is only read where it is used."""
        parent = unit.parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return isinstance(parent.ctx, ast.Load)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return parent.attr in READING
        return isinstance(parent, ast.Compare)

    def _name_string(self, unit: Unit, node, how: str, strict: bool = False) -> None:
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

    def _code_in_string(self, unit: Unit, node: ast.Constant) -> None:
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
