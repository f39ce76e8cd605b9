"""course.yaml's settings described from the schema (course.py): `tfcourse config [SETTING]`, and
docs/course-yaml.md, which is generated from the same description (tests/test_config.py checks
that it is current).

Each setting is a field of course.py's dataclasses made with `setting(..., help=...)`: its key in
course.yaml, its type, its default and its range come from the field, its meaning from `help`.
"""
from __future__ import annotations

import types
import typing
from dataclasses import MISSING, fields, is_dataclass

from .course import COURSE_FILE, Course
from .schema import _show

DOC = "docs/course-yaml.md"


def _type_name(kind) -> str:
    """A field's type as course.yaml writes it."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Literal:
        return " | ".join(_show(option) if not isinstance(option, str) else option
                          for option in args)
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args if arg is not type(None)) + " | null"
    if is_dataclass(kind):
        return "mapping"
    return {int: "integer", float: "number", str: "text", bool: "true | false"}.get(
        kind, getattr(kind, "__name__", str(kind)).lower())


def _default(item) -> str:
    if item.default is not MISSING:
        value = item.default
    elif item.default_factory is not MISSING:
        value = item.default_factory()
    else:
        return "(optional)" if item.metadata.get("optional") else "(required)"
    if is_dataclass(value):
        return "(its settings' defaults)"
    if isinstance(value, typing.Mapping) and not value:
        return "{}"
    return value if isinstance(value, str) else _show(value)


def _range(meta) -> str:
    parts = [f">= {meta['low']:g}" if meta.get("low") is not None else "",
             f"> {meta['above']:g}" if meta.get("above") is not None else "",
             f"<= {meta['high']:g}" if meta.get("high") is not None else ""]
    return ", ".join(part for part in parts if part)


def settings(cls=Course, prefix: str = "") -> list[dict]:
    """Every setting of `cls`, sections first, then their settings: key path, type, default,
    range and help."""
    hints = typing.get_type_hints(cls)
    out = []
    for item in fields(cls):
        meta = item.metadata
        if not meta.get("setting"):
            continue
        key = f"{prefix}{meta.get('key') or item.name}"
        kind = hints[item.name]
        out.append({"key": key, "type": meta.get("what") or _type_name(kind),
                    "default": _default(item), "range": _range(meta), "help": meta.get("help", "")})
        section = kind if is_dataclass(kind) else None
        if section is None and typing.get_origin(kind) in (typing.Union, types.UnionType):
            section = next((arg for arg in typing.get_args(kind) if is_dataclass(arg)), None)
        if section is not None:
            out += settings(section, key + ".")
    return out


def describe(key: str) -> str | None:
    """One setting's meaning, type, default and range, in plain text; None if there is none."""
    found = next((item for item in settings() if item["key"] == key), None)
    if found is None:
        return None
    lines = [f"{found['key']}: {found['help']}", f"  type: {found['type']}",
             f"  default: {found['default']}"]
    if found["range"]:
        lines.append(f"  range: {found['range']}")
    below = [item["key"] for item in settings() if item["key"].startswith(key + ".")]
    if below:
        lines.append(f"  settings: {', '.join(below)}")
    return "\n".join(lines)


def listing() -> str:
    """Every setting, one a line, with its meaning."""
    items = settings()
    width = max(len(item["key"]) for item in items)
    return "\n".join(f"{item['key']:<{width}}  {item['help']}" for item in items)


def markdown() -> str:
    """docs/course-yaml.md."""
    lines = [f"# {COURSE_FILE}: every setting", "",
             "Generated from the schema (tfcourse/course.py) by `tfcourse config --markdown`; "
             "`tfcourse config SETTING` prints one. Do not edit by hand: tests/test_config.py "
             "checks that this page is current.", "",
             "| setting | type | default | range | meaning |", "|---|---|---|---|---|"]
    for item in settings():
        cells = [f"`{item['key']}`", item["type"], item["default"], item["range"], item["help"]]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
