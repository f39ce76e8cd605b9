"""Executed notebooks made repeatable: what a run shows that depends on the clock is taken out.

`tfcourse build` executes the solutions so that they show their plots and printed results. A
progress bar, though, writes its line again every second (a `\\r` and the bar each time, some 200
outputs in a training cell), each with the time elapsed, the time left and the rate: without this
step every build changed `solutions/` in those timings only. `clean_outputs` keeps what a reader of
the solved notebook would see once the cell has finished, the bar's last state, without its
timings, and drops the execution timestamps a kernel may write into cell metadata.
"""
from __future__ import annotations

import re

# tqdm's right part: " [00:36<00:57,  8.66it/s]", " [1:02:03, 2.08s/it]", " [00:00<?, ?it/s]".
TQDM_TIMING = re.compile(r"\s*\[(?:\d+:)?\d+:\d\d(?:<[^,\]]*)?(?:,[^\]]*)?\]\s*$")


def settle(text: str) -> str:
    """Text as Jupyter shows it: on each line, a carriage return wipes what came before it
    (progress bars redraw themselves this way), so only what follows the last one remains."""
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))


def untimed(text: str) -> str:
    """Each line without a progress bar's timings."""
    return "\n".join(TQDM_TIMING.sub("", line) for line in text.split("\n"))


def _streams_merged(outputs: list) -> list:
    merged = []
    for output in outputs:
        if output.get("output_type") == "stream" and merged and \
                merged[-1].get("output_type") == "stream" and \
                merged[-1].get("name") == output.get("name"):
            merged[-1]["text"] = merged[-1]["text"] + output.get("text", "")
        else:
            merged.append(output)
    return merged


def clean_outputs(nb):
    """The executed notebook `nb`, changed in place and returned: in each code cell, consecutive
    stream outputs merged into one, carriage returns settled, progress-bar timings removed, empty
    streams dropped, and no `execution` timestamps in the cell's metadata."""
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        cell.get("metadata", {}).pop("execution", None)
        outputs = _streams_merged(list(cell.get("outputs", [])))
        for output in outputs:
            if output.get("output_type") == "stream":
                output["text"] = untimed(settle(output.get("text", "")))
        cell["outputs"] = [output for output in outputs if output.get("output_type") != "stream"
                           or output["text"].strip()]
    return nb
