"""The graders' own settings: course.yaml's `parameters` section, declared here.

The engine (tfcourse) knows nothing of training a sorter or a regressor; these checks do. Each
section of `PARAMETERS` is a frozen dataclass whose fields are its keys, read and checked like the
engine's own settings (`tfcourse.schema.setting`: type, range, a help sentence): `load_course`
checks course.yaml's `parameters` against this file, `tfcourse config` and docs/course-yaml.md
list them, and a grader reads one with `ctx.course.parameter("training")`.
"""
from dataclasses import dataclass

from tfcourse.schema import setting


@dataclass(frozen=True)
class Training:
    """The trained-model check of 03-sorting (`trained.accuracy`)."""
    seed: int = setting(low=0, help="the seed of the training run")
    eval_sequences: int = setting(above=0, help="how many sequences the trained model sorts")
    eval_length: int = setting(above=0, help="the length of those sequences")
    threshold: float = setting(low=0, high=1, help="the share of them it must sort exactly right")


@dataclass(frozen=True)
class Regression:
    """The trained regressor check of 02-layers (`regressor.trained`)."""
    seed: int = setting(low=0, help="the seed of the training run")
    eval_sequences: int = setting(above=0, help="fresh sequences the trained model is judged on")
    max_error: float = setting(above=0, help="the mean absolute error it must stay below")


PARAMETERS = {
    "training": (Training, "the trained-model check of 03-sorting"),
    "regression": (Regression, "the trained regressor check of 02-layers"),
}
