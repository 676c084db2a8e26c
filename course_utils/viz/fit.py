"""Drawing "will it fit?": GiB per device, part by part, per model and mesh, against device memory."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from course_utils.memory.fit import FitReport
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.bars import HATCHES
from course_utils.viz.palette import MEMORY_COLORS, NEUTRAL_COLOR, STEP_COLORS

COLORS = {**MEMORY_COLORS, **STEP_COLORS}
NAMES = {"optimizer": "optimizer state", "activations": "activations", "gathered": "weights FSDP gathers",
         "scratch": "XLA's working memory"}

LINE_STYLES = ("--", ":", "-.")
THIN = 0.01  # a part under this share of the axis is drawn under a millimetre high: it is named on its bar
LEGEND_WIDTH = 2.6  # inches: the legend's column, right of the panels, inside the figure
SHORT = {"optimizer": "optimizer", "activations": "activations", "gathered": "gathered", "scratch": "XLA's"}


def draw_fit(report: FitReport, *, title: str | None = None) -> Figure:
    """Stacked bars of what each device holds, one panel per model: the parts the report counts
    (weights, gradients, optimizer state; with a batch, activations, gathered weights, XLA's scratch).

    Each bar is one mesh shape, its total written on top; a dashed or dotted
    line marks each device size of the report, named in the legend, and a grey
    band under it its last `report.headroom` (a total in the band is "tight").
    Under each bar, the report's verdict for every device size, as in its table; the legend
    has a column of its own at the right, inside the figure.
    A mesh on which the layout cannot split some weight gets no bar and says
    "cannot split" in its place; under the panel, why, in a few words: the weight,
    its dimension and size, the mesh axis (the report's notes say it in full).

    Args:
        report: A `FitReport` from `will_it_fit`.
        title: The figure's title; defaults to the report's.

    Returns:
        A `Figure`.
    """
    models = list(dict.fromkeys(r.model for r in report.rows))
    # the panels (side by side, half an inch more for their axis labels), the y axis, then the legend's column
    panels = 3.0 * len(models) + 0.5 * (len(models) > 1)
    fig = Figure(figsize=(min(panels + 1.0 + LEGEND_WIDTH, MAX_WIDTH), 4.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(models), sharey=True))
    top = max([r.total for r in report.rows] + list(report.device_gib)) * 1.12
    for ax, model in zip(axes, models):
        rows = [r for r in report.rows if r.model == model]
        _bars(ax, rows, top, report.counted)
        for k, (gib, style) in enumerate(zip(report.device_gib, LINE_STYLES)):
            ax.axhline(gib, color="black", linestyle=style, linewidth=1.2, label=f"memory of a {gib:g} GiB device")
            ax.axhspan((1 - report.headroom) * gib, gib, color=NEUTRAL_COLOR, alpha=0.6, linewidth=0, zorder=0,
                       label=f"its last {report.headroom:.0%}: tight" if k == 0 else None)
        ax.set_title(model, fontsize=FONT)
        ax.set_xticks(range(len(rows)), [_tick(r, report) for r in rows])
        ax.set_xlabel(wrap(_why(rows), 24), fontsize=SMALL)  # under its own panel: why a mesh has no bar
        ax.set_ylim(0, top)
        ax.tick_params(labelsize=SMALL)
    axes[0].set_ylabel("GiB per device", fontsize=SMALL)
    sizes = ", then ".join(f"{g:g} GiB" for g in report.device_gib)
    across = chars_across(fig.get_figwidth() - LEGEND_WIDTH - 0.4, SMALL)  # under the panels, not the legend
    fig.supxlabel(wrap(f"mesh (batch x model), then its verdict on {sizes}", across), fontsize=SMALL)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=SMALL)  # constrained layout makes room
    fig.suptitle(wrap(title or report.title, chars_across(fig.get_figwidth() - 0.4, FONT)), fontsize=FONT)
    return fig


def _tick(row, report: FitReport) -> str:
    """The mesh, then the verdict for each device size, one word a line (a mesh the layout cannot use says so
    on its bar): short enough that neighbouring bars' labels never run into each other. The axis label
    names the device sizes, in order."""
    verdicts = [row.verdict(g, report.headroom) for g in report.device_gib]
    return "\n".join([f"{row.mesh_shape[0]} x {row.mesh_shape[1]}", *([""] * len(verdicts) if row.problem else verdicts)])


def _why(rows) -> str:
    """Why the layout cannot be used on this panel's meshes: one reason for all, or one per mesh."""
    reasons = dict.fromkeys(r.split.short for r in rows if r.split)
    if len(reasons) <= 1:
        return "".join(f"cannot split {reason}" for reason in reasons)
    return "cannot split " + "; ".join(f"{r.mesh_shape[0]} x {r.mesh_shape[1]}: {r.split.short}"
                                       for r in rows if r.split)


def _bars(ax, rows, top: float, parts) -> None:
    bottom = np.zeros(len(rows))
    for kind in parts:
        values = np.array([0.0 if r.problem else getattr(r, kind) for r in rows])
        ax.bar(range(len(rows)), values, bottom=bottom, color=COLORS[kind], hatch=HATCHES[kind],
               edgecolor="black" if kind in ("activations", "scratch") else "white", linewidth=0.5,
               label=NAMES.get(kind, kind))
        bottom += values
    for i, row in enumerate(rows):
        # a part too thin to see at this scale is named on top of its bar, under the total that already holds
        # it ("incl."), so no part disappears and none reads as added on top
        thin = [f"{getattr(row, kind):.1f}\n{SHORT.get(kind, kind)}" for kind in parts  # one word a line: as
                if not row.problem and 0 < getattr(row, kind) < THIN * top]  # narrow as its bar
        label = "cannot\nsplit" if row.problem else "\n".join([f"{row.total:.1f}", *(["incl."] if thin else []), *thin])
        ax.text(i, 0.02 * top if row.problem else row.total, label, ha="center", va="bottom", fontsize=SMALL)
