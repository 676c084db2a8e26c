"""Figures as PNG, shown in notebooks without pyplot, and measured as a projector shows them."""

from __future__ import annotations

import io

from matplotlib.figure import Figure
from matplotlib.text import Text

BLOCK_GID = "block"  # the gid of every patch that stands for a device or a block, for tests
PROJECTOR_PX = 1280  # a slide's width on a projector, in CSS pixels
CSS_PX_PER_INCH = 96  # CSS: 96 px per inch, 72 pt per inch
MIN_PROJECTED_PT = 8
FONT = 12  # the course's text size in figures; small labels use SMALL
SMALL = 11
# inches: a figure this wide, shown across a 1280 x 720 slide (1234 px of room), shows SMALL text
# at SMALL * 1234 / (72 * MAX_WIDTH) = 18 px, readable from the back of a lecture room
MAX_WIDTH = 10.5


SMALLEST_TEXT_KEY = "course:smallest-text-px"  # PNG text chunk: the figure's smallest text, in the PNG's pixels
NOTEBOOK_DPI = 200  # figures in notebooks are drawn at 200 dpi and shown at 100: sharp when a deck enlarges them
SHOWN_DPI = 100


def figure_png(fig: Figure, *, dpi: int = 100, tight: bool = True) -> bytes:
    """Renders a Figure to PNG bytes, its smallest text's height in pixels written inside.

    The PNG carries a text chunk `SMALLEST_TEXT_KEY`: the font size of the
    smallest visible text, in the PNG's own pixels (`pt / 72 * dpi`). Shown at
    `d` pixels wide, a PNG `w` pixels wide shows that text at `size * d / w` px:
    the deck test reads it so to check that a figure reads from the back row.

    Args:
        fig: The figure.
        dpi: Pixels per inch.
        tight: Crop to the drawn content, with 0.1 in of padding.
    """
    smallest = smallest_text_pt(fig)
    metadata = {SMALLEST_TEXT_KEY: f"{smallest / 72 * dpi:.2f}"} if smallest else {}
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata=metadata, **({"bbox_inches": "tight"} if tight else {}))
    return buffer.getvalue()


def smallest_text_pt(fig: Figure) -> float | None:
    """The font size, in points, of the smallest visible text of `fig` (None when it has none)."""
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if _shown(t)]
    return min(sizes) if sizes else None


def smallest_text_px(png: bytes) -> float | None:
    """The smallest text's size in the PNG's pixels, as `figure_png` wrote it (None: not written)."""
    from PIL import Image

    value = Image.open(io.BytesIO(png)).text.get(SMALLEST_TEXT_KEY)
    return float(value) if value else None


def notebook_png(fig: Figure):
    """A figure as a notebook shows it: drawn at `NOTEBOOK_DPI`, shown at `SHOWN_DPI` (its `width`)."""
    png = figure_png(fig, dpi=NOTEBOOK_DPI)
    from PIL import Image

    width = Image.open(io.BytesIO(png)).width
    return png, {"width": round(width * SHOWN_DPI / NOTEBOOK_DPI)}


def show_figures_in_notebooks(shell=None) -> None:
    """Lets a Figure a cell returns display as an image in IPython (`shell`, or the running one), with or
    without pyplot, drawn at `NOTEBOOK_DPI` and shown at `SHOWN_DPI`. A lesson asks for it in its imports cell,
    `%load_ext course_utils.viz`; importing the package changes no display."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, notebook_png)


def projected_sizes(fig: Figure) -> list[tuple[str, float]]:
    """Every visible text of `fig` with its size when the figure is shown 1280 px wide.

    The figure is rendered as `figure_png` does (cropped to its content, 0.1 in
    of padding), scaled to 1280 CSS pixels wide, and each text's font size
    read in CSS points (96 px per inch, 72 pt per inch): a font of `s` pt in a
    figure `w` inches wide shows at `s * 1280 / (w * 96)` pt. Below 8 pt a text
    is unreadable from the back of a lecture room.

    Returns:
        (text, projected size in pt) for every non-empty visible text.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width = fig.get_tightbbox(canvas.get_renderer()).width + 0.2  # inches, with savefig's padding
    scale = PROJECTOR_PX / (width * CSS_PX_PER_INCH)
    return [(t.get_text(), t.get_fontsize() * scale) for t in fig.findobj(Text) if _shown(t)]


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip()) and (text.axes is None or text.axes.get_visible())


def wrap(text: str, width: int) -> str:
    """Wraps at spaces and after '/' (variable paths), `width` characters a line; never inside parentheses, so a
    shape such as (4, 64, 16) stays on one line."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for token in _breakable(paragraph):
            if line and len(line) + len(token.rstrip()) > width:
                lines.append(line.rstrip())
                line = ""
            line += token
        lines.append(line.rstrip())
    return "\n".join(lines)


def _breakable(paragraph: str) -> list[str]:
    """`paragraph` cut after each space or '/' outside parentheses."""
    tokens, token, depth = [], "", 0
    for char in paragraph:
        token += char
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char in " /" and depth <= 0:
            tokens.append(token)
            token = ""
    return tokens + [token] if token else tokens


def chars_across(width: float, fontsize: float) -> int:
    """About how many characters of `fontsize` pt fit across `width` inches (DejaVu Sans, mixed text)."""
    return max(12, int(width * 72 / (0.52 * fontsize)) - 2)
