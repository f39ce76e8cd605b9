"""The binding graph of a notebook's code, for the course's rule (rules.py).

Each top-level statement of a cell is a unit. A unit binds the module-level names it defines or
assigns, reads the global names its code uses, and may change names (`X.forward = ...`, a helper
called with X that changes its argument). `resolve` says what an expression may be, as dotted
paths (`torch.nn.functional.scaled_dot_product_attention`, or OWN for the student's own objects),
through imports, aliases, attributes, getattr with constant names and the like.

Nothing here judges the code: findings.py flags constructs, and rules.py charges them to stubs
along this graph. Nothing here recurses over the student's syntax tree.
"""
from __future__ import annotations

import ast
import builtins
from collections import deque
from dataclasses import dataclass, field
from itertools import product

_TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
OWN = "<own>"


class Scope:
    """A function, class or comprehension scope (or the module), and the names bound in it."""
    __slots__ = ("kind", "parent", "bound", "declared_global", "bindings", "own")

    def __init__(self, kind: str, parent: "Scope | None"):
        self.kind, self.parent = kind, parent
        self.bound: set[str] = set()
        self.declared_global: set[str] = set()
        self.bindings: dict[str, list] = {}       # name -> [(kind, value)]
        self.own: set[str] = set()                # self / cls of a method

    def bind(self, name: str, kind: str, value=None) -> None:
        self.bound.add(name)
        self.bindings.setdefault(name, []).append((kind, value))


@dataclass(eq=False)
class Unit:
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


class BindingGraph:
    """The units of a notebook, and what its names are. `forbidden` (course.yaml's APIs) says
    which names a star import brings in (`from torch.nn.functional import *`)."""

    def __init__(self, forbidden: list[str]):
        self.forbidden = list(forbidden)
        self.units: list[Unit] = []
        self.module_bindings: list[tuple[str, str, object, Unit]] = []
        self.module_paths: dict[str, set[str]] = {}
        self.imported: set[str] = set()       # module-level names bound by an import
        self.own_names: set[str] = set()      # bound only by the student's def and class
        self.star_modules: set[str] = set()
        self.param_mutations: dict[str, set[int]] = {}
        self._outer_iters: set[int] = set()
        self._handled: set[int] = set()
        self._memo: dict = {}
        self._resolved: dict = {}

    def add_units(self, label: str, tree: ast.Module, trusted: bool) -> None:
        """One unit for each top-level statement of a cell (and for each name of an import)."""
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
                    self.units.append(Unit(label, line, [single], trusted))
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
            unit = Unit(label, line, roots, trusted)
            self.units.append(unit)
            pending.extendleft(reversed(body))


    # -- scopes, bindings, reads --------------------------------------------------------------
    def scan(self, unit: Unit) -> None:
        """Scopes, the names the unit binds and the global names it reads."""
        module = Scope("module", None)
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
            if is_global(node.id, scope):
                parent = unit.parents.get(id(node))
                called = isinstance(parent, ast.Call) and parent.func is node
                unit.reads[node.id] = unit.reads.get(node.id, True) and called

    def _children(self, node, scope: Scope, inner: Scope) -> list:
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

    def _enter(self, node, scope: Scope, unit: Unit) -> Scope:
        if isinstance(node, _COMPREHENSIONS):
            return Scope("comprehension", scope)
        if isinstance(node, ast.ClassDef):
            self._bind(scope, node.name, unit, "class", node)
            return Scope("class", scope)
        inner = Scope("function", scope)
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

    def _bind(self, scope: Scope, name: str, unit: Unit, kind: str = "other", value=None):
        if scope.kind != "module" and name not in scope.declared_global:
            scope.bind(name, kind, value)
            return
        scope.bind(name, kind, value)
        unit.binds.add(name)
        self.module_bindings.append((name, kind, value, unit))

    def _bind_import(self, node, scope: Scope, unit: Unit) -> None:
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

    def _bind_value(self, scope: Scope, target, value, unit: Unit) -> None:
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

    def _bind_loop(self, scope: Scope, target, iterable, unit: Unit) -> None:
        if isinstance(target, ast.Name):
            self._handled.add(id(target))
            self._bind(scope, target.id, unit, "for", iterable)

    def _star_names(self, module: str) -> set[str]:
        return {api.rsplit(".", 1)[-1] for api in self.forbidden
                if api.rsplit(".", 1)[0] == module}

    # -- what the notebook's global names are -----------------------------------------------
    def name_modules(self) -> None:
        """The dotted paths each global name may be (after every unit is scanned)."""
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
    def resolve(self, expr, scope: Scope | None, depth: int = 0) -> frozenset:
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

    def _lookup(self, name: str, scope: Scope | None, depth: int) -> frozenset:
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
        root = root_of(expr)
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

    # -- functions that change their arguments -----------------------------------------------
    def record_param_mutations(self, unit: Unit) -> None:
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
                    root = root_of(inner)
                elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                        (inner.args or inner.keywords):
                    root = root_of(inner.func.value)
                elif isinstance(inner, ast.Call) and inner.args:
                    root = root_of(inner.args[0]) if isinstance(inner.func, ast.Name) and \
                        inner.func.id in ("setattr", "delattr") else None
                    for argument in inner.args:         # passed on: it may be changed there
                        if isinstance(argument, ast.Name) and argument.id in params and \
                                not (isinstance(inner.func, ast.Attribute) and
                                     self.is_module_name(root_of(inner.func))):
                            changed.add(params.index(argument.id))
                if isinstance(root, ast.Name) and root.id in params:
                    changed.add(params.index(root.id))
            self.param_mutations[node.name] = self.param_mutations.get(node.name, set()) | changed

    def is_module_name(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.imported and \
            node.id not in self.own_names


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



def is_global(name: str, scope: Scope) -> bool:
    return not is_local(name, scope)



def is_local(name: str, scope: Scope) -> bool:
    first = True
    while scope is not None and scope.kind != "module":
        if name in scope.declared_global:
            return False
        if name in scope.bound and (first or scope.kind != "class"):
            return True
        first = False
        scope = scope.parent
    return False



def root_of(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node
