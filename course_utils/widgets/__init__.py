"""Interactive explorers: change a mesh, a layout or a preset and watch the shards move.

Each explorer is an `ipywidgets.VBox` holding its controls, a status line and
a PNG drawing. Underneath are real Keras objects (`make_mesh`, `TensorLayout`,
`LayoutMap`, `ModelParallel`) and the course's pure data (`Placement`,
`LayoutReport`); the drawings come from `course_utils.viz`. Set a control's
`.value` in code and the explorer updates exactly as if clicked. Import this
module only where widgets are wanted: nothing else in the package imports it.
"""

from __future__ import annotations

from collections.abc import Sequence

from course_utils.mesh import make_mesh, mesh_shapes
from course_utils.widgets.base import AXIS_NAMES, device_count, squarest
from course_utils.widgets.layout import LayoutExplorer
from course_utils.widgets.mesh import MeshExplorer
from course_utils.widgets.model import ModelExplorer

__all__ = ["LayoutExplorer", "MeshExplorer", "ModelExplorer",
           "layout_explorer", "mesh_explorer", "model_explorer"]


def mesh_explorer(n_devices: int | None = None) -> MeshExplorer:
    """An explorer of the mesh shapes of `n_devices` (default: the course's devices).

    Example:
        >>> explorer = mesh_explorer()
        >>> explorer.shape.value = (4, 2)
        >>> explorer.mesh.devices[1, 0]
        'cpu:2'
    """
    return MeshExplorer(device_count() if n_devices is None else n_devices)


def layout_explorer(shape: Sequence[int] | None = None, mesh=None) -> LayoutExplorer:
    """An explorer of the layouts of one tensor on a mesh.

    Args:
        shape: The starting tensor shape (default `(16, 32)`); its rank is fixed.
        mesh: A `DeviceMesh` (default: the squarest 2-D mesh, axes "data", "model").

    Example:
        >>> explorer = layout_explorer((16, 32))
        >>> explorer.axes[0].value = None
        >>> explorer.placement.shard_shape
        (16, 8)
    """
    if mesh is None:
        mesh = make_mesh(squarest(mesh_shapes(device_count(), 2)), AXIS_NAMES[2])
    return LayoutExplorer(tuple(int(s) for s in (shape or (16, 32))), mesh)


def model_explorer(model, layout_map_or_rules=None) -> ModelExplorer:
    """An explorer of a model's placements and memory across meshes and presets.

    Args:
        model: A built Keras model (it is cloned; the original is not changed).
        layout_map_or_rules: Tensor-parallel rules: a dict key -> axes such as
            `course_utils.models.mlp_rules()`, or a `LayoutMap` whose keys and
            axes are re-bound to each chosen mesh. None: replicated only.

    Example:
        >>> explorer = model_explorer(mlp(), mlp_rules())
        >>> explorer.mesh_shape.value = (1, 8)
        >>> explorer.memory.max_total
    """
    rules, axis_names = {}, AXIS_NAMES[2]
    if isinstance(layout_map_or_rules, dict):
        rules = dict(layout_map_or_rules)
    elif layout_map_or_rules is not None:
        rules = {key: tuple(layout.axes) for key, layout in layout_map_or_rules.items()}
        axis_names = tuple(layout_map_or_rules.device_mesh.axis_names)
        if len(axis_names) != 2:
            raise ValueError(f"model_explorer re-binds a LayoutMap to 2-D meshes. Received a LayoutMap "
                             f"on a mesh with axis_names={axis_names}.")
    return ModelExplorer(model, rules, axis_names, device_count())
