"""Which parts of the sorting recipe does the task need? Train the reference with one part changed.

    .venv/bin/python bench/ablations.py                       # every change below, seeds 0-2
    .venv/bin/python bench/ablations.py --only no-mask --seeds 1

Each run trains the reference Transformer (read from source/03-sorting, as the grader reads it)
with the sorting notebook's own recipe cell, one torch thread, the course's CPU kernels, and
scores it on the 1,000 sequences of the notebook's section 6 (seed 123): the loss of the last
step, the share of sequences sorted by greedy decoding, and under teacher forcing. The changes:

    recipe      the course's recipe, for comparison
    no-sqrt     embed() without the factor sqrt(d_model)
    no-mask     the decoder's self-attention without its causal mask (what 03's "Break it on
                purpose" does: causal_mask replaced by a mask that blocks nothing)
    peak-0.018  eq. 3's own peak for d_model 32 and warm-up 100, 0.018, instead of 0.003
    no-warmup   peak 0.018 from step 1 (warm-up 1), falling as eq. 3 does
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recipe import ROOT, ASSIGNMENT, use_kernels  # noqa: E402

CHANGES = {"recipe": {}, "no-sqrt": {}, "no-mask": {}, "peak-0.018": {"lr": 0.018},
           "no-warmup": {"lr": 0.018, "warmup": 1}}


def namespace_for(name: str) -> dict:
    """A fresh namespace with the reference's code, the change `name` and the recipe cell."""
    import math
    import torch
    from tfcourse.course import load_course
    from tfcourse.submission.reference import assignment_source, recipe_source, reference

    course = load_course(ROOT)
    reference(course, ASSIGNMENT)                          # installs the modules it imports
    namespace = {"__name__": "ablation"}
    exec(compile(assignment_source(course, ASSIGNMENT).solution_code, "<reference>", "exec"),
         namespace)
    if name == "no-mask":
        namespace["causal_mask"] = lambda T: torch.zeros(T, T, dtype=torch.bool)
    if name == "no-sqrt":
        class Unscaled(namespace["Transformer"]):
            def embed(self, tokens):
                return self.dropout(self.embedding(tokens) + self.positions[: tokens.shape[1]])
        namespace["Transformer"] = Unscaled
    assert math                                            # (the reference imports its own)
    exec(compile(recipe_source(course, ASSIGNMENT), "<recipe>", "exec"), namespace)
    return namespace


def train_and_score(name: str, seed: int) -> dict:
    import torch

    torch.set_num_threads(1)
    namespace = namespace_for(name)
    started = time.process_time()
    model, losses = namespace["train_sorter"](seed=seed, progress=False, **CHANGES[name])
    cpu = time.process_time() - started
    x, y = namespace["sorting_batch"](1000, generator=torch.Generator().manual_seed(123))
    bos = namespace["BOS"]
    with torch.no_grad():
        greedy = namespace["greedy_decode"](model, x, bos)
        forced = model(x, namespace["shift_right"](y, bos)).argmax(-1)
    return {"name": name, "seed": seed, "loss": losses[-1], "cpu": cpu,
            "greedy": float((greedy == y).all(1).float().mean()),
            "forced": float((forced == y).all(1).float().mean()),
            "forced_digits": float((forced == y).float().mean())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=list(CHANGES),
                        help="run only this change (repeatable)")
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds, from 0 (default 3)")
    options = parser.parse_args()
    use_kernels("course")
    print(f"{'change':>10}  {'seed':>4}  {'loss':>6}  {'greedy':>7}  {'forced':>7}  "
          f"{'digits':>7}  {'cpu s':>5}")
    for name in options.only or list(CHANGES):
        for seed in range(options.seeds):
            row = train_and_score(name, seed)
            print(f"{name:>10}  {seed:4d}  {row['loss']:6.3f}  {row['greedy']:7.1%}  "
                  f"{row['forced']:7.1%}  {row['forced_digits']:7.1%}  {row['cpu']:5.1f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
