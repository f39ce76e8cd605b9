"""The import graph among tfcourse's modules, printed: each module's level, and any cycle.

    python bench/imports.py [--packages]

The graph itself is tests/import_graph.py's (tests/test_imports.py keeps it free of cycles); see
its docstring for what a level is and what --packages draws.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests")]

from import_graph import cycles, graph, levels  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", action="store_true")
    options = parser.parse_args()
    edges = graph(options.packages)
    by_level: dict[int, list[str]] = {}
    for node, level in levels(edges).items():
        by_level.setdefault(level, []).append(node)
    for level in sorted(by_level):
        print(f"level {level}: {', '.join(sorted(by_level[level]))}")
    found = cycles(edges)
    for cycle in found:
        print("cycle:", " <-> ".join(cycle))
    print(f"{len(edges)} nodes on {len(by_level)} levels, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
