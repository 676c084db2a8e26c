"""The base of every explorer: controls, a status line, an SVG drawing that follows them."""

from __future__ import annotations

import contextlib
import html
from collections.abc import Sequence

import ipywidgets as widgets
from course_utils.devices import course_devices
from course_utils.mesh import mesh_shapes
from course_utils.viz.canvas import Scene, to_svg

PX_PER_INCH = 80  # the drawings' size on screen; SVG stays sharp when zoomed or projected
AXIS_NAMES = {1: ("data",), 2: ("data", "model"), 3: ("host", "data", "model")}


def render(scene: Scene) -> bytes:
    """A drawing's scene as SVG bytes for an explorer's `Image` (the browser draws it, in milliseconds)."""
    return to_svg(scene, px_per_inch=PX_PER_INCH).encode()


def picture() -> widgets.Image:
    """An empty SVG `Image` widget shown at its own size (not stretched to the output's width)."""
    return widgets.Image(format="svg+xml", layout=widgets.Layout(align_self="flex-start", max_width="100%"))


class Explorer(widgets.VBox):
    """Controls, a status line and a drawing that follow the controls.

    Attributes:
        message: Why the current choice is impossible ("" when it is fine).
        status: The `HTML` widget showing the state or the message.
        image: The `Image` widget holding the current drawing as SVG.
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
