"""The marks of one block: its fill or its stack of copies, its small mesh, its holders' names.

A block one device holds is filled with that device's colour. A block
copied on several devices is a pale stack of cards marked "N copies", so a
copy never looks like a split. Each block carries a small picture of the
mesh with its holders lit (where on the mesh it lives) and their names, as
much of that as fits in the block.

Labels are placed by arithmetic in points from the block's centre (no
offset boxes) and each small mesh is two collections (lit and unlit cells):
an explorer redraws dozens of blocks per click.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Affine2D, ScaledTranslation

from course_utils.placements import Placement
from course_utils.viz.figures import BLOCK_GID, SMALL, wrap
from course_utils.viz.palette import COPY_COLOR, UNLIT_COLOR, MeshColors, text_color

COPIES_GID = "copies"  # the cards stacked behind a block that several devices hold
LIT_GID, UNLIT_GID = "mesh-lit", "mesh-unlit"  # the cells of a block's small mesh: holders, the others
MINI_MESH_MAX = 64  # more devices than this: no small mesh (its cells would be specks)
SEP = 4.0  # points between a block's small mesh and its text


def draw_block(parent, transform, p: Placement, holders, box, size, colors: MeshColors, *, compact: bool) -> None:
    """Draws one block with its marks.

    Args:
        parent: The `Axes` or `Figure` the block is drawn on.
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
    parent.add_artist(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=face if single else "none",
                                edgecolor="black" if single else "#999999", linewidth=1.2 if single else 0.6,
                                gid=BLOCK_GID, zorder=3 if not single else 1, transform=transform))
    if not single:
        _draw_stack(parent, transform, box, size, len(holders))
    label = fit_label(p, holders, size, compact)
    if label is not None:
        # Points measured from the block's centre, whatever the block's own coordinates.
        points = (Affine2D().scale(1 / 72) + parent.figure.dpi_scale_trans
                  + ScaledTranslation((c0 + c1) / 2, (r0 + r1) / 2, transform))
        label.draw(parent, points, colors, face)


def _draw_stack(parent, transform, box, size, copies: int) -> None:
    """A pale card with one or two cards behind it, up and to the right, inside the block."""
    r0, r1, c0, c1 = box
    step_x = min(0.06 * (c1 - c0), 0.08 / max(size[0], 1e-9) * (c1 - c0))
    step_y = min(0.06 * (r1 - r0), 0.08 / max(size[1], 1e-9) * (r1 - r0))
    behind = min(copies - 1, 2)
    for k in reversed(range(behind + 1)):
        parent.add_artist(Rectangle((c0 + k * step_x, r0 + (behind - k) * step_y), c1 - c0 - behind * step_x,
                                    r1 - r0 - behind * step_y, facecolor=COPY_COLOR, edgecolor="#222222",
                                    linewidth=0.9, zorder=1 + 0.1 * (behind - k), gid=COPIES_GID if k else None,
                                    transform=transform))


@dataclass(frozen=True)
class Label:
    """What a block shows inside it: its small mesh (or none), its text, side by side or stacked.

    Sizes are in points, estimated from the font (DejaVu Sans at `SMALL` pt).
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
        lines = self.text.split("\n") if self.text else []
        return 0.58 * SMALL * max((len(s) for s in lines), default=0), 1.3 * SMALL * len(lines)

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

    def draw(self, parent, points, colors: MeshColors, face: str) -> None:
        """Draws the label centred on the origin of `points` (a transform from points to the display)."""
        (pw, ph), (tw, th) = self.picture_size, self.text_size
        sep = SEP if self.grid is not None and self.text else 0.0
        if self.beside:
            across = pw + sep + tw
            picture_at, text_at = (-across / 2, -ph / 2), (-across / 2 + pw + sep + tw / 2, 0.0)
        else:
            down = ph + sep + th
            picture_at, text_at = (-pw / 2, down / 2 - ph), (0.0, th / 2 - down / 2)
        if self.grid is not None:
            self._draw_mesh(parent, points, picture_at, colors)
        if self.text:
            parent.add_artist(Text(*text_at, self.text, transform=points, ha="center", va="center",
                                   fontsize=SMALL, color=text_color(face), zorder=5, clip_on=False))

    def _draw_mesh(self, parent, points, origin, colors: MeshColors) -> None:
        """The mesh as a small grid of cells, holders filled with their colour, on a white card."""
        x0, y0 = origin
        pw, ph = self.picture_size
        parent.add_artist(Rectangle((x0, y0), pw, ph, facecolor="white", edgecolor="none", transform=points,
                                    zorder=4, clip_on=False))
        rows, cols = self.grid.shape
        i, j = np.divmod(np.arange(rows * cols), cols)
        left, bottom = x0 + 1 + j * self.cell, y0 + 1 + (rows - 1 - i) * self.cell
        corners = np.array([(0, 0), (1, 0), (1, 1), (0, 1)]) * self.cell
        cells = np.stack([left, bottom], axis=-1)[:, None, :] + corners  # (cell, corner, x/y)
        devices = list(self.grid.flat)
        lit = np.array([d in self.held for d in devices])
        for chosen, gid in ((lit, LIT_GID), (~lit, UNLIT_GID)):
            if chosen.any():
                faces = [colors[d] for d, on in zip(devices, chosen) if on] if gid == LIT_GID else UNLIT_COLOR
                parent.add_artist(PolyCollection(cells[chosen], facecolors=faces, edgecolors="#333333",
                                                 linewidths=0.5, transform=points, gid=gid, zorder=4.5,
                                                 clip_on=False))


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
