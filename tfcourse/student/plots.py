"""Pictures for the notebooks: attention heatmaps, masks, positions, schedules, losses, bars.

Each function draws one figure with labelled axes and returns it, so a notebook cell shows it and a
test can look at it. They take plain tensors or lists; nothing here computes a part of a solution.
Titles and labels are drawn in the notebook's language (`use_language`): a notebook's code is the
same in every edition, and its English labels are looked up in the catalog here.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ..i18n import phrase, render, translate
from .checks import current_language


def _say(text: str, **values) -> str:
    """A title or label in the notebook's language."""
    if values:
        return render(text, values, current_language())
    return translate(text, current_language()) if text else text


def _labels(values, count):
    return [str(v) for v in values] if values is not None else [str(i) for i in range(count)]


def _heatmap(ax, matrix, x_labels, y_labels, title, cmap="viridis", vmin=None, vmax=None):
    image = ax.imshow(matrix.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(matrix.shape[1]), x_labels)
    ax.set_yticks(range(matrix.shape[0]), y_labels)
    ax.set_title(_say(title))
    return image


def attention(weights, queries=None, keys=None, title=phrase("Attention weights"),
              xlabel=phrase("key position"), ylabel=phrase("query position")):
    """One attention map [Tq, Tk]: row i shows how query i spreads its weight over the keys."""
    weights = torch.as_tensor(weights).detach().float().cpu()
    fig, ax = plt.subplots(figsize=(1.2 + 0.5 * weights.shape[1], 1.0 + 0.45 * weights.shape[0]))
    image = _heatmap(ax, weights, _labels(keys, weights.shape[1]),
                     _labels(queries, weights.shape[0]), title, vmin=0, vmax=1)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    fig.colorbar(image, ax=ax, label=_say("weight"))
    fig.tight_layout()
    return fig


def heads(weights, queries=None, keys=None, title=phrase("Attention weights per head"),
          xlabel=phrase("key position"), ylabel=phrase("query position")):
    """A row of maps, one per head: weights [h, Tq, Tk]."""
    weights = torch.as_tensor(weights).detach().float().cpu()
    count = weights.shape[0]
    fig, axes = plt.subplots(1, count, figsize=(3.0 * count, 3.0), squeeze=False)
    for head, ax in enumerate(axes[0]):
        image = _heatmap(ax, weights[head], _labels(keys, weights.shape[2]),
                         _labels(queries, weights.shape[1]), _say("head {head}", head=head),
                         vmin=0, vmax=1)
        ax.set_xlabel(_say(xlabel))
        if head == 0:
            ax.set_ylabel(_say(ylabel))
    fig.suptitle(_say(title))
    fig.colorbar(image, ax=list(axes[0]), label=_say("weight"))
    return fig


def mask(blocked, title=phrase("Mask (dark: blocked)"), xlabel=phrase("key position"),
         ylabel=phrase("query position")):
    """A boolean mask [Tq, Tk]: True (blocked) drawn dark."""
    blocked = torch.as_tensor(blocked).detach().cpu().bool()
    while blocked.dim() > 2:
        blocked = blocked[0]
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * blocked.shape[1], 1.0 + 0.45 * blocked.shape[0]))
    _heatmap(ax, blocked.float(), _labels(None, blocked.shape[1]), _labels(None, blocked.shape[0]),
             title, cmap="Greys", vmin=0, vmax=1)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    fig.tight_layout()
    return fig


def positions(encoding, title=phrase("Sinusoidal positional encoding")):
    """The encoding [T, d_model] as an image: one row per position, one column per dimension."""
    encoding = torch.as_tensor(encoding).detach().float().cpu()
    fig, ax = plt.subplots(figsize=(7, 4))
    image = ax.imshow(encoding.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xlabel(_say("dimension"))
    ax.set_ylabel(_say("position"))
    ax.set_title(_say(title))
    fig.colorbar(image, ax=ax, label=_say("value"))
    fig.tight_layout()
    return fig


def curve(values, title, xlabel, ylabel, marks=None, floor=None, floor_label=phrase("floor")):
    """A line over steps; `floor` draws a dashed horizontal line (the loss floor, say), whose
    legend is `floor_label` followed by its value."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(range(1, len(values) + 1), values, linewidth=1.2)
    if floor is not None:
        ax.axhline(floor, linestyle="--", color="black", linewidth=1,
                   label=f"{_say(floor_label)} {floor:.3f}")
        ax.legend()
    for step in marks or []:
        ax.axvline(step, linestyle=":", color="grey", linewidth=1)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    ax.set_title(_say(title))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def bars(labels, values, title, xlabel, ylabel, highlight=None):
    """Bars with their values written on top; `highlight` marks one label (the trained length)."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    colors = ["tab:orange" if label == highlight else "tab:blue" for label in labels]
    drawn = ax.bar([str(label) for label in labels], values, color=colors)
    ax.bar_label(drawn, labels=[f"{v:.1%}" for v in values], padding=2)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel(_say(xlabel))
    ax.set_ylabel(_say(ylabel))
    ax.set_title(_say(title))
    fig.tight_layout()
    return fig
