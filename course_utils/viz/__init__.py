"""Drawings of the course's data: meshes, placements, models, batch splits, memory, processes.

Every function returns a `matplotlib.figure.Figure` and never shows it; the
notebook decides. Figures are built without pyplot, so nothing accumulates in
a global figure list. Colours come from `palette`: a device keeps one colour
in every figure. Nothing in the teaching library imports this package.
"""

from course_utils.viz.figures import BLOCK_GID, figure_png, show_figures_in_notebooks
from course_utils.viz.mesh import draw_mesh
from course_utils.viz.model import draw_memory, draw_model
from course_utils.viz.palette import device_color, process_color
from course_utils.viz.placement import draw_batch_split, draw_placement
from course_utils.viz.processes import draw_process_mesh

show_figures_in_notebooks()

__all__ = ["BLOCK_GID", "device_color", "draw_batch_split", "draw_memory", "draw_mesh", "draw_model",
           "draw_placement", "draw_process_mesh", "figure_png", "process_color"]
