"""Is the training recipe always right? Train the reference solution on many seeds and score it.

    .venv/bin/python bench/recipe.py                   # the course's recipe, seeds 0-19
    .venv/bin/python bench/recipe.py --steps 800       # a cheaper candidate, for comparison
    .venv/bin/python bench/recipe.py --set lr=3e-3 --set batch_size=128   # any RECIPE entry

For each seed, the reference Transformer (read from source/03-sorting, as the grader reads it) is
trained by the sorting notebook's own recipe cell, then greedy decoding is scored on 1,000 fresh
length-10 sequences, exactly as the `trained.accuracy` check scores a student's model. The check
passes above course.yaml's threshold (99%); a seed at or below --margin (99.2%) is flagged, because
a reference that only just clears the bar would fail some correct students on an unlucky draw.

Each training run uses one torch thread and the CPU kernels the student's process gets
(course.yaml's sandbox.cpu_kernels; --kernels auto lets torch choose, for comparison); --workers
runs that many seeds at once (one per core).
Training is reported as wall and CPU seconds: on a shared machine the CPU seconds are the figure to
trust (with one thread, they are what the wall time would be on an idle core).
"""
from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "03-sorting"


def train_and_score(seed: int, changes: dict, sequences: int, length: int) -> dict:
    """Train the reference with the recipe for one seed; its greedy accuracy on fresh sequences."""
    import torch

    torch.set_num_threads(1)
    from tfcourse.submission.reference import recipe_source, reference
    from tfcourse.course import load_course

    course = load_course(ROOT)
    namespace = dict(reference(course, ASSIGNMENT))       # a copy: each run gets its own recipe
    exec(compile(recipe_source(course, ASSIGNMENT), "<recipe>", "exec"), namespace)
    started, cpu_started = time.perf_counter(), time.process_time()
    model, losses = namespace["train_sorter"](seed=seed, progress=False, **changes)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    # Drawn from a seed the training never saw, as the check draws its own after training.
    generator = torch.Generator().manual_seed(1_000_003 + seed)
    src = torch.randint(0, 10, (sequences, length), generator=generator)
    with torch.no_grad():
        predicted = namespace["greedy_decode"](model, src, namespace["BOS"])
    accuracy = float((predicted == src.sort(dim=1).values).all(1).float().mean())
    return {"seed": seed, "accuracy": accuracy, "seconds": seconds, "cpu": cpu, "loss": losses[-1]}


KERNELS = ["course", "avx2", "auto"]


def use_kernels(choice: str) -> str:
    """Give this process and the seeds' workers torch's CPU kernels `choice` (one of KERNELS;
    "course": course.yaml's sandbox.cpu_kernels, as the student's process gets them), before torch
    is imported; the kernels' name."""
    from tfcourse.course import load_course
    from tfcourse.sandbox.launch import kernel_environment

    kernels = load_course(ROOT).sandbox.cpu_kernels if choice == "course" else choice
    os.environ.pop("ATEN_CPU_CAPABILITY", None)
    os.environ.update(kernel_environment(kernels))      # the workers inherit it
    return kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (default 20)")
    parser.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change one entry of the notebook's RECIPE (repeatable)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--kernels", choices=KERNELS, default="course",
                        help="torch's CPU kernels (default: course.yaml's sandbox.cpu_kernels)")
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--margin", type=float, default=0.992,
                        help="flag seeds at or below this accuracy")
    options = parser.parse_args()
    changes = {name: ast.literal_eval(value)
               for name, value in (item.split("=", 1) for item in options.set)}
    if options.steps:
        changes["steps"] = options.steps

    kernels = use_kernels(options.kernels)
    import torch
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {kernels} kernels "
          f"({os.environ.get('ATEN_CPU_CAPABILITY', 'torch chooses')}); "
          f"{options.workers} seeds at once, 1 thread each; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"recipe: {'the course recipe' if not changes else changes}; "
          f"{options.sequences} fresh length-10 sequences per seed")
    started = time.perf_counter()
    with ProcessPoolExecutor(options.workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(train_and_score, seed, changes, options.sequences, 10)
                   for seed in range(options.first, options.first + options.seeds)]
        rows = []
        print(f"{'seed':>4}  {'accuracy':>8}  {'wall s':>6}  {'cpu s':>6}  {'final loss':>10}")
        for future in futures:
            row = future.result()
            rows.append(row)
            flag = "  <-- at or below the margin" if row["accuracy"] <= options.margin else ""
            print(f"{row['seed']:4d}  {row['accuracy']:8.1%}  {row['seconds']:6.1f}  "
                  f"{row['cpu']:6.1f}  {row['loss']:10.4f}{flag}", flush=True)
    accuracies = [row["accuracy"] for row in rows]
    seconds = [row["seconds"] for row in rows]
    cpu = [row["cpu"] for row in rows]
    print(f"accuracy  min {min(accuracies):.1%}  mean {statistics.mean(accuracies):.2%}  "
          f"max {max(accuracies):.1%}")
    print(f"training  wall min {min(seconds):.1f} s  mean {statistics.mean(seconds):.1f} s  "
          f"max {max(seconds):.1f} s;  cpu min {min(cpu):.1f} s  "
          f"mean {statistics.mean(cpu):.1f} s  max {max(cpu):.1f} s (one thread each)")
    print(f"wall      {time.perf_counter() - started:.0f} s for {len(rows)} seeds; "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    below = [row["seed"] for row in rows if row["accuracy"] <= options.margin]
    print(f"seeds at or below {options.margin:.1%}: {below or 'none'}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
