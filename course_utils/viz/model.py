"""Drawing a model: every weight's placement and the bytes each device holds; training memory."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from course_utils.costs import MemoryReport
from course_utils.layout import explain_layout
from course_utils.viz.palette import MEMORY_COLORS, device_color
from course_utils.viz.placement import draw_view, panel_views


def draw_model(model, distribution, *, max_panels: int = 8) -> Figure:
    """Draws every weight's placement and the bytes each device holds.

    Args:
        model: A built Keras model.
        distribution: The distribution to lay it out with.
        max_panels: At most this many weights are drawn ("and N more").
    """
    report = explain_layout(model, distribution)
    model_paths = {v.path for v in model.variables}
    rows = [r for r in report.rows if r.path in model_paths]
    shown = rows[:max_panels]
    cols = min(len(shown), 4)
    grid_rows = math.ceil(len(shown) / cols)
    fig = Figure(figsize=(max(3.3 * cols + 0.5, 6.5), 2.8 * grid_rows + 2.2), layout="constrained")
    spec = fig.add_gridspec(grid_rows + 1, cols, height_ratios=[1] * grid_rows + [0.6])
    for i, row in enumerate(shown):
        ax = fig.add_subplot(spec[i // cols, i % cols])
        draw_view(ax, row.placement, panel_views(row.placement)[0], max_ratio=2.5, compact=True)
        ax.set_title(f"{row.path}\n{row.shape} -> {row.shard_shape}", fontsize=8)
    bars = fig.add_subplot(spec[grid_rows, :])
    totals = type(report)(rows).bytes_per_device
    devices = list(totals)
    bars.bar(devices, [totals[d] for d in devices], color=[device_color(d) for d in devices])
    bars.set_ylabel("weight bytes per device")
    more = f" (and {len(rows) - len(shown)} more not drawn)" if len(rows) > len(shown) else ""
    fig.suptitle(f"{model.name} under {report.title}{more}")
    return fig


def draw_memory(memory: MemoryReport) -> Figure:
    """Stacked bars: weights, gradients and optimizer state on each device."""
    fig = Figure(figsize=(7, 2.6))
    fig.subplots_adjust(left=0.12, right=0.83, bottom=0.12, top=0.88)
    ax = fig.subplots()
    devices = [r.device for r in memory.rows]
    bottom = [0] * len(devices)
    for kind, color in MEMORY_COLORS.items():
        values = [getattr(r, kind) for r in memory.rows]
        ax.bar(devices, values, bottom=bottom, color=color, label=kind)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("bytes per device")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(f"Training memory per device (largest: {memory.max_total:,} bytes)", fontsize=10)
    return fig
