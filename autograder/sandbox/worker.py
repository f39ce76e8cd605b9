"""The student's side of the boundary: runs a submission's cells, then answers the grader's requests.

Started by the trusted grader inside the sandbox, with this file, channel.py and standins.py copied
beside it. It holds no grader and no reference solution: it executes student code on inputs the
grader sends and sends back what came out, as plain tensors and numbers. Every verdict is made on
the other side, so nothing this process (or the student code in it) says can award a point.
"""
import argparse
import builtins
import contextlib
import functools
import importlib
import os
import sys
import time
import traceback

import channel
import standins
import torch

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
            reply["tripwires"], self.tripped = sorted(set(self.tripped)), []
            try:
                channel.send(self.fd_out, reply)
            except ValueError as error:          # something in the reply cannot be sent
                channel.send(self.fd_out, {"id": request.get("id"), "ok": False,
                                           "error": _error_info(error), "tripwires": []})
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
        for name in forbidden:
            self._tripwire(name)
        return {"pid": os.getpid()}

    def op_exec(self, label: str, source: str):
        code = compile(source, f"<cell {label}>", "exec")
        exec(code, self.namespace)
        return None

    def op_names(self, names: list):
        kinds = {}
        for name in names:
            value = self.namespace.get(name)
            kinds[name] = ("missing" if name not in self.namespace else
                           "class" if isinstance(value, type) else
                           "function" if callable(value) else "other")
        return kinds

    # -- calling student code on the grader's inputs ------------------------------------------
    def op_call(self, fn: str, args=(), kwargs=None, seed=None, swap_globals=None, grad=False):
        target = self._lookup(fn)
        return self._run(target, args, kwargs, seed, swap_globals, grad)

    def op_new(self, handle: str, cls: str, args=(), kwargs=None, seed=0, swap_globals=None):
        torch.manual_seed(seed)
        with self._swapped(swap_globals):
            module = self._lookup(cls)(*self._resolve(args), **self._resolve(kwargs or {}))
        self.handles[handle] = module
        return self._describe(module)

    def op_probe(self, handle: str, kind: str, options: dict):
        self.handles[handle] = standins.probe(kind, **options)
        return None

    def op_describe(self, handle: str):
        return self._describe(self.handles[handle])

    def op_load(self, handle: str, state: dict):
        result = self.handles[handle].load_state_dict(state, strict=False)
        return {"missing": list(result.missing_keys), "unexpected": list(result.unexpected_keys)}

    def op_state(self, handle: str):
        return {name: tensor for name, tensor in self.handles[handle].state_dict().items()}

    def op_method(self, handle: str, method: str = "forward", args=(), kwargs=None, train=False,
                  seed=None, swap_globals=None, grad=False):
        module = self.handles[handle]
        if isinstance(module, torch.nn.Module):
            module.train(train)
        target = module if method == "__call__" else getattr(module, method)
        return self._run(target, args, kwargs, seed, swap_globals, grad)

    def op_grad(self, handle: str, args=(), weights=None, method: str = "__call__"):
        """Gradients of sum(output * weights) with respect to each named parameter."""
        module = self.handles[handle]
        module.train(False)
        module.zero_grad(set_to_none=True)
        target = module if method == "__call__" else getattr(module, method)
        with torch.enable_grad():
            out = target(*self._resolve(args))
            (out * weights).sum().backward()
        return {name: p.grad for name, p in module.named_parameters() if p.grad is not None}

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
        """What a stand-in recorded, then forget it."""
        holder = self.handles.get(handle) or self.globals_log.get(handle)
        recorder = getattr(holder, "recorder", holder)
        calls, recorder.calls = recorder.calls, []
        return calls

    def op_counters(self, handle: str):
        module = self.handles[handle]
        counts = {"encode": module.encode_calls, "decode": module.decode_calls}
        module.encode_calls = module.decode_calls = 0
        return counts

    def op_randomize(self, handle: str, seed: int):
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in self.handles[handle].parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
        return None

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

    def _run(self, target, args, kwargs, seed, swap_globals, grad):
        with self._swapped(swap_globals):
            if seed is not None:
                torch.manual_seed(seed)
            with torch.set_grad_enabled(grad):
                result = target(*self._resolve(args), **self._resolve(kwargs or {}))
            return _plain(result)

    @contextlib.contextmanager
    def _swapped(self, swap_globals):
        """Stand-ins (named in standins) in place of the student's globals, for one request."""
        swapped = {}
        for name, spec in (swap_globals or {}).items():
            stand_in = getattr(standins, spec)()
            self.globals_log[name] = stand_in
            swapped[name] = self.namespace.get(name, _MISSING)
            self.namespace[name] = stand_in
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
            "params": [[name, list(p.shape)] for name, p in module.named_parameters()],
            "buffers": [[name, list(b.shape)] for name, b in module.named_buffers()],
            "children": [[name, type(child).__name__, _identity(child)]
                         for name, child in module.named_modules(remove_duplicate=False) if name],
            "shared": _shared_parameters(module),
        }

    def _tripwire(self, dotted: str):
        module_name, _, attribute = dotted.rpartition(".")
        try:
            owner = importlib.import_module(module_name)
            original = getattr(owner, attribute)
        except (ImportError, AttributeError):
            return
        tripped = self.tripped
        if isinstance(original, type):
            for method in ("__init__", "forward"):
                inner = original.__dict__.get(method)
                if inner is None:
                    continue

                def wrapped(*args, _inner=inner, **kwargs):
                    tripped.append(dotted)
                    return _inner(*args, **kwargs)
                setattr(original, method, functools.wraps(inner)(wrapped))
        else:
            def wrapped(*args, **kwargs):
                tripped.append(dotted)
                return original(*args, **kwargs)
            setattr(owner, attribute, functools.wraps(original)(wrapped))


_MISSING = object()


def _identity(module) -> int:
    return id(module) % (1 << 52)


def _shared_parameters(module):
    """Names of parameters that are the same tensor as an earlier-named one."""
    seen, shared = {}, []
    for name, parameter in module.named_parameters(remove_duplicate=False):
        key = id(parameter)
        if key in seen:
            shared.append([name, seen[key]])
        else:
            seen[key] = name
    return shared


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
