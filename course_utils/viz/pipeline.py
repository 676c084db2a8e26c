"""Drawing a pipeline's schedule: stages down, time across, one box per pass, the idle time (the bubble) shaded.

Drawn from `pipeline.Schedule` (plain data). A box's colour names its micro-batch, not a device (the
course's other figures colour devices); its label names it too: "F3" is micro-batch 3's forward pass,
"B3" its backward pass (hatched). Each row ends with the most micro-batches that stage holds at once.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from course_utils.pipeline import BACKWARD, Schedule
from course_utils.viz.figures import BLOCK_GID, FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MICRO_BATCH_COLORS, NEUTRAL_COLOR, UNLIT_COLOR

IDLE_COLOR = "#eeeeee"


def micro_batch_color(micro_batch: int) -> str:
    """The colour of micro-batch `micro_batch` in a schedule (grey beyond the palette: its label names it)."""
    return MICRO_BATCH_COLORS[micro_batch] if 0 <= micro_batch < len(MICRO_BATCH_COLORS) else NEUTRAL_COLOR


def draw_schedule(*schedules: Schedule, title: str | None = None) -> Figure:
    """One panel per schedule, on one time axis: a row per stage, a box per pass, idle time shaded grey.

    Args:
        schedules: One or more `Schedule`s (`pipeline.schedule`), drawn one under the other.
        title: The figure's title; by default the first schedule's.

    Example:
        >>> draw_schedule(schedule("GPipe", stages=4, micro_batches=8), schedule("1F1B", stages=4, micro_batches=8))
    """
    if not schedules or not all(isinstance(s, Schedule) for s in schedules):
        raise TypeError(f"draw_schedule draws course_utils.pipeline.Schedule objects (from schedule(...)). "
                        f"Received: {[type(s).__name__ for s in schedules]}.")
    longest = max(s.makespan for s in schedules)
    rows = sum(s.stages for s in schedules)
    fig = Figure(figsize=(MAX_WIDTH, 1.4 + 0.36 * rows + 0.7 * len(schedules)), layout="constrained")
    axes = fig.subplots(len(schedules), 1, squeeze=False, sharex=True,
                        gridspec_kw={"height_ratios": [s.stages for s in schedules]})[:, 0]
    for ax, plan in zip(axes, schedules):
        _panel(ax, plan, longest)
    axes[-1].set_xlabel(f"time (a forward pass takes {schedules[0].forward:g} unit, a backward pass "
                        f"{schedules[0].backward:g})", fontsize=SMALL)
    legend = [Patch(facecolor=MICRO_BATCH_COLORS[0], edgecolor="black", label="F: forward pass"),
              Patch(facecolor=MICRO_BATCH_COLORS[0], edgecolor="black", hatch="//", label="B: backward pass"),
              Patch(facecolor=IDLE_COLOR, edgecolor="black", label="idle (the bubble)")]
    fig.legend(handles=legend, loc="outside lower center", ncols=3, fontsize=SMALL)
    fig.suptitle(wrap(title or _title(schedules[0]), chars_across(MAX_WIDTH - 0.4, FONT)), fontsize=FONT)
    return fig


def _title(plan: Schedule) -> str:
    return (f"{plan.kind}, {plan.stages} stages, {plan.micro_batches} micro-batches: each box one pass, its "
            f"colour and label its micro-batch (not a device)")


def _panel(ax, plan: Schedule, longest: float) -> None:
    for stage in range(plan.stages):
        ax.add_patch(Rectangle((0, stage - 0.42), plan.makespan, 0.84, facecolor=IDLE_COLOR, edgecolor="none"))
    for slot in plan.slots:
        color = micro_batch_color(slot.micro_batch)
        ax.add_patch(Rectangle((slot.start, slot.stage - 0.42), slot.end - slot.start, 0.84, facecolor=color,
                               edgecolor="black", linewidth=0.8, hatch="//" if slot.pass_ == BACKWARD else None,
                               gid=BLOCK_GID))
        ax.text((slot.start + slot.end) / 2, slot.stage, slot.label, ha="center", va="center", fontsize=SMALL,
                bbox={"boxstyle": "square,pad=0.05", "facecolor": color, "edgecolor": "none"}
                if slot.pass_ == BACKWARD else None)
    for stage, kept in enumerate(plan.kept):
        ax.text(longest * 1.01, stage, f"keeps {kept}", va="center", fontsize=SMALL)
    ax.set_xlim(0, longest * 1.13)
    ax.set_xticks([t for t in MaxNLocator(nbins=10, integer=True).tick_values(0, longest) if 0 <= t <= longest])
    ax.set_ylim(plan.stages - 0.5, -0.5)
    ax.set_yticks(range(plan.stages), [f"stage {s}" for s in range(plan.stages)], fontsize=SMALL)
    ax.tick_params(axis="x", labelsize=SMALL)
    ax.set_facecolor(UNLIT_COLOR)
    ax.set_title(f"{plan.kind}: idle {plan.idle_share:.1%} of the stages' time; activations of at most "
                 f"{max(plan.kept)} micro-batches kept", fontsize=SMALL, loc="left")
