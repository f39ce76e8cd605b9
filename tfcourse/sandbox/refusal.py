"""Torch's ready-made attention, refused in the student's process where every route to it passes.

Run by the harness (worker.py `op_init`) before any student code, in the sandbox (this file is
copied beside worker.py; it imports the standard library, torch and rulebook.py only).

1. **At torch's dispatcher.** Every aten operator named like a forbidden API (rulebook.RELATIVES:
   `scaled_dot_product_attention`, its math fallback `_scaled_dot_product_attention_math`, the
   fused kernels `_scaled_dot_product_flash_attention_for_cpu`, `_efficient_attention_forward`,
   `_native_multi_head_attention`, `_transformer_encoder_layer_fwd`, ...) gets a kernel that
   refuses, at every dispatch key where torch registered one that computes (CPU, CUDA, the
   nested-tensor keys, the composite keys, vmap's decompositions; Meta is left: it computes only
   shapes). Every
   way of calling one ends there: `F.scaled_dot_product_attention` under any name,
   `torch.ops.aten.X`, `.default`, `torch._VF`, `torch._C._nn`, a SafeKernelFunction got from
   `torch._C._dispatch_get_computed_kernel_for_dispatch_key`, `inference_mode`, `vmap`, nested
   tensors. The registration lives in a C++ object whose Python handle is made immortal and then
   dropped: nothing in Python refers to it, so nothing can destroy it (which would restore
   torch's kernels), and torch offers no call that runs a kernel an override shadows.
2. **Torch's attention written in Python** (`F.multi_head_attention_forward`'s `need_weights`
   path, `nn.MultiheadAttention` and the `nn.Transformer*` classes, the quantizable
   MultiheadAttention, flex_attention's eager math): the code object of each such function, and of
   each such class's `__init__` and `forward`, is replaced in place by one that refuses. Every
   alias, closure and bound method holds the same function object, so every one refuses; the
   original code object is freed, so nothing can put it back.

A refusal raises RuntimeError with REFUSED's message and reports itself through the audit event
AUDIT_EVENT, which worker.py records for the reply to the request it happened in. A student can
raise the event itself (it only costs points) or catch the error (it returns nothing computed).

What is not closed here is in docs/rules.md: reloading one of torch's Python modules from its
source file brings back its Python code (the static rule flags every way of doing that), and
attention written in plain operations is, rightly, attention the student wrote.
"""
import ctypes
import re
import sys
import types
import warnings

import torch

import rulebook

AUDIT_EVENT = "tfcourse.attention_refused"
REFUSED = ("{name} is torch's ready-made attention, which the course's rules do not allow in "
           "your answers: the grader refuses it (write the attention yourself)")
# Dispatch keys whose kernels do not compute an operator's result themselves: they redispatch
# (autograd, autocast, tracing, functionalisation) or compute shapes only (Meta).
_PASSING_KEYS = re.compile(r"^(?:debug|Tracer|Meta|Autocast\w*|Autograd\w*|ADInplaceOrView|"
                           r"Functionalize|Python\w*|PreDispatch|BackendSelect)$")
# Python functions of torch named like a forbidden API that compute no attention: meta and fake
# kernels (shapes only), and the switches and queries of torch.backends.
_NOT_ATTENTION = re.compile(r"^torch\.(?:_meta_registrations|_subclasses|backends|_dynamo)\b")
# torch's modules that hold attention written in Python, imported now so that they are refused
# before any student code can reach them.
EAGER_MODULES = ("torch.nn.attention", "torch.nn.attention.bias",
                 "torch.nn.attention.flex_attention", "torch._higher_order_ops.flex_attention",
                 "torch.ao.nn.quantizable")


def refuse_attention(forbidden) -> dict:
    """Refuse every route to the forbidden APIs (course.yaml's names); returns what was refused:
    {"operators": [aten names], "functions": [dotted Python names]}."""
    matchers = [(last, pattern) for _, last, pattern in rulebook.matchers(forbidden)]
    if not matchers:
        return {"operators": [], "functions": []}

    def named_like(name: str) -> bool:
        return any(name == last or (pattern is not None and pattern.search(name))
                   for last, pattern in matchers)

    refused = {"operators": _refuse_operators(named_like),
               "functions": _refuse_python(named_like)}
    sys.addaudithook(refuses_import(named_like))
    return refused


# What a refusal reports, where torch's public name says more than the operator's
PUBLIC_NAMES = {"torch.ops.aten.scaled_dot_product_attention":
                "torch.nn.functional.scaled_dot_product_attention"}


def _kernel(name: str):
    name = PUBLIC_NAMES.get(name, name)
    message = REFUSED.format(name=name)

    def refused(*args, **kwargs):
        sys.audit(AUDIT_EVENT, name)
        raise RuntimeError(message)
    return refused


def _computing_keys(operator: str) -> list[str]:
    """The dispatch keys at which torch registered a kernel of `operator` that computes."""
    keys = []
    for line in torch._C._dispatch_dump(operator).splitlines():
        key, _, rest = line.partition(":")
        key = key.strip().replace("[alias]", "")
        if rest.strip().startswith("registered") and not _PASSING_KEYS.match(key):
            keys.append(key)
    return keys


def _refuse_operators(named_like) -> list[str]:
    """Every operator of every namespace (aten, onnx's Attention, ...) named like a forbidden
    API, refused at each key where a kernel computes."""
    libraries, refused = {}, []
    with warnings.catch_warnings():       # torch warns at each kernel an impl overrides: here
        warnings.simplefilter("ignore")   # that is the point
        for full in sorted(torch._C._dispatch_get_all_op_names()):
            namespace, _, name = full.partition("::")
            if not named_like(name.split(".")[0]):
                continue
            for key in _computing_keys(full):
                if namespace not in libraries:
                    libraries[namespace] = torch._C._dispatch_library(
                        "IMPL", namespace, "", "<tfcourse refusal>", 0)
                libraries[namespace].impl(name, key, _kernel(f"torch.ops.{namespace}.{name}"),
                                          False)
                refused.append(f"{full} ({key})")
    # Immortal, then forgotten: destroying one of these objects would remove its refusals, and
    # with no reference left in Python (pybind11 objects are not tracked by gc) nothing reaches it.
    for library in libraries.values():
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(library))
    libraries.clear()
    return refused


def _refusing_code(function: types.FunctionType, name: str) -> types.CodeType:
    """A code object that refuses, with as many free variables as `function` has (a function's
    code can only be replaced by one that closes over as many cells)."""
    freevars = function.__code__.co_freevars
    lines = ["def outer():"]
    lines += [f"    {var} = None" for var in freevars]
    lines += ["    def refused(*args, **kwargs):"]
    if freevars:
        lines += ["        (" + ", ".join(freevars) + ",)"]
    lines += [f"        __import__('sys').audit({AUDIT_EVENT!r}, {name!r})",
              f"        raise RuntimeError({REFUSED.format(name=name)!r})",
              "    return refused"]
    scope = {}
    exec(compile("\n".join(lines), "<refused>", "exec"), scope)
    return scope["outer"]().__code__


def _poison(function, name: str) -> bool:
    if not isinstance(function, types.FunctionType):
        return False
    function.__code__ = _refusing_code(function, name)
    return True


def _refuse_python(named_like) -> list[str]:
    for module in EAGER_MODULES:
        try:
            __import__(module)
        except ImportError:
            pass
    refused, seen = [], set()
    for module_name, module in sorted(sys.modules.items()):
        if not (module_name == "torch" or module_name.startswith("torch.")) or \
                _NOT_ATTENTION.match(module_name) or not isinstance(module, types.ModuleType):
            continue
        for attribute, value in list(vars(module).items()):
            if not named_like(attribute) or id(value) in seen:
                continue
            seen.add(id(value))
            home = getattr(value, "__module__", None) or ""
            if _NOT_ATTENTION.match(home):
                continue
            dotted = f"{module_name}.{attribute}"
            if isinstance(value, type):          # a class: what builds it and what runs it
                for method in ("__init__", "forward", "__call__"):
                    if _poison(value.__dict__.get(method), dotted):
                        refused.append(f"{dotted}.{method}")
            elif _poison(value, dotted):
                refused.append(dotted)
            elif not isinstance(value, types.ModuleType):   # an object holding the function: a
                members = getattr(value, "__dict__", None)   # custom op's _init_fn, say
                for member in list(members.values()) if isinstance(members, dict) else ():
                    if _poison(member, dotted):
                        refused.append(f"{dotted} ({member.__name__})")
    return refused


def refuses_import(named_like):
    """An audit hook that refuses importing, from now on, a module of torch whose dotted name
    has a part named like a forbidden API (torch._inductor.fx_passes.fuse_attention, whose
    patterns are attention in plain operations; torch.nested._internal.sdpa): such a module was
    not loaded, so its functions were not refused. Audit hooks cannot be removed."""
    def hook(event: str, args) -> None:
        if event != "import" or not args or not isinstance(args[0], str):
            return
        name = args[0]
        if (name == "torch" or name.startswith("torch.")) and name not in sys.modules and \
                any(named_like(part) for part in name.split(".")[1:]):
            sys.audit(AUDIT_EVENT, name)
            raise ImportError(REFUSED.format(name=name))
    return hook
