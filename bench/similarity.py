"""How well `tfcourse similarity` finds copies, and what it costs for a large class.

A synthetic class of 02-layers: each independent student writes each answer cell in one of the
styles of tests/alternatives.py (the course's solution and the full ports of public code), drawn
at random per cell; some students then copy a classmate and disguise the copy: variables renamed,
functions and classes reordered, comments and spacing changed, cells split. Reported: the share of
planted copies found (recall), the independent pairs listed (false positives), and the time and
memory of one run.

    python bench/similarity.py --students 200 --copies 20           # recall and false positives
    python bench/similarity.py --students 1000 --copies 50          # a large class's cost
"""
from __future__ import annotations

import argparse
import ast
import io
import random
import resource
import sys
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from alternatives import ALTERNATIVES  # noqa: E402
from conftest import make_submission, solution_cells  # noqa: E402

from tfcourse.course import load_course  # noqa: E402
from tfcourse.insights import similarity  # noqa: E402

ASSIGNMENT = "02-layers"
KEEP = {"self", "super", "forward", "torch", "nn", "F", "math", "np", "numpy"}


def styles() -> list[dict[str, str]]:
    """The answer cells of every independent way of writing the assignment: the course's solution
    and each port of tests/alternatives.py; a port that gives no regressor gets one of the
    regressor alternatives' (the same few, in turn)."""
    cells = solution_cells(ASSIGNMENT)
    mine = [alt for alt in ALTERNATIVES if alt.assignment == ASSIGNMENT]
    regressors = [alt.answers["regressor-code"] for alt in mine if len(alt.answers) == 1]
    found = [cells]
    for number, alternative in enumerate(alt for alt in mine if len(alt.answers) > 1):
        answers = dict(alternative.answers)
        answers.setdefault("regressor-code", regressors[number % len(regressors)])
        found.append(answers)
    return found


def rename(code: str, rng: random.Random) -> str:
    """Every local name, argument and function the code defines gets another name."""
    tree = ast.parse(code)
    contract = {node.name for node in tree.body if isinstance(node, (ast.ClassDef,
                                                                      ast.FunctionDef))}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
             and isinstance(node.ctx, ast.Store)}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}
    names -= KEEP | contract
    mapping = {name: f"{rng.choice(['v', 'tmp', 'val', 'z'])}{index}_{name[::-1]}"
               for index, name in enumerate(sorted(names))}
    out, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        text = token.string
        if token.type == tokenize.NAME and text in mapping and previous != ".":
            text = mapping[text]
        out.append((token.type, text))
        previous = token.string
    return tokenize.untokenize(out)


def reorder(code: str, rng: random.Random) -> str:
    """The top-level definitions in another order, with comments dropped and spacing changed."""
    tree = ast.parse(code)
    parts = [ast.get_source_segment(code, node, padded=True) for node in tree.body]
    rng.shuffle(parts)
    return "\n\n\n".join(f"# part {index}\n{part}" for index, part in enumerate(parts))


def disguise(cells: dict[str, str], rng: random.Random) -> tuple[dict[str, str], dict[str, str]]:
    """A copy of `cells` disguised; (answers, cells added before an answer: split off)."""
    answers, added = {}, {}
    for cell, code in cells.items():
        code = reorder(rename(code, rng), rng)
        lines = code.splitlines()
        if len(lines) > 12 and rng.random() < 0.5:          # split the cell in two
            cut = len(lines) // 2
            while cut < len(lines) and lines[cut].startswith((" ", "\t")):
                cut += 1
            added[cell], code = "\n".join(lines[:cut]), "\n".join(lines[cut:])
        answers[cell] = code
    return answers, added


def write(folder: Path, answers: dict[str, str], added: dict[str, str] | None = None) -> None:
    import nbformat

    from tfcourse import notebook

    def add_cells(nb):
        for before, code in (added or {}).items():
            index = next(i for i, cell in enumerate(nb.cells)
                         if notebook.grade_id(cell) == before)
            nb.cells.insert(index, nbformat.v4.new_code_cell(code))
    make_submission(folder, ASSIGNMENT, answers=answers, edit=add_cells)


def copies_class(folder: Path, copies: int, seed: int) -> dict[str, int]:
    """Each style once and `copies` disguised copies of each: name -> the style it comes from."""
    rng = random.Random(seed)
    source = {}
    for number, answers in enumerate(styles()):
        write(folder / f"style{number}", answers)
        source[f"style{number}"] = number
        for copy in range(copies):
            write(folder / f"style{number}-copy{copy}", *disguise(answers, rng))
            source[f"style{number}-copy{copy}"] = number
    return source


def mixed_class(folder: Path, students: int, seed: int) -> None:
    """`students` submissions, each cell in a style drawn at random: a large class's cost."""
    rng = random.Random(seed)
    pool = styles()
    for number in range(students):
        write(folder / f"s{number:04d}", {cell: rng.choice(pool)[cell] for cell in pool[0]})


def measure(course, folder: Path, out: Path, threshold: float):
    cpu, wall = time.process_time(), time.perf_counter()
    _, pairs, _ = similarity.run(course, [folder], out, assignment=ASSIGNMENT, threshold=threshold)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return pairs, f"{cpu:.1f} CPU s, {wall:.1f} s wall, peak RSS of the process {peak:.0f} MB"


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--copies", type=int, default=4, help="disguised copies of each style")
    options.add_argument("--students", type=int, default=0,
                         help="also time a class of this many (cells in random styles)")
    options.add_argument("--seed", type=int, default=0)
    options.add_argument("--threshold", type=float, default=similarity.THRESHOLD)
    options.add_argument("--work", type=Path, default=Path("/tmp/tfcourse-similarity"))
    args = options.parse_args()
    import shutil
    shutil.rmtree(args.work, ignore_errors=True)
    course = load_course(ROOT)
    source = copies_class(args.work / "copies", args.copies, args.seed)
    pairs, cost = measure(course, args.work / "copies", args.work / "copies-out", args.threshold)
    names = sorted(source)
    true = {(a, b) for i, a in enumerate(names) for b in names[i + 1:] if source[a] == source[b]}
    listed = {tuple(sorted((pair.first, pair.second))) for pair in pairs}
    styles_count = len(set(source.values()))
    print(f"{styles_count} styles, {args.copies} disguised copies of each, threshold "
          f"{args.threshold:.0%}: {cost}")
    print(f"recall: {len(true & listed)}/{len(true)} pairs of the same source listed; "
          f"false positives: {len(listed - true)} of "
          f"{len(names) * (len(names) - 1) // 2 - len(true)} pairs of different sources listed")
    worst = max((pair.similarity for pair in pairs if tuple(sorted((pair.first, pair.second)))
                 not in true), default=0.0)
    lowest = min((pair.similarity for pair in pairs if tuple(sorted((pair.first, pair.second)))
                  in true), default=0.0)
    print(f"lowest similarity of a listed copy {lowest:.2f}; highest of different sources "
          f"listed {worst:.2f}")
    if args.students:
        mixed_class(args.work / "mixed", args.students, args.seed)
        _, cost = measure(course, args.work / "mixed", args.work / "mixed-out", args.threshold)
        print(f"{args.students} submissions: {cost}")


if __name__ == "__main__":
    main()
