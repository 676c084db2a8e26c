"""Drawing what steps communicate: the bytes each mesh axis carries, one group of bars per step.

A step is a `CommunicationReport` (one compiled training step); its bars are the bytes per device its
collectives send over each mesh axis, one bar per axis, in an axis's own colour and hatching (so the
chart reads in grey too), with the number on each bar (none on a bar of 0).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from course_utils.viz.bars import grouped_bars
from course_utils.viz.canvas import Scene, to_figure
from course_utils.viz.palette import MEMORY_COLORS, NEUTRAL_COLOR

# an axis's bars: the first (the batch axis, whose bytes are mostly gradient sums) as the gradients are drawn
# in the memory bars; the next ones apart in colour and hatching
AXIS_STYLES = ((MEMORY_COLORS["gradients"], "//"), (NEUTRAL_COLOR, ""), (MEMORY_COLORS["weights"], ".."))


def draw_collectives_by(reports: dict, *, title: str = "Bytes per device each mesh axis carries, one step",
                        labels: dict[str, str] | None = None) -> Figure:
    """One group of bars per compiled step (a mesh shape, a layout): the bytes per device its collectives send
    over each mesh axis, every kind summed (`CommunicationReport.bytes_by_axis`).

    Args:
        reports: `communication_report`s by label, e.g. `{"(8, 1)": ..., "(1, 8)": ...}`, over the same axis names.
        title: The figure's title.
        labels: The legend's words for an axis, e.g. `{"data": "gradients, over 'data'"}` (default "over 'data'").

    Example:
        >>> draw_collectives_by({str(shape): communication_report(m, dist, (1024, 64)) for ...})
    """
    if not reports:
        raise ValueError("draw_collectives_by needs at least one report. Received: an empty dict.")
    axes = list(dict.fromkeys(a for report in reports.values() for a in report.axis_names))
    if len(axes) > len(AXIS_STYLES):
        raise ValueError(f"draw_collectives_by draws at most {len(AXIS_STYLES)} mesh axes. Received reports over "
                         f"{axes}.")
    names = {axis: (labels or {}).get(axis, f"over '{axis}'") for axis in axes}
    groups = {label: [report.bytes_by_axis().get(axis, 0) for axis in axes] for label, report in reports.items()}
    scene = Scene(9.5, 3.4)
    grouped_bars(scene, (0.1, 0.1, 9.3, 3.2), groups, [(names[a], *AXIS_STYLES[i]) for i, a in enumerate(axes)],
                 title=title, xlabel=f"mesh ({', '.join(axes)})")
    return to_figure(scene)
