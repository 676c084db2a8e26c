"""Drawing a decode step's two clocks as the batch grows: reading memory (the weights, and the KV cache) and
computing; where computing catches up with reading the weights, and whether it ever catches the cache."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from course_utils.viz.figures import FONT, SMALL, chars_across, wrap
from course_utils.viz.palette import MEMORY_COLORS, NEUTRAL_COLOR

COMPUTE_COLOR = MEMORY_COLORS["weights"]
MEMORY_COLOR = MEMORY_COLORS["gradients"]
WEIGHTS_COLOR = MEMORY_COLORS["optimizer"]


def decode_lines(points, *, crossover: float | None = None) -> dict:
    """The figure's data: each clock as a straight line through the first and last point (each grows linearly
    with the batch), over a batch range that shows the crossover.

    Returns:
        {"batch": x values, "compute", "memory", "weights": milliseconds at each, "memory_bound": the batch
        range (first, last) over which reading weights and cache takes longer than computing}.
    """
    if len(points) < 2:
        raise ValueError(f"draw_decode draws lines through two or more points. Received {len(points)}.")
    (b0, *first), (b1, *last) = points[0], points[-1]
    right = max(b1, 1.2 * crossover if crossover else 0) * 1.05
    batch = np.linspace(b0 / 2, right, 200)
    lines = {name: 1e3 * (a + (batch - b0) * (z - a) / (b1 - b0))
             for name, a, z in zip(("compute", "memory", "weights"), first, last)}
    longer = batch[lines["memory"] > lines["compute"]]
    return {"batch": batch, **lines,
            "memory_bound": (float(longer.min()), float(longer.max())) if len(longer) else None}


def draw_decode(points, *, crossover: float | None = None, title: str = "", x_label: str = "sequences in the batch"
                ) -> Figure:
    """Milliseconds of one decode step as the batch grows, on a log scale: computing, reading the weights and the
    KV cache, and reading the weights alone; the compiled programs marked, the batch where computing catches up
    with the weights drawn, the range where the step waits for memory shaded.

    Args:
        points: (batch, compute seconds, memory seconds with the cache, memory seconds of the weights alone),
            in order of batch (`serving.decode_points`).
        crossover: The batch where computing takes as long as reading the weights (`serving.catch_up`).
        title: The figure's title.
        x_label: What the x axis counts.
    """
    data = decode_lines(points, crossover=crossover)
    fig = Figure(figsize=(7.5, 5.0), layout="constrained")
    ax = fig.subplots()
    styles = {"memory": (MEMORY_COLOR, "-", "s", "reading weights and KV cache"),
              "weights": (WEIGHTS_COLOR, "--", "D", "reading the weights alone"),
              "compute": (COMPUTE_COLOR, "-", "o", "computing")}
    for name, (color, line, marker, label) in styles.items():
        column = ("compute", "memory", "weights").index(name) + 1
        ax.plot(data["batch"], data[name], line, color=color, label=label)
        ax.plot([p[0] for p in points], [p[column] * 1e3 for p in points], marker, color=color, linestyle="none")
    if crossover is not None:
        ax.axvline(crossover, color="black", linestyle=":", linewidth=1.2,
                   label=f"computing catches the weights at {crossover:,.0f}")
    if data["memory_bound"] is not None:
        ax.axvspan(*data["memory_bound"], color=NEUTRAL_COLOR, alpha=0.35, linewidth=0, zorder=0,
                   label="memory-bound: weights and cache take longer")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlim(0, data["batch"][-1])
    ax.set_xlabel(f"{x_label} (markers: the compiled programs)", fontsize=SMALL)
    ax.set_ylabel("milliseconds per step (estimated)", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    fig.legend(loc="outside lower center", ncols=2, fontsize=SMALL)
    if title:
        fig.suptitle(wrap(title, chars_across(7.1, FONT)), fontsize=FONT)
    return fig
