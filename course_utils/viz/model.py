"""Drawing a model: every weight's placement and the bytes each device holds; training memory.

A real model has dozens of weights: `draw_model` draws them a page at a
time (12 panels by default) at a size that stays readable on a projector,
never shrinking the panels to fit more. Titles wrap at '/' so long paths
never run into a neighbouring panel. A 2-D panel keeps its tensor's
proportions wherever its blocks keep their labels; one that cannot is drawn
squashed, and its title says "not to scale" and the real proportions.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from course_utils.memory.state import MemoryReport
from course_utils.layouts.layout_map import LayoutReport
from course_utils.viz.bars import bytes_bars, memory_bars, memory_by_bars
from course_utils.viz.canvas import Scene, line_height, to_figure
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.panels import (draw_panel, legend, panel_views, placement_colors, scale_note, scaled_panel,
                                        shows_small_meshes, undrawn)

COLUMNS = 4
PANEL = (MAX_WIDTH - 0.6) / COLUMNS  # inches per column of panels
PER_PAGE = 12


def draw_model(report: LayoutReport, *, page: int = 0, per_page: int = PER_PAGE, bytes_chart: bool = True,
               memory: MemoryReport | None = None) -> Figure:
    """Draws each variable's placement, a page at a time, and the bytes each device holds.

    Args:
        report: A `LayoutReport` (`explain_layout(model, distribution)`), drawn whole.
        page: Which page of `per_page` panels to draw (0 is the first).
        per_page: Panels per page.
        bytes_chart: Draw the bytes per device below the panels.
        memory: A `MemoryReport`: the chart below shows training memory
            (weights, gradients, optimizer state) instead (the model explorer's view).

    Returns:
        A `Figure`: the panels of one page, then the bytes per device of all
        the variables (every page's), with what the marks mean in words.
    """
    return to_figure(model_scene(report, page=page, per_page=per_page, bytes_chart=bytes_chart, memory=memory))


def model_scene(report: LayoutReport, *, page: int = 0, per_page: int = PER_PAGE, bytes_chart: bool = True,
                memory: MemoryReport | None = None) -> Scene:
    """The `Scene` of `draw_model` (the model explorer shows it as SVG); same arguments."""
    _check_report(report, "draw_model")
    pages = math.ceil(len(report.rows) / per_page)
    if not 0 <= page < pages:
        raise ValueError(f"page={page}, but {len(report.rows)} variables make {pages} page(s) of {per_page}; "
                         f"pass page=0 to {pages - 1}.")
    shown = report.rows[page * per_page:(page + 1) * per_page]
    colors = placement_colors(shown[0].placement)
    width = max(PANEL * min(len(shown), COLUMNS) + 0.6, 7.5)
    span = f"variables {page * per_page + 1}-{page * per_page + len(shown)} of {len(report.rows)}"
    more = f", page {page + 1} of {pages}: draw_model(..., page={page + 1}) shows the next" if page + 1 < pages else ""
    heading = wrap(f"{report.title}: {span}{more}", chars_across(width, FONT + 1))
    filled = any(row.placement.replication == 1 for row in shown)
    copies = any(row.placement.replication > 1 for row in shown)
    panels = [_panel(row) for row in shown]
    squashed = any("not to scale" in title for _, title, _ in panels)  # the rule is said where a panel needs it
    caption = lambda grids: wrap(legend(shown[0].placement, colors, filled=filled, copies=copies, grids=grids)
                                 + (f"\n{SCALE_RULE}" if squashed else ""), chars_across(width, SMALL))
    layout = _Layout(width, heading, caption(True), panels, CHART if bytes_chart or memory is not None else 0.0)
    scene = Scene(width, layout.height)
    scene.text(width / 2, layout.height - 0.12, heading, FONT + 1, va="top")
    for i, (row, (view, title, _)) in enumerate(zip(shown, panels)):
        draw_panel(scene, layout.rect(i), row.placement, view, colors, title, compact=True)
    # what the marks drawn mean, known once drawn: hung from the top of the room kept for the longest caption
    scene.text(width / 2, layout.bottom - 0.12, caption(shows_small_meshes(scene)), SMALL, va="top")
    if memory is not None:
        memory_bars(scene, layout.chart_rect(), memory)
    elif bytes_chart:
        totals = report.bytes_per_device
        bytes_bars(scene, layout.chart_rect(), totals, colors, title=f"Bytes each device holds for all "
                   f"{len(report.rows)} variables (largest: {max(totals.values()):,})")
    return scene


MAX_RATIO = 0.8  # panels at most this tall for their width
CHART = 1.4  # inches: the height of the bytes chart below the panels
LINE = line_height(SMALL)  # inches per line of SMALL text
BLOCKS = PANEL - 0.45  # inches across a panel's blocks at most (the rest: its row label)
SCALE_RULE = "A 2-D panel keeps its tensor's proportions (rows : columns) unless it says 'not to scale'."


def _panel(row) -> tuple:
    """(view, title, (width, height)) of one variable's panel: drawn to scale where every block still
    names its holders; the title names every dimension not drawn, and says when it is not to scale."""
    p = row.placement
    view = panel_views(p)[0]
    width, height, to_scale = scaled_panel(p, view, (BLOCKS, MAX_RATIO * BLOCKS), compact=True)
    notes = "\n".join(n for n in (undrawn(p, view), "" if to_scale else scale_note(p, view)) if n)
    across = chars_across(BLOCKS - 0.25, SMALL)  # a title stays clear of the next column's row label
    title = wrap(row.path, across) + f"\n{wrap(f'{row.shape} -> {row.shard_shape} per device', across)}"
    return view, title + (f"\n{wrap(notes, across)}" if notes else ""), (width, height)


class _Layout:
    """Where everything goes, in inches, so titles and labels have their room by construction."""

    LEFT, LABEL, GAP_Y = 0.4, 0.3, 0.7  # GAP_Y: a panel's ticks and a two-line dimension label, then a gap
    LAST_GAP = 0.55  # under the last row: its ticks and labels only

    def __init__(self, width, heading, caption, panels, chart):
        self.width, self.chart = width, chart
        self.top = 0.12 + line_height(FONT + 1) * (heading.count("\n") + 1) + 0.2  # the heading, then a gap
        self.bottom = 0.2 + LINE * (caption.count("\n") + 1)
        self.rows = [panels[i:i + COLUMNS] for i in range(0, len(panels), COLUMNS)]
        self.titles = [max(t.count("\n") + 1 for _, t, _ in r) * LINE + 0.1 for r in self.rows]
        self.heights = [max(size[1] for _, _, size in r) for r in self.rows]
        body = sum(self.titles) + sum(self.heights) + (len(self.rows) - 1) * self.GAP_Y + self.LAST_GAP
        self.height = self.top + body + (chart + 0.5 if chart else 0) + self.bottom

    def rect(self, i: int) -> tuple:
        """(left, bottom, width, height) of panel i's blocks, inches: at the top left of its cell."""
        r, c = divmod(i, COLUMNS)
        w, h = self.rows[r][c][2]
        top = self.top + sum(self.titles[:r + 1]) + sum(self.heights[:r]) + r * self.GAP_Y
        return (self.LEFT + self.LABEL + c * PANEL, self.height - top - h, w, h)

    def chart_rect(self) -> tuple:
        """(left, bottom, width, height) of the chart below the panels, in inches."""
        return (0.3, self.bottom + 0.15, self.width - 0.6, self.chart + 0.2)


def _check_report(report, what: str) -> None:
    """Raises, with the call that makes one, unless `report` is a `LayoutReport` with rows: drawing draws
    reports, it never lays a model out itself."""
    if not isinstance(report, LayoutReport) or not report.rows:
        given = f"{type(report).__name__}" + (" with no rows" if isinstance(report, LayoutReport) else "")
        raise ValueError(f"{what} draws a LayoutReport with rows: pass explain_layout(model, distribution) "
                         f"(its .row(path)s in a LayoutReport for some weights only). Received: {given}.")


def draw_bytes(report) -> Figure:
    """The bytes each device holds for every variable of a `LayoutReport`, one bar per device in its colour
    (the chart `draw_model` puts under its panels, as a figure of its own: a slide of its own)."""
    _check_report(report, "draw_bytes")
    totals = report.bytes_per_device
    scene = Scene(7.5, 2.8)
    bytes_bars(scene, (0.1, 0.1, 7.3, 2.6), totals, placement_colors(report.rows[0].placement),
               title=f"Bytes each device holds for all {len(report.rows)} variables (largest: {max(totals.values()):,})")
    return to_figure(scene)


def draw_memory(memory: MemoryReport) -> Figure:
    """Stacked bars: weights, gradients and optimizer state on each device (colour and hatching)."""
    scene = Scene(7.5, 2.8)
    memory_bars(scene, (0.1, 0.1, 7.3, 2.6), memory)
    return to_figure(scene)


def draw_memory_by(reports: dict[str, MemoryReport], *, title: str = "Training memory per device") -> Figure:
    """One stacked bar per distribution or mesh shape: weights, gradients and optimizer state of its
    fullest device, in the course's memory colours, so that layouts compare at a glance.

    Args:
        reports: `memory_report`s (or planned ones) by label, e.g. `{"DataParallel (8,)": ...}`.
        title: The figure's title; the largest total is added to it.

    Example:
        >>> draw_memory_by({"one device": memory_report(single), "2 x 4": memory_report(model, mp)})
    """
    if not reports:
        raise ValueError("draw_memory_by needs at least one report. Received: an empty dict.")
    scene = Scene(7.5, 3.0)
    largest = max(report.max_total for report in reports.values())
    memory_by_bars(scene, (0.1, 0.1, 7.3, 2.8), reports, title=f"{title} (largest: {largest:,} bytes)")
    return to_figure(scene)
