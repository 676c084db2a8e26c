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

from course_utils.guards import require_mesh
from course_utils.viz.blocks import holder_names
from course_utils.viz.canvas import Scene, line_height, text_size, to_figure
from course_utils.viz.figures import BLOCK_GID, FONT, MAX_WIDTH, SMALL, chars_across, wrap
from course_utils.viz.palette import MeshColors, mesh_colors, text_color

MAX_TICKS = 16  # per axis; more positions get every k-th tick
MAX_GRID_HEIGHT = 3.4  # inches of cells, top to bottom: a tall mesh still reads on a 16:9 slide


def draw_mesh(mesh, *, title: str | None = None) -> Figure:
    """Draws a `DeviceMesh` as a grid of devices with its axes named.

    1-D meshes are a row, 2-D meshes a grid (first axis down, second across),
    3-D meshes one 2-D slice per position along the first axis. Only
    `mesh.devices` (names or JAX devices), `mesh.shape` and `mesh.axis_names`
    are read, so a mesh of device names draws without the devices.

    Returns:
        A `Figure`; a line inside it says what colours and labels mean.
    """
    return to_figure(mesh_scene(mesh, title=title))


def mesh_scene(mesh, *, title: str | None = None) -> Scene:
    """The `Scene` of `draw_mesh` (the mesh explorer shows it as SVG)."""
    require_mesh(mesh, "draw_mesh")
    devices = np.vectorize(str, otypes=[object])(np.asarray(mesh.devices, dtype=object))
    names = tuple(mesh.axis_names)
    panels = _panels(devices, names, tuple(mesh.shape))
    rows, cols = panels[0][0].shape
    across = min(len(panels), 4)
    down = math.ceil(len(panels) / across)
    cell = min(1.25, (MAX_WIDTH - 1.6 - 0.5 * across) / (across * cols), 6.0 / (down * rows))
    # a tall mesh: cells wider than tall; a row at least a line of its tick label high, so labels never touch
    sized = lambda width: (width, min(max(width, line_height(SMALL)), MAX_GRID_HEIGHT / (down * rows)))
    colors = mesh_colors(devices, names)
    for _ in range(2):  # smaller cells get longer tick labels, which leave less room for the cells
        ticks = [_tick_labels(grid, axis_pair, _labels(*sized(cell))) for grid, axis_pair, _ in panels]
        left = max(_left_room(row_ticks, axis_pair) for (row_ticks, _), (_, axis_pair, _) in zip(ticks, panels))
        cell = min(cell, (MAX_WIDTH - 0.4 - across * (left + 0.3)) / (across * cols))
    size = sized(cell)  # (width, height) of a cell, inches
    below = max((text_size(label, SMALL)[1] for _, col_ticks in ticks for _, label in col_ticks), default=0.0)
    below += 0.1 + line_height(FONT) + 0.15  # the column ticks, then the axis name
    above = line_height(FONT) + 0.1 if panels[0][2] else 0.05
    slot = left + cols * cell + 0.3
    width = max(across * slot + 0.4, 6.5)
    platform = str(devices.flat[0]).split(":")[0].upper()
    heading = wrap(title or (f"DeviceMesh shape={tuple(mesh.shape)}, axis_names={names}: "
                             f"{devices.size} {platform} devices"), chars_across(width, FONT + 2))
    caption = wrap(_legend(colors, _labels(*size), len(names)), chars_across(width, SMALL))
    top, bottom = text_size(heading, FONT + 2)[1] + 0.25, text_size(caption, SMALL)[1] + 0.2
    row_height = above + rows * size[1] + below
    scene = Scene(width, top + down * row_height + bottom)
    scene.text(width / 2, scene.height - 0.12, heading, FONT + 2, va="top")
    scene.text(width / 2, 0.1, caption, SMALL, va="bottom")
    for i, ((grid, axis_pair, outer), panel_ticks) in enumerate(zip(panels, ticks)):
        r, c = divmod(i, across)
        x0 = (width - across * slot) / 2 + c * slot + left
        y0 = scene.height - top - r * row_height - above - rows * size[1]
        _draw_device_grid(scene, (x0, y0), grid, axis_pair, outer, colors, size, panel_ticks)
        if outer:
            scene.text(x0 + cols * cell / 2, y0 + rows * size[1] + 0.08, f"{names[0]} = {outer[0]}: "
                       f"{holder_names(list(grid.flat))}", FONT, va="bottom")
    return scene


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


def _labels(width: float, height: float) -> str:
    """What a cell of this size (inches) is labelled with: "full" (name and coordinate), "name" or "none"."""
    if width >= 0.8 and height >= 0.55:
        return "full"
    return "name" if width >= 0.5 and height >= 0.28 else "none"


def _legend(colors: MeshColors, labels: str, ndim: int) -> str:
    coordinate = "(" + ", ".join(["i", "j", "k"][:ndim]) + ")"
    if labels == "full":
        text = f"each cell: one device, its name and mesh coordinate {coordinate}"
    elif labels == "name":
        text = "each cell: one device, its name (coordinates on the axes)"
    else:
        text = "each cell: one device; too many to name each, the tick labels give the devices of each row or position"
    return f"{text}; {colors.rule}."


def _tick_labels(grid, axis_pair, labels: str) -> tuple[list, list]:
    """(row ticks, column ticks) of a panel: (index, label) pairs, at most `MAX_TICKS` per axis."""
    rows, cols = grid.shape
    row_axis = axis_pair[0]
    col_label = (lambda j: f"{j}\n{grid[0, j]}") if labels == "none" and not row_axis else str
    row_label = (lambda i: f"{i}: {holder_names(list(grid[i]))}") if labels == "none" else str
    col_ticks = [(j, col_label(j)) for j in range(0, cols, math.ceil(cols / MAX_TICKS))]
    row_ticks = [(i, row_label(i)) for i in range(0, rows, math.ceil(rows / MAX_TICKS))] if row_axis else []
    return row_ticks, col_ticks


def _left_room(row_ticks, axis_pair) -> float:
    labels = max((text_size(label, SMALL)[0] for _, label in row_ticks), default=0.0)
    return labels + 0.15 + (line_height(FONT) + 0.1 if axis_pair[0] else 0.0)


def _draw_device_grid(scene: Scene, origin, grid, axis_pair, outer: tuple, colors: MeshColors, size: tuple,
                      ticks) -> None:
    """One 2-D grid of devices, bottom left at `origin`, cells `size` = (width, height) inches; `outer` is
    the slice's coordinate in a 3-D mesh."""
    x0, y0 = origin
    cell, tall = size
    rows, cols = grid.shape
    row_axis, col_axis = axis_pair
    gap = 0.06 * min(size) if min(size) >= 0.3 else 0.0
    top = y0 + rows * tall
    kind = _labels(cell, tall)
    for (i, j), device in np.ndenumerate(grid):
        color = colors[device]
        x, y = x0 + j * cell, top - (i + 1) * tall
        scene.box(x, y + gap, cell - gap, tall - gap, face=color, edge="black",
                  linewidth=0.8 if min(size) >= 0.3 else 0.2, gid=BLOCK_GID)
        coord = str((*outer, i, j) if row_axis else (j,)).replace(",)", ")")
        label = {"full": f"{device}\n{coord}", "name": device, "none": ""}[kind]
        scene.text(x + (cell - gap) / 2, y + gap + (tall - gap) / 2, label, FONT if kind == "full" else SMALL,
                   color=text_color(color), bold=True)
    row_ticks, col_ticks = ticks
    for j, label in col_ticks:
        scene.text(x0 + (j + 0.5) * cell - gap / 2, y0 - 0.06, label, SMALL, va="top")
    for i, label in row_ticks:
        scene.text(x0 - 0.08, top - (i + 0.5) * tall + gap / 2, label, SMALL, ha="right")
    below = max((text_size(label, SMALL)[1] for _, label in col_ticks), default=0.0)
    scene.text(x0 + cols * cell / 2, y0 - 0.1 - below, f"axis '{col_axis}' (size {cols})", FONT, va="top")
    if row_axis:
        labels = max((text_size(label, SMALL)[0] for _, label in row_ticks), default=0.0)
        scene.text(x0 - 0.14 - labels, top - rows * tall / 2, f"axis '{row_axis}' (size {rows})", FONT,
                   rotation=90, va="bottom")
