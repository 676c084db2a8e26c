"""The course's colours, in one place: every figure and explorer takes them from here."""

from __future__ import annotations

from matplotlib import colormaps

_DEVICES = list(colormaps["tab10"].colors) + list(colormaps["tab20b"].colors)
_PROCESSES = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
MEMORY_COLORS = {"weights": "#4c72b0", "gradients": "#dd8452", "optimizer": "#55a868"}
REPLICA_GREY = "#e6e6e6"


def device_color(device) -> tuple:
    """The colour of a device (`"cpu:3"` or its id) in every course figure."""
    index = int(str(device).rsplit(":", 1)[-1])
    return _DEVICES[index % len(_DEVICES)]


def process_color(process: int) -> str:
    """The colour of a process in the course's multi-process figures."""
    return _PROCESSES[process % len(_PROCESSES)]
