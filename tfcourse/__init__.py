"""tfcourse: the engine of an auto-graded nbgrader course (the course itself lives in the course
folder: course.yaml, source/, autograder/, visible/); see README.md and CONTRIBUTING.md."""

# The one declaration of the version: pyproject.toml reads it (tool.setuptools.dynamic).
__version__ = "0.1.0"
