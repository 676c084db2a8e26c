"""Drawing one tensor cut into the blocks devices hold, and a batch split over devices.

Two marks, never confused: a block one device holds is filled with that
device's colour; a block copied on several devices is drawn as a pale stack
of cards marked "N copies". Every block also carries a small picture of the
mesh with its holders lit, which shows where on the mesh it lives, and its
holders' names. Every dimension of the tensor is either drawn or named.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from course_utils.placements import Placement, placement, planned_placement
from course_utils.viz.canvas import Scene, line_height, text_size, to_figure
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap

MAX_PANEL_HEIGHT = 3.0  # inches: with its text, a one-panel figure stays short enough for a slide
from course_utils.viz.panels import (View, dim_label, draw_panel, legend, panel_views, placement_colors, scale_note,
                                     shows_small_meshes, tick_labels, true_ratio, undrawn, view_ratio)


def draw_placement(x, *, title: str | None = None, max_ratio: float = 6.0) -> Figure:
    """Draws a tensor cut into the blocks devices hold.

    Args:
        x: A `Placement`, a `jax.Array` or a Keras variable.
        title: Overrides the default title.
        max_ratio: Tensors longer than this ratio are drawn squashed to it.

    Returns:
        A `Figure`: one panel per distinct view when the tensor has more than
        two dimensions; each panel names the dimensions it does not draw.
    """
    return to_figure(placement_scene(x, title=title, max_ratio=max_ratio))


def placement_scene(x, *, title: str | None = None, max_ratio: float = 6.0) -> Scene:
    """The `Scene` of `draw_placement` (the layout explorer shows it as SVG)."""
    p = x if isinstance(x, Placement) else placement(x)
    views = panel_views(p)
    colors = placement_colors(p)
    cols = min(len(views), 4)
    rows = math.ceil(len(views) / cols)
    ratio = max(view_ratio(p, v, max_ratio) for v in views)
    width = min(max(4.2 * cols + 0.9, 6.5), MAX_WIDTH)
    slot = (width - 0.4) / cols
    ticks = [(tick_labels(p, v, v.row_dim), tick_labels(p, v, v.col_dim)) for v in views]
    left = max(_left_room(row_ticks) for row_ticks, _ in ticks)
    panel = min(slot - left - 0.25, MAX_PANEL_HEIGHT / ratio)  # width of a panel's blocks, inches
    notes = [wrap(_notes(p, v, max_ratio), chars_across(slot - 0.2, SMALL)) for v in views]
    xlabels = [wrap(dim_label(p, v.col_dim), chars_across(panel + 0.4, FONT)) for v in views]
    heading = wrap(title or placement_title(p), chars_across(width, FONT + 1))
    caption = lambda grids: wrap(legend(p, colors, grids=grids), chars_across(width, SMALL))
    above = max(text_size(n, SMALL)[1] for n in notes) + 0.08 if any(notes) else 0.0
    below = line_height(SMALL) + 0.12 + max(text_size(t, FONT)[1] for t in xlabels)
    row_height = above + panel * ratio + below + 0.25
    top, bottom = text_size(heading, FONT + 1)[1] + 0.25, text_size(caption(True), SMALL)[1] + 0.2
    scene = Scene(width, top + rows * row_height - 0.2 + bottom)  # no gap after the last row
    scene.text(width / 2, scene.height - 0.12, heading, FONT + 1, va="top")
    used = cols * (left + panel + 0.25)
    for i, (view, (row_ticks, col_ticks), note, xlabel) in enumerate(zip(views, ticks, notes, xlabels)):
        r, c = divmod(i, cols)
        h = panel * view_ratio(p, view, max_ratio)
        x0 = (width - used) / 2 + c * (left + panel + 0.25) + left
        y0 = scene.height - top - r * row_height - above - h
        draw_panel(scene, (x0, y0, panel, h), p, view, colors, note, compact=False,
                   ticks=(row_ticks, col_ticks), labels=(_ylabel(p, view, h), xlabel))
    # what the marks drawn mean, known once they are drawn: hung from the top of the room kept for the
    # longest caption, so a shorter one leaves its spare room at the bottom, where the PNG is cropped
    scene.text(width / 2, bottom - 0.1, caption(shows_small_meshes(scene)), SMALL, va="top")
    return scene


def _notes(p: Placement, view: View, max_ratio: float) -> str:
    """What a panel of `draw_placement` does not show as it is: dimensions not drawn, proportions squashed."""
    ratio = true_ratio(p, view)
    squashed = ratio is not None and not np.isclose(view_ratio(p, view, max_ratio), ratio)
    return "\n".join(n for n in (undrawn(p, view), scale_note(p, view) if squashed else "") if n)


def _left_room(row_ticks) -> float:
    """Inches left of a panel for its row tick labels and row label."""
    labels = max((text_size(label, SMALL)[0] for _, label in row_ticks), default=0.0)
    return 0.1 + labels + 0.06 + line_height(FONT) + 0.1


def _ylabel(p: Placement, view: View, height: float) -> str:
    if view.row_dim is None:
        return ""
    return wrap(dim_label(p, view.row_dim), chars_across(max(height, 1.8), FONT))


def placement_title(p: Placement) -> str:
    label = f"{p.name}: " if p.name else ""
    copies = f", each block on {p.replication} devices" if p.replication > 1 else ""
    blocks = f"{len(p.blocks)} block{'s' * (len(p.blocks) != 1)}"
    return f"{label}shape {p.shape} -> shard {p.shard_shape} per device, {blocks}{copies}"


def draw_batch_split(batch_shape, distribution) -> Figure:
    """Draws which rows of a batch each device receives under a distribution.

    Args:
        batch_shape: The global batch shape, e.g. `(16, 784)`.
        distribution: A `keras.distribution.DataParallel` or `ModelParallel`.
    """
    layout = distribution.get_data_layout(tuple(batch_shape))
    p = planned_placement(tuple(batch_shape), layout, name="batch")
    per = p.shard_shape[0]
    return draw_placement(p, title=(
        f"Batch {tuple(batch_shape)} under {type(distribution).__name__}: "
        f"{len(p.blocks)} sub-batches of {per} rows, split over '{distribution.batch_dim_name}'"))
