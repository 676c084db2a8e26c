"""Drawing a decode step's two clocks as the batch grows: reading memory (the weights, and the KV cache) and
computing; where computing catches up with reading the weights, and that the cache can keep it from ever
catching up."""

from __future__ import annotations

from matplotlib.figure import Figure

from course_utils.viz.figures import FONT, SMALL, chars_across, wrap
from course_utils.viz.palette import MEMORY_COLORS, NEUTRAL_COLOR

COMPUTE_COLOR = MEMORY_COLORS["weights"]
MEMORY_COLOR = MEMORY_COLORS["gradients"]
WEIGHTS_COLOR = MEMORY_COLORS["optimizer"]


def draw_decode(points, *, crossover: float | None = None, title: str = "", x_label: str = "sequences in the batch"
                ) -> Figure:
    """Milliseconds of one decode step as the batch grows: computing, reading the weights and the KV cache, and
    reading the weights alone; the batch where computing catches up with the weights marked, and the range where
    the step waits for memory shaded.

    Args:
        points: (batch, compute seconds, memory seconds with the cache, memory seconds of the weights alone),
            in order of batch (e.g. from two `serving.DecodeTime`s).
        crossover: The batch where computing takes as long as reading the weights (`advice.estimate.crossover`).
        title: The figure's title.
        x_label: What the x axis counts.
    """
    if len(points) < 2:
        raise ValueError(f"draw_decode draws lines through two or more points. Received {len(points)}.")
    fig = Figure(figsize=(7.5, 4.4), layout="constrained")
    ax = fig.subplots()
    batches = [p[0] for p in points]
    ax.plot(batches, [p[2] * 1e3 for p in points], "-s", color=MEMORY_COLOR, label="reading weights and KV cache")
    ax.plot(batches, [p[3] * 1e3 for p in points], "--", color=WEIGHTS_COLOR, label="reading the weights alone")
    ax.plot(batches, [p[1] * 1e3 for p in points], "-o", color=COMPUTE_COLOR, label="computing")
    if crossover is not None:
        ax.axvline(crossover, color="black", linestyle=":", linewidth=1.2,
                   label=f"computing catches the weights at {crossover:,.0f}")
    ax.axvspan(0, max(batches) * 1.05, color=NEUTRAL_COLOR, alpha=0.35, linewidth=0, zorder=0,
               label="memory-bound wherever reading is longer")
    ax.set_xlim(0, max(batches) * 1.05)
    ax.set_ylim(0, None)
    ax.set_xlabel(x_label, fontsize=SMALL)
    ax.set_ylabel("milliseconds per step (estimated)", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.legend(loc="upper left", fontsize=SMALL)
    if title:
        fig.suptitle(wrap(title, chars_across(7.1, FONT)), fontsize=FONT)
    return fig
