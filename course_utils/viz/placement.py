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
from course_utils.viz.blocks import MINI_MESH_MAX, draw_block
from course_utils.viz.figures import FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MeshColors, mesh_colors


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
    p = x if isinstance(x, Placement) else placement(x)
    views = panel_views(p)
    colors = placement_colors(p)
    cols = min(len(views), 4)
    rows = math.ceil(len(views) / cols)
    ratio = max(view_ratio(p, v, max_ratio) for v in views)
    width = min(max(4.2 * cols + 0.9, 6.5), MAX_WIDTH)
    panel = min((width - 0.9) / cols, 4.6 / ratio)  # axes width, inches
    fig = Figure(figsize=(width, rows * ((panel - 0.8) * ratio + 0.9) + 1.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, view in zip(axes, views):
        draw_view(ax, p, view, colors, max_ratio=max_ratio, panel_inches=panel)
    for ax in axes[len(views):]:
        ax.set_visible(False)
    fig.suptitle(wrap(title or placement_title(p), chars_across(width, FONT + 1)), fontsize=FONT + 1)
    fig.supxlabel(wrap(legend(p, colors), chars_across(width, SMALL)), fontsize=SMALL)
    return fig


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


def draw_view(ax, p: Placement, view: View, colors: MeshColors, *, max_ratio: float, panel_inches: float,
              compact: bool = False) -> None:
    """One panel: the blocks of `view`, its axes named, the dimensions it does not draw named above it."""
    rows = p.shape[view.row_dim] if view.row_dim is not None else 1
    cols = p.shape[view.col_dim] if view.col_dim is not None else 1
    ratio = view_ratio(p, view, max_ratio)
    width = panel_inches
    for block in view.blocks:
        (r0, r1) = block.index[view.row_dim] if view.row_dim is not None else (0, 1)
        (c0, c1) = block.index[view.col_dim] if view.col_dim is not None else (0, 1)
        size = (width * (c1 - c0) / max(cols, 1), width * ratio * (r1 - r0) / max(rows, 1))
        draw_block(ax, ax.transData, p, block.devices, (r0, r1, c0, c1), size, colors,
                   compact=compact)
    ax.set_xlim(0, max(cols, 1))
    ax.set_ylim(max(rows, 1), 0)
    ax.set_box_aspect(ratio)
    font = SMALL if compact else FONT
    ax.set_xlabel(dim_label(p, view.col_dim), fontsize=font)
    ax.set_ylabel(dim_label(p, view.row_dim) if view.row_dim is not None else "", fontsize=font)
    ax.tick_params(labelsize=SMALL)
    if compact or view.row_dim is None:
        ax.set_yticks([])
    if compact:
        ax.set_xticks([])
    notes = undrawn(p, view)
    if notes and not compact:
        ax.set_title(notes, fontsize=SMALL, loc="left")


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
