"""Reading a mapping of course.yaml into a frozen dataclass, checked as it is read (course.py).

Each section of course.yaml is a frozen dataclass whose fields are its keys: `setting` says how a
field is read (its key, range, other spellings, a reader of its own) and what it means (`help`,
which `tfcourse config` and docs/course-yaml.md show); `read_mapping` checks a mapping from
course.yaml against one, and `read_value` one value against a field's type. A key this module does
not know, a value of the wrong type, out of range or missing is a `CourseError` that names the
key's path (`course.yaml: limits.check_secnds: unknown key (known: check_seconds, ...)`).
"""
from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Callable, Literal

COURSE_FILE = "course.yaml"


class CourseError(Exception):
    """course.yaml is missing or says something tfcourse cannot use."""


# -- reading a mapping of course.yaml into a dataclass ---------------------------------------------
def setting(default: Any = MISSING, *, factory: Any = MISSING, key: str | None = None,
            optional: bool = False, low: float | None = None, above: float | None = None,
            high: float | None = None, aliases: tuple = (), read: Callable | None = None,
            what: str | None = None, help: str = ""):
    """A dataclass field that course.yaml sets.

    key: its name in course.yaml (default: the field's). optional: course.yaml may leave it out
    although the field has no default (the reader of the enclosing object fills it in). low, above,
    high: a number's range (>= low, > above, <= high). aliases: (written, meant) pairs of a
    Literal's other spellings. read(value, where): reads a value of a type the validator does not
    know by itself; what: how the messages describe such a value. help: what the setting
    means, in a sentence (`tfcourse config` and docs/course-yaml.md show it)."""
    return field(default=default, default_factory=factory, metadata={
        "setting": True, "key": key, "optional": optional, "low": low, "above": above,
        "high": high, "aliases": aliases, "read": read, "what": what, "help": help})


def _at(where: str) -> str:
    return f"{COURSE_FILE}: {where}: " if where else f"{COURSE_FILE}: "


def _path(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)


def _show(value) -> str:
    """A value as course.yaml would write it, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        text = "[" + ", ".join(_show(item) for item in value) + "]"
        return text if len(text) <= 60 else text[:57] + "...]"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _literal_word(option) -> str:
    return _show(option) if isinstance(option, bool) or option is None else str(option)


def _words(options) -> str:
    options = [_literal_word(option) for option in options]
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"


def _describe(hint, meta: Mapping) -> str:
    """How a message says what a value must be."""
    if meta.get("what"):
        return meta["what"]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        return f"{_describe(inner[0], meta)}, or null"
    if origin is Literal:
        return f"one of {_words(args)}"
    if origin is tuple:
        return "a list of strings"
    if is_dataclass(hint):
        return "a mapping"
    word = {bool: "true or false", int: "an integer", float: "a number",
            str: "a non-empty string"}.get(hint, getattr(hint, "__name__", str(hint)))
    bounds = []
    if meta.get("low") is not None:
        bounds.append(f">= {meta['low']:g}")
    if meta.get("above") is not None:
        bounds.append(f"> {meta['above']:g}")
    if meta.get("high") is not None:
        bounds.append(f"<= {meta['high']:g}")
    return f"{word} {' and '.join(bounds)}" if bounds else word


def _wrong(value, hint, meta: Mapping, where: str) -> CourseError:
    if value is None:
        return CourseError(f"{_at(where)}has no value; it must be {_describe(hint, meta)}")
    return CourseError(f"{_at(where)}must be {_describe(hint, meta)}, not {_show(value)}")


def read_value(value, hint, meta: Mapping, where: str):
    """`value`, found at `where` in course.yaml, as the type `hint` (int, float, bool, str, a
    tuple of str, a Literal, an optional one of those, or a dataclass read by `read_mapping`)."""
    if meta.get("read"):
        return meta["read"](value, where)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [arg for arg in args if arg is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"{where}: cannot read {hint}")
        if is_dataclass(inner[0]):         # its own messages say what is wrong inside
            if not isinstance(value, Mapping):
                raise _wrong(value, hint, meta, where)
            return read_value(value, inner[0], meta, where)
        try:
            return read_value(value, inner[0], meta, where)
        except CourseError:
            raise _wrong(value, hint, meta, where) from None
    if origin is Literal:
        for written, meant in meta.get("aliases") or ():
            if type(value) is type(written) and value == written:
                value = meant
        for option in args:               # 1 is not true, nor 0 false
            if type(value) is type(option) and value == option:
                return option
        raise _wrong(value, hint, meta, where)
    if origin is tuple:
        if value is None:                  # `names:` with nothing after it: none
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise _wrong(value, hint, meta, where)
        for index, item in enumerate(items):
            if not isinstance(item, str) or not item:
                raise CourseError(f"{_at(f'{where}[{index}]')}must be a non-empty string, "
                                  f"not {_show(item)}")
        return tuple(items)
    if is_dataclass(hint):
        return hint(**read_mapping(hint, value, where))
    if hint is bool:
        if type(value) is not bool:
            raise _wrong(value, hint, meta, where)
        return value
    if hint is str:
        if not isinstance(value, str) or not value:
            raise _wrong(value, hint, meta, where)
        return value
    if hint is int:
        ok = type(value) is int
    elif hint is float:
        ok = type(value) in (int, float) and math.isfinite(value)
    else:
        raise TypeError(f"{where}: cannot read {hint}")
    if not ok or (meta.get("low") is not None and value < meta["low"]) or \
            (meta.get("above") is not None and value <= meta["above"]) or \
            (meta.get("high") is not None and value > meta["high"]):
        raise _wrong(value, hint, meta, where)
    return hint(value)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def read_mapping(cls, data, where: str) -> dict[str, Any]:
    """Check `data`, the mapping found at `where` in course.yaml, against the `setting` fields of
    the dataclass `cls`: each key must be one of theirs, each value of its field's type, and each
    field without a default given. Returns the values read, by field name (the keys left out,
    which have defaults, are not among them)."""
    if not isinstance(data, Mapping):
        raise CourseError(f"{_at(where)}must be a mapping (key: value lines), not {_show(data)}")
    settings = {f.metadata.get("key") or f.name: f
                for f in fields(cls) if f.metadata.get("setting")}
    for key in data:
        if key not in settings:
            close = difflib.get_close_matches(str(key), list(settings), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise CourseError(f"{_at(_path(where, key))}unknown key "
                              f"(known: {', '.join(settings)}){hint}")
    values = {}
    hints = _hints(cls)
    for key, spec in settings.items():
        if key in data:
            values[spec.name] = read_value(data[key], hints[spec.name], spec.metadata,
                                           _path(where, key))
        elif spec.default is MISSING and spec.default_factory is MISSING \
                and not spec.metadata.get("optional"):
            raise CourseError(f"{_at(_path(where, key))}is missing; it must be "
                              f"{_describe(hints[spec.name], spec.metadata)}")
    return values


def _read_only(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))
