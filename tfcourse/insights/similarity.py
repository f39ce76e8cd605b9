"""`tfcourse similarity submitted/ --out similarity/`: pairs of submissions whose code is alike.

What is compared is the code each student wrote: their answer cells and the cells they added, not
the released notebook's code (its stubs' signatures and docstrings are every student's, so their
fingerprints are left out as boilerplate). Each assignment's submissions are compared with each
other only, each with its own assignment's released code left out. Notebooks are read as data,
never run.

Fingerprints are copydetect's (a maintained implementation of winnowing, the method of MOSS): the
code is tokenized, names become one letter and comments and spacing go, so renamed variables,
changed comments and moved functions or cells do not hide a copy. Each pair's similarity is the
share of each side's code that the other contains. Pairs are only compared in full when they share
enough fingerprints, found through an index, so a class of a thousand costs seconds, not the
half-million comparisons of every pair.

A high similarity is a reason to read two submissions side by side, nothing more: short functions
written from the same lecture converge on the same few lines, and the pages say so.
"""
from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tfcourse import notebook
from tfcourse.course import Course
from tfcourse.batch.results import write_atomically
from tfcourse.pages import markup, render as render_page

K = 25                  # tokens in a fingerprint's k-gram (copydetect's noise threshold)
WINDOW = 4              # winnowing window: a match of K + WINDOW - 1 tokens is always found
THRESHOLD = 0.6         # a pair is listed when each side shares at least this much with the other
MIN_SHARED = 5          # fingerprints two documents must share to be compared in full
MIN_TOKENS = 2 * K      # tokens of its own a submission needs to be compared at all
# A pair is compared in full only when the fingerprints it shares reach this share of the threshold
# (of the larger side's fingerprints: a pair's similarity is its smaller share). bench/similarity.py
# found every disguised copy sharing 97% or more.
PREFILTER = 0.7
PAGES = 200             # pairs with a page of their own; pairs.csv lists them all
CHUNK = 4_000_000       # shared fingerprints counted at once (32 MB of pair numbers)


@dataclass
class Document:
    """One submission's (or one known source's) code, fingerprinted."""
    name: str
    code: str
    fingerprint: object     # copydetect.CodeFingerprint
    known: bool = False     # a known source the instructor supplied, not a student


def _fingerprint(code: str, boilerplate=None):
    from copydetect import CodeFingerprint

    return CodeFingerprint("code.py", K, WINDOW, boilerplate=boilerplate, language="python",
                           fp=io.StringIO(code))


def written_code(nb: dict, released: set[str]) -> str:
    """The code a student wrote in a notebook: its answer cells and any code cell that is not
    one of the released notebook's, joined in order (cells split or merged give the same text)."""
    parts = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code = notebook.text(cell)
        if notebook.is_solution(cell) or (notebook.grade_id(cell) is None and
                                          code.strip() not in released):
            parts.append(code)
    return "\n".join(parts) + "\n"


def released_code(course: Course, assignment: str) -> tuple[str, set[str]]:
    """The released notebooks' code: as one text, all of its cells and then its answer cells
    joined as a student's are (so that no fingerprint of it, not even one across two cells, counts
    as a student's), and each cell's text (a student's copy of a released cell is not theirs)."""
    cells, answers = [], []
    for name in course.assignment(assignment).notebooks:
        path = course.release_dir / assignment / name
        if path.is_file():
            nb = notebook.read(path)
            cells += [notebook.text(cell) for cell in nb.cells if cell.cell_type == "code"]
            answers.append(written_code(nb, set()))
    return "\n".join(cells) + "\n" + "".join(answers), {cell.strip() for cell in cells}


def boilerplate_hashes(code: str):
    """Every k-gram of `code` (not only those winnowing keeps), as copydetect hashes them."""
    import numpy
    from copydetect.utils import filter_code, hashed_kgrams

    filtered, _ = filter_code(code, "code.py", "python")
    return numpy.unique(hashed_kgrams(filtered, K)) if len(filtered) >= K else None


def read_class(course: Course, paths: list[Path], assignment: str | None
               ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """(assignment -> {submission name -> the code its student wrote}, lines about what could not
    be read). Submissions are found as `tfcourse grade` finds them, each on its own: a notebook
    not named as the course's (`alice.ipynb`) is the assignment whose cells it has, and with
    `assignment` a submission of another one is not compared (nor read as this one's)."""
    from tfcourse.batch.survey import expand
    from tfcourse.submission.finding import find_notebooks
    from tfcourse.submission.notebooks import read_notebook

    codes: dict[str, dict[str, str]] = {}
    problems = []
    released: dict[str, set[str]] = {}
    for name, path in expand(course, list(paths)):
        found, candidates = find_notebooks(course, path, None, by_content=True)
        if assignment is not None and found not in (None, assignment):
            problems.append(f"{name}: a submission of {found}, not {assignment}")
            continue
        if found is None and assignment is not None:    # one notebook, named as no assignment's
            found, candidates = find_notebooks(course, path, assignment)
        if found is None:
            problems.append(f"{name}: no notebook of the course")
            continue
        if found not in released:
            released[found] = released_code(course, found)[1]
        texts = []
        for notebook_name in course.assignment(found).notebooks:
            if notebook_name not in candidates:
                continue
            nb, notes = read_notebook(candidates[notebook_name], course.limit("notebook_mb"))
            if nb is None:
                problems.append(f"{name}: {notebook_name} could not be read")
                continue
            texts.append(written_code(nb, released[found]))
        codes.setdefault(found, {})[name] = "".join(texts)
    return codes, problems


def known_sources(folder: Path | None) -> dict[str, str]:
    """Known sources the instructor supplies (public implementations): .py files and notebooks
    (all their code cells), by file name."""
    found = {}
    if folder is None:
        return found
    for path in sorted(Path(folder).rglob("*")):
        if path.suffix == ".py" and path.is_file():
            found[path.name] = path.read_text(encoding="utf-8", errors="replace")
        elif path.suffix == ".ipynb" and path.is_file():
            nb = notebook.read(path)
            found[path.name] = "\n".join(notebook.text(cell) for cell in nb.cells
                                         if cell.cell_type == "code")
    return found


@dataclass(frozen=True)
class Pair:
    first: str
    second: str
    share_first: float      # how much of the first's code the second contains
    share_second: float
    slices: tuple           # copydetect's copied slices of each side

    @property
    def similarity(self) -> float:
        return min(self.share_first, self.share_second)


def shared_fingerprints(documents: list[Document]) -> dict[tuple[int, int], int]:
    """(i, j) -> how many fingerprints documents i < j share, for every pair that shares one and
    is not two known sources: counted through an index of who holds each fingerprint, with numpy,
    so that a class of a thousand is not half a million comparisons in Python."""
    import numpy

    holders = defaultdict(list)
    for number, document in enumerate(documents):
        for value in document.fingerprint.hashes:
            holders[value].append(number)
    size = len(documents)
    pairs = numpy.zeros(0, dtype=numpy.int64)       # i * size + j for each pair sharing one
    counts = numpy.zeros(0, dtype=numpy.int64)
    codes, pending = [], 0

    def merge(pairs, counts, codes):    # in chunks: memory grows with the pairs, not the shares
        merged, inverse = numpy.unique(numpy.concatenate([pairs, *codes]), return_inverse=True)
        weights = numpy.concatenate([counts, numpy.ones(sum(map(len, codes)), numpy.int64)])
        return merged, numpy.bincount(inverse.ravel(), weights=weights,
                                      minlength=len(merged)).astype(numpy.int64)
    for held in holders.values():
        if len(held) > 1:
            held = numpy.array(held, dtype=numpy.int64)
            first, second = numpy.triu_indices(len(held), 1)
            codes.append(held[first] * size + held[second])
            pending += len(codes[-1])
            if pending > CHUNK:
                pairs, counts = merge(pairs, counts, codes)
                codes, pending = [], 0
    if codes:
        pairs, counts = merge(pairs, counts, codes)
    if not len(pairs):
        return {}
    known = numpy.array([document.known for document in documents])
    keep = ~(known[pairs // size] & known[pairs % size])
    return {(int(code // size), int(code % size)): int(count)
            for code, count in zip(pairs[keep], counts[keep])}


def compare(documents: list[Document], threshold: float = THRESHOLD) -> list[Pair]:
    """Every pair of documents (students with students, students with known sources) whose
    similarity (see Pair) is at least `threshold`, the most similar first. Only pairs that share
    enough fingerprints to reach it (with a margin: winnowing samples the code) are compared in
    full."""
    from copydetect.detector import compare_files

    pairs = []
    for (first, second), count in shared_fingerprints(documents).items():
        a, b = documents[first], documents[second]
        most = max(len(a.fingerprint.hashes), len(b.fingerprint.hashes))
        if count < MIN_SHARED or count < PREFILTER * threshold * most:
            continue
        _, (share_a, share_b), slices = compare_files(a.fingerprint, b.fingerprint)
        pair = Pair(a.name, b.name, float(share_a), float(share_b), slices)
        if pair.similarity >= threshold:
            pairs.append(pair)
    return sorted(pairs, key=lambda pair: (-pair.similarity, pair.first, pair.second))


def clusters(pairs: list[Pair], smallest: int = 3) -> list[list[str]]:
    """Groups of `smallest` or more submissions linked by listed pairs (known sources excluded
    from the linking: two students each close to one public implementation are no group)."""
    parent: dict[str, str] = {}

    def root(name):
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name
    for pair in pairs:
        parent[root(pair.first)] = root(pair.second)
    groups = defaultdict(list)
    for name in parent:
        groups[root(name)].append(name)
    return sorted((sorted(group) for group in groups.values() if len(group) >= smallest),
                  key=lambda group: (-len(group), group))


def fingerprint_all(codes: dict[str, str], known: dict[str, str], boilerplate: str
                    ) -> list[Document]:
    """The documents, with the released code's fingerprints left out; a submission with less
    than MIN_TOKENS tokens of its own is not compared (nothing there to be alike)."""
    base = boilerplate_hashes(boilerplate) if boilerplate.strip() else None
    documents = [Document(name, code, _fingerprint(code, base)) for name, code in codes.items()]
    documents += [Document(f"known: {name}", code, _fingerprint(code, base), known=True)
                  for name, code in known.items()]
    return documents


def too_small(document: Document) -> bool:
    return document.fingerprint.token_coverage < MIN_TOKENS


# -- pages -----------------------------------------------------------------------------------------
ABOUT = ("Similarity says how much of two submissions' code is the same once names, comments and "
         "spacing are set aside, and the released notebook's code is left out. It does not say "
         "that anyone copied: short functions written from the same lecture converge on the same "
         "few lines, and students may work together as the course allows. Read each pair side by "
         "side before you conclude anything.")


def _highlighted(code: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    if len(slices) == 0 or len(slices[0]) == 0:
        return html.escape(code)
    text, _ = highlight_overlap(code, slices, "<mark>", "</mark>", escape_html=True)
    return text


def pair_page(pair: Pair, documents: dict[str, Document]) -> str:
    left, right = documents[pair.first], documents[pair.second]
    return render_page(
        "similarity-pair.html", pair=pair, about=ABOUT,
        sides=[{"name": doc.name, "share": share, "code": markup(_highlighted(doc.code, slices))}
               for doc, share, slices in ((left, pair.share_first, pair.slices[0]),
                                          (right, pair.share_second, pair.slices[1]))])


def write_pages(pairs: list[Pair], groups: list[list[str]], documents: list[Document], out: Path,
                threshold: float, problems: list[str]) -> Path:
    by_name = {doc.name: doc for doc in documents}
    listed = []
    for number, pair in enumerate(pairs[:PAGES], 1):
        page = f"pair-{number:04d}.html"
        write_atomically(Path(out) / page, pair_page(pair, by_name))
        listed.append({"number": number, "page": page, "pair": pair})
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["first", "second", "similarity", "share_first", "share_second"])
    writer.writerows([pair.first, pair.second, f"{pair.similarity:.4f}",
                      f"{pair.share_first:.4f}", f"{pair.share_second:.4f}"] for pair in pairs)
    write_atomically(Path(out) / "pairs.csv", text.getvalue())
    write_atomically(Path(out) / "index.html", render_page(
        "similarity-index.html", about=ABOUT, students=sum(not doc.known for doc in documents),
        pairs=pairs, listed=listed, threshold=threshold, groups=groups, problems=problems))
    return Path(out) / "index.html"


def run(course: Course, paths: list[Path], out: Path, assignment: str | None = None,
        known: Path | None = None, threshold: float = THRESHOLD
        ) -> tuple[Path, list[Pair], list[str]]:
    """(the index page, the pairs listed, lines about what was not read or not compared). Each
    assignment's submissions are compared with each other and the known sources only, with that
    assignment's released code left out: two students who handed in an assignment as released
    share its stubs and the code it gives, which is neither's."""
    by_assignment, problems = read_class(course, paths, assignment)
    sources = known_sources(known)
    documents, pairs = [], []
    for found, codes in sorted(by_assignment.items()):
        mine = fingerprint_all(codes, sources, released_code(course, found)[0])
        problems += [f"{doc.name}: too little code of its own (the released "
                     f"notebook's code does not count)" for doc in mine if too_small(doc)]
        mine = [doc for doc in mine if not too_small(doc)]
        pairs += compare(mine, threshold)
        documents += [doc for doc in mine if not doc.known]
    documents += fingerprint_all({}, sources, "")       # the known sources once, as they are
    problems = list(dict.fromkeys(problems))            # a known source too small: said once
    pairs.sort(key=lambda pair: (-pair.similarity, pair.first, pair.second))
    groups = clusters([pair for pair in pairs if not pair.first.startswith("known: ")
                       and not pair.second.startswith("known: ")])
    page = write_pages(pairs, groups, documents, out, threshold, problems)
    return page, pairs, problems
