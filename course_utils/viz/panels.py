"""The panels a tensor is drawn in, shared by the placement figure and the model figure.

A panel draws two dimensions of a tensor (down and across) with the others fixed to a range; each
block is drawn by `blocks.draw_block` where it sits, ticks mark the block edges, and a panel keeps
its tensor's proportions wherever every block keeps its label (`scaled_panel`), else says
"not to scale". Colours come from the one palette (`placement_colors`); a legend says what the
marks mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from course_utils.placements import Placement
from course_utils.viz.blocks import MINI_MESH_MAX, draw_block, fit_label, front_card, holder_names
from course_utils.viz.canvas import Scene, line_height, text_size
from course_utils.viz.figures import FONT, SMALL, chars_across, wrap
from course_utils.viz.palette import MeshColors, mesh_colors


MAX_TICKS = 9  # per dimension; more block edges get every k-th
COMPACT_LABEL_WIDTH = 1.7  # inches a compact panel's dimension label may take before it wraps


@dataclass(frozen=True)
class View:
    """One panel: the dimensions drawn down and across, the others fixed to a range."""

    row_dim: int | None
    col_dim: int | None
    fixed: dict
    blocks: tuple


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
        draw_block(scene, p, block.devices, box, colors, compact=compact and not roomy(p, block.devices, box))
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
    if narrow:  # and wraps within the panel's column, clear of the next panel's row label
        col_label = wrap(col_label, chars_across(COMPACT_LABEL_WIDTH, font))
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


def roomy(p: Placement, holders, box) -> bool:
    """Whether a block drawn in `box` (left, bottom, width, height) shows its small mesh at full size (7 pt
    cells, not compact's 5) with every word the compact label shows: a compact panel then uses it, so the
    small mesh reads from the back row wherever its block has the room."""
    size = front_card(box, len(holders))[2:]
    full, small = (fit_label(p, holders, size, compact) for compact in (False, True))
    return full is not None and full.grid is not None and (small is None or full.text == small.text)


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
    if f"{ratio:.3g}" == "1":  # a square tensor drawn as a rectangle ("1x taller" says nothing)
        return "not to scale (really square)"
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


def legend(p: Placement, colors: MeshColors, *, filled: bool | None = None, copies: bool | None = None,
           grids: bool = True) -> str:
    """What the marks of a placement figure mean, in words, only those it shows (`filled`: some block is
    held by one device, `copies`: some block has copies, by default as in `p`; `grids`: some block shows
    the small mesh)."""
    parts = [f"Filled block: one device holds it ({colors.rule})."] if (
        p.replication == 1 if filled is None else filled) else []
    if p.replication > 1 if copies is None else copies:
        parts.append("Pale stack marked 'N copies' or '\u00d7N': the same block copied on N devices, not a split.")
    if grids and len(p.devices) <= MINI_MESH_MAX:
        parts.append(f"Small grid in a block: the mesh {tuple(p.mesh_shape)}, its holders lit.")
    return " ".join(parts)


def shows_small_meshes(scene) -> bool:
    """Whether some block of `scene` was drawn with its small mesh (a block too small for one shows none)."""
    from course_utils.viz.blocks import LIT_GID, UNLIT_GID
    from course_utils.viz.canvas import Polygons

    return any(isinstance(item, Polygons) and item.gid in (LIT_GID, UNLIT_GID) for item in scene.items)


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


