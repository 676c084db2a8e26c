"""The base of every explorer: controls, a status line, a PNG drawing that follows them."""

from __future__ import annotations

import contextlib
import html
from collections.abc import Sequence

import ipywidgets as widgets
from matplotlib.figure import Figure

from course_utils.devices import course_devices
from course_utils.mesh import mesh_shapes
from course_utils.viz.figures import figure_png

DPI = 80  # low enough to redraw in well under 150 ms, sharp enough to read
AXIS_NAMES = {1: ("data",), 2: ("data", "model"), 3: ("host", "data", "model")}


def render_png(fig: Figure, *, dpi: int = DPI) -> bytes:
    """Renders a Figure to PNG bytes at the explorers' resolution, then clears it so nothing lingers."""
    return figure_png(fig, dpi=dpi, tight=False, release=True, compress_level=1)


def picture() -> widgets.Image:
    """An empty PNG `Image` widget shown at its own size (not stretched to the output's width)."""
    return widgets.Image(format="png", layout=widgets.Layout(align_self="flex-start", max_width="100%"))


class Explorer(widgets.VBox):
    """Controls, a status line and a drawing that follow the controls.

    Attributes:
        message: Why the current choice is impossible ("" when it is fine).
        status: The `HTML` widget showing the state or the message.
        image: The `Image` widget holding the current drawing as PNG.
    """

    def __init__(self, title: str, controls: Sequence[widgets.Widget], watched: Sequence[widgets.Widget]):
        self.message = ""
        self.status = widgets.HTML()
        self.image = picture()
        self._held = False
        for control in watched:
            control.observe(self._changed, names="value")
        super().__init__([widgets.HTML(f"<b>{html.escape(title)}</b>"), *controls, self.status, self.image])

    @contextlib.contextmanager
    def hold(self):
        """Changes several controls at once with a single redraw at the end."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
        self.refresh()

    def _changed(self, _change=None) -> None:
        if not self._held:
            self.refresh()

    def refresh(self) -> None:
        """Recomputes the state from the controls and redraws it."""
        try:
            status = self._update()
        except ValueError as error:
            self._show_problem(str(error))
            return
        self.message = ""
        self.status.value = status

    def _show_problem(self, message: str) -> None:
        self._clear_state()
        self.message = message
        lines = "<br>".join(html.escape(line) for line in message.splitlines())
        self.status.value = (
            f"<div style='color:#b00020;border-left:4px solid #b00020;padding-left:8px'>"
            f"<b>Not possible:</b> {lines}<br><i>The drawing still shows the last valid choice.</i></div>")

    def _update(self) -> str:
        raise NotImplementedError

    def _clear_state(self) -> None:
        raise NotImplementedError


def device_count() -> int:
    """How many devices the explorers lay out by default: the course's devices."""
    return len(course_devices())


def squarest(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return min(shapes, key=lambda s: max(s) / min(s))


def shape_options(n_devices: int, ndim: int) -> list[tuple[str, tuple[int, ...]]]:
    return [(" x ".join(map(str, s)), s) for s in mesh_shapes(n_devices, ndim)]
