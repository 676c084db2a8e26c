"""Drawing a tensor cut into the blocks devices hold, and a batch split over devices.

Two marks, never confused: a block one device holds is filled with that
device's colour; a block copied on several devices is drawn as a pale stack
of cards marked "N copies". Every block also carries a small picture of the
mesh with its holders lit, which shows where on the mesh it lives, and its
holders' names. Every dimension of the tensor is either drawn or named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure

from course_utils.placements import Placement, placement, planned_placement
from course_utils.viz.blocks import MINI_MESH_MAX, draw_block, fit_label, front_card, holder_names
from course_utils.viz.canvas import Scene, line_height, text_size, to_figure
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MeshColors, mesh_colors

MAX_TICKS = 9  # per dimension; more block edges get every k-th


@dataclass(frozen=True)
class View:
    """One panel: the dimensions drawn down and across, the others fixed to a range."""

    row_dim: int | None
    col_dim: int | None
    fixed: dict
    blocks: tuple


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
    panel = min(slot - left - 0.25, 4.6 / ratio)  # width of a panel's blocks, inches
    notes = [wrap(_notes(p, v, max_ratio), chars_across(slot - 0.2, SMALL)) for v in views]
    xlabels = [wrap(dim_label(p, v.col_dim), chars_across(panel + 0.4, FONT)) for v in views]
    heading = wrap(title or placement_title(p), chars_across(width, FONT + 1))
    caption = wrap(legend(p, colors), chars_across(width, SMALL))
    above = max(text_size(n, SMALL)[1] for n in notes) + 0.08 if any(notes) else 0.0
    below = line_height(SMALL) + 0.12 + max(text_size(t, FONT)[1] for t in xlabels)
    row_height = above + panel * ratio + below + 0.25
    top, bottom = text_size(heading, FONT + 1)[1] + 0.25, text_size(caption, SMALL)[1] + 0.2
    scene = Scene(width, top + rows * row_height - 0.2 + bottom)  # no gap after the last row
    scene.text(width / 2, scene.height - 0.12, heading, FONT + 1, va="top")
    scene.text(width / 2, 0.1, caption, SMALL, va="bottom")
    used = cols * (left + panel + 0.25)
    for i, (view, (row_ticks, col_ticks), note, xlabel) in enumerate(zip(views, ticks, notes, xlabels)):
        r, c = divmod(i, cols)
        h = panel * view_ratio(p, view, max_ratio)
        x0 = (width - used) / 2 + c * (left + panel + 0.25) + left
        y0 = scene.height - top - r * row_height - above - h
        draw_panel(scene, (x0, y0, panel, h), p, view, colors, note, compact=False,
                   ticks=(row_ticks, col_ticks), labels=(_ylabel(p, view, h), xlabel))
    return scene


def draw_panel(scene: Scene, rect, p: Placement, view: View, colors: MeshColors, title: str, *, compact: bool,
               ticks: tuple = ((), ()), labels: tuple | None = None) -> None:
    """One panel: the blocks of `view` in `rect`, its dimensions named, `title` above it.

    Args:
        rect: (left, bottom, width, height) of the blocks' area, in inches.
        title: Written above the panel (the dimensions it does not draw; a variable's path).
        compact: Small marks and labels (the many panels of `draw_model`).
        ticks: (row ticks, column ticks): (position, label) pairs in tensor coordinates.
        labels: (row label, column label); default: the dimensions' sizes and splits.
    """
    x, y, w, h = rect
    rows = p.shape[view.row_dim] if view.row_dim is not None else 1
    cols = p.shape[view.col_dim] if view.col_dim is not None else 1
    for block, box in block_boxes(p, view, rect):
        draw_block(scene, p, block.devices, box, colors, compact=compact)
    row_ticks, col_ticks = ticks
    for position, label in col_ticks:
        at = x + w * position / cols
        scene.line((at, at), (y, y - 0.05), linewidth=0.8)
        scene.text(at, y - 0.07, label, SMALL, va="top")
    for position, label in row_ticks:
        at = y + h * (1 - position / rows)
        scene.line((x, x - 0.05), (at, at), linewidth=0.8)
        scene.text(x - 0.07, at, label, SMALL, ha="right")
    font = SMALL if compact else FONT
    row_label, col_label = labels or (dim_label(p, view.row_dim) if view.row_dim is not None else "",
                                      dim_label(p, view.col_dim))
    below = y - 0.07 - (line_height(SMALL) if col_ticks else 0)
    narrow = compact and text_size(col_label, font)[0] > w  # a narrow panel: its label starts at its left edge
    scene.text(x if narrow else x + w / 2, below, col_label, font, ha="left" if narrow else "center", va="top")
    tick_width = max((text_size(label, SMALL)[0] for _, label in row_ticks), default=0.0)
    scene.text(x - 0.09 - tick_width - (0.04 if row_ticks else 0), y + h / 2, row_label, font, rotation=90,
               va="bottom")
    scene.text(x, y + h + 0.06, title, SMALL, ha="left", va="bottom")


def block_boxes(p: Placement, view: View, rect) -> list[tuple]:
    """(block, (left, bottom, width, height)) of every block of `view` drawn in `rect` (inches)."""
    x, y, w, h = rect
    rows = p.shape[view.row_dim] if view.row_dim is not None else 1
    cols = p.shape[view.col_dim] if view.col_dim is not None else 1
    boxes = []
    for block in view.blocks:
        r0, r1 = block.index[view.row_dim] if view.row_dim is not None else (0, 1)
        c0, c1 = block.index[view.col_dim] if view.col_dim is not None else (0, 1)
        boxes.append((block, (x + w * c0 / cols, y + h * (1 - r1 / rows), w * (c1 - c0) / cols, h * (r1 - r0) / rows)))
    return boxes


def label_marks(p: Placement, view: View, size, *, compact: bool) -> list[tuple[bool, bool]]:
    """(small mesh shown, every holder named) in each block of `view`, its panel drawn `size` (width, height) inches."""
    marks = []
    for block, (_, _, w, h) in block_boxes(p, view, (0.0, 0.0, *size)):
        label = fit_label(p, block.devices, front_card((0.0, 0.0, w, h), len(block.devices))[2:], compact)
        names = holder_names(block.devices).split(", ")
        marks.append((label is not None and label.grid is not None,
                      label is not None and all(name in label.text for name in names)))
    return marks


def true_ratio(p: Placement, view: View) -> float | None:
    """Height / width of the tensor as `view` draws it (rows / columns); None for a 1-D or scalar panel."""
    if view.row_dim is None:
        return None
    return p.shape[view.row_dim] / max(p.shape[view.col_dim], 1)


def scaled_panel(p: Placement, view: View, box, *, compact: bool, steps: int = 10) -> tuple[float, float, bool]:
    """(width, height, to scale) of a panel's blocks that fits in `box` (width, height) inches.

    The tensor's own proportions when every block still shows all it shows
    in the whole box (its small mesh, its holders' names); else the nearest
    proportions that do, on the way to the box's, not to scale. A 1-D panel
    is a strip the box's width: only its length is drawn.
    """
    width, height = box
    ratio = true_ratio(p, view)
    if ratio is None:
        return width, min(0.25 * width, height), True
    best = label_marks(p, view, box, compact=compact)
    for t in np.linspace(1.0, 0.0, steps + 1):  # t = 1: the tensor's proportions; t = 0: the box's
        r = ratio ** t * (height / width) ** (1 - t)
        w = min(width, height / r)
        marks = label_marks(p, view, (w, w * r), compact=compact)
        if all(g >= best_g and n >= best_n for (g, n), (best_g, best_n) in zip(marks, best)):
            return w, w * r, bool(np.isclose(r, ratio))
    return width, height, bool(np.isclose(height / width, ratio))


def scale_note(p: Placement, view: View) -> str:
    """'not to scale (really 12.8x taller)', for a panel drawn in other proportions than its tensor's."""
    ratio = true_ratio(p, view)
    if ratio >= 1:
        return f"not to scale (really {ratio:.3g}\u00d7 taller)"
    return f"not to scale (really {1 / ratio:.3g}\u00d7 wider)"


def tick_labels(p: Placement, view: View, dim) -> list[tuple[int, str]]:
    """(position, label) at the block edges along `dim`: where each shard starts, and the end."""
    if dim is None or not p.shape:
        return []
    edges = sorted({e for block in view.blocks for e in block.index[dim]})
    step = math.ceil(len(edges) / MAX_TICKS)
    kept = edges[::step] if edges[::step][-1] == edges[-1] else edges[::step][:-1] + [edges[-1]]
    return [(e, str(e)) for e in kept]


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


def legend(p: Placement, colors: MeshColors, *, copies: bool | None = None) -> str:
    """What the marks of a placement figure mean, in words (`copies`: some block has copies; default: p's)."""
    parts = [f"Filled block: one device holds it ({colors.rule})."]
    if p.replication > 1 if copies is None else copies:
        parts.append("Pale stack marked 'N copies' or '\u00d7N': the same block copied on N devices, not a split.")
    if len(p.devices) <= MINI_MESH_MAX:
        parts.append(f"Small grid in a block: the mesh {tuple(p.mesh_shape)}, its holders lit.")
    return " ".join(parts)


def placement_colors(p: Placement) -> MeshColors:
    return mesh_colors(np.array(p.devices, dtype=object).reshape(p.mesh_shape), p.axis_names)


def panel_views(p: Placement) -> list[View]:
    """The panels that show every block: split dimensions drawn first, the rest fixed per panel."""
    rank = len(p.shape)
    split = [d for d in range(rank) if p.dim_axes[d]]
    if len(split) >= 2:
        drawn = split[-2:]
    else:
        whole = [d for d in reversed(range(rank)) if d not in split]
        drawn = sorted(split + whole[: 2 - len(split)])
    row_dim, col_dim = ([None, None] + drawn)[-2:]
    others = [d for d in range(rank) if d not in (row_dim, col_dim)]
    groups: dict[tuple, list] = {}
    for block in p.blocks:
        groups.setdefault(tuple(block.index[d] for d in others), []).append(block)
    return [View(row_dim, col_dim, dict(zip(others, key)), tuple(blocks)) for key, blocks in groups.items()]


def undrawn(p: Placement, view: View) -> str:
    """One line per dimension the panel does not draw: whole in every block, or the range shown."""
    return "\n".join(_undrawn(p, d, rng) for d, rng in view.fixed.items())


def view_ratio(p: Placement, view: View, max_ratio: float) -> float:
    """Height / width of a panel: the tensor's own, squashed to at most `max_ratio` either way."""
    if view.row_dim is None:
        return 0.25
    rows, cols = p.shape[view.row_dim], max(p.shape[view.col_dim], 1)
    return min(max(rows / cols, 1 / max_ratio), max_ratio)


def _undrawn(p: Placement, dim: int, rng) -> str:
    size = p.shape[dim]
    if not p.dim_axes[dim]:
        return f"dim {dim} ({size}): whole, not drawn"
    return f"dim {dim} ({size}): this panel is [{rng[0]}:{rng[1]}), split over '{'+'.join(p.dim_axes[dim])}'"


def dim_label(p: Placement, dim) -> str:
    if dim is None:
        return "scalar" if not p.shape else ""
    size, axes = p.shape[dim], p.dim_axes[dim]
    if not axes:
        return f"dim {dim}: {size}, whole"
    parts = math.prod(dict(zip(p.axis_names, p.mesh_shape))[a] for a in axes)
    return f"dim {dim}: {size}, split over '{'+'.join(axes)}' in {parts}"


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
