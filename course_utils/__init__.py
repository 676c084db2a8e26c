"""Support package for the course on device meshes with Keras 3 on JAX.

Everything here runs the real `keras.distribution` code and returns real
Keras and JAX objects; the package adds checks, tables and drawings. Call
`setup_devices` first, before anything starts JAX.
"""

import os

# The course runs Keras on JAX; importing this package must not let a later
# `import keras` fall back to another backend.
os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils.checkpoints import load_checkpoint, save_checkpoint
from course_utils.costs import CommunicationReport, MemoryReport, communication_report, memory_report
from course_utils.devices import DeviceSetup, DeviceSetupError, current_setup, setup_devices
from course_utils.exercises import check
from course_utils.layout import LayoutMapError, LayoutReport, Problem, check_layout_map, explain_layout, make_layout_map
from course_utils.lesson import expect_error
from course_utils.mesh import describe_mesh, make_mesh, mesh_shapes
from course_utils.multiprocess import (
    ProcessOwnership,
    ProcessSetup,
    draw_process_mesh,
    local_rows,
    planned_batch_slices,
    process_batch_slice,
    process_ownership,
    setup_process,
)
from course_utils.placements import Block, Placement, placement, planned_placement, shard_of
from course_utils.train import Comparison, TrainingRun, compare_runs, compare_weights, run_training
from course_utils.viz import device_color, draw_batch_split, draw_mesh, draw_model, draw_placement

_WIDGETS = ("layout_explorer", "mesh_explorer", "model_explorer")


def __getattr__(name: str):
    """The explorers load ipywidgets only when first used: `from course_utils import mesh_explorer`."""
    if name in _WIDGETS:
        from course_utils import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")


__all__ = [
    "Block",
    "check",
    "check_layout_map",
    "communication_report",
    "CommunicationReport",
    "compare_runs",
    "compare_weights",
    "Comparison",
    "current_setup",
    "describe_mesh",
    "device_color",
    "DeviceSetup",
    "DeviceSetupError",
    "draw_batch_split",
    "draw_mesh",
    "draw_model",
    "draw_placement",
    "draw_process_mesh",
    "expect_error",
    "explain_layout",
    "LayoutMapError",
    "LayoutReport",
    "make_layout_map",
    "load_checkpoint",
    "local_rows",
    "make_mesh",
    "memory_report",
    "MemoryReport",
    "mesh_shapes",
    "Placement",
    "placement",
    "planned_batch_slices",
    "planned_placement",
    "Problem",
    "process_batch_slice",
    "process_ownership",
    "ProcessOwnership",
    "ProcessSetup",
    "run_training",
    "save_checkpoint",
    "setup_devices",
    "setup_process",
    "shard_of",
    "TrainingRun",
]
