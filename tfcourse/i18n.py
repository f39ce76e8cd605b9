"""Messages in the course's language, gettext style: the English text is the key.

Code writes its messages in English, as templates (`"position {p} changed"`), so it reads plainly.
A catalog per language (`locale/es.yaml`, beside the code that owns the messages) maps each English
template to its translation. A template missing from a catalog falls back to English, and the
project's tests list every template that lacks a translation.
"""
from __future__ import annotations

import functools
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
