"""Is the regressor's training check always passed by a correct regressor? Train the reference on
many seeds, as the check trains a student's, and measure its error.

    .venv/bin/python bench/regression.py                 # as the check: stand-in layers, seeds 0-19
    .venv/bin/python bench/regression.py --real          # as the notebook: the real encoder layers
    .venv/bin/python bench/regression.py --set lr=1e-3 --set steps=600   # any RECIPE entry

For each seed, the reference EncoderRegressor (read from source/02-layers, as the grader reads it) is
built the way the `regressor.trained` check builds a student's: around the stand-ins of
autograder/standins.py in place of its encoder layers and positional_encoding. It is trained by the
notebook's own recipe cell (`fit_regressor`), then its mean absolute error is measured on 2,000 fresh
sequences, as the check measures it. The check passes below course.yaml's `parameters.regression.max_error`;
a seed above --margin (default: half the bar) is flagged, because a reference that only just clears
the bar would fail some correct students on an unlucky draw. With --real the stand-ins are left out:
the model and the numbers of the notebook's demo cell.

Each training run uses one torch thread and the CPU kernels the student's process gets
(course.yaml's sandbox.cpu_kernels; --kernels auto lets torch choose, for comparison); --workers runs
that many seeds at once (one per core).
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

from recipe import KERNELS, use_kernels            # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "02-layers"


def train_and_measure(seed: int, changes: dict, sequences: int, real: bool) -> dict:
    """Train the reference regressor with the recipe for one seed; its error on fresh sequences."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))                 # autograder/ (the stand-ins) is not installed
    from autograder import standins
    from autograder.test_layers import TRAINED_LAYER_SEED
    from tfcourse.course import load_course
    from tfcourse.submission.framework import swapped
    from tfcourse.submission.reference import recipe_source, reference

    course = load_course(ROOT)
    original = reference(course, ASSIGNMENT)       # the reference's classes read their globals here
    namespace = dict(original)                     # a copy: each run gets its own recipe
    exec(compile(recipe_source(course, ASSIGNMENT), "<recipe>", "exec"), namespace)
    recipe = {**namespace["RECIPE"], **changes}
    options = dict(vocab_size=namespace["VOCAB_SIZE"], d_model=recipe["d_model"],
                   num_heads=recipe["num_heads"], num_layers=recipe["num_layers"],
                   d_ff=recipe["d_ff"], dropout=recipe["dropout"], pad_id=namespace["PAD"])
    torch.manual_seed(seed)
    if real:
        model = original["EncoderRegressor"](**options)
    else:                                          # as the check builds it (test_layers.STAND_INS)
        with swapped(original, "EncoderLayer", standins.EncoderLayerFactory()), \
                swapped(original, "positional_encoding", standins.PositionalTable()):
            model = original["EncoderRegressor"](**options)
        for index in range(options["num_layers"]):
            model.layers[index] = standins.probe("quiet_encoder_layer", d_model=options["d_model"],
                                                 seed=TRAINED_LAYER_SEED + index)
    started, cpu_started = time.perf_counter(), time.process_time()
    losses = namespace["fit_regressor"](model, seed=seed, progress=False, **changes)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    # Drawn from a seed the training never saw, as the check draws its own after training.
    tokens, targets = namespace["mean_batch"](sequences,
                                              generator=torch.Generator().manual_seed(1_000_003 + seed))
    with torch.no_grad():
        error = float((model(tokens) - targets).abs().mean())
    baseline = float((targets - targets.mean()).abs().mean())
    return {"seed": seed, "error": error, "baseline": baseline, "seconds": seconds, "cpu": cpu,
            "loss": losses[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0 .. N-1 (default 20)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="change one entry of the notebook's RECIPE (repeatable)")
    parser.add_argument("--real", action="store_true",
                        help="the notebook's model (real encoder layers), not the check's")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--kernels", choices=KERNELS, default="course",
                        help="torch's CPU kernels (default: course.yaml's sandbox.cpu_kernels)")
    parser.add_argument("--margin", type=float, help="flag seeds above this error (default: "
                                                     "half of the check's bar)")
    options = parser.parse_args()
    changes = {name: ast.literal_eval(value)
               for name, value in (item.split("=", 1) for item in options.set)}

    kernels = use_kernels(options.kernels)
    import torch
    from tfcourse.course import load_course
    TRAINED_BAR = load_course(ROOT).parameter("regression").max_error
    margin = options.margin if options.margin is not None else TRAINED_BAR / 2
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {kernels} kernels "
          f"({os.environ.get('ATEN_CPU_CAPABILITY', 'torch chooses')}); "
          f"{options.workers} seeds at once, 1 thread each; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"recipe: {'the course recipe' if not changes else changes}; "
          f"{'real encoder layers (the notebook)' if options.real else 'stand-in layers (the check)'}"
          f"; {options.sequences} fresh sequences per seed; the check's bar {TRAINED_BAR}")
    started = time.perf_counter()
    with ProcessPoolExecutor(options.workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(train_and_measure, seed, changes, options.sequences, options.real)
                   for seed in range(options.seeds)]
        rows = []
        print(f"{'seed':>4}  {'error':>6}  {'baseline':>8}  {'wall s':>6}  {'cpu s':>6}  "
              f"{'final loss':>10}")
        for future in futures:
            row = future.result()
            rows.append(row)
            flag = "  <-- above the margin" if row["error"] > margin else ""
            print(f"{row['seed']:4d}  {row['error']:6.3f}  {row['baseline']:8.3f}  "
                  f"{row['seconds']:6.1f}  {row['cpu']:6.1f}  {row['loss']:10.4f}{flag}", flush=True)
    errors = [row["error"] for row in rows]
    seconds = [row["seconds"] for row in rows]
    cpu = [row["cpu"] for row in rows]
    print(f"error     min {min(errors):.3f}  mean {statistics.mean(errors):.3f}  "
          f"max {max(errors):.3f} (mean absolute error; always answering the mean: "
          f"{statistics.mean(row['baseline'] for row in rows):.3f})")
    print(f"training  wall min {min(seconds):.1f} s  mean {statistics.mean(seconds):.1f} s  "
          f"max {max(seconds):.1f} s;  cpu min {min(cpu):.1f} s  "
          f"mean {statistics.mean(cpu):.1f} s  max {max(cpu):.1f} s (one thread each)")
    print(f"wall      {time.perf_counter() - started:.0f} s for {len(rows)} seeds; "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    above = [row["seed"] for row in rows if row["error"] > margin]
    print(f"seeds above {margin:.3f}: {above or 'none'}")
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main())
