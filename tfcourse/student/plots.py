"""Pictures for the notebooks: attention heatmaps, masks, positions, schedules, losses, bars.

Each function draws one figure with labelled axes and returns it, so a notebook cell shows it and a
test can look at it. They take plain tensors or lists; nothing here computes a part of a solution.
Titles and labels are drawn in the notebook's language (`use_language`): a notebook's code is the
same in every edition, and its English labels are looked up in the catalog here.

`needs` is for the cells that draw them: wrapped in `with show.needs(...)`, a cell that calls a
function the student has not written yet says so in one line instead of a traceback.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import textwrap

import matplotlib.pyplot as plt
import torch

from ..i18n import phrase
from .checking import current_language, say


def _say(text: str, **values) -> str:
    """A title or label in the notebook's language (the course's catalog first: visible.py)."""
    if values:
        return say(text, values, current_language())
    return say(text, None, current_language()) if text else text


# -- demo cells: one line, not a traceback, while a stub is not written ---------------------------
def _library_folders() -> tuple[str, ...]:
    """Where installed code lives (torch, tfcourse, the standard library): a NotImplementedError
    raised there is a real error, not a stub the student has still to write."""
    paths = sysconfig.get_paths()
    folders = {paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders |= {os.path.dirname(os.path.dirname(__file__)), os.path.dirname(torch.__file__)}
    return tuple(os.path.realpath(folder) + os.sep for folder in folders if folder)


def _innermost(traceback):
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback.tb_frame


def _owner(frame) -> str | None:
    """The function or class whose code a frame runs: a stub's name, or its class's."""
    owner = frame.f_locals.get("self")
    if owner is not None and not isinstance(owner, type):
        return type(owner).__name__
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name).split(".")[0]
    return None if name.startswith("<") else name


def _tell(message: str) -> None:
    """One line, red in a notebook like a failed check's message."""
    line = f"✗ {message}"
    print(f"\x1b[1;31m{line}\x1b[0m" if "ipykernel" in sys.modules else line)


class needs:
    """`with show.needs("<stub>"):` around a demo cell's code.

    When a function the cell uses is still a stub (it raises NotImplementedError), the cell prints
    one line, in the notebook's language, naming it ("write <stub> first: this cell uses
    it"), and stops there without a traceback. So does a name the cell reads that an earlier
    cell has not defined, because that cell stopped the same way. Any other error is raised as
    usual, with its traceback: it says where the code went wrong.
    """

    def __init__(self, *names: str):
        self.names = names

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if kind is None:
            return False
        if issubclass(kind, NotImplementedError):
            frame = _innermost(traceback)
            if os.path.realpath(frame.f_code.co_filename).startswith(_library_folders()):
                return False
            name = _owner(frame) or ", ".join(self.names)
            if not name:
                return False
            _tell(_say("write {name} first: this cell uses it", name=name))
            return True
        if issubclass(kind, NameError) and traceback.tb_next is None and \
                getattr(error, "name", None):
            # raised by the cell's own code: a name an earlier cell did not get to define
            _tell(_say("{name} is not defined yet: it comes from a cell above that has not run "
                       "to the end", name=error.name))
            return True
        return False


# -- pictures ------------------------------------------------------------------------------------
def _labels(values, count):
    return [str(v) for v in values] if values is not None else [str(i) for i in range(count)]


def _heatmap(ax, matrix, x_labels, y_labels, title, cmap="viridis", vmin=None, vmax=None,
             width=None):
    """`matrix` drawn on `ax`; a title longer than `width` inches of the figure is wrapped."""
    image = ax.imshow(matrix.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    # Words and multi-character labels stand upright: side by side they run into each other.
    upright = any(len(label) > 1 for label in x_labels)
    ax.set_xticks(range(matrix.shape[1]), x_labels, rotation=90 if upright else 0)
    ax.set_yticks(range(matrix.shape[0]), y_labels)
    title = _say(title)
    if width is not None:               # about ten characters of a title to the inch
        title = textwrap.fill(title, max(16, int(10 * width)))
    ax.set_title(title)
    return image


def attention(weights, queries=None, keys=None, title=phrase("Attention weights"),
              xlabel=phrase("key position"), ylabel=phrase("query position")):
    """One attention map [Tq, Tk]: row i shows how query i spreads its weight over the keys."""
    weights = torch.as_tensor(weights).detach().float().cpu()
    width = 2.2 + 0.5 * weights.shape[1]
    fig, ax = plt.subplots(figsize=(width, 1.4 + 0.45 * weights.shape[0]), layout="constrained")
    image = _heatmap(ax, weights, _labels(keys, weights.shape[1]),
                     _labels(queries, weights.shape[0]), title, vmin=0, vmax=1, width=width - 1.0)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    fig.colorbar(image, ax=ax, label=_say("weight"))
    return fig


def heads(weights, queries=None, keys=None, title=phrase("Attention weights per head"),
          xlabel=phrase("key position"), ylabel=phrase("query position")):
    """A row of maps, one per head: weights [h, Tq, Tk]. The heads share their query axis, whose
    labels are written once, on the left."""
    weights = torch.as_tensor(weights).detach().float().cpu()
    count = weights.shape[0]
    fig, axes = plt.subplots(1, count, figsize=(0.6 + 2.6 * count, 3.4), squeeze=False,
                             sharey=True, layout="constrained")
    for head, ax in enumerate(axes[0]):
        image = _heatmap(ax, weights[head], _labels(keys, weights.shape[2]),
                         _labels(queries, weights.shape[1]), _say("head {head}", head=head),
                         vmin=0, vmax=1)
        ax.set_xlabel(_say(xlabel))
        if head == 0:
            ax.set_ylabel(_say(ylabel))
        else:
            ax.tick_params(axis="y", labelleft=False)
    fig.suptitle(_say(title))
    fig.colorbar(image, ax=list(axes[0]), label=_say("weight"), shrink=0.9)
    return fig


def mask(blocked, title=phrase("Mask (dark: blocked)"), xlabel=phrase("key position"),
         ylabel=phrase("query position")):
    """A boolean mask [Tq, Tk]: True (blocked) drawn dark."""
    blocked = torch.as_tensor(blocked).detach().cpu().bool()
    while blocked.dim() > 2:
        blocked = blocked[0]
    width = 1.6 + 0.45 * blocked.shape[1]
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.45 * blocked.shape[0]), layout="constrained")
    _heatmap(ax, blocked.float(), _labels(None, blocked.shape[1]), _labels(None, blocked.shape[0]),
             title, cmap="Greys", vmin=0, vmax=1, width=width - 0.3)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    return fig


def positions(encoding, title=phrase("Sinusoidal positional encoding")):
    """The encoding [T, d_model] as an image: one row per position, one column per dimension."""
    encoding = torch.as_tensor(encoding).detach().float().cpu()
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    image = ax.imshow(encoding.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xlabel(_say("dimension"))
    ax.set_ylabel(_say("position"))
    ax.set_title(_say(title))
    fig.colorbar(image, ax=ax, label=_say("value"))
    return fig


def curve(values, title, xlabel, ylabel, marks=None, floor=None, floor_label=phrase("floor")):
    """A line over steps; `floor` draws a dashed horizontal line (the loss floor, say), whose
    legend is `floor_label` followed by its value.

    A loss falls by orders of magnitude and then creeps along its floor, a few thousandths above
    it. So with a floor the values are drawn on a log scale, and an inset magnifies the second half
    of the run, where the gap between the curve and the floor can be seen."""
    values = [float(v) for v in values]
    steps = list(range(1, len(values) + 1))
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    ax.plot(steps, values, linewidth=1.2)
    for step in marks or []:
        ax.axvline(step, linestyle=":", color="grey", linewidth=1)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    ax.set_title(_say(title))
    ax.grid(alpha=0.3)
    if floor is not None:
        ax.axhline(floor, linestyle="--", color="black", linewidth=1,
                   label=f"{_say(floor_label)} {floor:.3f}")
        if floor > 0 and min(values) > 0 and max(values) > 4 * min(min(values), floor):
            _log_scale(ax)
        if len(values) >= 40:
            _tail(ax, steps, values, floor)
            ax.legend(loc="upper left", bbox_to_anchor=(0.3, 1.0))
        else:
            ax.legend()
    return fig


def _log_scale(ax):
    """A log axis labelled in plain numbers (0.5, 1, 2, 5, 10), not powers of ten."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20,
                                             50, 100]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _tail(ax, steps, values, floor):
    """An inset on the second half of the run, from just under the floor to all but the highest
    spikes there, with the floor drawn again."""
    start = len(values) // 2
    tail = values[start:]
    top = sorted(tail)[int(0.98 * (len(tail) - 1))]
    low = min(min(tail), floor)
    span = max(top - low, 1e-3)
    inset = ax.inset_axes([0.42, 0.3, 0.55, 0.5])
    inset.plot(steps[start:], tail, linewidth=0.9)
    inset.axhline(floor, linestyle="--", color="black", linewidth=1)
    inset.set_xlim(steps[start], steps[-1])
    inset.set_ylim(low - 0.2 * span, top + 0.1 * span)
    inset.tick_params(labelsize=8)
    inset.grid(alpha=0.3)
    inset.set_title(_say("steps {start} to {end}", start=steps[start], end=steps[-1]),
                    fontsize=8)
    return inset


def bars(labels, values, title, xlabel, ylabel, highlight=None):
    """Bars with their values written on top; `highlight` marks one label (the trained length)."""
    fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    colors = ["tab:orange" if label == highlight else "tab:blue" for label in labels]
    drawn = ax.bar([str(label) for label in labels], values, color=colors)
    ax.bar_label(drawn, labels=[f"{v:.1%}" for v in values], padding=2)
    ax.set_ylim(0, 1.15)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    ax.set_title(_say(title))
    return fig
