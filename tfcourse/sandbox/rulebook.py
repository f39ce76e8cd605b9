"""What the course's rule against torch's ready-made attention names: the tables.

Read on both sides of the sandbox: by the static rule on the trusted side (submission/rules.py,
which reads the student's cells) and by the refusal in the student's process (refusal.py, copied
beside this file into the sandbox). So this module imports the standard library only.

- RELATIVES: for each forbidden API, the other names in torch that reach the same code;
- PRIVATE_TABLES: torch's operator tables, which reach every operator by its name;
- DYNAMIC_PATHS, DUNDERS, BY_NAME, WHOLESALE: modules, attributes and builtins that reach around
  names, and so can hide a forbidden name from the static rule (docs/rules.md lists them).
"""
import re

# course.yaml forbidden name (its last part) -> the other names in torch that reach the same code:
# private entry points (torch._C, torch._VF, torch.ops.aten), kernels and toggles.
RELATIVES = {
    "scaled_dot_product_attention": r"scaled_dot|sdpa|(?:^|_)sdp(?:_|$)|flash_attention|"
                                    r"efficient_attention|cudnn_attention|fused_attention|"
                                    r"flex_attention|CausalBias|causal_lower_right|"
                                    r"causal_upper_left|sfdp|(?i:attention)",
    "multi_head_attention_forward": r"multi_head_attention",
    "MultiheadAttention": r"MultiheadAttention",
    "TransformerEncoderLayer": r"TransformerEncoderLayer|transformer_encoder_layer",
    "TransformerDecoderLayer": r"TransformerDecoderLayer|transformer_decoder_layer",
}

READY_MADE = "torch's ready-made attention"
HIDES = "which can hide torch's ready-made attention from this check"


def hiding(why: str) -> str:
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
    # The grader's harness in the student's process (worker.py runs as __main__, beside channel.py,
    # rulebook.py and standins.py): through it every reply to the grader could be rewritten.
    "__main__": ("reaches the grader's harness in this process", True),
    "worker": ("reaches the grader's harness in this process", True),
    "channel": ("reaches the grader's harness in this process", True),
    "standins": ("reaches the grader's harness in this process", True),
    "rulebook": ("reaches the grader's harness in this process", True),
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


def matchers(forbidden) -> list:
    """(api, its last name, the compiled pattern of its relatives or None) for each forbidden
    API of course.yaml (`torch.nn.functional.scaled_dot_product_attention`)."""
    out = []
    for api in forbidden:
        last = api.rsplit(".", 1)[-1]
        pattern = RELATIVES.get(last)
        out.append((api, last, re.compile(pattern) if pattern else None))
    return out


def table_of(path: str):
    """The private operator table a dotted path is in, or None."""
    return next((t for t in PRIVATE_TABLES if path == t or path.startswith(t + ".")), None)


def dynamic_path(path: str):
    """(why, writes) when a dotted path is, or is in, one of DYNAMIC_PATHS; else None."""
    for prefix, value in DYNAMIC_PATHS.items():
        if path == prefix or path.startswith(prefix + "."):
            return value
    return None
