"""Mutation testing of the hidden graders: does every small bug in a stub cost points of its part?

    .venv/bin/python bench/mutation.py --assignment 01-attention [--limit N] [--every N]
                                       [--operators cosmic-ray|calls|all] [--jobs 2]
                                       [--out /tmp/tfcourse-mutation] [--no-train]

The code under test is the solution code of each answer cell of the source notebook (the course's
own answer to each stub); the tests are the hidden graders, run on a whole submission notebook.
cosmic-ray (a maintained mutation-testing library, in the `dev` extra) generates the mutants: each
of its operators that takes no arguments (the set `cosmic-ray init` uses by default: binary,
comparison and unary operators swapped, numbers moved by one, `not` added, True/False swapped,
loops made empty, decorators removed, ...) is applied at each place it fits, one mutation per
mutant. `--operators calls` runs bench/call_operators.py's instead (calls and methods removed,
arguments swapped, axes changed, slices moved by one, operations in place on an argument,
constructors' arguments exchanged: the bugs cosmic-ray does not make), `all` both; for those, a
killed mutant is also judged on whether one of its messages names the cause (the words of its kind
and place, `cause_pattern`), and `--reclassify --unnamed FILE` lists those that do not. cosmic-ray's
own runner is not used: it mutates a file on disk and runs a test command per mutant, while a
submission here is a notebook graded in a sandbox. Each mutant becomes a submission (the released
notebook, that one answer cell replaced by the mutant, the others the course's solution) and the
mutants of a cell are graded as one batch by the real engine (`grade_many`, with its fork server
and zygote), `--jobs` at a time.

A mutant is
- killed: it lost points in the check group of the cell it mutates (also noted: when it lost
  points in other groups too);
- killed only elsewhere: it lost points, but none in its own group (the graders blame another part);
- survived: it lost nothing. A survivor listed in bench/equivalent-mutants.yaml (reviewed by reading
  its diff: it computes what the solution computes) is equivalent; any other is unexplained.

The trained checks (`regressor.trained` of 02, `trained.accuracy` of 03) are graded only for the
mutants of the stubs their training runs (course.yaml: the group's stubs): `regressor.trained`
trains the student's EncoderRegressor around the grader's stand-in layers and positions, and
`trained.accuracy` trains the Transformer with its own schedule and teacher forcing, judged with
the reference's decoding; a mutant elsewhere cannot change them. `--no-train` skips them for every
mutant (03's training costs about 20 CPU seconds a submission).

Results: <out>/<assignment>/report.json (<out>/<assignment>-calls/ for `--operators calls`) (every
mutant: its id, diff, verdict, the checks it lost and their messages), and a table per check group
on stdout. The graded folders stay under <out>, so a second run grades only the mutants that
changed (grade_many's fingerprints). CPU seconds are those of every process of a batch (a cpuacct
cgroup as root on cgroup v1, as bench/proctree.py counts; else this process and its reaped
children, which misses killed students' processes)."""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import resource
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import yaml                                                            # noqa: E402
from cosmic_ray.ast import ast_nodes, get_ast                           # noqa: E402
from cosmic_ray.mutating import mutate_code                             # noqa: E402
from cosmic_ray.plugins import get_operator, operator_names             # noqa: E402

from call_operators import KINDS, OPERATORS, cause_pattern, mutations   # noqa: E402
from conftest import make_submission, solution_cells                    # noqa: E402
from tfcourse.course import load_course                                # noqa: E402

EQUIVALENTS = ROOT / "bench" / "equivalent-mutants.yaml"
TRAINED = {"02-layers": "regressor.trained", "03-sorting": "trained.accuracy"}


@dataclass
class Mutant:
    assignment: str
    cell: str                   # the answer cell's grade id (sdpa-code)
    group: str                  # the check group of that cell (sdpa)
    stub: str                   # the top-level def or class the mutation is in
    operator: str               # cosmic-ray's name, without its provider (NumberReplacer)
    occurrence: int             # cosmic-ray's index of the place, for this operator in this cell
    variant: int                # which of the operator's mutations at that place (NumberReplacer
                                # makes two: +1 and -1)
    line: int                   # where, in the cell (1-based)
    column: int
    before: str                 # the changed lines, as in the solution
    after: str                  # and as in the mutant
    code: str = field(repr=False)
    note: str = ""              # bench/call_operators.py's: what a removed call called

    @property
    def id(self) -> str:
        """Readable and unique in a run: cell, operator, place."""
        place = f"{self.cell}/{self.operator}/L{self.line}C{self.column}"
        return f"{place}.{self.variant}" if self.variant else place

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What an entry of the equivalents file matches: stable while those lines stay."""
        return self.cell, self.operator, self.before, self.after


def operators() -> list[tuple[str, object]]:
    """cosmic-ray's operators that take no arguments (its default set), as (name, instance)."""
    found = []
    for name in operator_names():
        operator = get_operator(name)
        if not operator.arguments():
            found.append((name.split("/", 1)[1], operator()))
    return found


def top_level_names(code: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each top-level def and class of a cell, decorators in."""
    return [(min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno,
             node.name) for node in ast.parse(code).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def changed_lines(code: str, mutated: str) -> tuple[str, str]:
    """The lines a mutation changed: (before, after), each stripped and joined by newlines."""
    before, after = [], []
    for line in difflib.unified_diff(code.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (before if line.startswith("-") else after).append(line[1:].strip())
    return "\n".join(before), "\n".join(after)


def cell_mutants(assignment: str, cell: str, group: str, code: str,
                 only: set[str] | None = None, family: str = "cosmic-ray") -> list[Mutant]:
    """Every mutant cosmic-ray's default operators (family "cosmic-ray"), bench/call_operators.py's
    ("calls") or both ("all") make of one answer cell's solution code; `only`: the operators so
    named, of any family."""
    made = []
    if family in ("calls", "all") or only is not None:
        made += call_mutants(assignment, cell, group, code, only)
    if family not in ("cosmic-ray", "all") and only is None:
        return made
    tree = get_ast(code)
    defs = top_level_names(code)
    for name, operator in operators():
        if only is not None and name not in only:
            continue
        places = [start for node in ast_nodes(tree)
                  for start, _ in operator.mutation_positions(node)]
        for occurrence, (line, column) in enumerate(places):
            mutated = mutate_code(code, operator, occurrence)
            if mutated is None or mutated == code:
                continue
            stub = next((n for first, last, n in defs if first <= line <= last), group)
            variant = places[:occurrence].count((line, column))
            before, after = changed_lines(code, mutated)
            made.append(Mutant(assignment, cell, group, stub, name, occurrence, variant, line,
                               column, before, after, mutated))
    return made


def call_mutants(assignment: str, cell: str, group: str, code: str,
                 only: set[str] | None = None) -> list[Mutant]:
    """The mutants bench/call_operators.py's operators make of one answer cell: calls removed,
    arguments swapped, axes changed, slices moved, operations in place, constructors' arguments
    exchanged."""
    defs = top_level_names(code)
    made = []
    for operator in OPERATORS:
        if only is not None and operator.name not in only:
            continue
        seen = {}
        for occurrence, (line, column, mutated, note) in enumerate(mutations(code, operator)):
            stub = next((n for first, last, n in defs if first <= line <= last), group)
            variant = seen[line, column] = seen.get((line, column), -1) + 1
            before, after = changed_lines(code, mutated)
            made.append(Mutant(assignment, cell, group, stub, operator.name, occurrence, variant,
                               line, column, before, after, mutated, note))
    return made


def mutants_of(course, assignment: str, family: str = "cosmic-ray") -> list[Mutant]:
    """The mutants of every answer cell of an assignment, cell by cell in the notebook's order.
    A mutant whose code another mutant of the cell already has is left out (graded once)."""
    groups = {group.id for group in course.assignment(assignment).checks}
    found = []
    for cell, code in solution_cells(assignment).items():
        group = cell.removesuffix("-code")
        assert group in groups, f"answer cell {cell} belongs to no check group of {assignment}"
        seen = set()
        for mutant in cell_mutants(assignment, cell, group, code, family=family):
            if mutant.code not in seen:
                seen.add(mutant.code)
                found.append(mutant)
    return found


def sample(mutants: list[Mutant], limit: int | None) -> list[Mutant]:
    """At most `limit` mutants of each cell, spread over its list (so over the operators)."""
    if not limit:
        return mutants
    by_cell: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        by_cell.setdefault(mutant.cell, []).append(mutant)
    kept = []
    for items in by_cell.values():
        step = max(1, len(items) / limit)
        kept += [items[int(i * step)] for i in range(min(limit, len(items)))]
    return kept


# -- the equivalents file --------------------------------------------------------------------------
def load_equivalents(path: Path = EQUIVALENTS) -> list[dict]:
    """The reviewed equivalent mutants: a list of entries with id, cell, stub, operator, before,
    after and reason, all strings, only `after` may be empty (a line removed). Raises ValueError
    naming a malformed entry."""
    entries = yaml.safe_load(path.read_text()) or []
    if not isinstance(entries, list):
        raise ValueError(f"{path.name}: a list of entries is expected")
    fields = ("id", "cell", "stub", "operator", "before", "after", "reason")
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or set(entry) != set(fields) or \
                not all(isinstance(entry[f], str) and (entry[f].strip() or f == "after")
                        for f in fields):
            raise ValueError(f"{path.name}: entry {number} must have exactly the fields "
                             f"{', '.join(fields)}, each a string, empty only for `after`")
    return entries


def entry_key(entry: dict) -> tuple[str, str, str, str]:
    return entry["cell"], entry["operator"], entry["before"].strip(), entry["after"].strip()


def unmatched(entries: list[dict], mutants: list[Mutant]) -> list[dict]:
    """The entries that no generated mutant matches (the file went stale)."""
    keys = {mutant.key for mutant in mutants}
    return [entry for entry in entries if entry_key(entry) not in keys]


# -- grading ---------------------------------------------------------------------------------------
class CpuClock:
    """CPU seconds of this process and all it starts: a cpuacct cgroup where one can be made (as
    bench/proctree.py), else this process and its reaped children."""

    def __init__(self):
        from proctree import CpuAccount
        self.account = CpuAccount.make()
        if self.account is not None:
            self.account.enter()
        self.counted = "cpuacct" if self.account else "rusage (misses killed processes)"

    def seconds(self) -> float:
        if self.account is not None:
            return self.account.seconds()
        own, children = (resource.getrusage(who) for who in
                         (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def close(self) -> None:
        if self.account is not None:
            (self.account.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.account.close()


def skipped_for(mutant: Mutant, course, train: bool) -> list[str]:
    """The trained check, unless the mutant is in a stub its training runs (and `train`)."""
    check = TRAINED.get(mutant.assignment)
    if check is None:
        return []
    group = next(g for g in course.assignment(mutant.assignment).checks
                 if g.id == check.split(".")[0])
    return [] if train and mutant.stub in group.stubs else [check]


def names_cause(operator: str, note: str, own: dict) -> bool | None:
    """Whether a message of the checks a killed mutant lost in its own group names the cause
    (bench/call_operators.py's words for its kind and place); None for cosmic-ray's operators (no
    words) and for a mutant not killed in its group."""
    if operator not in KINDS or not own:
        return None
    pattern = re.compile(cause_pattern(KINDS[operator], note), re.I)
    return any(pattern.search(message) for message in own.values())


def verdict(mutant: Mutant, results: dict, skipped: list[str], equivalent: set) -> dict:
    """What the graders made of a mutant: the checks it lost (not skipped) and the verdict."""
    lost = {test["number"]: (test.get("output") or "")[:2000] for test in results["tests"]
            if test["score"] < test["max_score"] and test["number"] not in skipped}
    own = [number for number in lost if number.split(".")[0] == mutant.group]
    named = names_cause(mutant.operator, mutant.note, {n: lost[n] for n in own})
    if own:
        kind = "killed"
    elif lost:
        kind = "killed elsewhere"
    elif mutant.key in equivalent:
        kind = "equivalent"
    else:
        kind = "unexplained"
    return {"verdict": kind, "lost": lost, "also_elsewhere": bool(own) and len(own) < len(lost),
            "named": named}


def grade(course, mutants: list[Mutant], out: Path, jobs: int, train: bool) -> list[dict]:
    """Grade the mutants cell by cell (one grade_many batch per cell and skip list)."""
    from tfcourse.batch.runner import grade_many

    equivalent = {entry_key(entry) for entry in load_equivalents()}
    clock = CpuClock()
    rows = []
    try:
        batches: dict[tuple[str, tuple[str, ...]], list[Mutant]] = {}
        for mutant in mutants:
            batches.setdefault((mutant.cell, tuple(skipped_for(mutant, course, train))),
                               []).append(mutant)
        for (cell, skip), batch in batches.items():
            names = {f"m{mutant.occurrence:03d}-{mutant.operator}": mutant for mutant in batch}
            folders = [make_submission(out / "submissions" / cell / name, mutant.assignment,
                                       {mutant.cell: mutant.code})
                       for name, mutant in names.items()]
            started, wall = clock.seconds(), time.monotonic()
            outcomes = grade_many(course, folders, out / "graded" / cell, jobs=jobs, lang="en",
                                  progress=False, skip=list(skip))
            cpu = clock.seconds() - started
            print(f"  {cell}: {len(batch)} mutants graded in {cpu:.1f} CPU s, "
                  f"{time.monotonic() - wall:.1f} s wall (skipped: {', '.join(skip) or 'none'})",
                  flush=True)
            for outcome in outcomes:
                mutant = names[outcome.name]
                results = json.loads((outcome.folder / "results.json").read_text())
                row = {**{k: v for k, v in asdict(mutant).items() if k != "code"},
                       "id": mutant.id, "skipped": list(skip), "status": outcome.status,
                       "cpu_share": cpu / len(batch),
                       **verdict(mutant, results, list(skip), equivalent)}
                rows.append(row)
    finally:
        clock.close()
    print(f"  (CPU seconds counted by {clock.counted})")
    return rows


def table(rows: list[dict], groups: list[str]) -> str:
    """Per check group (`groups`, in order; the groups of no answer cell, such as 03's trained,
    left out): generated, killed (and of those, also elsewhere), killed only elsewhere, survived,
    equivalent, unexplained, CPU seconds."""
    head = (f"{'group':12} {'generated':>9} {'killed':>6} {'+else':>5} {'only else':>9} "
            f"{'survived':>8} {'equiv':>5} {'unexpl':>6} {'named':>7} {'cpu s':>7}")
    lines = [head]
    for group in [*groups, "all"]:
        mine = [row for row in rows if group in ("all", row["group"])]
        count = Counter(row["verdict"] for row in mine)
        also = sum(row["also_elsewhere"] for row in mine)
        survived = count["equivalent"] + count["unexplained"]
        cpu = sum(row["cpu_share"] for row in mine)
        asked = [row["named"] for row in mine if row.get("named") is not None]
        named = f"{sum(asked)}/{len(asked)}" if asked else "-"
        lines.append(f"{group:12} {len(mine):9d} {count['killed']:6d} {also:5d} "
                     f"{count['killed elsewhere']:9d} {survived:8d} {count['equivalent']:5d} "
                     f"{count['unexplained']:6d} {named:>7} {cpu:7.1f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True,
                        choices=["01-attention", "02-layers", "03-sorting"])
    parser.add_argument("--limit", type=int, default=None,
                        help="at most this many mutants of each answer cell (spread out)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/tfcourse-mutation"))
    parser.add_argument("--no-train", action="store_true",
                        help="skip the trained check for every mutant")
    parser.add_argument("--cells", default=None,
                        help="only these answer cells, comma-separated (positions-code,...)")
    parser.add_argument("--operators", choices=["cosmic-ray", "calls", "all"], default="cosmic-ray",
                        help="cosmic-ray's default operators, bench/call_operators.py's (calls "
                             "removed, arguments swapped, axes, slices, in place, constructors), "
                             "or both")
    parser.add_argument("--every", type=int, default=1,
                        help="grade every N-th mutant of the list only (a sample over the cells "
                             "and operators)")
    parser.add_argument("--ids", default=None,
                        help="only the mutants of these ids, comma-separated (survivors to grade "
                             "again, with the training check say)")
    parser.add_argument("--list", action="store_true", help="list the mutants, grade nothing")
    parser.add_argument("--unnamed", type=Path, default=None,
                        help="with --reclassify: write the killed mutants whose messages do not "
                             "name the cause, with those messages, as a markdown section there")
    parser.add_argument("--reclassify", action="store_true",
                        help="grade nothing: the last report's table again, with the equivalents "
                             "file as it is now (after reviewing survivors)")
    options = parser.parse_args()
    out = options.out / (options.assignment if options.operators == "cosmic-ray" else
                         f"{options.assignment}-{options.operators}")
    if options.reclassify:
        rows = reclassify(json.loads((out / "report.json").read_text()), options.assignment)
        if options.unnamed:
            options.unnamed.write_text(unnamed_markdown(options.assignment, rows))
        return report(out, rows, cell_groups(options.assignment), [])

    course = load_course(ROOT)
    every = mutants_of(course, options.assignment, options.operators)
    mutants = sample(every, options.limit)[::options.every]
    if options.cells:
        mutants = [mutant for mutant in mutants if mutant.cell in options.cells.split(",")]
    if options.ids:
        mutants = [mutant for mutant in mutants if mutant.id in options.ids.split(",")]
    stale = unmatched([entry for entry in load_equivalents()
                       if options.operators == "all" or
                       (entry["operator"] in KINDS) == (options.operators == "calls")], every)
    if options.list:
        for mutant in mutants:
            print(f"{mutant.id:48} {mutant.before!r} -> {mutant.after!r}")
        return 0
    print(f"{options.assignment}: {len(mutants)} mutants; grading into {out}", flush=True)
    rows = grade(course, mutants, out, options.jobs, not options.no_train)
    cells = {mutant.cell for mutant in mutants}
    return report(out, rows, cell_groups(options.assignment),
                  [entry for entry in stale if entry["cell"] in cells])


def reclassify(rows: list[dict], assignment: str) -> list[dict]:
    """A report's survivors classified again with the equivalents file as it is now, and its
    killed mutants' messages judged again with the cause words as they are now."""
    equivalent = {entry_key(entry) for entry in load_equivalents()}
    notes = {mutant.key: mutant.note for cell, code in solution_cells(assignment).items()
             for mutant in call_mutants(assignment, cell, cell.removesuffix("-code"), code)}
    for row in rows:
        key = row["cell"], row["operator"], row["before"], row["after"]
        row["note"] = notes.get(key, row.get("note", ""))
        row["named"] = names_cause(row["operator"], row["note"],
                                   {n: m for n, m in row["lost"].items()
                                    if n.split(".")[0] == row["group"]})
        if row["verdict"] in ("equivalent", "unexplained"):
            key = row["cell"], row["operator"], row["before"], row["after"]
            row["verdict"] = "equivalent" if key in equivalent else "unexplained"
    return rows


def unnamed_markdown(assignment: str, rows: list[dict]) -> str:
    """A markdown section: each killed mutant whose messages do not name its cause, with the
    messages of the checks it lost in its own group (each cut at 300 characters)."""
    unnamed = [row for row in rows if row["verdict"] == "killed" and row.get("named") is False]
    asked = sum(row.get("named") is not None for row in rows)
    lines = [f"## {assignment}: {len(unnamed)} of {asked} killed mutants unnamed", ""]
    for row in unnamed:
        where = f" (in `{row['note']}`)" if row.get("note") else ""
        lines += [f"- `{row['id']}`{where}: `{row['before']}` -> `{row['after']}`"]
        for number, message in row["lost"].items():
            if number.split(".")[0] == row["group"]:
                text = " ".join(message.split())[:300].replace("`", "'")
                lines.append(f"  - {number}: {text}")
    return "\n".join(lines) + "\n"


def cell_groups(assignment: str) -> list[str]:
    """The check groups of an assignment's answer cells, in the notebook's order."""
    return [cell.removesuffix("-code") for cell in solution_cells(assignment)]


def report(out: Path, rows: list[dict], groups: list[str], stale: list[dict]) -> int:
    """Write report.json, print the table, the survivors not explained, the mutants that lost
    points only in other groups and the stale entries of the equivalents file."""
    (out / "report.json").write_text(json.dumps(rows, indent=1))
    print(table(rows, groups))
    for row in rows:
        if row["verdict"] in ("unexplained", "killed elsewhere"):
            print(f"{row['verdict']:16} {row['id']}: {row['before']!r} -> {row['after']!r}"
                  + (f"  lost {', '.join(row['lost'])}" if row["lost"] else ""))
    for row in rows:
        if row["verdict"] == "killed" and row.get("named") is False:
            own = next(number for number in row["lost"] if number.split(".")[0] == row["group"])
            print(f"unnamed          {row['id']}: {row['before']!r} -> {row['after']!r}\n"
                  f"                 {own}: {row['lost'][own][:300]!r}")
    for entry in stale:
        print(f"stale equivalent entry (no mutant matches it): {entry['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
