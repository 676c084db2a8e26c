"""Drawing a tensor cut into the blocks devices hold, and a batch split over devices."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.placements import Placement, placement, planned_placement
from course_utils.viz.figures import BLOCK_GID
from course_utils.viz.palette import REPLICA_GREY, device_color


def draw_placement(x, *, title: str | None = None, max_ratio: float = 6.0) -> Figure:
    """Draws a tensor cut into the blocks devices hold.

    Args:
        x: A `Placement`, a `jax.Array` or a Keras variable.
        title: Overrides the default title.
        max_ratio: Tensors longer than this ratio are drawn squashed to it.

    Returns:
        A `Figure`: one panel per distinct view when the tensor has more
        than two dimensions (the dimensions not drawn are named).
    """
    p = x if isinstance(x, Placement) else placement(x)
    views = panel_views(p)
    n = len(views)
    cols = min(n, 4)
    fig = Figure(figsize=(min(max(3.4 * cols + 1, 6.5), 15), 3.0 * math.ceil(n / cols) + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(math.ceil(n / cols), cols)).ravel()
    for ax, view in zip(axes, views):
        draw_view(ax, p, view, max_ratio=max_ratio)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title or _placement_title(p))
    return fig


def _placement_title(p: Placement) -> str:
    label = f"{p.name}: " if p.name else ""
    copies = f", each block on {p.replication} devices" if p.replication > 1 else ""
    blocks = f"{len(p.blocks)} block{'s' * (len(p.blocks) != 1)}"
    return f"{label}shape {p.shape} -> shard {p.shard_shape} per device, {blocks}{copies}"


def panel_views(p: Placement) -> list[tuple]:
    """(row_dim, col_dim, fixed ranges of the other dims, blocks) per panel."""
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
    return [(row_dim, col_dim, dict(zip(others, key)), blocks) for key, blocks in groups.items()]


def draw_view(ax, p: Placement, view, *, max_ratio: float, compact: bool = False) -> None:
    row_dim, col_dim, fixed, blocks = view
    rows = p.shape[row_dim] if row_dim is not None else 1
    cols = p.shape[col_dim] if col_dim is not None else 1
    size = 7 if compact else (9 if len(blocks) <= 8 else 7)
    for block in blocks:
        (r0, r1) = block.index[row_dim] if row_dim is not None else (0, 1)
        (c0, c1) = block.index[col_dim] if col_dim is not None else (0, 1)
        top = _fill_block(ax, block.devices, r0, r1, c0, c1)
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, edgecolor="black",
                               linewidth=1.5, gid=BLOCK_GID))
        ax.text((c0 + c1) / 2, (top + r1) / 2, _holders_label(block.devices, 2 if compact else 4),
                ha="center", va="center",
                fontsize=size, bbox=dict(boxstyle="round,pad=0.2", facecolor="white", alpha=0.8, linewidth=0))
    ax.set_xlim(0, max(cols, 1))
    ax.set_ylim(max(rows, 1), 0)
    ratio = max(rows, 1) / max(cols, 1)
    ax.set_box_aspect(min(max(ratio, 1 / max_ratio), max_ratio) if row_dim is not None else 0.25)
    ax.set_xlabel(_dim_label(p, col_dim), fontsize=8 if compact else 10)
    if compact:  # small panels: the labels carry the sizes; tick labels would only crowd them
        ax.set_xticks([])
        ax.set_yticks([])
    if row_dim is None:
        ax.set_yticks([])
    else:
        ax.set_ylabel(_dim_label(p, row_dim), fontsize=8 if compact else 10)
    if fixed:
        ax.set_title(", ".join(f"dim {d} in [{a}:{b})" for d, (a, b) in fixed.items()), fontsize=9)


def _fill_block(ax, holders, r0, r1, c0, c1) -> float:
    """Colours a block; returns where its label area starts.

    A block on one device takes that device's colour. A block copied on several
    devices stays grey with one colour chip per holder along its top edge, so the
    copies never look like a split of the block.
    """
    if len(holders) == 1:
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=device_color(holders[0]),
                               edgecolor="none", alpha=0.85))
        return r0
    ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=REPLICA_GREY, edgecolor="none"))
    chip_height, chip_width = (r1 - r0) * 0.22, (c1 - c0) / len(holders)
    for k, device in enumerate(holders):
        ax.add_patch(Rectangle((c0 + k * chip_width, r0), chip_width, chip_height, facecolor=device_color(device),
                               edgecolor="white", linewidth=0.5))
    return r0 + chip_height


def _dim_label(p: Placement, dim) -> str:
    if dim is None:
        return "scalar"
    size, axes = p.shape[dim], p.dim_axes[dim]
    if not axes:
        return f"dim {dim}: {size}, whole on every device"
    parts = math.prod(dict(zip(p.axis_names, p.mesh_shape))[a] for a in axes)
    return f"dim {dim}: {size}, split over '{'+'.join(axes)}' into {parts}"


def _holders_label(devices, per_line: int = 4) -> str:
    lines = [", ".join(devices[i:i + per_line]) for i in range(0, len(devices), per_line)]
    return "\n".join(lines)


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
