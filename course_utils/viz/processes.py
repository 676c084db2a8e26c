"""Drawing a mesh whose devices belong to several processes."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.multiprocess.ownership import ProcessOwnership
from course_utils.viz.figures import BLOCK_GID, FONT, SMALL
from course_utils.viz.palette import PROCESS_COLORS, process_color, text_color


def draw_process_mesh(ownership: ProcessOwnership) -> Figure:
    """Draws a 1-D or 2-D mesh with each device coloured by the process that owns it.

    Each cell names its device and its process, so the colour is never the
    only mark; beyond 4 processes cells are grey and the names alone tell them apart.
    Colours here stand for processes, not devices (every other figure gives each
    device its own colour), and the figure says so under the mesh.
    """
    owner, position = np.asarray(ownership.owner), np.asarray(ownership.position)
    if owner.ndim > 2:
        raise ValueError(f"draw_process_mesh draws 1-D and 2-D meshes. Received mesh_shape="
                         f"{ownership.mesh_shape}.")
    names = ownership.axis_names if owner.ndim == 2 else (None, *ownership.axis_names)
    owner, position = owner.reshape(-1, owner.shape[-1]), position.reshape(-1, owner.shape[-1])
    rows, cols = owner.shape
    fig = Figure(figsize=(max(1.6 + 1.4 * cols, 6.5), 1.6 + 1.0 * rows), layout="constrained")
    ax = fig.subplots()
    for (i, j), p in np.ndenumerate(owner):
        color = process_color(int(p))
        ax.add_patch(Rectangle((j + 0.04, rows - 1 - i + 0.04), 0.92, 0.92, facecolor=color,
                               edgecolor="white", gid=BLOCK_GID))
        ax.text(j + 0.5, rows - 0.5 - i, f"device {position[i, j]}\np{p}", ha="center", va="center",
                color=text_color(color), fontsize=FONT, fontweight="bold")
    ax.set(xlim=(0, cols), ylim=(0, rows), aspect="equal")
    ax.set_xticks(np.arange(cols) + 0.5, [str(j) for j in range(cols)])
    ax.set_yticks(np.arange(rows) + 0.5 if names[0] else [], [str(i) for i in reversed(range(rows))] if names[0] else [])
    ax.set_xlabel(f"axis '{names[1]}'", fontsize=FONT)
    ax.set_ylabel(f"axis '{names[0]}'" if names[0] else "", fontsize=FONT)
    ax.tick_params(length=0, labelsize=SMALL)
    processes = int(owner.max()) + 1
    fig.suptitle(f"Mesh {ownership.mesh_shape} {ownership.axis_names} over {processes} processes",
                 fontsize=FONT + 1)
    # The course's other figures give each device its own colour; this one says that here colours change meaning.
    rule = ("Colour = owning process, not device (other figures give each device its own colour)."
            if processes <= len(PROCESS_COLORS) else "Grey: more processes than colours; 'p' names the owner.")
    fig.supxlabel(f"Each cell: its place in the global device list, and 'p' + the process that owns it.\n{rule}",
                  fontsize=SMALL)
    return fig
