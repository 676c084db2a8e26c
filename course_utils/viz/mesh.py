"""Drawing a device mesh: a grid of devices with its axes named."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.viz.figures import BLOCK_GID
from course_utils.viz.palette import device_color


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
