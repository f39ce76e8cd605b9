"""What grading wrote under --out, found in both of its layouts, and the class's grades.csv."""
import csv
import json
from pathlib import Path

from tfcourse.batch.graded import grades_table, results_files, student_of, write_grades


def results(folder: Path, assignment: str, submission: str, checks: dict,
            skipped=()) -> None:
    """A results.json as grading writes it: check id -> points (of 1)."""
    folder.mkdir(parents=True)
    tests = [{"number": check, "score": points, "max_score": 1.0,
              "status": "passed" if points == 1 else "failed"} for check, points in checks.items()]
    graded = [t for t in tests if t["number"] not in skipped]
    (folder / "results.json").write_text(json.dumps({
        "score": sum(t["score"] for t in graded), "max_score": float(len(graded)),
        "tests": tests, "extra_data": {"assignment": assignment, "submission": submission,
                                       "not_graded": list(skipped)}}))


def a_class(root: Path) -> Path:
    out = root / "graded"
    results(out / "alice" / "01-attention", "01-attention", "alice/01-attention",
            {"sdpa.values": 1, "sdpa.mask": 0})
    results(out / "alice" / "03-sorting", "03-sorting", "alice/03-sorting",
            {"model.params": 1, "trained.accuracy": 0}, skipped={"trained.accuracy"})
    results(out / "bob" / "01-attention", "01-attention", "bob/01-attention",
            {"sdpa.values": 0, "sdpa.mask": 0})
    results(out / "carol", "01-attention", "carol", {"sdpa.values": 1, "sdpa.mask": 1})
    (out / "dave" / "01-attention").mkdir(parents=True)               # not read: left out
    (out / "dave" / "01-attention" / "results.json").write_text("{not json")
    (out / ".hidden" / "x").mkdir(parents=True)
    (out / ".hidden" / "x" / "results.json").write_text("{}")
    return out


def test_both_layouts_are_found_by_name(tmp_path):
    out = a_class(tmp_path)
    assert [name for name, _ in results_files(out)] == [
        "alice/01-attention", "alice/03-sorting", "bob/01-attention", "carol",
        "dave/01-attention"]
    assert results_files(tmp_path / "none") == []


def test_the_student_is_the_folder_above_the_assignment():
    assert student_of("alice/01-attention", "01-attention") == "alice"
    assert student_of("01-attention", "01-attention", "alice/01-attention") == "alice"
    assert student_of("carol", "01-attention", "carol") == "carol"
    assert student_of("x/y", "01-attention") == "x/y"


def test_grades_csv_has_a_row_per_submission_and_a_column_per_check(course, tmp_path):
    out = a_class(tmp_path)
    path = write_grades(course, out)
    assert path == out / "grades.csv"
    rows = list(csv.reader(path.open()))
    header = rows[0]
    assert header[:4] == ["student_id", "assignment", "score", "max_score"]
    checks = header[4:]         # every check of the assignments graded, in course.yaml's order
    assert checks == course.assignment("01-attention").test_ids() + \
        course.assignment("03-sorting").test_ids()
    table = {(row[0], row[1]): dict(zip(header, row)) for row in rows[1:]}
    assert list(table) == [("alice", "01-attention"), ("bob", "01-attention"),
                           ("carol", "01-attention"), ("alice", "03-sorting")]
    alice = table["alice", "01-attention"]
    assert (alice["score"], alice["max_score"]) == ("1", "2")
    assert (alice["sdpa.values"], alice["sdpa.mask"], alice["sdpa.shapes"]) == ("1", "0", "")
    assert alice["model.params"] == ""                   # another assignment's check: empty
    sorting = table["alice", "03-sorting"]
    assert (sorting["model.params"], sorting["trained.accuracy"]) == ("1", "")   # skipped
    assert (sorting["score"], sorting["max_score"]) == ("1", "1")


def test_grades_csv_without_a_course_lists_the_checks_found(tmp_path):
    header, rows = grades_table(None, a_class(tmp_path))
    assert header[4:] == ["sdpa.values", "sdpa.mask", "model.params"]
    assert len(rows) == 4
