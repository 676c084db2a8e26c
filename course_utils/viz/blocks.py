"""The marks of one block: its fill or its stack of copies, its small mesh, its holders' names.

A block one device holds is filled with that device's colour. A block
copied on several devices is a pale stack of cards marked "N copies", so a
copy never looks like a split. Each block carries a small picture of the
mesh with its holders lit (where on the mesh it lives) and their names, as
much of that as fits in the block.
"""

from __future__ import annotations

import numpy as np
from matplotlib.offsetbox import AnnotationBbox, DrawingArea, HPacker, TextArea, VPacker
from matplotlib.patches import Rectangle

from course_utils.placements import Placement
from course_utils.viz.figures import BLOCK_GID, SMALL, wrap
from course_utils.viz.palette import COPY_COLOR, UNLIT_COLOR, MeshColors, mesh_colors, text_color

COPIES_GID = "copies"  # the cards stacked behind a block that several devices hold
LIT_GID, UNLIT_GID = "mesh-lit", "mesh-unlit"  # cells of a block's small mesh: holder or not
MINI_MESH_MAX = 64  # more devices than this: no small mesh (its cells would be specks)


def draw_block(add, transform, p: Placement, holders, box, size, colors: MeshColors, *, compact: bool) -> None:
    """Draws one block with its marks.

    Args:
        add: Adds an artist (`ax.add_artist`, or `fig.add_artist` for panels without Axes).
        transform: From tensor coordinates (column, row) to the display.
        p: The placement the block belongs to.
        holders: The devices that hold the block.
        box: (first row, end row, first column, end column) in tensor coordinates.
        size: (width, height) of the block in inches, to fit the labels.
        colors: The mesh's colours.
        compact: Smaller mesh pictures (the panels of `draw_model`).
    """
    r0, r1, c0, c1 = box
    single = len(holders) == 1
    face = colors[holders[0]] if single else COPY_COLOR
    add(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=face if single else "none",
                  edgecolor="black" if single else "#999999", linewidth=1.2 if single else 0.6,
                  gid=BLOCK_GID, zorder=3 if not single else 1, transform=transform))
    if not single:
        _draw_stack(add, transform, box, size, len(holders))
    label = _fit_label(p, holders, size, compact, face)
    if label is not None:
        add(AnnotationBbox(label, ((c0 + c1) / 2, (r0 + r1) / 2), frameon=False, zorder=4,
                           xycoords=transform, annotation_clip=False))


def _draw_stack(add, transform, box, size, copies: int) -> None:
    """A pale card with one or two cards behind it, up and to the right, inside the block."""
    r0, r1, c0, c1 = box
    step_x = min(0.06 * (c1 - c0), 0.08 / max(size[0], 1e-9) * (c1 - c0))
    step_y = min(0.06 * (r1 - r0), 0.08 / max(size[1], 1e-9) * (r1 - r0))
    behind = min(copies - 1, 2)
    for k in reversed(range(behind + 1)):
        add(Rectangle((c0 + k * step_x, r0 + (behind - k) * step_y), c1 - c0 - behind * step_x,
                               r1 - r0 - behind * step_y, facecolor=COPY_COLOR, edgecolor="#222222",
                               linewidth=0.9, zorder=1 + 0.1 * (behind - k), gid=COPIES_GID if k else None,
                         transform=transform))


def _fit_label(p: Placement, holders, size, compact: bool, face: str):
    """The block's small mesh and text, as much of it as fits in `size` (inches); None if nothing fits.

    Tried in order: mesh above the text, mesh beside it, text alone, the
    names one per line, then the count alone (a block too small for any
    label stays unlabelled; the figure's ticks and legend still place it).
    """
    names = holder_names(holders)
    count = f"{len(holders)} copies" if len(holders) > 1 else ""
    mini = _mini_mesh(p, holders, compact) if len(p.devices) <= MINI_MESH_MAX else None
    full = "\n".join(line for line in (count, wrap(names, 18)) if line)
    narrow = "\n".join(([f"\u00d7{len(holders)}"] if count else []) + names.split(", "))
    short = f"\u00d7{len(holders)}" if count else names
    candidates = [(mini, full, False), (mini, full, True), (None, full, False), (mini, narrow, False),
                  (None, narrow, False), (mini, count, True), (None, count, False), (None, short, False)]
    for picture, text, beside in candidates:
        if (text or picture) and _fits(picture, text, beside, size):
            return _packed(picture, text, beside, face)
    return None


def _fits(picture, text: str, beside: bool, size) -> bool:
    lines = text.split("\n") if text else []
    text_w = 0.58 * SMALL * max((len(s) for s in lines), default=0) / 72
    text_h = 1.3 * SMALL * len(lines) / 72
    pic_w, pic_h = (picture.width / 72, picture.height / 72) if picture is not None else (0, 0)
    if beside:
        need = (pic_w + text_w + 0.14, max(pic_h, text_h) + 0.08)
    else:
        need = (max(pic_w, text_w) + 0.08, pic_h + text_h + 0.1)
    return need[0] <= size[0] and need[1] <= size[1]


def _packed(picture, text: str, beside: bool, face: str):
    children = [picture] if picture is not None else []
    if text:
        children.append(TextArea(text, textprops=dict(fontsize=SMALL, ha="center", color=text_color(face))))
    packer = HPacker if beside else VPacker
    return packer(children=children, align="center", pad=0, sep=4)


def _mini_mesh(p: Placement, holders, compact: bool) -> DrawingArea:
    """The mesh as a small grid of cells (points), holders filled with their colour."""
    grid = np.array(p.devices, dtype=object).reshape(p.mesh_shape)
    grid = grid.reshape(1, -1) if grid.ndim == 1 else grid.reshape(grid.shape[0], -1)
    cell = 5.0 if compact or grid.size > 16 else 7.0
    colors = mesh_colors(np.array(p.devices, dtype=object).reshape(p.mesh_shape), p.axis_names)
    area = DrawingArea(cell * grid.shape[1] + 2, cell * grid.shape[0] + 2)
    area.add_artist(Rectangle((0, 0), area.width, area.height, facecolor="white", edgecolor="none"))
    held = set(holders)
    for (i, j), device in np.ndenumerate(grid):
        lit = device in held
        area.add_artist(Rectangle((1 + j * cell, 1 + (grid.shape[0] - 1 - i) * cell), cell, cell,
                                  facecolor=colors[device] if lit else UNLIT_COLOR, edgecolor="#333333",
                                  linewidth=0.5, gid=LIT_GID if lit else UNLIT_GID))
    return area


def holder_names(devices) -> str:
    """Every holder, runs of 3 or more consecutive devices written as a range: "cpu:0-3, cpu:6"."""
    parsed = [(d.rsplit(":", 1)[0], int(d.rsplit(":", 1)[1])) for d in devices]
    runs: list[list] = []
    for kind, number in parsed:
        if runs and runs[-1][0] == kind and runs[-1][2] == number - 1:
            runs[-1][2] = number
        else:
            runs.append([kind, number, number])
    parts = []
    for kind, first, last in runs:
        if last - first >= 2:
            parts.append(f"{kind}:{first}-{last}")
        else:
            parts.extend(f"{kind}:{n}" for n in range(first, last + 1))
    return ", ".join(parts)
