"""The engine's diagnostics: the standard library's logging, one hierarchy of loggers
(`logging.getLogger("tfcourse.<module>")`), silent until configured here.

What the instructor must read (a refusal, a submission not read, a failed grading) is printed
where it happens, as before; logging says what the engine chose and why: a fallback taken (no fork
server, no zygote, no cgroup), a value it could not read. `tfcourse -v` shows INFO and above on
stderr, `-vv` DEBUG too. The level travels to the graders it starts in the environment
(TFCOURSE_LOG_LEVEL), and what a grader logged is relayed to this process's log.
"""
from __future__ import annotations

import logging
import os
import sys

ENVIRONMENT = "TFCOURSE_LOG_LEVEL"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def level_of(verbosity: int) -> int:
    """-v: INFO, -vv (or more): DEBUG; none: WARNING."""
    return logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 \
        else logging.DEBUG


def configure(verbosity: int) -> None:
    """Show the engine's log on stderr at the level `verbosity` (-v counted) gives; nothing
    without -v. The graders this process starts log at the same level."""
    if verbosity <= 0:
        return
    level = level_of(verbosity)
    os.environ[ENVIRONMENT] = logging.getLevelName(level)
    _attach(level)


def configure_from_environment() -> None:
    """In a grader: log as the command that started it was told to (TFCOURSE_LOG_LEVEL)."""
    name = os.environ.get(ENVIRONMENT, "")
    level = logging.getLevelName(name) if name else None
    if isinstance(level, int):
        _attach(level)


def _attach(level: int) -> None:
    logger = logging.getLogger("tfcourse")
    logger.setLevel(level)
    if not any(getattr(handler, "tfcourse", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.tfcourse = True                         # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False            # once here, not again through a root handler
