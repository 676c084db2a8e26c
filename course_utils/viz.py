"""Drawings of meshes, placements, models and batch splits.

Every function returns a `matplotlib.figure.Figure` and never shows it; the
notebook decides. Figures are built without pyplot, so nothing accumulates in
a global figure list. A device keeps one colour in every figure.
"""

from __future__ import annotations

import io
import math

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.layout import explain_layout
from course_utils.placements import Placement, placement, planned_placement

_PALETTE = list(colormaps["tab10"].colors) + list(colormaps["tab20b"].colors)
BLOCK_GID = "block"


def _figure_to_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _show_figures_in_notebooks() -> None:
    """Lets a returned Figure display as an image in IPython, with or without pyplot."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, _figure_to_png)


_show_figures_in_notebooks()


def device_color(device) -> tuple:
    """The colour of a device (`"cpu:3"` or its id) in every course figure."""
    index = int(str(device).rsplit(":", 1)[-1])
    return _PALETTE[index % len(_PALETTE)]


def draw_mesh(mesh, *, title: str | None = None) -> Figure:
    """Draws a `DeviceMesh` as a grid of devices with its axes named.

    1-D meshes are a row, 2-D meshes a grid (first axis down, second across),
    3-D meshes a row of 2-D slices along the first axis.
    """
    devices = np.asarray(mesh.devices)
    names = tuple(mesh.axis_names)
    if devices.ndim == 1:
        panels = [(devices.reshape(1, -1), (None, names[0]), ())]
    elif devices.ndim == 2:
        panels = [(devices, names, ())]
    elif devices.ndim == 3:
        panels = [(devices[i], names[1:], (i,)) for i in range(devices.shape[0])]
    else:
        raise ValueError(
            f"draw_mesh draws meshes of 1, 2 or 3 axes. Received a mesh of shape "
            f"{tuple(mesh.shape)}; use describe_mesh(mesh) for a table instead."
        )
    rows, cols = panels[0][0].shape
    fig = Figure(figsize=(min(2.0 + 1.3 * cols * len(panels), 16), 1.2 + 1.0 * rows), layout="constrained")
    for ax, (grid, axis_pair, outer) in zip(np.atleast_1d(fig.subplots(1, len(panels))), panels):
        _draw_device_grid(ax, grid, axis_pair, outer)
        if outer:
            ax.set_title(f"{names[0]} = {outer[0]}", fontsize=10)
    platform = str(devices.flat[0]).split(":")[0].upper()
    fig.suptitle(title or f"DeviceMesh shape={tuple(mesh.shape)}, axis_names={names}: "
                 f"{devices.size} {platform} devices")
    return fig


def _draw_device_grid(ax, grid, axis_pair, outer: tuple) -> None:
    """One 2-D grid of devices; `outer` is the coordinate of the slice in a 3-D mesh."""
    rows, cols = grid.shape
    row_axis, col_axis = axis_pair
    for (i, j), device in np.ndenumerate(grid):
        ax.add_patch(Rectangle((j, i), 0.94, 0.94, facecolor=device_color(device),
                               edgecolor="black", gid=BLOCK_GID))
        coord = str((*outer, i, j) if row_axis else (j,)).replace(",)", ")")
        ax.text(j + 0.47, i + 0.47, f"{device}\n{coord}", ha="center", va="center", fontsize=9,
                color="white", fontweight="bold")
    ax.set_xlim(-0.06, cols)
    ax.set_ylim(rows, -0.06)
    ax.set_aspect("equal")
    ax.set_xticks([j + 0.47 for j in range(cols)], [str(j) for j in range(cols)])
    ax.set_yticks([i + 0.47 for i in range(rows)], [str(i) for i in range(rows)] if row_axis else [])
    ax.set_xlabel(f"axis '{col_axis}' (size {cols})")
    if row_axis:
        ax.set_ylabel(f"axis '{row_axis}' (size {rows})")
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


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
    views = _views(p)
    n = len(views)
    cols = min(n, 4)
    fig = Figure(figsize=(min(max(3.4 * cols + 1, 6.5), 15), 3.0 * math.ceil(n / cols) + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(math.ceil(n / cols), cols)).ravel()
    for ax, view in zip(axes, views):
        _draw_view(ax, p, view, max_ratio=max_ratio)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title or _placement_title(p))
    return fig


def _placement_title(p: Placement) -> str:
    label = f"{p.name}: " if p.name else ""
    copies = f", each block on {p.replication} devices" if p.replication > 1 else ""
    blocks = f"{len(p.blocks)} block{'s' * (len(p.blocks) != 1)}"
    return f"{label}shape {p.shape} -> shard {p.shard_shape} per device, {blocks}{copies}"


def _views(p: Placement) -> list[tuple]:
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


def _draw_view(ax, p: Placement, view, *, max_ratio: float, compact: bool = False) -> None:
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
    ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor="#e6e6e6", edgecolor="none"))
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
        _draw_view(ax, row.placement, _views(row.placement)[0], max_ratio=2.5, compact=True)
        ax.set_title(f"{row.path}\n{row.shape} -> {row.shard_shape}", fontsize=8)
    bars = fig.add_subplot(spec[grid_rows, :])
    totals = type(report)(rows).bytes_per_device
    devices = list(totals)
    bars.bar(devices, [totals[d] for d in devices], color=[device_color(d) for d in devices])
    bars.set_ylabel("weight bytes per device")
    more = f" (and {len(rows) - len(shown)} more not drawn)" if len(rows) > len(shown) else ""
    fig.suptitle(f"{model.name} under {report.title}{more}")
    return fig
