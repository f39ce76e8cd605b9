"""tfcourse: an auto-graded nbgrader course in which students build a Transformer in PyTorch, and
the engine that grades it (see README.md and CONTRIBUTING.md)."""

# The one declaration of the version: pyproject.toml reads it (tool.setuptools.dynamic).
__version__ = "0.1.0"
