"""One piece of code to run in the student's process: made by whoever reads the notebook
(submission/notebooks.py), run by the session (session.py). A module of its own so that reading a
notebook does not import the session's channel, and with it torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Cell:
    """One piece of code to run in the student's process."""
    label: str          # what a student recognises: a grade id, or its position ("7": cell 7)
    source: str
    from_student: bool = True
