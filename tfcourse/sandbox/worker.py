"""The student's side of the boundary: runs a submission's cells, then answers the grader's
requests.

Started by the trusted grader inside the sandbox, with this file, channel.py, refusal.py,
rulebook.py and standins.py copied beside it. It holds no grader and no reference solution: it
executes student code on inputs the grader sends and sends back what came out, as plain tensors
and numbers. Every verdict is made on the other side, so nothing this process (or the student
code in it) says can award a point.
"""
import argparse
import builtins
import contextlib
import inspect
import os
import sys
import time
import traceback

import channel
import refusal
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
            # The refusals of torch's attention (refusal.py) during this request, recorded by the
            # audit hook into this very list, so it is emptied in place. Those while a cell loads
            # are not reported: only a check's count against its stubs (the static rule reads the
            # cells themselves), and a scratch cell run again after a restart must not cost a
            # check its points; the cell itself stops at the refused call.
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
        # Before any student code: torch's attention refused at its dispatcher and in its Python
        # code (refusal.py); an audit hook, which Python offers no way to remove, reports it.
        sys.addaudithook(self._record_refusal)
        refusal.refuse_attention([str(name) for name in forbidden])
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
        """Copy the grader's tensors into the module's parameters and buffers by name, as
        `load_state_dict(strict=False)` would, but with torch's own functions captured before
        any student code ran: a class that overrides load_state_dict, _load_from_state_dict,
        named_parameters or copy_ loads what the grader sent all the same."""
        return _load(self.handles[handle], state)

    def op_state(self, handle: str):
        """The module's parameters and buffers by every name they are reachable under."""
        module = self.handles[handle]
        return {name: _plain_tensor(tensor) for name, tensor in _named_tensors(module)}

    def op_method(self, handle: str, method: str = "forward", args=(), kwargs=None, train=False,
                  seed=None, swap_globals=None, grad=False):
        given = self._given(args, kwargs)       # before getattr, which may be the student's
        module = self.handles[handle]           # own code
        _set_training(module, train)
        target = module if method == "__call__" else getattr(module, method)
        return self._run(target, given, seed, swap_globals, grad)

    def op_grad(self, handle: str, args=(), weights=None, method: str = "__call__"):
        """Gradients of sum(output * weights) for each parameter, under every name it has."""
        module = self.handles[handle]
        _set_training(module, False)
        parameters = list(_named_tensors(module, buffers=False))
        for _, parameter in parameters:
            _GRAD.__set__(parameter, None)
        target = module if method == "__call__" else getattr(module, method)
        with torch.enable_grad():
            out = target(*self._resolve(args))
            (out * weights).sum().backward()
        grads = {name: _GRAD.__get__(parameter) for name, parameter in parameters}
        return {name: grad for name, grad in grads.items() if grad is not None}

    def op_attribute(self, handle: str, name: str):
        """An attribute the contract asks a module to keep (an attention module's weights,
        say): {"present": whether it is set, "value": it, as data}. The grader
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

    def op_train(self, recipe: str, entry: str, kwargs: dict, handle: str, init=None):
        """Run the course's recipe cell against the student's code; keep the trained model.

        With `init` (the grader's initial weights, by the contract's names), the recipe is handed
        `prepare`: it starts the model it built from those weights and gives the optimiser the
        parameters torch registered (read with torch's own functions, never the model's
        parameters() or load_state_dict, which a class may override)."""
        scope = dict(self.namespace)
        exec(compile(recipe, "<recipe>", "exec"), scope)
        if init is not None:
            kwargs = {**kwargs, "prepare": lambda model: _prepare(model, init)}
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
            if set(value) == {"$parameters"}:    # a module's parameters, as torch registered them
                return _registered_parameters(self.handles[value["$parameters"]])
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

    def _record_refusal(self, event: str, args) -> None:
        """The audit hook: a refusal of torch's attention (refusal.py) is reported with the reply
        to the request it happened in. Only ever costs the student points, so the student
        raising the event itself changes nothing for them."""
        if event == refusal.AUDIT_EVENT:
            self.tripped.append(str(args[0]) if args else "torch's attention")


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
_SET = object.__setattr__
_REQUIRES_GRAD = torch._C.TensorBase.__dict__["requires_grad"].__get__
_GRAD = torch._C.TensorBase.__dict__["grad"]          # a data descriptor: __get__, __set__
_COPY = torch._C.TensorBase.copy_
_DETACH = torch._C.TensorBase.detach
_AS_SUBCLASS = torch._C.TensorBase.as_subclass
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunctionSubclass
_NO_GRAD = torch.no_grad
_MODULE, _PARAMETER = torch.nn.Module, torch.nn.Parameter


def _plain_tensor(tensor):
    """The tensor's data as a plain torch.Tensor, asking no subclass's methods (a subclass of
    Parameter could override detach, or intercept it through __torch_function__)."""
    with _NO_TORCH_FUNCTION():
        out = _DETACH(tensor)
        return out if type(out) is torch.Tensor else _AS_SUBCLASS(out, torch.Tensor)


def _set_training(module, mode: bool) -> None:
    """module.train(mode), without asking the module (a class may override train)."""
    if isinstance(module, _MODULE):
        for _, each in _named_modules(module):
            _SET(each, "training", bool(mode))


def _load(module, state: dict) -> dict:
    """load_state_dict(state, strict=False) with torch's own functions: {"missing", "unexpected"}
    lists of names."""
    if not isinstance(module, _MODULE):
        raise TypeError(f"a {type(module).__name__} is not a torch.nn.Module")
    own = dict(_named_tensors(module))
    for name, value in state.items():
        if name in own:
            if tuple(own[name].shape) != tuple(value.shape):
                raise RuntimeError(f"size mismatch for {name}: copying a param with shape "
                                   f"{list(value.shape)}, the shape in the current model is "
                                   f"{list(own[name].shape)}")
            with _NO_GRAD():
                _COPY(own[name], value)
    return {"missing": [name for name in own if name not in state],
            "unexpected": [name for name in state if name not in own]}


def _prepare(model, init: dict) -> list:
    """The recipe's `prepare(model)` in a grading: the grader's initial weights copied into the
    model's parameters by name, and those parameters (each once) for the optimiser."""
    if not isinstance(model, _MODULE):
        raise TypeError(f"the model is a {type(model).__name__}, not a torch.nn.Module")
    by_name = dict(_named_tensors(model, buffers=False))
    parameters = _registered_parameters(model)
    missing = [name for name in init if name not in by_name]
    if missing:
        raise RuntimeError(f"the model has no parameter {missing[0]}: keep the assignment's "
                           "names (the grader starts training from its own initial weights, by "
                           "name)")
    with _NO_GRAD():
        for name, value in init.items():
            if tuple(by_name[name].shape) != tuple(value.shape):
                raise RuntimeError(f"the model's {name} has the shape {list(by_name[name].shape)}"
                                   f", the assignment's {list(value.shape)}")
            _COPY(by_name[name], value)
    return parameters


def _registered_parameters(model) -> list:
    """The module's parameters as torch registered them, each once (what model.parameters()
    gives, unless the class overrides it), for an optimiser; each a plain nn.Parameter (a
    subclass could report gradients or values of its own)."""
    if not isinstance(model, _MODULE):
        raise TypeError(f"the model is a {type(model).__name__}, not a torch.nn.Module")
    unique = {}
    for name, parameter in _named_tensors(model, buffers=False):
        if type(parameter) is not _PARAMETER:
            raise TypeError(f"the model's parameter {name} is a {type(parameter).__name__}, not "
                            "a torch.nn.Parameter: register plain nn.Parameter objects")
        unique.setdefault(id(parameter), parameter)
    return list(unique.values())


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
