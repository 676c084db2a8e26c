"""The marks of one block: its fill or its stack of copies, its small mesh, its holders' names.

A block one device holds is filled with that device's colour. A block
copied on several devices is a pale stack of cards marked "N copies", so a
copy never looks like a split. Each block carries a small picture of the
mesh with its holders lit (where on the mesh it lives) and their names, as
much of that as fits in the block.

Blocks are drawn on a `Scene` (inches); labels are placed by arithmetic
from the block's centre, and each small mesh is two sets of cells (lit,
unlit): an explorer redraws dozens of blocks per click.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_utils.placements import Placement
from course_utils.viz.canvas import Scene, text_size
from course_utils.viz.figures import BLOCK_GID, SMALL, wrap
from course_utils.viz.palette import COPY_COLOR, UNLIT_COLOR, MeshColors, text_color

COPIES_GID = "copies"  # the cards stacked behind a block that several devices hold
LIT_GID, UNLIT_GID = "mesh-lit", "mesh-unlit"  # the cells of a block's small mesh: holders, the others
MINI_MESH_MAX = 64  # more devices than this: no small mesh (its cells would be specks)
SEP = 4.0  # points between a block's small mesh and its text


def draw_block(scene: Scene, p: Placement, holders, rect, colors: MeshColors, *, compact: bool) -> None:
    """Draws one block with its marks on `scene`.

    Args:
        scene: The scene drawn on.
        p: The placement the block belongs to.
        holders: The devices that hold the block.
        rect: (left, bottom, width, height) of the block, in inches.
        colors: The mesh's colours.
        compact: Smaller mesh pictures (the panels of `draw_model`).
    """
    x, y, w, h = rect
    single = len(holders) == 1
    face = colors[holders[0]] if single else COPY_COLOR
    if single:
        scene.box(x, y, w, h, face=face, edge="black", linewidth=1.2, gid=BLOCK_GID, z=1)
    else:
        scene.box(x, y, w, h, edge="#999999", linewidth=0.6, gid=BLOCK_GID, z=3)
        x, y, w, h = _draw_stack(scene, rect, len(holders))  # the label goes on the front card
    label = fit_label(p, holders, (w, h), compact)
    if label is not None:
        label.draw(scene, (x + w / 2, y + h / 2), colors, face)


def front_card(rect, copies: int) -> tuple:
    """The front card of a block of `copies` copies drawn in `rect`: the block, less the stack behind it."""
    x, y, w, h = rect
    behind = min(copies - 1, 2)
    return (x, y, w - behind * min(0.06 * w, 0.08), h - behind * min(0.06 * h, 0.08))


def _draw_stack(scene: Scene, rect, copies: int) -> tuple:
    """A pale card with one or two cards behind it, up and to the right, inside the block; returns the front card."""
    x, y, w, h = rect
    step_x, step_y = min(0.06 * w, 0.08), min(0.06 * h, 0.08)
    behind = min(copies - 1, 2)
    front = front_card(rect, copies)
    for k in reversed(range(behind + 1)):
        scene.box(x + k * step_x, y + k * step_y, *front[2:], face=COPY_COLOR, edge="#222222", linewidth=0.9,
                  gid=COPIES_GID if k else None, z=1 + 0.1 * (behind - k))
    return front


@dataclass(frozen=True)
class Label:
    """What a block shows inside it: its small mesh (or none), its text, side by side or stacked.

    Sizes are in points, estimated from the font (`canvas.text_size`).
    """

    grid: np.ndarray | None  # the mesh's devices as a 2-D grid, when the small mesh is drawn
    held: frozenset
    cell: float
    text: str
    beside: bool

    @property
    def picture_size(self) -> tuple[float, float]:
        if self.grid is None:
            return 0.0, 0.0
        return self.cell * self.grid.shape[1] + 2, self.cell * self.grid.shape[0] + 2

    @property
    def text_size(self) -> tuple[float, float]:
        width, height = text_size(self.text, SMALL)
        return 72 * width, 72 * height

    @property
    def size(self) -> tuple[float, float]:
        """(width, height) in points, with room around it."""
        (pw, ph), (tw, th) = self.picture_size, self.text_size
        if self.beside:
            return pw + tw + 10, max(ph, th) + 6
        return max(pw, tw) + 6, ph + th + 7

    def fits(self, size_inches) -> bool:
        width, height = self.size
        return width <= 72 * size_inches[0] and height <= 72 * size_inches[1]

    def draw(self, scene: Scene, centre, colors: MeshColors, face: str) -> None:
        """Draws the label centred on `centre` (inches)."""
        (pw, ph), (tw, th) = self.picture_size, self.text_size
        sep = SEP if self.grid is not None and self.text else 0.0
        if self.beside:
            across = pw + sep + tw
            picture_at, text_at = (-across / 2, -ph / 2), (-across / 2 + pw + sep + tw / 2, 0.0)
        else:
            down = ph + sep + th
            picture_at, text_at = (-pw / 2, down / 2 - ph), (0.0, th / 2 - down / 2)
        cx, cy = centre
        if self.grid is not None:
            self._draw_mesh(scene, (cx + picture_at[0] / 72, cy + picture_at[1] / 72), colors)
        scene.text(cx + text_at[0] / 72, cy + text_at[1] / 72, self.text, SMALL, color=text_color(face), z=5)

    def _draw_mesh(self, scene: Scene, origin, colors: MeshColors) -> None:
        """The mesh as a small grid of cells, holders filled with their colour, on a white card."""
        x0, y0 = origin
        pw, ph = self.picture_size
        scene.box(x0, y0, pw / 72, ph / 72, face="white", z=4)
        rows, cols = self.grid.shape
        i, j = np.divmod(np.arange(rows * cols), cols)
        cell = self.cell / 72
        left, bottom = x0 + (1 + j * self.cell) / 72, y0 + (1 + (rows - 1 - i) * self.cell) / 72
        corners = np.array([(0, 0), (1, 0), (1, 1), (0, 1)]) * cell
        cells = np.stack([left, bottom], axis=-1)[:, None, :] + corners  # (cell, corner, x/y)
        devices = list(self.grid.flat)
        lit = np.array([d in self.held for d in devices])
        for chosen, gid in ((lit, LIT_GID), (~lit, UNLIT_GID)):
            if chosen.any():
                faces = [colors[d] for d, on in zip(devices, chosen) if on] if gid == LIT_GID else UNLIT_COLOR
                scene.polygons(cells[chosen], faces, edge="#333333", linewidth=0.5, gid=gid, z=4.5)


def fit_label(p: Placement, holders, size, compact: bool) -> Label | None:
    """The block's small mesh and text, as much of it as fits in `size` (inches); None if nothing fits.

    Tried in order: mesh above the text, mesh beside it, text alone, the
    names one per line, then the count alone (a block too small for any
    label stays unlabelled; the figure's ticks and legend still place it).
    """
    names = holder_names(holders)
    count = f"{len(holders)} copies" if len(holders) > 1 else ""
    grid = mini_grid(p) if len(p.devices) <= MINI_MESH_MAX else None
    cell = 5.0 if compact or (grid is not None and grid.size > 16) else 7.0
    full = "\n".join(line for line in (count, wrap(names, 18)) if line)
    narrow = "\n".join(([f"\u00d7{len(holders)}"] if count else []) + names.split(", "))
    short = f"\u00d7{len(holders)}" if count else names
    candidates = [(grid, full, False), (grid, full, True), (None, full, False), (grid, narrow, False),
                  (None, narrow, False), (grid, count, True), (None, count, False), (None, short, False)]
    held = frozenset(holders)
    for picture, text, beside in candidates:
        label = Label(picture, held, cell, text, beside)
        if (text or picture is not None) and label.fits(size):
            return label
    return None


def mini_grid(p: Placement) -> np.ndarray:
    """The mesh's devices as the 2-D grid a small mesh draws (1-D: one row; 3-D and more: rows by the rest)."""
    grid = np.array(p.devices, dtype=object).reshape(p.mesh_shape)
    return grid.reshape(1, -1) if grid.ndim == 1 else grid.reshape(grid.shape[0], -1)


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
