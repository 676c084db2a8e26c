"""Figures as PNG, and returned Figures shown as images in notebooks (without pyplot)."""

from __future__ import annotations

import io

from matplotlib.figure import Figure

BLOCK_GID = "block"  # the gid of every patch that stands for a device or a block, for tests


def figure_png(fig: Figure, *, dpi: int = 100, tight: bool = True, release: bool = False) -> bytes:
    """Renders a Figure to PNG bytes.

    Args:
        fig: The figure.
        dpi: Pixels per inch.
        tight: Crop to the drawn content (one more layout pass: slower).
        release: Clear the figure afterwards, so nothing lingers (explorers redraw often).
    """
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    finally:
        if release:
            fig.clear()
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
