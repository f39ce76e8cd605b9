"""What the course's notebooks import in the student's kernel: visible checks and pictures.

    from tfcourse.student import check, show, use_language

Nothing here knows a solution or a hidden test: the visible checks test properties a student can
read about in the notebook (shapes, sums, masks, parameter counts) and say in plain words what is
wrong. The hidden graders live in the course's `autograder/` folder and never reach students.
"""
from . import checks as check
from . import plots as show
from .checks import use_language


def hidden_checks(group: str) -> None:
    """Stands where a test cell's hidden part runs: only the course's grader runs it."""
    raise RuntimeError(
        f"The hidden checks of {group!r} run when the notebook is graded, with `tfcourse grade` "
        f"or with `nbgrader autograde` in the course folder (its nbgrader_config.py adds "
        f"tfcourse's grading step). They do not run inside a notebook.")


__all__ = ["check", "show", "use_language", "hidden_checks"]
