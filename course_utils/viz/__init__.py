"""Drawings of the course's data: meshes, placements, models, batch splits, memory, processes, will it fit.

`mesh` draws a mesh, `tensor` one tensor's blocks (and a batch split), `model` every weight of a
model and its memory, `panels` the tensor panels those two share, `blocks` the marks of one block,
`bars` bytes per device, `communication` the bytes each mesh axis carries per step, `processes`
devices by process, `fit` a `memory.fit.FitReport`, `advice` the advisor's ranking and a roofline, `pipeline` a
pipeline's schedule, `sequence` what a block keeps as the sequence grows and the steps of ring attention, `serving` a decode step's two
clocks.

Every function returns a `matplotlib.figure.Figure` and never shows it; the
notebook decides. Figures are built without pyplot, so nothing accumulates in
a global figure list. Meshes, placements and models are first laid out on a
`canvas.Scene` (plain data, in inches), which the explorers show as SVG. Colours come from
`palette` (checked for colour-vision deficiencies with `vision`): a device keeps one colour in every figure, and
its name is always written too. Each figure says in words what its marks
mean. Nothing in the teaching library imports this package, and importing it
changes no display: a notebook asks for the course's figures with
`%load_ext course_utils.viz`.
"""

from course_utils.viz.advice import draw_advice, draw_roofline
from course_utils.viz.figures import BLOCK_GID, figure_png, projected_sizes, show_figures_in_notebooks
from course_utils.viz.mesh import draw_mesh
from course_utils.viz.model import draw_bytes, draw_memory, draw_memory_by, draw_model
from course_utils.viz.palette import DEVICE_COLORS, device_color, mesh_colors, process_color
from course_utils.viz.communication import draw_collectives_by
from course_utils.viz.fit import draw_fit
from course_utils.viz.pipeline import draw_schedule
from course_utils.viz.processes import draw_process_mesh
from course_utils.viz.sequence import draw_block_memory, draw_ring
from course_utils.viz.serving import draw_decode
from course_utils.viz.tensor import draw_batch_split, draw_placement


def load_ipython_extension(shell) -> None:
    """`%load_ext course_utils.viz` (each lesson's imports cell): the figures a cell returns show below it."""
    show_figures_in_notebooks(shell)


__all__ = ["BLOCK_GID", "DEVICE_COLORS", "device_color", "draw_advice", "draw_batch_split", "draw_block_memory", "draw_bytes",
           "draw_collectives_by", "draw_decode",
           "draw_fit", "draw_memory", "draw_memory_by", "draw_mesh", "draw_model", "draw_placement", "draw_process_mesh",
           "draw_ring", "draw_roofline", "draw_schedule",
           "figure_png", "load_ipython_extension", "mesh_colors", "process_color", "projected_sizes"]
