"""The notebooks' prose speaks to students: nothing in it points to what only the course's
instructors have (the course repository and its benchmarks, course.yaml, the lesson the course was
adapted from)."""
import pytest

from tfcourse import notebook

from conftest import NOTEBOOK_OF, ROOT

# Lower-case; English and Spanish.
INSTRUCTORS_ONLY = ["bench/", "course.yaml", "seed lesson", "lección semilla",
                    "lección en la que se basa", "repository", "repositorio"]


@pytest.mark.parametrize("assignment", list(NOTEBOOK_OF))
def test_no_prose_points_to_the_instructors_side(assignment):
    nb = notebook.read(ROOT / "source" / assignment / NOTEBOOK_OF[assignment])
    found = [f"cell {index} ({notebook.lang(cell)}): {phrase!r}"
             for index, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
             for phrase in INSTRUCTORS_ONLY if phrase in notebook.text(cell).lower()]
    assert not found, "prose for instructors in a student's notebook:\n" + "\n".join(found)
