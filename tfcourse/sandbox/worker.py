"""The student's side of the boundary: runs a submission's cells, then answers the grader's requests.

Started by the trusted grader inside the sandbox, with this file, channel.py, rulebook.py and
standins.py copied beside it. It holds no grader and no reference solution: it executes student
code on inputs the grader sends and sends back what came out, as plain tensors and numbers. Every
verdict is made on the other side, so nothing this process (or the student code in it) says can
award a point.
"""
import argparse
import builtins
import contextlib
import importlib
import inspect
import os
import sys
import time
import traceback

import channel
import rulebook
import torch

try:                            # the course's stand-ins (autograder/standins.py), copied beside
    import standins             # this file; a course without them has no probes
except ImportError:
    standins = None

TRACEBACK_CHARS = 3000


class Worker:
    def __init__(self, fd_in: int, fd_out: int):
        self.fd_in, self.fd_out = fd_in, fd_out
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.handles = {}
        self.globals_log = {}
        self.tripped = []

    # -- the loop ---------------------------------------------------------------------------
    def serve(self):
        while True:
            try:
                request = channel.recv(self.fd_in)
            except channel.ChannelError:
                return
            reply = self.answer(request)
            reply["id"] = request.get("id")
            # What the tripwires (`_tripwire`) saw during this request. They append to this very
            # list, so it is emptied in place. Calls while a cell loads are not reported: only a
            # check's calls count against its stubs (the static rule reads the cells themselves),
            # and a scratch cell run again after a restart must not cost a check its points.
            called = sorted(set(self.tripped))
            self.tripped.clear()
            reply["tripwires"] = [] if request.get("op") == "exec" else called
            try:
                packed = channel.pack(reply)
                if len(packed) > channel.REPLY_LIMIT:      # the grader would refuse it
                    raise ValueError(f"the reply was {len(packed) / 1048576:.1f} MB; at most "
                                     f"{channel.REPLY_LIMIT // 1048576} MB")
                _write_all(self.fd_out, packed)
            except ValueError as error:          # something in the reply cannot be sent
                channel.send(self.fd_out, {"id": request.get("id"), "ok": False,
                                           "error": _error_info(error),
                                           "tripwires": reply["tripwires"]})
            if request.get("op") == "quit":
                return

    def answer(self, request: dict) -> dict:
        op = request.get("op")
        handler = getattr(self, "op_" + str(op), None)
        if handler is None:
            return {"ok": False, "error": {"type": "ProtocolError", "message": f"unknown op {op}"}}
        try:
            return {"ok": True, "value": handler(**request.get("args", {}))}
        except BaseException as error:          # student code may raise anything, SystemExit too
            return {"ok": False, "error": _error_info(error)}

    # -- set-up and student code ------------------------------------------------------------
    def op_init(self, threads: int, forbidden: list):
        torch.set_num_threads(max(1, int(threads)))
        self._tripwire([str(name) for name in forbidden])
        return {"pid": os.getpid()}

    def op_exec(self, label: str, source: str):
        code = compile(source, f"<cell {label}>", "exec")
        exec(code, self.namespace)
        return None

    def op_names(self, names: list):
        kinds = {}
        for name in names:
            value = self.namespace.get(name)
            kind = type(value)                   # type() asks no student code (__class__ may)
            kinds[name] = ("missing" if name not in self.namespace else
                           "class" if issubclass(kind, type) else
                           "function" if hasattr(kind, "__call__") else "other")
        return kinds

    # -- calling student code on the grader's inputs ------------------------------------------
    def op_call(self, fn: str, args=(), kwargs=None, seed=None, swap_globals=None, grad=False):
        given = self._given(args, kwargs)
        target = self._lookup(fn)
        return self._run(target, given, seed, swap_globals, grad)

    def op_new(self, handle: str, cls: str, args=(), kwargs=None, seed=0, swap_globals=None):
        torch.manual_seed(seed)
        with self._swapped(swap_globals):
            module = self._lookup(cls)(*self._resolve(args), **self._resolve(kwargs or {}))
        self.handles[handle] = module
        return self._describe(module)

    def op_probe(self, handle: str, kind: str, options: dict):
        if kind == "remote":         # answered by the trusted grader, call by call
            self.handles[handle] = standins.RemoteModel(handle, self._remote, **options)
        else:
            self.handles[handle] = standins.probe(kind, **options)
        return None

    def op_load(self, handle: str, state: dict):
        result = self.handles[handle].load_state_dict(state, strict=False)
        return {"missing": list(result.missing_keys), "unexpected": list(result.unexpected_keys)}

    def op_state(self, handle: str):
        """The module's parameters and buffers by every name they are reachable under."""
        module = self.handles[handle]
        return {name: tensor.detach() for name, tensor in _named_tensors(module)}

    def op_method(self, handle: str, method: str = "forward", args=(), kwargs=None, train=False,
                  seed=None, swap_globals=None, grad=False):
        given = self._given(args, kwargs)       # before train() and getattr, which may be the
        module = self.handles[handle]           # student's own code
        if isinstance(module, torch.nn.Module):
            module.train(train)
        target = module if method == "__call__" else getattr(module, method)
        return self._run(target, given, seed, swap_globals, grad)

    def op_grad(self, handle: str, args=(), weights=None, method: str = "__call__"):
        """Gradients of sum(output * weights) for each parameter, under every name it has."""
        module = self.handles[handle]
        module.train(False)
        module.zero_grad(set_to_none=True)
        target = module if method == "__call__" else getattr(module, method)
        with torch.enable_grad():
            out = target(*self._resolve(args))
            (out * weights).sum().backward()
        return {name: p.grad for name, p in _named_tensors(module, buffers=False)
                if p.grad is not None}

    def op_attribute(self, handle: str, name: str):
        """An attribute the contract asks a module to keep (MultiHeadAttention's
        attention_weights): {"present": whether it is set, "value": it, as data}. The grader
        checks the value like any reply (type, dtype, shape, finite) before it compares it."""
        module = self.handles[handle]
        present = hasattr(module, str(name))
        return {"present": present, "value": _plain(getattr(module, str(name))) if present
                else None}

    def op_swap(self, handle: str, path: str, probe: str):
        """Put the stand-in held as handle `probe` at attribute path `path` of module `handle`."""
        parent = self.handles[handle]
        *walk, last = path.split(".")
        for part in walk:
            parent = parent[int(part)] if part.isdigit() else getattr(parent, part)
        if last.isdigit():
            parent[int(last)] = self.handles[probe]
        else:
            setattr(parent, last, self.handles[probe])
        return None

    def op_calls(self, handle: str):
        """What a stand-in recorded, then forget it (the grader uses it only to word a message)."""
        holder = self.handles.get(handle) or self.globals_log.get(handle)
        recorder = getattr(holder, "recorder", holder)
        calls, recorder.calls = recorder.calls, []
        return calls

    def op_train(self, recipe: str, entry: str, kwargs: dict, handle: str):
        """Run the course's recipe cell against the student's code; keep the trained model."""
        scope = dict(self.namespace)
        exec(compile(recipe, "<recipe>", "exec"), scope)
        started = time.monotonic()
        model, losses = scope[entry](**kwargs)
        self.handles[handle] = model
        return {"losses": [float(x) for x in losses], "seconds": time.monotonic() - started}

    def op_quit(self):
        return None

    # -- helpers ------------------------------------------------------------------------------
    def _remote(self, handle: str, method: str, args: list):
        """Ask the grader to compute a stand-in's answer (it keeps the weights, and counts)."""
        channel.send(self.fd_out, {"callback": {"handle": handle, "method": method,
                                                "args": list(args)}})
        reply = channel.recv(self.fd_in)
        if not reply.get("ok"):
            raise RuntimeError(str(reply.get("error")))
        return reply.get("value")

    def _lookup(self, name: str):
        if name not in self.namespace:
            raise NameError(f"name '{name}' is not defined")
        return self.namespace[name]

    def _resolve(self, value):
        if isinstance(value, dict):
            if set(value) == {"$handle"}:
                return self.handles[value["$handle"]]
            return {key: self._resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._resolve(item) for item in value)
        return value

    def _given(self, args, kwargs):
        """The arguments of a call, resolved, with a copy of every tensor in them taken before
        any student code runs on the call (see `_run`)."""
        args, kwargs = self._resolve(list(args)), self._resolve(dict(kwargs or {}))
        return args, kwargs, _tensor_copies(args, kwargs)

    def _run(self, target, given, seed, swap_globals, grad):
        """Call student code. The reply is its result as data, or, when the call changed a tensor
        it was given (an argument, or one inside a list or dict of them), {"$value": the result,
        "$changed": the paths of those arguments}: the grader fails the check on that report."""
        args, kwargs, copies = given
        with self._swapped(swap_globals):
            if seed is not None:
                torch.manual_seed(seed)
            with torch.set_grad_enabled(grad):
                result = target(*args, **kwargs)
            value = _plain(result)
        changed = _changed_arguments(target, copies)
        return {"$value": value, "$changed": changed} if changed else value

    @contextlib.contextmanager
    def _swapped(self, swap_globals):
        """Stand-ins (named in standins) in place of the student's globals, for one request."""
        swapped = {}
        for name, spec in (swap_globals or {}).items():
            stand_in = getattr(standins, spec)()
            self.globals_log[name] = stand_in
            original = self.namespace.get(name, _MISSING)
            # other names of the same function or class (`attention = scaled_dot_product_
            # attention`) get the stand-in too, so an alias does not bypass it
            aliases = [other for other, value in self.namespace.items()
                       if original is not _MISSING and value is original and other != name
                       and not other.startswith("__")]
            for each in (name, *aliases):
                swapped.setdefault(each, self.namespace.get(each, _MISSING))
                self.namespace[each] = stand_in
        try:
            yield
        finally:
            for name, previous in swapped.items():
                if previous is _MISSING:
                    self.namespace.pop(name, None)
                else:
                    self.namespace[name] = previous

    def _describe(self, module):
        if not isinstance(module, torch.nn.Module):
            return {"module": False, "type": type(module).__name__}
        return {
            "module": True,
            "type": type(module).__name__,
            # every name under which a parameter is reachable, with the id of the tensor it is:
            # a module registered twice (an alias, a tied weight) shows under both names
            "params": [[name, list(p.shape), _identity(p)] for name, p in _named_tensors(
                module, buffers=False)],
            "children": [[name, type(child).__name__, _identity(child)]
                         for name, child in _named_modules(module) if name],
            # the names of the parameters that cannot learn (requires_grad False)
            "frozen": [name for name, p in _named_tensors(module, buffers=False)
                       if not _REQUIRES_GRAD(p)],
        }

    def _tripwire(self, forbidden: list):
        """Wrap torch's ready-made attention so that every call is reported with the reply to the
        request it happened in (`serve` reads and empties `self.tripped`, the list every wrapper
        appends to). Wrapped: the names in course.yaml `rules.forbidden` and what else in torch
        reaches the same code: the functions of torch, torch.nn.functional, torch._C._nn and
        torch._VF named like them (RELATIVES, the table of rulebook.py that the static rule reads
        too), the torch.ops.aten operators and their overloads (torch.ops.aten._scaled_dot_
        product_attention_math.default), and __init__ and forward of the classes
        (nn.MultiheadAttention, nn.Transformer*, under every name they have). The wrappers have
        no __wrapped__.

        The student's code runs in this process, so it can undo this (or find the original
        function some other way): the static rule (submission/rules.py) is the main defence, and
        this the second net, for what that rule cannot see."""
        matchers = [(last, pattern) for _, last, pattern in rulebook.matchers(forbidden)]

        def named_like(name: str) -> bool:
            return any(name == last or (pattern is not None and pattern.search(name))
                       for last, pattern in matchers)

        for dotted in forbidden:
            module_name, _, attribute = dotted.rpartition(".")
            try:
                _wrap(importlib.import_module(module_name), attribute, dotted, self.tripped)
            except ImportError:
                continue
        if not matchers:
            return
        for prefix, namespace in _namespaces().items():
            names = set(dir(namespace))
            if prefix == "torch._VF":                # a module that forwards to this class
                names |= set(dir(torch._C._VariableFunctions))
            for name in sorted(names):
                if not name.startswith("__") and named_like(name):
                    _wrap(namespace, name, f"{prefix}.{name}", self.tripped)
        _wrap_operators(named_like, self.tripped)


# -- the tripwire's pieces -----------------------------------------------------------------------
_INSIDE_TORCH = os.path.dirname(torch.__file__) + os.sep


def _from_torch() -> bool:
    """Whether the call is torch's own work at an import (registering or looking up its
    operators, say) rather than the student's: going up from the caller, only torch's
    frames, then the top level of one of torch's modules, run by the import machinery.
    Everything else counts: a call from a cell, through torch (CausalBias, a functional
    wrapper) or the standard library (functools.partial, a thread pool's worker, the
    import machinery's own helpers called directly), a thread with no cell at all.
    Called by a wrapper, so the caller is two frames up."""
    frame, last = sys._getframe(2), None
    while frame is not None and frame.f_code.co_filename.startswith(_INSIDE_TORCH):
        frame, last = frame.f_back, frame
    return (frame is not None and last is not None and last.f_code.co_name == "<module>"
            and frame.f_code.co_filename.startswith("<frozen importlib"))


def _reporting(function, reported: str, tripped: list):
    def wrapped(*args, **kwargs):
        if not _from_torch():
            tripped.append(reported)
        return function(*args, **kwargs)
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(wrapped, attribute, getattr(function, attribute))
        except (AttributeError, TypeError):
            pass
    wrapped._tripwire = reported
    return wrapped


class _Operator:
    """In place of torch.ops.aten.<name>: calling it, or an overload of it, is reported."""

    def __init__(self, target, reported: str, tripped: list):
        self._target, self._reported, self._tripped = target, reported, tripped

    def __call__(self, *args, **kwargs):
        if not _from_torch():
            self._tripped.append(self._reported)
        return self._target(*args, **kwargs)

    def __getattr__(self, name: str):
        value = getattr(self._target, name)     # an overload (.default) is the operator
        if isinstance(value, torch._ops.OpOverload):   # too; .name() and such are not
            return _Operator(value, self._reported, self._tripped)
        return value


def _wrap(owner, attribute: str, reported: str, tripped: list) -> None:
    """Report every call of `owner.attribute`: a function, or a class's __init__ and forward."""
    try:
        original = getattr(owner, attribute)
    except (AttributeError, ImportError, RuntimeError):
        return
    if getattr(original, "_tripwire", None) or isinstance(original, _Operator):
        return
    if isinstance(original, type):           # the class itself, whatever its names
        for method in ("__init__", "forward"):
            inner = original.__dict__.get(method)
            if inner is not None and not getattr(inner, "_tripwire", None):
                setattr(original, method, _reporting(inner, reported, tripped))
    elif callable(original):
        try:
            setattr(owner, attribute, _reporting(original, reported, tripped))
        except (AttributeError, TypeError):  # an immutable type (_VariableFunctions)
            pass


def _namespaces() -> dict:
    """The modules of torch whose members named like a forbidden API are wrapped."""
    namespaces = {"torch": torch, "torch.nn.functional": torch.nn.functional,
                  "torch._C._nn": torch._C._nn, "torch._VF": torch._VF, "torch.nn": torch.nn,
                  "torch.nn.modules.activation": torch.nn.modules.activation,
                  "torch.nn.modules.transformer": torch.nn.modules.transformer}
    try:                                 # attention biases that call the fused kernels
        import torch.nn.attention.bias as biases
        namespaces["torch.nn.attention.bias"] = biases
    except ImportError:
        pass
    return namespaces


def _wrap_operators(named_like, tripped: list) -> None:
    """torch.ops.aten's operators named like a forbidden API, each in an _Operator."""
    try:
        operators = torch._C._dispatch_get_all_op_names()
    except (AttributeError, RuntimeError):
        operators = []
    for full in sorted(operators):
        namespace, _, name = full.partition("::")
        name = name.split(".")[0]
        if namespace == "aten" and named_like(name):
            try:
                packet = getattr(torch.ops.aten, name)
            except (AttributeError, RuntimeError):
                continue
            if not isinstance(packet, _Operator):
                setattr(torch.ops.aten, name, _Operator(packet, f"torch.ops.aten.{name}",
                                                        tripped))


_MISSING = object()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _identity(thing) -> int:
    return id(thing) % (1 << 52)


# A description reads torch's own registries (the dicts that state_dict, load_state_dict and the
# optimizer use) with torch's own functions, captured before any student code runs: a student's
# class that overrides named_parameters or named_modules does not change what the grader sees.
_GET = object.__getattribute__
_REQUIRES_GRAD = torch._C.TensorBase.__dict__["requires_grad"].__get__


def _named_modules(module, prefix="", seen=None):
    """(name, module) for the module and everything under it, by every name (aliases too)."""
    seen = set() if seen is None else seen
    yield prefix, module
    if id(module) in seen:              # a cycle: a module that holds itself
        return
    seen = seen | {id(module)}
    for name, child in _GET(module, "_modules").items():
        if isinstance(child, torch.nn.Module):
            yield from _named_modules(child, f"{prefix}.{name}" if prefix else name, seen)


def _named_tensors(module, buffers=True):
    """(name, tensor) of every parameter (and persistent buffer), under every name it has."""
    for prefix, owner in _named_modules(module):
        tables = [_GET(owner, "_parameters")]
        if buffers:
            skip = _GET(owner, "_non_persistent_buffers_set")
            tables.append({k: v for k, v in _GET(owner, "_buffers").items() if k not in skip})
        for table in tables:
            for name, tensor in table.items():
                if isinstance(tensor, torch.Tensor):
                    yield (f"{prefix}.{name}" if prefix else name), tensor


def _plain(value, depth=0):
    """Only data crosses back: tensors, numbers, strings and containers of them."""
    if depth > 8:
        return {"$unsendable": "nested"}
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(item, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item, depth + 1) for key, item in value.items()}
    return {"$unsendable": type(value).__name__}


# -- the arguments a call changed in place --------------------------------------------------------
def _tensor_copies(args: list, kwargs: dict) -> list:
    """(where, the tensor, a copy of it) for every tensor in the arguments: where is (the
    argument's position or keyword, the keys and indices down to the tensor)."""
    found = []

    def walk(value, where, depth):
        if isinstance(value, torch.Tensor):
            with torch.no_grad():
                found.append((where, value, value.detach().clone()))
        elif depth < 6 and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, where + (index,), depth + 1)
        elif depth < 6 and isinstance(value, dict):
            for key, item in value.items():
                walk(item, where + (str(key),), depth + 1)
    for position, value in enumerate(args):
        walk(value, (position,), 0)
    for name, value in kwargs.items():
        walk(value, (str(name),), 0)
    return found


def _same_bits(tensor: torch.Tensor, copy: torch.Tensor) -> bool:
    """Whether `tensor` still holds, bit for bit, what `copy` holds (NaN and -0.0 included)."""
    try:
        with torch.no_grad():
            now = tensor.detach()
            if now.dtype != copy.dtype or now.shape != copy.shape:
                return False
            return torch.equal(now.contiguous().reshape(-1).view(torch.uint8),
                               copy.contiguous().reshape(-1).view(torch.uint8))
    except (RuntimeError, TypeError):
        return False


def _changed_arguments(target, copies: list) -> list:
    """The paths ("y", "mask", "x[0]", "args[2]") of the tensor arguments the call changed."""
    changed = [where for where, tensor, copy in copies if not _same_bits(tensor, copy)]
    if not changed:
        return []
    names = []
    try:            # the student's names of the positional parameters, for the message only
        function = target.forward if isinstance(target, torch.nn.Module) else target
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                break
            names.append(parameter.name)
    except Exception:           # a signature that cannot be read: positions only
        names = []
    paths = []
    for first, *rest in changed:
        head = first if isinstance(first, str) else (
            names[first] if first < len(names) else f"args[{first}]")
        paths.append(head + "".join(f"[{step}]" if isinstance(step, int) else f"[{step!r}]"
                                    for step in rest))
    return paths


def _error_info(error: BaseException) -> dict:
    frames = traceback.extract_tb(error.__traceback__)
    student = [frame for frame in frames if frame.filename.startswith("<cell")]
    lines = traceback.format_list(student[-4:]) if student else []
    text = "".join(lines) + "".join(traceback.format_exception_only(type(error), error))
    message = str(error)
    return {"type": type(error).__name__, "message": message[:TRACEBACK_CHARS],
            "traceback": text[-TRACEBACK_CHARS:],
            "where": student[-1].filename if student else None,
            "line": student[-1].lineno if student else None}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    options = parser.parse_args()
    # Student code sees a notebook-like world: its folder first on the path, no stdin.
    sys.path.insert(0, os.getcwd())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    Worker(options.fd_in, options.fd_out).serve()


if __name__ == "__main__":
    main()
