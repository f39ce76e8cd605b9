"""The binding graph of a notebook's code, for the course's rule (rules.py).

Each top-level statement of a cell is a unit. A unit binds the module-level names it defines or
assigns, reads the global names its code uses, and may change names (`X.forward = ...`, a helper
called with X that changes its argument). `resolve` says what an expression may be, as dotted
paths (`torch.nn.functional.scaled_dot_product_attention`, or OWN for the student's own objects),
through imports, aliases, attributes, getattr with constant names and the like. It follows values,
not names: a container display holding torch (`[torch]`, `{"t": torch}`) is ITEM + "torch", and
what is taken from it (a subscript, an unpacking, a loop, a `*rest`) is torch again; so are a
walrus, `with ... as`, a parameter's default, either side of `a if c else b` and `a or b`.
A call's result is not traced (a tensor is not torch).

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
ITEM = "<item>"     # ITEM + path: a container (list, tuple, set, dict) that may hold what path is


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
    changes: list = field(default_factory=list)      # (what, line): what of those it changes
    findings: list = field(default_factory=list)
    loop: object = None                              # a top-level for: its target and iter are
                                                     # roots; what it binds is bound from it


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
        self.param_stores: dict[str, set[int]] = {}   # those whose attributes it sets or deletes
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
                unit = Unit(label, line, roots, trusted, loop=statement)
                self.units.append(unit)
                pending.extendleft(reversed(body))
                continue
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
        if unit.loop is not None:
            self._bind_loop(module, unit.loop.target, unit.loop.iter, unit)
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
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                self._handled.add(id(node.optional_vars))
                self._bind(scope, node.optional_vars.id, unit, "with", node.context_expr)
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
        positional = [*args.posonlyargs, *args.args]
        defaults = {id(arg): default for arg, default in
                    zip(positional[len(positional) - len(args.defaults):], args.defaults)}
        defaults.update((id(arg), default) for arg, default in zip(args.kwonlyargs,
                                                                   args.kw_defaults))
        for arg in (*positional, args.vararg, *args.kwonlyargs, args.kwarg):
            if arg is not None:              # a default is evaluated where the function is made
                inner.bind(arg.arg, "param", (arg, defaults.get(id(arg)), scope))
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

    def _bind_value(self, scope: Scope, target, value, unit: Unit, levels: int = 0) -> None:
        """Names bound by `target = value`. A tuple target unpacks a display item by item (a
        starred name gets a list of the items it takes); any other value, each name gets what
        an item of it may be ("unpack": the value, and how many levels of items down)."""
        pending = [(target, value, levels)]
        while pending:
            target, value, levels = pending.pop()
            if isinstance(target, ast.Name):
                self._handled.add(id(target))
                if value is None:
                    self._bind(scope, target.id, unit, "other")
                elif levels:
                    self._bind(scope, target.id, unit, "unpack", (value, levels))
                else:
                    self._bind(scope, target.id, unit, "assign", value)
            elif isinstance(target, (ast.Tuple, ast.List)):
                pending.extend(self._unpack(target.elts, value, levels))
            elif isinstance(target, ast.Starred):
                pending.append((target.value, value, levels))

    @staticmethod
    def _unpack(targets: list, value, levels: int) -> list:
        """(target, value, levels) for each target of `a, *b, c = value`."""
        stars = [i for i, t in enumerate(targets) if isinstance(t, ast.Starred)]
        if value is None:
            return [(t, None, 0) for t in targets]
        if levels or not isinstance(value, (ast.Tuple, ast.List)) or len(stars) > 1 or \
                any(isinstance(v, ast.Starred) for v in value.elts) or \
                len(value.elts) < len(targets) - len(stars):
            # not a display to pair with: each name is an item of it, a starred one a list
            return [(t.value, value, levels) if isinstance(t, ast.Starred) else
                    (t, value, levels + 1) for t in targets]
        if not stars:
            if len(value.elts) != len(targets):
                return [(t, None, 0) for t in targets]
            return list(zip(targets, value.elts, [0] * len(targets)))
        star, after = stars[0], len(targets) - stars[0] - 1
        elts = value.elts
        out = list(zip(targets[:star], elts[:star], [0] * star))
        out += list(zip(targets[star + 1:], elts[len(elts) - after:], [0] * after))
        middle = ast.copy_location(ast.List(elts=elts[star:len(elts) - after], ctx=ast.Load()),
                                   value)
        out.append((targets[star].value, middle, 0))
        return out

    def _bind_loop(self, scope: Scope, target, iterable, unit: Unit) -> None:
        if isinstance(target, ast.Name):
            self._handled.add(id(target))
            self._bind(scope, target.id, unit, "for", iterable)
        elif isinstance(target, (ast.Tuple, ast.List)):
            self._bind_value(scope, target, iterable, unit, levels=1)

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
            return set(items_of(self.resolve(value, scope, depth + 1)))
        if kind == "unpack":
            expr, levels = value
            paths = self.resolve(expr, scope, depth + 1)
            for _ in range(levels):
                paths = items_of(paths)
            return set(paths)
        if kind == "with":
            return set(self._entered(value, scope, depth + 1))
        if kind == "param" and value[1] is not None:
            _, default, outer = value
            return set(self.resolve(default, outer, depth + 1))
        return set()

    def _entered(self, expr, scope, depth: int) -> frozenset:
        """What `with expr as name` binds: contextlib.nullcontext(x) gives x; an object that is
        not a call's result may well give itself (as most context managers do); else unknown."""
        if isinstance(expr, ast.Call):
            if "contextlib.nullcontext" in self.resolve(expr.func, scope, depth) and expr.args:
                return self.resolve(expr.args[0], scope, depth)
            return frozenset()
        return self.resolve(expr, scope, depth)

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
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            base = self._display(node, scope, depth)
        elif isinstance(node, ast.NamedExpr):
            base = self.resolve(node.value, scope, depth + 1)
        elif isinstance(node, (ast.IfExp, ast.BoolOp)):      # `torch if c else x`, `a or torch`
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            base = frozenset().union(*(self.resolve(part, scope, depth + 1) for part in parts))
        else:
            base = frozenset()
        if not chain:
            self._resolved[key] = base
            return base
        self._resolved[(id(node), id(scope))] = base
        for attribute in reversed(chain):       # a container's attributes are its methods
            base = frozenset(OWN if path == OWN else _shorten(f"{path}.{attribute.attr}")
                             for path in base if not path.startswith(ITEM))
            self._resolved[(id(attribute), id(scope))] = base
        return base

    def _display(self, node, scope, depth: int) -> frozenset:
        """A list, tuple, set or dict display: a container of what its items (values) may be;
        `*xs` and `**d` bring in the items of xs and d."""
        elements = node.values if isinstance(node, ast.Dict) else node.elts
        unpacked = [key is None for key in node.keys] if isinstance(node, ast.Dict) else \
            [isinstance(element, ast.Starred) for element in elements]
        paths: set[str] = set()
        for element, spread in zip(elements, unpacked):
            if isinstance(element, ast.Constant):
                continue                                   # data: nothing to follow
            element = element.value if isinstance(element, ast.Starred) else element
            found = self.resolve(element, scope, depth + 1)
            paths |= {p for p in found if p.startswith(ITEM)} if spread else \
                {ITEM + p for p in found}
        return frozenset(paths)

    def _subscript(self, node: ast.Subscript, scope, depth: int) -> frozenset:
        inner = self.resolve(node.value, scope, depth + 1)
        if isinstance(node.slice, ast.Slice):               # a slice of a container is one
            return frozenset(p for p in inner if p.startswith(ITEM) or p == OWN)
        items = frozenset(p[len(ITEM):] for p in inner if p.startswith(ITEM))
        inner = frozenset(p for p in inner if not p.startswith(ITEM))
        key = node.slice.value if isinstance(node.slice, ast.Constant) and \
            isinstance(node.slice.value, str) else None
        if OWN in inner and len(inner) == 1:
            return items | {OWN}
        if key is None:
            return items
        if "sys.modules" in inner:
            return items | {key}
        return items | frozenset(path[:-len(".__dict__")] + "." + key for path in inner
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
        paths = sorted(p for p in self.resolve(expr, scope) if p != OWN and not p.startswith(ITEM))
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
        """For each top-level function, the positions of the parameters it may change, and of
        those whose attributes or items it sets or deletes (`module.Tensor.x = ...`, setattr)."""
        for node, scope in unit.nodes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
                    scope.kind != "module":
                continue
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            changed, stored = set(), set()
            for inner in ast.walk(node):
                root = None
                if isinstance(inner, (ast.Attribute, ast.Subscript)) and \
                        isinstance(inner.ctx, (ast.Store, ast.Del)):
                    root = root_of(inner)
                    if isinstance(root, ast.Name) and root.id in params:
                        stored.add(params.index(root.id))
                elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                        (inner.args or inner.keywords):
                    root = root_of(inner.func.value)
                elif isinstance(inner, ast.Call) and inner.args:
                    root = root_of(inner.args[0]) if isinstance(inner.func, ast.Name) and \
                        inner.func.id in ("setattr", "delattr") else None
                    if isinstance(root, ast.Name) and root.id in params:
                        stored.add(params.index(root.id))
                    for argument in inner.args:         # passed on: it may be changed there
                        if isinstance(argument, ast.Name) and argument.id in params and \
                                not (isinstance(inner.func, ast.Attribute) and
                                     self.is_module_name(root_of(inner.func))):
                            changed.add(params.index(argument.id))
                if isinstance(root, ast.Name) and root.id in params:
                    changed.add(params.index(root.id))
            self.param_mutations[node.name] = self.param_mutations.get(node.name, set()) | changed
            self.param_stores[node.name] = self.param_stores.get(node.name, set()) | stored

    def is_module_name(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.imported and \
            node.id not in self.own_names


def items_of(paths) -> frozenset:
    """What an item of a container that may be any of `paths` may be (a loop's variable, an
    unpacked name): the container's items; the student's own object's are their own."""
    return frozenset(OWN if p == OWN else p[len(ITEM):] for p in paths
                     if p == OWN or p.startswith(ITEM))


def outside(paths) -> list[str]:
    """The paths that are a module's (torch, builtins, any imported module), not the student's
    own objects or containers."""
    return sorted(p for p in paths if p != OWN and not p.startswith(ITEM))


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
