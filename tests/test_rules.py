"""The course's rule against torch's ready-made attention, as the static rule reads it
(tfcourse/submission/rules.py); the refusal at run time is tests/test_refusal.py's.

- A fast layer, no grading: a few lines of student code -> which stubs break the rule, and what the
  message says. Each way of reaching torch's attention (directly, through a helper, an alias, a
  computed name, a private entry point, a change made by a top-level statement...) and each
  dynamic construct that can hide one is flagged; honest code, scratch comparisons with torch's
  attention included, is not. Deeply nested and invalid code never crashes the rule.
- End to end (grade_many, 01-attention): each of the five indirect paths of the finding earns
  exactly what its honest twin earns (the same code with the stub not written), and so does a
  cheat that only the run-time refusal can see.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, make_submission, replace_in, scores, solution_cells

from tfcourse.submission import rules

A = "01-attention"
STUBS = ["scaled_dot_product_attention", "MultiHeadAttention", "causal_mask", "padding_mask"]
SETUP = "import math\n\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
SOLUTION = solution_cells(A)


@pytest.fixture(scope="module")
def forbidden(course):
    return course.forbidden_names()


def code(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


def flagged(forbidden, *cells, stubs=STUBS) -> dict[str, list[str]]:
    """Stub -> the messages charged to it, for student cells labelled 1, 2, ..."""
    result = rules.check([code(cell) for cell in cells], forbidden, context=[SETUP], stubs=stubs,
                         known_modules=["attention_parts"])
    return {name: [v.message() for v in found] for name, found in result.by_name.items()}


SDPA_HEAD = "def scaled_dot_product_attention(q, k, v, mask=None):\n"
WEIGHTS = "    weights = (q @ k.transpose(-2, -1)).softmax(-1)\n"


def sdpa(body: str) -> str:
    """An sdpa stub whose output comes from `body` (an expression of q, k, v, mask)."""
    return SDPA_HEAD + WEIGHTS + f"    return {body}, weights\n"


ALL = set(STUBS)
SD = {"scaled_dot_product_attention"}
MHA = {"MultiHeadAttention"}
READY = "torch's ready-made attention"
HIDE = "can hide torch's ready-made attention from this check"
# torch's attention under an innocent name, for a change to torch to install
ATTEND_HELPER = "def _attend(self, k, v):\n    return F.scaled_dot_product_attention(self, k, v)"

# id -> (cells, the stubs charged, words their messages must hold: for each stub, or by stub)
CHEATS = {
    # -- the five paths of the finding ---------------------------------------------------------
    "helper function": ([
        """
        def _attend(q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        """, sdpa("_attend(q, k, v, mask)")], SD,
        ["uses _attend, which uses torch.nn.functional.scaled_dot_product_attention (cell 1, "
         f"line 2), {READY}"]),
    "top-level alias": ([
        "sdpa = F.scaled_dot_product_attention", sdpa("sdpa(q, k, v)")], SD,
        ["uses sdpa, which uses torch.nn.functional.scaled_dot_product_attention (cell 1, "
         "line 1)"]),
    "getattr with a constant sum": (
        [sdpa('getattr(F, "scaled_dot_" + "product_attention")(q, k, v)')], SD,
        ['getattr(torch.nn.functional, "scaled_dot_product_attention")', READY]),
    "private aten operator": (
        [sdpa("torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]")], SD,
        ["torch.ops.aten._scaled_dot_product_attention_math (cell 1, line 3), "
         f"{READY} (torch.nn.functional.scaled_dot_product_attention)"]),
    "multi_head_attention_forward": ([
        """
        class MultiHeadAttention(nn.Module):
            def forward(self, x_q, x_kv, mask=None):
                return F.multi_head_attention_forward(x_q, x_kv, x_kv, 12, 3, None, None, None,
                                                      None, False, 0.0, None, None)[0]
        """], MHA, ["torch.nn.functional.multi_head_attention_forward (cell 1, line 3)"]),
    # -- however it is imported or aliased -----------------------------------------------------
    "full path": ([sdpa("torch.nn.functional.scaled_dot_product_attention(q, k, v)")], SD,
                  ["uses torch.nn.functional.scaled_dot_product_attention (cell 1, line 3)"]),
    "import inside the stub": ([
        SDPA_HEAD + "    import torch.nn.functional as G\n" + WEIGHTS +
        "    return G.scaled_dot_product_attention(q, k, v), weights\n"], SD,
        ["torch.nn.functional.scaled_dot_product_attention (cell 1, line 4)"]),
    "from torch.nn import functional": ([
        "from torch.nn import functional as fn", sdpa("fn.scaled_dot_product_attention(q, k, v)")],
        SD, ["uses torch.nn.functional.scaled_dot_product_attention (cell 2, line 3)"]),
    "from-import under another name": ([
        "from torch.nn.functional import scaled_dot_product_attention as attend",
        sdpa("attend(q, k, v)")], SD,
        ["uses attend, which uses torch.nn.functional.scaled_dot_product_attention (cell 1"]),
    "star import": (["from torch.nn.functional import *", sdpa("q")], SD,
                    ["a star import from torch.nn.functional"]),
    "the stub's name rebound later": ([sdpa("q"), "scaled_dot_product_attention = "
                                       "F.scaled_dot_product_attention"], SD, ["(cell 2, line 1)"]),
    "a lambda in place of the stub": ([
        "scaled_dot_product_attention = lambda q, k, v, mask=None: "
        "(F.scaled_dot_product_attention(q, k, v), None)"], SD, ["cell 1, line 1"]),
    "default argument": ([
        "def scaled_dot_product_attention(q, k, v, mask=None, f=F.scaled_dot_product_attention):\n"
        "    return f(q, k, v), None"], SD, ["torch.nn.functional.scaled_dot_product_attention"]),
    "decorator": ([
        """
        def using(function):
            return lambda *args, **kwargs: function(*args)
        @using(F.scaled_dot_product_attention)
        def scaled_dot_product_attention(q, k, v, mask=None):
            pass
        """], SD, ["cell 1, line 3"]),
    "torch._C._nn": ([sdpa("torch._C._nn.scaled_dot_product_attention(q, k, v)")], SD,
                     ["torch._C._nn.scaled_dot_product_attention", READY]),
    "torch._VF": ([sdpa("torch._VF._scaled_dot_product_attention_math(q, k, v)[0]")], SD,
                  ["torch._VF._scaled_dot_product_attention_math"]),
    "aten overload": (
        [sdpa("torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v)[0]")], SD,
        ["torch.ops.aten._scaled_dot_product_attention_math (cell 1"]),
    "aten flash kernel": ([sdpa("torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]")],
                          SD, ["torch._scaled_dot_product_flash_attention_for_cpu"]),
    "aten by name in a string": ([sdpa(
        'torch._C._get_operation_overload("aten::_scaled_dot_product_attention_math", "")'
        '(q, k, v)')],
        SD, ['the name "aten::_scaled_dot_product_attention_math" given to torch._C._get_operation_'
             f"overload (cell 1, line 3), which names {READY} (torch.nn.functional.scaled_dot_"
             "product_attention)"]),
    "nn.MultiheadAttention": ([
        """
        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, num_heads):
                super().__init__()
                self.inner = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
        """], MHA, [f"torch.nn.MultiheadAttention (cell 1, line 4), {READY}"]),
    "nn.modules.activation.MultiheadAttention": ([
        "class MultiHeadAttention(nn.modules.activation.MultiheadAttention):\n    pass"], MHA,
        [f"torch.nn.modules.activation.MultiheadAttention (cell 1, line 1), {READY} "
         "(torch.nn.MultiheadAttention)"]),
    "nn.TransformerEncoderLayer": ([
        "def causal_mask(T):\n    layer = nn.TransformerEncoderLayer(4, 2)\n    return layer"],
        {"causal_mask"}, ["torch.nn.TransformerEncoderLayer (cell 1, line 2)"]),
    "__wrapped__": ([sdpa("F.softmax.__wrapped__(q)")], SD,
                    ["__wrapped__ on torch.nn.functional.softmax", "unwraps a function", HIDE]),
    "flex_attention": ([
        SDPA_HEAD + "    from torch.nn.attention.flex_attention import flex_attention\n" + WEIGHTS +
        "    return flex_attention(q, k, v), weights"], SD,
        ["torch.nn.attention.flex_attention.flex_attention", READY]),
    # -- dynamic access that can hide a name -----------------------------------------------------
    "getattr, string concatenation": ([
        'PART = "product_attention"', sdpa('getattr(F, "scaled_dot_" + PART)(q, k, v)')], SD,
        [f"getattr with a computed name (string concatenation) on torch.nn.functional (cell 2, "
         f"line 3), which {HIDE}"]),
    "getattr, str.join": (
        [sdpa('getattr(F, "".join(["scaled_dot_", "product_attention"]))(q, k, v)')], SD,
        ["getattr with a computed name (str.join) on torch.nn.functional"]),
    "getattr, bytes decode": (
        [sdpa("getattr(F, b'scaled_dot_product_attention'.decode())(q, k, v)")], SD,
        ["getattr with a computed name (a decode) on torch.nn"]),
    "getattr, format": (
        [sdpa('getattr(F, "{}_{}".format("scaled_dot_product", "attention"))(q, k, v)')], SD,
        ["(str.format) on torch.nn.functional"]),
    "getattr, f-string of a parameter": ([
        SDPA_HEAD + WEIGHTS + '    def pick(module, part):\n'
        '        return getattr(module, f"scaled_dot_{part}")\n'
        '    return pick(F, "product_attention")(q, k, v), weights'], SD,
        ["getattr with a computed name (an f-string) on `module`, an object this check cannot "
         "trace"]),
    "getattr on a module from a parameter": ([
        "def helper(module, name):\n    return getattr(module, name)",
        sdpa('helper(F, "scaled_dot_product_attention")(q, k, v)')], SD,
        ["uses helper, which uses getattr with a computed name (held in `name`) on `module`"]),
    "hasattr, computed": ([sdpa("q if hasattr(F, mask) else q")], SD,
                          ["hasattr with a computed name (held in `mask`) on torch.nn.functional"]),
    "getattr as a value": ([
        "import functools",
        sdpa('functools.reduce(getattr, ["nn", "functional"], torch).softmax(q, -1)')],
        SD, ["getattr as a value", "hides the name it looks up"]),
    "attrgetter": ([
        "import operator", sdpa('operator.attrgetter("scaled_dot_product_attention")(F)(q, k, v)')],
        SD, ["operator.attrgetter (cell 2, line 3), which looks up a member by a name given at run "
             "time"]),
    "string.Formatter": ([
        "import string",
        sdpa("string.Formatter().get_field('0.' + 'noitnetta_tcudorp_tod_delacs'[::-1], (F,), "
             "{})[0](q, k, v)")], SD, ["string.Formatter (cell 2, line 3)", "get_field"]),
    "the import machinery": ([
        "import _frozen_importlib as boot",
        sdpa("boot._call_with_frames_removed(torch.softmax, q, -1)")], SD,
        ["_frozen_importlib._call_with_frames_removed", "reaches the import machinery"]),
    "vars of a torch module": ([sdpa('vars(F)["scaled_dot_" + "product_attention"](q, k, v)')], SD,
                               ["vars() on torch.nn.functional (cell 1, line 3), which reaches an "
                                "object's members as a dictionary"]),
    "a name as a key": ([sdpa('vars(F)["scaled_dot_product_attention"](q, k, v)')], SD,
                        ['the name "scaled_dot_product_attention" as a key (cell 1, line 3), which '
                         f"names {READY}"]),
    "__dict__ of a torch module": (
        [sdpa('F.__dict__["scaled_dot_" + "product_attention"](q, k, v)')], SD,
        ["__dict__ on torch.nn.functional", "reaches an object's members as a dictionary"]),
    "globals()": ([sdpa('globals()["F"].softmax(q, -1)')], SD, ["globals()", "reaches the "
                                                                  "notebook's names"]),
    "importlib": ([
        "import importlib",
        sdpa('importlib.import_module("torch.nn.func" + "tional").softmax(q, -1)')], SD,
        ["importlib.import_module (cell 2, line 3), which imports a module by a name given at "
         "run time"]),
    "__import__": ([sdpa('__import__("torch").softmax(q, -1)')], SD, ["__import__()"]),
    "exec": ([sdpa("q"),
              'exec("scaled_dot_product_attention = F.scaled_" + "dot_product_attention")'], ALL,
             ["may be changed by code that uses exec() (cell 2, line 1), which runs code given as "
              "a string"]),
    "eval": ([sdpa('eval("F.softmax")(q, -1)')], ALL, ["eval()"]),
    "compile": ([sdpa('q if compile("1", "<x>", "eval") else q')], ALL, ["compile()"]),
    "sys.modules": ([
        "import sys", sdpa('sys.modules["torch.nn.functional"].softmax(q, -1)')], SD,
        ["sys.modules (cell 2, line 3)"]),
    "sys.modules written": ([
        "import sys", sdpa("q"), 'sys.modules["torch.nn.functional"] = None'], ALL,
        ["may be changed by code that uses sys.modules (cell 3, line 1)"]),
    "__builtins__": ([sdpa('__builtins__.getattr(F, "softmax")(q, -1)')], ALL, ["__builtins__"]),
    "object.__getattribute__": ([sdpa('object.__getattribute__(F, "softmax")(q, -1)')], SD,
                                ["__getattribute__ on builtins.object"]),
    "codecs": ([
        "import codecs", sdpa('getattr(F, codecs.decode("fpnyrq_qbg_cebqhpg_nggragvba", '
                              '"rot13"))(q, k, v)')], SD,
        ["codecs.decode (cell 2, line 3)", "getattr with a computed name (a decode) on torch.nn"]),
    "base64": ([
        "import base64",
        sdpa('getattr(F, base64.b64decode("c2NhbGVkX2RvdA==").decode())(q, k, v)')],
        SD, ["base64.b64decode", "decodes text"]),
    "pickle": (["import pickle", sdpa("pickle.loads(b'')(q, k, v)")], ALL,
               ["pickle.loads", "loads pickled objects"]),
    "ctypes": (["import ctypes", sdpa("q if ctypes.sizeof(ctypes.c_int) else q")], ALL,
               ["ctypes.sizeof", "reaches the process's memory directly"]),
    # A red team's: ctypes puts torch's function into a list that the stub reads, by no name
    "ctypes writing a list": ([
        "_box = [None]", sdpa("_box[0](q, k, v)"),
        "import ctypes\n_fn = getattr(F, ''.join(map(chr, [115, 100])))\n"
        "ctypes.pythonapi.PyList_SetItem(ctypes.py_object(_box), 0, ctypes.py_object(_fn))"], ALL,
        ["may be changed by code that uses ctypes.pythonapi", "reaches the process's memory"]),
    "subprocess": ([
        "import subprocess",
        sdpa('q + float(subprocess.run(["python", "-c", "print(1)"]).returncode)')], SD,
        ["subprocess.run", "runs another program"]),
    "inspect.getmembers": ([
        "import inspect", sdpa("dict(inspect.getmembers(F))['softmax'](q, -1)")], SD,
        ["inspect.getmembers", "lists an object's members by name"]),
    "dir of a torch module": ([sdpa("q if dir(F) else q")], SD, ["dir() on torch.nn.functional"]),
    "search by name": ([
        "import gc",
        sdpa('[f for f in gc.get_objects() if getattr(f, "__name__", "") == '
             '"scaled_dot_product_attention"][0](q, k, v)')], ALL,
        ['the name "scaled_dot_product_attention" in a comparison']),
    "code in a string": ([
        sdpa('q if open("m.py", "w").write("import torch.nn.functional as F\\n'
             'a = F.scaled_dot_product_attention") else q')], ALL,
        ['code in a string ("F.scaled_dot_product_attention") (cell 1, line 3)']),
    "code in a string, alone": ([sdpa('q if len("x = F.scaled_dot_product_attention(q, k, v)") '
                                      'else q')], SD,
                                ['code in a string ("F.scaled_dot_product_attention")']),
    "a module that is not installed": (["import attention_cheats", sdpa("attention_cheats.f(q)")],
                                       SD, ["uses attention_cheats, which uses the module "
                                            "attention_cheats (cell 1, line 1), which is not part "
                                            "of Python, torch or the course"]),
    "a file of code written": ([
        sdpa("q"), 'open("helpers.py", "w").write(SOURCE)\nimport helpers'], ALL,
        ['the file "helpers.py" (cell 2, line 1), which is a file of code']),
    # -- top-level statements that rebind or change a name ---------------------------------------
    "X.forward = ...": ([
        SOLUTION["mha-code"],
        "def _forward(self, x_q, x_kv, mask=None):\n"
        "    return F.multi_head_attention_forward(x_q, x_kv, x_kv, 12, 3, None, None, None, None, "
        "False, 0.0, None, None)[0]",
        "MultiHeadAttention.forward = _forward"], MHA,
        ["uses _forward, which uses torch.nn.functional.multi_head_attention_forward (cell 2, "
         "line 2)"]),
    "setattr(X, ...)": ([
        SOLUTION["mha-code"],
        'setattr(MultiHeadAttention, "forward", lambda self, x, y, mask=None: '
        "F.multi_head_attention_forward(x, y, y, 12, 3, None, None, None, None, False, 0.0, None, "
        "None)[0])"], MHA, ["torch.nn.functional.multi_head_attention_forward (cell 2, line 1)"]),
    "lst.append(F.sdpa)": ([
        "IMPLEMENTATIONS = []", sdpa("IMPLEMENTATIONS[0](q, k, v)"),
        "IMPLEMENTATIONS.append(F.scaled_dot_product_attention)"], SD,
        ["uses IMPLEMENTATIONS, which uses torch.nn.functional.scaled_dot_product_attention "
         "(cell 3, line 1)"]),
    "dict item": ([
        "CONFIG = {}", sdpa('CONFIG["attend"](q, k, v)'),
        'CONFIG["attend"] = F.scaled_dot_product_attention'], SD, ["uses CONFIG, which uses"]),
    "a helper that changes its argument": ([
        SOLUTION["mha-code"],
        "def install(cls, forward):\n    cls.forward = forward",
        "install(MultiHeadAttention, lambda self, x, y, mask=None: "
        "F.multi_head_attention_forward(x, y, y, 12, 3, None, None, None, None, False, 0.0, None, "
        "None)[0])"], MHA, ["multi_head_attention_forward (cell 3, line 1)"]),
    "global statement in a function": ([
        "def setup():\n    global ATTEND\n    ATTEND = F.scaled_dot_product_attention",
        sdpa("ATTEND(q, k, v)")], SD, ["uses ATTEND, which uses torch.nn.functional.scaled_dot_"
                                       "product_attention (cell 1, line 3)"]),
    "a change to torch itself": ([
        "torch.Tensor.attend = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)",
        sdpa("q.attend(k, v)"), "def causal_mask(T):\n    return torch.ones(T, T).triu(1) > 0"],
        ALL, ["may be changed by code that uses torch.nn.functional.scaled_dot_product_attention "
              "(cell 1, line 1)"]),
    "a change through type()": ([
        SOLUTION["mha-code"], "m = MultiHeadAttention(12, 3)",
        "type(m).forward = lambda self, x, y, mask=None: F.multi_head_attention_forward(x, y, y, "
        "12, 3, None, None, None, None, False, 0.0, None, None)[0]"], ALL,
        ["multi_head_attention_forward (cell 3, line 1)"]),
    "setattr with a computed name on a torch module": ([
        sdpa("F.attend(q, k, v)"), 'NAME = "attend"\nsetattr(F, NAME, F.softmax)'], ALL,
        ["setattr with a computed name (held in `NAME`) on torch.nn.functional (cell 2, line 2)"]),
    # -- values, not names: whatever is bound from torch is torch -------------------------------
    # (a change to it counts against every stub, and the message says what was changed, where)
    **{case: ([ATTEND_HELPER, sdpa("q.attend(k, v)"), change], ALL,
              ["uses _attend, which uses torch.nn.functional.scaled_dot_product_attention (cell 1, "
               f"line 2), {READY}, through the change to {what} (cell 3, line {line})"])
       for case, (change, what, line) in {
           "an alias of torch changed": (
               "alias = torch\nalias.Tensor.attend = _attend", "torch.Tensor.attend", 2),
           "setattr on an alias of torch": (
               'alias = torch\nsetattr(alias.Tensor, "attend", _attend)', "torch.Tensor.attend", 2),
           "setattr on an alias of torch.Tensor": (
               'T = torch.Tensor\nsetattr(T, "attend", _attend)', "torch.Tensor.attend", 2),
           "an alias of torch.Tensor changed": (
               "T = torch.Tensor\nT.attend = _attend", "torch.Tensor.attend", 2),
           "an alias of a torch module changed": (
               "G = F\nG.attend = _attend", "torch.nn.functional.attend", 2),
           "an alias of nn.Module, forward": (
               "M = nn.Module\nM.forward = _attend", "torch.nn.Module.forward", 2),
           "an alias of nn.Module, __call__": (
               "M = nn.Module\nM.__call__ = _attend", "torch.nn.Module.__call__", 2),
           "torch in a list": ("[torch][0].Tensor.attend = _attend", "torch.Tensor.attend", 1),
           "torch in a tuple": ("(torch,)[0].Tensor.attend = _attend", "torch.Tensor.attend", 1),
           "torch in a dict": ('{"t": torch}["t"].Tensor.attend = _attend',
                               "torch.Tensor.attend", 1),
           "torch in a list held in a name": (
               "box = [1, torch]\nbox[1].Tensor.attend = _attend", "torch.Tensor.attend", 2),
           "torch unpacked": ("a, b = torch, 1\na.Tensor.attend = _attend",
                              "torch.Tensor.attend", 2),
           "torch unpacked beside a star": (
               "a, *rest = torch, 1\na.Tensor.attend = _attend", "torch.Tensor.attend", 2),
           "torch unpacked into the star": (
               "a, *rest = 1, torch, 2\nrest[0].Tensor.attend = _attend", "torch.Tensor.attend", 2),
           "torch unpacked from a name": (
               "pair = (torch, 1)\nt, n = pair\nt.Tensor.attend = _attend", "torch.Tensor.attend",
               3),
           "a loop over torch": ("for t in (torch,):\n    t.Tensor.attend = _attend",
                                 "torch.Tensor.attend", 2),
           "a loop over pairs": ("for t, n in [(torch, 1)]:\n    t.Tensor.attend = _attend",
                                 "torch.Tensor.attend", 2),
           "with ... as": ("import contextlib\nwith contextlib.nullcontext(torch) as t:\n"
                           "    t.Tensor.attend = _attend", "torch.Tensor.attend", 3),
           "a walrus": ("(t := torch).Tensor.attend = _attend", "torch.Tensor.attend", 1),
           "a walrus, then its name": ("if (t := torch):\n    t.Tensor.attend = _attend",
                                       "torch.Tensor.attend", 2),
           "a conditional expression": ("t = torch if len(F.__name__) else None\n"
                                        "(t or torch).Tensor.attend = _attend",
                                        "torch.Tensor.attend", 2),
           "a default argument": ("def install(t=torch):\n    t.Tensor.attend = _attend\n"
                                  "install()", "torch.Tensor.attend", 2),
           "a local alias": ("def install():\n    t = torch.Tensor\n    t.attend = _attend\n"
                             "install()", "torch.Tensor.attend", 3),
           "a helper given torch": ("def install(module):\n    module.Tensor.attend = _attend\n"
                                    "install(torch)", "torch, given to install", 3),
           "a helper given an alias of torch.Tensor, setattr": (
               'def install(cls):\n    setattr(cls, "attend", _attend)\nT = torch.Tensor\n'
               "install(T)", "torch.Tensor, given to install", 4),
       }.items()},
    # the dynamic modules, under another name or in a container, are those modules
    "an alias of sys, modules written": (
        ["import sys", sdpa("q"), 's = sys\ns.modules["torch.nn.functional"] = None'], ALL,
        ["may be changed by code that uses sys.modules (cell 3, line 2)"]),
    "sys in a list": ([
        "import sys", sdpa('[sys][0].modules["torch.nn.functional"].softmax(q, -1)')], SD,
        ["sys.modules (cell 2, line 3), which reaches modules as a dictionary"]),
    "an alias of importlib": ([
        "import importlib", sdpa('m.import_module("torch.nn.func" + "tional").softmax(q, -1)'),
        "m = importlib"], SD, ["importlib"]),
    "importlib in a tuple": ([
        "import importlib",
        sdpa('(importlib,)[0].import_module("torch.nn.func" + "tional").softmax(q, -1)')], SD,
        ["importlib.import_module (cell 2, line 3)"]),
    "an alias of builtins": ([
        "import builtins", "b = builtins",
        sdpa('b.getattr(F, "scaled_dot_product_attention")(q, k, v)')], SD,
        ['getattr(torch.nn.functional, "scaled_dot_product_attention")', READY]),
    "builtins unpacked, setattr on torch": ([
        "import builtins", ATTEND_HELPER, sdpa("q.attend(k, v)"),
        'b, n = builtins, 1\nb.setattr(torch.Tensor, "attend", _attend)'], ALL,
        ["uses _attend, which uses torch.nn.functional.scaled_dot_product_attention (cell 2, "
         "line 2)", "through the change to torch.Tensor.attend (cell 4, line 2)"]),
    # reading torch's attention through an alias or a container is flagged as before
    "an alias of F read": ([sdpa("G.scaled_dot_product_attention(q, k, v)"), "G = F"], SD,
                           [f"torch.nn.functional.scaled_dot_product_attention (cell 1, line 3), "
                            f"{READY}"]),
    "F in a list read": ([sdpa("[F][0].scaled_dot_product_attention(q, k, v)")], SD,
                         [f"torch.nn.functional.scaled_dot_product_attention (cell 1, line 3), "
                          f"{READY}"]),
    "torch.ops under another name": ([sdpa("ops.aten._scaled_dot_product_attention_math(q, k, v)"
                                           "[0]"), "ops = torch.ops"], SD,
                                     ["uses ops, which uses torch.ops"]),
    "torch.ops unpacked in a loop": ([
        sdpa("[o.aten._scaled_dot_product_attention_math(q, k, v)[0] for o in (torch.ops,)][0]")],
        SD, ["torch.ops.aten._scaled_dot_product_attention_math (cell 1, line 3), " + READY]),
    # -- another stub: called by name it is judged alone; used otherwise, it passes on -----------
    "another stub used as a value": ([
        sdpa("F.scaled_dot_product_attention(q, k, v)"),
        replace_in(SOLUTION["mha-code"], "out, self.attention_weights = scaled_dot_product_"
                   "attention(q, k, v, mask)", "attend = scaled_dot_product_attention\n"
                   "        out, self.attention_weights = attend(q, k, v, mask)")],
        SD | MHA, {"MultiHeadAttention": [
            "uses scaled_dot_product_attention, which uses torch.nn.functional.scaled_dot_product_"
            "attention (cell 1, line 3)"]}),
    "another stub called by its name is judged alone": ([
        sdpa("F.scaled_dot_product_attention(q, k, v)"), SOLUTION["mha-code"]], SD,
        ["uses torch.nn.functional.scaled_dot_product_attention (cell 1, line 3)"]),
}

# id -> cells: honest code, which nothing may be charged against
HONEST = {
    "the solution": [SOLUTION["sdpa-code"], SOLUTION["mha-code"], SOLUTION["masks-code"]],
    "scratch comparisons with torch's attention": [
        SOLUTION["sdpa-code"],
        """
        q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
        F.scaled_dot_product_attention(q, k, v)
        print(torch.allclose(scaled_dot_product_attention(q, k, v)[0],
                             F.scaled_dot_product_attention(q, k, v), atol=1e-6))
        reference = F.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(scaled_dot_product_attention(q, k, v)[0], reference)
        assert torch.allclose(scaled_dot_product_attention(q, k, v)[0],
                              F.scaled_dot_product_attention(q, k, v), atol=1e-6)
        for mask in (None, torch.ones(5, 7, dtype=torch.bool).triu(1)):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
        torch_mha = nn.MultiheadAttention(12, 3, batch_first=True)
        """,
        SOLUTION["mha-code"], SOLUTION["masks-code"]],
    "a scratch import under another name": [
        "from torch.nn.functional import scaled_dot_product_attention as torch_sdpa",
        SOLUTION["sdpa-code"],
        "print(torch_sdpa(torch.ones(1, 2, 4), torch.ones(1, 3, 4), torch.ones(1, 3, 4)))"],
    "a comparison helper given both functions": [
        SOLUTION["sdpa-code"],
        """
        def compare(mine, theirs):
            q = torch.randn(2, 5, 4)
            return torch.allclose(mine(q, q, q)[0], theirs(q, q, q), atol=1e-6)
        print(compare(scaled_dot_product_attention, F.scaled_dot_product_attention))
        """],
    "getattr and setattr on their own objects": [
        SOLUTION["sdpa-code"],
        """
        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, num_heads):
                super().__init__()
                self.h = num_heads
                for name in ("w_q", "w_k", "w_v", "w_o"):
                    setattr(self, name, nn.Linear(d_model, d_model))

            def project(self, name, x):
                return getattr(self, "w_" + name)(x)

            def forward(self, x_q, x_kv, mask=None):
                layers = [getattr(self, f"w_{c}") for c in "qkv"]
                if hasattr(self, "attention_weights") and vars(self) and self.__dict__:
                    pass
                object.__setattr__(self, "h", self.h)
                q, k, v = (self.project(c, x) for c, x in zip("qkv", (x_q, x_kv, x_kv)))
                out, self.attention_weights = scaled_dot_product_attention(q, k, v, mask)
                return self.w_o(out)
        """],
    "getattr with a name from a constant tuple": [
        """
        def causal_mask(T):
            layer = nn.Linear(2, 2)
            for name in ("weight", "bias"):
                getattr(layer, name)
            return torch.ones(T, T, dtype=torch.bool).triu(1)
        """],
    "names that mention attention": [
        """
        def attention_weights(q, k):
            return (q @ k.transpose(-2, -1)).softmax(-1)

        def multi_head_attention(x):
            return x

        def scaled_dot_product_attention(q, k, v, mask=None):
            \"\"\"Like F.scaled_dot_product_attention, but also returns the weights.\"\"\"
            # not torch.nn.functional.scaled_dot_product_attention: the course's rules
            weights = attention_weights(q, k)
            if mask is not None and mask.dim() > 4:
                raise ValueError("the mask does not fit, unlike F.scaled_dot_product_attention")
            return weights @ v, weights

        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, num_heads):
                super().__init__()
                self.multi_head_attention = nn.ModuleDict({"multi_head_attention": nn.Identity()})
                self.sdpa = scaled_dot_product_attention

            def forward(self, x_q, x_kv, mask=None):
                layers = {"multi_head_attention": x_q}
                inner = self.multi_head_attention["multi_head_attention"]
                return inner(layers["multi_head_attention"])
        """],
    "stdlib, installed and course modules": [
        """
        import copy
        from collections import OrderedDict
        import numpy as np
        from attention_parts import MultiHeadAttention as Course
        from tfcourse.student import show

        def causal_mask(T):
            return torch.from_numpy(np.triu(np.ones((T, T), dtype=bool), 1))
        """],
    "scratch dynamic code that no stub reaches": [
        SOLUTION["sdpa-code"],
        """
        print(dir(F), [name for name in dir(F) if "attention" in name])
        name = "scaled_dot_" + "product_attention"
        function = getattr(F, name)
        print(function(torch.ones(1, 2, 4), torch.ones(1, 3, 4), torch.ones(1, 3, 4)))
        plt_settings = {"figure.figsize": (8, 4)}
        torch.backends.cudnn.deterministic = True
        """],
    "a cell with an error": [SOLUTION["sdpa-code"], "def broken(:\n    pass"],
    "harmless patches, crashes and other processes at the top level (tests/test_hostile.py)": [
        SOLUTION["sdpa-code"],
        """
        import builtins, os, pickle, signal, subprocess, sys
        import importlib.util
        builtins.abs = lambda value: 0
        torch.allclose = lambda *args, **kwargs: True
        graders = importlib.util.find_spec("autograder") is not None
        pid = subprocess.Popen([sys.executable, "-c", "pass"]).pid
        data = pickle.dumps([1, 2])
        os.kill(os.getpid(), signal.SIGSEGV)
        """],
    "a checkpoint saved and loaded in a scratch cell": [
        SOLUTION["sdpa-code"], SOLUTION["mha-code"],
        """
        model = MultiHeadAttention(12, 3)
        torch.save(model.state_dict(), "model.pt")
        model.load_state_dict(torch.load("model.pt"))
        """],
    "an optional package": [
        SOLUTION["sdpa-code"],
        "try:\n    import seaborn_not_installed\nexcept ImportError:\n    pass"],
    # values are followed: a call's result (a tensor, a layer) is not torch, and changing the
    # student's own objects or containers is not a change to torch
    "tensors, layers and containers changed beside torch's attention": [
        SOLUTION["sdpa-code"], SOLUTION["mha-code"],
        """
        q = torch.randn(2, 5, 4)
        x = torch.zeros(3)
        x[0] = F.scaled_dot_product_attention(q, q, q).sum()
        ref = nn.Linear(4, 4)
        ref.weight.data.copy_(F.scaled_dot_product_attention(q, q, q)[0])
        ref.bias = nn.Parameter(F.scaled_dot_product_attention(q, q, q)[0, 0])
        a, b = torch.randn(2), torch.randn(2)
        a[0] = F.scaled_dot_product_attention(q, q, q).mean()
        dtypes = [torch.float32, torch.float64]
        dtypes[0] = F.scaled_dot_product_attention
        layers = [nn.Linear(4, 4), nn.Linear(4, 4)]
        layers[0].weight = nn.Parameter(F.scaled_dot_product_attention(q, q, q)[0])
        for layer, d in zip(layers, dtypes):
            layer.extra = F.scaled_dot_product_attention(q, q, q)
        for name, p in ref.named_parameters():
            p.grad = F.scaled_dot_product_attention(q, q, q)[0]
        with torch.no_grad() as nothing:
            reference = F.scaled_dot_product_attention(q, q, q)
        model = MultiHeadAttention(4, 2)
        def load(module, value=None):
            module.loaded = F.scaled_dot_product_attention(q, q, q)
        load(model)
        load(ref, torch)
        first, *others = layers
        first.weight = nn.Parameter(F.scaled_dot_product_attention(q, q, q)[0])
        """],
    "a default and a loop over the student's own layers": [
        SOLUTION["sdpa-code"],
        """
        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, num_heads, act=F.gelu, make=nn.Linear):
                super().__init__()
                self.act, self.h = act, num_heads
                self.w_q, self.w_k, self.w_v, self.w_o = (make(d_model, d_model) for _ in "qkvo")
                for layer in (self.w_q, self.w_k):
                    layer.weight.data.normal_(0, 0.02)
                    layer.tag = "projection"

            def forward(self, x_q, x_kv, mask=None):
                q, k, v = self.w_q(x_q), self.w_k(x_kv), self.w_v(x_kv)
                out, self.attention_weights = scaled_dot_product_attention(q, k, v, mask)
                return self.w_o(out)
        """],
    "own helpers and top-level constants": [
        """
        NEG = float("-inf")
        import torch.nn.functional as G
        def _scores(q, k):
            return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = _scores(q, k)
            if mask is not None:
                scores = scores.masked_fill(mask, NEG)
            weights = G.softmax(scores, dim=-1)
            return weights @ v, weights
        """],
}


@pytest.mark.parametrize("case", list(CHEATS))
def test_cheats_are_flagged_with_what_and_why(forbidden, case):
    cells, expected, words = CHEATS[case]
    found = flagged(forbidden, *cells)
    assert set(found) == expected, json.dumps(found, indent=1)
    for stub in expected:
        text = " | ".join(found[stub])
        for word in (words.get(stub, []) if isinstance(words, dict) else words):
            assert word in text, f"{word!r} not in {stub}'s messages: {text}"


@pytest.mark.parametrize("case", list(HONEST))
def test_honest_code_is_not_flagged(forbidden, case):
    assert flagged(forbidden, *HONEST[case]) == {}


def test_every_solution_and_alternative_passes(course):
    """The course's solutions, every cell of the source notebooks (demos, the recipe) and the
    alternative solutions of tests/alternatives.py break no rule."""
    from alternatives import ALTERNATIVES
    from conftest import NOTEBOOK_OF
    from tfcourse import notebook

    for assignment in NOTEBOOK_OF:
        source = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
        setup = [notebook.text(c) for c in notebook.cells_with_role(source, "setup")]
        cells = [(str(i), notebook.strip_solution_markers(notebook.text(c)))
                 for i, c in enumerate(source.cells) if c.cell_type == "code"
                 and not notebook.is_test(c) and notebook.role(c) != "setup"]
        answers = {alt.name: list({**solution_cells(assignment), **alt.answers}.items()) +
                   [("added", c) for c in alt.added.values()]
                   for alt in ALTERNATIVES if alt.assignment == assignment}
        for name, student in {"notebook": cells, **answers}.items():
            found = rules.check(student, course.forbidden_names(), context=setup,
                                stubs={s for g in course.assignment(assignment).checks
                                       for s in g.stubs},
                                known_modules=course.assignment(assignment).uses)
            assert not found.by_name and not found.unchecked, (assignment, name, found)


def test_allowed_names_are_not_flagged(forbidden):
    """course.yaml `allowed` takes a name (and its relatives) out of the rule."""
    cells = [sdpa("F.scaled_dot_product_attention(q, k, v)"),
             SOLUTION["mha-code"].replace("scaled_dot_product_attention(q, k, v, mask)",
                                          "(F.multi_head_attention_forward, None)")]
    allowed = [name for name in forbidden if not name.endswith("scaled_dot_product_attention")]
    found = {n: [v.message() for v in vs] for n, vs in rules.check(
        cells, allowed, context=[SETUP], stubs=STUBS).by_name.items()}
    assert set(found) == MHA, found
    assert rules.check(cells, [], context=[SETUP], stubs=STUBS).by_name == {}


# -- code that cannot be read ------------------------------------------------------------------
def test_invalid_cells_are_not_checked_and_said_so(forbidden):
    result = rules.check(["def broken(:\n", "x = 'a\0b'", code(sdpa("F.scaled_dot_product_"
                                                                      "attention(q, k, v)"))],
                         forbidden, context=[SETUP], stubs=STUBS)
    assert [label for label, _ in result.unchecked] == ["1", "2"]
    assert "not valid Python (invalid syntax, line 1)" in result.unchecked[0][1]
    assert set(result.by_name) == SD                 # the rest is still checked


@pytest.mark.parametrize("shape", ["sum", "attributes", "unary", "parentheses", "calls"])
def test_deep_nesting_never_crashes(forbidden, shape):
    """Code nested deeper than Python's own parser goes by default is read on a thread with a
    larger stack; deeper still, the cell is not checked (and would not compile either)."""
    depth = 3000
    line = {"sum": "x = " + " + ".join(["q"] * depth),
            "attributes": "x = F" + ".softmax" * depth,
            "unary": "x = " + "-" * 60000 + "q",
            "parentheses": "x = " + "(" * depth + "q" + ")" * depth,
            "calls": "x = " + "f(" * depth + ")" * depth}[shape]
    cheat = sdpa("F.scaled_dot_product_attention(q, k, v)")
    started = time.monotonic()
    result = rules.check([SDPA_HEAD + "    " + line + "\n" + WEIGHTS + "    return x, weights\n",
                          cheat], forbidden, context=[SETUP], stubs=STUBS)
    assert time.monotonic() - started < 30
    assert set(result.by_name) == SD                  # the other cell is checked
    if shape in ("sum", "attributes"):                # read after all, through the larger stack
        assert not result.unchecked
    else:                                             # not Python this interpreter can compile
        assert [label for label, _ in result.unchecked] == ["1"], result.unchecked
        with pytest.raises((SyntaxError, RecursionError, MemoryError)):
            compile(line, "<deep>", "exec")


def test_deeply_nested_cheat_is_still_found(forbidden):
    deep = "x = " + " + ".join(["q"] * 2995) + " + F.scaled_dot_product_attention(q, k, v)"
    found = flagged(forbidden, SDPA_HEAD + "    " + deep + "\n    return x, None")
    assert set(found) == SD
    with pytest.raises(RecursionError):              # where the old rule's ast.parse stopped
        ast.parse(deep)


# -- the tables, on both sides ---------------------------------------------------------------
def test_the_tables_are_standard_library_only_and_go_into_the_sandbox():
    """The static rule and the refusal read one table: the refusal's copy of it is the module
    itself, copied beside worker.py into the sandbox, where only the standard library (and
    torch, not needed here) can be imported."""
    from tfcourse.sandbox.launch import HARNESS

    tree = ast.parse((ROOT / "tfcourse" / "sandbox" / "rulebook.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert imported and imported <= sys.stdlib_module_names
    assert {"worker.py", "rulebook.py"} <= set(HARNESS)
    assert "import rulebook\n" in (ROOT / "tfcourse" / "sandbox" / "refusal.py").read_text()


def test_importing_the_tables_in_a_cell_reaches_the_harness(forbidden):
    found = flagged(forbidden, "import rulebook\nrulebook.RELATIVES.clear()", sdpa("q"))
    assert all(any("grader's harness" in message for message in found.get(stub, []))
               for stub in STUBS), found


# -- end to end --------------------------------------------------------------------------------
MASKS_BUG = replace_in(SOLUTION["masks-code"], "(tokens == pad_id)", "(tokens != pad_id)")
WEIGHTS_OF = ("    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
              "    if mask is not None:\n"
              "        scores = scores.masked_fill(mask, float(\"-inf\"))\n"
              "    weights = scores.softmax(dim=-1)\n")
ALLOWED = "None if mask is None else ~mask"


def _sdpa_cheat(body: str, before: str = "") -> str:
    return before + SDPA_HEAD + WEIGHTS_OF + f"    return {body}, weights\n"


MHA_FORWARD = '''
def _forward(self, x_q, x_kv, mask=None):
    B, Tq, D = x_q.shape
    h, Tk = self.num_heads, x_kv.shape[1]
    blocked = None
    if mask is not None:
        blocked = mask.expand(B, h, Tq, Tk).reshape(B * h, Tq, Tk)
    out, weights = F.multi_head_attention_forward(
        x_q.transpose(0, 1), x_kv.transpose(0, 1), x_kv.transpose(0, 1), D, h, None,
        torch.cat([self.w_q.bias, self.w_k.bias, self.w_v.bias]), None, None, False, 0.0,
        self.w_o.weight, self.w_o.bias, training=False, need_weights=True, attn_mask=blocked,
        use_separate_proj_weight=True, q_proj_weight=self.w_q.weight,
        k_proj_weight=self.w_k.weight, v_proj_weight=self.w_v.weight,
        average_attn_weights=False)
    self.attention_weights = weights
    return out.transpose(0, 1)


MultiHeadAttention.forward = _forward
'''
NOT_WRITTEN = {"masks-code": SOLUTION["masks-code"] + "\n\ndef causal_mask(T):\n"
                             "    raise NotImplementedError()\n",
               "sdpa-code": SDPA_HEAD + "    raise NotImplementedError()\n",
               "mha-code": replace_in(SOLUTION["mha-code"], "        super().__init__()",
                                      "        super().__init__()\n"
                                      "        raise NotImplementedError()")}
# name -> (answers, cells added after the answers, the twin: which stub is not written)
SUBMISSIONS = {
    "helper": ({"sdpa-code": _sdpa_cheat(
        "_attend(q, k, v, mask)", "def _attend(q, k, v, mask):\n    return F.scaled_dot_product_"
        f"attention(q, k, v, attn_mask={ALLOWED})\n\n\n")}, [], "sdpa-code"),
    "alias": ({"sdpa-code": _sdpa_cheat(f"sdpa(q, k, v, attn_mask={ALLOWED})",
                                        "sdpa = F.scaled_dot_product_attention\n\n\n")},
              [], "sdpa-code"),
    "getattr": ({"sdpa-code": _sdpa_cheat(
        f'getattr(F, "scaled_dot_" + "product_attention")(q, k, v, attn_mask={ALLOWED})')},
        [], "sdpa-code"),
    "aten": ({"sdpa-code": _sdpa_cheat(
        "torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=None if mask is None "
        "else torch.zeros(mask.shape).masked_fill(mask, float('-inf')))[0]")}, [], "sdpa-code"),
    "mha-forward": ({}, [MHA_FORWARD], "mha-code"),
    # torch's causal mask in causal_mask: it costs masks.causal, not padding_mask's check beside
    # it in the group (course.yaml's stub_of)
    "mask-helper": ({"masks-code": SOLUTION["masks-code"] + "\n\ndef causal_mask(T):\n    return "
                                   "nn.Transformer.generate_square_subsequent_mask(T).isinf()\n"},
                    [], "masks-code"),
    # it finds the (wrapped) function among all objects in memory: gc's walk over every object is
    # flagged (through it the grader's harness could be reached too), against every stub
    "memory-search": ({"sdpa-code": _sdpa_cheat(
        f"_found()(q, k, v, attn_mask={ALLOWED})",
        "import gc\n\n\ndef _found():\n    return next(f for f in gc.get_objects() if type(f)."
        "__name__ == 'function' and f.__module__ != '__main__' and f.__name__ == 'scaled' + "
        "'_dot_product_attention')\n\n\n")},
        [], "sdpa-code"),
}


def _build(folder, answers, added):
    import nbformat

    def add(nb):
        for text in added:
            nb.cells.append(nbformat.v4.new_code_cell(text))
    return make_submission(folder, A, answers={"masks-code": MASKS_BUG, **answers}, edit=add)


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory):
    """Each cheat and its twin, graded as a class is: submission name -> results."""
    from tfcourse.batch.runner import grade_many

    base = tmp_path_factory.mktemp("rules")
    folders = []
    for name, (answers, added, missing) in SUBMISSIONS.items():
        folders.append(_build(base / "in" / name, answers, added))
        twin = {**{k: v for k, v in answers.items() if k != missing}, missing: NOT_WRITTEN[missing]}
        folders.append(_build(base / "in" / f"{name}-twin", twin, []))
    for outcome in grade_many(course, folders, base / "out", jobs=2, lang="en", progress=False):
        assert outcome.status == "graded", outcome
    return {folder.name: json.loads((base / "out" / folder.name / "results.json").read_text())
            for folder in folders}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SUBMISSIONS))
def test_each_cheat_earns_what_its_twin_earns(graded, name):
    cheat, twin = graded[name], graded[f"{name}-twin"]
    if name == "memory-search":                  # flagged for every stub: less than its twin
        assert all(scores(cheat)[test] <= score for test, score in scores(twin).items())
        assert all("gc.get_objects" in t["output"] for t in cheat["tests"]), cheat["tests"]
        return
    assert scores(cheat) == scores(twin), json.dumps(cheat["tests"], indent=1)[:3000]
    if name == "mask-helper":
        assert scores(cheat)["masks.causal"] == 0 and scores(cheat)["masks.padding"] == 1
        said = next(t["output"] for t in cheat["tests"] if t["number"] == "masks.causal")
        assert "torch.nn.Transformer" in said and "causal_mask" in said, said
        return
    assert twin["score"] > 0 and "masks.padding" not in {
        t["number"] for t in twin["tests"] if t["score"] == t["max_score"]}
    group = "mha" if SUBMISSIONS[name][2] == "mha-code" else "sdpa"
    said = {t["output"] for t in cheat["tests"] if t["number"].startswith(group + ".")}
    assert len(said) == 1 and "the course's rules do not allow this here, so write the " \
        "attention yourself" in said.pop()
