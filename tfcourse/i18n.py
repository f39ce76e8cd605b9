"""Messages in the course's language, gettext style: the English text is the key.

Code writes its messages in English, as templates (`"position {p} changed"`), so it reads plainly.
A catalog per language (`locale/es.yaml`, beside the code that owns the messages) maps each English
template to its translation. A template missing from a catalog falls back to English, and the
project's tests list every template that lacks a translation.
"""
from __future__ import annotations

import functools
import string
from pathlib import Path

import yaml

LOCALE = Path(__file__).with_name("locale")


@functools.lru_cache(maxsize=None)
def catalog(folder: str, lang: str) -> dict[str, str]:
    path = Path(folder) / f"{lang}.yaml"
    if lang == "en" or not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {str(key): str(value) for key, value in data.items()}


def phrase(text: str) -> str:
    """Marks a phrase shown to users that is not itself a template (a check's hint, a value put
    into a template): the catalog tests look for these, and render() translates such values."""
    return text


def translate(template: str, lang: str, folders: tuple[Path, ...] = (LOCALE,)) -> str:
    for folder in folders:
        found = catalog(str(folder), lang).get(template)
        if found is not None:
            return found
    return template


def in_catalog(text: str, folders: tuple[Path, ...] = (LOCALE,)) -> bool:
    """Whether `text` is a template or phrase of some language's catalog in `folders`."""
    return any(text in catalog(str(folder), path.stem)
               for folder in folders for path in sorted(Path(folder).glob("*.yaml")))


def message_kind(template: str, params: dict | None,
                 folders: tuple[Path, ...] = (LOCALE,)) -> str:
    """What a message says, without what differs from one submission to the next: `template` in
    English with the values that are phrases of a catalog (a hint, a cause) filled in and every
    other value (a number, a student's error text) left as its {placeholder}. Messages of one kind
    name one cause, so a class's messages are counted by kind."""
    out = []
    for text, name, spec, conversion in string.Formatter().parse(template):
        out.append(text)
        if name is None:
            continue
        value = (params or {}).get(name)
        out.append(value if isinstance(value, str) and in_catalog(value, folders)
                   else "{" + name + "}")
    return "".join(out)


def render(template: str, params: dict | None, lang: str,
           folders: tuple[Path, ...] = (LOCALE,)) -> str:
    """The template in `lang`, with its {placeholders} filled in; values that are phrases of the
    catalog ("the output", say) are translated too."""
    values = {key: translate(value, lang, folders) if isinstance(value, str) else value
              for key, value in (params or {}).items()}
    try:
        return translate(template, lang, folders).format(**values)
    except (KeyError, IndexError, ValueError):
        return template.format(**(params or {}))
