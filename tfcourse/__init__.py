"""tfcourse: the engine of an auto-graded nbgrader course (the course itself lives in the course
folder: course.yaml, source/, autograder/, visible/); see README.md and CONTRIBUTING.md."""

# The one declaration of the version: pyproject.toml reads it (tool.setuptools.dynamic).
__version__ = "0.1.0"

# The engine's diagnostics go to the "tfcourse" logger and its children ("tfcourse.<module>"):
# silent unless a handler is configured (`tfcourse -v`, tfcourse/logs.py; the feedback service's
# own logging), never Python's last-resort printing of warnings.
import logging as _logging

_logging.getLogger("tfcourse").addHandler(_logging.NullHandler())
