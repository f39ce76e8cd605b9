"""The notebooks' pictures, drawn as the notebooks draw them: no text runs into another, none is
cut off, and the loss curve shows the gap above the label-smoothing floor.

Each figure function of tfcourse/student/plots.py is called with data like the solutions' own
(the same shapes, labels and titles as the notebooks' demo cells), in both languages; the figure is
drawn and the boxes of its texts (tick labels, titles, axis labels, legends, bar labels) compared.
"""
import math

import matplotlib
import pytest
import torch

from tfcourse.student import show, use_language

matplotlib.use("Agg")

TOKENS = ["I", "saw", "a", "cat", "sat", "down"]
FLOOR = 0.514


def _attention(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).mul(2).softmax(-1)


def _loss_curve(steps=1000):
    """Like the sorting recipe's: from about 19 down to a few thousandths above the floor, noisy."""
    noise = torch.rand(steps, generator=torch.Generator().manual_seed(1))
    return [FLOOR + 18.5 * math.exp(-step / 12) + 0.6 * math.exp(-step / 150) * noise[step].item()
            + 0.001 + 0.004 * noise[step].item() for step in range(steps)]


def _recipe_rate(step):
    eq3 = min(step ** -0.5, step * 100 ** -1.5) / 100 ** -0.5
    return 3e-3 * eq3 * min(1.0, (1000 - step) / 200)


FIGURES = {
    "attention": lambda: show.attention(_attention(6, 6), TOKENS, TOKENS,
                                        title="Each query finds its partner's key"),
    "attention-pads": lambda: show.attention(_attention(6, 6),
                                             title="Head 0 of the second sequence: pads ignored"),
    "attention-cross": lambda: show.attention(_attention(7, 10),
                                              title="Cross-attention (head 0): 7 over 10",
                                              xlabel="source position", ylabel="target position"),
    "heads": lambda: show.heads(_attention(4, 6, 6), TOKENS, TOKENS,
                                title="Self-attention, one map per head"),
    "heads-cross": lambda: show.heads(_attention(4, 4, 7), TOKENS[:4],
                                      [f"m{i}" for i in range(7)],
                                      title="Cross-attention: 4 queries over 7 keys",
                                      xlabel="memory position"),
    "heads-trained": lambda: show.heads(_attention(4, 10, 10), list("1123567789"),
                                        list("5216377981"),
                                        title="The trained sorter's cross-attention",
                                        xlabel="source digit", ylabel="digit written"),
    "mask": lambda: show.mask(torch.ones(6, 6, dtype=torch.bool).triu(1), title="causal_mask(6)"),
    "mask-padding": lambda: show.mask(torch.tensor([False] * 3 + [True] * 3).expand(6, 6),
                                      title="padding_mask, second sequence (pads 3-5)"),
    "positions": lambda: show.positions(torch.randn(64, 32).tanh(),
                                        title="positional_encoding(64, 32)"),
    "schedule": lambda: show.curve([32 ** -0.5 * min(s ** -0.5, s * 100 ** -1.5)
                                    for s in range(1, 1001)],
                                   title="noam_rate(step, d_model=32, warmup=100)",
                                   xlabel="step", ylabel="rate", marks=[100]),
    "learning-rate": lambda: show.curve([_recipe_rate(s) for s in range(1, 1001)],
                                        title="The recipe's learning rate: eq. 3, rescaled, with a "
                                              "cool-down",
                                        xlabel="step", ylabel="learning rate", marks=[100, 800]),
    "loss": lambda: show.curve(_loss_curve(), title="Training loss and its floor", xlabel="step",
                               ylabel="loss", floor=FLOOR, floor_label="label-smoothing floor"),
    "bars": lambda: show.bars((6, 8, 10, 12, 14), [0.001, 0.126, 1.0, 0.183, 0.0],
                              title="Sorted exactly, by length (trained on 10)",
                              xlabel="sequence length", ylabel="share sorted", highlight=10),
}


def _all_axes(fig):
    found = []
    for ax in fig.axes:
        found += [ax, *ax.child_axes]
    return found


def _texts(fig):
    """(what, artist) for every piece of text the drawn figure shows."""
    found = []
    if fig._suptitle is not None:
        found.append(("suptitle", fig._suptitle))
    for n, ax in enumerate(_all_axes(fig)):
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():             # the ticks drawn, inside the view
                for label in (tick.label1, tick.label2):
                    found.append((f"axes {n} tick", label))
            found.append((f"axes {n} axis label", axis.label))
        for title in (ax.title, ax._left_title, ax._right_title):
            found.append((f"axes {n} title", title))
        found += [(f"axes {n} text", text) for text in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            found += [(f"axes {n} legend", text) for text in legend.get_texts()]
    return [(what, text) for what, text in found if text.get_visible() and text.get_text()]


def _overlap(a, b, slack=1.0):
    return (a.x0 + slack < b.x1 and b.x0 + slack < a.x1 and
            a.y0 + slack < b.y1 and b.y0 + slack < a.y1)


@pytest.fixture(params=["en", "es"])
def language(request):
    use_language(request.param)
    yield request.param
    use_language("en")


@pytest.mark.parametrize("name", list(FIGURES))
def test_no_text_runs_into_another_or_off_the_figure(name, language):
    import matplotlib.pyplot as plt

    fig = FIGURES[name]()
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [(what, text.get_text(), text.get_window_extent(renderer))
                 for what, text in _texts(fig)]
        assert boxes
        clashes = [f"{wa} {ta!r} and {wb} {tb!r}" for i, (wa, ta, a) in enumerate(boxes)
                   for wb, tb, b in boxes[i + 1:] if _overlap(a, b)]
        assert not clashes, "texts overlap:\n" + "\n".join(clashes)
        outside = fig.bbox.padded(1)
        cut = [f"{what} {text!r}" for what, text, box in boxes
               if box.x0 < outside.x0 or box.x1 > outside.x1 or box.y0 < outside.y0
               or box.y1 > outside.y1]
        assert not cut, "texts cut off at the figure's edge:\n" + "\n".join(cut)
        for ax in fig.axes:                 # a legend does not hide an inset, nor the other way
            legend = ax.get_legend()
            for inset in ax.child_axes:
                if legend is not None:
                    assert not _overlap(legend.get_window_extent(renderer),
                                        inset.get_tightbbox(renderer)), name
    finally:
        plt.close(fig)


def test_the_loss_curve_shows_the_gap_above_the_floor():
    """The whole curve falls from about 19 to a few thousandths above 0.514: on a linear axis that
    gap is under a pixel. Some axis (log-scaled, or an inset on the end of the run) has to show the
    end of the curve clearly apart from the floor."""
    import matplotlib.pyplot as plt

    values = _loss_curve()
    fig = FIGURES["loss"]()
    try:
        fig.canvas.draw()
        main = fig.axes[0]
        assert main.get_yscale() == "log" or main.child_axes
        end = sum(values[-100:]) / 100
        shown = []
        for ax in _all_axes(fig):
            low, high = ax.get_ylim()
            if not low < FLOOR < high or not low < end < high:
                continue
            scale = (math.log if ax.get_yscale() == "log" else (lambda v: v))
            shown.append((scale(end) - scale(FLOOR)) / (scale(high) - scale(low)))
        assert shown and max(shown) > 0.04, f"the gap is {shown} of an axis' height"
    finally:
        plt.close(fig)
