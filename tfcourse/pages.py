"""The engine's HTML pages: one jinja2 Environment, autoescape on, the templates in templates/.

Every page the engine writes is rendered here: the student's feedback.html (batch/results.py),
the feedback service's pages (hub/page.py), the class report and the similarity report
(insights/). Each `{{ value }}` is escaped unless it is `Markup` (HTML the engine made itself,
such as copydetect's highlighted code), so a student's text (an error message, a file's name, a
folder's) is only text on every page.

Values are escaped as the standard library's `html.escape` writes them (`&quot;`, `&#x27;`):
markupsafe, jinja2's default, writes the same characters as `&#34;` and `&#39;`. The pages'
tests and their readers compare with `html.escape`; the two are the same to a browser.
jinja2 is imported when a page is first rendered: importing the engine does not need it.
"""
from __future__ import annotations

import functools
import html
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")


def _escaped(value):
    """What a `{{ value }}` writes: `value` escaped as html.escape does, or as it is when it is
    already HTML (`Markup`, anything with `__html__`)."""
    from markupsafe import Markup

    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value)))


@functools.lru_cache(maxsize=1)
def environment():
    """The one Environment of the engine's pages (templates compiled once per process)."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=_escaped,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    # numbers as the pages have always written them: a score "1.5", a share "90%"
    environment.filters["g"] = lambda number: f"{number:g}"
    environment.filters["percent"] = lambda number: f"{number:.0%}"
    return environment


def render(name: str, **values) -> str:
    """The template `name` (in templates/) rendered with `values`."""
    return environment().get_template(name).render(**values)


def macro(name: str, macro_name: str, *args) -> str:
    """The macro `macro_name` of the template `name` called with `args`: one piece of a page
    (a submission on the service's page), rendered as the page renders it."""
    return str(getattr(environment().get_template(name).module, macro_name)(*args))


def markup(text: str):
    """`text` as HTML the engine made itself, written as it is by every template."""
    from markupsafe import Markup

    return Markup(text)
