"""A figure as plain data: boxes, polygons, lines and texts placed in inches, drawn two ways.

Every placement drawing (meshes, tensors, models) first lays itself out on a
`Scene`: origin at the bottom left, positions in inches, font sizes in
points. Text sizes are estimated from the font (`text_size`), so nothing is
measured while laying out. A scene then becomes a matplotlib `Figure` for
lessons, pages and slides (`to_figure`), or an SVG document for the
explorers (`to_svg`): a browser draws it in milliseconds, and it stays sharp
on a projector at any size.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure

FONT_FAMILY = "DejaVu Sans, Bitstream Vera Sans, Verdana, Arial, sans-serif"  # matplotlib's own first
CHAR_WIDTH = 0.58  # average character width of DejaVu Sans, in ems (mixed text, digits, ':')
LINE_HEIGHT = 1.3  # distance between lines, in ems (matplotlib's 1.2 line spacing of a line's height)


def line_height(size: float) -> float:
    """Inches from one line of `size` pt text to the next."""
    return LINE_HEIGHT * size / 72


def text_size(text: str, size: float) -> tuple[float, float]:
    """(width, height) in inches that `text` takes at `size` pt (estimated, every line counted)."""
    lines = text.split("\n") if text else []
    return CHAR_WIDTH * size * max((len(s) for s in lines), default=0) / 72, line_height(size) * len(lines)


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float
    face: str = "none"
    edge: str = "none"
    linewidth: float = 0.0
    hatch: str = ""  # matplotlib's hatch patterns; "//" and ".." are drawn in SVG too
    gid: str | None = None
    z: float = 1.0


@dataclass(frozen=True, eq=False)
class Polygons:
    corners: np.ndarray  # (polygons, corners, 2) in inches
    faces: tuple[str, ...]
    edge: str = "none"
    linewidth: float = 0.0
    gid: str | None = None
    z: float = 1.0


@dataclass(frozen=True)
class Line:
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str = "black"
    linewidth: float = 0.8
    z: float = 2.0


@dataclass(frozen=True)
class Words:
    x: float
    y: float
    text: str
    size: float
    ha: str = "center"  # left, center, right
    va: str = "center"  # top, center, bottom
    color: str = "black"
    rotation: float = 0.0  # degrees, counter-clockwise
    bold: bool = False
    z: float = 5.0


@dataclass
class Scene:
    """A page `width` x `height` inches and what is drawn on it, in drawing order within each z."""

    width: float
    height: float
    items: list = field(default_factory=list)

    def box(self, x, y, width, height, **style) -> None:
        self.items.append(Box(x, y, width, height, **style))

    def polygons(self, corners, faces, **style) -> None:
        corners = np.asarray(corners, dtype=float)
        faces = (faces,) * len(corners) if isinstance(faces, str) else tuple(faces)
        self.items.append(Polygons(corners, faces, **style))

    def line(self, xs, ys, **style) -> None:
        self.items.append(Line(tuple(xs), tuple(ys), **style))

    def text(self, x, y, text: str, size: float, **style) -> None:
        if text:
            self.items.append(Words(x, y, text, size, **style))

    def ordered(self) -> list:
        return sorted(self.items, key=lambda item: item.z)


def to_figure(scene: Scene) -> Figure:
    """The scene as a matplotlib `Figure`: one artist per item, placed in inches (no Axes)."""
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import Affine2D

    fig = Figure(figsize=(scene.width, scene.height))
    # Through the figure's own frame, which savefig(bbox_inches="tight") moves when it crops.
    inches = Affine2D().scale(1 / scene.width, 1 / scene.height) + fig.transFigure
    for item in scene.items:
        if isinstance(item, Box):
            fig.add_artist(Rectangle((item.x, item.y), item.width, item.height, facecolor=item.face,
                                     edgecolor=item.edge, linewidth=item.linewidth, hatch=item.hatch or None,
                                     gid=item.gid, zorder=item.z, transform=inches))
        elif isinstance(item, Polygons):
            fig.add_artist(PolyCollection(item.corners, facecolors=item.faces, edgecolors=item.edge,
                                          linewidths=item.linewidth, gid=item.gid, zorder=item.z,
                                          transform=inches))
        elif isinstance(item, Line):
            fig.add_artist(Line2D(item.xs, item.ys, color=item.color, linewidth=item.linewidth,
                                  zorder=item.z, transform=inches))
        else:
            fig.text(item.x, item.y, item.text, transform=inches, fontsize=item.size, ha=item.ha, va=item.va,
                     color=item.color, rotation=item.rotation, fontweight="bold" if item.bold else "normal",
                     zorder=item.z, rotation_mode="anchor" if item.rotation else "default")
    return fig


_HATCHES = {
    "//": '<path d="M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2" stroke="white" stroke-width="0.8"/>',
    "..": '<circle cx="3" cy="3" r="0.9" fill="white"/>',
}


def to_svg(scene: Scene, *, px_per_inch: float = 96) -> str:
    """The scene as an SVG document, `px_per_inch` CSS pixels per inch (the browser scales it freely)."""
    width, height = scene.width * 72, scene.height * 72  # user units: points
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{scene.width * px_per_inch:.0f}" '
           f'height="{scene.height * px_per_inch:.0f}" viewBox="0 0 {width:.2f} {height:.2f}" '
           f'font-family="{FONT_FAMILY}">',
           "<defs>" + "".join(f'<pattern id="hatch{i}" width="6" height="6" patternUnits="userSpaceOnUse">'
                              f"{body}</pattern>" for i, body in enumerate(_HATCHES.values())) + "</defs>",
           f'<rect width="{width:.2f}" height="{height:.2f}" fill="white"/>']
    for item in scene.ordered():
        out.append(_svg_item(item, height))
    out.append("</svg>")
    return "\n".join(out)


def _svg_item(item, height: float) -> str:
    def y(inches: float) -> float:  # SVG's y grows downwards, in points
        return height - 72 * inches

    if isinstance(item, Box):
        x0, y0, w, h = 72 * item.x, y(item.y + item.height), 72 * item.width, 72 * item.height
        rect = (f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}" fill="{_paint(item.face)}"'
                f'{_stroke(item.edge, item.linewidth)}/>')
        if item.hatch in _HATCHES:
            pattern = list(_HATCHES).index(item.hatch)
            rect += f'<rect x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}" fill="url(#hatch{pattern})"/>'
        return rect
    if isinstance(item, Polygons):
        stroke = _stroke(item.edge, item.linewidth)
        return "".join(f'<path d="{_path(corners, y)}" fill="{_paint(face)}"{stroke}/>'
                       for corners, face in zip(item.corners, item.faces))
    if isinstance(item, Line):
        points = " ".join(f"{72 * a:.2f},{y(b):.2f}" for a, b in zip(item.xs, item.ys))
        return f'<polyline points="{points}" fill="none"{_stroke(item.color, item.linewidth)}/>'
    return _svg_text(item, y)


def _svg_text(item: Words, y) -> str:
    lines = item.text.split("\n")
    step = LINE_HEIGHT * item.size
    x0, y0 = 72 * item.x, y(item.y)
    # Baseline of the first line, measured in the text's own frame (before rotation).
    first = {"top": 0.8 * item.size, "center": 0.36 * item.size - step * (len(lines) - 1) / 2,
             "bottom": -0.22 * item.size - step * (len(lines) - 1)}[item.va]
    anchor = {"left": "start", "center": "middle", "right": "end"}[item.ha]
    spans = "".join(f'<tspan x="{x0:.2f}" y="{y0 + first + k * step:.2f}">{html.escape(line)}</tspan>'
                    for k, line in enumerate(lines))
    turn = f' transform="rotate({-item.rotation:g} {x0:.2f} {y0:.2f})"' if item.rotation else ""
    weight = ' font-weight="bold"' if item.bold else ""
    return (f'<text font-size="{item.size:g}" text-anchor="{anchor}" fill="{_paint(item.color)}"'
            f'{weight}{turn}>{spans}</text>')


def _path(corners, y) -> str:
    return "M" + " L".join(f"{72 * a:.2f},{y(b):.2f}" for a, b in corners) + " Z"


def _paint(color: str) -> str:
    return "none" if color in ("none", None) else html.escape(str(color))


def _stroke(color: str, width: float) -> str:
    if color in ("none", None) or width <= 0:
        return ""
    return f' stroke="{_paint(color)}" stroke-width="{width:g}"'
