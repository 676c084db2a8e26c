"""Drawing a mesh whose devices belong to several processes."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.multiprocess.ownership import ProcessOwnership
from course_utils.viz.palette import process_color


def draw_process_mesh(ownership: ProcessOwnership) -> Figure:
    """Draws a 1-D or 2-D mesh with each device coloured by the process that owns it."""
    owner, position = np.asarray(ownership.owner), np.asarray(ownership.position)
    if owner.ndim > 2:
        raise ValueError(f"draw_process_mesh draws 1-D and 2-D meshes. Received mesh_shape="
                         f"{ownership.mesh_shape}.")
    names = ownership.axis_names if owner.ndim == 2 else (None, *ownership.axis_names)
    owner, position = owner.reshape(-1, owner.shape[-1]), position.reshape(-1, owner.shape[-1])
    rows, cols = owner.shape
    fig = Figure(figsize=(1.6 + 1.4 * cols, 1.3 + 1.0 * rows), layout="constrained")
    ax = fig.subplots()
    for (i, j), p in np.ndenumerate(owner):
        ax.add_patch(_cell(j, rows - 1 - i, process_color(p)))
        ax.text(j + 0.5, rows - 0.5 - i, f"device {position[i, j]}\np{p}", ha="center", va="center",
                color="white", fontsize=10, fontweight="bold")
    ax.set(xlim=(0, cols), ylim=(0, rows), aspect="equal")
    ax.set_xticks(np.arange(cols) + 0.5, [str(j) for j in range(cols)])
    ax.set_yticks(np.arange(rows) + 0.5 if names[0] else [], [str(i) for i in reversed(range(rows))] if names[0] else [])
    ax.set_xlabel(f"axis '{names[1]}'")
    ax.set_ylabel(f"axis '{names[0]}'" if names[0] else "")
    ax.tick_params(length=0)
    processes = int(owner.max()) + 1
    fig.suptitle(f"Mesh {ownership.mesh_shape} {ownership.axis_names} over {processes} processes: "
                 f"colour = owning process", fontsize=10)
    return fig


def _cell(x: float, y: float, color: str):
    return Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, facecolor=color, edgecolor="white")
