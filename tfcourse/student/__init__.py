"""What the course's notebooks import in the student's kernel: visible checks and pictures.

    from tfcourse.student import check, show, use_language

This is the generic toolkit: running checks and reporting them (checking.py, run.py), fixed
examples (examples.py), pictures (plots.py) and messages in the notebook's language. The checks
themselves are the course's (its `visible/` folder), which every released notebook carries;
`check.X` runs the notebook's own check X (visible.py). Nothing here knows a solution or a hidden
test. The hidden graders live in the course's `autograder/` folder and never reach students.
"""
import importlib

# Loaded when first asked for (PEP 562): `tfcourse check` lives in this package too, and must not
# wait for torch and matplotlib before it can answer.
_LAZY = {"check": ("visible", "check"), "show": ("plots", None),
         "use_language": ("visible", "use_language")}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = importlib.import_module(f"{__name__}.{module}")
    value = getattr(value, attribute) if attribute else value
    globals()[name] = value
    return value


def hidden_checks(group: str) -> None:
    """Stands where a test cell's hidden part runs: only the course's grader runs it."""
    raise RuntimeError(
        f"The hidden checks of {group!r} run when the notebook is graded, with `tfcourse grade` "
        f"or with `nbgrader autograde` in the course folder (its nbgrader_config.py adds "
        f"tfcourse's grading step). They do not run inside a notebook.")


__all__ = ["check", "show", "use_language", "hidden_checks"]
