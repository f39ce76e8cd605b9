"""Mutation operators for the bugs cosmic-ray does not make: calls removed, arguments swapped, axes
changed, slices moved by one, operations made in place on an argument, constructors' arguments
exchanged. bench/mutation.py runs them beside cosmic-ray's.

Each operator reads a cell's AST and gives its mutations as edits of the source text (the span of
one node replaced by new text), so a mutant differs from the solution in those characters only
and its comments and layout stay: `changed_lines` shows the one line a student would have written
differently. Every operator is deterministic (the order of the nodes in the tree), so a mutant's
(operator, occurrence) names it from one run to the next, as cosmic-ray's do.

- RemoveCall            `x = f(y, ...)` -> `x = y`: a function or module applied to its first
                        argument, left out (F.relu, self.dropout, self.norm1, math.sqrt, ...).
- DropMethod            `y.m(...)` -> `y`: a tensor method left out (.transpose(-2, -1),
                        .softmax(-1), .triu(1), .unsqueeze(-1), ...), and `.T` left out.
- SwapArguments         `f(a, b)` -> `f(b, a)`: two neighbouring positional arguments of a call
                        exchanged, two neighbouring keyword values, two neighbouring items of a
                        list or tuple argument (torch.cat([a, b]) -> torch.cat([b, a])).
- SwapConstructorArguments  any two arguments of a class built exchanged (`nn.Linear(a, b)` ->
                        `nn.Linear(b, a)`, `FeedForward(d_model, d_ff)` -> `FeedForward(d_ff,
                        d_model)`, `EncoderLayer(d_model, num_heads, d_ff, ...)` -> `(d_ff,
                        num_heads, d_model, ...)`).
- ChangeAxis            a dimension moved by one: `dim=`/`axis=` values, the dimension arguments
                        of the tensor methods that take them (transpose, sum, softmax, cat, ...),
                        and `.shape[i]` / `.size(i)`.
- ShiftSlice            a slice moved by one: its end one shorter (`[:T]` -> `[:T - 1]`), the window
                        moved (`[:T]` -> `[1:T + 1]`, `[:-1]` -> `[1:]`, `[1:]` -> `[:-1]`,
                        `[0::2]` -> `[1::2]`), and an integer index moved (`[:, -1]` -> `[:, -2]`).
- InPlace               an operation done in place on an argument of the function: `y = x + z` ->
                        `x += z; y = x` (and `x + z` inside an expression -> `x.add_(z)`), a method
                        with an in-place twin on an argument (`k.transpose(-2, -1)` ->
                        `k.transpose_(-2, -1)`, `x.masked_fill(...)` -> `x.masked_fill_(...)`).
                        Only names the function got as a tensor argument and has not yet
                        rebound: an in-place operation on a local is not a bug.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# Calls whose first argument is not the value they transform: removing them is no realistic bug
# (or no valid program: `range(n)` -> `n`), so RemoveCall leaves them.
NOT_WRAPPERS = {"range", "len", "super", "float", "int", "str", "bool", "isinstance", "print",
                "getattr", "setattr", "hasattr", "enumerate", "zip", "list", "tuple", "dict",
                "ones", "zeros", "full", "full_like", "empty", "arange", "tensor", "cat", "stack",
                "register_buffer", "causal_mask", "padding_mask", "positional_encoding", "no_grad",
                "scaled_dot_product_attention"}
# Methods DropMethod leaves: not a transformation of their receiver's value.
NOT_DROPPABLE = {"__init__", "register_buffer", "append", "items", "keys", "values"}
# Tensor methods and torch functions that take dimensions, and which positional arguments are
# dimensions (for a torch./F. function the tensor is argument 0).
DIM_METHODS = {"transpose": (0, 1), "swapaxes": (0, 1), "sum": (0,), "mean": (0,),
               "softmax": (0,), "log_softmax": (0,), "argmax": (0,), "argmin": (0,),
               "unsqueeze": (0,), "squeeze": (0,), "cumsum": (0,), "flatten": (0, 1),
               "size": (0,), "max": (0,), "min": (0,), "norm": (1,), "unflatten": (0,),
               "logsumexp": (0,)}
DIM_FUNCTIONS = {"softmax": (1,), "log_softmax": (1,), "cat": (1,), "stack": (1,), "sum": (1,),
                 "mean": (1,), "argmax": (1,), "transpose": (1, 2), "unsqueeze": (1,)}
DIM_KEYWORDS = {"dim", "axis", "dim0", "dim1", "start_dim", "end_dim"}
# Calls whose positional arguments can be given in either order (transpose(1, 2) is
# transpose(2, 1), min(a, b) is min(b, a)): SwapArguments leaves them, each swap would be
# equivalent.
SYMMETRIC = {"transpose", "swapaxes", "swapdims", "min", "max"}
# Methods with an in-place twin (name + "_").
IN_PLACE = {"masked_fill", "add", "sub", "mul", "div", "clamp", "triu", "tril", "unsqueeze",
            "squeeze", "transpose", "exp", "log", "sqrt", "sin", "cos", "relu", "sigmoid", "tanh",
            "fill", "neg", "abs", "pow", "t"}
IN_PLACE_OPS = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
# Argument names that hold numbers or ids, not tensors: an in-place method on them is no program.
NUMBER_ARGUMENTS = {"self", "T", "d_model", "num_heads", "d_ff", "dropout", "step", "warmup",
                    "eps", "vocab_size", "bos", "pad_id", "length", "max_len", "num_layers",
                    "num_classes", "model", "factor"}


@dataclass(frozen=True)
class Edit:
    """One mutation: the text between byte offsets start and end replaced by `text`; (line,
    column) is where it is, 1-based line, 0-based column, as cosmic-ray's positions."""
    line: int
    column: int
    spans: tuple            # ((start, end, text), ...), not overlapping
    note: str = ""          # what a removed call called (for its cause words)


class Source:
    """A cell's code as bytes, with the byte offset of each node's start and end."""

    def __init__(self, code: str):
        self.code = code
        self.data = code.encode()
        self.lines = [0]
        for line in self.data.splitlines(keepends=True):
            self.lines.append(self.lines[-1] + len(line))

    def start(self, node) -> int:
        return self.lines[node.lineno - 1] + node.col_offset

    def end(self, node) -> int:
        return self.lines[node.end_lineno - 1] + node.end_col_offset

    def text(self, node) -> str:
        return self.data[self.start(node):self.end(node)].decode()

    def apply(self, edit: Edit) -> str:
        data = self.data
        for start, end, text in sorted(edit.spans, reverse=True):
            data = data[:start] + text.encode() + data[end:]
        return data.decode()


def callee(call: ast.Call) -> str:
    """The last name of what a call calls: `nn.Linear` -> Linear, `self.norm1` -> norm1."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(
        func, ast.Name) else ""


def is_constructor(call: ast.Call) -> bool:
    return callee(call)[:1].isupper()


def is_module_or_function(func) -> bool:
    """`f`, `torch.f`, `F.f`, `math.f`, `self.f`, `self.a.f`: a call of a function or of a module
    (its first argument is the value), not a method of a tensor."""
    if isinstance(func, ast.Name):
        return True
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in {"self", "torch", "F", "nn", "math",
                                                          "np", "numpy", "model"}
    return False


def number(node) -> int | None:
    """The int a node is written as (`2`, `-1`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            isinstance(node.operand, ast.Constant) and type(node.operand.value) is int:
        return -node.operand.value
    return None


def plus(source: Source, node, delta: int) -> str:
    """The text of `node` moved by delta: a number computed, an expression with `+ 1`/`- 1`."""
    value = number(node)
    if value is not None:
        return str(value + delta)
    text = source.text(node)
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        text = f"({text})"
    return f"{text} + {delta}" if delta > 0 else f"{text} - {-delta}"


class Operator:
    name = ""
    kind = ""           # the kind of bug, for the cause words (bench/mutation.py: CAUSES)

    def edits(self, tree: ast.AST, source: Source) -> list[Edit]:
        raise NotImplementedError


def replace(source: Source, node, text: str, note: str = "") -> Edit:
    return Edit(node.lineno, node.col_offset, ((source.start(node), source.end(node), text),),
                note)


class RemoveCall(Operator):
    name, kind = "RemoveCall", "call"

    def edits(self, tree, source):
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args and not is_constructor(node) and \
                    is_module_or_function(node.func) and callee(node) not in NOT_WRAPPERS and \
                    not isinstance(node.args[0], (ast.Constant, ast.List, ast.Tuple,
                                                  ast.Starred, ast.GeneratorExp)):
                found.append(replace(source, node, source.text(node.args[0]), callee(node)))
        return found


class DropMethod(Operator):
    name, kind = "DropMethod", "call"

    def edits(self, tree, source):
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    not is_module_or_function(node.func) and \
                    node.func.attr not in NOT_DROPPABLE and \
                    not (isinstance(node.func.value, ast.Call) and
                         callee(node.func.value) == "super"):
                found.append(replace(source, node, source.text(node.func.value), callee(node)))
            elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and \
                    isinstance(node.ctx, ast.Load):
                found.append(replace(source, node, source.text(node.value), node.attr))
        return found


def swaps(source: Source, items: list, every: bool = False, note: str = "") -> list[Edit]:
    """Each two neighbours exchanged (`every`: each pair), where their texts differ."""
    found = []
    for i, first in enumerate(items):
        for second in items[i + 1:] if every else items[i + 1:i + 2]:
            a, b = source.text(first), source.text(second)
            if a != b:
                found.append(Edit(first.lineno, first.col_offset,
                                  ((source.start(first), source.end(first), b),
                                   (source.start(second), source.end(second), a)), note))
    return found


class SwapArguments(Operator):
    name, kind = "SwapArguments", "swap"
    constructors = False

    def edits(self, tree, source):
        found = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or is_constructor(node) != self.constructors:
                continue
            name = callee(node)
            positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
            if name not in SYMMETRIC:
                found += swaps(source, positional, self.constructors, name)
            found += swaps(source, [keyword.value for keyword in node.keywords if keyword.arg],
                           self.constructors, name)
            if not self.constructors:
                for arg in positional:
                    if isinstance(arg, (ast.List, ast.Tuple)):
                        found += swaps(source, arg.elts, note=name)
        return found


class SwapConstructorArguments(SwapArguments):
    name, kind = "SwapConstructorArguments", "constructor"
    constructors = True


class ChangeAxis(Operator):
    name, kind = "ChangeAxis", "axis"

    def dims(self, tree):
        """The nodes that hold a dimension, in the tree's order."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = callee(node)
                if isinstance(node.func, ast.Attribute) and not is_module_or_function(node.func):
                    places = DIM_METHODS.get(name, ())
                elif isinstance(node.func, ast.Attribute) and name in DIM_FUNCTIONS:
                    places = DIM_FUNCTIONS[name]
                else:
                    places = ()
                for index in places:
                    if index < len(node.args) and number(node.args[index]) is not None:
                        yield node.args[index], name
                for keyword in node.keywords:
                    if keyword.arg in DIM_KEYWORDS and number(keyword.value) is not None:
                        yield keyword.value, name
                for arg in [*node.args, *(keyword.value for keyword in node.keywords)]:
                    for sub in ast.walk(arg):       # a size read in a call's arguments
                        if isinstance(sub, ast.Subscript) and isinstance(sub.value,
                                                                        ast.Attribute) and \
                                sub.value.attr == "shape" and number(sub.slice) is not None:
                            self.inside.setdefault(id(sub), name)
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                    node.value.attr == "shape" and number(node.slice) is not None:
                yield node.slice, self.inside.get(id(node), "shape")

    def edits(self, tree, source):
        found = []
        self.inside = {}            # id of a .shape[i] node -> the call whose argument it is in
        for node, note in self.dims(tree):
            value = number(node)
            for moved in (value - 1, value + 1):
                found.append(replace(source, node, str(moved), note))
        return found


class ShiftSlice(Operator):
    name, kind = "ShiftSlice", "slice"

    def edits(self, tree, source):
        found = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Subscript) or (isinstance(node.value, ast.Attribute)
                                                       and node.value.attr == "shape"):
                continue
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            value = node.value
            note = value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(
                value, ast.Name) else callee(value) if isinstance(value, ast.Call) else ""
            for item in items:
                if isinstance(item, ast.Slice):
                    found += self.moved(source, item, note)
                elif number(item) is not None:
                    index = number(item)
                    found.append(replace(source, item, str(index - 1 if index < 0 else index + 1),
                                         note))
        return found

    def moved(self, source, item: ast.Slice, note: str) -> list[Edit]:
        lower, upper, step = item.lower, item.upper, item.step
        if lower is None and upper is None:
            return []
        tail = "" if step is None else ":" + source.text(step)
        texts = []
        if upper is not None:
            texts.append(("" if lower is None else source.text(lower)) + ":" + plus(
                source, upper, -1))                                     # one shorter at the end
            start = "1" if lower is None else plus(source, lower, 1)
            end = "" if number(upper) == -1 else plus(source, upper, 1)
            texts.append(start + ":" + end)                             # the window moved on
        else:
            value = number(lower)
            if value != 0:
                texts.append(("" if value == 1 else plus(source, lower, -1)) + ":" + (
                    "-1" if value == 1 else ""))                        # [1:] -> [:-1]
            texts.append(plus(source, lower, 1) + ":")                  # [1:] -> [2:]
        return [Edit(item.lineno, item.col_offset,
                     ((source.start(item), source.end(item), text + tail),), note)
                for text in texts]


class InPlace(Operator):
    name, kind = "InPlace", "in place"

    def edits(self, tree, source):
        found = []
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.Lambda)):
                found += self.in_function(function, source)
        return found

    def in_function(self, function, source):
        arguments = {arg.arg for arg in function.args.args + function.args.kwonlyargs} - \
            NUMBER_ARGUMENTS
        body = function.body if isinstance(function.body, list) else [function.body]
        rebound = {}                # argument -> the line of the statement that first rebinds it
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                        node.id in arguments:
                    rebound.setdefault(node.id, statement.end_lineno)

        def argument(node) -> bool:
            return isinstance(node, ast.Name) and node.id in arguments and \
                node.lineno <= rebound.get(node.id, 10 ** 9)

        found = []
        statements = {id(node.value): node for statement in body for node in ast.walk(statement)
                      if isinstance(node, ast.Assign) and len(node.targets) == 1}
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                    continue
                if isinstance(node, ast.BinOp) and type(node.op) in IN_PLACE_OPS and \
                        argument(node.left):
                    assign = statements.get(id(node))
                    left, right = source.text(node.left), source.text(node.right)
                    if assign is not None and assign.lineno == assign.end_lineno:
                        symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[
                            type(node.op)]
                        text = f"{left} {symbol}= {right}; {source.text(assign.targets[0])} = " \
                               f"{left}"
                        found.append(replace(source, assign, text, "add"))
                    else:
                        found.append(replace(source, node,
                                             f"{left}.{IN_PLACE_OPS[type(node.op)]}({right})",
                                             "add"))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        node.func.attr in IN_PLACE and argument(node.func.value):
                    func = node.func
                    found.append(Edit(node.lineno, node.col_offset,
                                      ((source.end(func) - len(func.attr), source.end(func),
                                        func.attr + "_"),), func.attr))
        return found


OPERATORS = [RemoveCall(), DropMethod(), SwapArguments(), SwapConstructorArguments(),
             ChangeAxis(), ShiftSlice(), InPlace()]
KINDS = {operator.name: operator.kind for operator in OPERATORS}


def mutations(code: str, operator: Operator) -> list[tuple[int, int, str, str]]:
    """(line, column, mutated code, note) of each mutation `operator` makes of `code`, in order;
    those that do not parse are left out."""
    source = Source(code)
    made = []
    for edit in operator.edits(ast.parse(code), source):
        mutated = source.apply(edit)
        try:
            ast.parse(mutated)
        except SyntaxError:
            continue
        made.append((edit.line, edit.column, mutated, edit.note))
    return made


# -- the words of the cause ------------------------------------------------------------------------
# A killed mutant's message names its cause when it matches the regular expression of its kind
# (any case), as the catalogue's words do for its bugs, or names the call the mutation is in (the
# call removed, the call whose arguments were swapped or whose axis changed, the tensor sliced:
# CALLS' words for it, or its own name without a trailing number: norm1 -> norm).
CAUSES = {
    "call": r"left out|missing|not applied|skipped|never (called|applied)",
    "swap": r"argument|order|swapped|exchanged|the other way|x_q|x_kv|in each other's places|"
            r"queries",
    "constructor": r"arguments|FeedForward\(d_model, d_ff\)|d_ff|Linear\(|nn\.Linear with|"
                   r"in_features|out_features|wrong shape",
    "axis": r"\bdim\b|dim=|\baxis\b|over the",
    "slice": r"off by one|shift|(last|first) (token|position)|BOS|even|odd|one (token |position )?"
             r"(short|long)|\[:",
    "in place": r"in place|changed its argument",
}
CALLS = {
    "transpose": r"transpose|k\.T|shape", "T": r"transpose|\.T\b|shape", "mT": r"transpose",
    "softmax": r"softmax|sum to 1|probabilit", "log_softmax": r"log.?softmax|log-prob|logits",
    "sqrt": r"sqrt|scal", "dropout": r"dropout", "relu": r"relu|activation|negative",
    "triu": r"triu|diagonal|causal|future|above", "tril": r"tril|diagonal|causal|future",
    "unsqueeze": r"shape|broadcast", "squeeze": r"shape|\[B\]", "float": r"float|dtype",
    "clamp": r"clamp|one real token|divid|zero", "min": r"min|warm.?up|step",
    "log": r"log|entropy", "masked_fill": r"mask", "view": r"view|split",
    "reshape": r"reshape|merge",
    "to": r"device", "argmax": r"argmax|most likely", "embedding": r"embed", "head": r"\bhead\b",
    "encode": r"encode", "decode": r"decode", "sin": r"\bsin\b", "cos": r"\bcos\b",
    "layer": r"\blayers? (is|are) (not )?(run|called|applied)", "split": r"split",
}


def cause_pattern(kind: str, where: str = "") -> str:
    """The regular expression a killed mutant's message must match to name its cause: its kind's,
    or the words of the call it is in (`where`, the mutant's note)."""
    pattern = CAUSES[kind]
    if where and where not in ("shape", "add"):
        extra = CALLS.get(where) or CALLS.get(re.sub(r"\d+$", "", where)) or \
            re.escape(re.sub(r"\d+$", "", where))
        pattern = f"{pattern}|{extra}"
    return pattern
