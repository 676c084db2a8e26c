"""Drawing a device mesh: a grid of devices with its axes named.

Small meshes label every cell with its device and coordinate. Where labels
would overlap (64 devices and more), cells stay unlabelled and the tick
labels carry ranges of devices instead; colours then follow mesh rows, as
the figure says.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.viz.figures import BLOCK_GID, FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MeshColors, mesh_colors, text_color
from course_utils.viz.blocks import holder_names

MAX_TICKS = 16  # per axis; more positions get every k-th tick


def draw_mesh(mesh, *, title: str | None = None) -> Figure:
    """Draws a `DeviceMesh` as a grid of devices with its axes named.

    1-D meshes are a row, 2-D meshes a grid (first axis down, second across),
    3-D meshes one 2-D slice per position along the first axis. Only
    `mesh.devices` (names or JAX devices), `mesh.shape` and `mesh.axis_names`
    are read, so a mesh of device names draws without the devices.

    Returns:
        A `Figure`; a line inside it says what colours and labels mean.
    """
    devices = np.vectorize(str, otypes=[object])(np.asarray(mesh.devices, dtype=object))
    names = tuple(mesh.axis_names)
    panels = _panels(devices, names, tuple(mesh.shape))
    rows, cols = panels[0][0].shape
    across = min(len(panels), 4)
    down = math.ceil(len(panels) / across)
    cell = min(1.25, (MAX_WIDTH - 1.6 - 0.5 * across) / (across * cols), 6.0 / (down * rows))
    width = max(across * (cols * cell + 0.5) + 1.6, 6.5)
    fig = Figure(figsize=(width, down * (rows * cell + 0.9) + 1.2), layout="constrained")
    colors = mesh_colors(devices, names)
    axes = np.atleast_1d(fig.subplots(down, across)).ravel()
    for ax, (grid, axis_pair, outer) in zip(axes, panels):
        _draw_device_grid(ax, grid, axis_pair, outer, colors, cell)
        if outer:
            ax.set_title(f"{names[0]} = {outer[0]}: {holder_names(list(grid.flat))}", fontsize=FONT)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    platform = str(devices.flat[0]).split(":")[0].upper()
    heading = title or (f"DeviceMesh shape={tuple(mesh.shape)}, axis_names={names}: "
                        f"{devices.size} {platform} devices")
    fig.suptitle(wrap(heading, chars_across(width, FONT + 2)), fontsize=FONT + 2)
    fig.supxlabel(wrap(_legend(colors, cell, len(names)), chars_across(width, SMALL)), fontsize=SMALL)
    return fig


def _panels(devices: np.ndarray, names: tuple, shape: tuple) -> list[tuple]:
    """(2-D grid, (row axis name, column axis name), outer coordinate) per panel."""
    if devices.ndim == 1:
        return [(devices.reshape(1, -1), (None, names[0]), ())]
    if devices.ndim == 2:
        return [(devices, names, ())]
    if devices.ndim == 3:
        return [(devices[i], names[1:], (i,)) for i in range(devices.shape[0])]
    raise ValueError(f"draw_mesh draws meshes of 1, 2 or 3 axes. Received a mesh of shape {shape}; "
                     f"use describe_mesh(mesh) for a table instead.")


def _legend(colors: MeshColors, cell: float, ndim: int) -> str:
    coordinate = "(" + ", ".join(["i", "j", "k"][:ndim]) + ")"
    if cell >= 0.8:
        labels = f"each cell: one device, its name and mesh coordinate {coordinate}"
    elif cell >= 0.5:
        labels = "each cell: one device, its name (coordinates on the axes)"
    else:
        labels = "each cell: one device; too many to name each, the tick labels give the devices of each row or position"
    return f"{labels}; {colors.rule}."


def _draw_device_grid(ax, grid, axis_pair, outer: tuple, colors: MeshColors, cell: float) -> None:
    """One 2-D grid of devices; `outer` is the coordinate of the slice in a 3-D mesh."""
    rows, cols = grid.shape
    row_axis, col_axis = axis_pair
    gap = 0.06 if cell >= 0.3 else 0.0
    for (i, j), device in np.ndenumerate(grid):
        color = colors[device]
        ax.add_patch(Rectangle((j, i), 1 - gap, 1 - gap, facecolor=color, edgecolor="black",
                               linewidth=0.8 if cell >= 0.3 else 0.2, gid=BLOCK_GID))
        coord = str((*outer, i, j) if row_axis else (j,)).replace(",)", ")")
        label = f"{device}\n{coord}" if cell >= 0.8 else (device if cell >= 0.5 else "")
        if label:
            ax.text(j + 0.5 - gap / 2, i + 0.5 - gap / 2, label, ha="center", va="center",
                    fontsize=FONT if cell >= 0.8 else SMALL, color=text_color(color), fontweight="bold")
    ax.set_xlim(-0.06, cols)
    ax.set_ylim(rows, -0.06)
    ax.set_aspect("equal")
    _ticks(ax.xaxis, cols, (lambda j: f"{j}\n{grid[0, j]}") if cell < 0.5 and not row_axis else str)
    if row_axis:
        per_row = (lambda i: f"{i}: {holder_names(list(grid[i]))}") if cell < 0.5 else str
        _ticks(ax.yaxis, rows, per_row)
        ax.set_ylabel(f"axis '{row_axis}' (size {rows})", fontsize=FONT)
    else:
        ax.set_yticks([])
    ax.set_xlabel(f"axis '{col_axis}' (size {cols})", fontsize=FONT)
    ax.tick_params(length=0, labelsize=SMALL)
    for side in ax.spines.values():
        side.set_visible(False)


def _ticks(axis, n: int, label) -> None:
    step = math.ceil(n / MAX_TICKS)
    positions = list(range(0, n, step))
    axis.set_ticks([k + 0.47 for k in positions], [label(k) for k in positions])
