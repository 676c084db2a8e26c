"""The course's colours, in one place: devices, processes, memory kinds.

Every figure and explorer takes its colours from here. The 8 device colours
were chosen so that every pair stays apart (CIEDE2000 >= 19, and apart from
the white background) for normal vision and simulated protanopia,
deuteranopia and tritanopia (`course_utils.viz.vision`); tests recompute
those distances. Colour is never the only mark: every figure also names the
devices in text.

Beyond 8 devices a colour can no longer name a device. `mesh_colors` then
colours by mesh row (or column, or runs of devices) and says so in words;
the labels carry identity. No colour is ever silently reused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from course_utils.devices import device_name
from course_utils.viz.vision import to_lab

#: Device i of a mesh of at most 8 devices: rose, indigo, sand, green, sky, wine, teal, olive.
DEVICE_COLORS = ("#be4664", "#5f41aa", "#fad291", "#005a05", "#aacdff", "#5f0037", "#469b96", "#9b9600")
#: Process p of a multi-process run (at most 4 colours; beyond, labels alone name processes).
PROCESS_COLORS = ("#002b62", "#5b606e", "#a19975", "#f3db42")
#: Bytes per device, by kind (Paul Tol's high-contrast scheme).
MEMORY_COLORS = {"weights": "#004488", "gradients": "#ddaa33", "optimizer": "#bb5566"}
#: What a training step adds to them at its peak (a light blue, near-black and light grey: apart from the three above).
STEP_COLORS = {"activations": "#77aadd", "gathered": "#222222", "scratch": "#dddddd"}
#: Micro-batch m of a pipeline's schedule (Paul Tol's "light" scheme, made for labelled cells: black text reads
#: on each; the label "F3" / "B3" names the micro-batch, so colour is never its only mark).
MICRO_BATCH_COLORS = ("#77aadd", "#ee8866", "#eedd88", "#ffaabb", "#99ddff", "#44bb99", "#bbcc33", "#aaaa00")
#: A block copied on several devices, and cells of the mesh that do not hold it.
COPY_COLOR = "#f2f2f2"
UNLIT_COLOR = "#ffffff"
NEUTRAL_COLOR = "#c8c8c8"


def device_index(device) -> int:
    """The number of a device: 3 for "cpu:3", for a JAX device with id 3, or for 3."""
    device = getattr(device, "id", device)
    try:
        return int(str(device).rsplit(":", 1)[-1])
    except ValueError:
        raise ValueError(f"Expected a device such as 'cpu:3', a JAX device or an int. Received: {device!r}.") from None


def device_color(device) -> str:
    """The colour of a device (`"cpu:3"`, a JAX device or its number) in every course figure.

    Raises:
        ValueError: for device 8 and above; use `mesh_colors` for bigger meshes.
    """
    index = device_index(device)
    if index >= len(DEVICE_COLORS):
        raise ValueError(f"Device {device!r}: the course palette names {len(DEVICE_COLORS)} devices. "
                         f"For bigger meshes colour by mesh row with mesh_colors(devices, axis_names).")
    return DEVICE_COLORS[index]


def process_color(process: int) -> str:
    """The colour of a process in the multi-process figures (at most 4; see `PROCESS_COLORS`)."""
    if not 0 <= process < len(PROCESS_COLORS):
        return NEUTRAL_COLOR
    return PROCESS_COLORS[process]


def text_color(background) -> str:
    """Black or white, whichever reads better on `background`."""
    from matplotlib.colors import to_rgb

    return "black" if to_lab(np.asarray(to_rgb(background)))[0] > 60 else "white"


@dataclass(frozen=True)
class MeshColors:
    """The colour of every device of one mesh, and the rule in words.

    Attributes:
        colors: device name -> colour.
        rule: What a colour means in this figure, e.g. "colour = device".
        by_device: True when each device has a colour of its own.
    """

    colors: dict
    rule: str
    by_device: bool

    def __getitem__(self, device) -> str:
        return self.colors[str(device)]


def mesh_colors(devices, axis_names=()) -> MeshColors:
    """Colours for the devices of a mesh, never repeating one within it.

    Args:
        devices: The mesh's devices, any shape (mesh order), as names or JAX devices.
        axis_names: The mesh's axis names, for the rule's words.

    Returns:
        Each device its own colour for at most 8 devices numbered below 8;
        otherwise one colour per mesh row (first axis), per column (last
        axis), or per run of consecutive devices, whichever needs at most 8.
    """
    grid = np.vectorize(lambda d: str(d) if isinstance(d, str) else device_name(d), otypes=[object])(
        np.asarray(devices, dtype=object))
    names = list(grid.flat)
    if len(names) <= len(DEVICE_COLORS) and all(device_index(d) < len(DEVICE_COLORS) for d in names):
        return MeshColors({d: device_color(d) for d in names}, "colour = device", True)
    axis_names = tuple(axis_names) or tuple(f"axis {i}" for i in range(grid.ndim))
    n = len(DEVICE_COLORS)
    if grid.ndim > 1 and 1 < grid.shape[0] <= n:
        groups = [list(grid[i].flat) for i in range(grid.shape[0])]
        return _grouped(groups, f"colour = mesh row ('{axis_names[0]}' index)")
    if grid.ndim > 1 and 1 < grid.shape[-1] <= n:
        groups = [list(grid[..., j].flat) for j in range(grid.shape[-1])]
        return _grouped(groups, f"colour = mesh column ('{axis_names[-1]}' index)")
    run = math.ceil(len(names) / n)
    groups = [names[i:i + run] for i in range(0, len(names), run)]
    return _grouped(groups, f"colour = run of {run} consecutive devices")


def _grouped(groups, rule: str) -> MeshColors:
    colors = {d: DEVICE_COLORS[g] for g, members in enumerate(groups) for d in members}
    return MeshColors(colors, f"{rule}; labels name the devices", False)
