"""Figures as PNG, shown in notebooks without pyplot, and measured as a projector shows them."""

from __future__ import annotations

import io
import re

from matplotlib.figure import Figure
from matplotlib.text import Text

BLOCK_GID = "block"  # the gid of every patch that stands for a device or a block, for tests
PROJECTOR_PX = 1280  # a slide's width on a projector, in CSS pixels
CSS_PX_PER_INCH = 96  # CSS: 96 px per inch, 72 pt per inch
MIN_PROJECTED_PT = 8
FONT = 10  # the course's text size in figures; small labels use SMALL
SMALL = 9
MAX_WIDTH = 13.0  # inches: at SMALL pt, text stays >= 9 pt when the figure is shown 1280 px wide


def figure_png(fig: Figure, *, dpi: int = 100, tight: bool = True) -> bytes:
    """Renders a Figure to PNG bytes.

    Args:
        fig: The figure.
        dpi: Pixels per inch.
        tight: Crop to the drawn content, with 0.1 in of padding.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    return buffer.getvalue()


def show_figures_in_notebooks() -> None:
    """Lets a returned Figure display as an image in IPython, with or without pyplot."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


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
    """Wraps at spaces and after '/' (variable paths), `width` characters a line."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for token in re.split(r"(?<=[/ ])", paragraph):
            if line and len(line) + len(token.rstrip()) > width:
                lines.append(line.rstrip())
                line = ""
            line += token
        lines.append(line.rstrip())
    return "\n".join(lines)


def chars_across(width: float, fontsize: float) -> int:
    """About how many characters of `fontsize` pt fit across `width` inches (DejaVu Sans, mixed text)."""
    return max(12, int(width * 72 / (0.52 * fontsize)) - 2)
